#!/usr/bin/env bash
# service.sh: the transfer service measured with the real binary on
# examples/service.yaml: two sites with three data nodes each behind 300
# Mbit/s access links, a routed (500 Mbit/s) and a dedicated (1 Gbit/s)
# inter-site path, a controller, an agent in every node and a data node
# (lightpath serve --controller) on each of the six hosts, the data nodes of
# a site sharing one directory as a site's transfer nodes share a parallel
# file system.
#
#   bench/service.sh [--json] [--only aggregate|overhead]
#
# Scenarios (run as root; one controller and testbed for both):
#   aggregate  one job of SMALL_FILES mixed-size files (1 KiB to 256 KiB)
#              and LARGE_FILES files of LARGE_SIZE, submitted with a deadline
#              (lightpath transfer submit site-a:ds site-b:in-N --deadline
#              +DEADLINE), against the same dataset copied by one
#              `lightpath cp -r` from a1 to a plain server on b1, RUNS runs
#              each, alternating which goes first. Reported: the job's
#              aggregate (bytes × 8 over its ACTIVE span, from started_at to
#              ended_at) against the sum of what it could use (the rates its
#              reservations booked; target >= 0.9), and the speed-up of the
#              job (submission to SUCCEEDED) over the cp (target >= 0.8 × the
#              number of node pairs). Then the job's timeline, stage by
#              stage in seconds since the submission (median over the runs):
#              the job created, listed, booked (its reservations committed),
#              its first and last reservation ACTIVE, the job ACTIVE, the
#              first copy claimed (and the last pair's), the first byte
#              leaving a source node (and the last pair's first), the first
#              pair's and the last pair's last byte, the last task's report,
#              SUCCEEDED, and transfer wait returning; from the store (job,
#              tasks, reservation transitions) and the source nodes' access
#              links sampled every 20 ms.
#   overhead   one job of OVERHEAD_FILES files of 1 KiB without a deadline:
#              the time from submission to the first byte at the destination
#              (the job's bytes_done turning positive, polled every 50 ms),
#              the controller's CPU time (utime + stime from /proc) spent
#              while the job ran, per file, and the files per second.
#              OVERHEAD_RUNS runs.
#
# Environment: RUNS (5), SMALL_FILES (2000), LARGE_FILES (3), LARGE_SIZE
# (256M), DEADLINE (10m), OVERHEAD_FILES (10000), OVERHEAD_RUNS (3), ONLY,
# JSON=1 (same as --json), KEEP=1 (keep the work directory and its logs),
# CONTROLLER_ARGS (more flags for the controller, e.g. "--transfer-part-min 0"
# to move large files whole),
# LIGHTPATH (a lightpath binary to use instead of building one).
#
# Output: a table per scenario on stdout with the commands and targets; with
# --json one JSON object per row on stdout instead (the tables then go to
# stderr), the last line the summary. Exit 0 when the measurements
# completed (whatever the verdicts), 2 on the script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

RUNS=${RUNS:-5}
SMALL_FILES=${SMALL_FILES:-2000}
LARGE_FILES=${LARGE_FILES:-3}
LARGE_SIZE=${LARGE_SIZE:-256M}
DEADLINE=${DEADLINE:-10m}
OVERHEAD_FILES=${OVERHEAD_FILES:-10000}
OVERHEAD_RUNS=${OVERHEAD_RUNS:-3}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $(id -u) -eq 0 ]] || die "needs root: it builds a testbed (network namespaces, TUN devices, htb) and the agents write nftables rules; run it with sudo"
for v in RUNS SMALL_FILES LARGE_FILES OVERHEAD_FILES OVERHEAD_RUNS; do
	[[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a whole number, not '${!v}'"
done
((RUNS >= 1 && OVERHEAD_RUNS >= 1)) || die "RUNS and OVERHEAD_RUNS must be at least 1"
((RUNS >= 5)) || log "RUNS=$RUNS: fewer than 5 runs make the medians rough"
LARGE_BYTES=$(numfmt --from=iec "${LARGE_SIZE%B}" 2>/dev/null) || die "LARGE_SIZE must be like 256M, not '$LARGE_SIZE'"
case $ONLY in '' | aggregate | overhead) ;; *) die "ONLY must be aggregate or overhead, not '$ONLY'" ;; esac
wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin
command -v python3 >/dev/null || die "python3 is needed to parse results"

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lpservice.XXXXXX) || die "cannot create a work directory in /dev/shm"
chmod 755 "$W"
mkdir -p "$W/logs" "$W/site-a" "$W/site-b" "$W/plain"
APT_LOG=$W/logs/apt.log
TB=lpsvc$$
TB_UP=0
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	[[ $TB_UP == 1 ]] && { "$LP" testbed down --name "$TB" >/dev/null 2>&1 || true; }
	stop_servers
	if [[ $KEEP == 1 ]]; then log "kept $W"; else rm -rf -- "$W"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# verdict EXPR prints PASS when the awk expression EXPR holds, else FAIL.
verdict() { if awk "BEGIN { exit !($1) }"; then echo PASS; else echo FAIL; fi; }

LP=${LIGHTPATH:-$W/lightpath}
build_lightpath
ensure_commands ss=iproute2 curl=curl

# ---------------------------------------------------------------------------
# Set-up: controller, testbed with agents, six data nodes, a plain server.

HOSTS_A=(a1 a2 a3)
HOSTS_B=(b1 b2 b3)
declare -A NODE_PID=()
declare -A ADDR=([a1]=198.18.1.1 [a2]=198.18.1.2 [a3]=198.18.1.3 [b1]=198.18.2.1 [b2]=198.18.2.2 [b3]=198.18.2.3)

next_port
CPORT=$PORT
SOCK=$W/ctl.sock
log "controller on SQLite, topology examples/service.yaml"
start_server "$CPORT" "$W/logs/controller.log" "$LP" controller --listen "127.0.0.1:$CPORT" --listen "unix:$SOCK" \
	--db "sqlite:$W/ctl.db" --topology "$REPO/examples/service.yaml" --admin-token-file "$W/admin.token" \
	${CONTROLLER_ARGS:-} ||
	die "lightpath controller: $START_ERROR"
CPID=${SERVER_PIDS[-1]}
for ((i = 0; i < 100; i++)); do [[ -S $SOCK && -s $W/admin.token ]] && break; sleep 0.1; done
export LIGHTPATH_CONTROLLER=unix:$SOCK
LIGHTPATH_CONTROLLER_TOKEN=$(cat "$W/admin.token")
export LIGHTPATH_CONTROLLER_TOKEN
lp() { timeout 60 "$LP" "$@"; }
# Agents and data nodes each get a user of their own (role agent).
{
	lp user add agents --role agent && lp user token create agents --out "$W/agent.token"
	lp user add datanodes --role agent
	lp user add alice --role user && lp user token create alice --out "$W/alice.token"
} >"$W/logs/users.out" 2>&1 || die "users: $(last_line "$W/logs/users.out")"
# Which nodes serve an endpoint is the admin's decision; each data node
# gets a token bound to its node.
dn_tokens() {
	local h
	for h in "${HOSTS_A[@]}" "${HOSTS_B[@]}"; do
		lp user token create datanodes --node "$h" --out "$W/datanode-$h.token" || return 1
	done
}
{
	lp endpoint add site-a --site site-a --node "$(IFS=,; echo "${HOSTS_A[*]}")" &&
		lp endpoint add site-b --site site-b --node "$(IFS=,; echo "${HOSTS_B[*]}")" && dn_tokens
} >"$W/logs/endpoints.out" 2>&1 || die "endpoints: $(last_line "$W/logs/endpoints.out")"
TB_UP=1
lp testbed up "$REPO/examples/service.yaml" --name "$TB" --agents --controller "$LIGHTPATH_CONTROLLER" \
	--controller-token-file "$W/agent.token" >"$W/logs/up.out" 2>&1 || die "testbed up: $(last_line "$W/logs/up.out")"
for h in "${HOSTS_A[@]}" "${HOSTS_B[@]}"; do
	site=site-a root=$W/site-a
	[[ $h == b* ]] && site=site-b root=$W/site-b
	start_server_in "lp-$TB-$h" 7070 "$W/logs/serve-$h.log" "$LP" serve --listen "${ADDR[$h]}:7070" --root "$root" \
		--controller "unix:$SOCK" --controller-token-file "$W/datanode-$h.token" --node "$h" --endpoint "$site" \
		--transfer-log /dev/null || die "data node $h: $START_ERROR"
	NODE_PID[$h]=${SERVER_PIDS[-1]}
done
start_server_in "lp-$TB-b1" 7071 "$W/logs/serve-plain.log" "$LP" serve --listen "${ADDR[b1]}:7071" --root "$W/plain" \
	--transfer-log /dev/null || die "plain server on b1: $START_ERROR"
for ((i = 0; i < 200; i++)); do
	alive=$(lp endpoint list --json 2>/dev/null | python3 -c '
import json, sys
n = 0
for l in sys.stdin:
    for d in json.loads(l).get("nodes") or []:
        n += bool(d.get("alive"))
print(n)' || echo 0)
	[[ $alive == 6 ]] && break
	sleep 0.1
done
[[ $alive == 6 ]] || die "$alive of 6 data nodes alive after 20 s (see $W/logs/serve-*.log)"
lp endpoint allow site-a --user alice >/dev/null && lp endpoint allow site-b --user alice >/dev/null ||
	die "endpoint allow failed"
export LIGHTPATH_CONTROLLER_TOKEN=
LIGHTPATH_CONTROLLER_TOKEN=$(cat "$W/alice.token")

# make_dataset DIR SMALL LARGE LARGEBYTES writes the dataset (seeded, so
# every run of the script moves the same bytes).
make_dataset() {
	python3 - "$@" <<'PY'
import os, random, sys
d, small, large, lbytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rnd = random.Random(15)
os.makedirs(d, exist_ok=True)
block = os.urandom(1 << 20)
for i in range(small):
    sub = os.path.join(d, "small", "%02d" % (i % 50))
    os.makedirs(sub, exist_ok=True)
    n = rnd.randint(1 << 10, 256 << 10)
    with open(os.path.join(sub, "f%05d.dat" % i), "wb") as f:
        f.write(os.urandom(n))
for i in range(large):
    with open(os.path.join(d, "large%d.bin" % i), "wb") as f:
        left = lbytes
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
PY
}

# sampler OUT writes, every 20 ms until killed, the time and the bytes each
# source data node (a1 a2 a3) has sent on its access link, read from
# /proc/PID/net/dev of its server (which runs in the node's namespace).
sampler() {
	python3 - "$1" "${NODE_PID[a1]}" "${NODE_PID[a2]}" "${NODE_PID[a3]}" <<'PY' &
import os, sys, time
out, pids = open(sys.argv[1], "w"), sys.argv[2:]
parent, until = os.getppid(), time.time() + 1800
def tx(pid):
    n = 0
    for l in open("/proc/%s/net/dev" % pid).readlines()[2:]:
        name, rest = l.split(":", 1)
        if name.strip() != "lo":
            n += int(rest.split()[8])
    return n
while os.getppid() == parent and time.time() < until:
    out.write("%.4f %s\n" % (time.time(), " ".join(str(tx(p)) for p in pids)))
    out.flush()
    time.sleep(0.02)
PY
	SAMPLER_PID=$!
}

# timeline ID T0 T1 SAMPLES prints the job's timeline as one JSON object,
# each stage in seconds since T0 (just before the submission): from the
# controller's store (the job, its tasks, its reservations' transitions)
# and the sampled access links (first and last byte of each source node).
timeline() {
	python3 - "$W/ctl.db" "$@" <<'PY'
import json, sqlite3, sys
from datetime import datetime
db, jid, t0, t1, samples = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp() - t0 if s else None
con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
job = json.loads(con.execute("SELECT doc FROM jobs WHERE id = ?", (jid,)).fetchone()[0])
tasks = [json.loads(d) for (d,) in con.execute("SELECT doc FROM tasks WHERE job = ?", (jid,))]
rids = [p["reservation"] for p in job.get("pairs") or [] if p.get("reservation")]
tr = con.execute("SELECT reservation_id, to_state, event, at_ns FROM transitions WHERE reservation_id IN (%s)"
                 % ",".join("?" * len(rids)), rids).fetchall() if rids else []
def last(xs):
    xs = [x for x in xs if x is not None]
    return max(xs) if xs else None
def first(xs):
    xs = [x for x in xs if x is not None]
    return min(xs) if xs else None
at = lambda ns: ns / 1e9 - t0
copies = [t for t in tasks if t["kind"] == "copy"]
pairs = {}
for t in copies:
    pairs.setdefault(t["from"], []).append(t)
# First and last byte per source node: its access link's counter moving
# by more than 64 KiB over its value before the submission.
rows = [list(map(float, l.split())) for l in open(samples) if l.strip()]
fb, lb = {}, {}
for i, node in enumerate(["a1", "a2", "a3"]):
    if not rows:
        break
    base, top = rows[0][i + 1], rows[-1][i + 1]
    for r in rows:
        if r[i + 1] - base > 65536 and node not in fb:
            fb[node] = r[0] - t0
        if top - r[i + 1] <= 65536 and top - base > 65536:
            lb[node] = r[0] - t0
            break
out = {
    "job": jid,
    "created": ts(job["created_at"]),
    "listed": last(ts(t.get("ended_at")) for t in tasks if t["kind"] == "list"),
    "booked": last(at(ns) for _, st, ev, ns in tr if ev == "commit"),
    "reservations_active": last(at(ns) for _, st, ev, ns in tr if st == "ACTIVE" and ev != "modify" and ev != "cancel"),
    "first_reservation_active": first(at(ns) for _, st, ev, ns in tr if st == "ACTIVE" and ev != "modify" and ev != "cancel"),
    "job_active": ts(job.get("started_at")),
    "first_claim": first(ts(t.get("claimed_at")) for t in copies),
    "last_pair_first_claim": last(first(ts(t.get("claimed_at")) for t in ts_) for ts_ in pairs.values()),
    "first_byte": first(fb.values()),
    "last_pair_first_byte": last(fb.values()),
    "first_pair_last_byte": first(lb.values()),
    "last_byte": last(lb.values()),
    "last_task_ended": last(ts(t.get("ended_at")) for t in copies),
    "succeeded": ts(job.get("ended_at")),
    "wait_returned": t1 - t0,
    "tasks": len(copies),
}
print(json.dumps(out))
PY
}

# TIMELINE_STAGES are timeline's stages, in order, as the table shows them.
TIMELINE_STAGES=(created listed booked first_reservation_active job_active reservations_active first_claim
	last_pair_first_claim first_byte last_pair_first_byte first_pair_last_byte last_byte last_task_ended succeeded wait_returned)

# job_run SRC DST [ARGS...] submits a job as alice and waits for it; prints
# "wall_seconds bytes active_seconds booked_bps pairs state" and writes the
# job's timeline to $W/logs/timeline.json (see timeline).
job_run() {
	local src=$1 dst=$2 t0 t1 id
	shift 2
	sampler "$W/logs/samples"
	t0=$(date +%s.%N)
	id=$(lp transfer submit "$src" "$dst" "$@" --json 2>"$W/logs/submit.err" | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    j = o.get("job", o)
    if j.get("id", "").startswith("j-"):
        print(j["id"]); break') || true
	[[ -n $id ]] || die "transfer submit: $(last_line "$W/logs/submit.err")"
	timeout 900 "$LP" transfer wait "$id" --json >"$W/logs/wait-$id.ndjson" 2>&1 ||
		die "transfer wait $id: $(last_line "$W/logs/wait-$id.ndjson")"
	t1=$(date +%s.%N)
	kill "$SAMPLER_PID" 2>/dev/null || true
	wait "$SAMPLER_PID" 2>/dev/null || true
	lp transfer status "$id" --json >"$W/logs/status-$id.ndjson" 2>&1 || die "transfer status $id failed"
	timeline "$id" "$t0" "$t1" "$W/logs/samples" >"$W/logs/timeline.json" || die "timeline of $id failed"
	python3 - "$W/logs/status-$id.ndjson" "$t0" "$t1" <<'PY'
import json, sys
from datetime import datetime
job = None
for l in open(sys.argv[1]):
    o = json.loads(l)
    job = o.get("job", job) if "job" in o else (o if o.get("id", "").startswith("j-") else job)
def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
active = ts(job["ended_at"]) - ts(job["started_at"])
booked = sum(p.get("rate_bps") or 0 for p in job.get("pairs") or [])
print("%.3f %d %.3f %d %d %s" % (float(sys.argv[3]) - float(sys.argv[2]), job["bytes_done"], active, booked,
      len(job.get("pairs") or []), job["state"]))
PY
}

# cp_run SRC DST copies with one cp from a1 to the plain server on b1;
# prints "wall_seconds bytes".
cp_run() {
	local t0 t1
	t0=$(date +%s.%N)
	timeout 900 "$LP" testbed exec --name "$TB" a1 -- "$LP" cp -r --json "$1" "lp://${ADDR[b1]}:7071/$2" >"$W/logs/cp.ndjson" 2>"$W/logs/cp.err" ||
		die "cp: $(last_line "$W/logs/cp.err")"
	t1=$(date +%s.%N)
	python3 - "$W/logs/cp.ndjson" "$t0" "$t1" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print("%.3f %d" % (float(sys.argv[3]) - float(sys.argv[2]), s["bytes"]))
PY
}

stats() { # stats V... → "median min max"
	python3 -c '
import statistics, sys
v = sorted(float(x) for x in sys.argv[1:])
print("%.3f %.3f %.3f" % (statistics.median(v), v[0], v[-1]))' "$@"
}

SUMMARY=()

if wanted aggregate; then
	log "dataset: $SMALL_FILES files of 1-256 KiB and $LARGE_FILES of $LARGE_SIZE"
	make_dataset "$W/site-a/ds" "$SMALL_FILES" "$LARGE_FILES" "$LARGE_BYTES"
	total=$(dir_bytes "$W/site-a/ds")
	agg=() spd=() jwall=() cwall=()
	for ((r = 1; r <= RUNS; r++)); do
		order=(job cp)
		((r % 2 == 0)) && order=(cp job)
		for tool in "${order[@]}"; do
			if [[ $tool == job ]]; then
				rm -rf "$W/site-b/in-$r"
				read -r wall bytes active booked pairs state < <(job_run site-a:ds "site-b:in-$r" --deadline "+$DEADLINE")
				[[ $state == SUCCEEDED && $bytes == "$total" ]] || die "run $r: job $state with $bytes of $total bytes"
				diff -r -q "$W/site-a/ds" "$W/site-b/in-$r/ds" >/dev/null || die "run $r: the job's copy differs from the dataset"
				[[ $booked -gt 0 ]] || die "run $r: the deadline job booked nothing"
				a=$(awk -v b="$bytes" -v s="$active" -v k="$booked" 'BEGIN { printf "%.3f", b * 8 / s / k }')
				agg+=("$a") jwall+=("$wall")
				cp "$W/logs/timeline.json" "$W/logs/timeline-$r.json"
				mv "$W/logs/samples" "$W/logs/samples-$r"
				log "run $r: job $wall s ($active s ACTIVE), $pairs pairs booked $((booked / 1000000)) Mbit/s: aggregate $a of booked"
				rm -rf "$W/site-b/in-$r"
			else
				rm -rf "$W/plain/in-$r"
				read -r wall bytes < <(cp_run "$W/site-a/ds" "in-$r/")
				[[ $bytes == "$total" ]] || die "run $r: cp moved $bytes of $total bytes"
				cwall+=("$wall")
				log "run $r: one cp $wall s"
				rm -rf "$W/plain/in-$r"
			fi
		done
		spd+=("$(awk -v c="${cwall[-1]}" -v j="${jwall[-1]}" 'BEGIN { printf "%.3f", c / j }')")
	done
	read -r am amin amax < <(stats "${agg[@]}")
	read -r sm smin smax < <(stats "${spd[@]}")
	read -r jm _ _ < <(stats "${jwall[@]}")
	read -r cm _ _ < <(stats "${cwall[@]}")
	target=$(awk -v p="$pairs" 'BEGIN { printf "%.2f", 0.8 * p }')
	out ""
	out "Transfer service on examples/service.yaml: $(numfmt --to=iec "$total")B in $((SMALL_FILES + LARGE_FILES)) files, median of $RUNS (min-max)"
	out "  lightpath transfer submit site-a:ds site-b:in-N --deadline +$DEADLINE; lightpath transfer wait"
	out "  against: lightpath cp -r ds lp://b1:7071/in-N from a1 (one node pair)"
	out "$(printf '  %-34s %8s   %-15s %s' measure median spread verdict)"
	out "$(printf '  %-34s %8s   %-15s %s' "aggregate / booked ($pairs pairs)" "$am" "$amin-$amax" "$(verdict "$am >= 0.9") (target >= 0.9)")"
	out "$(printf '  %-34s %8s   %-15s %s' "speed-up over one cp" "$sm" "$smin-$smax" "$(verdict "$sm >= $target") (target >= $target = 0.8 x $pairs pairs)")"
	out "$(printf '  %-34s %8s' "job, submission to SUCCEEDED (s)" "$jm")"
	out "$(printf '  %-34s %8s' "one cp (s)" "$cm")"
	out ""
	out "Timeline of the job: seconds since the submission, median of $RUNS (min-max)"
	out "$(printf '  %-34s %8s   %s' stage median spread)"
	while read -r stage tm tmin tmax; do
		out "$(printf '  %-34s %8s   %s' "${stage//_/ }" "$tm" "$tmin-$tmax")"
		emit_json scenario=timeline "stage=$stage" "seconds:=$tm" "min:=$tmin" "max:=$tmax"
	done < <(python3 - "${TIMELINE_STAGES[@]}" <<PY
import json, statistics, sys
runs = [json.load(open("$W/logs/timeline-%d.json" % r)) for r in range(1, $RUNS + 1)]
for stage in sys.argv[1:]:
    v = sorted(x[stage] for x in runs if x.get(stage) is not None)
    if v:
        print("%s %.3f %.3f %.3f" % (stage, statistics.median(v), v[0], v[-1]))
PY
	)
	emit_json scenario=aggregate "aggregate_of_booked:=$am" "aggregate_min:=$amin" "aggregate_max:=$amax" \
		"speedup:=$sm" "speedup_min:=$smin" "speedup_max:=$smax" "pairs:=$pairs" "job_seconds:=$jm" "cp_seconds:=$cm" \
		"runs:=$RUNS" "bytes:=$total"
	SUMMARY+=("aggregate_of_booked:=$am" "speedup:=$sm")
	rm -rf "$W/site-a/ds"
fi

if wanted overhead; then
	log "dataset: $OVERHEAD_FILES files of 1 KiB"
	python3 - "$W/site-a/small" "$OVERHEAD_FILES" <<'PY'
import os, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, "%03d" % (i // 1000))
    os.makedirs(sub, exist_ok=True)
    with open(os.path.join(sub, "f%06d" % i), "wb") as f:
        f.write(os.urandom(1024))
PY
	fb=() cpu=() fps=()
	for ((r = 1; r <= OVERHEAD_RUNS; r++)); do
		rm -rf "$W/site-b/small-$r"
		c0=$(awk '{ print $14 + $15 }' "/proc/$CPID/stat")
		t0=$(date +%s.%N)
		id=$(lp transfer submit site-a:small "site-b:small-$r" --json 2>"$W/logs/submit.err" | python3 -c '
import json, sys
for l in sys.stdin:
    o = json.loads(l)
    j = o.get("job", o)
    if j.get("id", "").startswith("j-"):
        print(j["id"]); break') || true
		[[ -n $id ]] || die "transfer submit: $(last_line "$W/logs/submit.err")"
		first=
		for ((i = 0; i < 6000; i++)); do
			done_bytes=$(curl -s --unix-socket "$SOCK" -H "Authorization: Bearer $LIGHTPATH_CONTROLLER_TOKEN" \
				"http://lp/api/v1/jobs/$id?files=none" | python3 -c 'import json,sys; print(json.load(sys.stdin)["job"]["bytes_done"])' 2>/dev/null || echo 0)
			if [[ $done_bytes -gt 0 ]]; then first=$(date +%s.%N); break; fi
			sleep 0.05
		done
		[[ -n $first ]] || die "run $r: no byte arrived within 300 s"
		timeout 900 "$LP" transfer wait "$id" --json >"$W/logs/wait-$id.ndjson" 2>&1 ||
			die "transfer wait $id: $(last_line "$W/logs/wait-$id.ndjson")"
		t1=$(date +%s.%N)
		c1=$(awk '{ print $14 + $15 }' "/proc/$CPID/stat")
		tick=$(getconf CLK_TCK)
		fb+=("$(awk -v a="$t0" -v b="$first" 'BEGIN { printf "%.3f", b - a }')")
		cpu+=("$(awk -v c="$((c1 - c0))" -v t="$tick" -v n="$OVERHEAD_FILES" 'BEGIN { printf "%.3f", c / t / n * 1e3 }')")
		fps+=("$(awk -v a="$t0" -v b="$t1" -v n="$OVERHEAD_FILES" 'BEGIN { printf "%.0f", n / (b - a) }')")
		log "run $r: first byte after ${fb[-1]} s, controller CPU ${cpu[-1]} ms per file, ${fps[-1]} files/s"
		rm -rf "$W/site-b/small-$r"
	done
	read -r fm fmin fmax < <(stats "${fb[@]}")
	read -r cm cmin cmax < <(stats "${cpu[@]}")
	read -r pm pmin pmax < <(stats "${fps[@]}")
	out ""
	out "Overhead: $OVERHEAD_FILES files of 1 KiB, no deadline, median of $OVERHEAD_RUNS (min-max)"
	out "$(printf '  %-40s %8s   %s' measure median spread)"
	out "$(printf '  %-40s %8s   %s' "submission to first byte (s)" "$fm" "$fmin-$fmax")"
	out "$(printf '  %-40s %8s   %s' "controller CPU per file (ms)" "$cm" "$cmin-$cmax")"
	out "$(printf '  %-40s %8s   %s' "files per second, end to end" "$pm" "$pmin-$pmax")"
	emit_json scenario=overhead "first_byte_seconds:=$fm" "cpu_ms_per_file:=$cm" "files_per_second:=$pm" \
		"files:=$OVERHEAD_FILES" "runs:=$OVERHEAD_RUNS"
	SUMMARY+=("first_byte_seconds:=$fm" "cpu_ms_per_file:=$cm")
fi

emit_json type=summary "${SUMMARY[@]}"

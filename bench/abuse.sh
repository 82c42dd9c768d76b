#!/usr/bin/env bash
# abuse.sh: what an attacker with an ordinary account costs the controller
# (issue 28), as figures against input size, to show they are linear and
# bounded. The real binary on loopback: a controller on SQLite with the
# two-site topology, two endpoints A and B whose data nodes a1 and b1 are
# played by this script through the API (heartbeats and claims, so that
# nothing lists or moves the jobs it measures), the user alice allowed on
# both and the user mallory allowed on neither. Root is not needed.
#
#   bench/abuse.sh [--json] [--only submit|queued|listing|udpsyn|idleconns]
#
# Scenarios:
#   submit   one submission (POST /api/v1/jobs) of 1,000, 10,000 and
#            100,000 sources ("A:xxxx": 100,000 fit in a 1 MiB body) by
#            mallory (refused 403: permission comes first) and by alice
#            (1,000 and 10,000 accepted; 100,000 refused 413: at most
#            10,000 sources a job). Reported per row: the status, the wall
#            time to the answer and the controller's CPU time (utime +
#            stime from /proc/PID/stat) over the request.
#   queued   alice submits one job after another under the default policy
#            until she is refused (429 at max_jobs, 500 by default), then an
#            admin lifts the job limits and she goes on to QUEUED jobs in
#            all (3,000; none is ever listed: no one claims as a1 but the
#            script). Reported: the jobs accepted before the 429, the
#            submission latency (median and slowest of the last 100), the
#            idle controller's CPU in cores over IDLE_SECONDS with every job
#            waiting, and the latency of CLAIMS claims by b1 (another
#            endpoint's node: nothing for it) and by a1 (one listing each).
#   listing  alice's job of one source that a1 (played by the script)
#            "lists" as LISTING_FILES (1,400,000: as many as fit in the
#            64 MiB body older builds took) files, in pages of 10,000
#            where the controller takes pages (its OpenAPI document says so),
#            else in one body (the builds before issue 28's finding 7); then
#            three reads of the job's page and its cancel, until its
#            files are all CANCELLED (phase "ended"). Meanwhile b1
#            heartbeats every 0.1 s on a connection of its own: the longest
#            heartbeat in each phase is what the service's lock made others
#            wait. Reported per phase: its wall time, the controller's CPU,
#            its resident memory after and at its peak so far (VmRSS,
#            VmHWM), the bytes answered (for "ended": the polls), and the
#            longest heartbeat.
#   udpsyn   a mover server (serve, no token) under SYNS (20,000) signed UDP
#            SYNs with distinct stream ids from one session that asked for
#            one stream: its descriptors and memory before and at their
#            peak (bench/abuse/udpsyn).
#   idleconns  a controller while one address holds CONNS (1,000) idle
#            connections: the share of another address's requests answered
#            (bench/abuse/idleconns).
#
# Environment: QUEUED (3000), IDLE_SECONDS (10), CLAIMS (20),
# LISTING_FILES (1400000), SYNS (20000), CONNS (1000), ONLY, JSON=1
# (same as --json), KEEP=1 (keep the work directory and its logs), LIGHTPATH
# (a lightpath binary to use instead of building one: the figures before a
# fix, from an older build).
#
# Output: a table on stdout; with --json one JSON object per row on stdout
# instead (the table then goes to stderr). Exit 0 when the measurements
# completed, 2 on the script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

QUEUED=${QUEUED:-3000}
IDLE_SECONDS=${IDLE_SECONDS:-10}
CLAIMS=${CLAIMS:-20}
LISTING_FILES=${LISTING_FILES:-1400000}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

SYNS=${SYNS:-20000}
CONNS=${CONNS:-1000}
for v in QUEUED IDLE_SECONDS CLAIMS LISTING_FILES SYNS CONNS; do
	[[ ${!v} =~ ^[0-9]+$ ]] && ((${!v} >= 1)) || die "$v must be a whole number of at least 1, not '${!v}'"
done
case $ONLY in '' | submit | queued | listing | udpsyn | idleconns) ;; *) die "ONLY must be submit, queued, listing, udpsyn or idleconns, not '$ONLY'" ;; esac
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin
command -v python3 >/dev/null || die "python3 is needed to drive the API and parse results"
command -v ss >/dev/null || die "ss (iproute2) is needed to wait for the controller"

W=$(mktemp -d "${TMPDIR:-/tmp}/lpabuse.XXXXXX") || die "cannot create a work directory"
mkdir -p "$W/logs"
APT_LOG=$W/logs/apt.log
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	if [[ $KEEP == 1 ]]; then log "kept $W"; else rm -rf -- "$W"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

LP=${LIGHTPATH:-$W/lightpath}
build_lightpath

# ---------------------------------------------------------------------------
# Set-up: the controller, its users, the endpoints A and B.

next_port
CPORT=$PORT
log "controller on SQLite, topology examples/two-site.yaml, port $CPORT"
start_server "$CPORT" "$W/logs/controller.log" "$LP" controller --listen "127.0.0.1:$CPORT" \
	--db "sqlite:$W/ctl.db" --topology "$REPO/examples/two-site.yaml" --admin-token-file "$W/admin.token" ||
	die "lightpath controller: $START_ERROR"
CPID=${SERVER_PIDS[-1]}
for ((i = 0; i < 100; i++)); do [[ -s $W/admin.token ]] && break; sleep 0.1; done
export LIGHTPATH_CONTROLLER=http://127.0.0.1:$CPORT
LIGHTPATH_CONTROLLER_TOKEN=$(cat "$W/admin.token")
export LIGHTPATH_CONTROLLER_TOKEN
lp() { timeout 60 "$LP" "$@"; }
{
	lp user add alice --role user && lp user token create alice --out "$W/alice.token"
	lp user add mallory --role user && lp user token create mallory --out "$W/mallory.token"
} >"$W/logs/users.out" 2>&1 || die "users: $(last_line "$W/logs/users.out")"

# The measurements, in Python for its HTTP client (one kept-alive
# connection: the figures are the controller's, not a client's start-up).
# Each row goes to stdout as JSON.
cat >"$W/measure.py" <<'PY'
import http.client, json, statistics, sys, time, os

port, cpid, wdir, only = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
queued, idle, claims, nlisted = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]), int(sys.argv[8])
tok = {u: open(os.path.join(wdir, u + ".token")).read().strip() for u in ("admin", "alice", "mallory")}
hz = os.sysconf("SC_CLK_TCK")
conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)

def cpu():
    with open("/proc/%d/stat" % cpid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / hz  # utime, stime

def call(method, path, who, body=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    h = {"Authorization": "Bearer " + tok[who]}
    if data is not None:
        h["Content-Type"] = "application/json"
    global conn
    t0 = time.monotonic()
    try:
        conn.request(method, path, body=data, headers=h)
        r = conn.getresponse()
        raw = r.read()
    except (http.client.HTTPException, OSError) as e:
        # The controller gave up on the request (its write timeout): a
        # row says so, and the next request has a new connection.
        conn.close()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        return 0, ("no answer: %s" % type(e).__name__).encode(), time.monotonic() - t0
    return r.status, raw, time.monotonic() - t0

def row(**kw):
    print(json.dumps(kw), flush=True)

def must(st, raw, what):
    if st >= 300:
        sys.exit("bench: %s: %d %s" % (what, st, raw[:300]))

def beat():
    for node, ep in (("a1", "A"), ("b1", "B")):
        st, raw, _ = call("POST", "/api/v1/datanodes/%s/heartbeat" % node, "admin",
                          {"endpoint": ep, "address": "127.0.0.1:7000", "lease": "5m"})
        must(st, raw, "heartbeat " + node)

beat()
for ep in ("A", "B"):
    st, raw, _ = call("POST", "/api/v1/endpoints/%s/allow" % ep, "admin", {"users": ["alice"]})
    must(st, raw, "allow " + ep)

def b36(i):
    s = ""
    while True:
        i, r = divmod(i, 36)
        s = "0123456789abcdefghijklmnopqrstuvwxyz"[r] + s
        if i == 0:
            return s

if only in ("", "submit"):
    for who in ("mallory", "alice"):
        for n in (1000, 10000, 100000):
            body = json.dumps({"sources": ["A:" + b36(i) for i in range(n)], "destination": "B:in-%s-%d" % (who, n)}).encode()
            c0 = cpu()
            st, raw, secs = call("POST", "/api/v1/jobs", who, body)
            c1 = cpu()
            why = ""
            if st == 0:
                why = raw.decode()
            elif st >= 300:
                try:
                    why = json.loads(raw)["error"]["message"]
                except Exception:
                    why = raw[:100].decode(errors="replace")
            row(scenario="submit", user=who, sources=n, body_bytes=len(body), status=st,
                answer_s=round(secs, 3), cpu_s=round(c1 - c0, 2), why=why[:80])

if only in ("", "queued"):
    lat, refused_at, n, i = [], None, 0, 0
    def submit():
        global i
        i += 1
        return call("POST", "/api/v1/jobs", "alice", {"sources": ["A:data"], "destination": "B:q/%d" % i})
    # Under the default policy, until refused.
    while n < queued:
        st, raw, secs = submit()
        if st == 429:
            refused_at = n
            break
        must(st, raw, "job %d" % i)
        n += 1
        lat.append(secs)
        if n % 500 == 0:
            beat()
            print("queued %d" % n, file=sys.stderr, flush=True)
    st, raw, _ = call("GET", "/api/v1/jobs?state=QUEUED", "alice")
    unfinished_before = len(json.loads(raw)["jobs"])
    st, raw, _ = call("PUT", "/api/v1/policy", "admin", {"default": {"max_jobs": 2147483647, "max_project_jobs": 2147483647}})
    must(st, raw, "lift the job limits")
    st, raw, _ = call("GET", "/api/v1/jobs?state=QUEUED", "alice")
    have = len(json.loads(raw)["jobs"])
    while have < queued:
        st, raw, secs = submit()
        must(st, raw, "job %d" % i)
        have += 1
        lat.append(secs)
        if have % 500 == 0:
            beat()
            print("queued %d" % have, file=sys.stderr, flush=True)
    last = lat[-100:]
    row(scenario="queued", measure="alice's unfinished jobs under the default policy",
        value=unfinished_before,
        note="the next refused 429" if refused_at is not None else "no 429 before %d" % queued)
    row(scenario="queued", measure="submission latency, last 100 (median / max)",
        value="%.3f / %.3f s" % (statistics.median(last), max(last)), note="%d QUEUED" % have)
    beat()
    c0, t0 = cpu(), time.monotonic()
    time.sleep(idle)
    c1, t1 = cpu(), time.monotonic()
    row(scenario="queued", measure="idle controller CPU", value="%.3f cores" % ((c1 - c0) / (t1 - t0)),
        note="over %d s, %d QUEUED" % (idle, have))
    for node, what in (("b1", "another endpoint's node"), ("a1", "one listing each")):
        ls, got = [], 0
        for _ in range(claims):
            st, raw, secs = call("POST", "/api/v1/datanodes/%s/claim" % node, "admin", {"max": 1})
            must(st, raw, "claim " + node)
            got += len(json.loads(raw)["tasks"])
            ls.append(secs)
        row(scenario="queued", measure="claim by %s (median / max)" % node,
            value="%.3f / %.3f s" % (statistics.median(ls), max(ls)), note="%s: %d tasks in %d claims" % (what, got, claims))

def mem():
    kv = {}
    with open("/proc/%d/status" % cpid) as f:
        for l in f:
            k, _, v = l.partition(":")
            if k in ("VmRSS", "VmHWM"):
                kv[k] = int(v.split()[0]) // 1024
    return kv

if only in ("", "listing"):
    import threading
    st, raw, _ = call("GET", "/api/v1/openapi.json", "admin")
    must(st, raw, "openapi")
    paged = "more" in json.loads(raw)["components"]["schemas"].get("Listing", {}).get("properties", {})
    beat()
    st, raw, _ = call("POST", "/api/v1/jobs", "alice", {"sources": ["A:big"], "destination": "B:big-in"})
    must(st, raw, "submit the big job")
    job = json.loads(raw)["job"]["id"]
    task = None
    for _ in range(queued // 16 + 50):  # the queued scenario's listings come first (16 a claim at most)
        st, raw, _ = call("POST", "/api/v1/datanodes/a1/claim", "admin", {"max": 16})
        must(st, raw, "claim a1")
        ts = [t for t in json.loads(raw)["tasks"] if t["task"]["job"] == job]
        if ts:
            task = ts[0]["task"]
            break
    if task is None:
        sys.exit("bench: a1 was never handed the big job's listing")
    phase, beats, stop = ["idle"], [], threading.Event()
    def heartbeats():
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
        body = json.dumps({"endpoint": "B", "address": "127.0.0.1:7000", "lease": "5m"}).encode()
        h = {"Authorization": "Bearer " + tok["admin"], "Content-Type": "application/json"}
        while not stop.is_set():
            p, t0 = phase[0], time.monotonic()
            c.request("POST", "/api/v1/datanodes/b1/heartbeat", body=body, headers=h)
            c.getresponse().read()
            beats.append((p, time.monotonic() - t0))
            stop.wait(0.1)
    hb = threading.Thread(target=heartbeats, daemon=True)
    hb.start()
    def measure(name, fn):
        phase[0] = name
        c0, t0 = cpu(), time.monotonic()
        nbytes, status = fn()
        secs, c1 = time.monotonic() - t0, cpu()
        phase[0] = "between"
        time.sleep(0.3)  # a heartbeat or two after the phase ends
        longest = max([d for p, d in beats if p == name] or [0])
        m = mem()
        row(scenario="listing", phase=name, status=status, wall_s=round(secs, 2), cpu_s=round(c1 - c0, 2),
            rss_mb=m["VmRSS"], peak_rss_mb=m["VmHWM"], answer_bytes=nbytes,
            longest_heartbeat_s=round(longest, 3), files=nlisted, paged=paged)
    m = mem()
    row(scenario="listing", phase="before", status=0, wall_s=0, cpu_s=0, rss_mb=m["VmRSS"], peak_rss_mb=m["VmHWM"],
        answer_bytes=0, longest_heartbeat_s=round(max([d for _, d in beats] or [0]), 3), files=nlisted, paged=paged)
    files = ({"path": "big/" + b36(i), "source": "big", "size": 1000 + i % 4096} for i in range(nlisted))
    def listing():
        path = "/api/v1/tasks/%s/listing" % task["id"]
        if not paged:
            body = json.dumps({"attempt": task["attempt"], "files": list(files)}, separators=(",", ":")).encode()
            st, raw, _ = call("POST", path, "admin", body)
            return len(raw), st
        page, n, st, got = 0, 0, 0, 0
        while n < nlisted:
            chunk = [next(files) for _ in range(min(10000, nlisted - n))]
            n += len(chunk)
            body = json.dumps({"attempt": task["attempt"], "page": page, "more": n < nlisted, "files": chunk}, separators=(",", ":")).encode()
            st, raw, _ = call("POST", path, "admin", body)
            got += len(raw)
            if st >= 300:
                break
            page += 1
        return got, st
    measure("list", listing)
    def read():
        got, st = 0, 0
        for _ in range(3):
            st, raw, _ = call("GET", "/api/v1/jobs/" + job, "alice")
            got += len(raw)
        return got, st
    measure("read x3", read)
    def cancel():
        st, raw, _ = call("POST", "/api/v1/jobs/%s/cancel" % job, "alice", {})
        return len(raw), st
    measure("cancel", cancel)
    def cancelled():
        # Newer builds end a cancelled job's files in steps after the
        # answer: until every file is CANCELLED (older builds: at once).
        deadline, polls = time.monotonic() + 1800, 0
        while time.monotonic() < deadline:
            st, raw, _ = call("GET", "/api/v1/jobs/%s?limit=1" % job, "alice")
            polls += 1
            page = json.loads(raw) if st == 200 else {}
            counts = page.get("file_counts")
            if counts is None:  # older builds: every file in the page
                counts = {}
                for f in page.get("files", []):
                    counts[f["state"]] = counts.get(f["state"], 0) + 1
            if counts.get("CANCELLED", 0) >= nlisted:
                return polls, st
            time.sleep(0.5)
        return polls, 0
    measure("ended", cancelled)
    stop.set()
    hb.join()
PY

: >"$W/rows.json"
if [[ -z $ONLY || $ONLY == submit || $ONLY == queued || $ONLY == listing ]]; then
	log "measuring (${ONLY:-submit, queued, listing}); QUEUED=$QUEUED LISTING_FILES=$LISTING_FILES"
	python3 "$W/measure.py" "$CPORT" "$CPID" "$W" "$ONLY" "$QUEUED" "$IDLE_SECONDS" "$CLAIMS" "$LISTING_FILES" \
		>"$W/rows.json" 2>"$W/logs/measure.err" || die "measure: $(last_line "$W/logs/measure.err")"
fi
# The mover's UDP listener and the controller's connections: Go programs
# of their own (they craft what no client sends), one key=value line each.
for prog in udpsyn idleconns; do
	[[ -z $ONLY || $ONLY == "$prog" ]] || continue
	log "measuring $prog"
	case $prog in
	udpsyn) args=(-syns "$SYNS") ;;
	idleconns) args=(-conns "$CONNS" -topology "$REPO/examples/two-site.yaml") ;;
	esac
	(cd "$REPO" && go run "./bench/abuse/$prog" -lightpath "$LP" "${args[@]}") >"$W/$prog.out" 2>"$W/logs/$prog.err" ||
		die "$prog: $(last_line "$W/logs/$prog.err")"
	python3 - "$prog" "$W/$prog.out" >>"$W/rows.json" <<'PY'
import json, sys
for line in open(sys.argv[2]):
    kv = dict(f.split("=", 1) for f in line.split() if "=" in f)
    if kv:
        print(json.dumps({"scenario": sys.argv[1], **kv}))
PY
done

# ---------------------------------------------------------------------------
# The table.

out "lightpath $("$LP" version 2>/dev/null | head -n 1 || echo '?'); $(nproc) CPUs; controller on SQLite in $W"
python3 - "$W/rows.json" <<'PY' | while IFS= read -r l; do out "$l"; done
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
sub = [r for r in rows if r["scenario"] == "submit"]
if sub:
    print()
    print("submit: one POST /api/v1/jobs (mallory may use no endpoint; alice both)")
    print("%-8s %8s %10s %6s %9s %8s  %s" % ("USER", "SOURCES", "BODY", "STATUS", "ANSWER", "CPU", "WHY"))
    for r in sub:
        print("%-8s %8d %10d %6d %8.3fs %7.2fs  %s" % (r["user"], r["sources"], r["body_bytes"], r["status"],
              r["answer_s"], r["cpu_s"], r["why"]))
q = [r for r in rows if r["scenario"] == "queued"]
if q:
    print()
    print("queued: alice's jobs waiting for their listing")
    print("%-50s %-20s %s" % ("MEASURE", "VALUE", "NOTE"))
    for r in q:
        print("%-50s %-20s %s" % (r["measure"], r["value"], r["note"]))
ls = [r for r in rows if r["scenario"] == "listing"]
if ls:
    print()
    print("listing: %d files listed by a1 (%s), the job read 3 times, then cancelled; b1 heartbeats every 0.1 s" %
          (ls[0]["files"], "in pages of 10,000" if ls[0]["paged"] else "in one body"))
    print("%-8s %6s %8s %8s %8s %9s %12s %10s" % ("PHASE", "STATUS", "WALL", "CPU", "RSS_MB", "PEAK_MB", "ANSWER_B", "LONGEST_HB"))
    for r in ls:
        print("%-8s %6d %7.2fs %7.2fs %8d %9d %12d %9.3fs" % (r["phase"], r["status"], r["wall_s"], r["cpu_s"], r["rss_mb"],
              r["peak_rss_mb"], r["answer_bytes"], r["longest_heartbeat_s"]))
for name, what in (("udpsyn", "a mover server under signed UDP SYNs of distinct streams"),
                   ("idleconns", "a controller while one address holds idle connections")):
    for r in (r for r in rows if r["scenario"] == name):
        print()
        print("%s: %s" % (name, what))
        for k, v in r.items():
            if k != "scenario":
                print("  %-28s %s" % (k, v))
PY
if [[ $JSON == 1 ]]; then cat "$W/rows.json"; fi

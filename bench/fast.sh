#!/usr/bin/env bash
# fast.sh: FAST TCP (lightpath cc install fast) against the kernel's reno,
# cubic and bbr, on testbed paths, with iperf3.
#
#   bench/fast.sh [--json] [--only matrix|fairness]
#
# Every path is h1 -lan- r -wan- h2: the bottleneck, wan, leaves the router
# r, so its queue is the path's (on the sender's own host, TCP small queues
# would keep each socket's backlog in it to about a millisecond of its rate,
# whatever the congestion control). lan is 10 Gbit/s with no delay.
#
# Scenarios (run as root; each builds its own testbed and removes it):
#   matrix    one iperf3 stream h1 -> h2 (iperf3 -C CC -J) for DURATION s,
#             for each CC in CCS (reno cubic bbr fast), over wan at RATE
#             (1G) with round trips RTTS (20 50 100 ms) and random loss
#             LOSSES (0 0.01% 0.1%), the queue QUEUE_BDP (1) bandwidth-delay
#             products: throughput, mean queueing delay (wan's backlog on r,
#             read with tc every 100 ms, divided by the rate, from SETTLE s
#             on) and retransmits. The median of RUNS runs with the min and
#             max; the CCs alternate within each run, in an order that
#             rotates from run to run. One table per round trip, with the
#             host's CPU use during the runs (all cores: the bench's own
#             emulator and iperf3 and whatever else runs on the host), and
#             each CC's median Mbit/s over Reno's at the same loss (x reno).
#   fairness  two flows of one CC on the same bottleneck (wan at RATE,
#             FAIR_RTT (50) ms, no loss), the second started FAIR_LATE (10) s
#             after the first, both ending together FAIR_BOTH (20) s later:
#             each flow's Mbit/s and share while both run, and Jain's
#             fairness index (x1 + x2)^2 / (2 (x1^2 + x2^2)) over that time
#             and over its last half. FAST is known to favour the latecomer:
#             it takes the first flow's queue for part of its base RTT. For
#             each CC in FAIR_CCS ("fast fast:1000 cubic"; fast:N is fast
#             with alpha N, set for those runs with cc install --alpha and
#             put back after them), RUNS runs.
#
# fast is installed (lightpath cc install fast, its defaults: alpha 100
# packets, gamma 0.5) if it is not, and removed again at the end if this
# run installed it. Each run with fast holds the lock the Go tests take
# (internal/cc/cctest), so that a test removing or reinstalling fast meanwhile
# waits, and each run checks that iperf3 reports the congestion control
# asked for.
#
# Environment: RUNS (5), DURATION (10), SETTLE (3), RATE (1G), RTTS
# ("20 50 100"), LOSSES ("0 0.01% 0.1%"), CCS ("reno cubic bbr fast"),
# QUEUE_BDP (1), FAIR_RTT (50), FAIR_LATE (10), FAIR_BOTH (20), FAIR_CCS
# ("fast fast:1000 cubic"), ONLY, JSON=1 (same as --json), KEEP=1 (keep the work
# directory: iperf3's JSON and the backlog samples of every run), LIGHTPATH
# (a lightpath binary to use instead of building one).
#
# Output: a table per round trip and one for fairness on stdout, and how
# long the whole took; with --json one JSON object per row on stdout instead
# (the tables then go to stderr). Exit 0 when the measurements completed, 2
# on the script's own errors (not root, a run that failed, ...).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
DURATION=${DURATION%s}
SETTLE=${SETTLE:-3}
SETTLE=${SETTLE%s}
RATE=${RATE:-1G}
RTTS=${RTTS:-20 50 100}
LOSSES=${LOSSES:-0 0.01% 0.1%}
CCS=${CCS:-reno cubic bbr fast}
QUEUE_BDP=${QUEUE_BDP:-1}
FAIR_RTT=${FAIR_RTT:-50}
FAIR_LATE=${FAIR_LATE:-10}
FAIR_BOTH=${FAIR_BOTH:-20}
FAIR_CCS=${FAIR_CCS:-fast fast:1000 cubic}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $(id -u) -eq 0 ]] || die "needs root: it builds testbeds (network namespaces, TUN devices, htb) and installs a BPF congestion control"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
((RUNS >= 5)) || log "RUNS=$RUNS: fewer than 5 runs make the medians rough"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $SETTLE =~ ^[0-9]+$ ]] && ((SETTLE < DURATION)) || die "SETTLE must be whole seconds below DURATION, not '$SETTLE'"
[[ $QUEUE_BDP =~ ^[0-9]+([.][0-9]+)?$ ]] || die "QUEUE_BDP must be a number, not '$QUEUE_BDP'"
for v in FAIR_RTT FAIR_LATE FAIR_BOTH; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
for v in $RTTS; do [[ $v =~ ^[1-9][0-9]*$ ]] || die "RTTS must be round trips in whole ms, not '$v'"; done
for v in $FAIR_CCS; do [[ $v =~ ^[a-z0-9_-]+$ || $v =~ ^fast:[1-9][0-9]*$ ]] || die "FAIR_CCS takes names and fast:ALPHA, not '$v'"; done
for v in $LOSSES; do [[ $v =~ ^[0-9.]+%?$ ]] || die "LOSSES must be like 0 or 0.01%, not '$v'"; done
RATE_BPS=$(numfmt --from=si "${RATE%[bB]ps}" 2>/dev/null) || die "RATE must be like 1G or 500M, not '$RATE'"
case $ONLY in '' | matrix | fairness) ;; *) die "ONLY must be matrix or fairness, not '$ONLY'" ;; esac
wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lpfast.XXXXXX) || die "cannot create a work directory in /dev/shm"
chmod 755 "$W"
mkdir -p "$W/logs" "$W/topo" "$W/runs"
APT_LOG=$W/logs/apt.log

# The lock internal/cc/cctest's Hold takes around a test that installs or
# removes a congestion control.
CC_LOCK=/run/lock/lightpath-cc-test.lock

# Testbeds made by this run and whether this run installed fast, undone at
# the end whatever happens.
TESTBEDS=()
INSTALLED_FAST=0
SAMPLER=
CC_FD=
FAST_ALTERED=0
cleanup() {
	local rc=$? tb
	trap - EXIT INT TERM
	if [[ $FAST_ALTERED == 1 ]]; then fast_alpha "$FAST_ALPHA" || log "could not put fast's alpha back to $FAST_ALPHA"; fi
	if [[ -n $CC_FD ]]; then cc_unlock; fi
	if [[ -n $SAMPLER ]]; then kill "$SAMPLER" 2>/dev/null || true; fi
	stop_servers
	for tb in "${TESTBEDS[@]}"; do "$LP" testbed down --name "$tb" >/dev/null 2>&1 || true; done
	if [[ $INSTALLED_FAST == 1 ]]; then
		flock -w 300 "$CC_LOCK" "$LP" cc remove fast >"$W/logs/cc-remove.out" 2>&1 ||
			log "cc remove fast failed: $(last_line "$W/logs/cc-remove.out")"
	fi
	if [[ $KEEP == 1 ]]; then log "kept $W"; else rm -rf -- "$W"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM


# ---------------------------------------------------------------------------
# Tools

install_peers() {
	command -v python3 >/dev/null || die "python3 is needed to parse results"
	ensure_commands iperf3=iperf3 tc=iproute2 ss=iproute2 flock=util-linux
	[[ -z ${UNAVAILABLE[iperf3]:-} ]] || die "iperf3 is needed: ${UNAVAILABLE[iperf3]}"
	[[ -z ${UNAVAILABLE[tc]:-} ]] || die "tc is needed to read the bottleneck's queue: ${UNAVAILABLE[tc]}"
	[[ -z ${UNAVAILABLE[flock]:-} ]] || die "flock is needed: ${UNAVAILABLE[flock]}"
}

LP=${LIGHTPATH:-$W/lightpath}
# fast_params prints fast's parameters as cc list --json (one object a
# line) shows them, or nothing when lightpath has not installed it.
fast_params() {
	"$LP" cc list --json | python3 -c '
import json, sys
for line in sys.stdin:
    c = json.loads(line)
    if c.get("name") == "fast" and c.get("params"):
        p = c["params"]
        print("alpha=%s gamma=%s" % (p["alpha"], p["gamma"]))
'
}

ensure_fast() {
	local needed=0 c
	for c in $CCS $FAIR_CCS; do [[ ${c%%:*} != fast ]] || needed=1; done
	((needed)) || return 0
	if ! grep -qw fast /proc/sys/net/ipv4/tcp_available_congestion_control; then
		log "installing fast (lightpath cc install fast); removed again at the end"
		flock -w 300 "$CC_LOCK" "$LP" cc install fast >"$W/logs/cc-install.out" 2>&1 ||
			die "cc install fast: $(last_line "$W/logs/cc-install.out")"
		INSTALLED_FAST=1
	fi
	FAST_PARAMS=$(fast_params)
	[[ -n $FAST_PARAMS ]] || die "fast is registered but not by lightpath (cc list shows no parameters)"
	read -r FAST_ALPHA FAST_GAMMA <<<"$(sed 's/alpha=//; s/gamma=//' <<<"$FAST_PARAMS")"
	log "fast: $FAST_PARAMS"
}

# fast_alpha N sets fast's alpha (its gamma as found) in place; the caller
# holds the congestion-control lock.
fast_alpha() {
	"$LP" cc install fast --alpha "$1" --gamma "$FAST_GAMMA" >"$W/logs/cc-alpha.out" 2>&1 || {
		log "cc install fast --alpha $1: $(last_line "$W/logs/cc-alpha.out")"
		return 1
	}
}

# path_topology FILE RTT_MS writes h1 -lan- r -wan- h2 with wan at RATE,
# RTT_MS round trip and a queue of QUEUE_BDP bandwidth-delay products.
path_topology() {
	local queue
	queue=$(awk -v r="$RATE_BPS" -v t="$2" -v k="$QUEUE_BDP" 'BEGIN { printf "%.0f", k * r / 8 * t / 1000 }')
	cat >"$1" <<-EOF
		sites:
		  - name: s
		nodes:
		  - {name: h1, site: s}
		  - {name: r, site: s, role: router}
		  - {name: h2, site: s}
		links:
		  - {name: lan, ends: [h1, r]}
		  - {name: wan, ends: [r, h2], rate: $RATE, delay: $(awk -v t="$2" 'BEGIN { print t / 2 }')ms, queue: ${queue}B}
	EOF
	QUEUE_BYTES=$queue
}

# up NAME RTT_MS brings the path up with iperf3 servers on h2 (5201, 5202),
# and finds wan's egress device on r.
up() {
	local tb=$1
	path_topology "$W/topo/$tb.yaml" "$2"
	testbed_up "$tb" "$W/topo/$tb.yaml"
	read -r WAN_DEV H2 < <("$LP" testbed status --name "$tb" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
dev = [d["device"] for l in s["links"] for d in l["directions"] if l["name"] == "wan" and d["from"] == "r"]
h2 = [n["ipv4"] for n in s["nodes"] if n["name"] == "h2"]
print(dev[0] if dev else "-", h2[0] if h2 else "-")
')
	[[ -n $WAN_DEV && $WAN_DEV != - && $H2 != - ]] || die "testbed status names no device for wan r>h2 or no address for h2"
	start_server_in "$(ns "$tb" h2)" 5201 "$W/logs/iperf3-$tb-5201.out" iperf3 -s -B "$H2" -p 5201 || die "iperf3 server: $START_ERROR"
	start_server_in "$(ns "$tb" h2)" 5202 "$W/logs/iperf3-$tb-5202.out" iperf3 -s -B "$H2" -p 5202 || die "iperf3 server: $START_ERROR"
}

down() {
	stop_servers
	testbed_down "$1"
}

# sample_backlog TB FILE appends "seconds-since-epoch tc-json" to FILE every
# 100 ms: the qdiscs of wan's egress on r, with their backlog in bytes.
sample_backlog() {
	local nsname
	nsname=$(ns "$1" r)
	while :; do
		printf '%s ' "$EPOCHREALTIME"
		tc -n "$nsname" -s -j qdisc show dev "$WAN_DEV" || echo '[]'
		sleep 0.1
	done >>"$2"
}

start_sampler() {
	: >"$2"
	sample_backlog "$1" "$2" &
	SAMPLER=$!
}

stop_sampler() {
	kill "$SAMPLER" 2>/dev/null || true
	wait "$SAMPLER" 2>/dev/null || true
	SAMPLER=
}

# cc_lock CC takes the congestion-control lock when CC is fast (so that no
# test removes or reinstalls it meanwhile), waiting up to 10 minutes;
# cc_unlock lets it go.
cc_lock() {
	[[ $1 == fast ]] || return 0
	exec {CC_FD}>>"$CC_LOCK"
	flock -w 600 "$CC_FD" || die "waited 10 minutes for $CC_LOCK (a test holding fast?)"
}
cc_unlock() {
	[[ -n $CC_FD ]] || return 0
	flock -u "$CC_FD"
	exec {CC_FD}>&-
	CC_FD=
}

# iperf TB CC PORT SECONDS OUT runs one iperf3 stream h1 -> h2.
iperf() {
	timed "$5" $(($4 + 60)) ip netns exec "$(ns "$1" h1)" iperf3 -c "$H2" -p "$3" -C "$2" -t "$4" -J
}

# analyse IPERF_JSON SAMPLES T0 CC prints "Mbit/s queue_ms retransmits": the
# received rate, the mean backlog / rate from SETTLE s after T0 on, the
# sender's retransmits; it fails when iperf3 did not run CC.
analyse() {
	python3 - "$@" "$SETTLE" "$RATE_BPS" "$DURATION" <<'PY'
import json, sys
f, samples, t0, cc, settle, rate, dur = sys.argv[1:8]
t0, settle, rate, dur = float(t0), float(settle), float(rate), float(dur)
r = json.load(open(f))
e = r["end"]
used = e.get("sender_tcp_congestion")
if used != cc:
    sys.exit("iperf3 ran %s, not %s" % (used, cc))
bl = []
for line in open(samples):
    ts, _, js = line.partition(" ")
    t = float(ts) - t0
    if t < settle or t > dur:
        continue
    for q in json.loads(js or "[]"):
        if q.get("root"):
            bl.append(q["backlog"])
if not bl:
    sys.exit("no backlog samples")
print("%.1f %.2f %d" % (e["sum_received"]["bits_per_second"] / 1e6,
                        sum(bl) / len(bl) * 8 / rate * 1000, e["sum_sent"]["retransmits"]))
PY
}

# cpu_jiffies prints the host's busy and total CPU time so far (all cores,
# /proc/stat); busy_pct A B prints the busy share between two of them, in
# percent. The runs share the host: on a loaded host the emulator's timers
# slip, which a delay-based congestion control takes for queueing.
cpu_jiffies() { awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat; }
busy_pct() {
	local -a a b
	read -ra a <<<"$1"
	read -ra b <<<"$2"
	awk -v b0="${a[0]}" -v t0="${a[1]}" -v b1="${b[0]}" -v t1="${b[1]}" 'BEGIN { printf "%.0f", (t1 > t0 ? 100 * (b1 - b0) / (t1 - t0) : 0) }'
}

# stats V... prints the median, min and max of its arguments.
stats() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}

jlist() { local IFS=,; printf '[%s]' "$*"; }

# ---------------------------------------------------------------------------
# The matrix: every CC over every round trip and loss

scenario_matrix() {
	local rtt loss cc run tb i n res mb q rt
	local -a ccs order
	read -ra ccs <<<"$CCS"
	n=${#ccs[@]}
	for rtt in $RTTS; do
		tb=lpf-$rtt
		up "$tb" "$rtt"
		declare -A MB=() Q=() RT=() HB=()
		for ((run = 1; run <= RUNS; run++)); do
			order=()
			for ((i = 0; i < n; i++)); do order+=("${ccs[$(((i + run - 1) % n))]}"); done
			for loss in $LOSSES; do
				"$LP" testbed link set --name "$tb" wan --loss "$loss" >/dev/null
				for cc in "${order[@]}"; do
					local base=$W/runs/$rtt-$loss-$cc-$run
					cc_lock "$cc"
					start_sampler "$tb" "$base.tc"
					local t0=$EPOCHREALTIME c0 c1 hb
					c0=$(cpu_jiffies)
					iperf "$tb" "$cc" 5201 "$DURATION" "$base.json" || { stop_sampler; die "iperf3 -C $cc, RTT $rtt ms, loss $loss: $RUN_ERROR"; }
					c1=$(cpu_jiffies)
					cc_unlock
					stop_sampler
					hb=$(busy_pct "$c0" "$c1")
					res=$(analyse "$base.json" "$base.tc" "$t0" "$cc" 2>"$base.err") || die "RTT $rtt ms, loss $loss, $cc: $(last_line "$base.err")"
					read -r mb q rt <<<"$res"
					MB[$loss|$cc]+="$mb " Q[$loss|$cc]+="$q " RT[$loss|$cc]+="$rt " HB[$loss|$cc]+="$hb "
					log "RTT $rtt ms, loss $loss, run $run/$RUNS, $cc: $mb Mbit/s, queue $q ms, $rt retransmits, host CPU $hb% busy"
				done
			done
		done
		"$LP" testbed link set --name "$tb" wan --loss 0 >/dev/null
		down "$tb"
		out ""
		out "$(awk -v r="$RATE_BPS" 'BEGIN { printf "%g", r / 1e6 }') Mbit/s, $rtt ms round trip, queue $(awk -v b="$QUEUE_BYTES" 'BEGIN { printf "%.2f", b / 1e6 }') MB ($QUEUE_BDP BDP, $(awk -v b="$QUEUE_BYTES" -v r="$RATE_BPS" 'BEGIN { printf "%.0f", b * 8 / r * 1000 }') ms): iperf3, 1 stream, ${DURATION} s; median (min-max) of $RUNS runs"
		out "$(printf '  %-7s %-6s %22s %8s %22s %22s %18s' loss cc "Mbit/s" "x reno" "queue ms (from ${SETTLE} s)" retransmits "host CPU % busy")"
		for loss in $LOSSES; do
			# Each CC's median Mbit/s over Reno's at the same loss: FAST
			# (issue 16) is to carry at least twice Reno's under 0.1% loss.
			local reno=
			if [[ -n ${MB[$loss|reno]:-} ]]; then
				# shellcheck disable=SC2086 # space-separated lists
				read -r reno _ <<<"$(stats ${MB[$loss|reno]})"
			fi
			for cc in "${ccs[@]}"; do
				local -a sm sq sr sh
				local vs=null
				# shellcheck disable=SC2086 # space-separated lists
				read -ra sm <<<"$(stats ${MB[$loss|$cc]})"
				if [[ -n $reno ]]; then vs=$(awk -v a="${sm[0]}" -v b="$reno" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "null" }'); fi
				# shellcheck disable=SC2086
				read -ra sq <<<"$(stats ${Q[$loss|$cc]})"
				# shellcheck disable=SC2086
				read -ra sr <<<"$(stats ${RT[$loss|$cc]})"
				# shellcheck disable=SC2086
				read -ra sh <<<"$(stats ${HB[$loss|$cc]})"
				out "$(printf '  %-7s %-6s %8.1f (%5.1f-%5.1f) %8s %8.2f (%5.2f-%5.2f) %8.0f (%5.0f-%5.0f) %6.0f (%3.0f-%3.0f)' "$loss" "$cc" \
					"${sm[0]}" "${sm[1]}" "${sm[2]}" "${vs/null/-}" "${sq[0]}" "${sq[1]}" "${sq[2]}" "${sr[0]}" "${sr[1]}" "${sr[2]}" "${sh[0]}" "${sh[1]}" "${sh[2]}")"
				# shellcheck disable=SC2086
				emit_json scenario=matrix rtt_ms:="$rtt" loss="$loss" cc="$cc" mbps:="${sm[0]}" mbps_min:="${sm[1]}" mbps_max:="${sm[2]}" mbps_vs_reno:="$vs" \
					queue_ms:="${sq[0]}" queue_ms_min:="${sq[1]}" queue_ms_max:="${sq[2]}" retransmits:="${sr[0]}" \
					mbps_runs:="$(jlist ${MB[$loss|$cc]})" queue_ms_runs:="$(jlist ${Q[$loss|$cc]})" retransmits_runs:="$(jlist ${RT[$loss|$cc]})" \
					host_busy_pct_runs:="$(jlist ${HB[$loss|$cc]})"
			done
		done
		unset MB Q RT HB
	done
	if [[ " $CCS " == *" fast "* ]]; then
		out "  (fast: $FAST_PARAMS; alpha packets of 1500 bytes queued are $(awk -v p="${FAST_PARAMS#alpha=}" -v r="$RATE_BPS" 'BEGIN { split(p, a, " "); printf "%.2f", a[1] * 1500 * 8 / r * 1000 }') ms at this rate)"
	fi
}

# ---------------------------------------------------------------------------
# Fairness: two flows, the second late

# fair_split FIRST_JSON SECOND_JSON LATE BOTH prints "x1 x2 share2 jain
# jain_last_half": the two flows' Mbit/s while both ran (the first flow's
# intervals from LATE s on, the second's from its start), the second's
# share, Jain's index over that time and over its last half.
fair_split() {
	python3 - "$@" <<'PY'
import json, sys
a, b, late, both = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
def mean(f, lo, hi):
    s = n = 0.0
    for iv in json.load(open(f))["intervals"]:
        x = iv["sum"]
        mid = (x["start"] + x["end"]) / 2
        if lo <= mid < hi:
            s += x["bits_per_second"]
            n += 1
    return s / n / 1e6 if n else 0.0
def jain(x, y):
    return (x + y) ** 2 / (2 * (x * x + y * y)) if x + y > 0 else 0.0
x1, x2 = mean(a, late, late + both), mean(b, 0, both)
h1, h2 = mean(a, late + both / 2, late + both), mean(b, both / 2, both)
print("%.1f %.1f %.3f %.3f %.3f" % (x1, x2, x2 / (x1 + x2), jain(x1, x2), jain(h1, h2)))
PY
}

scenario_fairness() {
	local tb=lpf-fair v cc run res x1 x2 share j jh p1
	local -A X1=() X2=() SH=() J=() JH=() HB=()
	up "$tb" "$FAIR_RTT"
	for ((run = 1; run <= RUNS; run++)); do
		for v in $FAIR_CCS; do
			cc=${v%%:*}
			local base=$W/runs/fair-${v/:/-}-$run
			cc_lock "$cc"
			if [[ $v == *:* ]]; then
				FAST_ALTERED=1
				fast_alpha "${v#*:}" || die "could not set fast's alpha to ${v#*:}"
			fi
			local c0 c1 hb
			c0=$(cpu_jiffies)
			(iperf "$tb" "$cc" 5201 $((FAIR_LATE + FAIR_BOTH)) "$base-1.json") &
			p1=$!
			sleep "$FAIR_LATE"
			iperf "$tb" "$cc" 5202 "$FAIR_BOTH" "$base-2.json" || { wait "$p1" || true; die "fairness, second $cc flow: $RUN_ERROR"; }
			wait "$p1" || die "fairness, first $cc flow: $(last_line "$base-1.json.err")"
			c1=$(cpu_jiffies)
			if [[ $FAST_ALTERED == 1 ]]; then
				fast_alpha "$FAST_ALPHA" || die "could not put fast's alpha back to $FAST_ALPHA"
				FAST_ALTERED=0
			fi
			cc_unlock
			hb=$(busy_pct "$c0" "$c1")
			res=$(fair_split "$base-1.json" "$base-2.json" "$FAIR_LATE" "$FAIR_BOTH")
			read -r x1 x2 share j jh <<<"$res"
			X1[$v]+="$x1 " X2[$v]+="$x2 " SH[$v]+="$share " J[$v]+="$j " JH[$v]+="$jh " HB[$v]+="$hb "
			log "fairness run $run/$RUNS, $v: first $x1 Mbit/s, second $x2 Mbit/s, second's share $share, Jain $j (last half $jh), host CPU $hb% busy"
		done
	done
	down "$tb"
	out ""
	out "Two flows on one bottleneck ($(awk -v r="$RATE_BPS" 'BEGIN { printf "%g", r / 1e6 }') Mbit/s, $FAIR_RTT ms round trip, no loss, queue $QUEUE_BDP BDP): the second starts $FAIR_LATE s after the first, both run $FAIR_BOTH s together; median (min-max) of $RUNS runs"
	out "$(printf '  %-15s %20s %20s %20s %20s %20s %16s' cc "first Mbit/s" "second Mbit/s" "second's share" "Jain (both running)" "Jain (last $((FAIR_BOTH / 2)) s)" "host CPU % busy")"
	for v in $FAIR_CCS; do
		local -a a b s jj hh hc
		local label=$v
		if [[ $v == fast:* ]]; then label="fast alpha=${v#*:}"; elif [[ $v == fast ]]; then label="fast alpha=$FAST_ALPHA"; fi
		# shellcheck disable=SC2086 # space-separated lists
		read -ra a <<<"$(stats ${X1[$v]})"
		# shellcheck disable=SC2086
		read -ra b <<<"$(stats ${X2[$v]})"
		# shellcheck disable=SC2086
		read -ra s <<<"$(stats ${SH[$v]})"
		# shellcheck disable=SC2086
		read -ra jj <<<"$(stats ${J[$v]})"
		# shellcheck disable=SC2086
		read -ra hh <<<"$(stats ${JH[$v]})"
		# shellcheck disable=SC2086
		read -ra hc <<<"$(stats ${HB[$v]})"
		out "$(printf '  %-15s %6.1f (%5.1f-%5.1f) %6.1f (%5.1f-%5.1f) %6.3f (%5.3f-%5.3f) %6.3f (%5.3f-%5.3f) %6.3f (%5.3f-%5.3f) %6.0f (%3.0f-%3.0f)' "$label" \
			"${a[@]}" "${b[@]}" "${s[@]}" "${jj[@]}" "${hh[@]}" "${hc[@]}")"
		# shellcheck disable=SC2086
		emit_json scenario=fairness cc="$label" rtt_ms:="$FAIR_RTT" first_mbps:="${a[0]}" second_mbps:="${b[0]}" second_share:="${s[0]}" \
			jain:="${jj[0]}" jain_last_half:="${hh[0]}" jain_runs:="$(jlist ${J[$v]})" second_share_runs:="$(jlist ${SH[$v]})"
	done
}

main() {
	local t0=$SECONDS
	install_peers
	build_lightpath
	ensure_fast
	emit_json bench=fast runs:="$RUNS" duration_s:="$DURATION" settle_s:="$SETTLE" rate_bps:="$RATE_BPS" \
		queue_bdp:="$QUEUE_BDP" fast_params="${FAST_PARAMS:-}" cores:="$(nproc)" kernel="$(uname -r)"
	out "bench/fast.sh $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) cores; fast: ${FAST_PARAMS:-not used}"
	if wanted matrix; then scenario_matrix; fi
	if wanted fairness; then scenario_fairness; fi
	out ""
	out "done in $((SECONDS - t0)) s"
	emit_json bench=fast elapsed_s:="$((SECONDS - t0))"
}

main

#!/usr/bin/env bash
# transports.sh: Lightpath's reliable UDP transport (issue 17) against iperf3,
# uftp and Lightpath's own TCP, memory to memory, on a bare veth pair and on
# an emulated WAN, and how two flows share a bottleneck.
#
#   bench/transports.sh [--json] [--only veth|path|fair]
#
# Scenarios (run as root; each builds its namespaces or testbed and removes
# them at the end, also on error or interrupt):
#   veth  two namespaces joined by a veth pair, at MTU 1500 and 9000:
#         lightpath bench --transport udp with one stream (-P 1) and with the
#         default streams (no -P: the count it chose is printed), against
#         iperf3 -u -l PAYLOAD -w 16M -b 0 (unlimited) with PAYLOAD the UDP
#         transport's own payload per datagram (MTU - 28 - 56: 1416 and
#         8916), and lightpath bench --transport tcp (default streams)
#         beside them. iperf3 is counted at its receiver (goodput and loss).
#         Target: UDP goodput >= 0.8 of iperf3's.
#   path  h1 - r1 - wan - r2 - h2 (testbed; wan LINK_RATE (1G), 50 ms one
#         way = 100 ms round trip, 1% random loss; access links 10G, MTU
#         1500 everywhere). First the path's iperf3 -u ceiling (wan raised to
#         10G, no loss, iperf3 -u -l 1416 -w 16M -b 0 for DURATION s); below
#         1.2 x LINK_RATE the wan runs at 500M instead, and the table says so.
#         A controller and an agent in every node run throughout. Then,
#         alternating in every run: cp --transport udp --reserve RESERVED of
#         a file of RESERVED x 2 DURATION (booked, steered by the agents,
#         fixed at the reserved rate), RESERVED being the 0.9 of the wan a
#         reservation may take (the testbed's default `reservable`); bench
#         --cc fixed --rate RESERVED with no reservation (both: target
#         payload goodput >= 0.95 of RESERVED); UDP --cc fast (target >= 0.85 of the wan rate); TCP
#         --cc cubic and --cc bbr (default streams); uftp unicast (uftpd in
#         h2, uftp -M h2 -R <wan rate> -C none in h1) copying a file of
#         wan rate x DURATION, its goodput the file over uftp's own transfer
#         time (announce and completion handshakes excluded).
#   fair  the same routers, wan 500M, 25 ms one way (50 ms RTT), no loss,
#         every flow one stream and counted where it is received (bench
#         --reverse: the client receives, its per-second interval lines
#         count delivered bytes). Two UDP fast flows, the second started
#         FAIR_LEAD (10) s after the first and running DURATION s: each flow's
#         rate over the time both run and Jain's index of the two (target
#         >= 0.95). Then a UDP fast flow and a TCP CUBIC flow started
#         together, for DURATION s: each flow's share (target: TCP >= 1/3).
#
# Every figure is the median of RUNS (5) runs with the min-max spread; the
# tools alternate (one order in odd runs, the reverse in even ones). cpu is
# the machine's busy share (all cores) while a tool ran, from /proc/stat.
#
# Environment: RUNS (5), DURATION (10: seconds per measurement), LINK_RATE
# (1G), FAIR_LEAD (10), ONLY, JSON=1 (same as --json), KEEP=1 (keep the work
# directory), LIGHTPATH (a lightpath binary to use instead of building one;
# LIGHTPATH_FROM, what it was built from, is printed beside it).
#
# Output: a table per scenario on stdout, each row with its verdict against
# its target; with --json one JSON object per row on stdout instead (the
# tables then go to stderr). A peer that cannot be installed or fails is
# "unavailable (why)". Exit 0 when the measurements completed (whatever the
# verdicts), 2 on the script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

RUNS=${RUNS:-5}
DURATION=${DURATION:-10}
DURATION=${DURATION%s}
LINK_RATE=${LINK_RATE:-1G}
FAIR_LEAD=${FAIR_LEAD:-10}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $FAIR_LEAD =~ ^[0-9]+$ ]] || die "FAIR_LEAD must be whole seconds, not '$FAIR_LEAD'"
case $ONLY in '' | veth | path | fair) ;; *) die "ONLY must be veth, path or fair, not '$ONLY'" ;; esac
LINK_BPS=$(numfmt --from=si "$LINK_RATE" 2>/dev/null) || die "LINK_RATE must be like 1G or 500M, not '$LINK_RATE'"
[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, the testbed)"
wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lptransports.XXXXXX) || die "cannot create a work directory in /dev/shm"
chmod 755 "$W"
mkdir -p "$W/logs" "$W/topo" "$W/root" "$W/src" "$W/uftp-rx" "$W/uftp-tmp"
APT_LOG=$W/logs/apt.log
T_START=$EPOCHREALTIME

# What this run made, removed at the end whatever happens.
TESTBEDS=()
VETH_NS=()
declare -ga BG_PIDS=()
cleanup() {
	local rc=$? tb ns pid
	trap - EXIT INT TERM
	for pid in "${BG_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
	stop_servers
	for tb in "${TESTBEDS[@]}"; do "$LP" testbed down --name "$tb" >/dev/null 2>&1 || true; done
	for ns in "${VETH_NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
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
	ensure_commands iperf3=iperf3 ss=iproute2 uftp=uftp uftpd=uftp
	[[ -z ${UNAVAILABLE[iperf3]:-} ]] || die "iperf3 is needed: ${UNAVAILABLE[iperf3]}"
}

LP=${LIGHTPATH:-$REPO/bin/lightpath}

# routed_topology FILE RATE DELAY LOSS writes h1 - r1 - wan - r2 - h2.
routed_topology() {
	cat >"$1" <<-EOF
		sites:
		  - name: a
		  - name: b
		nodes:
		  - {name: h1, site: a}
		  - {name: r1, site: a, role: router}
		  - {name: h2, site: b}
		  - {name: r2, site: b, role: router}
		links:
		  - {name: h1-r1, ends: [h1, r1], mtu: 1500}
		  - {name: r2-h2, ends: [r2, h2], mtu: 1500}
		  - {name: wan, ends: [r1, r2], rate: $2, delay: $3, loss: $4, mtu: 1500}
	EOF
}
H2=198.18.2.1 # h2's address: site b, node 1

verdict() { if awk -v ok="$1" 'BEGIN { exit !ok }'; then echo PASS; else echo FAIL; fi; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { print (a >= b) ? 1 : 0 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "0" }'; }

# spread V... prints "median (min-max)" of V in Mbit/s (V in bit/s).
spread_mbit() {
	printf '%s\n' "$@" | sort -g | awk -v m="$(median "$@")" '{ v[NR] = $1 }
		END { printf "%7.0f (%.0f-%.0f)", m / 1e6, v[1] / 1e6, v[NR] / 1e6 }'
}
# spread_num FMT V... prints "median (min-max)" of V with printf format FMT.
spread_num() {
	local fmt=$1
	shift
	printf '%s\n' "$@" | sort -g | awk -v m="$(median_f "$@")" -v f="$fmt" '{ v[NR] = $1 }
		END { printf f " (" f "-" f ")", m, v[1], v[NR] }'
}
# median_f is median without rounding (for ratios and percentages).
median_f() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# cpu_mark prints the busy and total jiffies of all cores; cpu_busy A B the
# busy percentage between two marks.
cpu_mark() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $2 + $3 + $4 + $5 + $6 + $7 + $8 }' /proc/stat; }
cpu_busy() {
	local a b
	read -r -a a <<<"$1"
	read -r -a b <<<"$2"
	awk -v b0="${a[0]}" -v t0="${a[1]}" -v b1="${b[0]}" -v t1="${b[1]}" \
		'BEGIN { if (t1 > t0) printf "%.0f", 100 * (b1 - b0) / (t1 - t0); else print 0 }'
}

# summary_vals LOG CODE runs python CODE with s bound to the last NDJSON
# summary line of LOG and g(KEY) its field KEY (0 when absent or null) and
# prints what CODE prints; on failure the reason is in LOG.parse.
summary_vals() {
	python3 -c '
import json, sys
s = None
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        o = json.loads(line)
        if o.get("type") == "summary":
            s = o
if s is None:
    sys.exit("no summary line")
g = lambda k: s.get(k) if s.get(k) is not None else 0
exec(sys.argv[2])
' "$1" "$2" 2>"$1.parse"
}

# lp_bench NS LOG ADDR ARG... runs lightpath bench in NS for DURATION s and
# sets R_GOOD R_SEND R_RESENT R_REPAIRED R_DPB R_STREAMS R_CPU from its
# summary. Returns non-zero with RUN_ERROR on failure.
lp_bench() {
	local nsname=$1 logf=$2 addr=$3 m0 m1 vals
	shift 3
	m0=$(cpu_mark)
	timed "$logf" $((DURATION + 40)) ip netns exec "$nsname" "$LP" bench "lp://$addr" -t "${DURATION}s" --json "$@" || return 1
	m1=$(cpu_mark)
	R_CPU=$(cpu_busy "$m0" "$m1")
	vals=$(summary_vals "$logf" '
print(int(g("goodput_bps")), int(g("sending_rate_bps")), int(g("bytes_resent")),
      int(g("loss_repaired_bytes")), "%.1f" % g("datagrams_per_batch"), g("streams"))') || {
		RUN_ERROR="no summary: $(last_line "$logf.parse")"
		return 1
	}
	read -r R_GOOD R_SEND R_RESENT R_REPAIRED R_DPB R_STREAMS <<<"$vals"
}

# lp_cp_reserved NS LOG FILE ADDR RATE NAME copies FILE to lp://ADDR/NAME
# over UDP with cp --reserve RATE --reserve-required (the controller from
# LIGHTPATH_CONTROLLER) and sets R_GOOD (the session's payload goodput),
# R_SEND, R_BYTES, R_RESENT, R_REPAIRED, R_STREAMS, R_STEERED (the percent
# of the bytes that went over the reservation while it steered),
# R_ELAPSED (the whole command's seconds) and R_CPU.
lp_cp_reserved() {
	local nsname=$1 logf=$2 file=$3 addr=$4 rate=$5 name=$6 m0 m1 vals t0
	m0=$(cpu_mark)
	t0=$EPOCHREALTIME
	timed "$logf" $((DURATION * 3 + 60)) ip netns exec "$nsname" "$LP" cp --json --transport udp \
		--reserve "$rate" --reserve-required --controller "$LIGHTPATH_CONTROLLER" "$file" "lp://$addr/$name" || return 1
	R_ELAPSED=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
	m1=$(cpu_mark)
	R_CPU=$(cpu_busy "$m0" "$m1")
	vals=$(summary_vals "$logf" '
if not s.get("verified") or s.get("transport") != "udp" or s.get("cc") != "fixed":
    sys.exit("not a verified udp copy at a fixed rate: %s" % {k: s.get(k) for k in ("verified", "transport", "cc")})
b = g("bytes")
steered = 100.0 * (s.get("bytes_by_path") or {}).get("reserved", 0) / b if b else 0
print(int(g("goodput_bps")), int(g("sending_rate_bps")), int(b), int(g("bytes_resent")),
      int(g("loss_repaired_bytes")), g("streams"), "%.1f" % steered)
') || {
		RUN_ERROR="cp --reserve: $(last_line "$logf.parse")"
		return 1
	}
	read -r R_GOOD R_SEND R_BYTES R_RESENT R_REPAIRED R_STREAMS R_STEERED <<<"$vals"
}

# iperf3_bps FILE prints the received bits per second of an iperf3 -J TCP result.
iperf3_bps() {
	python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["end"]
print(int(e.get("sum_received", e.get("sum", {})).get("bits_per_second", 0)))
' "$1"
}

# iperf3_udp NS LOG HOST PORT LEN [RATE] runs iperf3 -u for DURATION s at
# RATE (default 0: unlimited) and sets R_GOOD (receiver goodput) R_LOSS
# (receiver's lost percent) R_CPU.
iperf3_udp() {
	local nsname=$1 logf=$2 host=$3 port=$4 len=$5 rate=${6:-0} m0 m1 vals
	m0=$(cpu_mark)
	timed "$logf" $((DURATION + 30)) ip netns exec "$nsname" iperf3 -c "$host" -p "$port" -u -l "$len" -w 16M -b "$rate" \
		-t "$DURATION" -J || return 1
	m1=$(cpu_mark)
	R_CPU=$(cpu_busy "$m0" "$m1")
	vals=$(python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["end"]
r = e.get("sum_received") or e["sum"]
print(int(r["bits_per_second"]), "%.2f" % r.get("lost_percent", e["sum"].get("lost_percent", 0)))
' "$logf" 2>"$logf.parse") || {
		RUN_ERROR="cannot parse: $(last_line "$logf.parse")"
		return 1
	}
	read -r R_GOOD R_LOSS <<<"$vals"
}

# ---------------------------------------------------------------------------
# Results, kept per scenario: RES[case]="v v v ...", ERR[case]=why.
declare -gA RES=() ERR=()
add() { RES[$1]="${RES[$1]:-} $2"; }
vals() { printf '%s' "${RES[$1]:-}"; }
have() { [[ -n ${RES[$1]:-} ]]; }
fail_once() {
	[[ -n ${ERR[$1]:-} ]] || ERR[$1]=$2
	FAILS[$1]=$((${FAILS[$1]:-0} + 1))
	log "$1 failed: $2"
}
declare -gA FAILS=() SKIPS=()
# failures NAME TOOL prints the row of a tool that failed in some runs.
failures() {
	[[ -n ${FAILS[$2]:-} ]] || return 0
	local skipped=""
	if [[ -n ${SKIPS[$2]:-} ]]; then skipped=", not tried in the other ${SKIPS[$2]} (it had failed twice)"; fi
	out "$(printf '  %-30s failed in %d of %d runs%s (first: %s)' "$1" "${FAILS[$2]}" "$RUNS" "$skipped" "${ERR[$2]}")"
}
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# ---------------------------------------------------------------------------
# veth

scenario_veth() {
	local a b mtu len run tool port=7070 ip=5201
	a=lpt-a-$$ b=lpt-b-$$
	ip netns add "$a" && VETH_NS+=("$a")
	ip netns add "$b" && VETH_NS+=("$b")
	ip link add lptv0 netns "$a" type veth peer name lptv1 netns "$b" || die "cannot create a veth pair"
	ip -n "$a" addr add 10.213.0.1/24 dev lptv0
	ip -n "$b" addr add 10.213.0.2/24 dev lptv1
	ip -n "$a" link set lo up
	ip -n "$b" link set lo up
	ip -n "$a" link set lptv0 up
	ip -n "$b" link set lptv1 up
	start_server_in "$b" "$port" "$W/logs/serve-veth.log" "$LP" serve --listen "10.213.0.2:$port" --root "$W/root" ||
		die "lightpath serve: $START_ERROR"
	start_server_in "$b" "$ip" "$W/logs/iperf3-veth.log" iperf3 -s -B 10.213.0.2 -p "$ip" ||
		die "iperf3 -s: $START_ERROR"
	local -a tools=(udp1 udpdef iperf3 tcp) order
	for mtu in 1500 9000; do
		ip -n "$a" link set lptv0 mtu "$mtu"
		ip -n "$b" link set lptv1 mtu "$mtu"
		len=$((mtu - 28 - 56))
		RES=() ERR=() FAILS=() SKIPS=() LOAD0=$(loadavg)
		for ((run = 1; run <= RUNS; run++)); do
			order=("${tools[@]}")
			if ((run % 2 == 0)); then order=(tcp iperf3 udpdef udp1); fi
			for tool in "${order[@]}"; do
				local logf=$W/logs/veth-$mtu-$tool-$run.json
				log "veth MTU $mtu run $run/$RUNS: $tool"
				case $tool in
				udp1 | udpdef | tcp)
					local -a extra=()
					case $tool in
					udp1) extra=(--transport udp -P 1) ;;
					udpdef) extra=(--transport udp) ;;
					tcp) extra=(--transport tcp) ;;
					esac
					if lp_bench "$a" "$logf" "10.213.0.2:$port" "${extra[@]}"; then
						add "$tool" "$R_GOOD"
						add "$tool.cpu" "$R_CPU"
						add "$tool.streams" "$R_STREAMS"
						add "$tool.dpb" "$R_DPB"
						add "$tool.resent" "$R_RESENT"
					else fail_once "$tool" "$RUN_ERROR"; fi
					;;
				iperf3)
					if iperf3_udp "$a" "$logf" 10.213.0.2 "$ip" "$len"; then
						add iperf3 "$R_GOOD"
						add iperf3.cpu "$R_CPU"
						add iperf3.loss "$R_LOSS"
					else fail_once iperf3 "$RUN_ERROR"; fi
					;;
				esac
			done
		done
		veth_table "$mtu" "$len"
	done
	stop_servers
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
}

veth_table() {
	local mtu=$1 len=$2 tool name ref med r ok extra
	# shellcheck disable=SC2046 # word splitting of the stored values is meant
	ref=$(have iperf3 && median $(vals iperf3) || echo 0)
	out ""
	out "veth pair between two namespaces, MTU $mtu, memory to memory, ${DURATION} s per run, median (min-max) of $RUNS runs"
	out "  load average at the start: $LOAD0, at the end: $(loadavg)"
	out "  UDP payload $len B per datagram for both lightpath and iperf3 (iperf3 -u -l $len -w 16M -b 0, counted at its receiver)"
	out "$(printf '  %-34s %24s %16s %-32s %s' tool "goodput Mbit/s" "cpu % (2 cores)" "" "verdict (UDP >= 0.8 of iperf3 -u)")"
	for tool in iperf3 udp1 udpdef tcp; do
		case $tool in
		iperf3) name="iperf3 -u (receiver)" ;;
		udp1) name="lightpath udp -P 1" ;;
		udpdef) name="lightpath udp (default streams)" ;;
		tcp) name="lightpath tcp (default streams)" ;;
		esac
		if ! have "$tool"; then
			out "$(printf '  %-34s no result (%s)' "$name" "${ERR[$tool]:-no result}")"
			continue
		fi
		failures "$name" "$tool"
		# shellcheck disable=SC2046
		med=$(median $(vals "$tool"))
		case $tool in
		iperf3)
			# shellcheck disable=SC2046
			extra="loss $(spread_num '%.2f' $(vals iperf3.loss)) %"
			ok="(reference)"
			;;
		udp1 | udpdef)
			# shellcheck disable=SC2046
			extra="streams $(median_f $(vals "$tool.streams")), $(median_f $(vals "$tool.dpb")) dgrams/batch"
			r=$(ratio "$med" "$ref")
			ok="$(verdict "$(ge "$r" 0.8)") ($r of iperf3; target >= 0.8)"
			;;
		tcp)
			# shellcheck disable=SC2046
			extra="streams $(median_f $(vals tcp.streams))"
			r=$(ratio "$med" "$ref")
			ok="(beside: $r of iperf3 -u)"
			;;
		esac
		# shellcheck disable=SC2046
		out "$(printf '  %-34s %24s %16s %-32s %s' "$name" "$(spread_mbit $(vals "$tool"))" "$(spread_num '%.0f' $(vals "$tool.cpu"))" "$extra" "$ok")"
		# shellcheck disable=SC2046
		emit_json scenario=veth mtu:="$mtu" payload:="$len" tool="$tool" goodput_bps:="$med" \
			runs:="[$(vals "$tool" | xargs | tr ' ' ',')]" ratio_to_iperf3:="${r:-1}"
	done
}

# ---------------------------------------------------------------------------
# path

# uftp_run LOG SIZE_BYTES RATE_KBPS copies $W/src/uftp.bin to uftpd in h2
# and sets R_GOOD (file bits over uftp's transfer time) and R_CPU.
uftp_run() {
	local logf=$1 size=$2 kbps=$3 m0 m1 secs
	empty_dir "$W/uftp-rx"
	m0=$(cpu_mark)
	timed "$logf" $((DURATION * 6 + 60)) ip netns exec "$(ns "$TB" h1)" uftp -M "$H2" -H 0x0a0b0c0d -R "$kbps" -C none \
		-Y none "$W/src/uftp.bin" || {
		RUN_ERROR="$RUN_ERROR; $(grep -i -m1 -E 'error|abort|fail' "$logf" "$logf.err" 2>/dev/null | head -c 160 || true)"
		return 1
	}
	m1=$(cpu_mark)
	R_CPU=$(cpu_busy "$m0" "$m1")
	local got
	got=$(dir_bytes "$W/uftp-rx")
	if [[ $got != "$size" ]]; then
		RUN_ERROR="uftpd received $got of $size bytes"
		return 1
	fi
	# uftp prints "Host: 0x... Status: Completed time: N seconds": the
	# file's transfer, from its FILEINFO to the client's completion.
	secs=$(cat "$logf" "$logf.err" | awk '/Status: Completed/ { for (i = 1; i < NF; i++) if ($i == "time:") { print $(i + 1); exit } }')
	[[ -n $secs ]] || secs=$ELAPSED
	R_GOOD=$(awk -v b="$size" -v s="$secs" 'BEGIN { printf "%.0f", b * 8 / s }')
	R_SECS=$secs
}

scenario_path() {
	local run tool rate_bps res_bps delay=50ms loss=1% note="" ceil ceil_loss
	TB=lpt-path
	routed_topology "$W/topo/path.yaml" "$LINK_RATE" "$delay" "$loss"
	# A controller and an agent in every node, for the real reservation
	# (cp --reserve); the other tools hold none, and the agents leave them be.
	agents_testbed_up "$TB" "$W/topo/path.yaml" 4
	start_server_in "$(ns $TB h2)" 7070 "$W/logs/serve-path.log" "$LP" serve --listen "$H2:7070" --root "$W/root" ||
		die "lightpath serve in h2: $START_ERROR"
	start_server_in "$(ns $TB h2)" 5201 "$W/logs/iperf3-path.log" iperf3 -s -B "$H2" -p 5201 ||
		die "iperf3 -s in h2: $START_ERROR"

	# The ceiling: the emulator's, with the wan's rate and loss out of the
	# way, iperf3 -u offering 1.2 x the link rate (offering more, or -b 0,
	# one datagram per write overruns the emulator's TUN ring and measures
	# its collapse rather than its ceiling).
	"$LP" testbed link set --name "$TB" wan --rate 10G --loss 0
	local offer=$((LINK_BPS * 12 / 10))
	log "path: iperf3 -u ceiling at $(gbit "$offer") Gbit/s offered"
	if iperf3_udp "$(ns $TB h1)" "$W/logs/path-ceiling.json" "$H2" 5201 1416 "$offer"; then
		ceil=$R_GOOD ceil_loss=$R_LOSS
	else
		die "iperf3 -u ceiling: $RUN_ERROR"
	fi
	rate_bps=$LINK_BPS
	# iperf3 -b counts the UDP payload, so the bar is 1.2 x the link in
	# payload, less one percent for iperf3's own pacing.
	if ! awk -v c="$ceil" -v r="$LINK_BPS" 'BEGIN { exit !(c >= 0.99 * 1.2 * r) }'; then
		rate_bps=500000000
		note="below 1.2 x $(gbit "$LINK_BPS") Gbit/s: the wan runs at 500 Mbit/s instead"
	else
		note="at least 1.2 x the link rate: the wan runs at $(gbit "$LINK_BPS") Gbit/s"
	fi
	res_bps=$((rate_bps * 9 / 10))
	"$LP" testbed link set --name "$TB" wan --rate "$rate_bps" --loss "$loss"

	RES=() ERR=() FAILS=() SKIPS=() LOAD0=$(loadavg)
	# uftp: a file the wan carries in about DURATION s.
	local size=$((rate_bps / 8 * DURATION)) uftp_ok=1
	if [[ -n ${UNAVAILABLE[uftp]:-} || -n ${UNAVAILABLE[uftpd]:-} ]]; then
		uftp_ok=0
		ERR[uftp]=${UNAVAILABLE[uftp]:-${UNAVAILABLE[uftpd]}}
	else
		head -c "$size" /dev/urandom >"$W/src/uftp.bin"
		setsid ip netns exec "$(ns $TB h2)" uftpd -d -U 0x0a0b0c0d -D "$W/uftp-rx" -T "$W/uftp-tmp" -B 16777216 \
			>"$W/logs/uftpd.log" 2>&1 </dev/null &
		SERVER_PIDS+=("$!")
		local i
		for ((i = 0; i < 50; i++)); do
			ip netns exec "$(ns $TB h2)" ss -Hlun 'sport = :1044' | grep -q . && break
			sleep 0.1
		done
	fi

	# reserved: a file of RESERVED x 2 DURATION, copied by cp --reserve.
	# Twice the others' time: a copy has round trips of its own that a bench
	# has not (the file's offer and its verdict, the booking), a few tenths
	# of a second at 100 ms, which a longer copy spreads thinner; the rate
	# control is what is measured.
	local res_size=$((res_bps / 8 * DURATION * 2))
	head -c "$res_size" /dev/urandom >"$W/src/reserved.bin"
	local -a tools=(reserved fixed fast cubic bbr iperf3cubic uftp) order
	for ((run = 1; run <= RUNS; run++)); do
		order=("${tools[@]}")
		if ((run % 2 == 0)); then order=(uftp iperf3cubic bbr cubic fast fixed reserved); fi
		for tool in "${order[@]}"; do
			local logf=$W/logs/path-$tool-$run.json
			# A tool that failed twice without ever finishing is not tried
			# again: each failure costs the bench's 30 s write timeout.
			if ((${FAILS[$tool]:-0} >= 2)) && ! have "$tool"; then
				SKIPS[$tool]=$((${SKIPS[$tool]:-0} + 1))
				continue
			fi
			log "path run $run/$RUNS: $tool"
			case $tool in
			fixed | fast | cubic | bbr)
				local -a extra=()
				case $tool in
				# One UDP stream each, as a copy at the booked rate would
				# take (and as the runs in docs/transports-bench.md did):
				# without a rate, bench's default would take eight here.
				fixed) extra=(--transport udp -P 1 --cc fixed --rate "$res_bps") ;;
				fast) extra=(--transport udp -P 1 --cc fast) ;;
				cubic | bbr) extra=(--transport tcp --cc "$tool") ;;
				esac
				if lp_bench "$(ns $TB h1)" "$logf" "$H2:7070" "${extra[@]}"; then
					add "$tool" "$R_GOOD"
					add "$tool.send" "$R_SEND"
					add "$tool.cpu" "$R_CPU"
					add "$tool.streams" "$R_STREAMS"
					add "$tool.resent" "$(awk -v r="$R_RESENT" -v g="$R_GOOD" -v d="$DURATION" 'BEGIN { printf "%.1f", (g > 0) ? 100 * r * 8 / (g * d) : 0 }')"
					add "$tool.repaired" "$R_REPAIRED"
				else fail_once "$tool" "$RUN_ERROR"; fi
				;;
			reserved)
				if lp_cp_reserved "$(ns $TB h1)" "$logf" "$W/src/reserved.bin" "$H2:7070" "$res_bps" "reserved-$run.bin"; then
					add reserved "$R_GOOD"
					add reserved.send "$R_SEND"
					add reserved.cpu "$R_CPU"
					add reserved.streams "$R_STREAMS"
					add reserved.resent "$(awk -v r="$R_RESENT" -v b="$R_BYTES" 'BEGIN { printf "%.1f", (b > 0) ? 100 * r / b : 0 }')"
					add reserved.repaired "$R_REPAIRED"
					add reserved.steered "$R_STEERED"
					add reserved.elapsed "$R_ELAPSED"
				else fail_once reserved "$RUN_ERROR"; fi
				rm -f "$W/root/reserved-$run.bin"
				;;
			iperf3cubic)
				local m0 m1
				m0=$(cpu_mark)
				if timed "$logf" $((DURATION + 30)) ip netns exec "$(ns $TB h1)" iperf3 -c "$H2" -p 5201 -C cubic -t "$DURATION" -J &&
					R_GOOD=$(iperf3_bps "$logf"); then
					m1=$(cpu_mark)
					add iperf3cubic "$R_GOOD"
					add iperf3cubic.cpu "$(cpu_busy "$m0" "$m1")"
				else fail_once iperf3cubic "$RUN_ERROR"; fi
				;;
			uftp)
				((uftp_ok)) || continue
				if uftp_run "$logf" "$size" $((rate_bps / 1000)); then
					add uftp "$R_GOOD"
					add uftp.cpu "$R_CPU"
					add uftp.secs "$R_SECS"
				else fail_once uftp "$RUN_ERROR"; fi
				;;
			esac
		done
	done

	out ""
	out "Testbed path h1 - r1 - wan - r2 - h2: wan $(gbit "$rate_bps") Gbit/s, 100 ms round trip (50 ms one way), 1% random loss, MTU 1500"
	out "  load average at the start: $LOAD0, at the end: $(loadavg)"
	out "  iperf3 -u ceiling (wan at 10G, no loss, -l 1416 -w 16M -b $(gbit "$offer")G offered): $(gbit "$ceil") Gbit/s received, ${ceil_loss}% lost; $note"
	out "  reserved: cp --transport udp --reserve $(gbit "$res_bps")G (the 0.9 of the wan a reservation may take, testbed default reservable) of a $(numfmt --to=iec "$res_size") file (twice the others' time), tmpfs to tmpfs, booked from the controller and steered by the agents; fixed at the reserved rate"
	out "  fixed: bench --cc fixed --rate $(gbit "$res_bps")G, memory to memory, no reservation"
	out "  ${DURATION} s per run (uftp: a $(numfmt --to=iec "$size") file at -R $((rate_bps / 1000)) Kbps -C none), median (min-max) of $RUNS runs"
	out "$(printf '  %-30s %22s %22s %8s %12s %-s' tool "goodput Mbit/s" "sending Mbit/s" streams "cpu %" "verdict")"
	for tool in reserved fixed fast cubic bbr iperf3cubic uftp; do
		local name med send r ok="" strm="-"
		case $tool in
		reserved) name="lightpath cp udp --reserve" ;;
		fixed) name="lightpath udp fixed" ;;
		fast) name="lightpath udp fast" ;;
		cubic) name="lightpath tcp cubic" ;;
		bbr) name="lightpath tcp bbr" ;;
		iperf3cubic) name="iperf3 tcp cubic (receiver)" ;;
		uftp) name="uftp (unicast, fixed rate)" ;;
		esac
		if ! have "$tool"; then
			if [[ -n ${FAILS[$tool]:-} ]]; then failures "$name" "$tool"; else out "$(printf '  %-30s unavailable (%s)' "$name" "${ERR[$tool]:-no result}")"; fi
			continue
		fi
		failures "$name" "$tool"
		# shellcheck disable=SC2046
		med=$(median $(vals "$tool"))
		send="-"
		# shellcheck disable=SC2046
		if have "$tool.send"; then send=$(spread_mbit $(vals "$tool.send")); strm=$(median_f $(vals "$tool.streams")); fi
		case $tool in
		reserved | fixed)
			r=$(ratio "$med" "$res_bps")
			ok="$(verdict "$(ge "$r" 0.95)") ($r of the reserved $(gbit "$res_bps") Gbit/s; target >= 0.95)"
			;;
		fast)
			r=$(ratio "$med" "$rate_bps")
			ok="$(verdict "$(ge "$r" 0.85)") ($r of the link; target >= 0.85)"
			;;
		*)
			r=$(ratio "$med" "$rate_bps")
			ok="(beside: $r of the link)"
			;;
		esac
		# shellcheck disable=SC2046
		out "$(printf '  %-30s %22s %22s %8s %12s %s' "$name" "$(spread_mbit $(vals "$tool"))" "$send" "$strm" "$(spread_num '%.0f' $(vals "$tool.cpu"))" "$ok")"
		emit_json scenario=path tool="$tool" link_bps:="$rate_bps" reserved_bps:="$res_bps" goodput_bps:="$med" ratio:="$r" \
			runs:="[$(vals "$tool" | xargs | tr ' ' ',')]"
	done
	# shellcheck disable=SC2046
	have reserved && out "$(printf '  %-30s steered onto the reservation: %s %% of the bytes; whole copy (booking, setup, verification) %s s' reserved \
		"$(spread_num '%.1f' $(vals reserved.steered))" "$(spread_num '%.1f' $(vals reserved.elapsed))")"
	local t
	for t in reserved fixed fast cubic bbr; do
		# shellcheck disable=SC2046
		have "$t" && out "$(printf '  %-30s sent again: %s %% of the goodput, loss repaired (median) %s' "$t" \
			"$(spread_num '%.1f' $(vals "$t.resent"))" "$(numfmt --to=iec "$(median $(vals "$t.repaired"))")B")"
	done
	stop_servers
	testbed_down "$TB"
}

# ---------------------------------------------------------------------------
# fair

# stamped NAME LOG CMD... runs CMD in the background, every output line
# prefixed with the wall-clock time it was read; sets STAMPED_PID.
stamped() {
	local logf=$1
	shift
	("$@" 2>"$logf.err" | python3 -u -c '
import sys, time
for line in sys.stdin:
    sys.stdout.write("%.3f %s" % (time.time(), line))
' >"$logf") </dev/null &
	STAMPED_PID=$!
	BG_PIDS+=("$STAMPED_PID")
}

# overlap LOG_A LOG_B prints, over the time both flows delivered data, each
# flow's rate in bit/s and Jain's index: "RATE_A RATE_B JAIN SECONDS".
overlap() {
	python3 - "$1" "$2" <<'PY'
import json, sys
def points(path):
    pts, start = [], None
    for line in open(path):
        t, _, rest = line.partition(" ")
        if not rest.startswith("{"):
            continue
        o = json.loads(rest)
        if o.get("type") != "interval":
            continue
        t = float(t)
        if start is None:
            start = t - o["seconds"]
            pts.append((start, 0))
        pts.append((start + o["seconds"], o["bytes"]))
    if len(pts) < 3:
        sys.exit("%s: fewer than two interval lines" % path)
    return pts
def at(pts, t):
    for (t0, b0), (t1, b1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
    return pts[-1][1] if t > pts[-1][0] else 0
a, b = points(sys.argv[1]), points(sys.argv[2])
s, e = max(a[0][0], b[0][0]), min(a[-1][0], b[-1][0])
if e - s < 1:
    sys.exit("the flows overlapped %.1f s only" % (e - s))
ra = (at(a, e) - at(a, s)) * 8 / (e - s)
rb = (at(b, e) - at(b, s)) * 8 / (e - s)
jain = (ra + rb) ** 2 / (2 * (ra * ra + rb * rb)) if ra + rb > 0 else 0
print("%.0f %.0f %.4f %.1f" % (ra, rb, jain, e - s))
PY
}

# flow_wait CASE PID LOG waits for a flow and counts, in EXITS[CASE], the
# flows that ended in an error (their interval lines still count).
flow_wait() {
	local rc=0
	wait "$2" || rc=$?
	if ((rc != 0)); then
		EXITS[$1]=$((${EXITS[$1]:-0} + 1))
		[[ -n ${EXIT_WHY[$1]:-} ]] || EXIT_WHY[$1]="exit $rc: $(last_line "$3.err")"
	fi
}
declare -gA EXITS=() EXIT_WHY=()

scenario_fair() {
	local run v ra rb j secs pa pb
	TB=lpt-fair
	routed_topology "$W/topo/fair.yaml" 500M 25ms 0
	testbed_up "$TB" "$W/topo/fair.yaml"
	start_server_in "$(ns $TB h2)" 7070 "$W/logs/serve-fair.log" "$LP" serve --listen "$H2:7070" --root "$W/root" ||
		die "lightpath serve in h2: $START_ERROR"
	local -a client=(ip netns exec "$(ns $TB h1)" "$LP" bench "lp://$H2:7070" --reverse -P 1 --json)
	RES=() ERR=() FAILS=() SKIPS=() LOAD0=$(loadavg) EXITS=() EXIT_WHY=()
	for ((run = 1; run <= RUNS; run++)); do
		# Two UDP fast flows, the second FAIR_LEAD s later.
		log "fair run $run/$RUNS: two udp fast flows (the second ${FAIR_LEAD} s later)"
		local la=$W/logs/fair-ff-a-$run.log lb=$W/logs/fair-ff-b-$run.log
		stamped "$la" timeout -k 5 $((FAIR_LEAD + DURATION + 40)) "${client[@]}" --transport udp --cc fast -t "$((FAIR_LEAD + DURATION + 1))s"
		pa=$STAMPED_PID
		sleep "$FAIR_LEAD"
		stamped "$lb" timeout -k 5 $((DURATION + 40)) "${client[@]}" --transport udp --cc fast -t "${DURATION}s"
		pb=$STAMPED_PID
		flow_wait ff "$pa" "$la"
		flow_wait ff "$pb" "$lb"
		if v=$(overlap "$la" "$lb" 2>"$W/logs/fair-ff-$run.err"); then
			read -r ra rb j secs <<<"$v"
			add ff.a "$ra"
			add ff.b "$rb"
			add ff.jain "$j"
			add ff.secs "$secs"
			add ff.util "$(awk -v a="$ra" -v b="$rb" 'BEGIN { printf "%.3f", (a + b) / 500e6 }')"
		else fail_once ff "$(last_line "$W/logs/fair-ff-$run.err"); $(last_line "$la.err")"; fi

		# UDP fast beside TCP CUBIC, started together (which one first alternates).
		log "fair run $run/$RUNS: udp fast beside tcp cubic"
		la=$W/logs/fair-ut-udp-$run.log lb=$W/logs/fair-ut-tcp-$run.log
		if ((run % 2)); then
			stamped "$la" timeout -k 5 $((DURATION + 40)) "${client[@]}" --transport udp --cc fast -t "${DURATION}s"
			pa=$STAMPED_PID
			stamped "$lb" timeout -k 5 $((DURATION + 40)) "${client[@]}" --transport tcp --cc cubic -t "${DURATION}s"
			pb=$STAMPED_PID
		else
			stamped "$lb" timeout -k 5 $((DURATION + 40)) "${client[@]}" --transport tcp --cc cubic -t "${DURATION}s"
			pb=$STAMPED_PID
			stamped "$la" timeout -k 5 $((DURATION + 40)) "${client[@]}" --transport udp --cc fast -t "${DURATION}s"
			pa=$STAMPED_PID
		fi
		flow_wait ut "$pa" "$la"
		flow_wait ut "$pb" "$lb"
		if v=$(overlap "$la" "$lb" 2>"$W/logs/fair-ut-$run.err"); then
			read -r ra rb j secs <<<"$v"
			add ut.udp "$ra"
			add ut.tcp "$rb"
			add ut.share "$(awk -v a="$ra" -v b="$rb" 'BEGIN { printf "%.3f", (a + b > 0) ? b / (a + b) : 0 }')"
			add ut.jain "$j"
			add ut.secs "$secs"
			add ut.util "$(awk -v a="$ra" -v b="$rb" 'BEGIN { printf "%.3f", (a + b) / 500e6 }')"
		else fail_once ut "$(last_line "$W/logs/fair-ut-$run.err"); $(last_line "$la.err") $(last_line "$lb.err")"; fi
	done

	out ""
	out "Fairness: h1 - r1 - wan - r2 - h2, wan 500 Mbit/s, 50 ms round trip, no loss; each flow is bench --reverse -P 1 (h2 sends, h1 counts)"
	out "  load average at the start: $LOAD0, at the end: $(loadavg)"
	out "  rates over the time both flows ran (from each client's per-second interval lines), median (min-max) of $RUNS runs"
	local med r
	if have ff.jain; then
		# shellcheck disable=SC2046
		med=$(median_f $(vals ff.jain))
		# shellcheck disable=SC2046
		out "  two udp fast flows, the second ${FAIR_LEAD} s later, overlap $(median_f $(vals ff.secs)) s:"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s Mbit/s' "first flow" "$(spread_mbit $(vals ff.a))")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s Mbit/s' "second flow" "$(spread_mbit $(vals ff.b))")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s   %s' "Jain's index" "$(spread_num '%.3f' $(vals ff.jain))" "$(verdict "$(ge "$med" 0.95)") (target >= 0.95)")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s of the 500 Mbit/s' "both together" "$(spread_num '%.3f' $(vals ff.util))")"
		[[ -z ${EXITS[ff]:-} ]] || out "    $((EXITS[ff])) of $((2 * RUNS)) flows ended in an error, their interval lines counted (first: ${EXIT_WHY[ff]})"
		emit_json scenario=fair case=udp-udp jain:="$med" runs:="[$(vals ff.jain | xargs | tr ' ' ',')]"
	else
		out "  two udp fast flows: unavailable (${ERR[ff]:-no result})"
	fi
	if have ut.share; then
		# shellcheck disable=SC2046
		med=$(median_f $(vals ut.share))
		# shellcheck disable=SC2046
		out "  udp fast beside tcp cubic, started together, overlap $(median_f $(vals ut.secs)) s:"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s Mbit/s' "udp fast" "$(spread_mbit $(vals ut.udp))")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s Mbit/s' "tcp cubic" "$(spread_mbit $(vals ut.tcp))")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s   %s' "tcp's share" "$(spread_num '%.3f' $(vals ut.share))" "$(verdict "$(ge "$med" 0.3333)") (target >= 1/3)")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s' "Jain's index" "$(spread_num '%.3f' $(vals ut.jain))")"
		# shellcheck disable=SC2046
		out "$(printf '    %-24s %s of the 500 Mbit/s' "both together" "$(spread_num '%.3f' $(vals ut.util))")"
		[[ -z ${EXITS[ut]:-} ]] || out "    $((EXITS[ut])) of $((2 * RUNS)) flows ended in an error, their interval lines counted (first: ${EXIT_WHY[ut]})"
		emit_json scenario=fair case=udp-tcp tcp_share:="$med" runs:="[$(vals ut.share | xargs | tr ' ' ',')]"
	else
		out "  udp fast beside tcp cubic: unavailable (${ERR[ut]:-no result})"
	fi
	stop_servers
	testbed_down "$TB"
}

# ---------------------------------------------------------------------------

install_peers
build_lightpath
out "bench/transports.sh on $(uname -n): $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)), Linux $(uname -r), $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'), RUNS=$RUNS DURATION=${DURATION}s, $(date -u '+%Y-%m-%d %H:%M UTC')"
out "lightpath: $LP$([[ -n ${LIGHTPATH:-} ]] && printf ' (given by LIGHTPATH%s)' "${LIGHTPATH_FROM:+, built from $LIGHTPATH_FROM}")"
if wanted veth; then scenario_veth; fi
if wanted path; then scenario_path; fi
if wanted fair; then scenario_fair; fi
out ""
out "took $(awk -v a="$T_START" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"

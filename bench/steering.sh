#!/usr/bin/env bash
# steering.sh: what steering a flow onto a reservation costs and what it
# gives, measured with the real binary: a controller, a testbed with an agent
# in every node (testbed up --agents), and tickets (lightpath ticket open,
# close) whose flows the agents mark, classify and policy-route.
#
#   bench/steering.sh [--json] [--only mark|activation|cross|jumbo|jumbo-time|moves|blackhole]
#
# Scenarios (run as root; each starts its own controller and testbed and
# removes both):
#   mark        the cost of the marking rules: one TCP stream a1 -> b1
#               (lightpath bench, DURATION s) on a path whose links are not
#               the bottleneck (one 10 Gbit/s inter-site link, no delay: the
#               host's CPU and the emulator are the limit), with a ticket for
#               the flow ACTIVE (DSCP marking on a1, DSCP -> firewall mark and
#               policy routing on ra, an htb class and u32 filter on the link,
#               ip rules and a route of the path's MTU on the end hosts) and with it closed, MARK_RUNS alternating runs
#               each (ABBA order; the host-bound throughput varies by several
#               percent from run to run, so it takes many runs to resolve a
#               2% difference). Target: median with / median without >= 0.98
#               (cost < 2%; Lambda Station measured 5-20%).
#   activation  the time from `ticket open` with an immediate start to the
#               path carrying the flow: on examples/two-site.yaml a bench
#               a1 -> b1 runs on wan; a 1 Gbit/s ticket (more than wan may
#               reserve, so it goes over dedicated) is opened, and testbed
#               status --json is polled every POLL_MS (50) ms until the
#               dedicated link's ra>rb counter has taken STEER_BYTES (256 KiB)
#               more. Also the ticket's own "ACTIVE after" (waited_seconds).
#               RUNS runs. Target: median and max < 1 s.
#   cross       UltraScience Net's cross-traffic experiment: one inter-site
#               link of CROSS_RATE (500M), 25 ms one way; the measured flow
#               a1 -> b1 (lightpath bench, DURATION s) with and without a
#               ticket of CROSS_BW (300M); competing unreserved UDP a2 -> b2
#               (iperf3 -u -w 16M) over the same link at 0, 25, 50 and 75% of
#               what the ticket leaves (CROSS_RATE - CROSS_BW), and at the
#               whole link rate (an overload); the median of CROSS_RUNS (3),
#               and the median loss of the UDP (lost_percent of iperf3's
#               receiver). Targets (issue 18): with the ticket, the flow's
#               rate after its first second >= 0.9 of CROSS_BW at every load,
#               and the UDP at 25, 50 and 75% loses < 1% (the overload row
#               has no loss target).
#   jumbo       one TCP flow a1 -> b1 (lightpath bench, DURATION s) steered
#               by a JUMBO_BW (5G) ticket onto a dedicated link of JUMBO_RATE
#               (10G) and JUMBO_DELAY (1ms), 9000 bytes (the routed wan: 1G,
#               1500 bytes), at its own MSS (8960: jumbo segments) and with
#               the MSS capped at 1460 (an nftables rule on a1 and b1 that
#               lowers the SYNs' MSS option; the jumbo runs carry the same
#               rule with 8960, so only the segment size differs): goodput
#               and CPU seconds per gigabit of the sender (lightpath bench,
#               wait4), the receiver (lightpath serve, /proc/PID/stat) and the
#               emulator; RUNS alternating runs each, median and spread.
#               Check: dedicated's max_segment_bytes > 1500 with jumbo and
#               <= 1460 after the first 1460 run.
#   jumbo-time  the time from the reservation becoming ACTIVE to the first
#               jumbo segment on the dedicated link (max_segment_bytes > 1500
#               in testbed status --json, read every POLL_MS), with a bench
#               a1 -> b1 running on wan from 3 s before `ticket open`; watched
#               JT_LIMIT (5) s; then a new connection's first jumbo segment
#               (informational). A testbed per run. Target: < 1 s.
#   moves       the longest goodput gap when a running flow moves: a bench
#               a1 -> b1 on wan; at 3 s a 1G ticket moves it onto dedicated,
#               MOVE_HOLD (5) s later the ticket is closed (released) and the
#               flow goes back to wan; b1's sockets' bytes_received (ss -ti)
#               read every POLL_MS; the longest time between two reads showing
#               progress within 3 s after each move. RUNS runs. Target: no gap
#               of 1 s or more in either direction.
#   blackhole   the time from `testbed link set dedicated --blackhole` (a
#               steered bench running) to the withdrawal: a1's marking rules
#               gone, and the reservation off the link (reserve show --json:
#               degraded, another path, or not ACTIVE); beside them, when the
#               flow's bytes reach wan again (STEER_BYTES: TCP's retransmission
#               timer, backed off in the blackhole, decides that). Each read
#               every POLL_MS; watched BH_LIMIT (8) s, then the link is
#               restored. RUNS runs. Target: withdrawn and the reservation off
#               the link < 2 s (issue 18, part 4); a build whose agents do not
#               probe says so in its row.
#
# Environment: MARK_RUNS (15), RUNS (7), DURATION (8), CROSS_RUNS (3), CROSS_RATE (500M),
# CROSS_BW (300M), POLL_MS (50), STEER_BYTES (262144), JUMBO_RATE (10G), JUMBO_DELAY (1ms),
# JUMBO_BW (5G), JT_LIMIT (5), MOVE_HOLD (5), BH_LIMIT (8), ONLY, JSON=1 (same as
# --json), KEEP=1 (keep the work directory and its logs), LIGHTPATH (a
# lightpath binary to use instead of building one into the work directory).
#
# Output: a table per scenario on stdout, with the command lines and the
# targets; with --json one JSON object per row on stdout instead (the tables
# then go to stderr), the last line the summary. Exit 0 when the
# measurements completed (whatever the verdicts), 2 on the script's own
# errors (not root, a run that failed or timed out, ...).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

RUNS=${RUNS:-7}
MARK_RUNS=${MARK_RUNS:-15}
DURATION=${DURATION:-8}
DURATION=${DURATION%s}
CROSS_RUNS=${CROSS_RUNS:-3}
CROSS_RATE=${CROSS_RATE:-500M}
CROSS_BW=${CROSS_BW:-300M}
POLL_MS=${POLL_MS:-50}
STEER_BYTES=${STEER_BYTES:-262144}
MOVE_HOLD=${MOVE_HOLD:-5}
JT_LIMIT=${JT_LIMIT:-5}
JUMBO_RATE=${JUMBO_RATE:-10G}
BH_LIMIT=${BH_LIMIT:-8}
JUMBO_DELAY=${JUMBO_DELAY:-1ms}
JUMBO_BW=${JUMBO_BW:-5G}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $(id -u) -eq 0 ]] || die "needs root: it builds testbeds (network namespaces, TUN devices, htb) and the agents write nftables rules; run it with sudo"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
((RUNS >= 5)) || log "RUNS=$RUNS: fewer than 5 runs make the medians rough"
[[ $MARK_RUNS =~ ^[1-9][0-9]*$ ]] || die "MARK_RUNS must be a positive integer, not '$MARK_RUNS'"
((MARK_RUNS >= 5)) || log "MARK_RUNS=$MARK_RUNS: fewer than 5 runs make the medians rough"
[[ $CROSS_RUNS =~ ^[1-9][0-9]*$ ]] || die "CROSS_RUNS must be a positive integer, not '$CROSS_RUNS'"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $POLL_MS =~ ^[1-9][0-9]*$ ]] || die "POLL_MS must be a positive integer, not '$POLL_MS'"
[[ $STEER_BYTES =~ ^[1-9][0-9]*$ ]] || die "STEER_BYTES must be a positive integer, not '$STEER_BYTES'"
case $ONLY in '' | mark | activation | cross | jumbo | jumbo-time | moves | blackhole) ;;
*) die "ONLY must be mark, activation, cross, jumbo, jumbo-time, moves or blackhole, not '$ONLY'" ;;
esac
[[ $MOVE_HOLD =~ ^[1-9][0-9]*$ ]] || die "MOVE_HOLD must be whole seconds, not '$MOVE_HOLD'"
[[ $JT_LIMIT =~ ^[1-9][0-9]*$ ]] || die "JT_LIMIT must be whole seconds, not '$JT_LIMIT'"
[[ $BH_LIMIT =~ ^[1-9][0-9]*$ ]] || die "BH_LIMIT must be whole seconds, not '$BH_LIMIT'"
CROSS_RATE_BPS=$(numfmt --from=si "${CROSS_RATE%[bB]ps}" 2>/dev/null) || die "CROSS_RATE must be like 500M, not '$CROSS_RATE'"
CROSS_BW_BPS=$(numfmt --from=si "${CROSS_BW%[bB]ps}" 2>/dev/null) || die "CROSS_BW must be like 300M, not '$CROSS_BW'"
((CROSS_BW_BPS * 10 <= CROSS_RATE_BPS * 9)) || die "CROSS_BW ($CROSS_BW) must fit in the 90% of CROSS_RATE ($CROSS_RATE) reservations may take"
wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lpsteer.XXXXXX) || die "cannot create a work directory in /dev/shm"
chmod 755 "$W"
mkdir -p "$W/logs" "$W/topo" "$W/root"
APT_LOG=$W/logs/apt.log

# Testbeds made by this run, removed at the end whatever happens; the
# controllers and servers are killed by stop_servers (each in its session).
TESTBEDS=()
cleanup() {
	local rc=$? tb
	trap - EXIT INT TERM
	for tb in "${TESTBEDS[@]}"; do "$LP" testbed down --name "$tb" >/dev/null 2>&1 || true; done
	stop_servers
	if [[ $KEEP == 1 ]]; then log "kept $W"; else rm -rf -- "$W"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

verdict() { if awk -v ok="$1" 'BEGIN { exit !ok }'; then echo PASS; else echo FAIL; fi; }
jbool() { if [[ $1 == 1 ]]; then echo true; else echo false; fi; }
declare -A VERDICTS=()

# ---------------------------------------------------------------------------
# Tools

install_peers() {
	command -v python3 >/dev/null || die "python3 is needed to parse results"
	ensure_commands iperf3=iperf3 ss=iproute2 tc=iproute2 nft=nftables
	[[ -z ${UNAVAILABLE[iperf3]:-} ]] || die "iperf3 is needed for the cross traffic: ${UNAVAILABLE[iperf3]}"
	[[ -z ${UNAVAILABLE[tc]:-} ]] || die "tc is needed to read the htb classes: ${UNAVAILABLE[tc]}"
}

LP=${LIGHTPATH:-$W/lightpath}

# one_link_topology FILE RATE DELAY writes two sites of two hosts and a
# router each (the addresses of examples/two-site.yaml: a1 198.18.1.1, a2
# .1.2, b1 198.18.2.1, b2 .2.2) on 10 Gbit/s LANs, joined by one link,
# "dedicated", of RATE and DELAY. With no other way between the sites, all
# traffic crosses it: the measured flow with and without a ticket, and the
# cross traffic, so the ticket changes nothing but its own rules.
one_link_topology() {
	cat >"$1" <<-EOF
		sites:
		  - name: site-a
		  - name: site-b
		nodes:
		  - {name: a1, site: site-a}
		  - {name: a2, site: site-a}
		  - {name: ra, site: site-a, role: router}
		  - {name: b1, site: site-b}
		  - {name: b2, site: site-b}
		  - {name: rb, site: site-b, role: router}
		links:
		  - &lan {name: a1-ra, ends: [a1, ra], mtu: 9000}
		  - {<<: *lan, name: a2-ra, ends: [a2, ra]}
		  - {<<: *lan, name: b1-rb, ends: [b1, rb]}
		  - {<<: *lan, name: b2-rb, ends: [b2, rb]}
		  - {name: dedicated, ends: [ra, rb], role: dedicated, rate: $2, delay: $3, mtu: 9000}
	EOF
	if [[ -n ${4:-} ]]; then printf '  - %s\n' "$4" >>"$1"; fi
}

# setup TB TOPOLOGY: agents_testbed_up (lib.sh) for the six nodes of these
# topologies.
setup() { agents_testbed_up "$1" "$2" 6; }

# teardown TB removes the testbed (its agents with it) and stops the
# controller and the servers.
teardown() {
	"$LP" testbed down --name "$1" >/dev/null 2>&1 || true
	stop_servers
	unset LIGHTPATH_CONTROLLER LIGHTPATH_CONTROLLER_TOKEN
}

# serve TB starts lightpath serve on b1:7070, the measured flow's server.
serve() {
	start_server_in "$(ns "$1" b1)" 7070 "$W/logs/serve-$1.log" "$LP" serve --listen 198.18.2.1:7070 --root "$W/root" ||
		die "lightpath serve in b1: $START_ERROR"
}

FLOW='tcp 198.18.1.1 > 198.18.2.1:7070'

# open_ticket TB BANDWIDTH LOG opens a one-hour ticket for FLOW and waits
# until it is ACTIVE; it sets TICKET (its id), TICKET_PATH (its links) and
# TICKET_WAITED (the ticket's own "ACTIVE after", in seconds).
open_ticket() {
	local logf=$3
	timed "$logf" 40 "$LP" ticket open --from a1 --to b1 --flows "$FLOW" --bandwidth "$2" --duration 1h \
		--wait 30s --json || die "ticket open: $RUN_ERROR"
	read -r TICKET TICKET_PATH TICKET_WAITED < <(python3 -c '
import json, sys
t = json.loads(open(sys.argv[1]).read().splitlines()[-1])
if t.get("state") != "ACTIVE":
    sys.exit("ticket %s is %s" % (t.get("id"), t.get("state")))
print(t["id"], ",".join(h["link"] for h in t["path"]), t.get("waited_seconds", -1))' "$logf") ||
		die "ticket open: not ACTIVE (see $logf)"
	log "ticket $TICKET ACTIVE after ${TICKET_WAITED}s over $TICKET_PATH"
}

# close_ticket TB ID closes a ticket and waits until the agents have taken
# its class off the dedicated link and its marking rule off a1.
close_ticket() {
	timeout 30 "$LP" ticket close "$2" --reason "bench done" >"$W/logs/close.out" 2>&1 ||
		die "ticket close $2: $(last_line "$W/logs/close.out")"
	wait_unsteered "$1" "$2"
}

# wait_unsteered TB ID waits until the agents have taken a closed ticket's
# class off the dedicated link and its marking rule off a1.
wait_unsteered() {
	local tb=$1 i
	for ((i = 0; i < 100; i++)); do
		if [[ $(res_classes "$tb") == 0 ]] &&
			! ip netns exec "$(ns "$tb" a1)" nft list ruleset 2>/dev/null | grep -q 'dscp set'; then
			return 0
		fi
		sleep 0.1
	done
	die "ticket $2 closed, but its rules are still there after 10 s"
}

# res_classes TB prints how many reservation classes (1:100 and up) the
# dedicated link's ra>rb egress has.
res_classes() {
	ip netns exec "$(ns "$1" ra)" tc class show dev dedicated | awk '$2 == "htb" { split($3, a, ":"); if (length(a[2]) >= 3) n++ } END { print n + 0 }'
}

# class_bytes TB prints the bytes sent so far through the reservation
# classes of the dedicated link's ra>rb egress: how much was steered into
# them (a class's counters start at zero when an agent makes it).
class_bytes() {
	ip netns exec "$(ns "$1" ra)" tc -s class show dev dedicated | awk '
		$1 == "class" { split($3, a, ":"); want = (length(a[2]) >= 3) }
		$1 == "Sent" && want { s += $2; want = 0 }
		END { printf "%.0f\n", s }'
}

# bench_run TB LOG [ARGS...] runs lightpath bench a1 -> b1:7070 for
# DURATION s and sets BPS and BYTES from its summary, and STEADY_BPS to its
# rate after the first interval event (its first second, slow start; the
# summary's rate when there are fewer than two intervals).
bench_run() {
	local tb=$1 logf=$2
	shift 2
	timed "$logf" $((DURATION + 30)) ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t "${DURATION}s" --json "$@" ||
		die "lightpath bench a1 -> b1: $RUN_ERROR"
	read -r BPS BYTES STEADY_BPS < <(python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]).read().splitlines() if l.strip()]
s = lines[-1]
iv = [l for l in lines if l.get("type") == "interval"]
steady = s["throughput_bps"]
if len(iv) >= 2 and iv[-1]["seconds"] - iv[0]["seconds"] > 0.5:
    steady = (iv[-1]["bytes"] - iv[0]["bytes"]) * 8 / (iv[-1]["seconds"] - iv[0]["seconds"])
print("%.0f %d %.0f" % (s["throughput_bps"], s["bytes"], steady))' "$logf") || die "lightpath bench: no summary in $logf"
}

# stats V... prints the median, min, max and (max - min) / median of its
# arguments.
stats() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.0f %.0f %.0f %.4f\n", m, v[1], v[NR], (v[NR] - v[1]) / m }'
}

# fmed V... and fmax V... print the median and the largest of their
# arguments with three decimals.
fmed() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.3f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
fmax() { printf '%s\n' "$@" | sort -g | tail -n 1 | awk '{ printf "%.3f\n", $1 }'; }

# jfields JSON KEY... prints the KEYs of a JSON object on one line (null
# for a missing or null one).
jfields() { python3 -c 'import json, sys; r = json.loads(sys.argv[1]); print(*(json.dumps(r.get(k)) if not isinstance(r.get(k), str) else r[k] for k in sys.argv[2:]))' "$@"; }

mbit() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }
jlist() { local IFS=,; printf '[%s]' "$*"; }

# ---------------------------------------------------------------------------
# The cost of the marking rules

scenario_mark() {
	local tb=lpst-mark run order c frac i
	local -a with=() without=() steer_with=() steer_without=() pairs=()
	one_link_topology "$W/topo/mark.yaml" 10G 0s
	setup "$tb" "$W/topo/mark.yaml"
	serve "$tb"
	TICKET=
	# One run of case c (with or without): the ticket is opened or closed
	# first if needed, so the order ABBA BAAB ... changes it only every
	# other run.
	measure() {
		local c=$1 b0 b1
		if [[ $c == with && -z $TICKET ]]; then
			open_ticket "$tb" 1G "$W/logs/mark-open-$run.json"
			[[ $TICKET_PATH == a1-ra,dedicated,b1-rb ]] || die "ticket path $TICKET_PATH: want a1-ra,dedicated,b1-rb"
		elif [[ $c == without && -n $TICKET ]]; then
			close_ticket "$tb" "$TICKET"
			TICKET=
		fi
		b0=$(class_bytes "$tb")
		bench_run "$tb" "$W/logs/mark-$c-$run.json"
		b1=$(class_bytes "$tb")
		frac=$(awk -v a="$b0" -v b="$b1" -v n="$BYTES" 'BEGIN { printf "%.3f", (b - a) / n }')
		if [[ $c == with ]]; then with+=("$BPS") steer_with+=("$frac"); else without+=("$BPS") steer_without+=("$frac"); fi
		log "mark run $run/$MARK_RUNS $c: $(gbit "$BPS") Gbit/s, steered $frac"
	}
	for ((run = 1; run <= MARK_RUNS; run++)); do
		if ((run % 2)); then order="without with"; else order="with without"; fi
		for c in $order; do measure "$c"; done
		pairs+=("$(awk -v a="${with[-1]}" -v b="${without[-1]}" 'BEGIN { printf "%.4f", a / b }')")
	done
	[[ -z $TICKET ]] || close_ticket "$tb" "$TICKET"
	teardown "$tb"

	local sw so ratio paired pmean pci cost ok
	read -r -a sw < <(stats "${with[@]}")
	read -r -a so < <(stats "${without[@]}")
	ratio=$(awk -v a="${sw[0]}" -v b="${so[0]}" 'BEGIN { printf "%.3f", a / b }')
	paired=$(fmed "${pairs[@]}")
	# The paired ratios' mean and its 95% interval (t for n - 1 degrees of
	# freedom, about 2.1 for 15 runs): the resolution of this run.
	read -r pmean pci < <(printf '%s\n' "${pairs[@]}" | awk '{ v[NR] = $1; s += $1 } END {
		m = s / NR; for (i = 1; i <= NR; i++) q += (v[i] - m) ^ 2
		t = (NR <= 5) ? 2.78 : (NR <= 10) ? 2.26 : (NR <= 20) ? 2.1 : 2.0
		printf "%.3f %.3f\n", m, (NR > 1) ? t * sqrt(q / (NR - 1) / NR) : 0 }')
	cost=$(awk -v r="$ratio" 'BEGIN { printf "%.1f", 100 * (1 - r) }')
	ok=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.98) }')
	VERDICTS[mark]=$(verdict "$ok")
	out ""
	out "The cost of the marking rules: one TCP stream a1 -> b1 on one 10 Gbit/s link without delay (the host is the limit)"
	out "  ip netns exec lp-$tb-a1 lightpath bench lp://198.18.2.1:7070 -t ${DURATION}s   ($MARK_RUNS runs per case, alternating ABBA)"
	out "  with: lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth 1G --duration 1h   (ACTIVE; closed for without)"
	out "$(printf '  %-30s %9s %9s %9s %8s %9s   %s' case "median" min max spread steered "runs (Gbit/s)")"
	local -a gw=() go=()
	for i in "${with[@]}"; do gw+=("$(gbit "$i")"); done
	for i in "${without[@]}"; do go+=("$(gbit "$i")"); done
	out "$(printf '  %-30s %9s %9s %9s %7.1f%% %9s   %s' "without (ticket closed)" "$(gbit "${so[0]}")" "$(gbit "${so[1]}")" \
		"$(gbit "${so[2]}")" "$(awk -v s="${so[3]}" 'BEGIN { print 100 * s }')" "$(fmed "${steer_without[@]}")" "${go[*]}")"
	out "$(printf '  %-30s %9s %9s %9s %7.1f%% %9s   %s' "with (ticket ACTIVE, marked)" "$(gbit "${sw[0]}")" "$(gbit "${sw[1]}")" \
		"$(gbit "${sw[2]}")" "$(awk -v s="${sw[3]}" 'BEGIN { print 100 * s }')" \
		"$(fmed "${steer_with[@]}")" "${gw[*]}")"
	out "$(printf '  %-30s %9s   (cost %s%%; the %d paired ratios: median %s, mean %s +- %s)   %s' "ratio with / without" "$ratio" "$cost" \
		"$MARK_RUNS" "$paired" "$pmean" "$pci" \
		"${VERDICTS[mark]} (target cost < 2%; Lambda Station measured 5-20%)")"
	out "  (Gbit/s; spread = (max - min) / median; steered = bytes through the ticket's htb class on ra / the bench's payload bytes: ~1.006 with headers)"
	emit_json scenario=mark case=without median_bps:="${so[0]}" min_bps:="${so[1]}" max_bps:="${so[2]}" spread:="${so[3]}" \
		runs_bps:="$(jlist "${without[@]}")" steered:="$(jlist "${steer_without[@]}")"
	emit_json scenario=mark case=with median_bps:="${sw[0]}" min_bps:="${sw[1]}" max_bps:="${sw[2]}" spread:="${sw[3]}" \
		runs_bps:="$(jlist "${with[@]}")" steered:="$(jlist "${steer_with[@]}")"
	emit_json scenario=mark ratio:="$ratio" paired_ratio_median:="$paired" paired_ratio_mean:="$pmean" paired_ratio_ci95:="$pci" cost_percent:="$cost" target="cost < 2%" pass:="$(jbool "$ok")"
}

# ---------------------------------------------------------------------------
# From ticket open to the flow on the path

# poll.py LP TB LINK FROM STEER_BYTES POLL_MS LIMIT_S -- CMD...: takes the
# counter of one direction of a link from testbed status --json, checks that
# it is still, runs CMD (ticket open) and polls the counter every POLL_MS ms
# until it has taken STEER_BYTES more. Prints one JSON object: path_s (from
# starting CMD to the end of the first read showing the bytes: an upper
# bound), before_s (the start of the read before it, which did not show
# them: a lower bound), open_s (CMD's wall time), the
# mean time one read of testbed status took, and CMD's last output line
# (the ticket).
write_poller() {
	cat >"$W/poll.py" <<-'PY'
		import json, subprocess, sys, threading, time
		lp, tb, link, frm, thresh, poll_ms, limit = sys.argv[1:8]
		cmd = sys.argv[9:]
		thresh, poll, limit = int(thresh), int(poll_ms) / 1000, float(limit)
		def counter():
		    out = subprocess.run([lp, "testbed", "status", "--name", tb, "--json"], capture_output=True,
		                         text=True, timeout=5, check=True).stdout
		    for l in json.loads(out)["links"]:
		        if l["name"] == link:
		            for d in l["directions"]:
		                if d["from"] == frm:
		                    return d["bytes_in"]
		    sys.exit("no direction %s of link %s" % (frm, link))
		a = counter(); time.sleep(0.3); base = counter()
		if base - a >= thresh:
		    sys.exit("%s took %d bytes in 0.3 s before the ticket: the flow is there already" % (link, base - a))
		t0 = time.monotonic()
		p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
		ended = {}
		def reap():
		    o, e = p.communicate()
		    ended.update(t=time.monotonic() - t0, out=o, err=e)
		waiter = threading.Thread(target=reap, daemon=True)
		waiter.start()
		path_s = None
		samples = []  # (start, end) of each read, seconds after starting CMD
		while time.monotonic() - t0 < limit:
		    s0 = time.monotonic()
		    c = counter()
		    now = time.monotonic() - t0
		    samples.append((s0 - t0, now))
		    if c - base >= thresh:
		        path_s = now
		        break
		    time.sleep(max(0.0, poll - (time.monotonic() - s0)))
		waiter.join(max(1.0, limit - (time.monotonic() - t0)))
		if waiter.is_alive():
		    p.kill(); waiter.join()
		open_s, out, err = ended["t"], ended["out"], ended["err"]
		# The bytes were not there at some moment of the read before the
		# last: from its start on, they may have been.
		before_s = samples[-2][0] if path_s is not None and len(samples) > 1 else 0.0
		reads = [b - a for a, b in samples]
		read_s = sum(reads) / len(reads) if reads else 0.0
		lines = out.strip().splitlines()
		print(json.dumps({"path_s": path_s, "before_s": before_s, "open_s": open_s, "open_rc": p.returncode, "read_s": read_s,
		                  "samples": len(samples), "ticket": json.loads(lines[-1]) if lines else None,
		                  "stderr": err.strip()[-300:]}))
	PY
}

scenario_activation() {
	local tb=lpst-act run bpid res path_s before_s active_s open_s read_s id links ok_max
	local -a paths=() befores=() actives=() opens=() reads=()
	setup "$tb" "$REPO/examples/two-site.yaml"
	serve "$tb"
	write_poller
	for ((run = 1; run <= RUNS; run++)); do
		# The flow: a bench that outlasts the measurement, on wan until the
		# ticket moves it.
		timeout -k 5 40 ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t 12s --json \
			>"$W/logs/act-bench-$run.json" 2>&1 </dev/null &
		bpid=$!
		sleep 3
		res=$(timeout -k 5 60 python3 "$W/poll.py" "$LP" "$tb" dedicated ra "$STEER_BYTES" "$POLL_MS" 10 -- \
			"$LP" ticket open --from a1 --to b1 --flows "$FLOW" --bandwidth 1G --duration 1h --wait 10s --json 2>"$W/logs/act-poll-$run.err") ||
			die "activation run $run: $(last_line "$W/logs/act-poll-$run.err")"
		printf '%s\n' "$res" >"$W/logs/act-poll-$run.json"
		read -r path_s before_s active_s open_s read_s id links < <(python3 -c '
import json, sys
r = json.loads(sys.argv[1])
t = r["ticket"] or {}
if r["open_rc"] != 0 or t.get("state") != "ACTIVE":
    sys.exit("ticket open exit %s, state %s: %s" % (r["open_rc"], t.get("state"), r["stderr"]))
if r["path_s"] is None:
    sys.exit("the flow was not on the dedicated link within 10 s of ticket open")
print("%.3f %.3f %.3f %.3f %.3f %s %s" % (r["path_s"], r["before_s"], t.get("waited_seconds", -1), r["open_s"], r["read_s"], t["id"],
      ",".join(h["link"] for h in t["path"])))' "$res") || die "activation run $run: see $W/logs/act-poll-$run.json"
		[[ $links == a1-ra,dedicated,b1-rb ]] || die "activation run $run: ticket path $links, want a1-ra,dedicated,b1-rb"
		paths+=("$path_s") befores+=("$before_s") actives+=("$active_s") opens+=("$open_s") reads+=("$read_s")
		log "activation run $run/$RUNS: on dedicated ${before_s}-${path_s}s after open (ACTIVE after ${active_s}s, open returned by ${open_s}s)"
		close_ticket "$tb" "$id"
		wait "$bpid" || die "activation run $run: the flow's bench failed: $(last_line "$W/logs/act-bench-$run.json")"
	done
	teardown "$tb"

	local -a sp sa so
	local read_ms
	sp=("$(fmed "${paths[@]}")" "$(fmax "${paths[@]}")")
	sa=("$(fmed "${actives[@]}")" "$(fmax "${actives[@]}")")
	so=("$(fmed "${opens[@]}")" "$(fmax "${opens[@]}")")
	read_ms=$(printf '%s\n' "${reads[@]}" | awk '{ s += $1 } END { printf "%.0f", 1000 * s / NR }')
	ok_max=$(awk -v m="${sp[1]}" 'BEGIN { print (m < 1) }')
	VERDICTS[activation]=$(verdict "$ok_max")
	out ""
	out "From ticket open (immediate start) to the flow on the path: examples/two-site.yaml, a bench a1 -> b1 running on wan"
	out "  lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth 1G --duration 1h --json"
	out "  (1G is more than wan may reserve, so the ticket goes a1-ra,dedicated,b1-rb; testbed status --json read every $POLL_MS ms"
	out "   (one read takes ${read_ms} ms); on the path = dedicated ra>rb has taken $STEER_BYTES bytes more; $RUNS runs)"
	out "$(printf '  %-44s %8s %8s   %s' measure median max "runs (s)")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "open -> the flow's bytes on dedicated" "${sp[0]}" "${sp[1]}" "${paths[*]}" "${VERDICTS[activation]} (target < 1 s)")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "  the read before it (did not show them yet)" "$(fmed "${befores[@]}")" "$(fmax "${befores[@]}")" "${befores[*]}" "(lower bound)")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "the ticket's own \"ACTIVE after\"" "${sa[0]}" "${sa[1]}" "${actives[*]}" "(informational)")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "ticket open's wall time (book, wait, print)" "${so[0]}" "${so[1]}" "${opens[*]}" "(informational)")"
	emit_json scenario=activation measure=path median_s:="${sp[0]}" max_s:="${sp[1]}" runs_s:="$(jlist "${paths[@]}")" \
		lower_bounds_s:="$(jlist "${befores[@]}")" poll_ms:="$POLL_MS" read_ms:="$read_ms" target="< 1 s" pass:="$(jbool "$ok_max")"
	emit_json scenario=activation measure=active_after median_s:="${sa[0]}" max_s:="${sa[1]}" runs_s:="$(jlist "${actives[@]}")"
	emit_json scenario=activation measure=open_wall median_s:="${so[0]}" max_s:="${so[1]}" runs_s:="$(jlist "${opens[@]}")"
}

# ---------------------------------------------------------------------------
# Timelines: what a running flow does while the path under it changes

# timeline.py SPEC runs the commands of a scenario at set times while
# sampling, from its own threads: the receiving side's TCP sockets (ss -ti
# in rx_ns, every poll_ms: the sum of bytes_received of the connections to
# port, what the application got, the largest rcvmss, and how many have
# received 64 KiB or more: the data connections), the links'
# directions leaving node `from` (testbed status --json, every status_ms:
# bytes_in and max_segment_bytes of each link in links) and, once the
# action named "open" has printed a ticket, that reservation (reserve show
# ID --json, every status_ms: state, degraded, its links) and, with
# steer_ns, that namespace's nftables rules that set a DSCP (nft list
# ruleset, every poll_ms: how many; none once the agent withdrew its
# marking). SPEC is JSON:
# {lp, tb, rx_ns, port, from, links, poll_ms, status_ms, until, steer_ns, actions:
# [{name, at, cmd, bg, timeout}]}; times are seconds after the start, and
# "{id}" in a cmd stands for the ticket "open" printed. bg
# actions are started and left running (the flow), the others waited for
# in turn. It prints one JSON object: every sample as [start, end, ...]
# (the start and end of its read) and every action's start, end, exit
# status and last output line.
write_timeline() {
	cat >"$W/timeline.py" <<-'PY'
		import json, re, subprocess, sys, threading, time
		spec = json.loads(sys.argv[1])
		t0 = time.monotonic()
		def now():
		    return time.monotonic() - t0
		stop = threading.Event()
		out = {"rx": [], "links": [], "res": [], "steer": [], "actions": [], "errors": {"rx": 0, "links": 0, "res": 0, "steer": 0}}
		res_id = [None]
		def every(period, fn, key):
		    while not stop.is_set():
		        a = now()
		        try:
		            v = fn()
		        except Exception:
		            out["errors"][key] += 1
		            v = None
		        if v is not None:
		            out[key].append([a, now()] + v)
		        time.sleep(max(0.0, period - (now() - a)))
		rxcmd = ["nsenter", "--net=/run/netns/" + spec["rx_ns"], "ss", "-tinH", "state", "established",
		         "( sport = :%d )" % spec["port"]]
		def rx():
		    o = subprocess.run(rxcmd, capture_output=True, text=True, timeout=5, check=True).stdout
		    got = [int(x) for x in re.findall(r"bytes_received:(\d+)", o)]
		    return [sum(got), max([int(x) for x in re.findall(r"rcvmss:(\d+)", o)] or [0]),
		            sum(1 for x in got if x >= 65536)]
		def links():
		    o = subprocess.run([spec["lp"], "testbed", "status", "--name", spec["tb"], "--json"], capture_output=True,
		                       text=True, timeout=5, check=True).stdout
		    v = {}
		    for l in json.loads(o)["links"]:
		        if l["name"] in spec["links"]:
		            for d in l["directions"]:
		                if d["from"] == spec["from"]:
		                    v[l["name"]] = [d["bytes_in"], d.get("max_segment_bytes", 0)]
		    return [v]
		def res():
		    if res_id[0] is None:
		        return None
		    o = subprocess.run([spec["lp"], "reserve", "show", res_id[0], "--json"], capture_output=True, text=True,
		                       timeout=5, check=True).stdout
		    r = json.loads(o.strip().splitlines()[0])
		    return [r.get("state"), bool(r.get("degraded")), ",".join(h["link"] for h in r.get("path") or [])]
		def steer():
		    if not spec.get("steer_ns"):
		        return None
		    o = subprocess.run(["nsenter", "--net=/run/netns/" + spec["steer_ns"], "nft", "list", "ruleset"], capture_output=True,
		                       text=True, timeout=5, check=True).stdout
		    return [o.count("dscp set")]
		threads = [threading.Thread(target=every, args=(spec["poll_ms"] / 1000, steer, "steer"), daemon=True),
		           threading.Thread(target=every, args=(spec["poll_ms"] / 1000, rx, "rx"), daemon=True),
		           threading.Thread(target=every, args=(spec["status_ms"] / 1000, links, "links"), daemon=True),
		           threading.Thread(target=every, args=(spec["status_ms"] / 1000, res, "res"), daemon=True)]
		for th in threads:
		    th.start()
		bg = []
		for a in spec["actions"]:
		    time.sleep(max(0.0, a["at"] - now()))
		    rec = {"name": a["name"], "start": now()}
		    a["cmd"] = [c.replace("{id}", res_id[0] or "") for c in a["cmd"]]
		    if a.get("bg"):
		        p = subprocess.Popen(a["cmd"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
		        bg.append((rec, p, a.get("timeout", 60)))
		    else:
		        try:
		            p = subprocess.run(a["cmd"], capture_output=True, text=True, timeout=a.get("timeout", 30))
		            rec.update(rc=p.returncode, out=(p.stdout.strip().splitlines() or [""])[-1], err=p.stderr.strip()[-300:])
		        except subprocess.TimeoutExpired:
		            rec.update(rc=124, out="", err="timed out")
		        if a["name"] == "open" and rec["rc"] == 0:
		            try:
		                res_id[0] = json.loads(rec["out"])["id"]
		            except Exception:
		                pass
		        rec["end"] = now()
		        out["actions"].append(rec)
		time.sleep(max(0.0, spec["until"] - now()))
		stop.set()
		for th in threads:
		    th.join(10)
		for rec, p, limit in bg:
		    try:
		        o, e = p.communicate(timeout=limit)
		    except subprocess.TimeoutExpired:
		        p.kill()
		        o, e = p.communicate()
		    rec.update(rc=p.returncode, out=(o.strip().splitlines() or [""])[-1], err=e.strip()[-300:], end=now())
		    out["actions"].append(rec)
		out["actions"].sort(key=lambda r: r["start"])
		print(json.dumps(out))
	PY
}

# timeline TB LOG SPEC runs timeline.py with SPEC (JSON) and leaves its
# output in LOG.
timeline() {
	timeout -k 5 120 python3 "$W/timeline.py" "$3" >"$2" 2>"$2.err" ||
		die "timeline on $1: $(last_line "$2.err")"
}

# two_site_up TB: a controller and agents on examples/two-site.yaml
# (routed wan, 1 Gbit/s, 1500 bytes; dedicated, 2 Gbit/s, 9000 bytes), and
# lightpath serve in b1.
two_site_up() {
	setup "$1" "$REPO/examples/two-site.yaml"
	serve "$1"
}

# flow_spec_json TB UNTIL ACTIONS... prints a timeline SPEC for the two-site
# testbed TB: the flow's receiver b1:7070, the ra>rb directions of wan and
# dedicated, a1's marking rules, and ACTIONS (JSON objects).
flow_spec_json() {
	local tb=$1 until=$2
	shift 2
	python3 - "$LP" "$tb" "$(ns "$tb" b1)" "$POLL_MS" "$until" "$@" <<-'PY'
		import json, sys
		lp, tb, rxns, poll, until = sys.argv[1:6]
		print(json.dumps({"lp": lp, "tb": tb, "rx_ns": rxns, "steer_ns": "lp-%s-a1" % tb, "port": 7070, "from": "ra", "links": ["wan", "dedicated"],
		                  "poll_ms": int(poll), "status_ms": int(poll), "until": float(until),
		                  "actions": [json.loads(a) for a in sys.argv[6:]]}))
	PY
}

# act NAME AT [bg] -- CMD... prints one action of a timeline SPEC.
act() {
	local name=$1 at=$2 bg=false
	shift 2
	if [[ $1 == bg ]]; then bg=true; shift; fi
	[[ $1 == -- ]] && shift
	python3 -c 'import json, sys; print(json.dumps({"name": sys.argv[1], "at": float(sys.argv[2]), "bg": sys.argv[3] == "true", "cmd": sys.argv[4:], "timeout": 60}))' \
		"$name" "$at" "$bg" "$@"
}

# analyse.py KIND TIMELINE STEER_BYTES reads timeline.py's output and prints
# one JSON object of the KIND's figures (moves, jumbo-time or blackhole).
# A gap is the time between two successive reads of b1's sockets that
# showed bytes received (reads every POLL_MS, so a gap is at least that);
# "on a link" is the link's ra>rb counter having taken STEER_BYTES.
write_analyser() {
	cat >"$W/analyse.py" <<-'PY'
		import json, sys
		kind, path, steer = sys.argv[1], sys.argv[2], int(sys.argv[3])
		t = json.load(open(path))
		acts = {a["name"]: a for a in t["actions"]}
		for a in t["actions"]:
		    if a.get("rc") not in (0, None) and a["name"] != "flow":
		        sys.exit("%s exited %s: %s" % (a["name"], a.get("rc"), a.get("err") or a.get("out")))
		rx, links, res = t["rx"], t["links"], t["res"]
		if len(rx) < 5:
		    sys.exit("only %d reads of b1's sockets (%s)" % (len(rx), t["errors"]))
		pts = [rx[0][1]] + [rx[i][1] for i in range(1, len(rx)) if rx[i][2] > rx[i - 1][2]]
		def gap(a, b):
		    best, at = 0.0, None
		    for x, y in zip(pts, pts[1:]):
		        if y >= a and x <= b and y - x > best:
		            best, at = y - x, x
		    return best, at
		def link_at(name, when):
		    # the counter of the last read that ended by `when`
		    v = None
		    for s in links:
		        if s[1] <= when and name in s[2]:
		            v = s[2][name][0]
		    return v
		def moved(name, a, b):
		    x, y = link_at(name, a), link_at(name, b)
		    return None if x is None or y is None else y - x
		def first_read(after, pred, before=1e9):
		    # (start of the read before, end of the first read after `after`
		    # (and starting before `before`) for which pred holds)
		    prev = after
		    for s in links:
		        if s[0] < after:
		            continue
		        if s[0] >= before:
		            break
		        if pred(s):
		            return prev, s[1]
		        prev = s[0]
		    return None, None
		def frac(a, b):
		    d, w = moved("dedicated", a, b), moved("wan", a, b)
		    return None if d is None or w is None or d + w == 0 else round(d / (d + w), 3)
		def rmss(a, b):
		    return max([s[3] for s in rx if a <= s[0] <= b] or [0])
		out = {"reads": {"rx": len(rx), "links": len(links), "res": len(res), "errors": t["errors"]},
		       "rx_read_ms": round(1000 * sum(s[1] - s[0] for s in rx) / len(rx), 1),
		       "status_read_ms": round(1000 * sum(s[1] - s[0] for s in links) / max(1, len(links)), 1)}
		o = acts["open"]
		out["open_s"] = round(o["end"] - o["start"], 3)
		out["ticket"] = json.loads(o["out"])["id"]
		if kind == "moves":
		    c = acts["close"]
		    g0, _ = gap(1.0, o["start"] - 0.1)
		    g1, a1 = gap(o["start"], o["end"] + 3)
		    g2, a2 = gap(c["start"], c["end"] + 3)
		    out.update(base_gap_s=round(g0, 3), to_dedicated_gap_s=round(g1, 3), to_dedicated_gap_at_s=round((a1 or 0) - o["start"], 3),
		               to_routed_gap_s=round(g2, 3), to_routed_gap_at_s=round((a2 or 0) - c["start"], 3),
		               dedicated_while_active=frac(o["end"] + 1, c["start"]), dedicated_after_close=frac(c["end"] + 1, c["end"] + 3),
		               rcv_mss_routed=rmss(1.0, o["start"]), rcv_mss_steered=rmss(o["end"] + 1, c["start"]))
		elif kind == "jumbo-time":
		    base = None
		    for s in links:
		        if s[1] <= o["start"] and "dedicated" in s[2]:
		            base = s[2]["dedicated"][1]
		    out["max_segment_before"] = base
		    f2 = acts["flow2"]
		    lo, hi = first_read(o["start"], lambda s: "dedicated" in s[2] and s[2]["dedicated"][1] > 1500)
		    if hi is not None and hi > f2["start"]:
		        lo, hi = None, None  # not before the second flow started: not the first flow's
		    out["jumbo_after_active_s"] = None if hi is None else round(hi - o["end"], 3)
		    out["jumbo_after_active_lower_s"] = None if lo is None else round(lo - o["end"], 3)
		    out["jumbo_after_open_s"] = None if hi is None else round(hi - o["start"], 3)
		    d0 = link_at("dedicated", o["start"])
		    lo2, hi2 = first_read(o["start"], lambda s: "dedicated" in s[2] and d0 is not None and s[2]["dedicated"][0] - d0 >= steer)
		    out["on_dedicated_after_open_s"] = None if hi2 is None else round(hi2 - o["start"], 3)
		    last = [s for s in links if "dedicated" in s[2]]
		    out["max_segment_end"] = last[-1][2]["dedicated"][1] if last else None
		    out["rcv_mss_steered"] = rmss(o["end"], f2["start"])
		    out["watched_s"] = round(f2["start"] - o["end"], 3)
		    # The second flow, a connection made while steered: its first
		    # jumbo segment, when the first flow had sent none.
		    m0 = None
		    for s in links:
		        if s[1] <= f2["start"] and "dedicated" in s[2]:
		            m0 = s[2]["dedicated"][1]
		    out["max_segment_before_flow2"] = m0
		    out["new_jumbo_after_start_s"] = None
		    out["new_jumbo_after_data_s"] = None
		    if m0 is not None and m0 <= 1500:
		        lo, hi = first_read(f2["start"], lambda s: "dedicated" in s[2] and s[2]["dedicated"][1] > 1500)
		        out["new_jumbo_after_start_s"] = None if hi is None else round(hi - f2["start"], 3)
		        # from the first read of b1's sockets showing the second data
		        # connection (the bench's own start-up left out)
		        two = [x for x in rx if x[0] >= f2["start"] and x[4] >= 2]
		        if hi is not None and two:
		            out["new_jumbo_after_data_s"] = round(hi - two[0][1], 3)
		        out["rcv_mss_new"] = max([x[3] for x in rx if x[0] >= f2["start"]] or [0])
		elif kind == "blackhole":
		    b, up = acts["blackhole"], acts["up"]
		    w0 = link_at("wan", b["end"])
		    lo, hi = first_read(b["end"], lambda s: "wan" in s[2] and w0 is not None and s[2]["wan"][0] - w0 >= steer, up["start"])
		    out["routed_after_s"] = None if hi is None else round(hi - b["start"], 3)
		    out["routed_after_lower_s"] = None if lo is None else round(lo - b["start"], 3)
		    hit, prev = None, b["start"]
		    for s in res:
		        if s[0] < b["start"]:
		            continue
		        if s[0] >= up["start"]:
		            break
		        if s[3] or "dedicated" not in s[4].split(",") or s[2] != "ACTIVE":
		            hit = s
		            break
		        prev = s[0]
		    out["reservation_after_s"] = None if hit is None else round(hit[1] - b["start"], 3)
		    out["reservation_after_lower_s"] = None if hit is None else round(prev - b["start"], 3)
		    out["reservation_then"] = None if hit is None else {"state": hit[2], "degraded": hit[3], "path": hit[4]}
		    # a1's marking rules gone: the agent's withdrawal at the sender
		    st = t["steer"]
		    before = [x for x in st if x[1] <= b["start"]]
		    out["marked_before"] = before[-1][2] if before else None
		    hit, prev = None, b["start"]
		    for x in st:
		        if x[0] < b["start"]:
		            continue
		        if x[0] >= up["start"]:
		            break
		        if x[2] == 0:
		            hit = x
		            break
		        prev = x[0]
		    out["withdrawn_after_s"] = None if hit is None or not out["marked_before"] else round(hit[1] - b["start"], 3)
		    out["withdrawn_after_lower_s"] = None if out["withdrawn_after_s"] is None else round(prev - b["start"], 3)
		    out["on_dedicated_before"] = frac(o["end"] + 1, b["start"])
		    g, at = gap(b["start"] - 0.1, up["start"])
		    out["gap_s"] = round(g, 3)
		    out["watched_s"] = round(up["start"] - b["start"], 3)
		    ws = [s for s in res if s[0] < b["start"]]
		    out["reservation_before"] = {"state": ws[-1][2], "degraded": ws[-1][3], "path": ws[-1][4]} if ws else None
		print(json.dumps(out))
	PY
}

# ---------------------------------------------------------------------------
# Moves: the longest goodput gap when the flow changes path

scenario_moves() {
	local tb=lpst-moves run r hold=$MOVE_HOLD until total
	local -a g1=() g2=() g0=() fa=() fc=() m1=() m2=()
	two_site_up "$tb"
	write_timeline
	write_analyser
	until=$((3 + hold + 4))
	total=$((until + 2))
	for ((run = 1; run <= RUNS; run++)); do
		local spec
		spec=$(flow_spec_json "$tb" "$until" \
			"$(act flow 0 bg -- ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t "${total}s" --json)" \
			"$(act open 3 -- "$LP" ticket open --from a1 --to b1 --flows "$FLOW" --bandwidth 1G --duration 1h --wait 10s --json)" \
			"$(act close $((3 + hold)) -- "$LP" ticket close "{id}" --reason "bench moves")")
		timeline "$tb" "$W/logs/moves-$run.json" "$spec"
		r=$(python3 "$W/analyse.py" moves "$W/logs/moves-$run.json" "$STEER_BYTES" 2>"$W/logs/moves-$run.err") ||
			die "moves run $run: $(last_line "$W/logs/moves-$run.err") (see $W/logs/moves-$run.json)"
		printf '%s\n' "$r" >"$W/logs/moves-$run.result"
		local v
		read -r -a v < <(jfields "$r" to_dedicated_gap_s to_routed_gap_s base_gap_s dedicated_while_active dedicated_after_close rcv_mss_routed rcv_mss_steered ticket)
		g1+=("${v[0]}") g2+=("${v[1]}") g0+=("${v[2]}") fa+=("${v[3]}") fc+=("${v[4]}") m1+=("${v[5]}") m2+=("${v[6]}")
		log "moves run $run/$RUNS: longest gap routed -> dedicated ${v[0]} s, dedicated -> routed ${v[1]} s (before any move ${v[2]} s); dedicated's share while ACTIVE ${v[3]}, after close ${v[4]}"
		wait_unsteered "$tb" "${v[7]}"
	done
	teardown "$tb"

	local ok
	ok=$(awk -v a="$(fmax "${g1[@]}")" -v b="$(fmax "${g2[@]}")" 'BEGIN { print (a < 1 && b < 1) }')
	VERDICTS[moves]=$(verdict "$ok")
	out ""
	out "Moves: the longest goodput gap when a running flow changes path (examples/two-site.yaml: wan 1 Gbit/s 1500 bytes routed, dedicated 2 Gbit/s 9000 bytes)"
	out "  flow:  ip netns exec lp-$tb-a1 lightpath bench lp://198.18.2.1:7070 -t ${total}s   (from 0 s)"
	out "  at 3 s: lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth 1G --duration 1h --wait 10s   (routed -> dedicated)"
	out "  at $((3 + hold)) s: lightpath ticket close ID   (released: dedicated -> routed)"
	out "  (b1's sockets' bytes_received read every $POLL_MS ms with ss -ti; a gap = time between two reads showing progress, within 3 s after each move; $RUNS runs)"
	out "$(printf '  %-36s %8s %8s   %s' move median max "runs (s)")"
	out "$(printf '  %-36s %7ss %7ss   %s   %s' "routed -> dedicated (ticket opened)" "$(fmed "${g1[@]}")" "$(fmax "${g1[@]}")" "${g1[*]}" "$(verdict "$(awk -v m="$(fmax "${g1[@]}")" 'BEGIN { print (m < 1) }')") (target < 1 s)")"
	out "$(printf '  %-36s %7ss %7ss   %s   %s' "dedicated -> routed (ticket closed)" "$(fmed "${g2[@]}")" "$(fmax "${g2[@]}")" "${g2[*]}" "$(verdict "$(awk -v m="$(fmax "${g2[@]}")" 'BEGIN { print (m < 1) }')") (target < 1 s)")"
	out "$(printf '  %-36s %7ss %7ss   %s   %s' "before any move (the poll's floor)" "$(fmed "${g0[@]}")" "$(fmax "${g0[@]}")" "${g0[*]}" "(reference)")"
	out "  dedicated's share of the ra>rb bytes while ACTIVE: ${fa[*]}; after the close: ${fc[*]}; b1's rcvmss on routed: ${m1[*]}, steered: ${m2[*]}"
	emit_json scenario=moves move=to_dedicated median_s:="$(fmed "${g1[@]}")" max_s:="$(fmax "${g1[@]}")" runs_s:="$(jlist "${g1[@]}")" \
		poll_ms:="$POLL_MS" target="< 1 s" pass:="$(jbool "$(awk -v m="$(fmax "${g1[@]}")" 'BEGIN { print (m < 1) }')")" \
		dedicated_share:="$(jlist "${fa[@]}")"
	emit_json scenario=moves move=to_routed median_s:="$(fmed "${g2[@]}")" max_s:="$(fmax "${g2[@]}")" runs_s:="$(jlist "${g2[@]}")" \
		poll_ms:="$POLL_MS" target="< 1 s" pass:="$(jbool "$(awk -v m="$(fmax "${g2[@]}")" 'BEGIN { print (m < 1) }')")" \
		dedicated_share:="$(jlist "${fc[@]}")"
	emit_json scenario=moves move=none median_s:="$(fmed "${g0[@]}")" max_s:="$(fmax "${g0[@]}")" runs_s:="$(jlist "${g0[@]}")" poll_ms:="$POLL_MS"
}

# ---------------------------------------------------------------------------
# Jumbo frames against 1460-byte segments

# jumbo_topology FILE writes the sites and hosts of one_link_topology joined
# by a routed wan (1 Gbit/s, JUMBO_DELAY, 1500 bytes) and a dedicated link
# (JUMBO_RATE, JUMBO_DELAY, 9000 bytes) that only reservations use.
jumbo_topology() {
	one_link_topology "$1" "$JUMBO_RATE" "$JUMBO_DELAY" \
		"{name: wan, ends: [ra, rb], rate: 1G, delay: $JUMBO_DELAY, mtu: 1500}"
}

# mss_cap TB BYTES puts, on a1 and b1, one nftables rule (table inet
# lpbench, an output chain) that lowers the MSS option of every SYN and
# SYN-ACK above BYTES to BYTES: 1460 gives 1460-byte segments (1448 of
# payload with timestamps) on the 9000-byte path; 8960, what the steered
# route's MTU gives anyway, changes nothing. The same rule in both cases,
# so that they differ only in the segment size.
mss_cap() {
	local n
	for n in a1 b1; do
		ip netns exec "$(ns "$1" "$n")" nft -f - <<-EOF || die "nft in $n: cannot set the MSS cap"
			table inet lpbench
			delete table inet lpbench
			table inet lpbench {
				chain out {
					type filter hook output priority mangle; policy accept;
					tcp flags & syn == syn tcp option maxseg size > $2 tcp option maxseg size set $2
				}
			}
		EOF
	done
}

# cpu_run.py LOG LIMIT CMD... runs CMD (its stdout in LOG, stderr in
# LOG.err) and prints its exit status and the CPU seconds (user + system)
# it used, from wait4(2).
write_cpu_run() {
	cat >"$W/cpu_run.py" <<-'PY'
		import os, subprocess, sys, threading
		logf, limit, cmd = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
		with open(logf, "w") as o, open(logf + ".err", "w") as e:
		    p = subprocess.Popen(cmd, stdout=o, stderr=e, stdin=subprocess.DEVNULL)
		timer = threading.Timer(limit, p.kill)
		timer.start()
		_, status, ru = os.wait4(p.pid, 0)
		timer.cancel()
		print(os.waitstatus_to_exitcode(status), "%.3f" % (ru.ru_utime + ru.ru_stime))
	PY
}

# proc_cpu PID prints the CPU seconds (user + system) process PID has used.
proc_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / hz }' "/proc/$1/stat"; }

# dir_max TB LINK FROM prints max_segment_bytes of LINK's direction from FROM.
dir_max() {
	"$LP" testbed status --name "$1" --json | python3 -c '
import json, sys
for l in json.load(sys.stdin)["links"]:
    if l["name"] == sys.argv[1]:
        for d in l["directions"]:
            if d["from"] == sys.argv[2]:
                print(d.get("max_segment_bytes", 0))' "$2" "$3"
}

scenario_jumbo() {
	local tb=lpst-jumbo run order c spid epid ok rc cpu s0 s1 e0 e1
	local -a bps_j=() bps_s=() tx_j=() tx_s=() rx_j=() rx_s=() em_j=() em_s=()
	local max_std=- max_jumbo=-
	jumbo_topology "$W/topo/jumbo.yaml"
	setup "$tb" "$W/topo/jumbo.yaml"
	serve "$tb"
	spid=${SERVER_PIDS[-1]}
	# The emulator's pid, as the testbed records it (docs/testbed.md).
	epid=$(cat "/run/lightpath/$tb/emulator.pid" 2>/dev/null) || die "testbed $tb: no /run/lightpath/$tb/emulator.pid"
	[[ -r /proc/$epid/stat ]] || die "testbed $tb: no emulator process $epid"
	write_cpu_run
	open_ticket "$tb" "$JUMBO_BW" "$W/logs/jumbo-open.json"
	[[ $TICKET_PATH == a1-ra,dedicated,b1-rb ]] || die "ticket path $TICKET_PATH: want a1-ra,dedicated,b1-rb"
	measure() {
		local c=$1 cap=8960 logf
		[[ $c == jumbo ]] || cap=1460
		mss_cap "$tb" "$cap"
		logf=$W/logs/jumbo-$c-$run.json
		s0=$(proc_cpu "$spid") e0=$(proc_cpu "$epid")
		read -r rc cpu < <(python3 "$W/cpu_run.py" "$logf" $((DURATION + 30)) ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t "${DURATION}s" --json)
		s1=$(proc_cpu "$spid") e1=$(proc_cpu "$epid")
		[[ $rc == 0 ]] || die "jumbo run $run $c: bench exit $rc: $(last_line "$logf.err")"
		read -r BPS BYTES < <(python3 -c '
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print("%.0f %d" % (s["throughput_bps"], s["bytes"]))' "$logf") || die "jumbo run $run: no summary in $logf"
		local txg rxg emg
		emg=$(awk -v a="$e0" -v z="$e1" -v b="$BYTES" 'BEGIN { printf "%.3f", (z - a) / (b * 8 / 1e9) }')
		txg=$(awk -v c="$cpu" -v b="$BYTES" 'BEGIN { printf "%.3f", c / (b * 8 / 1e9) }')
		rxg=$(awk -v a="$s0" -v z="$s1" -v b="$BYTES" 'BEGIN { printf "%.3f", (z - a) / (b * 8 / 1e9) }')
		if [[ $c == jumbo ]]; then
			bps_j+=("$BPS") tx_j+=("$txg") rx_j+=("$rxg") em_j+=("$emg")
			[[ $max_jumbo != - ]] || max_jumbo=$(dir_max "$tb" dedicated ra)
		else
			bps_s+=("$BPS") tx_s+=("$txg") rx_s+=("$rxg") em_s+=("$emg")
			# The first 1460 run comes before any jumbo run: the largest
			# segment dedicated has carried is still this case's.
			[[ $max_std != - ]] || max_std=$(dir_max "$tb" dedicated ra)
		fi
		log "jumbo run $run/$RUNS $c (MSS cap $cap): $(gbit "$BPS") Gbit/s, CPU s per Gbit: sender $txg, receiver $rxg, emulator $emg"
	}
	for ((run = 1; run <= RUNS; run++)); do
		if ((run % 2)); then order="std jumbo"; else order="jumbo std"; fi
		for c in $order; do measure "$c"; done
	done
	close_ticket "$tb" "$TICKET"
	teardown "$tb"

	local sj ss ratio
	read -r -a sj < <(stats "${bps_j[@]}")
	read -r -a ss < <(stats "${bps_s[@]}")
	ratio=$(awk -v a="${sj[0]}" -v b="${ss[0]}" 'BEGIN { printf "%.3f", a / b }')
	ok=$(awk -v j="$max_jumbo" -v s="$max_std" 'BEGIN { print (j > 1500 && s <= 1460) }')
	VERDICTS[jumbo]=$(verdict "$ok")
	out ""
	out "Jumbo frames: one TCP flow a1 -> b1 steered onto a $JUMBO_RATE, $JUMBO_DELAY, 9000-byte dedicated link (routed wan: 1 Gbit/s, 1500 bytes), MSS 8960 against 1460"
	out "  ip netns exec lp-$tb-a1 lightpath bench lp://198.18.2.1:7070 -t ${DURATION}s   ($RUNS runs per case, alternating ABBA)"
	out "  ticket: lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth $JUMBO_BW --duration 1h   (ACTIVE throughout)"
	out "  1460: nft on a1 and b1: tcp flags & syn == syn tcp option maxseg size > 1460 tcp option maxseg size set 1460   (jumbo: the same rule with 8960)"
	out "$(printf '  %-8s %9s %9s %9s %8s %14s %16s %16s %12s' case median min max spread "sender s/Gbit" "receiver s/Gbit" "emulator s/Gbit" "max segment")"
	out "$(printf '  %-8s %9s %9s %9s %7.1f%% %14s %16s %16s %12s' 1460 "$(gbit "${ss[0]}")" "$(gbit "${ss[1]}")" "$(gbit "${ss[2]}")" "$(awk -v s="${ss[3]}" 'BEGIN { print 100 * s }')" \
		"$(fmed "${tx_s[@]}")" "$(fmed "${rx_s[@]}")" "$(fmed "${em_s[@]}")" "$max_std")"
	out "$(printf '  %-8s %9s %9s %9s %7.1f%% %14s %16s %16s %12s' jumbo "$(gbit "${sj[0]}")" "$(gbit "${sj[1]}")" "$(gbit "${sj[2]}")" "$(awk -v s="${sj[3]}" 'BEGIN { print 100 * s }')" \
		"$(fmed "${tx_j[@]}")" "$(fmed "${rx_j[@]}")" "$(fmed "${em_j[@]}")" "$max_jumbo")"
	out "  goodput jumbo / 1460: $ratio   $(verdict "$ok") (check: dedicated's max_segment_bytes > 1500 with jumbo, <= 1460 after the first 1460 run)"
	out "  (Gbit/s, goodput; s/Gbit = CPU seconds (user + system) per gigabit delivered, medians: the sender lightpath bench (wait4), the receiver lightpath serve"
	out "   and the testbed's emulator (/proc/PID/stat), which also bears the kernel's receive path of the packets it writes into b1 and rb;"
	out "   runs: 1460 $(for i in "${bps_s[@]}"; do printf '%s ' "$(gbit "$i")"; done)| jumbo $(for i in "${bps_j[@]}"; do printf '%s ' "$(gbit "$i")"; done))"
	emit_json scenario=jumbo case=1460 median_bps:="${ss[0]}" min_bps:="${ss[1]}" max_bps:="${ss[2]}" spread:="${ss[3]}" runs_bps:="$(jlist "${bps_s[@]}")" \
		sender_cpu_s_per_gbit:="$(fmed "${tx_s[@]}")" receiver_cpu_s_per_gbit:="$(fmed "${rx_s[@]}")" \
		runs_sender_cpu_s_per_gbit:="$(jlist "${tx_s[@]}")" runs_receiver_cpu_s_per_gbit:="$(jlist "${rx_s[@]}")" \
		emulator_cpu_s_per_gbit:="$(fmed "${em_s[@]}")" runs_emulator_cpu_s_per_gbit:="$(jlist "${em_s[@]}")" max_segment_bytes:="$max_std"
	emit_json scenario=jumbo case=jumbo median_bps:="${sj[0]}" min_bps:="${sj[1]}" max_bps:="${sj[2]}" spread:="${sj[3]}" runs_bps:="$(jlist "${bps_j[@]}")" \
		sender_cpu_s_per_gbit:="$(fmed "${tx_j[@]}")" receiver_cpu_s_per_gbit:="$(fmed "${rx_j[@]}")" \
		runs_sender_cpu_s_per_gbit:="$(jlist "${tx_j[@]}")" runs_receiver_cpu_s_per_gbit:="$(jlist "${rx_j[@]}")" \
		emulator_cpu_s_per_gbit:="$(fmed "${em_j[@]}")" runs_emulator_cpu_s_per_gbit:="$(jlist "${em_j[@]}")" max_segment_bytes:="$max_jumbo"
	emit_json scenario=jumbo ratio:="$ratio" check="max_segment_bytes > 1500 with jumbo, <= 1460 at 1460" pass:="$(jbool "$ok")"
}

# ---------------------------------------------------------------------------
# From ACTIVE to the first jumbo segment

scenario_jumbo_time() {
	local run r tb until=$((3 + JT_LIMIT + 3)) ok all=1
	local -a ja=() jl=() jo=() od=() ms=() mb=() mm=() nj=() nd=() nm=()
	write_timeline
	write_analyser
	for ((run = 1; run <= RUNS; run++)); do
		# A testbed of its own per run: max_segment_bytes is the largest
		# since the testbed came up.
		tb=lpst-jt$run
		two_site_up "$tb"
		local spec v
		spec=$(flow_spec_json "$tb" "$until" \
			"$(act flow 0 bg -- ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t "$((until + 2))s" --json)" \
			"$(act open 3 -- "$LP" ticket open --from a1 --to b1 --flows "$FLOW" --bandwidth 1G --duration 1h --wait 10s --json)" \
			"$(act flow2 $((3 + JT_LIMIT)) bg -- ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t 2s --json)")
		timeline "$tb" "$W/logs/jt-$run.json" "$spec"
		r=$(python3 "$W/analyse.py" jumbo-time "$W/logs/jt-$run.json" "$STEER_BYTES" 2>"$W/logs/jt-$run.err") ||
			die "jumbo-time run $run: $(last_line "$W/logs/jt-$run.err") (see $W/logs/jt-$run.json)"
		printf '%s\n' "$r" >"$W/logs/jt-$run.result"
		read -r -a v < <(jfields "$r" jumbo_after_active_s jumbo_after_active_lower_s jumbo_after_open_s on_dedicated_after_open_s max_segment_before max_segment_end rcv_mss_steered ticket new_jumbo_after_start_s \
			new_jumbo_after_data_s rcv_mss_new)
		ja+=("${v[0]}") jl+=("${v[1]}") jo+=("${v[2]}") od+=("${v[3]}") mb+=("${v[4]}") ms+=("${v[5]}") mm+=("${v[6]}") nj+=("${v[8]}") nd+=("${v[9]}") nm+=("${v[10]}")
		log "jumbo-time run $run/$RUNS: first jumbo segment on dedicated ${v[0]} s after ACTIVE (${v[2]} s after open; the flow on dedicated ${v[3]} s after open); max_segment_bytes ${v[4]} -> ${v[5]}; b1's rcvmss ${v[6]}; a new connection's first jumbo segment ${v[8]} s after its bench started, ${v[9]} s after its data reached b1 (rcvmss ${v[10]})"
		close_ticket "$tb" "${v[7]}"
		teardown "$tb"
	done

	# A run with no jumbo segment within JT_LIMIT counts as JT_LIMIT s
	# in the median and fails the target.
	local -a jn=()
	for r in "${ja[@]}"; do if [[ $r == null ]]; then jn+=("$JT_LIMIT") all=0; else jn+=("$r"); fi; done
	ok=$(awk -v m="$(fmax "${jn[@]}")" -v a="$all" 'BEGIN { print (a && m < 1) }')
	VERDICTS[jumbo-time]=$(verdict "$ok")
	out ""
	out "From ACTIVE to the first jumbo segment: examples/two-site.yaml, a bench a1 -> b1 running on wan (1500 bytes) from 3 s before the ticket"
	out "  flow:  ip netns exec lp-TB-a1 lightpath bench lp://198.18.2.1:7070 -t $((until + 2))s"
	out "  at 3 s: lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth 1G --duration 1h --wait 10s   (returns once ACTIVE)"
	out "  (testbed status --json read every $POLL_MS ms: dedicated ra>rb max_segment_bytes > 1500; a testbed per run; watched $JT_LIMIT s; $RUNS runs)"
	out "$(printf '  %-46s %8s %8s   %s' measure median max "runs (s)")"
	out "$(printf '  %-46s %7ss %7ss   %s   %s' "ACTIVE (open returned) -> first jumbo segment" "$(fmed "${jn[@]}")" "$(fmax "${jn[@]}")" "${ja[*]}" "$(verdict "$ok") (target < 1 s; null: none within ${JT_LIMIT} s)")"
	out "$(printf '  %-46s %8s %8s   %s' "  the read before it (lower bound)" "" "" "${jl[*]}")"
	out "$(printf '  %-46s %8s %8s   %s' "open -> first jumbo segment" "" "" "${jo[*]}")"
	out "$(printf '  %-46s %8s %8s   %s' "open -> the flow's bytes on dedicated" "" "" "${od[*]}")"
	out "$(printf '  %-46s %8s %8s   %s' "a new connection (bench -t 2s at $((3 + JT_LIMIT)) s)" "" "" "${nj[*]}   (informational: from its bench's start; null if the first flow went jumbo)")"
	out "$(printf '  %-46s %8s %8s   %s' "  from its first data at b1" "" "" "${nd[*]}   (b1's rcvmss then: ${nm[*]})")"
	out "  dedicated ra>rb max_segment_bytes before the ticket: ${mb[*]}; at the end: ${ms[*]}; b1's rcvmss of the first flow while steered: ${mm[*]}"
	emit_json scenario=jumbo-time measure=active_to_jumbo median_s:="$(fmed "${jn[@]}")" max_s:="$(fmax "${jn[@]}")" runs_s:="$(jlist "${ja[@]}")" \
		lower_bounds_s:="$(jlist "${jl[@]}")" open_to_jumbo_s:="$(jlist "${jo[@]}")" open_to_dedicated_s:="$(jlist "${od[@]}")" \
		max_segment_bytes_before:="$(jlist "${mb[@]}")" max_segment_bytes_end:="$(jlist "${ms[@]}")" rcvmss_steered:="$(jlist "${mm[@]}")" \
		new_connection_jumbo_after_start_s:="$(jlist "${nj[@]}")" new_connection_jumbo_after_data_s:="$(jlist "${nd[@]}")" \
		new_connection_rcvmss:="$(jlist "${nm[@]}")" \
		poll_ms:="$POLL_MS" watched_s:="$JT_LIMIT" target="< 1 s" pass:="$(jbool "$ok")"
}

# ---------------------------------------------------------------------------
# From a blackhole to the withdrawal

scenario_blackhole() {
	local tb=lpst-bh run r bh=6 until detected=0 ok
	local -a ra=() rl=() sa=() sl=() gp=() then=() wa=() wl=()
	two_site_up "$tb"
	write_timeline
	write_analyser
	until=$((bh + BH_LIMIT + 1))
	for ((run = 1; run <= RUNS; run++)); do
		local spec v
		spec=$(flow_spec_json "$tb" "$until" \
			"$(act flow 0 bg -- ip netns exec "$(ns "$tb" a1)" "$LP" bench lp://198.18.2.1:7070 -t "$((until + 1))s" --json)" \
			"$(act open 3 -- "$LP" ticket open --from a1 --to b1 --flows "$FLOW" --bandwidth 1G --duration 1h --wait 10s --json)" \
			"$(act blackhole "$bh" -- "$LP" testbed link set dedicated --blackhole --name "$tb")" \
			"$(act up $((bh + BH_LIMIT)) -- "$LP" testbed link set dedicated --up --name "$tb")")
		timeline "$tb" "$W/logs/bh-$run.json" "$spec"
		r=$(python3 "$W/analyse.py" blackhole "$W/logs/bh-$run.json" "$STEER_BYTES" 2>"$W/logs/bh-$run.err") ||
			die "blackhole run $run: $(last_line "$W/logs/bh-$run.err") (see $W/logs/bh-$run.json)"
		printf '%s\n' "$r" >"$W/logs/bh-$run.result"
		read -r -a v < <(jfields "$r" routed_after_s routed_after_lower_s reservation_after_s reservation_after_lower_s gap_s on_dedicated_before ticket \
			withdrawn_after_s withdrawn_after_lower_s)
		ra+=("${v[0]}") rl+=("${v[1]}") sa+=("${v[2]}") sl+=("${v[3]}") gp+=("${v[4]}") wa+=("${v[7]}") wl+=("${v[8]}")
		then+=("$(python3 -c 'import json, sys; r = json.loads(sys.argv[1])["reservation_then"]; print("-" if r is None else "%s%s/%s" % (r["state"], "+degraded" if r["degraded"] else "", r["path"] or "none"))' "$r")")
		log "blackhole run $run/$RUNS: a1's marking withdrawn ${v[7]} s after the blackhole, the flow on wan ${v[0]} s after, the reservation off dedicated ${v[2]} s after (${then[-1]}); longest gap ${v[4]} s; dedicated's share before ${v[5]}"
		timeout 30 "$LP" ticket close "${v[6]}" --reason "bench blackhole" >"$W/logs/close.out" 2>&1 ||
			log "ticket close ${v[6]}: $(last_line "$W/logs/close.out")"
		wait_unsteered "$tb" "${v[6]}"
		sleep 1
	done
	teardown "$tb"

	local -a rn=() sn=() wn=()
	for r in "${wa[@]}"; do if [[ $r == null ]]; then wn+=("$BH_LIMIT"); else wn+=("$r") detected=1; fi; done
	for r in "${ra[@]}"; do if [[ $r == null ]]; then rn+=("$BH_LIMIT"); else rn+=("$r") detected=1; fi; done
	for r in "${sa[@]}"; do if [[ $r == null ]]; then sn+=("$BH_LIMIT"); else sn+=("$r") detected=1; fi; done
	# The issue's target is the agents' and the controller's: steering
	# withdrawn and the reservation moved or degraded within 2 s. When the
	# flow's next segment crosses wan after that is TCP's: its
	# retransmission timer backed off while the link dropped everything.
	ok=$(awk -v a="$(fmax "${wn[@]}")" -v b="$(fmax "${sn[@]}")" -v n="${wa[*]} ${sa[*]}" 'BEGIN { print (a < 2 && b < 2 && n !~ /null/) }')
	VERDICTS[blackhole]=$(verdict "$ok")
	out ""
	out "From a blackhole to the withdrawal: examples/two-site.yaml, a bench a1 -> b1 steered onto dedicated by a 1G ticket (wan cannot take it: it degrades)"
	out "  flow:  ip netns exec lp-$tb-a1 lightpath bench lp://198.18.2.1:7070 -t $((until + 1))s;  at 3 s: lightpath ticket open ... --bandwidth 1G"
	out "  at $bh s: lightpath testbed link set dedicated --blackhole   (carrier stays up);  at $((bh + BH_LIMIT)) s: --up"
	out "  (testbed status --json and reserve show ID --json read every $POLL_MS ms; on wan = wan's ra>rb has taken $STEER_BYTES bytes; $RUNS runs; null: not within ${BH_LIMIT} s)"
	if ((!detected)); then
		out "  agents do not detect blackholes in this build: neither the flow nor the reservation left dedicated within ${BH_LIMIT} s in any run"
	fi
	out "$(printf '  %-44s %8s %8s   %s' measure median max "runs (s)")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "blackhole -> a1's marking rules withdrawn" "$(fmed "${wn[@]}")" "$(fmax "${wn[@]}")" "${wa[*]}" "(target < 2 s)")"
	out "$(printf '  %-44s %8s %8s   %s' "  the read before it (lower bound)" "" "" "${wl[*]}")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "blackhole -> the flow's bytes on wan" "$(fmed "${rn[@]}")" "$(fmax "${rn[@]}")" "${ra[*]}" "(informational: TCP's retransmission timer, backed off in the blackhole)")"
	out "$(printf '  %-44s %8s %8s   %s' "  the read before it (lower bound)" "" "" "${rl[*]}")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "blackhole -> the reservation off dedicated" "$(fmed "${sn[@]}")" "$(fmax "${sn[@]}")" "${sa[*]}" "(target < 2 s)")"
	out "$(printf '  %-44s %8s %8s   %s' "  the read before it (lower bound)" "" "" "${sl[*]}")"
	out "$(printf '  %-44s %7ss %7ss   %s   %s' "the flow's longest gap from the blackhole" "$(fmed "${gp[@]}")" "$(fmax "${gp[@]}")" "${gp[*]}" "(informational)")"
	out "  the reservation then (reserve show: state/path): ${then[*]}"
	out "  verdict: ${VERDICTS[blackhole]}$( ((detected)) || printf ' (agents do not detect blackholes in this build)')"
	emit_json scenario=blackhole measure=withdrawn median_s:="$(fmed "${wn[@]}")" max_s:="$(fmax "${wn[@]}")" runs_s:="$(jlist "${wa[@]}")" \
		lower_bounds_s:="$(jlist "${wl[@]}")" watched_s:="$BH_LIMIT" target="< 2 s"
	emit_json scenario=blackhole measure=routed median_s:="$(fmed "${rn[@]}")" max_s:="$(fmax "${rn[@]}")" runs_s:="$(jlist "${ra[@]}")" \
		lower_bounds_s:="$(jlist "${rl[@]}")" watched_s:="$BH_LIMIT"
	emit_json scenario=blackhole measure=reservation median_s:="$(fmed "${sn[@]}")" max_s:="$(fmax "${sn[@]}")" runs_s:="$(jlist "${sa[@]}")" \
		lower_bounds_s:="$(jlist "${sl[@]}")" watched_s:="$BH_LIMIT" target="< 2 s"
	emit_json scenario=blackhole measure=gap median_s:="$(fmed "${gp[@]}")" max_s:="$(fmax "${gp[@]}")" runs_s:="$(jlist "${gp[@]}")"
	emit_json scenario=blackhole detected:="$(jbool "$detected")" \
		note="$(if ((detected)); then echo "detected"; else echo "agents do not detect blackholes in this build"; fi)" pass:="$(jbool "$ok")"
}

# ---------------------------------------------------------------------------
# Cross traffic

# cross_run TB LOAD_BPS CASE RUN measures the flow under LOAD_BPS of UDP
# from a2 to b2, which starts a second before the flow and ends after it;
# it sets UDP_LOST to the UDP's loss in percent (iperf3's receiver's
# lost_percent), "-" without UDP.
cross_run() {
	local tb=$1 load=$2 c=$3 run=$4 upid='' b0 b1 ulog
	ulog="$W/logs/cross-udp-$load-$c-$run.json"
	UDP_LOST=-
	if ((load > 0)); then
		timeout -k 5 $((DURATION + 30)) ip netns exec "$(ns "$tb" a2)" iperf3 -c 198.18.2.2 -p 5201 -u -b "$load" -l 8000 \
			-w 16M -t $((DURATION + 2)) -J >"$ulog" 2>&1 </dev/null &
		upid=$!
		sleep 1
	fi
	b0=$(class_bytes "$tb")
	bench_run "$tb" "$W/logs/cross-$load-$c-$run.json"
	b1=$(class_bytes "$tb")
	STEERED=$(awk -v a="$b0" -v b="$b1" -v n="$BYTES" 'BEGIN { printf "%.3f", (b - a) / n }')
	if [[ -n $upid ]]; then
		wait "$upid" || die "iperf3 -u -b $load: $(last_line "$ulog")"
		UDP_LOST=$(udp_lost "$ulog") || die "iperf3 -u -b $load: no receiver loss in $ulog"
	fi
}

# udp_lost LOG prints the loss in percent the receiver of an iperf3 UDP run
# saw (end.sum_received; end.sum in iperf3 before 3.10, which has no
# sum_received).
udp_lost() {
	python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["end"]
s = e.get("sum_received") or e["sum"]
print("%.3f" % s["lost_percent"])' "$1"
}

# cross_loads prints the cross scenario's rows: NAME LOAD_BPS, the UDP
# offered at 0, 25, 50 and 75% of what the ticket leaves of the link
# (CROSS_RATE - CROSS_BW), then "over": the whole link rate, an overload.
cross_loads() {
	local pct left=$((CROSS_RATE_BPS - CROSS_BW_BPS))
	for pct in 0 25 50 75; do echo "$pct $((left * pct / 100))"; done
	echo "over $CROSS_RATE_BPS"
}

scenario_cross() {
	local tb=lpst-cross run row load ok all_ok=1 frac left=$((CROSS_RATE_BPS - CROSS_BW_BPS))
	declare -A R=() S=() L=() Y=()
	one_link_topology "$W/topo/cross.yaml" "$CROSS_RATE" 25ms
	setup "$tb" "$W/topo/cross.yaml"
	serve "$tb"
	start_server_in "$(ns "$tb" b2)" 5201 "$W/logs/iperf3-server.log" iperf3 -s -B 198.18.2.2 -p 5201 ||
		die "iperf3 server in b2: $START_ERROR"
	for ((run = 1; run <= CROSS_RUNS; run++)); do
		while read -r row load; do
			cross_run "$tb" "$load" without "$run"
			R[$row|without]+="$BPS " S[$row|without]+="$STEERED " L[$row|without]+="$UDP_LOST " Y[$row|without]+="$STEADY_BPS "
			log "cross run $run/$CROSS_RUNS load $row: without $(mbit "$BPS") Mbit/s, UDP lost $UDP_LOST%"
			open_ticket "$tb" "$CROSS_BW" "$W/logs/cross-open-$row-$run.json"
			[[ $TICKET_PATH == a1-ra,dedicated,b1-rb ]] || die "ticket path $TICKET_PATH: want a1-ra,dedicated,b1-rb"
			cross_run "$tb" "$load" with "$run"
			R[$row|with]+="$BPS " S[$row|with]+="$STEERED " L[$row|with]+="$UDP_LOST " Y[$row|with]+="$STEADY_BPS "
			log "cross run $run/$CROSS_RUNS load $row: with $(mbit "$BPS") Mbit/s ($(mbit "$STEADY_BPS") after 1 s), steered $STEERED, UDP lost $UDP_LOST%"
			close_ticket "$tb" "$TICKET"
		done < <(cross_loads)
	done
	teardown "$tb"

	out ""
	out "Cross traffic (UltraScience Net's experiment): one $(mbit "$CROSS_RATE_BPS") Mbit/s link, 25 ms one way, $(mbit "$CROSS_BW_BPS") Mbit/s reserved, $(mbit "$left") Mbit/s left; the median of $CROSS_RUNS runs"
	out "  flow:  ip netns exec lp-$tb-a1 lightpath bench lp://198.18.2.1:7070 -t ${DURATION}s"
	out "  load:  ip netns exec lp-$tb-a2 iperf3 -c 198.18.2.2 -u -b LOAD -l 8000 -w 16M -t $((DURATION + 2))   (unreserved, same link, from 1 s before the flow)"
	out "  with:  lightpath ticket open --from a1 --to b1 --flows '$FLOW' --bandwidth $CROSS_BW --duration 1h"
	out "$(printf '  %-10s %12s %14s %14s %14s %9s %9s %13s %13s   %s' load "UDP offered" "without Mbit/s" "with Mbit/s" "with after 1s" "/reserved" steered "UDP lost w/o" "UDP lost with" "verdict")"
	while read -r row load; do
		local mw mo my st lo=- lw=- jlo=null jlw=null jro='[]' jrw='[]' lok=1 label target
		if [[ $row == over ]]; then label="100% link"; else label="$row% left"; fi
		if ((load > 0)); then
			# shellcheck disable=SC2086 # space-separated lists
			lo=$(fmed ${L[$row|without]}) lw=$(fmed ${L[$row|with]})
			# shellcheck disable=SC2086
			jlo=$lo jlw=$lw jro=$(jlist ${L[$row|without]}) jrw=$(jlist ${L[$row|with]})
			lo+=% lw+=%
		fi
		# shellcheck disable=SC2086 # space-separated lists
		mo=$(median ${R[$row|without]})
		# shellcheck disable=SC2086
		mw=$(median ${R[$row|with]})
		# shellcheck disable=SC2086
		my=$(median ${Y[$row|with]})
		# shellcheck disable=SC2086
		st=$(fmed ${S[$row|with]})
		frac=$(awk -v a="$my" -v b="$CROSS_BW_BPS" 'BEGIN { printf "%.2f", a / b }')
		ok=$(awk -v f="$my" -v b="$CROSS_BW_BPS" 'BEGIN { print (f >= 0.9 * b) }')
		target="with after 1s >= 0.9 of $CROSS_BW"
		if [[ $row != over && $row != 0 ]]; then
			lok=$(awk -v l="$jlw" 'BEGIN { print (l < 1) }')
			target+=", UDP lost with < 1%"
			[[ $lok == 1 ]] || ok=0
		elif [[ $row == over ]]; then
			target+=" (overload: no loss target)"
		fi
		[[ $ok == 1 ]] || all_ok=0
		out "$(printf '  %-10s %5s Mbit/s %14s %14s %14s %9s %9s %13s %13s   %s' "$label" "$(mbit "$load")" "$(mbit "$mo")" "$(mbit "$mw")" "$(mbit "$my")" "$frac" "$st" "$lo" "$lw" "$(verdict "$ok") ($target)")"
		# shellcheck disable=SC2086
		emit_json scenario=cross load="$row" load_percent_of_left:="$(if [[ $row == over ]]; then echo null; else echo "$row"; fi)" \
			load_bps:="$load" link_bps:="$CROSS_RATE_BPS" reserved_bps:="$CROSS_BW_BPS" left_bps:="$left" \
			without_bps:="$mo" with_bps:="$mw" with_after_1s_bps:="$my" with_fraction_of_reserved:="$frac" steered:="$st" \
			udp_lost_percent_without:="$jlo" udp_lost_percent_with:="$jlw" \
			runs_without_bps:="$(jlist ${R[$row|without]})" runs_with_bps:="$(jlist ${R[$row|with]})" \
			runs_with_after_1s_bps:="$(jlist ${Y[$row|with]})" \
			runs_udp_lost_percent_without:="$jro" runs_udp_lost_percent_with:="$jrw" target="$target" pass:="$(jbool "$ok")"
	done < <(cross_loads)
	out "  (throughput of the measured flow, whole run and after its first second (slow start); /reserved = with after 1s / $CROSS_BW;"
	out "   steered = bytes through the ticket's htb class on ra / the flow's payload bytes: ~1.006 with headers;"
	out "   UDP lost = the unreserved UDP's loss, iperf3's receiver's lost_percent, median of the runs)"
	VERDICTS[cross]=$(verdict "$all_ok")
}

main() {
	local t0=$SECONDS s pass=true
	install_peers
	build_lightpath
	emit_json bench=steering mark_runs:="$MARK_RUNS" runs:="$RUNS" duration_s:="$DURATION" cross_runs:="$CROSS_RUNS" cross_rate_bps:="$CROSS_RATE_BPS" \
		cross_bw_bps:="$CROSS_BW_BPS" cores:="$(nproc)" kernel="$(uname -r)" loadavg="$(cut -d' ' -f1-3 /proc/loadavg)"
	out "bench/steering.sh on $(nproc) cores, kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
	if wanted mark; then scenario_mark; fi
	if wanted activation; then scenario_activation; fi
	if wanted cross; then scenario_cross; fi
	if wanted jumbo; then scenario_jumbo; fi
	if wanted jumbo-time; then scenario_jumbo_time; fi
	if wanted moves; then scenario_moves; fi
	if wanted blackhole; then scenario_blackhole; fi
	out ""
	out "Targets: $(for s in mark activation cross jumbo jumbo-time moves blackhole; do [[ -n ${VERDICTS[$s]:-} ]] && printf '%s %s  ' "$s" "${VERDICTS[$s]}"; done)"
	out "Done in $((SECONDS - t0)) s; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
	for s in "${!VERDICTS[@]}"; do [[ ${VERDICTS[$s]} == PASS ]] || pass=false; done
	emit_json summary:=true bench=steering seconds:="$((SECONDS - t0))" \
		mark="${VERDICTS[mark]:-skipped}" activation="${VERDICTS[activation]:-skipped}" cross="${VERDICTS[cross]:-skipped}" \
		jumbo="${VERDICTS[jumbo]:-skipped}" jumbo-time="${VERDICTS[jumbo-time]:-skipped}" moves="${VERDICTS[moves]:-skipped}" \
		blackhole="${VERDICTS[blackhole]:-skipped}" pass:="$pass"
	log "done in $((SECONDS - t0)) s"
}

main

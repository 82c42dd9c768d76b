#!/usr/bin/env bash
# testbed.sh: how faithful and how fast the testbed is, measured: every row
# puts the configured value beside the measured one.
#
#   bench/testbed.sh [--json] [--only rtt|loss|tcp|ceiling|movers]
#
# Scenarios (run as root; each builds its own testbed and removes it):
#   rtt      ping RTT over one link for one-way delays 1, 10, 25, 50 and
#            100 ms. Target: within 5% (or 0.3 ms) of twice the delay.
#   loss     LOSS_PACKETS (1,000,000) UDP datagrams through a link with 0.1%
#            and 1% random loss, counted end to end by iperf3 and by the
#            emulator. Target: within 10% of the configured rate.
#   tcp      iperf3 for DURATION (10) s across a 1 Gbit/s link with 50 ms
#            RTT, with BBR and with CUBIC. Target: BBR >= 0.9 of the rate.
#   ceiling  iperf3 through the emulator with no delay at MTU 1500 and 9000,
#            against a bare veth pair between two namespaces, with the
#            emulator's CPU use. Target: >= 0.5 of bare veth at MTU 9000.
#   movers   lightpath cp, globus-url-copy -p 4 and xrdcp, each with BBR and
#            with CUBIC, copying a SIZE (2G) file from a1 to b1 over the
#            routed path of examples/two-site.yaml (1 Gbit/s, 25 ms one way,
#            0.01% loss): goodput as a fraction of the link rate, the median
#            of RUNS (3). Target for lightpath: >= 0.9.
#
# Environment: RUNS (3), DURATION (10), SIZE (2G), LOSS_PACKETS (1000000),
# MOVER_TIMEOUT (240: seconds a copy may take; a slower one is reported as
# "did not finish", not waited for: CUBIC under 0.01% loss can take 10 min),
# ONLY, JSON=1 (same as --json), KEEP=1 (keep the work directory),
# LIGHTPATH (a lightpath binary to use instead of building one).
#
# Output: a table per scenario on stdout; with --json one JSON object per
# row on stdout instead (the tables then go to stderr). A peer that cannot
# be installed or fails is "unavailable (why)". Exit 0 when the measurements
# completed (whatever the verdicts), 2 on the script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

RUNS=${RUNS:-3}
DURATION=${DURATION:-10}
DURATION=${DURATION%s}
SIZE=${SIZE:-2G}
LOSS_PACKETS=${LOSS_PACKETS:-1000000}
MOVER_TIMEOUT=${MOVER_TIMEOUT:-240}
ONLY=${ONLY:-}
JSON=${JSON:-0}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $LOSS_PACKETS =~ ^[1-9][0-9]*$ ]] || die "LOSS_PACKETS must be a positive integer"
case $ONLY in '' | rtt | loss | tcp | ceiling | movers) ;; *) die "ONLY must be rtt, loss, tcp, ceiling or movers, not '$ONLY'" ;; esac
SIZE_BYTES=$(numfmt --from=iec "$SIZE" 2>/dev/null) || die "SIZE must be like 512M or 1G, not '$SIZE'"
[[ $(id -u) -eq 0 ]] || die "the testbed needs root (network namespaces, TUN devices, htb)"
wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs"
W=$(mktemp -d /dev/shm/lptestbed.XXXXXX) || die "cannot create a work directory in /dev/shm"
chmod 755 "$W"
mkdir -p "$W/logs" "$W/topo" "$W/src" "$W/lp" "$W/gftp" "$W/xrd/data" "$W/xrd/admin"
APT_LOG=$W/logs/apt.log

# Testbeds made by this run, removed at the end whatever happens.
TESTBEDS=()
VETH_NS=()
ETC_NETNS=()
ALLOWED_CC=$(cat /proc/sys/net/ipv4/tcp_allowed_congestion_control)
cleanup() {
	local rc=$? tb ns
	trap - EXIT INT TERM
	stop_servers
	for tb in "${TESTBEDS[@]}"; do "$LP" testbed down --name "$tb" >/dev/null 2>&1 || true; done
	for ns in "${VETH_NS[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
	for ns in "${ETC_NETNS[@]}"; do rm -rf "/etc/netns/$ns"; done
	echo "$ALLOWED_CC" >/proc/sys/net/ipv4/tcp_allowed_congestion_control
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
	ensure_commands ping=iputils-ping iperf3=iperf3 ss=iproute2 xrdcp=xrootd-client xrootd=xrootd-server \
		globus-url-copy=globus-gass-copy-progs globus-gridftp-server=globus-gridftp-server-progs
	[[ -z ${UNAVAILABLE[ping]:-} ]] || die "ping is needed: ${UNAVAILABLE[ping]}"
	[[ -z ${UNAVAILABLE[iperf3]:-} ]] || die "iperf3 is needed: ${UNAVAILABLE[iperf3]}"
}

LP=${LIGHTPATH:-$REPO/bin/lightpath}

# status_field TB LINK FROM FIELD prints one counter of one direction.
status_field() {
	"$LP" testbed status --name "$1" --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
for l in s["links"]:
    if l["name"] == sys.argv[1]:
        for d in l["directions"]:
            if d["from"] == sys.argv[2]:
                print(d[sys.argv[3]])
' "$2" "$3" "$4"
}

# pair_topology FILE RATE DELAY MTU writes two hosts joined by link "l".
pair_topology() {
	cat >"$1" <<-EOF
		sites:
		  - name: s
		nodes:
		  - {name: h1, site: s}
		  - {name: h2, site: s}
		links:
		  - {name: l, ends: [h1, h2], rate: $2, delay: $3, mtu: $4}
	EOF
}

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

verdict() { if awk -v ok="$1" 'BEGIN { exit !ok }'; then echo PASS; else echo FAIL; fi; }

# iperf3_bps FILE prints the received bits per second of an iperf3 -J result.
iperf3_bps() {
	python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
e = r["end"]
print(int(e.get("sum_received", e.get("sum", {})).get("bits_per_second", 0)))
' "$1"
}

# ---------------------------------------------------------------------------
# RTT

scenario_rtt() {
	local tb=lpb-rtt d want got err ok v
	pair_topology "$W/topo/rtt.yaml" 10G 1ms 1500
	testbed_up "$tb" "$W/topo/rtt.yaml"
	out ""
	out "RTT by ping (30 pings, 50 ms apart), one link, no load"
	out "$(printf '  %-12s %12s %12s %10s   %s' "one way" "want RTT" "measured" "error" "verdict (5% or 0.3 ms)")"
	for d in 1 10 25 50 100; do
		"$LP" testbed link set --name "$tb" l --delay "${d}ms"
		v=$(ip netns exec "$(ns $tb h1)" ping -n -q -c 30 -i 0.05 198.18.1.2 | awk -F'[/ ]' '/^rtt/ { print $8 }')
		want=$((2 * d))
		err=$(awk -v g="$v" -v w="$want" 'BEGIN { e = g - w; if (e < 0) e = -e; printf "%.3f", e }')
		ok=$(awk -v e="$err" -v w="$want" 'BEGIN { print (e <= 0.05 * w || e <= 0.3) }')
		out "$(printf '  %-12s %9s ms %9.3f ms %7.3f ms   %s' "${d} ms" "$want" "$v" "$err" "$(verdict "$ok")")"
		emit_json scenario=rtt delay_ms:="$d" want_rtt_ms:="$want" rtt_ms:="$v" error_ms:="$err" pass:="$([[ $ok == 1 ]] && echo true || echo false)"
	done
	testbed_down "$tb"
}

# ---------------------------------------------------------------------------
# Loss

scenario_loss() {
	local tb=lpb-loss p in0 drop0 in1 drop1 emu_loss e2e_loss rate ok len=1000 bytes
	pair_topology "$W/topo/loss.yaml" 10G 0s 1500
	testbed_up "$tb" "$W/topo/loss.yaml"
	start_server_in "$(ns $tb h2)" 5201 "$W/logs/iperf3-loss.out" iperf3 -s -B 198.18.1.2 -p 5201 ||
		die "iperf3 server: $START_ERROR"
	bytes=$((LOSS_PACKETS * len))
	out ""
	out "Loss over $LOSS_PACKETS UDP datagrams of $len bytes at 800 Mbit/s (16 MB socket buffers)"
	out "$(printf '  %-10s %14s %14s %14s   %s' configured "end to end" "emulator" "datagrams" "verdict (within 10%)")"
	for p in 0.1 1; do
		"$LP" testbed link set --name "$tb" l --loss "${p}%"
		in0=$(status_field "$tb" l h1 packets_in)
		drop0=$(status_field "$tb" l h1 drops_loss)
		ip netns exec "$(ns $tb h1)" iperf3 -c 198.18.1.2 -p 5201 -u -b 800M -l "$len" -w 16M -n "$bytes" -J \
			>"$W/logs/loss-$p.json" 2>&1 || die "iperf3 -u: $(last_line "$W/logs/loss-$p.json")"
		sleep 0.5
		in1=$(status_field "$tb" l h1 packets_in)
		drop1=$(status_field "$tb" l h1 drops_loss)
		e2e_loss=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["end"]["sum"]
print("%.5f %d" % (100.0 * s["lost_packets"] / s["packets"], s["packets"]))
' "$W/logs/loss-$p.json")
		emu_loss=$(awk -v a="$in0" -v b="$in1" -v c="$drop0" -v d="$drop1" 'BEGIN { printf "%.5f", 100 * (d - c) / (b - a) }')
		rate=${e2e_loss% *}
		ok=$(awk -v m="$rate" -v p="$p" 'BEGIN { e = m - p; if (e < 0) e = -e; print (e <= 0.1 * p) }')
		out "$(printf '  %-10s %13.4f%% %13.4f%% %14s   %s' "${p}%" "$rate" "$emu_loss" "${e2e_loss#* }" "$(verdict "$ok")")"
		emit_json scenario=loss configured_percent:="$p" end_to_end_percent:="$rate" emulator_percent:="$emu_loss" \
			datagrams:="${e2e_loss#* }" pass:="$([[ $ok == 1 ]] && echo true || echo false)"
	done
	stop_servers
	testbed_down "$tb"
}

# ---------------------------------------------------------------------------
# TCP across a long fat link

scenario_tcp() {
	local tb=lpb-tcp cc bps frac ok
	pair_topology "$W/topo/tcp.yaml" 1G 25ms 1500
	testbed_up "$tb" "$W/topo/tcp.yaml"
	start_server_in "$(ns $tb h2)" 5201 "$W/logs/iperf3-tcp.out" iperf3 -s -B 198.18.1.2 -p 5201 ||
		die "iperf3 server: $START_ERROR"
	out ""
	out "TCP through a 1 Gbit/s link with 50 ms RTT (iperf3, 1 stream, ${DURATION} s)"
	out "$(printf '  %-8s %12s %10s   %s' cc Mbit/s "of rate" verdict)"
	for cc in bbr cubic; do
		ip netns exec "$(ns $tb h1)" iperf3 -c 198.18.1.2 -p 5201 -C "$cc" -t "$DURATION" -J >"$W/logs/tcp-$cc.json" 2>&1 ||
			die "iperf3 -C $cc: $(last_line "$W/logs/tcp-$cc.json")"
		bps=$(iperf3_bps "$W/logs/tcp-$cc.json")
		frac=$(awk -v b="$bps" 'BEGIN { printf "%.3f", b / 1e9 }')
		if [[ $cc == bbr ]]; then
			ok=$(awk -v f="$frac" 'BEGIN { print (f >= 0.9) }')
			out "$(printf '  %-8s %12.1f %10s   %s' "$cc" "$(awk -v b="$bps" 'BEGIN { print b / 1e6 }')" "$frac" "$(verdict "$ok") (target >= 0.9)")"
		else
			out "$(printf '  %-8s %12.1f %10s   %s' "$cc" "$(awk -v b="$bps" 'BEGIN { print b / 1e6 }')" "$frac" "(informational)")"
		fi
		emit_json scenario=tcp cc="$cc" bps:="$bps" fraction:="$frac"
	done
	stop_servers
	testbed_down "$tb"
}

# ---------------------------------------------------------------------------
# The emulator's ceiling against a bare veth pair

# veth_pair MTU makes two namespaces joined by a bare veth pair.
veth_pair() {
	local a=lpb-veth-a b=lpb-veth-b
	ip netns del $a 2>/dev/null || true
	ip netns del $b 2>/dev/null || true
	ip netns add $a && ip netns add $b
	VETH_NS+=("$a" "$b")
	ip -n $a link add v0 mtu "$1" type veth peer name v1 mtu "$1" netns $b
	ip -n $a addr add 198.18.250.1/30 dev v0
	ip -n $b addr add 198.18.250.2/30 dev v1
	ip -n $a link set v0 up && ip -n $b link set v1 up
	ip -n $a link set lo up && ip -n $b link set lo up
}

# iperf_between CLIENT_NS SERVER_NS ADDR LOG prints iperf3's bits per second.
iperf_between() {
	start_server_in "$2" 5202 "$4.server" iperf3 -s -1 -B "$3" -p 5202 || die "iperf3 server: $START_ERROR"
	ip netns exec "$1" iperf3 -c "$3" -p 5202 -t "$DURATION" -J >"$4" 2>&1 || die "iperf3: $(last_line "$4")"
	iperf3_bps "$4"
}

scenario_ceiling() {
	local mtu tb veth emu pid t0 t1 cpu ratio ok hz
	hz=$(getconf CLK_TCK)
	out ""
	out "The emulator's ceiling: iperf3, 1 stream, ${DURATION} s, no delay, no loss, link rate 100 Gbit/s"
	out "$(printf '  %-6s %14s %14s %8s %14s   %s' MTU "veth Gbit/s" "testbed Gbit/s" ratio "emulator CPU" verdict)"
	for mtu in 1500 9000; do
		veth_pair "$mtu"
		veth=$(iperf_between lpb-veth-a lpb-veth-b 198.18.250.2 "$W/logs/veth-$mtu.json")
		ip netns del lpb-veth-a && ip netns del lpb-veth-b
		tb=lpb-ceil$mtu
		pair_topology "$W/topo/ceil$mtu.yaml" 100G 0s "$mtu"
		testbed_up "$tb" "$W/topo/ceil$mtu.yaml"
		pid=$(cat "/run/lightpath/$tb/emulator.pid")
		t0=$(cpu_ticks "$pid")
		emu=$(iperf_between "$(ns $tb h1)" "$(ns $tb h2)" 198.18.1.2 "$W/logs/ceil-$mtu.json")
		t1=$(cpu_ticks "$pid")
		cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" -v d="$DURATION" 'BEGIN { printf "%.0f%%", 100 * (b - a) / hz / d }')
		ratio=$(awk -v a="$emu" -v b="$veth" 'BEGIN { printf "%.2f", a / b }')
		if [[ $mtu == 9000 ]]; then
			ok=$(verdict "$(awk -v r="$ratio" 'BEGIN { print (r >= 0.5) }')")" (target >= 0.5)"
		else
			ok="(informational)"
		fi
		out "$(printf '  %-6s %14s %14s %8s %14s   %s' "$mtu" "$(gbit "$veth")" "$(gbit "$emu")" "$ratio" "$cpu of a core" "$ok")"
		emit_json scenario=ceiling mtu:="$mtu" veth_bps:="$veth" testbed_bps:="$emu" ratio:="$ratio" emulator_cpu="$cpu"
		stop_servers
		testbed_down "$tb"
	done
}

# ---------------------------------------------------------------------------
# Movers over the routed path of two-site.yaml

declare -A MOVER_RESULTS=() MOVER_STATUS=()
SRC_FILE=$W/src/data.bin

mover_run() {
	local tool=$1 cc=$2 port=$3 tb=$4 a1 b1
	a1=$(ns "$tb" a1) b1=$(ns "$tb" b1)
	# The peers take the namespace's default congestion control; lightpath
	# is told.
	ip netns exec "$a1" sysctl -qw net.ipv4.tcp_congestion_control="$cc"
	ip netns exec "$b1" sysctl -qw net.ipv4.tcp_congestion_control="$cc"
	find "$W/lp" "$W/gftp" "$W/xrd/data" -mindepth 1 -delete
	case $tool in
	lightpath)
		timed "$W/logs/mv-$tool-$cc.out" "$MOVER_TIMEOUT" ip netns exec "$a1" "$LP" cp --cc "$cc" --json "$SRC_FILE" \
			"lp://198.18.2.1:$port/data.bin" || return 1
		cmp -s "$SRC_FILE" "$W/lp/data.bin" || { RUN_ERROR="copy differs"; return 1; }
		;;
	gridftp)
		timed "$W/logs/mv-$tool-$cc.out" "$MOVER_TIMEOUT" ip netns exec "$a1" globus-url-copy -p 4 \
			"file://$SRC_FILE" "ftp://198.18.2.1:$port$W/gftp/data.bin" || return 1
		cmp -s "$SRC_FILE" "$W/gftp/data.bin" || { RUN_ERROR="copy differs"; return 1; }
		;;
	xrdcp)
		timed "$W/logs/mv-$tool-$cc.out" "$MOVER_TIMEOUT" ip netns exec "$a1" xrdcp -s -f \
			"$SRC_FILE" "root://198.18.2.1:$port/$W/xrd/data/data.bin" || return 1
		cmp -s "$SRC_FILE" "$W/xrd/data/data.bin" || { RUN_ERROR="copy differs"; return 1; }
		;;
	esac
}

scenario_movers() {
	local tb=lpb-movers tool cc run b1ns port frac med ok n
	declare -A PORTS=([lightpath]=7070 [gridftp]=2811 [xrdcp]=1094)
	testbed_up "$tb" "$REPO/examples/two-site.yaml"
	b1ns=$(ns "$tb" b1)
	# The peers take the congestion control from the namespace's default,
	# and a namespace may only choose one the host allows: allow cubic too
	# (restored at the end).
	grep -qw cubic /proc/sys/net/ipv4/tcp_allowed_congestion_control ||
		echo "$ALLOWED_CC cubic" >/proc/sys/net/ipv4/tcp_allowed_congestion_control
	# globus-gridftp-server resolves its own address and the host's name and
	# gives up without an answer; namespaces have no DNS, so `ip netns exec`
	# gets a hosts file of their own (/etc/netns/NS/hosts).
	for n in a1 b1; do
		mkdir -p "/etc/netns/$(ns "$tb" $n)"
		ETC_NETNS+=("$(ns "$tb" $n)")
	done
	printf '127.0.0.1 localhost\n198.18.1.1 a1 %s\n198.18.2.1 b1\n' "$(hostname)" >"/etc/netns/$(ns "$tb" a1)/hosts"
	printf '127.0.0.1 localhost\n198.18.2.1 b1 %s\n198.18.1.1 a1\n' "$(hostname)" >"/etc/netns/$(ns "$tb" b1)/hosts"
	log "generating $(numfmt --to=iec-i "$SIZE_BYTES")B of random data"
	{ openssl enc -aes-128-ctr -pass pass:lightpath -nosalt </dev/zero 2>/dev/null || true; } | head -c "$SIZE_BYTES" >"$SRC_FILE"
	for tool in lightpath gridftp xrdcp; do MOVER_STATUS[$tool]=ok; done
	[[ -z ${UNAVAILABLE[globus-url-copy]:-}${UNAVAILABLE[globus-gridftp-server]:-} ]] ||
		MOVER_STATUS[gridftp]="unavailable (${UNAVAILABLE[globus-url-copy]:-${UNAVAILABLE[globus-gridftp-server]}})"
	[[ -z ${UNAVAILABLE[xrdcp]:-}${UNAVAILABLE[xrootd]:-} ]] ||
		MOVER_STATUS[xrdcp]="unavailable (${UNAVAILABLE[xrdcp]:-${UNAVAILABLE[xrootd]}})"
	start_server_in "$b1ns" 7070 "$W/logs/lp-server.out" "$LP" serve --listen 198.18.2.1:7070 --root "$W/lp" ||
		die "lightpath serve: $START_ERROR"
	if [[ ${MOVER_STATUS[gridftp]} == ok ]]; then
		chmod 1777 "$W/gftp"
		start_server_in "$b1ns" 2811 "$W/logs/gridftp-server.out" globus-gridftp-server -aa -anonymous-user nobody -p 2811 \
			-d error -control-interface 198.18.2.1 -data-interface 198.18.2.1 -l "$W/logs/gridftp.log" ||
			MOVER_STATUS[gridftp]="unavailable (server $START_ERROR)"
	fi
	if [[ ${MOVER_STATUS[xrdcp]} == ok ]]; then
		cat >"$W/xrd/xrootd.cfg" <<-EOF
			all.export $W/xrd/data
			all.adminpath $W/xrd/admin
			all.pidpath $W/xrd/admin
			xrd.network nodnr
		EOF
		chown -R nobody "$W/xrd"
		start_server_in "$b1ns" 1094 "$W/logs/xrootd-server.out" xrootd -R nobody -p 1094 -c "$W/xrd/xrootd.cfg" \
			-l "$W/xrd/xrootd.log" || MOVER_STATUS[xrdcp]="unavailable (server $START_ERROR)"
	fi
	for ((run = 1; run <= RUNS; run++)); do
		for cc in bbr cubic; do
			for tool in lightpath gridftp xrdcp; do
				[[ ${MOVER_STATUS[$tool]} == ok ]] || continue
				[[ ${MOVER_STATUS[$tool|$cc]:-ok} == ok ]] || continue
				RUN_ERROR=
				if mover_run "$tool" "$cc" "${PORTS[$tool]}" "$tb"; then
					frac=$(awk -v b="$SIZE_BYTES" -v s="$ELAPSED" 'BEGIN { printf "%.3f", b * 8 / s / 1e9 }')
					MOVER_RESULTS[$tool|$cc]+="$frac "
					log "movers run $run/$RUNS $tool $cc: $frac of 1 Gbit/s in ${ELAPSED}s"
				elif [[ $RUN_ERROR == "timed out"* ]]; then
					MOVER_STATUS[$tool|$cc]="did not finish in $MOVER_TIMEOUT s: < $(awk -v b="$SIZE_BYTES" -v s="$MOVER_TIMEOUT" 'BEGIN { printf "%.3f", b * 8 / s / 1e9 }') of the rate"
					log "movers $tool $cc: ${MOVER_STATUS[$tool|$cc]}"
				else
					MOVER_STATUS[$tool|$cc]="unavailable (run $run: ${RUN_ERROR:-failed})"
					log "movers $tool $cc: ${MOVER_STATUS[$tool|$cc]}"
				fi
			done
		done
	done
	stop_servers
	out ""
	out "Movers over two-site's routed path (1 Gbit/s, 50 ms RTT, 0.01% loss), $(numfmt --to=iec-i "$SIZE_BYTES")B from a1 to b1, median of $RUNS"
	out "$(printf '  %-28s %-6s %10s   %s' tool cc "of rate" "runs")"
	declare -A LABEL=([lightpath]="lightpath cp" [gridftp]="globus-url-copy -p 4" [xrdcp]="xrdcp")
	declare -A MEDIAN=()
	for tool in lightpath gridftp xrdcp; do
		for cc in bbr cubic; do
			local st=${MOVER_STATUS[$tool]}
			[[ $st != ok ]] || st=${MOVER_STATUS[$tool|$cc]:-ok}
			if [[ $st == ok ]]; then
				# shellcheck disable=SC2086 # a space-separated list
				med=$(printf '%s\n' ${MOVER_RESULTS[$tool|$cc]} | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
				ok=""
				# The target is for lightpath's default, BBR; under random
				# loss CUBIC is bound by it (Mathis) whatever the mover.
				if [[ $tool == lightpath && $cc == bbr ]]; then ok="$(verdict "$(awk -v f="$med" 'BEGIN { print (f >= 0.9) }')") (target >= 0.9)"; fi
				MEDIAN[$tool|$cc]=$med
				out "$(printf '  %-28s %-6s %10s   %s   %s' "${LABEL[$tool]}" "$cc" "$med" "${MOVER_RESULTS[$tool|$cc]}" "$ok")"
				emit_json scenario=movers tool="${LABEL[$tool]}" cc="$cc" fraction:="$med" runs:="[$(echo "${MOVER_RESULTS[$tool|$cc]}" | xargs | tr ' ' ',')]"
			else
				out "$(printf '  %-28s %-6s %10s   %s' "${LABEL[$tool]}" "$cc" - "$st")"
				emit_json scenario=movers tool="${LABEL[$tool]}" cc="$cc" status=unavailable reason="$st"
			fi
		done
	done
	for cc in bbr cubic; do
		local best=
		for tool in gridftp xrdcp; do
			if [[ -n ${MEDIAN[$tool|$cc]:-} ]] && { [[ -z $best ]] || awk -v a="${MEDIAN[$tool|$cc]}" -v b="$best" 'BEGIN { exit !(a > b) }'; }; then
				best=${MEDIAN[$tool|$cc]}
			fi
		done
		if [[ -n ${MEDIAN[lightpath|$cc]:-} && -n $best ]]; then
			out "$(printf '  ratio lightpath / faster peer, %-6s %6.2f' "$cc" "$(awk -v a="${MEDIAN[lightpath|$cc]}" -v b="$best" 'BEGIN { print a / b }')")"
			emit_json scenario=movers ratio="lightpath / faster peer" cc="$cc" value:="$(awk -v a="${MEDIAN[lightpath|$cc]}" -v b="$best" 'BEGIN { printf "%.3f", a / b }')"
		fi
	done
	testbed_down "$tb"
}

main() {
	local t0=$SECONDS
	install_peers
	build_lightpath
	emit_json bench=testbed runs:="$RUNS" duration_s:="$DURATION" size_bytes:="$SIZE_BYTES" \
		cores:="$(nproc)" kernel="$(uname -r)"
	if wanted rtt; then scenario_rtt; fi
	if wanted loss; then scenario_loss; fi
	if wanted tcp; then scenario_tcp; fi
	if wanted ceiling; then scenario_ceiling; fi
	if wanted movers; then scenario_movers; fi
	out ""
	log "done in $((SECONDS - t0)) s"
}

main

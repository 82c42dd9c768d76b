#!/usr/bin/env bash
# movers.sh: Lightpath against its peers, side by side, in one run, on
# loopback with the data on tmpfs, so that the ratios compare like with like.
#
#   bench/movers.sh [--json] [--only mem|file|many]
#
# Scenarios (each figure is the median of RUNS runs, the tools taking turns so
# that drift in the machine hits them alike):
#   mem   memory to memory, 1 and 4 streams: iperf3, iperf2, lightpath bench.
#         Ratio lightpath / max(iperf3, iperf2), target >= 0.9.
#   file  one SIZE file, tmpfs to tmpfs: globus-url-copy -p 4 -fast, xrdcp,
#         lightpath cp, the local limit `cat src | cat > dst`, and the write
#         ceiling `dd if=/dev/zero` (new tmpfs pages, nothing read, no network).
#         Ratios lightpath / faster peer (>= 1.5) and lightpath / cat (>= 0.8);
#         lightpath / write ceiling is informational.
#   many  NFILES files of 16 KiB to 2 MiB (log-uniform) in a small tree:
#         globus-url-copy -r -cc 4 -pp -fast, xrdcp -r --parallel 4,
#         lightpath cp -r. Ratio lightpath / faster peer, target >= 2.
# File throughput is bytes / wall-clock seconds of the whole command, the
# same for every tool, whatever the tool says about itself.
#
# Environment: RUNS (3), DURATION (5, seconds, "5s" accepted), SIZE (2G),
# NFILES (5000), ONLY (mem|file|many), JSON=1 (same as --json), TIMEOUT (300,
# seconds per file-copy command), VERIFY (1: compare content after the first
# run of each tool), WARMUP (1: one unrecorded round before the file
# scenarios' runs; 0 to skip), KEEP=1 (keep the work directory), PORT_BASE
# (29100), LIGHTPATH (a lightpath binary to use instead of building one),
# BASELINE (another lightpath binary, such as a build of an earlier commit:
# measured in every scenario beside the others, taking turns with them,
# with its own server; the ratio lightpath / baseline, target >= 0.97, says
# whether a change cost throughput).
#
# Output: a table per scenario on stdout; with --json, one JSON object per
# line on stdout instead (the table then goes to stderr). A peer that cannot
# be installed or fails is "unavailable (why)" and its ratio is skipped.
# Exit 0 when the measurements completed (whatever the ratios), 2 on the
# script's own errors.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$HERE/lib.sh"

# ---------------------------------------------------------------------------
# Settings

RUNS=${RUNS:-3}
# The congestion control lightpath runs on loopback; the peers are measured
# with it too, beside their defaults.
SAME_CC=${SAME_CC:-cubic}
DURATION=${DURATION:-5}
DURATION=${DURATION%s}
SIZE=${SIZE:-2G}
NFILES=${NFILES:-5000}
ONLY=${ONLY:-}
JSON=${JSON:-0}
TIMEOUT=${TIMEOUT:-300}
VERIFY=${VERIFY:-1}
WARMUP=${WARMUP:-1}
KEEP=${KEEP:-0}

parse_args "$@"

[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer, not '$RUNS'"
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || die "DURATION must be whole seconds, not '$DURATION'"
[[ $NFILES =~ ^[1-9][0-9]*$ ]] || die "NFILES must be a positive integer, not '$NFILES'"
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || die "TIMEOUT must be whole seconds, not '$TIMEOUT'"
case $ONLY in '' | mem | file | many) ;; *) die "ONLY must be mem, file or many, not '$ONLY'" ;; esac
SIZE_BYTES=$(numfmt --from=iec "$SIZE" 2>/dev/null) || die "SIZE must be like 2G or 512M, not '$SIZE'"
((SIZE_BYTES > 0)) || die "SIZE must be more than 0"
if ((RUNS < 3)); then log "note: RUNS=$RUNS; the brief for published figures is at least 3"; fi

wanted() { [[ -z $ONLY || $ONLY == "$1" ]]; }

# The servers that drop root need a user to become; nobody owns nothing, so
# every directory they must write is handed to it explicitly.
if [[ $(id -u) -eq 0 ]]; then RUN_AS=nobody; else RUN_AS=; fi

# globus-gridftp-server lives in /usr/sbin and go in /usr/local/go/bin, which
# a non-login shell may not have on PATH.
PATH=$PATH:/usr/sbin:/sbin:/usr/local/go/bin

# ---------------------------------------------------------------------------
# Work directory on tmpfs, and cleaning up whatever happens

[[ $(stat -f -c %T /dev/shm 2>/dev/null) == tmpfs ]] || die "/dev/shm is not a tmpfs; the figures would measure a disk"
W=$(mktemp -d /dev/shm/lpbench.XXXXXX) || die "cannot create a work directory in /dev/shm"
# mktemp makes it 0700; the servers running as nobody must get through it.
chmod 755 "$W"
# One destination directory per tool, each emptied before each of its runs.
mkdir -p "$W/logs" "$W/src" "$W/gftp" "$W/xrd/data" "$W/xrd/admin" "$W/lp" "$W/lpb" "$W/cat"
APT_LOG=$W/logs/apt.log

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	stop_servers
	if [[ $KEEP == 1 ]]; then
		log "kept $W"
	else
		rm -rf -- "$W"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------
# Results

declare -A STATUS=()  # scenario|tool -> ok, or unavailable (why)
declare -A RESULTS=() # scenario|tool -> bits per second of each run
declare -A NAME=([iperf3]=iperf3 [iperf2]="iperf (2)" [iperf3cc]="iperf3 -C $SAME_CC" [iperf2cc]="iperf -Z $SAME_CC" [lightpath]=lightpath [baseline]="lightpath (base)"
	[gridftp]=globus-url-copy [xrdcp]=xrdcp [cat]="cat | cat" [zero]="dd /dev/zero")


# mark_unavailable SCEN TOOL WHY, unless the tool already failed there.
mark_unavailable() {
	if [[ ${STATUS[$1|$2]} == ok ]]; then
		STATUS[$1|$2]="unavailable ($3)"
		log "${NAME[$2]} in $1: unavailable ($3)"
	fi
}

# tool_reason TOOL prints why TOOL cannot run at all in this run (missing
# command, build or server failure), or nothing.
tool_reason() {
	case $1 in
	lightpath) printf '%s' "${LP_REASON:-}" ;;
	baseline) printf '%s' "${BASE_REASON:-}" ;;
	iperf3 | iperf3cc) printf '%s' "${UNAVAILABLE[iperf3]:-${SERVER_ERR[iperf3]:-}}" ;;
	iperf2 | iperf2cc) printf '%s' "${UNAVAILABLE[iperf]:-${SERVER_ERR[iperf2]:-}}" ;;
	gridftp) printf '%s' "${UNAVAILABLE[globus-url-copy]:-${UNAVAILABLE[globus-gridftp-server]:-${SERVER_ERR[gridftp]:-}}}" ;;
	xrdcp) printf '%s' "${UNAVAILABLE[xrdcp]:-${UNAVAILABLE[xrootd]:-${SERVER_ERR[xrootd]:-}}}" ;;
	cat | zero) ;;
	esac
}

# measure SCEN KIND BYTES TOOL... runs `run_KIND_TOOL RUN BYTES` RUNS times
# for each tool, taking turns in an order rotated at each run, after an unrecorded warm-up round (run 0) if
# WARMUP=1: the first run of a copy tool was up to 3x slower here (cold
# pages, cold server).
# A run function moves BYTES (or, for memory-to-memory, sets BPS itself) and
# returns non-zero with RUN_ERROR on failure; a tool that fails once is
# dropped from the scenario, so that no median is ever made of fewer runs
# than asked.
measure() {
	local scen=$1 kind=$2 bytes=$3 tool why run warm=$WARMUP
	shift 3
	[[ $kind != mem ]] || warm=0 # a timed stream has no cold start to hide
	FIRST_RUN=$((warm > 0 ? 0 : 1))
	for tool in "$@"; do
		STATUS[$scen|$tool]=ok
		RESULTS[$scen|$tool]=
		why=$(tool_reason "$tool")
		if [[ -n $why ]]; then mark_unavailable "$scen" "$tool" "$why"; fi
	done
	local -a tools=("$@") order
	local n=$# i
	for ((run = FIRST_RUN; run <= RUNS; run++)); do
		# Each run starts one tool further along, so that no tool always
		# runs right after the same one (a copy right after another large
		# one was often half as fast here).
		order=()
		for ((i = 0; i < n; i++)); do order+=("${tools[(i + run) % n]}"); done
		for tool in "${order[@]}"; do
			[[ ${STATUS[$scen|$tool]} == ok ]] || continue
			BPS='' ELAPSED='' RUN_ERROR=''
			if "run_${kind}_${tool}" "$run" "$bytes"; then
				if [[ -z $BPS ]]; then
					BPS=$(awk -v b="$bytes" -v s="$ELAPSED" 'BEGIN { printf "%.0f", b * 8 / s }')
				fi
				if ((run > 0)); then RESULTS[$scen|$tool]+="$BPS "; fi
				log "$scen run $run/$RUNS$( ((run > 0)) || echo ' (warm-up)') ${NAME[$tool]}: $(gbit "$BPS") Gbit/s${ELAPSED:+ in ${ELAPSED}s}"
			else
				mark_unavailable "$scen" "$tool" "run $run: ${RUN_ERROR:-failed}"
			fi
		done
	done
}

# median_of SCEN TOOL prints the median in bit/s, or nothing if unavailable.
median_of() {
	[[ ${STATUS[$1|$2]} == ok ]] || return 0
	# shellcheck disable=SC2086 # the runs are a space-separated list
	median ${RESULTS[$1|$2]}
}

# report SCEN TITLE TOOL... prints the scenario's table.
report() {
	local scen=$1 title=$2 tool med runs r extra=()
	shift 2
	out ""
	out "$title"
	out "$(printf '  %-16s %10s   %s' tool Gbit/s "runs (Gbit/s)")"
	if [[ $scen == mem-* ]]; then extra=(streams:="${scen#mem-}" duration_s:="$DURATION"); fi
	for tool in "$@"; do
		if [[ ${STATUS[$scen|$tool]} == ok ]]; then
			med=$(median_of "$scen" "$tool")
			runs=
			for r in ${RESULTS[$scen|$tool]}; do runs+="${runs:+ }$(gbit "$r")"; done
			out "$(printf '  %-16s %10s   %s' "${NAME[$tool]}" "$(gbit "$med")" "$runs")"
			emit_json scenario="$scen" "${extra[@]}" tool="${NAME[$tool]}" status=ok \
				median_bps:="$med" runs_bps:="[$(echo "${RESULTS[$scen|$tool]}" | xargs | tr ' ' ',')]"
		else
			out "$(printf '  %-16s %10s   %s' "${NAME[$tool]}" - "${STATUS[$scen|$tool]}")"
			emit_json scenario="$scen" "${extra[@]}" tool="${NAME[$tool]}" status=unavailable \
				reason="${STATUS[$scen|$tool]#unavailable }"
		fi
	done
}

# ratio SCEN LABEL TARGET DENOMINATOR_TOOL... prints lightpath's median over
# the best of the denominators, against the target ("-": informational, no
# target). Skipped, never guessed,
# when lightpath or every denominator is unavailable.
ratio() {
	local scen=$1 label=$2 target=$3 tool m best='' lp value verdict tj
	shift 3
	tj=$target # "-": informational, no target
	if [[ $target == - ]]; then tj=null; fi
	lp=$(median_of "$scen" lightpath)
	for tool in "$@"; do
		m=$(median_of "$scen" "$tool")
		if [[ -n $m ]] && { [[ -z $best ]] || ((m > best)); }; then best=$m; fi
	done
	if [[ -z $lp ]]; then
		out "  ratio $label: skipped (lightpath unavailable)"
		emit_json scenario="$scen" ratio="$label" target:="$tj" status=skipped reason="lightpath unavailable"
	elif [[ -z $best ]]; then
		out "  ratio $label: skipped (no peer available)"
		emit_json scenario="$scen" ratio="$label" target:="$tj" status=skipped reason="no peer available"
	else
		value=$(awk -v a="$lp" -v b="$best" 'BEGIN { printf "%.3f", a / b }')
		if [[ $target == - ]]; then
			out "$(printf '  ratio %-34s %6.2f   (informational)' "$label" "$value")"
			emit_json scenario="$scen" ratio="$label" value:="$value" status=ok informational:=true
			return
		fi
		if awk -v v="$value" -v t="$target" 'BEGIN { exit !(v >= t) }'; then verdict=PASS; else verdict=FAIL; fi
		out "$(printf '  ratio %-34s %6.2f   target >= %-4s %s' "$label" "$value" "$target" "$verdict")"
		emit_json scenario="$scen" ratio="$label" value:="$value" target:="$target" \
			status=ok pass:="$([[ $verdict == PASS ]] && echo true || echo false)"
	fi
}

# base_ratio SCEN prints lightpath / baseline when a BASELINE is measured:
# a change that costs more than 3% fails it.
base_ratio() {
	if [[ -n $BASE_TOOLS ]]; then ratio "$1" "lightpath / baseline" 0.97 baseline; fi
}

# ---------------------------------------------------------------------------
# Peers, Lightpath, servers

install_peers() {
	# Only missing commands trigger apt; python3 parses JSON, ss finds
	# listening ports, openssl makes random data fast (urandom is a fallback).
	command -v python3 >/dev/null || die "python3 is needed to parse results"
	command -v ss >/dev/null || die "ss (iproute2) is needed to wait for servers"
	ensure_commands iperf3=iperf3 iperf=iperf xrdcp=xrootd-client xrootd=xrootd-server \
		globus-url-copy=globus-gass-copy-progs globus-gridftp-server=globus-gridftp-server-progs
}

LP=${LIGHTPATH:-$REPO/bin/lightpath}
LP_REASON=
BASE=${BASELINE:-}
BASE_REASON=
if [[ -n $BASE && ! -x $BASE ]]; then BASE_REASON="BASELINE=$BASE is not an executable"; fi
# BASE_TOOLS is "baseline" when a baseline is measured, for the tool lists.
BASE_TOOLS=${BASE:+baseline}
build_lightpath() {
	if [[ -n ${LIGHTPATH:-} ]]; then
		# A binary given from outside (another build, another commit).
		[[ -x $LP ]] || LP_REASON="LIGHTPATH=$LP is not an executable"
		return 0
	fi
	if ! command -v go >/dev/null; then
		LP_REASON="no go toolchain to build it"
		return 0
	fi
	log "building bin/lightpath"
	if ! (cd "$REPO" && go build -o bin/lightpath ./cmd/lightpath) >"$W/logs/build.log" 2>&1; then
		# The first line names the failing file and why; go's hints follow.
		LP_REASON="build failed: $(grep -v '^[[:space:]]*$' "$W/logs/build.log" | grep -v '^#' | head -n 1 | tr -d '\t' | cut -c 1-160)"
	fi
}

declare -A SERVER_ERR=() # server -> why it did not start
declare -A SERVER_PORT=()
declare -A STARTED=()

# need_server NAME starts NAME once, the first time a scenario needs it.
need_server() {
	local name=$1
	[[ -z ${STARTED[$name]:-} ]] || return 0
	STARTED[$name]=1
	next_port
	SERVER_PORT[$name]=$PORT
	local -a cmd
	case $name in
	iperf3)
		[[ -z ${UNAVAILABLE[iperf3]:-} ]] || return 0
		cmd=(iperf3 -s -B 127.0.0.1 -p "$PORT")
		;;
	iperf2)
		[[ -z ${UNAVAILABLE[iperf]:-} ]] || return 0
		cmd=(iperf -s -B 127.0.0.1 -p "$PORT")
		;;
	gridftp)
		[[ -z ${UNAVAILABLE[globus-gridftp-server]:-} ]] || return 0
		# No GSI: -aa allows clear-text anonymous access over ftp:// URLs.
		# As root the server insists on a user to setuid to for anonymous
		# sessions (-anonymous-user), so it writes as nobody into a 1777
		# directory. It forks a child per connection (daemon mode, the
		# default); control and data channels are bound to loopback.
		chmod 1777 "$W/gftp"
		cmd=(globus-gridftp-server -aa ${RUN_AS:+-anonymous-user "$RUN_AS"} -p "$PORT"
			-d error -control-interface 127.0.0.1 -data-interface 127.0.0.1
			-l "$W/logs/gridftp-server.log")
		;;
	xrootd)
		[[ -z ${UNAVAILABLE[xrootd]:-} ]] || return 0
		# xrootd refuses to run as root ("Security reasons prohibit running
		# as superuser"), hence -R nobody and directories owned by it. The
		# export is writable by default, and without a sec.protocol the
		# access is anonymous. It listens on all addresses (xrootd has no
		# bind option), so xrd.allow admits loopback clients only; nodnr
		# skips reverse DNS look-ups.
		cat >"$W/xrd/xrootd.cfg" <<-EOF
			all.export $W/xrd/data
			all.adminpath $W/xrd/admin
			all.pidpath $W/xrd/admin
			xrd.network nodnr
			xrd.allow host 127.0.0.1
		EOF
		if [[ -n $RUN_AS ]]; then chown -R "$RUN_AS" "$W/xrd"; fi
		# Its log goes where nobody may write.
		cmd=(xrootd ${RUN_AS:+-R "$RUN_AS"} -p "$PORT" -c "$W/xrd/xrootd.cfg" -l "$W/xrd/xrootd.log")
		;;
	lightpath)
		[[ -z $LP_REASON ]] || return 0
		cmd=("$LP" serve --listen "127.0.0.1:$PORT" --root "$W/lp")
		;;
	baseline)
		[[ -n $BASE && -z $BASE_REASON ]] || return 0
		cmd=("$BASE" serve --listen "127.0.0.1:$PORT" --root "$W/lpb")
		;;
	esac
	log "starting $name server on 127.0.0.1:$PORT"
	START_ERROR=
	if ! start_server "$PORT" "$W/logs/$name-server.out" "${cmd[@]}"; then
		if [[ $name == lightpath ]]; then
			LP_REASON="serve failed: $START_ERROR"
		elif [[ $name == baseline ]]; then
			BASE_REASON="serve failed: $START_ERROR"
		else
			SERVER_ERR[$name]="server failed: $START_ERROR"
		fi
		log "$name server: $START_ERROR"
	fi
}

# ---------------------------------------------------------------------------
# Data

# random_stream writes pseudo-random bytes without end: AES-CTR via openssl
# runs at GB/s, where /dev/urandom gives about 200 MB/s here. Either is
# incompressible, so no mover can win by compressing.
random_stream() {
	if command -v openssl >/dev/null; then
		openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass "pass:lpbench$RANDOM$RANDOM" </dev/zero 2>/dev/null
	else
		cat /dev/urandom
	fi
}

make_file() {
	local f=$1 n=$2 got
	log "generating $(numfmt --to=iec-i "$n")B of random data"
	# The stream is cut by head; its broken pipe is expected, so only the
	# size is checked.
	{ random_stream || true; } | head -c "$n" >"$f"
	got=$(stat -c %s "$f")
	((got == n)) || die "generated $got bytes instead of $n in $f"
}

# make_tree DIR N writes N files with sizes log-uniform between 16 KiB and
# 2 MiB (mean about 419 KiB, so 5000 files make about 2 GiB) into twelve
# directories two levels deep, and prints the total bytes. The sizes come
# from a fixed seed, so a given N always makes the same total.
MKTREE_PY=$(
	cat <<'PY'
import math, os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
lo, hi = math.log(16 << 10), math.log(2 << 20)
dirs = ["d%d" % i for i in range(4)] + ["d%d/s%d" % (i, j) for i in range(4) for j in range(2)]
src = sys.stdin.buffer
total = 0
for i in range(n):
    size = int(round(math.exp(rng.uniform(lo, hi))))
    d = os.path.join(root, dirs[i % len(dirs)])
    os.makedirs(d, exist_ok=True)
    data = src.read(size)
    if len(data) != size:
        sys.exit("random stream ended early")
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(data)
    total += size
print(total)
PY
)
make_tree() {
	log "generating $2 files (16 KiB to 2 MiB, log-uniform)"
	{ random_stream || true; } | python3 -c "$MKTREE_PY" "$1" "$2"
}

# clear_destinations empties every tool's destination right before each timed
# run, not only the running tool's. This machine is a VM whose guest returns
# freed memory to the host (free page reporting) and whose first touch of a
# page the guest has not used lately is slow: writing 2 GiB into such pages
# ran at 2.5-2.9 Gbit/s against 12-14 into pages freed just before. Freeing
# the previous copy right before each run gives every tool the same kind of
# pages; keeping other tools' copies around would hand the slow ones to
# whoever runs first.
clear_destinations() {
	local d
	for d in "$W/gftp" "$W/xrd/data" "$W/lp" "$W/lpb" "$W/cat"; do empty_dir "$d"; done
}

# check_copy RUN SRC DST BYTES checks that DST holds all the bytes and, after
# a tool's first run (the warm-up, or run 1 without one) with VERIFY=1, the
# same content, so that a fast but wrong copy never counts. DST is a file or
# a directory tree.
check_copy() {
	local run=$1 src=$2 dst=$3 bytes=$4 got
	if [[ -d $src ]]; then
		# Some movers copy DIR into DST/DIR, others DIR's content into DST.
		if [[ -d $dst/$(basename "$src") ]]; then dst=$dst/$(basename "$src"); fi
		got=$(dir_bytes "$dst")
	else
		got=$(stat -c %s "$dst" 2>/dev/null || echo 0)
	fi
	if ((got != bytes)); then
		RUN_ERROR="copied $got of $bytes bytes"
		return 1
	fi
	if [[ $VERIFY == 1 && $run == "$FIRST_RUN" ]]; then
		if [[ -d $src ]]; then
			if ! diff -rq "$src" "$dst" >"$W/logs/diff.out" 2>&1; then
				RUN_ERROR="copy differs: $(last_line "$W/logs/diff.out")"
				return 1
			fi
		elif ! cmp -s "$src" "$dst"; then
			RUN_ERROR="copy differs from the source"
			return 1
		fi
	fi
}

# ---------------------------------------------------------------------------
# Memory to memory

STREAMS=1

# PEER_CC_ARGS, when set, gives the iperfs a congestion control of their own.
PEER_CC_ARGS=()

# The *cc variants run the peers with the congestion control lightpath picks
# on loopback (cubic; BBR's pacing only costs there), so the table shows
# lightpath against the peers both as they ship and on equal terms.
with_peer_cc() { # OPTION RUN_FUNCTION ARGS...
	local opt=$1 rc=0
	shift
	PEER_CC_ARGS=("$opt" "$SAME_CC")
	"$@" || rc=$?
	PEER_CC_ARGS=()
	return "$rc"
}
run_mem_iperf3cc() { with_peer_cc -C run_mem_iperf3 "$@"; }
run_mem_iperf2cc() { with_peer_cc -Z run_mem_iperf2 "$@"; }

run_mem_iperf3() {
	local logf=$W/logs/mem-iperf3.json
	timed "$logf" $((DURATION + 30)) iperf3 -c 127.0.0.1 -p "${SERVER_PORT[iperf3]}" \
		-P "$STREAMS" -t "$DURATION" -J "${PEER_CC_ARGS[@]}" || return 1
	# What the receiver got, as iperf3 itself reports it.
	BPS=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
if d.get("error"): sys.exit(d["error"])
print("%.0f" % d["end"]["sum_received"]["bits_per_second"])' "$logf" 2>&1) || {
		RUN_ERROR="bad iperf3 JSON: ${BPS:0:120}"
		return 1
	}
	ELAPSED=
}

run_mem_iperf2() {
	local logf=$W/logs/mem-iperf2.csv
	timed "$logf" $((DURATION + 30)) iperf -c 127.0.0.1 -p "${SERVER_PORT[iperf2]}" \
		-P "$STREAMS" -t "$DURATION" -y C "${PEER_CC_ARGS[@]}" || return 1
	# CSV: ...,id,interval,bytes,bits_per_second. The sum line has id -1,
	# but iperf 2.1.8 leaves it out with -y C, so without it the per-stream
	# lines are added up.
	BPS=$(awk -F, 'NF >= 9 { if ($6 == -1) sum = $9; else streams += $9; n++ }
		END { if (sum) printf "%.0f\n", sum; else if (n) printf "%.0f\n", streams }' "$logf")
	if [[ -z $BPS || $BPS == 0 ]]; then
		RUN_ERROR="no result in iperf output: $(last_line "$logf")"
		return 1
	fi
	ELAPSED=
}

# lightpath_json LOG FIELD prints FIELD of the last stdout line, which the
# CLI contract makes the summary object.
lightpath_json() {
	python3 -c 'import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
if not lines: sys.exit("no output")
d = json.loads(lines[-1])
v = d[sys.argv[2]]
print("%.0f" % v if isinstance(v, (int, float)) else v)' "$1" "$2" 2>&1 | tail -n 1
	return "${PIPESTATUS[0]}"
}

run_mem_lightpath() { lp_mem "$LP" lightpath; }
run_mem_baseline() { lp_mem "$BASE" baseline; }

# lp_mem BINARY TOOL runs lightpath bench with BINARY against TOOL's server.
lp_mem() {
	local logf=$W/logs/mem-$2.json
	timed "$logf" $((DURATION + 30)) "$1" bench "lp://127.0.0.1:${SERVER_PORT[$2]}" \
		-P "$STREAMS" -t "${DURATION}s" --json || return 1
	BPS=$(lightpath_json "$logf" throughput_bps) || {
		RUN_ERROR="no throughput_bps in the last line: ${BPS:0:120}"
		return 1
	}
	ELAPSED=
}

scenario_mem() {
	local s
	need_server iperf3
	need_server iperf2
	need_server lightpath
	if [[ -n $BASE_TOOLS ]]; then need_server baseline; fi
	for s in 1 4; do
		STREAMS=$s
		log "scenario mem: $s stream(s), ${DURATION}s, $RUNS runs"
		# shellcheck disable=SC2086 # BASE_TOOLS is one word or none
		measure "mem-$s" mem 0 iperf3 iperf2 iperf3cc iperf2cc lightpath $BASE_TOOLS
		# shellcheck disable=SC2086
		report "mem-$s" "memory-to-memory, $s stream(s), ${DURATION} s, median of $RUNS" iperf3 iperf2 iperf3cc iperf2cc lightpath $BASE_TOOLS
		ratio "mem-$s" "lightpath / max(iperf3, iperf2)" 0.9 iperf3 iperf2
		ratio "mem-$s" "lightpath / max(iperfs with $SAME_CC)" 0.9 iperf3cc iperf2cc
		base_ratio "mem-$s"
	done
}

# ---------------------------------------------------------------------------
# One large file

SRC_FILE=$W/src/file.bin

run_file_gridftp() {
	clear_destinations
	timed "$W/logs/file-gridftp.out" "$TIMEOUT" globus-url-copy -p 4 -fast \
		"file://$SRC_FILE" "ftp://127.0.0.1:${SERVER_PORT[gridftp]}$W/gftp/dst.bin" || return 1
	check_copy "$1" "$SRC_FILE" "$W/gftp/dst.bin" "$2"
}

run_file_xrdcp() {
	clear_destinations
	timed "$W/logs/file-xrdcp.out" "$TIMEOUT" xrdcp -s \
		"$SRC_FILE" "root://127.0.0.1:${SERVER_PORT[xrootd]}/$W/xrd/data/dst.bin" || return 1
	check_copy "$1" "$SRC_FILE" "$W/xrd/data/dst.bin" "$2"
}

run_file_lightpath() { lp_file "$LP" lightpath lp "$@"; }
run_file_baseline() { lp_file "$BASE" baseline lpb "$@"; }

# lp_file BINARY TOOL DIR RUN BYTES copies the file with BINARY to TOOL's
# server, whose root is $W/DIR.
lp_file() {
	clear_destinations
	timed "$W/logs/file-$2.json" "$TIMEOUT" "$1" cp --json \
		"$SRC_FILE" "lp://127.0.0.1:${SERVER_PORT[$2]}/dst.bin" || return 1
	check_copy "$4" "$SRC_FILE" "$W/$3/dst.bin" "$5"
}

run_file_cat() {
	clear_destinations
	# The local limit: one reader, one writer into new tmpfs pages, no
	# network. Writing new pages is what bounds every mover here.
	# shellcheck disable=SC2016 # $1 and $2 belong to the inner bash
	timed "$W/logs/file-cat.out" "$TIMEOUT" bash -c 'cat "$1" | cat >"$2"' _ \
		"$SRC_FILE" "$W/cat/dst.bin" || return 1
	check_copy "$1" "$SRC_FILE" "$W/cat/dst.bin" "$2"
}

run_file_zero() {
	clear_destinations
	# The write ceiling: new tmpfs pages filled from /dev/zero by one writer,
	# with nothing read and no network. No mover that lands the file through
	# one writer can pass it, so it bounds what "1.5x the faster peer" can
	# mean on this machine.
	timed "$W/logs/file-zero.out" "$TIMEOUT" dd if=/dev/zero of="$W/cat/zero.bin" bs=4M \
		count=$(((SIZE_BYTES + 4194303) / 4194304)) iflag=fullblock status=none || return 1
	local got
	got=$(stat -c %s "$W/cat/zero.bin" 2>/dev/null || echo 0)
	if ((got < SIZE_BYTES)); then
		RUN_ERROR="wrote $got of $SIZE_BYTES bytes"
		return 1
	fi
}

scenario_file() {
	need_server gridftp
	need_server xrootd
	need_server lightpath
	if [[ -n $BASE_TOOLS ]]; then need_server baseline; fi
	make_file "$SRC_FILE" "$SIZE_BYTES"
	log "scenario file: $(numfmt --to=iec-i "$SIZE_BYTES")B, $RUNS runs"
	# shellcheck disable=SC2086 # BASE_TOOLS is one word or none
	measure file file "$SIZE_BYTES" gridftp xrdcp lightpath $BASE_TOOLS cat zero
	# shellcheck disable=SC2086
	report file "one $(numfmt --to=iec-i "$SIZE_BYTES")B file, tmpfs to tmpfs, median of $RUNS" \
		gridftp xrdcp lightpath $BASE_TOOLS cat zero
	ratio file "lightpath / faster peer" 1.5 gridftp xrdcp
	ratio file "lightpath / cat limit" 0.8 cat
	# Informational: how close lightpath comes to writing the file with no
	# network and nothing to read. 1.5x the faster peer is out of reach when
	# that peer already runs at 2/3 of this ceiling.
	ratio file "lightpath / write ceiling" - zero
	base_ratio file
	# Free its memory before the next scenario fills tmpfs again.
	rm -f "$SRC_FILE"
	clear_destinations
}

# ---------------------------------------------------------------------------
# Many files

SRC_TREE=$W/src/many

run_many_gridftp() {
	clear_destinations
	# The trailing slashes tell globus-url-copy both ends are directories;
	# it creates the subdirectories itself.
	timed "$W/logs/many-gridftp.out" "$TIMEOUT" globus-url-copy -r -cc 4 -pp -fast \
		"file://$SRC_TREE/" "ftp://127.0.0.1:${SERVER_PORT[gridftp]}$W/gftp/many/" || return 1
	check_copy "$1" "$SRC_TREE" "$W/gftp/many" "$2"
}

run_many_xrdcp() {
	clear_destinations
	# xrdcp -r copies the directory itself into an existing target directory.
	timed "$W/logs/many-xrdcp.out" "$TIMEOUT" xrdcp -s -r --parallel 4 \
		"$SRC_TREE" "root://127.0.0.1:${SERVER_PORT[xrootd]}/$W/xrd/data/" || return 1
	check_copy "$1" "$SRC_TREE" "$W/xrd/data" "$2"
}

run_many_lightpath() { lp_many "$LP" lightpath lp "$@"; }
run_many_baseline() { lp_many "$BASE" baseline lpb "$@"; }

# lp_many BINARY TOOL DIR RUN BYTES copies the tree as lp_file does a file.
lp_many() {
	clear_destinations
	timed "$W/logs/many-$2.json" "$TIMEOUT" "$1" cp -r --json \
		"$SRC_TREE" "lp://127.0.0.1:${SERVER_PORT[$2]}/many" || return 1
	check_copy "$4" "$SRC_TREE" "$W/$3/many" "$5"
}

scenario_many() {
	local total
	need_server gridftp
	need_server xrootd
	need_server lightpath
	if [[ -n $BASE_TOOLS ]]; then need_server baseline; fi
	total=$(make_tree "$SRC_TREE" "$NFILES") || die "could not generate the file tree"
	log "scenario many: $NFILES files, $(numfmt --to=iec-i "$total")B, $RUNS runs"
	# shellcheck disable=SC2086 # BASE_TOOLS is one word or none
	measure many many "$total" gridftp xrdcp lightpath $BASE_TOOLS
	# shellcheck disable=SC2086
	report many "$NFILES files, $(numfmt --to=iec-i "$total")B in all, tmpfs to tmpfs, median of $RUNS" \
		gridftp xrdcp lightpath $BASE_TOOLS
	ratio many "lightpath / faster peer" 2 gridftp xrdcp
	base_ratio many
	rm -rf "$SRC_TREE"
	clear_destinations
}

# ---------------------------------------------------------------------------

main() {
	local t0=$SECONDS
	install_peers
	build_lightpath
	emit_json bench=movers runs:="$RUNS" duration_s:="$DURATION" size_bytes:="$SIZE_BYTES" \
		nfiles:="$NFILES" only="${ONLY:-all}" cores:="$(nproc)" kernel="$(uname -r)"
	if wanted mem; then scenario_mem; fi
	if wanted file; then scenario_file; fi
	if wanted many; then scenario_many; fi
	out ""
	log "done in $((SECONDS - t0)) s"
}

main

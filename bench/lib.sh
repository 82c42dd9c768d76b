# shellcheck shell=bash disable=SC2034 # globals set here are read by the caller
# Helpers shared by the benchmark scripts in bench/: logging, installing peers
# from Debian packages, starting and stopping servers, timing a command and
# summarising runs. Sourced, never run; the caller sets `set -euo pipefail`.

# log prints progress to stderr so that stdout stays clean for the table or,
# with --json, for NDJSON only.
log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# die is for the script's own errors (bad arguments, no tmpfs, ...); peers that
# fail are reported as unavailable instead and never end the run.
die() {
	printf 'bench: %s\n' "$*" >&2
	exit 2
}

# usage prints the calling script's header comment: its help.
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# parse_args ARG... reads the options every benchmark takes: --json,
# --only SCENARIO and --help. The caller checks ONLY against its scenarios.
parse_args() {
	while (($# > 0)); do
		case $1 in
		--json) JSON=1 ;;
		--only) ONLY=${2:-}; shift ;;
		--only=*) ONLY=${1#--only=} ;;
		-h | --help) usage; exit 0 ;;
		*) die "unknown argument: $1 (see --help)" ;;
		esac
		shift
	done
}

# ---------------------------------------------------------------------------
# Installing peers

# Why each peer command is unavailable, keyed by command name. Filled by
# ensure_commands; an absent key means the command is there.
declare -gA UNAVAILABLE=()

# ensure_commands CMD=PACKAGE... installs, non-interactively, the Debian
# package of every command that is missing, and only then. A package that
# cannot be installed leaves UNAVAILABLE[cmd] set to the reason; the caller
# reports that peer as unavailable rather than stopping.
ensure_commands() {
	local pair cmd pkg
	local -a missing_pkgs=()
	local -A pkg_of=()
	for pair in "$@"; do
		cmd=${pair%%=*} pkg=${pair#*=}
		pkg_of[$cmd]=$pkg
		if ! command -v "$cmd" >/dev/null 2>&1; then
			missing_pkgs+=("$pkg")
		fi
	done
	if ((${#missing_pkgs[@]} > 0)); then
		if ! command -v apt-get >/dev/null 2>&1; then
			log "missing ${missing_pkgs[*]} and no apt-get to install them"
		elif [[ $(id -u) -ne 0 ]]; then
			log "missing ${missing_pkgs[*]}; not root, so not installing them"
		else
			install_packages "${missing_pkgs[@]}"
		fi
	fi
	for cmd in "${!pkg_of[@]}"; do
		if ! command -v "$cmd" >/dev/null 2>&1; then
			UNAVAILABLE[$cmd]="command $cmd missing; Debian package ${pkg_of[$cmd]} not installed"
		fi
	done
}

# install_packages tries all packages at once (one apt run is much faster),
# refreshes the package lists once if that fails (a fresh machine has none),
# and finally goes one by one so that one broken package does not take the
# others with it.
install_packages() {
	local -a apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q
		-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
	local pkg
	log "installing missing peers: $*"
	if "${apt[@]}" "$@" >>"$APT_LOG" 2>&1; then return 0; fi
	log "apt-get install failed; running apt-get update once and retrying"
	apt-get update -q >>"$APT_LOG" 2>&1 || log "apt-get update failed (see $APT_LOG)"
	if "${apt[@]}" "$@" >>"$APT_LOG" 2>&1; then return 0; fi
	for pkg in "$@"; do
		"${apt[@]}" "$pkg" >>"$APT_LOG" 2>&1 || log "could not install $pkg (see $APT_LOG)"
	done
}

# ---------------------------------------------------------------------------
# Servers

declare -ga SERVER_PIDS=()

# next_port prints a TCP port nobody listens on, counting up from NEXT_PORT.
# The range sits below Linux's ephemeral range (32768-60999) so that a
# client's own source ports cannot collide with it.
NEXT_PORT=${PORT_BASE:-29100}
next_port() {
	while ss -Hltn "sport = :$NEXT_PORT" | grep -q .; do
		NEXT_PORT=$((NEXT_PORT + 1))
	done
	PORT=$NEXT_PORT
	NEXT_PORT=$((NEXT_PORT + 1))
}

# start_server PORT LOG CMD... starts a server in a session of its own (setsid)
# so that stop_servers can kill it together with every child it forks
# (globus-gridftp-server forks one per connection), then waits until the port
# listens. It checks for a listening socket with ss rather than by connecting,
# because a probe connection would count as a client for iperf3 and gridftp.
# Returns non-zero, with the log's last line in START_ERROR, if the server
# dies or does not listen within 20 s.
start_server() { start_server_in "" "$@"; }

# start_server_in NS PORT LOG CMD... is start_server inside the network
# namespace NS (ip netns exec), or in this one when NS is empty.
start_server_in() {
	local nsname=$1 port=$2 logf=$3
	shift 3
	local -a in=()
	if [[ -n $nsname ]]; then in=(ip netns exec "$nsname"); fi
	# In a non-interactive shell the background job is not a process group
	# leader, so setsid does not fork: $! is the new session's leader and its
	# pid is also the process group id that stop_servers kills.
	setsid "${in[@]}" "$@" >"$logf" 2>&1 </dev/null &
	local pid=$!
	SERVER_PIDS+=("$pid")
	local i
	for ((i = 0; i < 200; i++)); do
		if "${in[@]}" ss -Hltn "sport = :$port" | grep -q .; then return 0; fi
		if ! kill -0 "$pid" 2>/dev/null; then
			START_ERROR="exited: $(last_line "$logf")"
			return 1
		fi
		sleep 0.1
	done
	START_ERROR="not listening on port $port after 20 s"
	return 1
}

# stop_servers kills every server started, with its children: politely
# first, then for good.
stop_servers() {
	local pid
	((${#SERVER_PIDS[@]} > 0)) || return 0
	for pid in "${SERVER_PIDS[@]}"; do
		kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
	done
	sleep 0.5
	for pid in "${SERVER_PIDS[@]}"; do
		kill -KILL -- "-$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	SERVER_PIDS=()
}

# ---------------------------------------------------------------------------
# Measuring

# last_line FILE prints the last non-empty line of FILE, shortened, for use
# in an "unavailable (...)" reason.
last_line() {
	local line
	line=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 || true)
	line=${line//$'\r'/}
	[[ -n $line ]] || line="no output"
	printf '%s' "${line:0:160}"
}

# timed LOG TIMEOUT CMD... runs CMD under timeout, its stdout in LOG and its
# stderr in LOG.err, and sets ELAPSED to the wall-clock seconds of the whole
# command ($EPOCHREALTIME is `date +%s.%N` without forking a process). On
# failure it returns non-zero with RUN_ERROR saying why.
timed() {
	local logf=$1 limit=$2
	shift 2
	local t0 t1 rc=0
	t0=$EPOCHREALTIME
	timeout -k 5 "$limit" "$@" >"$logf" 2>"$logf.err" </dev/null || rc=$?
	t1=$EPOCHREALTIME
	ELAPSED=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", b - a }')
	if ((rc == 124 || rc == 137)); then
		RUN_ERROR="timed out after ${limit}s"
		return 1
	elif ((rc != 0)); then
		if [[ -s $logf.err ]]; then
			RUN_ERROR="exit $rc: $(last_line "$logf.err")"
		else
			RUN_ERROR="exit $rc: $(last_line "$logf")"
		fi
		return 1
	fi
}

# median prints the median of its numeric arguments.
median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.0f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# gbit BPS prints bits per second as Gbit/s with two decimals.
gbit() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1e9 }'; }

# dir_bytes DIR prints the number of bytes in the regular files under DIR,
# leaving out dot files (a mover's partial or journal files).
dir_bytes() {
	find "$1" -type f ! -name '.*' -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# dir_files DIR prints how many such files there are.
dir_files() {
	find "$1" -type f ! -name '.*' 2>/dev/null | wc -l
}

# empty_dir DIR removes what is inside DIR but keeps DIR, its owner and mode
# (the servers that drop root need it writable).
empty_dir() {
	find "$1" -mindepth 1 -delete
}

# json_line KEY=VALUE... prints one JSON object. VALUE is a string, except
# with KEY:=VALUE, where VALUE is raw JSON (a number, array, true/false).
json_line() {
	python3 - "$@" <<'PY'
import json, sys
out = {}
for arg in sys.argv[1:]:
    eq = arg.index("=")
    if eq > 0 and arg[eq - 1] == ":":
        k, v = arg[:eq - 1], arg[eq + 1:]
        out[k] = json.loads(v)
    else:
        k, v = arg.split("=", 1)
        out[k] = v
print(json.dumps(out))
PY
}

# ---------------------------------------------------------------------------
# Lightpath and its testbeds, for the scripts that run them. A script sets
# LP (where the binary is, or is built: its default ${LIGHTPATH:-...}), W
# (its work directory, with logs/ inside) and TESTBEDS=() (what its cleanup
# takes down), then calls these.

# build_lightpath builds the binary at $LP, unless LIGHTPATH names one to use.
build_lightpath() {
	if [[ -n ${LIGHTPATH:-} ]]; then
		[[ -x $LP ]] || die "LIGHTPATH=$LP is not an executable"
		return 0
	fi
	log "building $LP"
	(cd "$REPO" && go build -o "$LP" ./cmd/lightpath) >"$W/logs/build.log" 2>&1 ||
		die "build failed: $(last_line "$W/logs/build.log")"
}

# testbed_up NAME FILE brings a testbed up for this run (one left over by an
# earlier run is taken down first) and adds it to TESTBEDS.
testbed_up() {
	"$LP" testbed down --name "$1" >/dev/null 2>&1 || true
	"$LP" testbed up "$2" --name "$1" >"$W/logs/up-$1.out" 2>&1 || die "testbed up $2: $(last_line "$W/logs/up-$1.out")"
	TESTBEDS+=("$1")
}

# agents_testbed_up TB TOPOLOGY NODES starts a controller on TOPOLOGY
# (SQLite in the work directory, reached over a unix socket), an agent user,
# and the testbed TB with an agent in every node; it returns once all NODES
# agents are alive. Clients (ticket, cp --reserve) then talk to it as admin
# through LIGHTPATH_CONTROLLER and LIGHTPATH_CONTROLLER_TOKEN.
agents_testbed_up() {
	local tb=$1 topo=$2 nodes=$3 d=$W/ctl-$1 i alive
	mkdir -p "$d"
	next_port
	start_server "$PORT" "$W/logs/controller-$tb.log" "$LP" controller --listen "127.0.0.1:$PORT" \
		--listen "unix:$d/ctl.sock" --db "sqlite:$d/db" --topology "$topo" --admin-token-file "$d/admin.token" ||
		die "lightpath controller: $START_ERROR"
	for ((i = 0; i < 100; i++)); do [[ -S $d/ctl.sock && -s $d/admin.token ]] && break; sleep 0.1; done
	export LIGHTPATH_CONTROLLER=unix:$d/ctl.sock
	LIGHTPATH_CONTROLLER_TOKEN=$(cat "$d/admin.token")
	export LIGHTPATH_CONTROLLER_TOKEN
	timeout 30 "$LP" user add agents --role agent >"$W/logs/user-$tb.out" 2>&1 || die "user add: $(last_line "$W/logs/user-$tb.out")"
	timeout 30 "$LP" user token create agents --out "$d/agent.token" >>"$W/logs/user-$tb.out" 2>&1 ||
		die "user token create: $(last_line "$W/logs/user-$tb.out")"
	"$LP" testbed down --name "$tb" >/dev/null 2>&1 || true
	TESTBEDS+=("$tb")
	timeout 60 "$LP" testbed up "$topo" --name "$tb" --agents --controller "$LIGHTPATH_CONTROLLER" \
		--controller-token-file "$d/agent.token" >"$W/logs/up-$tb.out" 2>&1 ||
		die "testbed up $topo --agents: $(last_line "$W/logs/up-$tb.out")"
	for ((i = 0; i < 200; i++)); do
		alive=$(timeout 10 "$LP" agent list --json 2>/dev/null | python3 -c '
import json, sys
print(sum(1 for l in sys.stdin if json.loads(l).get("alive")))' || echo 0)
		[[ $alive == "$nodes" ]] && return 0
		sleep 0.1
	done
	die "testbed $tb: $alive of $nodes agents alive after 20 s (see /run/lightpath/$tb/agent-*.log)"
}

# testbed_down NAME takes a testbed down, quietly.
testbed_down() { "$LP" testbed down --name "$1" >/dev/null 2>&1 || true; }

# ns TESTBED NODE prints the node's network namespace.
ns() { printf 'lp-%s-%s' "$1" "$2"; }

# out prints a table line: on stdout, or on stderr when JSON=1 (stdout then
# carries the JSON rows emit_json prints).
out() { if [[ ${JSON:-0} == 1 ]]; then printf '%s\n' "$*" >&2; else printf '%s\n' "$*"; fi; }
emit_json() { if [[ ${JSON:-0} == 1 ]]; then json_line "$@"; fi; }

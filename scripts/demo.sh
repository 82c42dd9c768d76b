#!/usr/bin/env bash
# The demo: the whole system on its embedded default.
#
# As root: the two-site testbed (examples/two-site.yaml) with an agent in
# every node, a controller on SQLite in a temporary directory, a server in
# b1, and a generated dataset copied from a1 with cp --reserve: it books a
# channel for its own flow on the dedicated link, starts at once, moves onto
# the channel when the agents have it in place (they mark the flow,
# classify it and policy-route it there), and releases it at the end; then
# a summary (throughput against the reserved
# rate, bytes per link, verified), the transfer's page as the controller
# recorded it (its path, bytes per path, the alerts on its path), a
# screenshot of the live dashboard taken during the copy (headless
# Chromium), and the web UI's address, kept up until Ctrl-C when standard
# output is a terminal. Everything is torn down at the
# end, also when interrupted half-way.
#
# Otherwise (not root): what runs on loopback: the controller booking,
# refusing with alternatives and finding slots, and the mover pushing and
# pulling a mixed dataset, verified; it says what it skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/lightpath
work=$(mktemp -d /dev/shm/lightpath-demo.XXXXXX 2>/dev/null || mktemp -d)
pid=
cpid=
tbname=
cleanup() {
	[ -n "$tbname" ] && "$bin" testbed down --name "$tbname" >/dev/null 2>&1 || true
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT


waitport() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

if [ "$(id -u)" -eq 0 ]; then
	cport=$(( 20000 + RANDOM % 20000 ))
	sock="$work/controller.sock"
	echo "== controller on SQLite in $work, topology examples/two-site.yaml, rules examples/rules.yaml"
	"$bin" controller --listen "127.0.0.1:$cport" --listen "unix:$sock" --db "sqlite:$work/controller.db" \
		--topology examples/two-site.yaml --admin-token-file "$work/admin.token" --rules examples/rules.yaml 2>"$work/controller.log" &
	cpid=$!
	waitport 127.0.0.1 "$cport" || { cat "$work/controller.log"; exit 1; }
	export LIGHTPATH_CONTROLLER="unix:$sock" LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/admin.token")"
	"$bin" user add agents --role agent >/dev/null
	"$bin" user token create agents --out "$work/agent.token" >/dev/null
	tbname=demo$$
	echo "== testbed $tbname with an agent in every node"
	"$bin" testbed up examples/two-site.yaml --name "$tbname" --agents --controller "unix:$sock" --controller-token-file "$work/agent.token"
	echo "== dataset: 1 GiB of random data and 500 small files"
	mkdir -p "$work/data/run" "$work/recv"
	head -c 1G /dev/urandom >"$work/data/run/events.bin"
	for i in $(seq 1 500); do head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom >"$work/data/run/calib-$i.dat"; done
	"$bin" testbed exec --name "$tbname" b1 -- "$bin" serve --listen 198.18.2.1:7070 --root "$work/recv" >"$work/serve.log" 2>&1 &
	for _ in $(seq 100); do "$bin" testbed exec --name "$tbname" b1 -- sh -c "ss -Hltn 'sport = :7070' | grep -q LISTEN" && break; sleep 0.1; done
	before=$("$bin" testbed status --name "$tbname" --json)
	# The dashboard, photographed while the copy runs.
	shot=${LIGHTPATH_ARTIFACTS:-/tmp}/lightpath-demo-dashboard.png
	shotpid=
	if [ -x "$PWD/bin/dashshot" ]; then
		"$PWD/bin/dashshot" -url "http://127.0.0.1:$cport" -token-file "$work/admin.token" -out "$shot" -wait 3s 2>"$work/dashshot.log" &
		shotpid=$!
	fi
	echo "== copy from a1: lightpath cp --reserve 1.2G -r data lp://198.18.2.1:7070/ (only the dedicated link has 1.2 Gbit/s free)"
	"$bin" testbed exec --name "$tbname" a1 -- "$bin" cp -r --json --reserve 1.2G --controller "unix:$sock" \
		--controller-token-file "$work/admin.token" "$work/data" lp://198.18.2.1:7070/ >"$work/cp.ndjson"
	sed -n 's/.*"type":"reservation","id":"\([^"]*\)","state":"\([A-Z]*\)".*"path":"\([^"]*\)".*/  reservation \1 \2 via \3/p' "$work/cp.ndjson"
	tail -1 "$work/cp.ndjson" >"$work/cp.json"
	after=$("$bin" testbed status --name "$tbname" --json)
	diff -r "$work/data" "$work/recv/data" && verified=yes || verified=NO
	tid=$("$bin" transfer list --json | sed -n 's/.*"id":"\(t-[0-9a-f]*\)".*/\1/p' | head -1)
	python3 - "$work/cp.json" <<PY "$before" "$after" "$verified"
import json, sys
s = json.load(open(sys.argv[1]))
before, after = json.loads(sys.argv[2]), json.loads(sys.argv[3])
verified = sys.argv[4]
reserved = s.get("reserved_bps") or 0
def moved(st, link, frm):
    for l in st["links"]:
        if l["name"] == link:
            for d in l["directions"]:
                if d["from"] == frm:
                    return d["bytes"]
    return 0
print("== summary")
if reserved:
    print(f"  copied {s['bytes']/2**30:.2f} GiB in {s['files']} files in {s['seconds']:.1f} s: "
          f"{s['throughput_bps']/1e9:.2f} Gbit/s against {reserved/1e9:.1f} Gbit/s reserved ({s['throughput_bps']/reserved:.0%}), "
          f"reservation {s.get('reservation')} {s.get('reservation_state', '')}")
else:
    print(f"  copied {s['bytes']/2**30:.2f} GiB in {s['seconds']:.1f} s without a reservation: {s.get('reservation_error', '')}")
by = s.get("bytes_by_path") or {}
print(f"  bytes by path (the mover's count): reserved {by.get('reserved', 0)/2**20:.1f} MiB, routed {by.get('routed', 0)/2**20:.1f} MiB")
for link in ("dedicated", "wan"):
    print(f"  {link:10s} ra > rb carried {(moved(after, link, 'ra') - moved(before, link, 'ra'))/2**20:9.1f} MiB")
print(f"  verified: by the mover {'yes' if s['verified'] else 'NO'}, by diff -r {verified}")
PY
	if [ -n "$tid" ]; then
		echo "== the transfer as the controller recorded it: lightpath transfer show $tid"
		"$bin" transfer show "$tid" | sed 's/^/  /'
	fi
	n=$(python3 -c 'import sys, urllib.request; print(sum(l.startswith(b"lightpath_") for l in urllib.request.urlopen(sys.argv[1]).read().splitlines()))' "http://127.0.0.1:$cport/metrics" || echo "?")
	echo "== monitoring: $n lightpath series from the controller and the six agents on one scrape of http://127.0.0.1:$cport/metrics"
	if [ -n "$shotpid" ]; then
		if wait "$shotpid"; then
			echo "== the dashboard during the copy: $shot"
		else
			echo "== no dashboard screenshot: $(tail -1 "$work/dashshot.log")"
		fi
	fi
	if [ -t 1 ]; then
		# The address only while it answers: everything stays up until Ctrl-C.
		link=$(sed -n 's/.*sign in to the web UI.* url="\{0,1\}\([^" ]*\).*/\1/p' "$work/controller.log" | head -1)
		echo "== web UI (live dashboard), up until Ctrl-C: http://127.0.0.1:$cport/"
		[ -n "$link" ] && echo "   sign in once with $link (within 10 minutes of the start),"
		echo "   or paste the token in $work/admin.token"
		trap 'echo; echo "== stopping everything: the web UI at http://127.0.0.1:$cport/ goes with it"; exit 0' INT
		while :; do sleep 3600; done
	fi
	echo "== the web UI ran at http://127.0.0.1:$cport/ during the demo and has stopped with it (run make demo on a terminal to keep it up until Ctrl-C)"
	exit 0
fi
echo "(not root: the testbed, the agents and the reserved copy across them are skipped; what runs on loopback follows)"
cport=$(( 20000 + RANDOM % 20000 ))
echo "== controller: lightpath controller --listen 127.0.0.1:$cport --topology examples/two-site.yaml"
"$bin" controller --listen "127.0.0.1:$cport" --db "sqlite:$work/controller.db" --topology examples/two-site.yaml \
	--admin-token-file "$work/admin.token" 2>"$work/controller.log" &
cpid=$!
for _ in $(seq 50); do [ -s "$work/admin.token" ] && (exec 3<>"/dev/tcp/127.0.0.1/$cport") 2>/dev/null && break; sleep 0.1; done
export LIGHTPATH_CONTROLLER="http://127.0.0.1:$cport" LIGHTPATH_CONTROLLER_TOKEN="$(cat "$work/admin.token")"
echo "== reserve 800 Mbit/s a1 -> b1 and a2 -> b2 from +1m for 1h (the second takes the dedicated link)"
"$bin" reserve create --from a1 --to b1 --bandwidth 800M --start +1m --duration 1h
"$bin" reserve create --from a2 --to b2 --bandwidth 800M --start +1m --duration 1h
echo "== 1.5 Gbit/s a1 -> b1 in the same hour does not fit: the controller says what would"
"$bin" reserve create --from a1 --to b1 --bandwidth 1.5G --start +1m --duration 1h || true
echo "== find the earliest hour with 1.5 Gbit/s"
"$bin" reserve find --from a1 --to b1 --bandwidth 1.5G --start +1m --duration 1h --earliest
"$bin" reserve list
echo "(web UI at $LIGHTPATH_CONTROLLER/ with the token in $work/admin.token, until the demo ends)"

echo "== dataset in $work/data"
mkdir -p "$work/data/run 42/raw" "$work/data/run 42/calib" "$work/data/empty dir" "$work/root" "$work/back"
head -c 512M /dev/urandom >"$work/data/run 42/raw/events.bin"
for i in $(seq 1 2000); do
	head -c $(( (RANDOM % 64 + 1) * 1024 )) /dev/urandom >"$work/data/run 42/calib/constants-$i.dat"
done
truncate -s 1G "$work/data/sparse.img"
printf 'header' | dd of="$work/data/sparse.img" conv=notrunc status=none
echo "Größe und Maß" >"$work/data/run 42/näme with spaces ✓.txt"
touch "$work/data/empty file"
ln -s "raw/events.bin" "$work/data/run 42/latest"
du -sh --apparent-size "$work/data"

port=$(( 20000 + RANDOM % 20000 ))
"$bin" serve --listen "127.0.0.1:$port" --root "$work/root" --transfer-log "$work/transfer.log" 2>"$work/serve.log" &
pid=$!
for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

echo "== push: lightpath cp -r data lp://127.0.0.1:$port/"
"$bin" cp -r "$work/data" "lp://127.0.0.1:$port/"
echo "== pull: lightpath cp -r lp://127.0.0.1:$port/data back/"
"$bin" cp -r "lp://127.0.0.1:$port/data" "$work/back/"

echo "== verify"
diff -r --no-dereference "$work/data" "$work/root/data"
diff -r --no-dereference "$work/data" "$work/back/data"
echo "both copies are identical to the original ($(wc -l <"$work/transfer.log") lines in the server's transfer log)"
echo "(the demo is over: its controller and web UI stop now)"

#!/usr/bin/env bash
# The demo, for now: a controller on the two-site topology booking, finding
# and refusing reservations (with the alternatives it offers); then a mover
# server on loopback with a temporary root, a mixed dataset pushed to it
# with cp and pulled back, both copies verified byte for byte against the
# original, the summaries printed, everything removed. (The agents that
# provision reservations into a testbed's kernels come with the next issue.)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin/lightpath
work=$(mktemp -d /dev/shm/lightpath-demo.XXXXXX 2>/dev/null || mktemp -d)
pid=
cpid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	[ -n "$cpid" ] && kill "$cpid" 2>/dev/null && wait "$cpid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

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
echo "(web UI at $LIGHTPATH_CONTROLLER/ with the token in $work/admin.token, while the demo runs)"

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

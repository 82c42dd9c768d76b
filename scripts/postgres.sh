#!/usr/bin/env bash
# A throwaway PostgreSQL for tests, as root on Debian (make deps installs it).
#
#   scripts/postgres.sh start DIR   initdb a cluster in DIR (created, must be
#                                   empty or missing), start it listening on a
#                                   unix socket in DIR only (no TCP port to
#                                   collide on), create database "lightpath"
#                                   and print its URL on stdout
#   scripts/postgres.sh stop DIR    stop that cluster and remove DIR
#
# The server runs as the postgres user, since PostgreSQL refuses to run as
# root; authentication is "trust" over the socket, which only root and
# postgres can reach (DIR is 0700 postgres).
set -euo pipefail

die() { echo "postgres.sh: $*" >&2; exit 1; }

bindir() {
	local d
	# The newest installed major version.
	d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	[ -n "$d" ] && [ -x "$d/initdb" ] || die "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run make deps"
	echo "$d"
}

[ $# -eq 2 ] || die "usage: $0 start|stop DIR"
cmd=$1 dir=$2
[ "$(id -u)" -eq 0 ] || die "must run as root (it runs the server as the postgres user)"
id postgres >/dev/null 2>&1 || die "no postgres user: is the postgresql package installed?"
bin=$(bindir)
port=5432

case $cmd in
start)
	mkdir -p "$dir"
	[ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
	chown postgres: "$dir"
	chmod 0700 "$dir"
	runuser -u postgres -- "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 ||
		die "initdb failed: $(tail -n 5 "$dir/initdb.log")"
	runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 \
		-o "-c listen_addresses='' -k $dir -p $port -c fsync=off -c max_connections=200" start >/dev/null ||
		die "server did not start: $(tail -n 5 "$dir/server.log")"
	runuser -u postgres -- "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt \
		-c 'CREATE DATABASE lightpath' >/dev/null || die "create database failed"
	echo "postgres://postgres@/lightpath?host=$dir&port=$port&sslmode=disable"
	;;
stop)
	[ -d "$dir/data" ] || die "no cluster in $dir"
	runuser -u postgres -- "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
	rm -rf "$dir"
	;;
*)
	die "usage: $0 start|stop DIR"
	;;
esac

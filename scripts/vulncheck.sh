#!/usr/bin/env bash
# make vulncheck: govulncheck (pinned in go.mod as a Go tool) against the Go
# vulnerability database. Where vuln.go.dev cannot be reached (build
# machines that reach only the package registries), it uses a snapshot of
# the database taken from the module proxy (golang.org/x/vulndb at
# VULNDB_VERSION, indexed by its own indexdb command into a cache); where
# neither can be had, it says so and exits 0. Vulnerabilities found exit 3,
# as govulncheck does.
set -euo pipefail
cd "$(dirname "$0")/.."
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
if curl -sf --max-time 10 -o /dev/null https://vuln.go.dev/index/db.json; then
	echo "vulncheck: against https://vuln.go.dev"
	exec go tool govulncheck ./...
fi
echo "vulncheck: vuln.go.dev cannot be reached; trying the snapshot golang.org/x/vulndb@$VULNDB_VERSION from the module proxy"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/lightpath/vulndb-$VULNDB_VERSION
if [ ! -f "$cache/index/db.json" ]; then
	if ! src=$(go mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" 2>/dev/null | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') || [ -z "$src" ]; then
		echo "vulncheck: the module proxy has no golang.org/x/vulndb@$VULNDB_VERSION either: nothing checked (not a failure of the code)"
		exit 0
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	if ! go run "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" -vulns "$src/data/osv" -out "$tmp/db" >"$tmp/log" 2>&1; then
		cat "$tmp/log"
		echo "vulncheck: could not index the snapshot: nothing checked (not a failure of the code)"
		exit 0
	fi
	mkdir -p "$(dirname "$cache")"
	rm -rf "$cache"
	mv "$tmp/db" "$cache"
fi
echo "vulncheck: the snapshot is as new as $VULNDB_VERSION; a newer one: VULNDB_VERSION=... make vulncheck"
exec go tool govulncheck -db "file://$cache" ./...

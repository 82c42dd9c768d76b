#!/usr/bin/env bash
# Runs go test with the race detector on the packages given (default ./...)
# and prints, through scripts/testreport, a line per package, the whole
# output of every failure, then the failures in one list, the slowest
# tests and each package's time. The raw `go test -json` stream is kept in
# $LIGHTPATH_TEST_LOG (default: a file under ${TMPDIR:-/tmp}, named at the
# end) for a closer look. Extra go test flags come from $GOTESTFLAGS.
set -euo pipefail
cd "$(dirname "$0")/.."
(($#)) || set -- ./...
go build -o bin/testreport ./scripts/testreport
log=${LIGHTPATH_TEST_LOG:-$(mktemp "${TMPDIR:-/tmp}/lightpath-test-XXXXXX.json")}
# shellcheck disable=SC2086 # GOTESTFLAGS is a list of flags
go test -race -count=1 -timeout "${TESTTIMEOUT:-30m}" ${GOTESTFLAGS:-} -json "$@" 2>&1 | tee "$log" | bin/testreport -slowest "${SLOWEST:-20}"
echo "(go test -json output: $log)"

#!/usr/bin/env bash
# Installs the Debian packages the tests and the demo use, only when missing.
set -euo pipefail
need=()
command -v setpriv >/dev/null || need+=(util-linux)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
# The testbed's tests: ping (iputils-ping), ip and ss (iproute2), pgrep (procps).
command -v ping >/dev/null || need+=(iputils-ping)
command -v ip >/dev/null || need+=(iproute2)
command -v ss >/dev/null || need+=(iproute2)
command -v pgrep >/dev/null || need+=(procps)
command -v pg_ctlcluster >/dev/null || need+=(postgresql) # the store's PostgreSQL tests (scripts/postgres.sh)
# The web UI's end-to-end test drives a headless Chromium (test/e2e/webui_test.go).
command -v chromium >/dev/null || command -v chromium-browser >/dev/null ||
	command -v google-chrome >/dev/null || need+=(chromium)
command -v python3 >/dev/null || need+=(python3) # the demo's summary
if ((${#need[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need[*]}; run as root or install them" >&2
		exit 0
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi

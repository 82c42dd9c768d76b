#!/usr/bin/env bash
# Compiles the BPF programs into the objects committed beside their sources
# (`make bpf`): a plain `go build` embeds the committed objects and needs no
# clang. Installs clang, llvm-strip and libbpf's headers when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v clang >/dev/null || need+=(clang)
command -v llvm-strip >/dev/null || need+=(llvm)
[ -e /usr/include/bpf/bpf_helpers.h ] || need+=(libbpf-dev)
if ((${#need[@]})); then
	if [ "$(id -u)" -ne 0 ]; then
		echo "bpf: missing ${need[*]}; run as root or install them" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null
fi
arch=$(uname -m)
for src in internal/cc/bpf/*.c; do
	name=$(basename "$src" .c)
	obj=internal/cc/${name}_bpfel.o
	clang -O2 -g -Wall -Werror -target bpfel -mcpu=v3 \
		-I"/usr/include/${arch}-linux-gnu" -c "$src" -o "$obj"
	llvm-strip -g "$obj" # keeps .BTF and .BTF.ext, which the loader needs
	# The source the object was built from, checked by internal/cc's tests.
	sha256sum "$src" | cut -d' ' -f1 >"internal/cc/${name}_bpfel.o.sha256"
	echo "bpf: $src -> $obj"
done

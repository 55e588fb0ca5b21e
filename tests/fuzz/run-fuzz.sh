#!/bin/bash
# `make fuzz`: build the libFuzzer target of the lock core with ASan and
# UBSan and run it for FUZZ_SECONDS (default 60) from the corpus in
# tests/fuzz/corpus. New inputs go to BUILD/fuzz/corpus, not the repo.
#
# usage: run-fuzz.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=$1 seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
out=$build/fuzz
mkdir -p "$out/corpus"

flags=(-Wall -Wextra -Werror -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
	-I"$root/tests/unit/shim" -I"$root/kmod")
clang -std=c11 "${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}" \
	-c "$root/kmod/core.c" -o "$out/core.o"
clang++ -std=c++20 "${flags[@]}" "$here/core_fuzz.cc" "$out/core.o" \
	-o "$out/core_fuzz"

echo "fuzz: core_fuzz for ${seconds}s"
"$out/core_fuzz" -max_total_time="$seconds" -print_final_stats=1 \
	"$out/corpus" "$here/corpus" 2>&1 | tee "$out/fuzz.log" |
	grep -E 'core_fuzz|Done|ERROR|SUMMARY|stat::number_of_executed_units' || true
grep -q 'invariant broken\|ERROR: \|SUMMARY: ' "$out/fuzz.log" && exit 1
ops=$(sed -n 's/^core_fuzz: \([0-9]*\) operations checked$/\1/p' "$out/fuzz.log")
echo "fuzz: ${ops:-0} operations checked, no finding"

#!/bin/bash
# `make fuzz`: build the libFuzzer targets with ASan and UBSan and run each
# for half of FUZZ_SECONDS (default 60): the lock core (core_fuzz, corpus
# corpus/ here) and the boost ledger (boost_fuzz: shared-file handoffs,
# late boosts and releases, nested holds; boost_corpus/ here).
# New inputs and any crash artifact go to BUILD/fuzz/, not the repo.
#
# usage: run-fuzz.sh BUILD_DIR [SECONDS]
set -euo pipefail
build=$1 seconds=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../../..
out=$build/fuzz
mkdir -p "$out/corpus"

flags=(-Wall -Wextra -Werror -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
	-I"$root/kmod/lockcore/shim" -I"$root/kmod/lockcore" -I"$root/tests/unit")
cflags=("${flags[@]/-fsanitize=fuzzer,/-fsanitize=fuzzer-no-link,}")
clang -std=c11 "${cflags[@]}" -c "$root/kmod/lockcore/core.c" -o "$out/core.o"
clang -std=c11 "${cflags[@]}" -c "$root/kmod/lockcore/boost.c" -o "$out/boost.o"
clang++ -std=c++20 "${flags[@]}" "$here/core_fuzz.cc" "$out/core.o" -o "$out/core_fuzz"
clang++ -std=c++20 "${flags[@]}" "$here/boost_fuzz.cc" "$out/boost.o" -o "$out/boost_fuzz"

status=0
for target in core boost; do
	corpus=$here/corpus
	[ $target = boost ] && corpus=$here/boost_corpus
	mkdir -p "$out/$target-corpus"
	echo "fuzz: ${target}_fuzz for $((seconds / 2))s"
	"$out/${target}_fuzz" -max_total_time="$((seconds / 2))" -print_final_stats=1 \
		-artifact_prefix="$out/" "$out/$target-corpus" "$corpus" 2>&1 |
		tee "$out/$target.log" |
		grep -E "${target}_fuzz|Done|ERROR|SUMMARY|stat::number_of_executed_units" || true
	if grep -q 'invariant broken\|ERROR: \|SUMMARY: ' "$out/$target.log"; then
		status=1
		continue
	fi
	ops=$(sed -n "s/^${target}_fuzz: \([0-9]*\) operations checked$/\1/p" "$out/$target.log")
	echo "fuzz: ${target}_fuzz: ${ops:-0} operations checked, no finding"
done
exit $status

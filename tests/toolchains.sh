#!/bin/bash
# make test-toolchains: the userspace with the compilers of the toolchain
# floor besides Debian 12's GCC 12 (what every other step builds with):
# GCC 11 (Ubuntu 22.04, JetPack 6) and Clang 14, each with and without
# prometheus-cpp. Each build is -Wall -Wextra -Werror, so a warning of that
# compiler fails it.
#
#   gcc11-nometrics   tests/ (gpuslotd, gpuslotctl, libgpuslot, every unit
#                     test, ASan/UBSan) with GCC 11, prometheus-cpp hidden
#                     as on Ubuntu 22.04; then its unit tests (ctest)
#   clang14-metrics   deploy/ (the product) with Clang 14, GPUSLOT_METRICS=ON
#   gcc11-metrics     deploy/ with GCC 11, GPUSLOT_METRICS=ON
#   clang14-nometrics deploy/ with Clang 14, prometheus-cpp hidden
#   clang14-tests     tests/ with Clang 14 (prometheus-cpp required), then
#                     its unit tests (ctest): Clang's sanitizers
#
# usage: toolchains.sh BUILD_DIR [BUILD...]   (default: all five)
# Each build has TOOLCHAIN_TIMEOUT seconds (1800); ctest's tests have their
# own limits (tests/CMakeLists.txt). Prints each build's wall time and ends
# with "N passed, N failed" (one per build, plus each unit test).
set -uo pipefail
out=${1:?usage: toolchains.sh BUILD_DIR [BUILD...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
builds=${*:-gcc11-nometrics clang14-metrics gcc11-metrics clang14-nometrics clang14-tests}
limit=${TOOLCHAIN_TIMEOUT:-1800}
jobs=${JOBS:-$(nproc)}
passed=0 failed=0 report=""

for b in $builds; do
	case $b in
	gcc11-*) cc=gcc-11 cxx=g++-11 ;;
	clang14-*) cc=clang-14 cxx=clang++-14 ;;
	*) echo "toolchains: unknown build $b"; failed=$((failed + 1)); continue ;;
	esac
	case $b in
	*-nometrics) metrics=-DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON ;;
	*) metrics=-DGPUSLOT_METRICS=ON ;;
	esac
	src=deploy
	case $b in gcc11-nometrics | clang14-tests) src=tests ;; esac
	dir=$out/$b
	rm -rf "$dir"
	mkdir -p "$dir"
	start=$SECONDS
	echo "toolchains: $b: $cxx, $src/, ${metrics#-D} (log: $dir.log)"
	# The CPU time (user + system, of every compiler) beside the wall
	# time: on a loaded machine the wall time says little of what the
	# build costs an idle one.
	TIMEFORMAT="toolchains: $b: %R s wall, %U s user, %S s system"
	# GPUSLOT_CMAKE_LAUNCHER: the Makefile's ccache arguments (word-split);
	# with a warm cache the times below are ccache's, not the compiler's.
	if { time CC=$cc CXX=$cxx timeout -k 10 "$limit" bash -c 'cmake -S "$1" -B "$2" \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo "$3" $5 && cmake --build "$2" -j "$4"' _ \
			"$root/$src" "$dir" "$metrics" "$jobs" "${GPUSLOT_CMAKE_LAUNCHER:-}"; } >"$dir.log" 2>&1 &&
		{ [ "${b#*-}" != nometrics ] || grep -q "gpuslotd: no Prometheus metrics" "$dir.log"; } &&
		{ [ "${b#*-}" != metrics ] || grep -q "gpuslotd: Prometheus metrics" "$dir.log"; }; then
		line="ok:     $b builds ($(sed -n "s/^toolchains: $b: //p" "$dir.log"))"
		passed=$((passed + 1))
	else
		tail -n 40 "$dir.log"
		line="FAILED: $b ($((SECONDS - start)) s; $dir.log)"
		failed=$((failed + 1))
	fi
	echo "$line"
	report+="$line"$'\n'
done

# The unit tests of the tests/ builds: GCC 11 without prometheus-cpp (what
# Ubuntu 22.04 would build) and Clang 14 (its sanitizers), run.
for b in gcc11-nometrics clang14-tests; do
	case " $builds " in *" $b "*) ;; *) continue ;; esac
	if [ -x "$out/$b/core_test" ]; then
		start=$SECONDS
		(cd "$out/$b" && ctest --output-on-failure --timeout 300) >"$out/$b-ctest.log" 2>&1
		tail -n 15 "$out/$b-ctest.log"
		read -r f total < <(sed -n \
			's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' \
			"$out/$b-ctest.log" | tail -n 1)
		f=${f:-1} total=${total:-1}
		passed=$((passed + total - f)) failed=$((failed + f))
		report+="$b unit tests: $((total - f)) passed, $f failed ($((SECONDS - start)) s)"$'\n'
	fi
done
printf '%s' "$report"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

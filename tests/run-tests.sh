#!/bin/bash
# `make test`: run the test steps, then one closing line
# "N passed, N failed" over all of them.
#
# Steps (GPUSLOT_TEST_STEPS, default
# "unit socket python cdi-metrics python-vm vm-stock vm-rt vm-6.12"):
#   unit       userspace unit tests (ctest)
#   socket     the VM suite's conformance tests on gpuslotd's socket
#              transport, on this host
#   python     the Python package's tests (pytest) on this host, against
#              gpuslotd's socket transport
#   cdi-metrics  containers from the CDI spec (podman, runc) and a
#              Prometheus server scraping gpuslotd, on this host (~1 min)
#   no-metrics gpuslotd built with prometheus-cpp hidden: builds, runs,
#              says it has no metrics (CI's .ci/run)
#   python-vm  the same against the module, in the VM (Debian's 6.1)
#   vm-stock   the VM suite on Debian's linux-image-amd64
#   vm-rt      the VM suite on Debian's linux-image-rt-amd64 (PREEMPT_RT)
#   vm-6.12    the VM suite on Debian's linux-image-6.12-amd64
#   vm-debug   the VM suite on the lockdep/KASAN/kmemleak debug kernel
#   vm-bullseye, vm-trixie-bpo, vm-trixie-bpo-rt
#              the VM suite on Debian 11's 5.10 and on Debian 13's newest
#              backports kernel (7.x) and its PREEMPT_RT flavour, each from
#              a debootstrap chroot of its release (tests/kernels/chroot.sh;
#              CI's .ci/run)
#   arm64      the userspace unit tests cross-built for arm64, run under
#              qemu-user (make test-arm64)
#   vm-arm64   the VM suite on Debian's linux-image-arm64 in
#              qemu-system-aarch64 (make test-vm ARCH=arm64)
#   fuzz       the lock core's fuzzer for FUZZ_SECONDS; counts as one test
#   system     the Debian packages on a booted Debian 12 with systemd
#   system-trixie  the same on a booted Debian 13 (its packages built in a
#              trixie chroot)
#   deb-DIST-ARCH  the Debian packages for DIST (bookworm, trixie) and ARCH
#              (amd64, arm64), lintian-clean; counts as one test
#   toolchains the userspace with GCC 11 and Clang 14, with and without
#              prometheus-cpp, and the GCC 11 build's unit tests
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${BUILD:-$PWD/build}/logs
mkdir -p "$logs"
steps=${GPUSLOT_TEST_STEPS:-unit socket python cdi-metrics python-vm vm-stock vm-rt vm-6.12}

total_passed=0 total_failed=0 report=""
for step in $steps; do
	log=$logs/$step.log
	start=$SECONDS
	case $step in
	unit) make --no-print-directory test-unit 2>&1 | tee "$log" ;;
	socket) make --no-print-directory test-socket 2>&1 | tee "$log" ;;
	python) make --no-print-directory test-python 2>&1 | tee "$log" ;;
	cdi-metrics) make --no-print-directory test-cdi-metrics 2>&1 | tee "$log" ;;
	no-metrics) make --no-print-directory test-no-metrics 2>&1 | tee "$log" ;;
	python-vm) make --no-print-directory test-python-vm 2>&1 | tee "$log" ;;
	arm64) make --no-print-directory test-arm64 2>&1 | tee "$log" ;;
	vm-arm64) make --no-print-directory test-vm ARCH=arm64 2>&1 | tee "$log" ;;
	vm-*) make --no-print-directory test-vm KERNEL="${step#vm-}" 2>&1 | tee "$log" ;;
	fuzz) make --no-print-directory fuzz 2>&1 | tee "$log" ;;
	system) make --no-print-directory test-system 2>&1 | tee "$log" ;;
	system-trixie) make --no-print-directory test-system DIST=trixie 2>&1 | tee "$log" ;;
	deb-*-*) dist=${step#deb-} && make --no-print-directory deb DIST="${dist%-*}" \
		ARCH="${dist#*-}" 2>&1 | tee "$log" ;;
	toolchains) make --no-print-directory test-toolchains 2>&1 | tee "$log" ;;
	*) echo "run-tests: unknown step $step" | tee "$log"; false ;;
	esac
	rc=${PIPESTATUS[0]}

	passed=0 failed=0
	case $step in
	unit | arm64)	# ctest: "100% tests passed, 0 tests failed out of 9"
		read -r failed total < <(sed -n \
			's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' \
			"$log" | tail -n 1)
		failed=${failed:-0} passed=$((${total:-0} - failed)) ;;
	vm-* | system* | socket | python* | cdi-metrics | no-metrics | toolchains)	read -r passed failed < <(sed -n \
			's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$log" | tail -n 1)
		passed=${passed:-0} failed=${failed:-0} ;;
	fuzz | deb-*)	[ "$rc" -eq 0 ] && passed=1 ;;
	esac
	# A step that failed without a failed test (a build, a boot) counts.
	[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
	total_passed=$((total_passed + passed))
	total_failed=$((total_failed + failed))
	report+="$step: $passed passed, $failed failed ($((SECONDS - start)) s)"$'\n'
done

printf '%s' "$report"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]

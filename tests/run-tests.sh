#!/bin/bash
# `make test`: the unit tests and the VM suite, then one closing line
# "N passed, N failed" over both.
set -uo pipefail
cd "$(dirname "$0")/.."
logs=${BUILD:-$PWD/build}/logs
mkdir -p "$logs"

make --no-print-directory test-unit 2>&1 | tee "$logs/unit.log"
unit_rc=${PIPESTATUS[0]}
make --no-print-directory test-vm 2>&1 | tee "$logs/vm.log"
vm_rc=${PIPESTATUS[0]}

# ctest: "100% tests passed, 0 tests failed out of 9"
read -r unit_failed unit_total < <(sed -n \
	's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1 \2/p' \
	"$logs/unit.log" | tail -n 1)
unit_failed=${unit_failed:-1} unit_total=${unit_total:-1}
read -r vm_passed vm_failed < <(sed -n \
	's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p' "$logs/vm.log" | tail -n 1)
vm_passed=${vm_passed:-0} vm_failed=${vm_failed:-1}
# A step that failed without a failed test (a build, a boot) still counts.
[ "$unit_rc" -eq 0 ] || [ "$unit_failed" -gt 0 ] || unit_failed=1
[ "$vm_rc" -eq 0 ] || [ "$vm_failed" -gt 0 ] || vm_failed=1

passed=$((unit_total - unit_failed + vm_passed))
failed=$((unit_failed + vm_failed))
echo "unit: $((unit_total - unit_failed)) passed, $unit_failed failed; vm: $vm_passed passed, $vm_failed failed"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

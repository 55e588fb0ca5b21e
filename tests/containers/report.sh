# The container and metrics tests' reporting, sourced with $test_name set:
# a line per check, and the closing "N passed, N failed" that make test
# counts.
passed=0 failed=0
ok() { echo "$test_name: ok:     $*"; passed=$((passed + 1)); }
bad() { echo "$test_name: FAILED: $*"; failed=$((failed + 1)); }
check() { # check WHAT COMMAND...: passes when the command succeeds
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; return 1; fi
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

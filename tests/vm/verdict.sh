# The verdict on a VM's serial log, shared by run-vm.sh and the system test
# (tests/system/run-system-test.sh). Sourced, not run.

# log_shows_bug LOG WHO: print the lines of LOG that name a kernel bug and
# say so; true when there are any. BUG: covers KASAN and might-sleep
# reports, WARNING: lockdep splats; kmemleak and debugobjects have their
# own words.
log_shows_bug() {
	if grep -nE 'BUG:|WARNING:|Oops|Call Trace|Kernel panic|unreferenced object|ODEBUG' "$1"; then
		echo "$2: the kernel log shows a bug (lines above)"
		return 0
	fi
	return 1
}

# closing_summary SUMMARY STATUS: the run's closing "N passed, N failed"
# line. A run that failed (STATUS != 0) without a failed test counts one.
closing_summary() {
	local summary=$1
	[ -n "$summary" ] || summary="0 passed, 1 failed"
	[ "$2" -eq 0 ] || [[ "$summary" != *" 0 failed" ]] ||
		summary="${summary% failed}" summary="${summary%, *}, 1 failed"
	echo "$summary"
}

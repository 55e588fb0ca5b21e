#!/bin/sh
# The Python package's tests in the test VM, against the module: run-vm.sh
# installs this as the suite when GPUSLOT_VM_PYTHON is set.
export GPUSLOT_LIBRARY=/lib/libgpuslot.so.1 PYTHONPATH=/python PYTHONDONTWRITEBYTECODE=1 \
	HOME=/tmp GPUSLOT_TEST_GPUSLOTCTL=/bin/gpuslotctl
exec /usr/bin/python3 -m pytest -p no:cacheprovider --color=no -q /python/tests "$@"

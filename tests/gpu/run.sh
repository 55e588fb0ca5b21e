#!/bin/bash
# gpuslot's NVIDIA runs, on a machine with an NVIDIA GPU and CUDA 13:
#   1. placement: each slot's stream of a k = 4 layout (and of an uneven
#      k = 3 one) runs only on its SMs, and thread-block clusters run on it
#   2. across processes under MPS: two processes on different slots run
#      side by side (and, for contrast, two on the whole GPU do not)
#   3. the seeds' MM1024 vs MM256 experiment, with a CDF plot
# Results go to $OUT (default ./gpu-out). usage: tests/gpu/run.sh [JOBS]
# GPUSLOT_GPU_STEPS=mps runs step 2 alone.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
out=${OUT:-$PWD/gpu-out}
jobs=${1:-2000}
mkdir -p "$out"
bin=/tmp/gpuslot-gpu/gpu_partitions
mkdir -p "$(dirname $bin)"

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nvcc --version | tail -2
  uname -r; } | tee "$out/env.txt"
nvcc -O2 -std=c++20 -arch=sm_90 -DGPUSLOT_HAVE_CUDA \
	-I"$root/uapi" -I"$root/libclient/src" -I"$root/daemon/src" \
	"$here/gpu_partitions.cu" "$root/libclient/src/cuda_backend.cc" \
	"$root/libclient/src/cuda_load.cc" "$root/libclient/src/device_choice.cc" \
	"$root/libclient/src/backend_none.cc" "$root/libclient/src/event_markers.cc" \
	"$root/daemon/src/nvidia/nv_plan.cc" \
	"$root/daemon/src/nvidia/nv_topology.cc" "$root/daemon/src/plan/sizes.cc" -ldl -lpthread -o $bin || exit 1

status=0
if [ "${GPUSLOT_GPU_STEPS:-all}" = all ]; then
	echo "== 1. placement" | tee "$out/placement.txt"
	$bin placement 4 2>&1 | tee -a "$out/placement.txt" || status=1
	# Uneven sizes: groups of one split combined into one context.
	$bin placement 3 64,40,24 2>&1 | tee -a "$out/placement.txt" || status=1
fi

# Kernel times of one process alone and of two at once. A fixed amount of
# work per kernel: two processes side by side take as long as one alone;
# time-sliced or serialised, about twice as long.
iters=${GPUSLOT_WORK_ITERS:-20000000}
solo() { # slot k
	$bin work "$1" "$2" $iters 0 2>&1 | sed -n 's/.*(\([0-9.]*\) s).*/\1/p'
}
pair() { # label slotA slotB k
	local at a b one
	one=$(solo "$2" "$4")
	at=$(python3 -c 'import time; print(time.time() + 3)')
	$bin work "$2" "$4" $iters "$at" >/tmp/work-a.txt 2>&1 & a=$!
	$bin work "$3" "$4" $iters "$at" >/tmp/work-b.txt 2>&1 & b=$!
	wait $a; wait $b
	cat /tmp/work-a.txt /tmp/work-b.txt
	python3 - "$1" "$one" /tmp/work-a.txt /tmp/work-b.txt <<'PY'
import re, sys
label, one = sys.argv[1], float(sys.argv[2] or "nan")
times = []
for f in sys.argv[3:]:
    m = re.search(r'\(([0-9.]+) s\)', open(f).read())
    times.append(float(m.group(1)) if m else float("nan"))
print(f"{label}: one process alone {one:.3f} s; two at once {times[0]:.3f} s and "
      f"{times[1]:.3f} s = {max(times)/one:.2f}x alone")
PY
}

echo "== 2. two processes under MPS" | tee "$out/mps.txt"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/gpuslot-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gpuslot-mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
if nvidia-cuda-mps-control -d; then
	sleep 1
	ls -l $CUDA_MPS_PIPE_DIRECTORY | tee -a "$out/mps.txt"
	{ pair "MPS, slots 0 and 1 of k = 2" 0 1 2
	  pair "MPS, both on the whole GPU" 0 0 0; } 2>&1 | tee -a "$out/mps.txt"
	echo quit | nvidia-cuda-mps-control
	sleep 2
else
	echo "nvidia-cuda-mps-control -d failed" | tee -a "$out/mps.txt"
	status=1
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
{ pair "no MPS, slots 0 and 1 of k = 2" 0 1 2
  pair "no MPS, both on the whole GPU" 0 0 0; } 2>&1 | tee -a "$out/mps.txt"
[ "${GPUSLOT_GPU_STEPS:-all}" = mps ] && exit $status

echo "== 3. MM1024 vs MM256" | tee "$out/experiment.txt"
$bin experiment "$jobs" "$out" 2>&1 | tee -a "$out/experiment.txt" || status=1
python3 "$here/plot_cdf.py" "$out/samples.csv" "$out/cdf.png" || status=1
exit $status

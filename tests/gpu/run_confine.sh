#!/bin/bash
# gpuslot-run's confinement on an NVIDIA GPU host (issue 39): programs that
# do not link libgpuslot, under gpuslot-run on a layout of two partitions
# planned by gpuslotd (socket transport, MPS on): slot 0 a quarter of the
# SMs at priority 2, slot 1 the rest. smid_probe (nvcc alone) and
# confine_torch.py (PyTorch, and a CuPy kernel on its stream) report the
# SMs their kernels ran on (%smid), their stream's priority and whether
# their output is exact; the summary checks that a NON_BLOCKING stream
# stays inside its slot's partition (each slot's kernels on fewer SMs than
# the GPU has, slot 0's fewer than slot 1's, the two together no more than
# the GPU's), that a
# blocking stream runs on the whole GPU (said on stderr), and that
# PyTorch's output is bit-identical to a run without gpuslot-run. It also
# says whether the two slots' %smid values overlap: the first run showed
# they do (the ids of a green context's SMs are not the GPU's physical
# numbering under MPS), so that is reported, not checked.
#
# usage: run_confine.sh BUNDLE OUT     (BUNDLE: bundle.sh's)
set -uo pipefail
b=$(cd "$1" && pwd) out=$2
mkdir -p "$out"
run=("$b/ld-linux-x86-64.so.2" --library-path "$b")
work=$(mktemp -d)
chmod 755 "$work"
nvidia-cuda-mps-control -d 2>/dev/null && echo "MPS control daemon started" >"$out/env.txt"
daemon=
trap '[ -n "$daemon" ] && kill $daemon 2>/dev/null; echo quit | nvidia-cuda-mps-control 2>/dev/null || true' EXIT
printf '[default]\nk = 2\nsizes = 25%%,75%%\npriorities = 2,0\n' >"$work/gpuslotd.conf"
"${run[@]}" "$b/gpuslotd" --transport socket --socket-dir "$work" --socket-group "" \
	--state-dir "$work" --config "$work/gpuslotd.conf" >"$out/gpuslotd.log" 2>&1 &
daemon=$!
for _ in $(seq 300); do [ -S "$work/gpu0.sock" ] && break; sleep 0.1; done
"${run[@]}" "$b/gpuslotctl" status --transport socket --socket-dir "$work" >"$out/status.txt" 2>&1
export GPUSLOT_TRANSPORT=socket GPUSLOT_SOCKET_DIR=$work GPUSLOT_RUN_STATS=1
export GPUSLOT_RUN_LIBRARY=$b/preload/libgpuslot-run.so
gr=(env LD_LIBRARY_PATH="$b/preload" "$b/preload/gpuslot-run")
probe=$b/smid_probe
"$probe" nonblocking >"$out/plain-nonblocking.txt" 2>&1
"$probe" blocking >"$out/plain-blocking.txt" 2>&1
for slot in 0 1; do
	"${gr[@]}" --slot $slot --hold -- "$probe" nonblocking >"$out/run-$slot-hold.txt" 2>&1
	"${gr[@]}" --slot $slot --per-sync -- "$probe" nonblocking >"$out/run-$slot-per-sync.txt" 2>&1
done
"${gr[@]}" --slot 0 --hold -- "$probe" blocking >"$out/run-0-blocking.txt" 2>&1
if python3 -c 'import torch, torchvision, cupy' 2>/dev/null; then
	python3 "$b/confine_torch.py" >"$out/torch-plain.txt" 2>&1
	for slot in 0 1; do
		"${gr[@]}" --slot $slot --hold -- python3 "$b/confine_torch.py" \
			>"$out/torch-run-$slot.txt" 2>&1
	done
fi
python3 - "$out" <<'PY' | tee "$out/summary.txt"
import os, re, sys
out = sys.argv[1]
def read(name):
    p = os.path.join(out, name + ".txt")
    if not os.path.exists(p):
        return None
    t = open(p).read()
    m = re.search(r"priority (-?\d+) sms (\d+) of (\d+) list ([\d,]*)", t)
    return {"text": t, "priority": int(m.group(1)) if m else None,
            "sms": set(map(int, m.group(4).split(","))) if m and m.group(4) else set(),
            "total": int(m.group(3)) if m else None,
            "exact": "result exact" in t, "digest": (re.search(r"digest (\w+)", t) or [None, None])[1]}
status = open(os.path.join(out, "status.txt")).read()
print(status.strip())
ok = True
def say(cond, what):
    global ok
    ok &= bool(cond)
    print(("PASS " if cond else "FAIL ") + what)
r = {n: read(n) for n in ["plain-nonblocking", "plain-blocking", "run-0-hold", "run-0-per-sync",
                          "run-1-hold", "run-1-per-sync", "run-0-blocking", "torch-plain",
                          "torch-run-0", "torch-run-1"]}
for n, v in r.items():
    if v:
        print(f"{n}: priority {v['priority']} sms {len(v['sms'])} of {v['total']}"
              + (f" digest {v['digest']}" if v['digest'] else "") + (" exact" if v['exact'] else ""))
total = r["plain-nonblocking"]["total"]
say(len(r["plain-nonblocking"]["sms"]) == total, "without gpuslot-run the probe uses every SM")
for kind in ["hold", "per-sync"]:
    a, b = r[f"run-0-{kind}"], r[f"run-1-{kind}"]
    say(a["exact"] and b["exact"], f"{kind}: results exact")
    say(0 < len(a["sms"]) < len(b["sms"]) < total and len(a["sms"]) + len(b["sms"]) <= total,
        f"{kind}: slot 0's kernels on {len(a['sms'])} SMs, slot 1's on {len(b['sms'])}, "
        f"together at most the GPU's {total}")
    print(f"  %smid ids: slot 0 {min(a['sms'], default=-1)}..{max(a['sms'], default=-1)}, "
          f"slot 1 {min(b['sms'], default=-1)}..{max(b['sms'], default=-1)}, "
          f"{len(a['sms'] & b['sms'])} in common")
    say(a["priority"] == -2 and b["priority"] == 0, f"{kind}: priorities {a['priority']}, {b['priority']} (slot 0: -2)")
say(len(r["run-0-blocking"]["sms"]) > len(r["run-0-hold"]["sms"]),
    "a blocking stream runs on more SMs than slot 0's partition (not confined)")
say("a blocking stream" in r["run-0-blocking"]["text"], "and gpuslot-run says so")
if r["torch-plain"]:
    t0, t1, tp = r["torch-run-0"], r["torch-run-1"], r["torch-plain"]
    say(tp["digest"] and t0["digest"] == tp["digest"] and t1["digest"] == tp["digest"],
        "PyTorch's output under gpuslot-run is bit-identical to its output without")
    say(len(t0["sms"]) == len(r["run-0-hold"]["sms"]) and len(t1["sms"]) == len(r["run-1-hold"]["sms"]),
        f"PyTorch: its stream's kernels on {len(t0['sms'])} SMs under slot 0, "
        f"{len(t1['sms'])} under slot 1, as the plain program's")
    say(t0["priority"] == -2, f"PyTorch: its stream's priority {t0['priority']} (slot 0: -2)")
print("confinement:", "all checks passed" if ok else "SOME CHECKS FAILED")
sys.exit(0 if ok else 1)
PY

# SPDX-License-Identifier: GPL-2.0
"""Which green-context splits run thread-block clusters and library kernels
(docs/results-ch6.md, "partitions that keep thread-block clusters"; output
of the runs in docs/results-ch6/clusters/).

For each configuration (split flags, minCount, the groups combined into one
green context), in a process of its own: what the context reads back
(smCount, minSmPartitionSize, smCoscheduledAlignment); an empty kernel
launched in clusters of 1, 2, 4, 8 and 16 on its stream (CUresult, and
cuOccupancyMaxActiveClusters); then cuDNN convolutions (FCN-ResNet50 at 800,
1024, 1280 px, MobileNet V2 at batch 32 and 64) and fp16 cuBLAS GEMMs under
torch.cuda.ExternalStream. PREWARM=1 runs the same work on a plain stream
first, as a process that used the whole GPU before would (cuDNN then keeps
the kernels it chose for the whole GPU). Flags: 0 default, 1
IGNORE_SM_COSCHEDULING, 2 MAX_POTENTIAL_CLUSTER_SIZE.

usage: python3 cluster_probe.py              every configuration, JSON lines
       CONFIGS="1:66:0-0 0:8:0-7" python3 cluster_probe.py
       python3 cluster_probe.py one F M G    flags F, minCount M, groups G
                                             (first-last, or "whole")
"""
import ctypes as C
import json
import os
import subprocess
import sys
import time

cu = C.CDLL("libcuda.so.1")


class Sm(C.Structure):
    _fields_ = [("smCount", C.c_uint), ("minSmPartitionSize", C.c_uint), ("smCoscheduledAlignment", C.c_uint)]


class Res(C.Structure):
    _fields_ = [("type", C.c_int), ("pad", C.c_ubyte * 92), ("sm", Sm), ("rest", C.c_ubyte * 36)]


class Attr(C.Structure):
    _fields_ = [("id", C.c_int), ("pad", C.c_ubyte * 4), ("x", C.c_uint), ("y", C.c_uint), ("z", C.c_uint),
                ("vpad", C.c_ubyte * 52)]


class Cfg(C.Structure):
    _fields_ = [("gx", C.c_uint), ("gy", C.c_uint), ("gz", C.c_uint), ("bx", C.c_uint), ("by", C.c_uint),
                ("bz", C.c_uint), ("shm", C.c_uint), ("stream", C.c_void_p), ("attrs", C.POINTER(Attr)),
                ("nattrs", C.c_uint)]


assert C.sizeof(Res) == 144 and C.sizeof(Attr) == 72


def ck(r, what):
    if r:
        s = C.c_char_p()
        cu.cuGetErrorString(r, C.byref(s))
        raise RuntimeError(f"{what}: {r} {s.value.decode() if s.value else ''}")


PTX = b"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry nop() { ret; }
"""


def splits():
    cu.cuInit(0)
    dev = C.c_int()
    ck(cu.cuDeviceGet(C.byref(dev), 0), "get")
    allr = Res()
    ck(cu.cuDeviceGetDevResource(dev, C.byref(allr), 1), "res")
    out = {"sm": [allr.sm.smCount, allr.sm.minSmPartitionSize, allr.sm.smCoscheduledAlignment], "splits": []}
    for flags in (0, 1, 2, 3):
        for m in (2, 8, 16, 24, 32, 40, 48, 64, 66):
            n = C.c_uint(0)
            r = cu.cuDevSmResourceSplitByCount(None, C.byref(n), C.byref(allr), None, flags, m)
            if r:
                out["splits"].append([flags, m, "err %d" % r])
                continue
            groups = (Res * max(n.value, 1))()
            rest = Res()
            r = cu.cuDevSmResourceSplitByCount(groups, C.byref(n), C.byref(allr), C.byref(rest), flags, m)
            out["splits"].append([flags, m, n.value, groups[0].sm.smCount, groups[0].sm.smCoscheduledAlignment,
                                  rest.sm.smCount, rest.sm.smCoscheduledAlignment])
    return out


def run_work(torch, nets, jobs, st):
    """The networks and GEMMs on stream @st: "ok" (with ms per job) or the error."""
    work = {}
    with torch.no_grad(), torch.cuda.stream(st):
        for name, net, shape in jobs:
            t = time.perf_counter()
            try:
                x = torch.randn(shape, device="cuda")
                for _ in range(3):
                    nets[net](x)
                st.synchronize()
                work[name] = "ok %.1f ms" % ((time.perf_counter() - t) * 1000 / 3)
            except Exception as e:  # noqa: BLE001
                work[name] = "FAIL " + str(e).splitlines()[0][:80]
        for name, (m, n, k) in {"h_1000x32x2048": (32, 1000, 2048), "h_4096": (4096, 4096, 4096),
                                "h_512x512x4096": (512, 512, 4096)}.items():
            try:
                a = torch.randn(m, k, device="cuda", dtype=torch.half)
                b = torch.randn(n, k, device="cuda", dtype=torch.half)
                torch.nn.functional.linear(a, b)
                st.synchronize()
                work[name] = "ok"
            except Exception as e:  # noqa: BLE001
                work[name] = "FAIL " + str(e).splitlines()[0][:80]
    return work


def one(flags, minc, which):
    import torch
    torch.cuda.init()
    torch.zeros(1, device="cuda")
    dev = C.c_int()
    ck(cu.cuDeviceGet(C.byref(dev), 0), "get")
    res = {"config": [flags, minc, which]}
    if which == "whole":
        s = torch.cuda.Stream()
        sp = C.c_void_p(s.cuda_stream)
        gctx_ctx = None
        res["readback"] = None
    else:
        allr = Res()
        ck(cu.cuDeviceGetDevResource(dev, C.byref(allr), 1), "res")
        n = C.c_uint(0)
        ck(cu.cuDevSmResourceSplitByCount(None, C.byref(n), C.byref(allr), None, flags, minc), "split0")
        groups = (Res * n.value)()
        rest = Res()
        ck(cu.cuDevSmResourceSplitByCount(groups, C.byref(n), C.byref(allr), C.byref(rest), flags, minc), "split")
        lo, hi = (int(x) for x in which.split("-"))
        mine = (Res * (hi - lo + 1))(*[groups[i] for i in range(lo, hi + 1)])
        desc = C.c_void_p()
        ck(cu.cuDevResourceGenerateDesc(C.byref(desc), mine, hi - lo + 1), "desc")
        g = C.c_void_p()
        ck(cu.cuGreenCtxCreate(C.byref(g), desc, dev, 1), "green")
        sp = C.c_void_p()
        ck(cu.cuGreenCtxStreamCreate(C.byref(sp), g, 1, 0), "stream")
        got = Res()
        ck(cu.cuGreenCtxGetDevResource(g, C.byref(got), 1), "readback")
        res["readback"] = [got.sm.smCount, got.sm.minSmPartitionSize, got.sm.smCoscheduledAlignment]
        gctx_ctx = C.c_void_p()
        ck(cu.cuCtxFromGreenCtx(C.byref(gctx_ctx), g), "ctxfromgreen")
        s = torch.cuda.ExternalStream(sp.value)
    # Cluster launches of an empty kernel on the slot's stream.
    clusters = {}
    try:
        mod = C.c_void_p()
        ck(cu.cuModuleLoadData(C.byref(mod), PTX), "module")
        fn = C.c_void_p()
        ck(cu.cuModuleGetFunction(C.byref(fn), mod, b"nop"), "fn")
        ck(cu.cuFuncSetAttribute(fn, 14, 1), "nonportable")
        for cs in (1, 2, 4, 8, 16):
            a = Attr(id=4, x=cs, y=1, z=1)
            cfg = Cfg(gx=cs * 4, gy=1, gz=1, bx=128, by=1, bz=1, shm=0, stream=sp, attrs=C.pointer(a), nattrs=1)
            r = cu.cuLaunchKernelEx(C.byref(cfg), fn, None, None)
            r2 = r or cu.cuStreamSynchronize(sp)
            nclu = C.c_int(-1)
            r3 = cu.cuOccupancyMaxActiveClusters(C.byref(nclu), fn, C.byref(cfg))
            clusters[cs] = {"launch": r2, "max_active": nclu.value if not r3 else "err %d" % r3}
        cfg = Cfg(gx=128, gy=1, gz=1, bx=128, by=1, bz=1, shm=0, stream=sp, attrs=None, nattrs=0)
        mx = C.c_int(-1)
        r = cu.cuOccupancyMaxPotentialClusterSize(C.byref(mx), fn, C.byref(cfg))
        clusters["max_potential"] = mx.value if not r else "err %d" % r
    except Exception as e:  # noqa: BLE001
        clusters["error"] = str(e)
    res["clusters"] = clusters
    from torchvision.models import mobilenet_v2
    from torchvision.models.segmentation import fcn_resnet50
    work = {}
    nets = {"fcn": fcn_resnet50(weights=None, weights_backbone=None, num_classes=21).cuda().eval(),
            "mnv2": mobilenet_v2(width_mult=1.0).cuda().eval()}
    jobs = [("fcn800", "fcn", (1, 3, 800, 800)), ("fcn1024", "fcn", (1, 3, 1024, 1024)),
            ("fcn1280", "fcn", (1, 3, 1280, 1280)), ("mnv2_b32", "mnv2", (32, 3, 224, 224)),
            ("mnv2_b64", "mnv2", (64, 3, 224, 224))]
    streams = [torch.cuda.Stream(), s] if os.environ.get("PREWARM") else [s]
    for st in streams:  # the slot's stream last: its results are kept
        work.update(run_work(torch, nets, jobs, st))
    res["work"] = work
    print("RESULT " + json.dumps(res), flush=True)


CONFIGS = [
    ("0", "0", "whole"),
    ("1", "66", "0-0"), ("1", "32", "0-0"), ("1", "2", "0-32"),
    ("3", "66", "0-0"), ("3", "32", "0-0"),
    ("0", "8", "0-7"), ("0", "8", "0-3"), ("0", "8", "0-0"), ("0", "16", "0-3"),
    ("0", "32", "0-0"), ("0", "64", "0-0"), ("2", "32", "0-0"), ("2", "64", "0-0"),
]

if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "one":
        one(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        sys.exit(0)
    print(json.dumps(splits()), flush=True)
    only = os.environ.get("CONFIGS")
    for c in CONFIGS if not only else [tuple(x.split(":")) for x in only.split()]:
        try:
            p = subprocess.run([sys.executable, __file__, "one", *c], capture_output=True, text=True, timeout=240)
            lines = [line for line in p.stdout.splitlines() if line.startswith("RESULT ")]
            print(lines[-1][7:] if lines else json.dumps({"config": c, "rc": p.returncode,
                                                          "err": p.stderr[-600:]}), flush=True)
        except subprocess.TimeoutExpired:
            print(json.dumps({"config": c, "timeout": True}), flush=True)

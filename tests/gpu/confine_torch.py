# SPDX-License-Identifier: GPL-2.0
"""A PyTorch inference script that knows nothing of gpuslot, for
gpuslot-run's confinement on the GPU host (run_confine.sh): ResNet-18 with
random weights (seed 0, cuDNN deterministic) on a stream of its own
(torch.cuda.Stream(), which PyTorch makes NON_BLOCKING), and on the same
stream a kernel (CuPy, NVRTC) whose 8 blocks per SM each write the %smid
they ran on. Prints the stream's priority as the driver reads it, the SMs
used and a digest of the network's output (equal with and without
gpuslot-run: the output is exact)."""
import ctypes
import hashlib
import sys

import cupy
import torch
import torchvision

WHERE = r"""
extern "C" __global__ void where(unsigned int *smid, long long cycles)
{
    unsigned int id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    const long long start = clock64();
    while (clock64() - start < cycles)
        ;
    if (threadIdx.x == 0)
        smid[blockIdx.x] = id;
}
"""


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    torch.manual_seed(0)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    model = torchvision.models.resnet18().cuda().eval()
    x_cpu = torch.randn(16, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    stream = torch.cuda.Stream()
    torch.cuda.current_stream().synchronize()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernel = cupy.RawKernel(WHERE, "where")
    blocks = sms * 8
    used = set()
    digest = None
    with torch.cuda.stream(stream), torch.no_grad():
        for _ in range(rounds):
            x = x_cpu.cuda(non_blocking=False)
            y = model(x)
            ids = torch.empty(blocks, dtype=torch.int32, device="cuda")
            with cupy.cuda.ExternalStream(stream.cuda_stream):
                kernel((blocks,), (64,), (cupy.asarray(ids), cupy.int64(20000)))
            stream.synchronize()
            used.update(ids.cpu().tolist())
            d = hashlib.sha256(y.cpu().numpy().tobytes()).hexdigest()[:16]
            if digest not in (None, d):
                print("result WRONG: the output changed between rounds")
            digest = d
    # The priority the driver gives the stream (cuStreamGetPriority).
    prio = ctypes.c_int(99)
    err = ctypes.CDLL("libcuda.so.1").cuStreamGetPriority(ctypes.c_void_p(stream.cuda_stream),
                                                          ctypes.byref(prio))
    if err:
        print(f"cuStreamGetPriority: error {err}")
    print(f"priority {prio.value} sms {len(used)} of {sms} list {','.join(map(str, sorted(used)))}")
    print(f"digest {digest}")


if __name__ == "__main__":
    main()

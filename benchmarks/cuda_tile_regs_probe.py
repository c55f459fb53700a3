"""Will a larger GMM tile's accumulators fit a consumer warpgroup's registers? Compile-only probe (no GPU): builds
one warp-specialised kernel per tile shape (a producer warpgroup at 40 registers, consumer warpgroups with
`setmaxnreg.inc`, a K loop of 64-deep stages over mbarriers with two wgmma groups in flight, then a staged
epilogue that converts the accumulators to bf16 pairs in shared memory and stores 16-byte vectors) and reads
ptxas's register and spill counts for each (`nvcc -Xptxas -v`, sm_90a).

    python3 benchmarks/cuda_tile_regs_probe.py [--keep DIR]

The shapes are docs/cuda.md's candidates ("Fewer L2 bytes a FLOP without a partner block"): today's 128 x 256 tile
(two consumer warpgroups of 64 x 256: 128 accumulators a thread), 256 x 192 (two of 128 x 192: 192 accumulators,
two m64n192k16 a K slice), 192 x 256 (three of 64 x 256 in a 512-thread block). The kernels are the tile's
register shape, not the tile: the producer only arrives on the barriers (no TMA), and nothing runs them.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# (name, consumer warpgroups, m64 blocks a consumer warpgroup, N of one wgmma, consumer registers): 232 with a
# 24-register producer is the most two consumer warpgroups can take ((65536 - 128 x 24) / 256, rounded down to 8,
# capped at 232 as the WS=2 build runs them); three take at most 160.
SHAPES = [("128x256", 2, 1, 256, 232), ("256x192", 2, 2, 192, 232), ("192x256", 3, 1, 256, 160)]
PRODUCER_REGS = 24


def wgmma(n: int) -> str:
    """An inline-asm wgmma m64nNk16 bf16 -> f32 over acc[0 .. N/2) with descriptors da, db."""
    regs = n // 2
    outs = ",".join(f"%{i}" for i in range(regs))
    operands = ", ".join(f'"+f"(acc[{i}])' for i in range(regs))
    return (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{regs + 2}, 0;\\n'
            f'wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16 {{{outs}}}, %{regs}, %{regs + 1}, p, 1, 1, 0, 1;'
            f'\\n}}\\n" : {operands} : "l"(da), "l"(db), "r"(1));')


def kernel(name: str, consumers: int, blocks: int, n: int, regs: int) -> str:
    threads = 128 * (consumers + 1)
    acc = n // 2
    ident = name.replace("x", "_")
    return f"""
__device__ __forceinline__ void Wgmma_{ident}(float* acc, uint64_t da, uint64_t db) {{ {wgmma(n)} }}

extern "C" __global__ void __launch_bounds__({threads}, 1) probe_{ident}(__nv_bfloat16* out, int ldc, int k_steps) {{
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint32_t full = base + 200 * 1024, empty = full + 8 * kStages;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {{
    for (int s = 0; s < kStages; ++s) {{ MbarInit(full + 8 * s, 1); MbarInit(empty + 8 * s, {consumers}); }}
  }}
  __syncthreads();
  if (wg == {consumers}) {{  // the producer warpgroup (its loads reduced to an arrival)
    SetMaxRegsDec<{PRODUCER_REGS}>();
    if (threadIdx.x % 128 == 0)
      for (int kt = 0; kt < k_steps; ++kt) {{
        const int s = kt % kStages;
        if (kt >= kStages) MbarWait(empty + 8 * s, ((kt / kStages) - 1) & 1);
        MbarArrive(full + 8 * s);
      }}
    return;
  }}
  SetMaxRegsInc<{regs}>();
  float acc[{blocks}][{acc}];
#pragma unroll
  for (int b = 0; b < {blocks}; ++b)
#pragma unroll
    for (int i = 0; i < {acc}; ++i) acc[b][i] = 0.f;
  for (int kt = 0; kt < k_steps; ++kt) {{
    const int s = kt % kStages;
    MbarWait(full + 8 * s, (kt / kStages) & 1);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    const uint64_t a = Desc(base + s * kStageBytes + wg * {blocks * 64 * 128});
    const uint64_t b = Desc(base + s * kStageBytes + kATileBytes);
#pragma unroll
    for (int k16 = 0; k16 < 4; ++k16)
#pragma unroll
      for (int m = 0; m < {blocks}; ++m) Wgmma_{ident}(acc[m], a + 2 * k16 + m * 512, b + 2 * k16);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
    if (kt > 0 && threadIdx.x % 128 == 0) MbarArrive(empty + 8 * ((kt - 1) % kStages));
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  // Epilogue: bf16 pairs into a swizzled staging buffer, then 16-byte rows out.
  const int t = threadIdx.x % 128, row = (t / 32) * 16 + (t % 32) / 4, col = 2 * (t % 4);
  const uint32_t stage = base + wg * {blocks * 64 * n * 2};
#pragma unroll
  for (int m = 0; m < {blocks}; ++m)
#pragma unroll
    for (int i = 0; i < {acc}; i += 4) {{
      const int c = col + 8 * (i / 4);
      StoreShared(stage + ((m * 64 + row) * {n} + (c ^ (8 * (row % 8)))) * 2, Pack(acc[m][i], acc[m][i + 1]));
      StoreShared(stage + ((m * 64 + row + 8) * {n} + (c ^ (8 * (row % 8)))) * 2, Pack(acc[m][i + 2], acc[m][i + 3]));
    }}
  asm volatile("bar.sync %0, %1;" ::"r"(wg + 1), "n"(128) : "memory");
  for (int v = t; v < {blocks * 64 * n // 8}; v += 128) {{
    const int r = v / {n // 8}, c = 8 * (v % {n // 8});
    uint4 q;
    asm volatile("ld.shared.v4.u32 {{%0,%1,%2,%3}}, [%4];" : "=r"(q.x), "=r"(q.y), "=r"(q.z), "=r"(q.w)
                 : "r"(stage + (r * {n} + c) * 2));
    *reinterpret_cast<uint4*>(out + int64_t(wg * {blocks * 64} + r) * ldc + c) = q;
  }}
}}
"""


PRELUDE = r"""
#include <cuda_bf16.h>
#include <stdint.h>
constexpr int kStages = 4, kATileBytes = 32 * 1024, kStageBytes = 56 * 1024;
template <uint32_t N> __device__ __forceinline__ void SetMaxRegsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <uint32_t N> __device__ __forceinline__ void SetMaxRegsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarArrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 s;\nmbarrier.arrive.shared::cta.b64 s, [%0];\n}" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n.reg .pred done;\nW: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n@!done bra W;\n}"
               ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ uint64_t Desc(uint32_t addr) {  // 128-byte swizzle, SBO 1024
  return (uint64_t((addr & 0x3FFFF) >> 4)) | (uint64_t(1) << 16) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 62);
}
__device__ __forceinline__ uint32_t Pack(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ void StoreShared(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--keep", type=Path, help="write the generated .cu and ptxas's output here")
    args = p.parse_args()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("cuda_tile_regs_probe.py: nvcc is not on PATH", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp()) if args.keep is None else args.keep
    work.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.split()[-1]
    print("| tile | consumer warpgroups x rows x N | accumulators a thread | consumer registers (setmaxnreg) | "
          "ptxas: registers at launch | spill stores / loads (bytes) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for shape in SHAPES:
        name, consumers, blocks_m, n, regs = shape
        src = work / f"tile_regs_probe_{name}.cu"
        src.write_text(PRELUDE + kernel(*shape))
        res = subprocess.run([nvcc, "-O3", "-std=c++17", "-arch=sm_90a", "-cubin", "-Xptxas", "-v", "-o",
                              str(work / f"probe_{name}.cubin"), str(src)], capture_output=True, text=True)
        text = res.stdout + res.stderr
        (work / f"ptxas_{name}.txt").write_text(text)
        used = re.search(r"Used (\d+) registers", text)
        spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)
        fatal = re.search(r"ptxas fatal\s*: (.*)", text)
        verdict = (f"{used.group(1)} | {spill.group(1)} / {spill.group(2)}" if res.returncode == 0 and used and spill
                   else f"refused | {fatal.group(1) if fatal else text.strip()[-200:]}")
        print(f"| {name} | {consumers} x {64 * blocks_m} x {n} | {blocks_m * n // 2} | {regs} | {verdict} |")
    print(f"(nvcc {version}, sm_90a, producer at {PRODUCER_REGS} registers; sources and ptxas output under {work})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

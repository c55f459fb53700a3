"""cuBLAS's bf16 matmul (torch.matmul) at the tall tile's --sustain shape, launched back to back for a while:
the rate a vendor GEMM keeps at the power cap, beside tests/cuda/tall_tile_check.cu --sustain's tiles. Run on
a lent GPU; the SM clock comes from nvidia-smi sampled beside it (benchmarks/cuda_tall_tile.sh)."""
from __future__ import annotations

import argparse
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=8.0, help="how long each round launches (default 8)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds after a 1 s warm-up (default 2)")
    ap.add_argument("--shape", type=int, nargs=3, default=[1024, 25344, 6144], metavar=("M", "N", "K"),
                    help="C [M, N] = A [M, K] B (default 1024 25344 6144, tall_tile_check --sustain's)")
    ap.add_argument("--trans-b", action="store_true", help="B given as W [N, K] (x @ W.T), the GMM_TRANS_B order")
    args = ap.parse_args()
    import torch  # only here: the script is the one user of it

    m, n, k = args.shape
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    b = w.t() if args.trans_b else w.t().contiguous()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    order = "K-major B (x @ W.T)" if args.trans_b else "MN-major B (x @ B)"
    for rnd, seconds in [("warm-up", 1.0)] + [(f"round {r}", args.seconds) for r in range(1, args.rounds + 1)]:
        torch.cuda.synchronize()
        start, launches = time.perf_counter(), 0
        while time.perf_counter() - start < seconds:
            for _ in range(20):
                torch.matmul(a, b, out=c)
            launches += 20
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        tflops = 2.0 * m * n * k * launches / elapsed / 1e12
        print(f"matmul sustain {rnd}, {order}, M {m} N {n} K {k}: {launches} launches in {elapsed:.2f} s, "
              f"{tflops:.1f} TFLOP/s (ends {time.strftime('%H:%M:%S')})", flush=True)


if __name__ == "__main__":
    main()

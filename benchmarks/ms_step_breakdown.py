"""Where an hpmoe.mindspore step goes, next to the standard path, on one rank in one process (EP 1), PyNative:
forward + backward of HyperParallelMoEFFN through ms.grad; the same for the standard path (ReferenceMoEFFN);
and the parts of the hpmoe step measured alone: the host steps (count rows + plan: numpy) and the CPU twin's
two launches (native.run on the bound rank). All side by side in one run, medians of --repeat.

    .venv/bin/python benchmarks/ms_step_breakdown.py [--tokens 512 --hidden 128 --inter 64 --experts 8 --topk 2]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def median_ms(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--inter", type=int, default=64)
    p.add_argument("--experts", type=int, default=8, help="experts (all local at EP 1)")
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--repeat", type=int, default=20)
    a = p.parse_args()

    import mindspore as ms
    from mindspore import Tensor

    from hpmoe.mindspore import HyperParallelMoEFFN
    from hpmoe.mindspore.reference import StandardMoEFFN
    from hpmoe.runtime import native

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    T, h, inter, e, k = a.tokens, a.hidden, a.inter, a.experts, a.topk
    rng = np.random.default_rng(0)
    ids_np = np.stack([rng.permutation(e)[:k] for _ in range(T)]).astype(np.int32)
    x, ids = Tensor(rng.standard_normal((T, h)).astype(np.float32)), Tensor(ids_np)
    w = Tensor(rng.random((T, k)).astype(np.float32))
    rows = {}
    for name, cell in (("hpmoe", HyperParallelMoEFFN(h, inter, e, k)), ("standard", StandardMoEFFN(h, inter, e, k))):
        grad = ms.grad(lambda x_, w_, c=cell: c(x_, ids, w_).sum(), grad_position=(0, 1),  # noqa: E731
                       weights=[cell.w1, cell.w2])
        rows[name] = median_ms(lambda g=grad: [t.asnumpy() for t in g(x, w)[0]], a.repeat)
        if name == "hpmoe":
            state = cell.state

            def host_steps():
                counts = state.count_rows(ids_np)
                state.plan(ids_np, counts[None, :])

            rows["  host steps (count rows + plan, numpy)"] = median_ms(host_steps, a.repeat)
            handle = state.session(T).active.handle
            rows["  CPU twin fwd + bwd launches"] = median_ms(
                lambda: (native.run([handle], "fwd"), native.run([handle], "bwd")), a.repeat)
    print(f"T {T}, h {h}, I {inter}, {e} experts, top-{k}, fp32, EP 1, PyNative, median of {a.repeat}")
    for name, ms_ in rows.items():
        print(f"{name:42s} {ms_:8.2f} ms")
    print(f"hpmoe / standard: {rows['hpmoe'] / rows['standard']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Memory of hpmoe.mindspore per layer count: the symmetric heap each rank holds (shared by all layers of one
shape) and what each layer keeps for backward (activation memory per token), measured by running a stack of
L HyperParallelMoEFFN layers forward + backward in one process (EP 1), and the heap of an EP-4 rank for the
same shape computed from the CPU twin's layout (C++ side, one source of truth).

    .venv/bin/python benchmarks/ms_memory.py [--tokens 512 --hidden 128 --inter 64 --experts 2 --topk 2]
"""
from __future__ import annotations

import argparse

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--tokens", type=int, default=512)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--inter", type=int, default=64)
    p.add_argument("--experts", type=int, default=2, help="experts per rank")
    p.add_argument("--topk", type=int, default=2)
    p.add_argument("--layers", default="1,2,4,8")
    args = p.parse_args()

    import mindspore as ms
    from mindspore import Tensor, nn

    from hpmoe.mindspore import HyperParallelMoEFFN, host_state, kernel_library
    from hpmoe.runtime import native
    from hpmoe.runtime.ssc_cache import SscCache
    from hpmoe.ssc_format import Slot

    ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
    T, h, inter, e, k = args.tokens, args.hidden, args.inter, args.experts, args.topk
    rng = np.random.default_rng(0)
    ids = Tensor(np.stack([rng.permutation(e)[:k] for _ in range(T)]).astype(np.int32))
    x = Tensor(rng.standard_normal((T, h)).astype(np.float32))
    w = Tensor(rng.random((T, k)).astype(np.float32))

    class Stack(nn.Cell):
        def __init__(self, layers):
            super().__init__()
            self.layers = nn.CellList(layers)

        def construct(self, x_, w_):
            for layer in self.layers:
                x_ = x_ + layer(x_, ids, w_)
            return x_.sum()

    print(f"T {T} tokens/rank, h {h}, I {inter}, {e} experts/rank, top-{k}, fp32")
    print("| layers | EP-1 heap per rank (measured) | saved for backward, all layers | per token per layer |")
    print("| --- | --- | --- | --- |")
    for n in [int(v) for v in args.layers.split(",")]:
        # A distinct capacity_factor per stack (same bucket) gives each stack a fresh session to measure.
        layers = [HyperParallelMoEFFN(h, inter, e, k, capacity_factor=1.25 + 1e-3 * n) for _ in range(n)]
        ms.grad(Stack(layers), grad_position=(0, 1))(x, w)  # one forward + backward
        session = layers[0].state.session(T)
        heap = session.heap_bytes()
        nbytes = session.slot_bytes()
        saved = sum(int(nbytes[s]) for s in (Slot.RECV_COUNTS, Slot.RECV_X, Slot.H, Slot.A, Slot.RET_Y))
        plan = sum(a.nbytes for a in layers[0].state.plan_arrays)
        stashed = sum(kernel_library.stash_bytes(layer.state.context_id) for layer in layers)
        print(f"| {n} | {heap / 2**20:.2f} MiB | {n * (saved + plan) / 2**20:.2f} MiB (stash copies: "
              f"{stashed / 2**20:.2f} MiB) | {(saved + plan) / T:.0f} B |")
        assert len({id(layer.state.session(T)) for layer in layers}) == 1
    ep4 = host_state.HostState(h, inter, e, k, "fp32", None, None, 4, 0, "layout-only").base_config(T)
    cache = SscCache(ep4, rank=0)
    bucket = cache.get(cache.first_capacity())
    layout = native.HeapLayout(bucket.cfg, *bucket.counters)
    print(f"EP 4 (computed from the layout, C={bucket.cfg.recv_rows_per_src}): heap per rank "
          f"{layout.segment_bytes / 2**20:.2f} MiB for any number of layers")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""CPU twin runtime: run compiled SSCs across an EP group on numpy arrays (see docs/runtime.md)."""
from __future__ import annotations

import numpy as np

from ..config import MoeConfig


def run_moe(cfg: MoeConfig, x, w1, w2, topk_ids, topk_weights, dy, processes: bool = False,
            timeout_s: float = 30.0) -> dict[str, np.ndarray]:
    """Forward and backward of every rank on the CPU twin; returns y, dx, dw1, dw2, dtopk_weights as float64
    stacked over ranks. Inputs are per-rank stacks ([ep, ...]) of values in cfg.dtype's range (they are rounded
    to it); the routing must fit cfg's bucket (RoutingError otherwise, before anything runs)."""
    from .twin import CpuTwin, MoeInputs  # local: keeps `import hpmoe.runtime` free of the native library

    inputs = MoeInputs(np.asarray(x, np.float64), np.asarray(w1, np.float64), np.asarray(w2, np.float64),
                       np.asarray(dy, np.float64), np.asarray(topk_ids, np.int32),
                       np.asarray(topk_weights, np.float32))
    with CpuTwin(cfg, shared_memory=processes, timeout_s=timeout_s) as twin:
        twin.load_inputs(inputs)
        if processes:
            twin.run_processes()
        else:
            twin.run_threads("fwd")
            twin.run_threads("bwd")
        return twin.outputs()

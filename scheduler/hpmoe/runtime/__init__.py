"""CPU twin runtime: run compiled SSCs across an EP group on numpy arrays (see docs/runtime.md)."""
from __future__ import annotations

import numpy as np

from ..config import MoeConfig


def run_moe(cfg: MoeConfig, x, w1, w2, topk_ids, topk_weights, dy, processes: bool = False,
            timeout_s: float = 30.0) -> dict[str, np.ndarray]:
    """Forward and backward of every rank on the CPU twin; returns y, dx, dw1, dw2, dtopk_weights as float64
    stacked over ranks. Inputs are per-rank stacks ([ep, ...]) of values in cfg.dtype's range (they are rounded
    to it); shapes, dtypes and values are checked first (InputError: wrong rank stack, float or out-of-range
    ids, non-finite values), and the routing must fit cfg's bucket (RoutingError otherwise), before anything
    runs. docs/runtime.md, "The numpy entry point"."""
    from .input_checks import check_moe_inputs
    from .twin import CpuTwin, MoeInputs  # local: keeps `import hpmoe.runtime` free of the native library

    a = check_moe_inputs(cfg, dict(x=x, w1=w1, w2=w2, dy=dy, topk_ids=topk_ids, topk_weights=topk_weights))
    inputs = MoeInputs(a["x"].astype(np.float64), a["w1"].astype(np.float64), a["w2"].astype(np.float64),
                       a["dy"].astype(np.float64), a["topk_ids"].astype(np.int32),
                       a["topk_weights"].astype(np.float32))
    with CpuTwin(cfg, shared_memory=processes, timeout_s=timeout_s) as twin:
        twin.load_inputs(inputs)
        if processes:
            twin.run_processes()
        else:
            twin.run_threads("fwd")
            twin.run_threads("bwd")
        return twin.outputs()

"""K chunks of the second GMMs (Python mirror of op_kernel/runtime/k_chunks.h, which says what the tasks do).

With cfg.gmm_k_block, GMM2 (K = I) and the gate gradient (K = 2I) run each output tile as a chain of tasks,
one per chunk of gmm_k_block K columns, in K order; the chunks pass an fp32 running sum along in
Slot.GMM_PARTIAL, each waiting on the one before it. Claimed in chunk-major panel order
(worker_queues._panel_order), the tasks that read one chunk of an expert's input rows run together and share
it in L2. K whole, the column blocks of a wide expert (Mixtral-8x22B: 24 blocks of h 6144, K 32768 in the
backward) each read the whole input row tile again at their own pace: that backward's data-gradient GEMMs read
31 GB from DRAM against about 6 compulsory (docs/cuda.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .ssc_format import Slot

if TYPE_CHECKING:
    from .config import MoeConfig

K_STEP = 64  # K of one GPU tile step (op_kernel/cuda/block_gemm_tma.cuh kBK): a chunk is whole steps
SUM_SLOT = Slot.GMM_PARTIAL
# Slots whose regions a chain of tasks carries: a read gets the region's latest earlier writer (events.py,
# validate.py), not every writer.
CARRIED_SLOTS = frozenset({SUM_SLOT})


def k_chunked(cfg: MoeConfig) -> bool:
    """Whether some GMM runs in K chunks (the gate gradient's K, 2I, is the longest): the heap then holds the
    running sum (op_kernel/runtime/slot_shapes.h sizes it by the same rule)."""
    return cfg.gmm_k_block != 0 and 2 * cfg.inter > cfg.gmm_k_block


def k_chunks(cfg: MoeConfig, k: int) -> list[tuple[int, int]]:
    """(first K column, columns) of each chunk of an op whose K is `k`, in K order: [(0, k)] unless split."""
    block = cfg.gmm_k_block
    if block == 0 or k <= block:
        return [(0, k)]
    return [(k0, min(block, k - k0)) for k0 in range(0, k, block)]


def default_gmm_k_block(cfg: MoeConfig) -> int:
    """MoEFFN's K chunk at this shape (0: K whole). Not yet measured on the GPU: K whole everywhere until an
    A/B picks a rule (benchmarks/cuda_op_build_ab.sh with STEP_ARGS="--gmm-k-block N")."""
    return 0

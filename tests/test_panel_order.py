"""The claim pool's second GMMs in panel order (worker_queues._panel_order): the row tiles one expert is
expected to fill are claimed column block by column block, so the readers of one weight panel run together."""
from __future__ import annotations

from hpmoe.compiler import compile_schedules
from hpmoe.config import make_config
from hpmoe.ssc_format import QueueType, TaskType
from hpmoe.validate import validate

MIXED = dict(ep=1, dtype="bf16", tile_m=128, wgrad_tile=128, mixed_queues=True, claim_pool=True,
             row_pipelines=False, num_aic=112, num_aiv=20)


def _pool_gmms(s):
    """(row tile, first column) of the pool's GMM units, in claim order."""
    order = []
    for q in s.queues:
        if q["queue_type"] != int(QueueType.POOL):
            continue
        for e in s.entries[q["first_entry"]:q["first_entry"] + q["count"]]:
            t = s.tasks[e]
            if t["task_type"] in (int(TaskType.GMM), int(TaskType.GMM_TRANS_B)):
                order.append((int(t["outputs"][0]["row_offset"]) // 128, int(t["outputs"][0]["col_offset"])))
    return order


def test_second_gmms_are_claimed_panel_by_panel_within_an_experts_row_tiles():
    # Mixtral-8x7B experts, 4096 tokens: 1024 rows per expert under balanced routing = 8 row tiles a group.
    cfg = make_config(None, dict(MIXED, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2))
    for s in compile_schedules(cfg, ["fwd", "bwd"], [0]):
        assert validate([s]) == []
        order = _pool_gmms(s)
        assert len(order) == len(set(order)), "every second-GMM unit once"
        rows = sorted({r for r, _ in order})
        assert rows == list(range(64))
        block = order[8][1] - order[0][1]
        assert block > 0
        # First group: row tiles 0-7 at column 0, then 0-7 at the next block, ...
        assert order[:16] == [(r, 0) for r in range(8)] + [(r, block) for r in range(8)]
        # A group's units all come before the next group's.
        groups = [r // 8 for r, _ in order]
        assert groups == sorted(groups)


def test_first_gmms_pooled_in_panel_order_with_each_activation_after_its_producers():
    from hpmoe.compiler import build_group_tasks
    from hpmoe.worker_queues import build_queues
    cfg = make_config(None, dict(MIXED, tokens=4096, hidden=4096, inter=14336, experts_per_rank=8, topk=2,
                                 first_gmm_pool=True))
    for direction, first, act in (("fwd", "GMM1", TaskType.SWIGLU), ("bwd", "GMM_act_grad", TaskType.SWIGLU_GRAD)):
        group = build_group_tasks(cfg, direction)
        tasks = group.rank_tasks(0)
        queues = build_queues(cfg, tasks)
        assert validate([s for s in compile_schedules(cfg, [direction], [0])]) == []
        pool = [u[0] for u in queues[QueueType.POOL]]
        assert all(len(u) == 1 for u in queues[QueueType.POOL])
        workers = queues[QueueType.CTQ] + queues[QueueType.VTQ]
        assert not any(t.op_name == first or t.task_type == act for q in workers for t in q), \
            f"{direction}: first GMMs and activations are all pool units"
        gmms = [(t.outputs[0].row_offset // 128, t.outputs[0].col_offset) for t in pool if t.op_name == first]
        assert sorted(gmms) == sorted((t.outputs[0].row_offset // 128, t.outputs[0].col_offset)
                                      for t in tasks if t.op_name == first)
        block = gmms[8][1] - gmms[0][1]
        assert gmms[:16] == [(r, 0) for r in range(8)] + [(r, block) for r in range(8)], direction
        # Each activation unit comes after every first-GMM unit it waits on, and before any second GMM.
        where = {id(t): i for i, t in enumerate(pool)}
        writers: dict[int, list[int]] = {}
        for t in pool:
            if t.op_name == first:
                for _, event in t.triggers:
                    writers.setdefault(event, []).append(where[id(t)])
        seconds = [where[id(t)] for t in pool if t.op_name in ("GMM2", "GMM_gate_grad")]
        acts = [t for t in pool if t.task_type == act]
        assert acts and seconds
        for a in acts:
            assert max(p for e in a.waits for p in writers.get(e, [-1])) < where[id(a)] < min(seconds)

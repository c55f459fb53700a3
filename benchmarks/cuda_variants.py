"""Schedule variants the CUDA benchmarks time side by side: NAME[:AIC+AIV], NAME one of
split (cube role: GMM tiles only; vector role: everything else, the paper's AIC/AIV deal),
mixed (split, plus dispatch puts and final reductions dealt over every worker: --mixed-queues),
pipelines (mixed, plus each row tile's whole chain on one cube-queue worker: --row-pipelines);
a "+pool" suffix adds the claim pool (weight-gradient tiles claimed at run time: --claim-pool).
AIC+AIV overrides the benchmark's worker split for that variant, e.g. pipelines+pool:128+4."""
from __future__ import annotations

QUEUE_FLAGS = {"split": dict(mixed_queues=False, row_pipelines=False),
               "mixed": dict(mixed_queues=True, row_pipelines=False),
               "pipelines": dict(mixed_queues=True, row_pipelines=True)}


def variant_config(cfg, spec: str):
    """cfg with the variant's queue flags and worker split; raises ValueError naming a bad spec."""
    name, _, workers = spec.partition(":")
    name, pool = (name[:-5], True) if name.endswith("+pool") else (name, False)
    if name not in QUEUE_FLAGS:
        raise ValueError(f"variant {spec!r}: name must be one of {', '.join(QUEUE_FLAGS)} (+pool)")
    changes = dict(QUEUE_FLAGS[name], claim_pool=pool)
    if workers:
        aic, _, aiv = workers.partition("+")
        if not (aic.isdigit() and aiv.isdigit()):
            raise ValueError(f"variant {spec!r}: workers must read AIC+AIV, e.g. 128+4")
        changes.update(num_aic=int(aic), num_aiv=int(aiv))
    return cfg.replace(**changes)


def variant_name(cfg) -> str:
    name = "pipelines" if cfg.row_pipelines else "mixed" if cfg.mixed_queues else "split"
    return f"{name}{'+pool' if cfg.claim_pool else ''}:{cfg.num_aic}+{cfg.num_aiv}"

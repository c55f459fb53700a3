"""hpmoe as a transformers experts implementation: after `import hpmoe.transformers`,

    model = AutoModelForCausalLM.from_config(cfg, experts_implementation="hpmoe", dtype=torch.bfloat16)

runs every MoE layer's experts through `hpmoe.torch.moe_ffn` (forward and backward) on the model's own
parameters; layouts the kernels lack are refused when the model is built. `shard_experts` splits the experts
over an expert-parallel group under torchrun. transformers and torch are imported here and in this package
only (`import hpmoe` does not need them).
"""
from .experts import runtimes
from .parallel import ExpertShards, make_ep_groups, shard_experts
from .registration import check_model, register
from .variants import UnsupportedExpertsLayout, unsupported_variants

register()

__all__ = ["ExpertShards", "UnsupportedExpertsLayout", "check_model", "make_ep_groups", "register",
           "runtimes", "shard_experts", "unsupported_variants"]

"""Small configs of the three architectures the transformers tests run (CPU and GPU), and helpers to build
twin models that differ only in experts_implementation."""
from __future__ import annotations

import torch

ARCHS = ("qwen3_moe", "mixtral", "deepseek_v3")


def small_config(arch: str, *, hidden: int = 64, inter: int = 32, experts: int = 8, topk: int = 2,
                 moe_layers: int = 2, vocab: int = 256):
    """`moe_layers` MoE decoder layers (DeepSeek-V3 gets one dense layer in front, as its first_k_dense_replace
    does at full size)."""
    from transformers import DeepseekV3Config, MixtralConfig, Qwen3MoeConfig
    common = dict(vocab_size=vocab, hidden_size=hidden, num_attention_heads=4, max_position_embeddings=512,
                  tie_word_embeddings=False)
    if arch == "qwen3_moe":
        return Qwen3MoeConfig(**common, intermediate_size=2 * inter, moe_intermediate_size=inter,
                              num_hidden_layers=moe_layers, num_key_value_heads=2, head_dim=hidden // 4,
                              num_experts=experts, num_experts_per_tok=topk, norm_topk_prob=True)
    if arch == "mixtral":
        return MixtralConfig(**common, intermediate_size=inter, num_hidden_layers=moe_layers, num_key_value_heads=2,
                             num_local_experts=experts, num_experts_per_tok=topk)
    if arch == "deepseek_v3":
        return DeepseekV3Config(**common, intermediate_size=2 * inter, moe_intermediate_size=inter,
                                num_hidden_layers=moe_layers + 1, first_k_dense_replace=1, num_key_value_heads=4,
                                n_routed_experts=experts, num_experts_per_tok=topk, n_group=2, topk_group=2,
                                n_shared_experts=1, kv_lora_rank=16, q_lora_rank=32, qk_rope_head_dim=8,
                                qk_nope_head_dim=8, v_head_dim=16)
    raise ValueError(f"unknown arch {arch!r}")


def twin_models(cfg, implementations, *, dtype=torch.float32, device="cpu", seed: int = 0):
    """One model per implementation, all holding the first one's weights (each on its own copy of `cfg`:
    from_config records experts_implementation in the config object it is given)."""
    import copy

    from transformers import AutoModelForCausalLM
    torch.manual_seed(seed)
    models = [AutoModelForCausalLM.from_config(copy.deepcopy(cfg), experts_implementation=impl, dtype=dtype)
              .to(device) for impl in implementations]
    for m in models[1:]:
        m.load_state_dict(models[0].state_dict())
    return models


def experts_modules(model) -> list[tuple[str, torch.nn.Module]]:
    from hpmoe.transformers.variants import is_experts_module
    return [(n, m) for n, m in model.named_modules() if is_experts_module(m)]


def rel_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """max|got - ref| / max|ref| (hpmoe.runtime.tolerances' metric: entrywise relative error is meaningless
    near zero)."""
    got, ref = got.detach().double().cpu(), ref.detach().double().cpu()
    if not torch.isfinite(got).all():
        return float("inf")
    scale = ref.abs().max().item()
    diff = (got - ref).abs().max().item()
    return diff / scale if scale > 0 else diff

"""Which transformers experts layouts the hpmoe kernels run, and the (w1, w2) views of the ones they do.

transformers flags an experts class through `@use_experts_implementation(is_concatenated=, is_transposed=,
has_bias=, has_gate=)` (transformers/integrations/moe.py) and lets a class replace the SwiGLU by defining its own
`_apply_gate` (gpt-oss and DeepSeek-V4 clamp gate and up before it). The kernels compute exactly
`silu(x W1g) * (x W1u)` then `@ W2`, no biases, so every other variant is refused by name, never run wrongly.
"""
from __future__ import annotations

import torch


class UnsupportedExpertsLayout(ValueError):
    """An experts module whose math or layout the hpmoe kernels do not implement."""


def is_experts_module(module: torch.nn.Module) -> bool:
    """True for modules decorated by transformers' `use_experts_implementation` (it sets these four flags)."""
    return all(hasattr(module, flag) for flag in ("has_gate", "has_bias", "is_transposed", "is_concatenated"))


def _is_silu(act) -> bool:
    from transformers.activations import SiLUActivation
    return isinstance(act, (torch.nn.SiLU, SiLUActivation))


def unsupported_variants(module: torch.nn.Module) -> list[str]:
    """The variants of `module` the kernels lack, each named with the flag or attribute that shows it."""
    from transformers.integrations.moe import _default_apply_gate
    found = []
    if not module.has_gate:
        found.append("no gate projection (has_gate=False: up_proj and an activation, not SwiGLU)")
    if module.has_bias:
        found.append("expert biases (has_bias=True)")
    if not module.is_concatenated:
        found.append("interleaved gate/up columns (is_concatenated=False)")
    custom_gate = getattr(type(module), "_apply_gate", _default_apply_gate) is not _default_apply_gate
    if custom_gate:
        found.append(f"its own gate function ({type(module).__name__}._apply_gate, e.g. a clamped SwiGLU)")
    act = getattr(module, "act_fn", None)
    if module.has_gate and not custom_gate and not _is_silu(act):
        found.append(f"activation {type(act).__name__} (the kernels' SwiGLU uses SiLU)")
    return found


def check_supported(module: torch.nn.Module) -> None:
    """Raise UnsupportedExpertsLayout (one line naming the class and every variant) unless the kernels run it."""
    found = unsupported_variants(module)
    if found:
        raise UnsupportedExpertsLayout(
            f"experts_implementation=\"hpmoe\" cannot run {type(module).__name__}: " + "; ".join(found)
            + " (use experts_implementation=\"grouped_mm\" for this model)")
    w1, w2 = expert_weights(module)
    if w1.dim() != 3 or w2.dim() != 3 or w1.shape[0] != w2.shape[0] or w1.shape[2] != 2 * w2.shape[1] \
            or w1.shape[1] != w2.shape[2]:
        raise UnsupportedExpertsLayout(
            f"experts_implementation=\"hpmoe\" cannot run {type(module).__name__}: gate_up_proj "
            f"{list(module.gate_up_proj.shape)} and down_proj {list(module.down_proj.shape)} are not "
            f"[E, 2I, h] and [E, h, I] (or their transposes with is_transposed=True)")


def expert_weights(module: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """w1 [E, h, 2I] (gate | up along the last dim) and w2 [E, I, h] as views of the module's own parameters,
    so autograd takes the gradients straight to them.

    Default layout: gate_up_proj [E, 2I, h] and down_proj [E, h, I] (nn.Linear order), whose transposes are
    w1 and w2. is_transposed=True stores [E, h, 2I] and [E, I, h]: w1 and w2 themselves."""
    if module.is_transposed:
        return module.gate_up_proj, module.down_proj
    return module.gate_up_proj.transpose(1, 2), module.down_proj.transpose(1, 2)

"""Registers "hpmoe" in transformers' ExpertsInterface and checks every experts module at model build.

transformers validates `experts_implementation` in PreTrainedModel.__init__, before the model's layers exist,
and calls the experts function only at forward. So the layout check runs from `post_init` (every model calls
it at the end of its __init__, from_config and from_pretrained alike) and after `set_experts_implementation`:
an unsupported variant fails while the model is built, in one line, not at the first step.
"""
from __future__ import annotations

import functools

import torch

from .experts import hpmoe_experts_forward
from .variants import UnsupportedExpertsLayout, check_supported, is_experts_module

NAME = "hpmoe"


def check_model(model: torch.nn.Module) -> None:
    """Refuse (UnsupportedExpertsLayout) any experts module of `model` set to "hpmoe" that the kernels lack."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if is_experts_module(module) and getattr(config, "_experts_implementation", None) == NAME:
            check_supported(module)
            module.__dict__["_hpmoe_checked"] = True


def _checked_after(method, restore: bool):
    """`method`, then check_model; with `restore`, a refused switch puts the previous implementation back."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        before = self.get_experts_implementation() if restore else None
        result = method(self, *args, **kwargs)
        try:
            check_model(self)
        except UnsupportedExpertsLayout:
            if restore:
                method(self, before)
            raise
        return result
    wrapper._hpmoe_checks = True
    return wrapper


def register() -> None:
    """Idempotent: `experts_implementation="hpmoe"` becomes valid for every model built afterwards."""
    from transformers import PreTrainedModel
    from transformers.integrations.moe import ExpertsInterface
    ExpertsInterface.register(NAME, hpmoe_experts_forward)
    for name, restore in (("post_init", False), ("set_experts_implementation", True)):
        method = getattr(PreTrainedModel, name)
        if not getattr(method, "_hpmoe_checks", False):
            setattr(PreTrainedModel, name, _checked_after(method, restore))

"""hpmoe.transformers on a CPU, with moe_ffn replaced by its pure-PyTorch stand-in
(hpmoe.transformers._reference): registration, the layout views fed to moe_ffn (against the float64 numpy
reference, which knows nothing of transformers' layouts), whole models against "grouped_mm", and the refusal of
every layout variant the kernels lack. Skipped without torch or transformers (optional dependencies)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional dependency)")
pytest.importorskip("transformers", reason="transformers is not installed (optional dependency)")

import hpmoe.transformers as ht  # noqa: E402  (registers "hpmoe")
from hpmoe.reference import moe_reference  # noqa: E402
from hpmoe.transformers import _reference, experts  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from hf_models import ARCHS, experts_modules, rel_err, small_config, twin_models  # noqa: E402

# The stand-in computes in float32: its error against float64 is fp32 accumulation over K <= 64 terms (K u =
# 4e-6 worst case) plus float32 inputs; 1e-5 bounds it with headroom, and a layout mistake (gate/up swapped,
# a weight read untransposed) gives O(1).
TOL_VS_FLOAT64 = 1e-5
# Whole fp32 models, stand-in vs grouped_mm: both fp32 with different summation orders, through a few layers
# (observed ~1e-6); 1e-4 is the project's fp32 tolerance (hpmoe.runtime.tolerances).
TOL_VS_GROUPED_MM = 1e-4


class CountingOps:
    """The stand-in, counting moe_ffn calls (proves the "hpmoe" path ran, not the module's own forward)."""
    DTYPES, MoeFfnRuntime = _reference.DTYPES, _reference.MoeFfnRuntime

    def __init__(self):
        self.calls = 0

    def moe_ffn(self, *args):
        self.calls += 1
        return _reference.moe_ffn(*args)


@pytest.fixture()
def ops():
    counting = CountingOps()
    experts.set_ops(counting)
    yield counting
    experts.set_ops(None)


def test_hpmoe_is_registered_and_every_moe_layer_goes_through_moe_ffn(ops):
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    assert ALL_EXPERTS_FUNCTIONS["hpmoe"] is experts.hpmoe_experts_forward
    (model,) = twin_models(small_config("qwen3_moe", moe_layers=3), ["hpmoe"])
    assert model.config._experts_implementation == "hpmoe"
    model(input_ids=torch.randint(0, 256, (2, 8)))
    assert ops.calls == 3, f"{ops.calls=} for 3 MoE layers"
    runtimes = [m.__dict__["_hpmoe_runtime"][1] for _, m in experts_modules(model)]
    assert len({id(r) for r in runtimes}) == 3, "one MoeFfnRuntime per experts module"
    model(input_ids=torch.randint(0, 256, (2, 8)))
    assert [m.__dict__["_hpmoe_runtime"][1] for _, m in experts_modules(model)] == runtimes, "runtime not cached"
    assert not any("_hpmoe" in k for k in model.state_dict()), "the runtime must not enter the state_dict"


def _experts_call_vs_float64(module, T: int = 40, seed: int = 1):
    """One experts call through "hpmoe" and its gradients, against moe_reference in float64."""
    g = torch.Generator().manual_seed(seed)
    E, k = module.gate_up_proj.shape[0], 2
    h = module.down_proj.shape[1] if not module.is_transposed else module.down_proj.shape[2]
    with torch.no_grad():
        for p in (module.gate_up_proj, module.down_proj):
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    x = torch.randn(T, h, generator=g, requires_grad=True)
    ids = torch.stack([torch.randperm(E, generator=g)[:k] for _ in range(T)])
    w = torch.softmax(torch.randn(T, k, generator=g), -1).requires_grad_()
    dy = torch.randn(T, h, generator=g)
    y = module(x, ids, w)
    y.backward(dy)
    gu, dp = module.gate_up_proj, module.down_proj
    w1 = gu if module.is_transposed else gu.transpose(1, 2)   # [E, h, 2I]: gate columns first
    w2 = dp if module.is_transposed else dp.transpose(1, 2)   # [E, I, h]
    dw1 = gu.grad if module.is_transposed else gu.grad.transpose(1, 2)
    dw2 = dp.grad if module.is_transposed else dp.grad.transpose(1, 2)
    f64 = lambda t: t.detach().double().numpy()[None]  # noqa: E731
    ref = moe_reference(f64(x), f64(w1), f64(w2), ids.numpy()[None], f64(w), dy.double().numpy()[None])
    got = {"y": y, "dx": x.grad, "dw1": dw1, "dw2": dw2, "dtopk_weights": w.grad}
    return {name: rel_err(got[name], torch.from_numpy(ref[name][0])) for name in got}


@pytest.mark.parametrize("arch", ARCHS)
def test_experts_call_reads_the_model_layout_correctly(ops, arch):
    (model,) = twin_models(small_config(arch), ["hpmoe"])
    name, module = experts_modules(model)[0]
    errs = _experts_call_vs_float64(module)
    bad = {n: e for n, e in errs.items() if not e <= TOL_VS_FLOAT64}
    assert not bad, f"{arch=} {name}: errors above {TOL_VS_FLOAT64}: {bad}"


def _transposed_experts(**flags):
    """A standalone experts class like transformers' own, decorated with the given layout flags."""
    from transformers import PretrainedConfig
    from transformers.activations import ACT2FN
    from transformers.integrations.moe import use_experts_implementation

    @use_experts_implementation(**flags)
    class Experts(torch.nn.Module):
        def __init__(self, config):
            super().__init__()
            E, h, inter = config.num_experts, config.hidden_size, config.moe_intermediate_size
            shape_gu, shape_d = ((E, h, 2 * inter), (E, inter, h)) if flags.get("is_transposed") else \
                ((E, 2 * inter, h), (E, h, inter))
            self.gate_up_proj = torch.nn.Parameter(torch.empty(shape_gu))
            self.down_proj = torch.nn.Parameter(torch.empty(shape_d))
            self.act_fn = ACT2FN[config.hidden_act]

        def forward(self, hidden_states, top_k_index, top_k_weights):
            raise AssertionError("the hpmoe path must replace this forward")

    cfg = PretrainedConfig(num_experts=6, hidden_size=48, moe_intermediate_size=24, hidden_act="silu")
    cfg._experts_implementation = "hpmoe"
    return Experts(cfg)


def test_is_transposed_layout_is_read_in_place(ops):
    module = _transposed_experts(is_transposed=True)
    errs = _experts_call_vs_float64(module)
    bad = {n: e for n, e in errs.items() if not e <= TOL_VS_FLOAT64}
    assert not bad, f"is_transposed=True: errors above {TOL_VS_FLOAT64}: {bad}"


@pytest.mark.parametrize("arch", ARCHS)
def test_model_forward_backward_matches_grouped_mm(ops, arch):
    ref, got = twin_models(small_config(arch), ["grouped_mm", "hpmoe"])
    ids = torch.randint(0, 256, (2, 24), generator=torch.Generator().manual_seed(2))
    errs = {}
    outs = []
    for model in (ref, got):
        embeds = model.get_input_embeddings()(ids).detach().requires_grad_()
        out = model(inputs_embeds=embeds, labels=ids)
        out.loss.backward()
        outs.append((out.logits, embeds.grad, dict(model.named_parameters())))
    errs["logits"] = rel_err(outs[1][0], outs[0][0])
    errs["d inputs_embeds"] = rel_err(outs[1][1], outs[0][1])
    for name, _ in experts_modules(ref):
        for p in ("gate_up_proj", "down_proj"):
            errs[f"d {name}.{p}"] = rel_err(outs[1][2][f"{name}.{p}"].grad, outs[0][2][f"{name}.{p}"].grad)
    assert ops.calls == len(experts_modules(got))
    bad = {n: e for n, e in errs.items() if not e <= TOL_VS_GROUPED_MM}
    assert not bad, f"{arch=}: above {TOL_VS_GROUPED_MM}: {bad}"


def _gpt_oss():
    from transformers import GptOssConfig
    return GptOssConfig(vocab_size=128, hidden_size=64, intermediate_size=32, num_hidden_layers=1,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16, num_local_experts=4,
                        num_experts_per_tok=2)


def _mixtral_gelu():
    cfg = small_config("mixtral", moe_layers=1)
    cfg.hidden_act = "gelu"
    return cfg


@pytest.mark.parametrize("make_config, names", [
    (_gpt_oss, ["GptOssExperts", "has_bias=True", "is_concatenated=False", "_apply_gate"]),
    (_mixtral_gelu, ["MixtralExperts", "GELUActivation"]),
])
def test_unsupported_variant_is_refused_at_build_in_one_line(make_config, names):
    from transformers import AutoModelForCausalLM
    with pytest.raises(ht.UnsupportedExpertsLayout) as err:
        AutoModelForCausalLM.from_config(make_config(), experts_implementation="hpmoe")
    msg = str(err.value)
    assert "\n" not in msg and all(n in msg for n in names), msg


@pytest.mark.parametrize("flags, name", [({"has_gate": False}, "has_gate=False"),
                                         ({"has_bias": True}, "has_bias=True"),
                                         ({"is_concatenated": False}, "is_concatenated=False")])
def test_every_flagged_variant_is_named(flags, name):
    msg = "; ".join(ht.unsupported_variants(_transposed_experts(**flags)))
    assert name in msg, msg
    assert ht.unsupported_variants(_transposed_experts()) == []


def test_a_refused_switch_keeps_the_previous_implementation():
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_config(_mixtral_gelu(), experts_implementation="grouped_mm")
    with pytest.raises(ht.UnsupportedExpertsLayout, match="GELUActivation"):
        model.set_experts_implementation("hpmoe")
    assert model.config._experts_implementation == "grouped_mm"
    assert all(m.config._experts_implementation == "grouped_mm" for _, m in experts_modules(model))


def test_fp32_weights_without_autocast_are_refused_by_the_kernel_dtypes():
    class KernelDtypes(CountingOps):
        DTYPES = (torch.bfloat16, torch.float16)  # what hpmoe.torch runs
    experts.set_ops(KernelDtypes())
    try:
        (model,) = twin_models(small_config("qwen3_moe", moe_layers=1), ["hpmoe"])
        with pytest.raises(TypeError, match="dtype=torch.bfloat16 or run it under torch.autocast"):
            model(input_ids=torch.randint(0, 256, (1, 4)))
    finally:
        experts.set_ops(None)


def test_autocast_runs_fp32_parameters_in_the_autocast_dtype():
    seen = []

    class KernelDtypes(CountingOps):
        DTYPES = (torch.bfloat16, torch.float16)

        def moe_ffn(self, x, ids, w, w1, w2, rt):
            seen.append((x.dtype, w1.dtype, w2.dtype, rt.dtype))
            return super().moe_ffn(x, ids, w, w1, w2, rt)
    experts.set_ops(KernelDtypes())
    try:
        (model,) = twin_models(small_config("qwen3_moe", moe_layers=1), ["hpmoe"])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(input_ids=torch.randint(0, 256, (1, 4))).logits.float().sum().backward()
        assert seen == [(torch.bfloat16,) * 4], seen
        gu = experts_modules(model)[0][1].gate_up_proj
        assert gu.grad is not None and gu.grad.dtype == torch.float32 and gu.grad.abs().sum() > 0
    finally:
        experts.set_ops(None)


def test_missing_kernel_op_is_one_line(monkeypatch):
    import hpmoe.torch as real
    if callable(getattr(real, "moe_ffn", None)):
        pytest.skip("hpmoe.torch.moe_ffn exists in this build")
    (model,) = twin_models(small_config("qwen3_moe", moe_layers=1), ["hpmoe"])
    with pytest.raises(RuntimeError, match="no moe_ffn/MoeFfnRuntime"):
        model(input_ids=torch.randint(0, 256, (1, 4)))

"""Train a small Qwen3-MoE model (random init) with transformers' "grouped_mm" experts and with hpmoe's, same
seed, same weights, same batches; write both loss curves (loss.png), tokens/s and peak GPU memory of each
(summary.json) to --out.

    python examples/train_transformers.py --steps 200                    # one GPU
    torchrun --nproc_per_node 4 examples/train_transformers.py --steps 200  # EP 4: each GPU 1/4 of the experts
    python examples/train_transformers.py --cpu-reference --steps 5      # CPU check of this script (stand-in op)

Data: the repository's own text (README, docs, Python sources), byte-level (vocabulary 256), random windows
from a seeded generator; nothing is downloaded. Under torchrun every rank draws its own windows (data
parallel); the "grouped_mm" run then replicates every expert (DDP), the "hpmoe" run keeps 1/EP of them per
rank (hpmoe.transformers.shard_experts) and reduces gradients as the README says. Both see the same global
batch, so their curves should agree up to bf16 rounding (tolerance in tests/cuda/test_transformers.py).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scheduler"))


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=200, help="optimizer steps per implementation (default 200)")
    p.add_argument("--warmup", type=int, default=3, help="first steps left out of tokens/s (SSC compile, heaps)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--moe-inter", type=int, default=512, help="each expert's intermediate size")
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--batch", type=int, default=8, help="sequences per rank per step")
    p.add_argument("--seq", type=int, default=512, help="tokens per sequence")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--lr-warmup", type=int, default=20,
                   help="steps of linear learning-rate warm-up (without it the loss spikes at step 3 and two bf16 "
                        "runs of the same model separate by up to 11%% for a while)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ep", type=int, default=None, help="expert-parallel size of the hpmoe run (default: all ranks)")
    p.add_argument("--impls", nargs="+", default=["grouped_mm", "hpmoe"], choices=["grouped_mm", "hpmoe", "eager"])
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--out", type=Path, default=ROOT / "out" / "train_transformers")
    p.add_argument("--cpu-reference", action="store_true",
                   help="run on CPU, fp32, a tiny model, hpmoe replaced by its pure-PyTorch stand-in\n"
                        "(checks this script; its speed means nothing)")
    p.add_argument("--deterministic", action="store_true",
                   help="PyTorch's deterministic kernels for the rest of the model too (hpmoe's op always is),\n"
                        "so that each implementation's curve repeats bit for bit and the two curves differ\n"
                        "only by the MoE op's numerics; slower, and the tokens/s are not the comparison then")
    p.add_argument("--plot", type=Path, metavar="SUMMARY_JSON",
                   help="only draw loss.png next to an earlier summary.json (where matplotlib is missing on the GPU)")
    args = p.parse_args(argv)
    if args.cpu_reference:
        args.layers, args.hidden, args.moe_inter, args.experts, args.topk = 2, 64, 32, 8, 2
        args.batch, args.seq = 2, 32
    if args.steps < 1 or args.warmup < 0:
        p.error(f"--steps must be at least 1 and --warmup at least 0, got {args.steps} and {args.warmup}")
    return args


def corpus() -> torch.Tensor:
    """The repository's text as bytes: README, docs and the Python sources (a few hundred KB)."""
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "scheduler").rglob("*.py"))]
    data = b"\n".join(f.read_bytes() for f in files)
    return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()


def batches(data: torch.Tensor, args, rank: int):
    """The same windows for every implementation: a generator seeded by (seed, rank)."""
    g = torch.Generator().manual_seed(args.seed * 1000 + rank)
    while True:
        starts = torch.randint(0, data.numel() - args.seq - 1, (args.batch,), generator=g)
        yield torch.stack([data[s:s + args.seq] for s in starts])


def model_config(args):
    from transformers import Qwen3MoeConfig
    return Qwen3MoeConfig(vocab_size=256, hidden_size=args.hidden, intermediate_size=2 * args.moe_inter,
                          moe_intermediate_size=args.moe_inter, num_hidden_layers=args.layers,
                          num_attention_heads=max(1, args.hidden // 64), num_key_value_heads=max(1, args.hidden // 256),
                          head_dim=64 if args.hidden >= 64 else args.hidden, num_experts=args.experts,
                          num_experts_per_tok=args.topk, max_position_embeddings=args.seq, norm_topk_prob=True,
                          tie_word_embeddings=False)


def train(args, impl: str, init_state: dict | None, device: torch.device, log=print) -> dict:
    """Train `args.steps` steps with experts implementation `impl`; returns losses (mean over ranks), tokens/s
    and memory. init_state: the weights to start from (None: seeded random init)."""
    import copy

    from torch.nn.parallel import DistributedDataParallel as DDP
    from transformers import AutoModelForCausalLM

    import hpmoe.transformers as ht
    world = dist.get_world_size() if dist.is_initialized() else 1
    rank = dist.get_rank() if dist.is_initialized() else 0
    dtype = torch.float32 if args.cpu_reference else torch.bfloat16
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(copy.deepcopy(model_config(args)), experts_implementation=impl,
                                             dtype=dtype).to(device)
    if init_state is not None:
        model.load_state_dict(init_state)
    shards = None
    if world > 1 and impl == "hpmoe":
        shards = ht.shard_experts(model, args.ep)
        DDP._set_params_and_buffers_to_ignore_for_model(model, shards.param_names)
    trained = DDP(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    warm = max(1, args.lr_warmup)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm))
    data = batches(corpus(), args, rank)
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    losses, t0 = [], None
    interval_start, logged, step_ms = time.perf_counter(), 0, []  # ms a step over each log interval
    for step in range(args.steps):
        if step == min(args.warmup, args.steps - 1):
            sync(device)
            t0, timed = time.perf_counter(), args.steps - step
        ids = next(data).to(device)
        loss = trained(input_ids=ids, labels=ids).loss
        loss.backward()
        if shards is not None:
            shards.reduce_grads()
        if world == 1:  # under EP each rank holds other experts: a local norm would clip replicas differently
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        mean = loss.detach().float()
        if world > 1:
            dist.all_reduce(mean)
        losses.append(mean.item() / world)  # .item() waits for the step: the interval times below are whole steps
        if (step + 1) % args.log_every == 0 or step + 1 == args.steps:
            now = time.perf_counter()
            step_ms.append(1e3 * (now - interval_start) / (step + 1 - logged))
            interval_start, logged = now, step + 1
            log(f"[{impl}] step {step + 1}/{args.steps} loss {losses[-1]:.4f} ({step_ms[-1]:.1f} ms a step)")
    sync(device)
    seconds = time.perf_counter() - t0
    result = {"impl": impl, "losses": losses, "timed_steps": timed, "seconds": seconds,
              "tokens_per_s": timed * args.batch * args.seq * world / seconds, "ep": shards.ep_size if shards else 1,
              "step_ms_per_log_interval": step_ms}
    if impl == "hpmoe":
        # Each layer's receive buckets (EP > 1: a routing that outgrows one runs as passes, then gets a larger one).
        result["bucket_stats"] = [rt.bucket_stats() for rt in ht.runtimes(model)]
        grown = sum(len(b["buckets"]) - len({(k["tokens"], k["transposed"]) for k in b["buckets"]})
                    for b in result["bucket_stats"])
        passes = sum(b["overflows_seen"] for b in result["bucket_stats"])
        generations = sum(b.get("generations", 0) for s in result["bucket_stats"] for b in s["buckets"])
        making = sum(b["group_seconds"] for b in result["bucket_stats"])
        parts: dict = {}
        for b in result["bucket_stats"]:
            for name, sec in b["group_parts"].items():
                parts[name] = parts.get(name, 0.0) + sec
        spent = ", ".join(f"{name} {sec:.2f}" for name, sec in parts.items() if sec > 0)
        log(f"[{impl}] receive buckets: {grown} growths over {len(result['bucket_stats'])} layers, "
            f"{passes} forwards ran as passes, {generations} heap generations made in {making:.2f} s"
            + (f" ({spent})" if spent else ""))
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        # hpmoe's heaps are allocated by its CUDA library, not torch: torch's peak misses them, the device's
        # memory in use (after the run, heaps still held) shows them.
        result["torch_peak_allocated_gib"] = torch.cuda.max_memory_allocated(device) / 2 ** 30
        result["device_in_use_after_gib"] = (total - free) / 2 ** 30
    del trained, model, opt
    return result


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plot(summary: dict, path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in summary["runs"]:
        name = run["impl"] + (" (CPU stand-in)" if run["impl"] == "hpmoe" and summary["device"] == "cpu" else "")
        label = f"{name}: {run['tokens_per_s']:,.0f} tokens/s"
        if "torch_peak_allocated_gib" in run:
            label += f", torch peak {run['torch_peak_allocated_gib']:.1f} GiB"
        ax.plot(range(1, len(run["losses"]) + 1), run["losses"], label=label, linewidth=1,
                linestyle="--" if run["impl"] == "hpmoe" else "-")  # dashed: the curves may overlap exactly
    a = summary["args"]
    ax.set(xlabel="step", ylabel="loss (mean over ranks)", title=f"Qwen3-MoE {a['layers']} layers, h {a['hidden']}, "
           f"{a['experts']} experts top-{a['topk']}, {summary['world']} rank(s), {summary['device']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return True


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.plot:
        summary = json.loads(args.plot.read_text())
        target = args.plot.with_name("loss.png")
        if not plot(summary, target):
            print("error: matplotlib is not installed", file=sys.stderr)
            return 2
        print(f"wrote {target}")
        return 0
    if "WORLD_SIZE" in os.environ and int(os.environ["WORLD_SIZE"]) > 1:
        dist.init_process_group("gloo" if args.cpu_reference else "nccl")
    rank = dist.get_rank() if dist.is_initialized() else 0
    if args.cpu_reference:
        from hpmoe.transformers import _reference, experts
        experts.set_ops(_reference)
        device = torch.device("cpu")
    else:
        if not torch.cuda.is_available():
            print("error: no GPU visible to torch (use --cpu-reference to check the script on a CPU)", file=sys.stderr)
            return 2
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
    log = print if rank == 0 else (lambda *_: None)
    if args.deterministic:
        # cuBLAS needs a fixed workspace for repeatable reductions; set before its first use in this process.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        # warn_only=False: with True, cuDNN's attention backward kept its non-deterministic algorithm (one H200,
        # torch 2.11); an op with no deterministic path raises instead of drifting silently.
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    init = {k: v.cpu() for k, v in
            __import__("transformers").AutoModelForCausalLM.from_config(model_config(args)).state_dict().items()}
    runs = []
    for impl in args.impls:
        world = dist.get_world_size() if dist.is_initialized() else 1
        log(f"== {impl}: {args.steps} steps, {args.batch} x {args.seq} tokens per rank per step, {world} rank(s)")
        runs.append(train(args, impl, init, device, log))
        r = runs[-1]
        mem = (f", torch peak {r['torch_peak_allocated_gib']:.2f} GiB, device in use {r['device_in_use_after_gib']:.2f} GiB"
               if "torch_peak_allocated_gib" in r else "")
        log(f"== {impl}: final loss {r['losses'][-1]:.4f}, {r['tokens_per_s']:,.0f} tokens/s{mem}")
    if rank == 0:
        args.out.mkdir(parents=True, exist_ok=True)
        summary = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
                   "world": dist.get_world_size() if dist.is_initialized() else 1,
                   "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu", "runs": runs}
        if len(runs) == 2:
            a, b = runs[0]["losses"], runs[1]["losses"]
            summary["max_rel_loss_diff"] = max(abs(x - y) / abs(x) for x, y in zip(a, b))
            summary["speed_ratio"] = runs[1]["tokens_per_s"] / runs[0]["tokens_per_s"]
            log(f"loss curves: max relative difference {summary['max_rel_loss_diff']:.2e}; "
                f"{runs[1]['impl']} / {runs[0]['impl']} tokens/s = {summary['speed_ratio']:.3f}")
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
        drawn = plot(summary, args.out / "loss.png")
        log(f"wrote {args.out / 'summary.json'}" + (f" and {args.out / 'loss.png'}" if drawn else
            f" (matplotlib missing: run `python {Path(__file__).name} --plot {args.out / 'summary.json'}` elsewhere)"))
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# The multi-GPU session in one command (4 GPUs of one host): build, GPU tests (EP 2 and 4 on separate GPUs,
# P2P), EP 1 benchmark, then hpmoe EP 4 and the PyTorch NCCL path at EP 4 side by side, kernels and the user's
# step (cuda_ep_user_step.py). Logs under $OUT.
# EP1_TOKENS picks the EP 1 sizes (default 4096 8192); EP2=0 skips the EP 2 pair; EP=2 runs the EP 4 pair at
# EP 2 instead (a 2-GPU machine). VARIANTS picks the hpmoe schedules (benchmarks/cuda_variants.py; default:
# the torch module's default, the mixed deal and the paper's split).
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cuda_ep
{ nvidia-smi -L; nvidia-smi topo -m; date -u; } 2>&1 | tee "$out/device.log"
# A library built on the workstation (carried in build/op_host/cuda) is used when it loads; else build here.
if ! python3 -c "import ctypes; ctypes.CDLL('build/op_host/cuda/libhpmoe_cuda.so')" 2>> "$out/build.log"; then
  ./op_host/cuda/build_lib.sh "$root/build/op_host/cuda" >> "$out/build.log" 2>&1
fi
timeout 240 python3 -m pytest -q -ra tests/cuda 2>&1 | tail -8 | tee "$out/pytest.log"
tokens="${TOKENS:-4096 8192}"
variants="${VARIANTS:-pipelines+pool:128+4 mixed+pool split}"
ep="${EP:-4}"
for lib in build/op_host/cuda; do
  echo "== EP1 $lib" | tee -a "$out/bench_ep1.log"
  HPMOE_CUDA_LIB=$lib/libhpmoe_cuda.so timeout 200 python3 benchmarks/cuda_bench.py --tokens ${EP1_TOKENS:-4096 8192} \
    --routing balanced --repeat 3 --variants $variants 2>&1 | tee -a "$out/bench_ep1.log"
done
timeout 300 python3 benchmarks/cuda_ep_bench.py --ep $ep --tokens $tokens --trace "$out/trace_ep4.json" \
  --routing balanced skewed --variants $variants 2>&1 | tee "$out/bench_ep4.log"
timeout 300 torchrun --nproc_per_node $ep benchmarks/cuda_ep_torch.py --tokens $tokens --routing balanced skewed \
  2>&1 | grep -v "^W\|OMP_NUM\|UserWarning\|return func" | tee -a "$out/bench_ep4.log"
gzip -f "$out/trace_ep4.json"
# The user's step (whole MoEFFN call) against the PyTorch NCCL path, side by side (issue 19).
timeout 400 torchrun --nproc_per_node $ep benchmarks/cuda_ep_user_step.py --tokens $tokens --routing balanced skewed \
  2>&1 | grep -v "^W\|OMP_NUM\|UserWarning\|return func" | tee "$out/user_step_ep$ep.log"
[ "${EP2:-1}" = 0 ] && exit 0
timeout 200 python3 benchmarks/cuda_ep_bench.py --ep 2 --tokens 8192 --routing balanced --variants $variants 2>&1 \
  | tee "$out/bench_ep2.log"
CUDA_VISIBLE_DEVICES=0,1 timeout 200 torchrun --nproc_per_node 2 benchmarks/cuda_ep_torch.py --tokens 8192 \
  --routing balanced 2>&1 | grep -v "^W\|OMP_NUM\|UserWarning\|return func" | tee -a "$out/bench_ep2.log"

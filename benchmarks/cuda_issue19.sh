#!/usr/bin/env bash
# Issue 19 in one call on a multi-GPU machine (EP = every GPU it has, one process a GPU): (1) the GPU tests that
# run EP on separate GPUs, (2) the user's step at DeepSeek-V3 expert shapes against the PyTorch NCCL path, with
# kernel times, per-GPU TFLOP/s, link GB/s and the communication-free EP 1 bound (cuda_ep_user_step.py), (3) the
# transformers training example, "hpmoe" against "grouped_mm" (loss curves, tokens/s, ms a step per interval,
# bucket growths). Logs, JSON and the loss plot under $OUT (else out/issue19), and all of them in issue19.tgz
# (the device tool brings back only a few files a call).
#   HPMOE_BUILD_DIR=build/NAME [TOKENS="4096 8192"] [MODELS="deepseek-v3 mixtral-8x7b ..."] [REPEAT=3]
#   [STEPS=160 WARMUP=60] benchmarks/cuda_issue19.sh
# MODELS: expert shapes of the user's step (cuda_user_step.SHAPES; default deepseek-v3, issue 19's case).
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" issue19
gpus=$(nvidia-smi -L | wc -l)
{ nvidia-smi -L; nvidia-smi topo -m; date -u; } > "$out/device.txt" 2>&1
echo "$gpus GPUs; library $HPMOE_BUILD_DIR; commit ${HPMOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}"
if [ "$gpus" -lt 2 ]; then
  echo "cuda_issue19.sh: needs 2 or more GPUs (one EP rank a GPU), found $gpus" >&2
  exit 2
fi
quiet='^W[0-9]|OMP_NUM|UserWarning|return func|warnings.warn|Guessing device'
start=$SECONDS
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -ra tests/cuda/test_torch_moeffn.py tests/cuda/test_cuda_backend.py \
  tests/cuda/test_torch_speculative_bucket.py tests/cuda/test_transformers.py -k "not mps" > "$out/pytest.log" 2>&1
echo "== 1. GPU tests (rc $?, $((SECONDS - start)) s)"; tail -4 "$out/pytest.log"
start=$SECONDS
timeout "${STEP_TIMEOUT:-300}" torchrun --nproc_per_node "$gpus" benchmarks/cuda_ep_user_step.py \
  --tokens ${TOKENS:-4096 8192} --model ${MODELS:-deepseek-v3} --routing balanced skewed --repeat "${REPEAT:-3}" 2>&1 | grep -Ev "$quiet" \
  > "$out/user_step.log"
echo "== 2. the user's step at EP $gpus ($((SECONDS - start)) s)"; sed -n '/^# /,$p' "$out/user_step.log"
start=$SECONDS
timeout "${TRAIN_TIMEOUT:-240}" torchrun --nproc_per_node "$gpus" examples/train_transformers.py \
  --steps "${STEPS:-160}" --warmup "${WARMUP:-60}" --log-every 20 --out "$out/train" 2>&1 | grep -Ev "$quiet" \
  > "$out/train.log"
echo "== 3. transformers example at EP $gpus ($((SECONDS - start)) s)"
grep -E "ms a step\)|==|receive buckets|loss curves" "$out/train.log" | tail -24
(cd "$out" && tar czf issue19.tgz device.txt pytest.log user_step.log train.log train 2>/dev/null)

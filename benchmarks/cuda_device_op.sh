#!/usr/bin/env bash
# One GPU session for the PyTorch op (issue 15): the carried CUDA library (else built here), the GPU tests,
# then the user's-step benchmark; logs under $OUT (or out/cuda_op).
#   benchmarks/cuda_device_op.sh [TOKENS...]     (TESTS="tests/cuda/..." to narrow the tests)
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cuda_op
nvidia-smi -L | tee "$out/device.log"
git rev-parse --short HEAD 2>/dev/null | tee -a "$out/device.log"
if ! python3 -c "from hpmoe.cuda.native import gpu_count; assert gpu_count() > 0" 2>>"$out/device.log"; then
  ( time ./op_host/cuda/build_lib.sh "$root/build/op_host/cuda" ) 2>&1 | tee "$out/build.log" || exit 1
fi
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -ra -x ${TESTS:-tests/cuda} 2>&1 | tee "$out/pytest.log"
tokens="${*:-4096 8192}"
timeout "${BENCH_TIMEOUT:-400}" python3 benchmarks/cuda_user_step.py --tokens $tokens --json-out "$out/user_step.json" \
  2>&1 | tee "$out/user_step.log"
# EP 2 and 4 of the op with ranks as processes sharing the GPU: under the CUDA MPS daemon, then stopped.
export CUDA_MPS_PIPE_DIRECTORY=/tmp/hpmoe-mps CUDA_MPS_LOG_DIRECTORY=/tmp/hpmoe-mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
  HPMOE_TEST_MPS=1 timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -ra tests/cuda 2>&1 | tee "$out/pytest_mps.log"
  echo quit | nvidia-cuda-mps-control
fi

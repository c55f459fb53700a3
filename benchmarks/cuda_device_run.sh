#!/usr/bin/env bash
# One GPU session in one command: build the CUDA library, run the GPU tests, a traced `hpmoe run --backend
# cuda`, and the EP 1 benchmark; logs under $OUT (or out/cuda_run). Usage: benchmarks/cuda_device_run.sh [TOKENS...]
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" cuda_run
nvidia-smi -L | tee "$out/device.log"
date -u | tee -a "$out/device.log"
( time ./op_host/cuda/build_lib.sh "$root/build/op_host/cuda" ) 2>&1 | tee "$out/build.log" || exit 1
timeout 300 python3 -m pytest -q -ra tests/cuda 2>&1 | tee "$out/pytest.log"
timeout 120 python3 -m hpmoe.cli run --backend cuda --ep 1 --tokens 512 --hidden 256 --inter 128 \
  --experts-per-rank 4 --topk 4 --tile-m 128 --wgrad-tile 64 --workers-aic 8 --workers-aiv 8 --dtype bf16 \
  --routing skewed --iterations 2 --trace "$out/trace_small.json" 2>&1 | tee "$out/run_small.log"
tokens="${*:-4096 8192}"
timeout 400 python3 benchmarks/cuda_bench.py --tokens $tokens --json-out "$out/bench.json" 2>&1 | tee "$out/bench.log"

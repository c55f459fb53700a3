#!/usr/bin/env bash
# On a lent GPU machine: the tall GMM tile (256 x 192, op_kernel/cuda/block_gemm_tall.cuh) checked against the
# 128 x 256 tile and float64, then both at the power cap (tall_tile_check --sustain, rounds alternating) beside
# cuBLAS (benchmarks/cuda_matmul_sustain.py), with nvidia-smi sampling clock and power throughout. Carry the
# build that holds op_host/cuda/hpmoe_tall_tile_check:
#   HPMOE_BUILD_DIR=build/NAME SECONDS_EACH=8 bash benchmarks/cuda_tall_tile.sh
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" tall_tile
check="$HPMOE_BUILD_DIR/op_host/cuda/hpmoe_tall_tile_check"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 500 \
  > "$out/smi.csv" 2>&1 &
smi=$!
"$check" | tee "$out/check.txt"
"$check" --sustain "${SECONDS_EACH:-8}" | tee "$out/sustain.txt"
python3 benchmarks/cuda_matmul_sustain.py --seconds "${SECONDS_EACH:-8}" | tee "$out/matmul.txt"
python3 benchmarks/cuda_matmul_sustain.py --seconds "${SECONDS_EACH:-8}" --trans-b | tee -a "$out/matmul.txt"
kill "$smi"

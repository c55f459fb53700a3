#!/usr/bin/env bash
# On a lent GPU machine: where the slow shapes' time goes. For each MODEL:TOKENS in $SHAPES: the traced
# kernels and their summary (cuda_shape_trace.py + cuda_trace_summary.py, with $TRACE_ARGS), and the user
# step's kernels and idle gaps for hpmoe and the PyTorch path (cuda_step_kernels.py). Logs and traces in $OUT.
#   SHAPES="mixtral-8x7b:4096 deepseek-v3:1024" benchmarks/cuda_device_shapes.sh
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" shapes
echo "commit ${HPMOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$out/commit.txt"
for shape in ${SHAPES:-mixtral-8x7b:4096 deepseek-v3:1024}; do
  tag="${shape/:/_}${TAG:-}"
  echo "== $shape ${TRACE_ARGS:-}"
  python3 benchmarks/cuda_shape_trace.py "$shape" --out "$out/trace_$tag.json" ${TRACE_ARGS:-} 2>&1 | tail -3
  python3 benchmarks/cuda_trace_summary.py "$out/trace_$tag.json" > "$out/summary_$tag.txt" 2>&1 && gzip -f "$out/trace_$tag.json"
  cat "$out/summary_$tag.txt"
  if [ -z "${NO_STEPS:-}" ]; then
    for path in hpmoe torch; do
      python3 benchmarks/cuda_step_kernels.py --shape "$shape" --path "$path" --steps 3 > "$out/steps_${tag}_$path.log" 2>&1
      echo "-- $path step: $(grep -E 'total GPU time|one step' "$out/steps_${tag}_$path.log" | tr '\n' ' ')"
    done
  fi
done

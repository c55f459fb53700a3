#!/usr/bin/env bash
# On a lent GPU machine: builds of the CUDA library side by side (docs/cuda.md, "What the GMM tiles wait on").
# Runs (1) the cluster launch probe (benchmarks/cuda_cluster_probe.cu: co-residency of 2-block clusters with the
# cooperative attribute, launch costs) and (2) traced kernels (cuda_shape_trace.py + cuda_trace_summary.py) of
# each build in $BUILDS, alternating, per shape in $SHAPES: e.g. the normal build against the timing-only
# HPMOE_EXPERIMENT_HALF_B build (each block loads half of an MN-major B tile, the bound of a 2-CTA multicast)
# or the HPMOE_EXPERIMENT_DW builds (gemm_variant.h). Timing-only builds give wrong results by design.
# Traces run `hpmoe run`'s path (fp32 weight gradients); cuda_user_step.py with HPMOE_BUILD_DIR times the op's.
# $BUILDS names the builds to alternate (default "normal halfb"; any other NAME is build/NAME, e.g. the
# HPMOE_EXPERIMENT_DW builds dw1 dw2 dw3). Needs build/op_host/cuda (normal), build/NAME/op_host/{cuda,cpu} and
# build/op_host/cuda/hpmoe_cluster_probe (PROBE=0 skips it) carried. Everything but the console lands in $out/logs.tar.gz.
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" build_ab
echo "commit ${HPMOE_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}" | tee "$out/commit.txt"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee -a "$out/commit.txt"
if [ "${PROBE:-1}" != 0 ]; then
  echo "== cluster probe"
  "${PROBE_BIN:-build/op_host/cuda/hpmoe_cluster_probe}" 2>&1 | tee "$out/cluster_probe.log"
fi
for shape in ${SHAPES:-mixtral-8x7b:4096 deepseek-v3:8192}; do
  for rep in ${REPS:-1 2}; do
    for build in ${BUILDS:-normal halfb}; do
      dir="$root/build"; [ "$build" = normal ] || dir="$root/build/$build"
      tag="${shape/:/_}_${build}_$rep"
      HPMOE_BUILD_DIR="$dir" python3 benchmarks/cuda_shape_trace.py "$shape" --out "$out/trace_$tag.json" \
        > "$out/run_$tag.log" 2>&1 || { echo "FAILED $tag"; tail -5 "$out/run_$tag.log"; continue; }
      python3 benchmarks/cuda_trace_summary.py "$out/trace_$tag.json" > "$out/summary_$tag.txt" 2>&1
      gzip -f "$out/trace_$tag.json"
      echo "== $tag: $(tail -2 "$out/run_$tag.log" | tr '\n' ' ')"
      grep -E "GMM|span" "$out/summary_$tag.txt" | grep -v "idle\|blocks running"
    done
  done
done
tar -C "$out" -czf /tmp/hpmoe_build_ab_logs.tar.gz . && find "$out" -type f -delete && mv /tmp/hpmoe_build_ab_logs.tar.gz "$out/logs.tar.gz"

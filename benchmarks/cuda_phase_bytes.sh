#!/usr/bin/env bash
# On a lent GPU machine: DRAM and L2 bytes, L2 hit rate and time of the op's forward and backward persistent kernels
# (Nsight Compute, one step of cuda_step_kernels.py after its 3 warm-up steps: launches 7 and 8) for each
# build in $BUILDS, so that timing-only builds attribute bytes to phases (docs/cuda.md, "Per phase and per
# tile"; DRAM and L2 throughput as % of peak beside them): e.g. skip4 = -DHPMOE_EXPERIMENT_SKIP=4 (no
# weight-gradient tiles), skip2 (no GMM_TRANS_B), skip6.
# `normal` is build/op_host/cuda; any other NAME is build/NAME (carry build/NAME/op_host/{cuda,cpu}).
#   BUILDS="normal skip4 skip2 skip6" SHAPES="mixtral-8x7b:4096" [EXTRA="--first-gmm-pool on"] benchmarks/cuda_phase_bytes.sh
# EXTRA_METRICS="a.sum,b.sum" adds metrics (e.g. the L2 fabric's, docs/cuda.md "The two halves of L2").
set -uo pipefail
source "$(dirname "$0")/cuda_session_env.sh" phase_bytes
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed${EXTRA_METRICS:+,$EXTRA_METRICS}
for shape in ${SHAPES:-mixtral-8x7b:4096}; do
  for build in ${BUILDS:-normal skip4 skip2 skip6}; do
    dir="$root/build"; [ "$build" = normal ] || dir="$root/build/$build"
    tag="${shape/:/_}_$build"
    HPMOE_BUILD_DIR="$dir" ncu --metrics "$metrics" -k regex:WorkerKernel --launch-skip 6 --launch-count 2 \
      python3 benchmarks/cuda_step_kernels.py --shape "$shape" --path hpmoe --steps 1 ${EXTRA:-} > "$out/ncu_$tag.txt" 2>&1 ||
      { echo "FAILED $tag"; tail -5 "$out/ncu_$tag.txt"; continue; }
    echo "== $tag (launch 7 = forward, 8 = backward)"
    grep -E "WorkerKernel|gpu__time_duration|dram__bytes|lts__t_|__throughput" "$out/ncu_$tag.txt" |
      sed 's/  */ /g'
  done
done

#!/usr/bin/env bash
# Fails a build whose log (nvcc/ptxas output, $1) says ptxas serialised the worker kernel's wgmma instructions
# (advisory C7514: some code reads accumulator registers mid-pipeline, e.g. at a run-time index; C7515: some
# non-wgmma instruction defines them inside a pipeline stage, e.g. loads ahead of the first wgmma). ptxas
# decides this per function, so one handler slows every GMM tile: it cost 15-20% of the op's kernels for a
# whole session before it was seen (benchmarks/RESULTS.md, session 8). Not a warning, so -Werror misses it.
set -euo pipefail
if grep -qE "C751[45]" "$1"; then
  grep -m1 -E "C751[45]" "$1" >&2
  echo "error: ptxas serialised wgmma (C7514/C7515, above): find the handler that indexes accumulators at run time, reads them before the wgmma wait, or defines them by other instructions in a pipeline stage (docs/cuda.md, GMM tiles)" >&2
  exit 1
fi

# Sourced by the GPU device scripts (`source .../cuda_session_env.sh NAME`): what every launch on a lent GPU
# machine needs, in one place. NVLink multicast stays off in every launch (NCCL, torch symmetric memory,
# NVSHMEM); sets `root` (the repository), `out` ($OUT, else out/NAME, created), PYTHONPATH and HPMOE_BUILD_DIR,
# and changes into the repository.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$root/out/$1}"
mkdir -p "$out"
cd "$root"
# A build named before sourcing (HPMOE_BUILD_DIR=build/NAME, relative to the repository) is kept.
build_dir="${HPMOE_BUILD_DIR:-build}"
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
export PYTHONPATH="$root/scheduler" HPMOE_BUILD_DIR="$build_dir"

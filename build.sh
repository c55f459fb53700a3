#!/usr/bin/env bash
# One entry point for a fresh machine: every command first does all set-up (venv, pinned packages, C++ build).
#   ./build.sh demo    the main job: run MoE-FFN fwd+bwd across EP ranks on the CPU twin and check it against
#                      float64; compile + verify DeepSeek-V3 SSCs; predict their A3 latency (out/demo/)
#   ./build.sh test    the whole test suite (C++ and Python)
#   ./build.sh train   MindSpore example: train a MoE block with hpmoe and the standard path on 4 msrun ranks
#   ./build.sh setup   set-up only
set -euo pipefail
cd "$(dirname "$0")"
ROOT=$PWD
VENV=$ROOT/.venv
BUILD=$ROOT/build
JOBS=${JOBS:-2}

log() { printf '[build.sh] %s\n' "$*" >&2; }

need_apt() {  # install Debian packages that are missing (root on these machines)
  local missing=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

setup() {
  need_apt cmake g++ libgtest-dev libeigen3-dev clang libclang-rt-14-dev
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
  fi
  if ! "$VENV/bin/python" -c "import hpmoe, numpy, pytest" 2>/dev/null || [ requirements.txt -nt "$VENV/.installed" ]; then
    log "installing pinned Python packages"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r requirements.txt
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -e .
    touch "$VENV/.installed"
  fi
  log "building C++ (build/)"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$BUILD" -j "$JOBS" > "$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log" >&2; exit 1; }
  op_host/cuda/refuse_serialised_wgmma.sh "$BUILD/build.log"
  if [ -n "${ASCEND_HOME_PATH:-}" ]; then  # issue 9: the AscendC op package, only where CANN is installed
    log "building the AscendC op package (CANN at $ASCEND_HOME_PATH)"
    op_host/ascend/package/build_package.sh "$BUILD/ascend_op_package"
  else
    log "AscendC op package skipped: ASCEND_HOME_PATH is not set (no CANN toolkit); the kernel was built against the project's stubs (--backend ascendc-cpu)"
  fi
}

demo() {
  local out=$ROOT/out/demo
  rm -rf "$out"
  mkdir -p "$out"
  # One run configuration for every backend (--backend ascendc-cpu needs 2 AIV workers per AIC).
  local job=(--ep 4 --tokens 256 --hidden 384 --inter 192 --experts-per-rank 4 --topk 4 --dtype bf16
             --routing skewed --tile-m 32 --wgrad-tile 64 --token-tile 64 --workers-aic 2 --workers-aiv 4
             --iterations 3)
  log "1/3 run fwd+bwd on 4 EP ranks (processes), check vs float64: the CPU twin, then the AscendC kernel source on CPU stubs"
  "$VENV/bin/hpmoe" run --backend cpu "${job[@]}"
  "$VENV/bin/hpmoe" run --backend ascendc-cpu "${job[@]}"
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    log "1/3 the same on the GPUs (--backend cuda)"
    "$VENV/bin/hpmoe" run --backend cuda --ep 4 --tokens 512 --hidden 256 --inter 128 --experts-per-rank 4 \
      --topk 4 --tile-m 128 --wgrad-tile 64 --workers-aic 8 --workers-aiv 8 --dtype bf16 --routing skewed
  else
    log "1/3 --backend cuda skipped: no NVIDIA GPU on this machine"
  fi
  log "2/3 compile and verify DeepSeek-V3 shapes for an EP4 group"
  "$VENV/bin/hpmoe" compile --preset deepseek-v3 --ep 4 --all-ranks --direction both -o "$out/deepseek-v3-ep4"
  "$VENV/bin/hpmoe" verify "$out"/deepseek-v3-ep4/*.ssc
  log "3/3 Ascend A3 PREDICTION (performance model, no Ascend hardware) for those SSC files"
  "$VENV/bin/hpmoe" simulate --preset deepseek-v3 --ep 4 --ssc "$out/deepseek-v3-ep4" \
    --plot "$out/timeline.png" --trace "$out/trace.json"
}

train() {  # issue 8: TRAIN_STEPS (default 300), outputs in out/train/ (loss.png, summary.json)
  log "MindSpore: train a MoE block on 4 msrun ranks with hpmoe and with the standard path (GRAPH, AdamW)"
  "$VENV/bin/python" examples/train_compare.py --ep 4 --steps "${TRAIN_STEPS:-300}" --out "$ROOT/out/train"
}

run_tests() {
  log "C++ tests (ctest)"
  (cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
  # Runtime (issue 3): the C++ tests again under ASan + UBSan, the CPU twin's Python tests against the
  # sanitized library, and a short libFuzzer run over the SSC loader.
  local san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
  log "C++ tests under AddressSanitizer + UndefinedBehaviorSanitizer (build/_asan)"
  cmake -S . -B "$BUILD/_asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" >/dev/null
  cmake --build "$BUILD/_asan" -j "$JOBS" >/dev/null
  (cd "$BUILD/_asan" && ctest --output-on-failure -j "$JOBS")
  log "CPU twin runtime tests against the sanitized library"
  HPMOE_CPU_LIB=$BUILD/_asan/op_host/cpu/libhpmoe_cpu.so ASAN_OPTIONS=detect_leaks=0 \
    LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/runtime/test_runtime_twin_numerics.py \
    tests/runtime/test_runtime_robustness.py tests/runtime/test_runtime_processes.py \
    tests/runtime/test_act_split_twin.py
  log "AscendC kernel on the stubs (--backend ascendc-cpu) against the sanitized libraries"
  HPMOE_CPU_LIB=$BUILD/_asan/op_host/cpu/libhpmoe_cpu.so \
    HPMOE_ASCENDC_CPU_LIB=$BUILD/_asan/op_host/ascend/libhpmoe_ascendc_cpu.so ASAN_OPTIONS=detect_leaks=0 \
    LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)" \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/ascend/test_ascend_numerics.py \
    tests/ascend/test_ascend_protocol.py tests/ascend/test_ascend_robustness.py
  log "libFuzzer: the SSC loader, then loader + validator + execution (build/_libfuzzer, ${FUZZ_SECONDS:-20} s each)"
  cmake -S . -B "$BUILD/_libfuzzer" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DHPMOE_FUZZ=ON >/dev/null
  cmake --build "$BUILD/_libfuzzer" -j "$JOBS" --target ssc_loader_fuzz ssc_exec_fuzz >/dev/null
  local corpus
  for target in ssc_loader_fuzz ssc_exec_fuzz; do
    corpus=$(mktemp -d)
    if [ $target = ssc_loader_fuzz ]; then cp tests/golden/*.ssc "$corpus"/; else cp fuzz/corpus/exec/* "$corpus"/; fi
    "$BUILD/_libfuzzer/fuzz/$target" -max_total_time="${FUZZ_SECONDS:-20}" -print_final_stats=1 \
      -artifact_prefix="$BUILD/_libfuzzer/$target-" "$corpus" 2>&1 | \
      grep -E "^(stat::number_of_executed_units|stat::new_units_added|==.*ERROR|SUMMARY)|(INITED|DONE) +cov:"
    rm -rf "$corpus"
  done
  log "Python tests (pytest)"
  HPMOE_BUILD_DIR=$BUILD "$VENV/bin/python" -m pytest -q "$@"
}

cmd=${1:-help}
shift || true
case "$cmd" in
  setup) setup ;;
  demo) setup; demo ;;
  test) setup; run_tests "$@" ;;
  train) setup; train ;;
  *) sed -n '2,7p' "$0"; [ "$cmd" = help ] || exit 2 ;;
esac

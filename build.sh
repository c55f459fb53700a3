#!/usr/bin/env bash
# One entry point for a fresh machine: every command first does all set-up (venv, pinned packages, C++ build).
#   ./build.sh demo    compile SSCs for EP groups, verify them, print summaries (the main job)
#   ./build.sh test    the whole test suite (C++ and Python)
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
  need_apt cmake g++ libgtest-dev libeigen3-dev clang
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
  cmake --build "$BUILD" -j "$JOBS" >/dev/null
}

demo() {
  local out=$ROOT/out/demo
  rm -rf "$out"
  "$VENV/bin/hpmoe" compile --preset deepseek-v3 --ep 4 --all-ranks --direction both -o "$out/deepseek-v3-ep4"
  "$VENV/bin/hpmoe" verify "$out"/deepseek-v3-ep4/*.ssc
  "$VENV/bin/hpmoe" inspect "$out/deepseek-v3-ep4/rank0.bwd.ssc"
}

run_tests() {
  log "C++ tests (ctest)"
  (cd "$BUILD" && ctest --output-on-failure -j "$JOBS")
  log "Python tests (pytest)"
  HPMOE_BUILD_DIR=$BUILD "$VENV/bin/python" -m pytest -q "$@"
}

cmd=${1:-help}
shift || true
case "$cmd" in
  setup) setup ;;
  demo) setup; demo ;;
  test) setup; run_tests "$@" ;;
  *) sed -n '2,6p' "$0"; [ "$cmd" = help ] || exit 2 ;;
esac

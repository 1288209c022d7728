#!/usr/bin/env bash
# The GPU calibration kit in one command: measure the matrix (run.py) on one CUDA GPU, then compare every row
# term by term with the estimate and the step-time model (compare.py). No network: packages the interpreter
# lacks are installed from benchmarks/gpu/local/wheels (prepare.sh) into a temporary folder first.
#
#   benchmarks/gpu/run.sh [--dry-run] [--out DIR] [run.py options: --only TEXT, --budget S, --timeout S]
#
# Writes DIR/calibration.json (the measurements), DIR/compare.md and DIR/compare.json; DIR defaults to
# benchmarks/gpu/local/results. PYTHON=... chooses the interpreter (default python3, the one with torch).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PY="${PYTHON:-python3}"
DRY=()
OUT_DIR="$HERE/local/results"
PASS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=(--dry-run); shift ;;
    --out) OUT_DIR="$2"; shift 2 ;;
    *) PASS+=("$1"); shift ;;
  esac
done
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"

# Install each carried wheel whose module is not importable (a wheel's name is its module's here).
WHEELS="$HERE/local/wheels"
missing=()
if [ -d "$WHEELS" ]; then
  for whl in "$WHEELS"/*.whl; do
    module="$(basename "$whl")"; module="${module%%-*}"
    if ! "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$module') is None)" 2>/dev/null; then
      missing+=("$whl")
    fi
  done
fi
if [ ${#missing[@]} -gt 0 ]; then
  SITE="$(mktemp -d)"
  trap 'rm -rf "$SITE"' EXIT
  "$PY" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${missing[@]}"
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
  echo "run.sh: installed $(printf '%s\n' "${missing[@]}" | xargs -n1 basename | cut -d- -f1 | tr '\n' ' ')into $SITE"
fi
if ! "$PY" -c "import deepspeed" >/dev/null 2>&1; then
  echo "run.sh: DeepSpeed is not importable with $PY; run benchmarks/gpu/prepare.sh where pip reaches PyPI" >&2
  exit 2
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"  # compare.py reads zeroadvisor from this checkout

status=0
"$PY" "$HERE/run.py" "${DRY[@]}" --out "$OUT_DIR/calibration.json" "${PASS[@]}" || status=$?
if [ -f "$OUT_DIR/calibration.json" ]; then
  "$PY" "$HERE/compare.py" "$OUT_DIR/calibration.json" --out "$OUT_DIR/compare"
fi
exit "$status"

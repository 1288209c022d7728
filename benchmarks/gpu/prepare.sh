#!/usr/bin/env bash
# Fill benchmarks/gpu/local/wheels with what the GPU machine lacks, for run.sh to install there with no network:
# DeepSpeed 0.19.8 built here as a pure-Python wheel with no ops (DS_BUILD_OPS=0; PyPI has only its sdist),
# its pure dependencies the machine does not have, and bitsandbytes (QLoRA) slimmed to its CUDA 13 and CPU
# libraries. The folder is ignored by git (.gitignore) and travels with the checkout: it must stay small.
#
#   benchmarks/gpu/prepare.sh                 # PYTHON=... to choose the interpreter (it needs pip and torch)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x "$ROOT/.venv/bin/python" ]; then PY="$ROOT/.venv/bin/python"
else PY="python3"; fi
WHEELS="$HERE/local/wheels"
LIMIT_MIB=48  # the checkout travels in at most 64 MiB, the repository itself included
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

# The GPU machine: CPython 3.12 on x86-64 Linux (the kit's README, "The GPU machine").
TARGET=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
        --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)

# DeepSpeed: no build isolation, so setup.py sees this torch instead of downloading one; no ops are compiled
DS_BUILD_OPS=0 "$PY" -m pip wheel --quiet --no-deps --no-build-isolation --no-cache-dir deepspeed==0.19.8 -w "$TMP"
# DeepSpeed's requirements the machine lacks (its package list has einops, msgpack, ninja, numpy, packaging,
# psutil, py-cpuinfo, torch and tqdm): hjson and pydantic with pydantic's own; versions as pyproject's oracle extra
"$PY" -m pip download --quiet --no-deps "${TARGET[@]}" -d "$TMP" hjson==3.1.0 pydantic==2.14.4 \
  pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
# bitsandbytes: 41 MiB as published (CUDA 11.8-13.2, ROCm and XPU libraries); the machine runs CUDA 13.0
"$PY" -m pip download --quiet --no-deps "${TARGET[@]}" -d "$TMP/bnb" bitsandbytes==0.50.2
"$PY" - "$TMP/bnb" "$TMP" <<'PY'
"""Rewrite the bitsandbytes wheel without the libraries CUDA 13 does not load (and its RECORD without them)."""
import re
import sys
import zipfile
from pathlib import Path

KEEP = re.compile(r"libbitsandbytes_(cpu|cuda13\d)\.so$")
source = next(Path(sys.argv[1]).glob("bitsandbytes-*.whl"))
target = Path(sys.argv[2]) / source.name
with zipfile.ZipFile(source) as zin, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zout:
    dropped = {i.filename for i in zin.infolist() if i.filename.endswith(".so") and not KEEP.search(i.filename)}
    for info in zin.infolist():
        if info.filename in dropped:
            continue
        data = zin.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            lines = data.decode().splitlines()
            data = ("\n".join(line for line in lines if line.split(",")[0] not in dropped) + "\n").encode()
        zout.writestr(info, data)
print(f"bitsandbytes: dropped {len(dropped)} libraries, {source.stat().st_size / 2**20:.1f} MiB -> "
      f"{target.stat().st_size / 2**20:.1f} MiB")
PY
rm -rf "$TMP/bnb"

total=$(du -cb "$TMP"/*.whl | tail -1 | cut -f1)
if [ "$total" -gt $((LIMIT_MIB * 1024 * 1024)) ]; then
  echo "prepare.sh: the wheels take $((total / 1024 / 1024)) MiB, over the ${LIMIT_MIB} MiB that may travel" >&2
  exit 1
fi
rm -rf "$WHEELS"
mkdir -p "$(dirname "$WHEELS")"
mv "$TMP" "$WHEELS"
trap - EXIT
(cd "$WHEELS" && sha256sum ./*.whl > SHA256SUMS)
ls -l "$WHEELS"
echo "prepare.sh: $(ls "$WHEELS"/*.whl | wc -l) wheels, $((total / 1024)) KiB in $WHEELS"

#!/usr/bin/env python
"""The configuration-relevant source of one DeepSpeed release, and its fingerprint, read from files only.

    python tools/ds_release_sources.py DIR...        print "release fingerprint" for each unpacked release

A DIR is a folder holding a ``deepspeed/`` package: an installed release (``--target`` folder), an unpacked
sdist, or the venv's site-packages. Nothing is imported, so this runs on sdists that were never built.

Two releases with the same fingerprint read every config the same way, as far as tools/ds_release_facts.py
can see, so tools/gen_releases.py gathers facts for one of them and records the other as ``same_as`` it. The
fingerprint covers exactly what the facts are made of:

- every file whose name says it holds configuration (``*config*.py``, ``*constants*.py``, ``config_utils.py``,
  ``pydantic_v1.py``, and runtime/compiler.py): the pydantic models and the constants DeepSpeedConfig reads,
  hashed byte for byte
  (inference/v2, ops and model_implementations hold kernel and model settings, not ds_config's);
  ds_release_facts.py records the file of every model it reads and gen_releases.py refuses facts read from
  a file outside this set, so the set cannot silently miss one;
- which top-level keys of the latest schema the release's source names as a string (``TOP_LEVEL``: the
  facts' ``top_level_read``), since runtime/config.py reads the top level with ``dict.get``;
- the outcome of each launch-time check pattern (``LAUNCH_CHECKS``: engine, optimizer and scheduler code,
  which changes in every patch release for reasons unrelated to configs, so only the check's presence counts).
"""

from __future__ import annotations

import ast
import hashlib
import json
import pathlib
import re
import sys
from collections.abc import Iterable

SCHEMA = pathlib.Path(__file__).resolve().parent.parent / "zeroadvisor" / "schemas" / "ds_config.schema.json"
_CONFIG_FILE = re.compile(r"(config|constants)[^/]*\.py$|^pydantic_v1\.py$")
# config models that live in a file named otherwise (0.13.x-0.14.3 define CompileConfig here)
_ALSO = frozenset({"deepspeed/runtime/compiler.py"})
_NOT_DS_CONFIG = ("deepspeed/inference/v2/", "deepspeed/ops/", "deepspeed/model_implementations/")
# hasattr(torch.nn.Module, "compile") names an attribute, not a config key (0.14.5's runtime/compiler.py)
_QUOTED = re.compile(r"""["']([A-Za-z_][A-Za-z0-9_]*)["']""")
_ATTRIBUTE_CALLS = frozenset({"hasattr", "getattr", "setattr", "delattr"})

# Launch-time checks the linter mirrors that the engine, a ZeRO optimizer or a scheduler makes after the config
# is parsed (so no DeepSpeedConfig probe sees them): name -> (file under deepspeed/, a pattern in its source).
LAUNCH_CHECKS = {
    # runtime/lr_schedules.py WarmupLR.__init__: old releases clamp the warm-up to at least 2 steps
    "warmup-steps-clamped": ("runtime/lr_schedules.py", r"max\(2,\s*warmup_num_steps\)"),
    # runtime/engine.py _configure_basic_optimizer (0.17.6-0.18.8): Muon asserts ZeRO stage <= 2
    "muon-zero3-refused": ("runtime/engine.py", r"Muon optimizer is not yet compatible with ZeRO Stage 3"),
    # runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3.__init__ (0.18.9+): Muon with reduce_scatter (default true)
    "muon-reduce-scatter-zero3-refused": ("runtime/zero/stage3.py",
                                          r"use_muon and self\.reduce_scatter:\s*\n\s*raise ValueError"),
    # runtime/zero/stage_1_and_2.py (0.19.3-0.19.7): Muon with reduce_scatter and optimizer offload at ZeRO-1/2
    "muon-reduce-scatter-offload-refused": ("runtime/zero/stage_1_and_2.py",
                                            r"Muon with reduce scatter does not support optimizer offload"),
    # runtime/engine.py _do_sanity_check: managed_gradient_accumulation false with offload (0.19.4), with amp
    "unmanaged-accumulation-offload-refused": (
        "runtime/engine.py", r"managed_gradient_accumulation=False is not supported with ZeRO optimizer state offload"),
    "unmanaged-accumulation-amp-refused": ("runtime/engine.py",
                                           r"managed_gradient_accumulation=False is not supported with Apex AMP"),
}


def is_release(text: str) -> bool:
    """X.Y.Z, digits only (a folder or sdist name that is a final release)."""
    return re.fullmatch(r"\d+\.\d+\.\d+", text) is not None


def venv_root() -> pathlib.Path:
    """The folder holding the running interpreter's deepspeed/ package (found, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("deepspeed")
    if spec is None or spec.origin is None:
        raise SystemExit("no deepspeed package in this environment (pip install -e '.[oracle]')")
    return pathlib.Path(spec.origin).parent.parent


def relevant_files(root: pathlib.Path) -> list[str]:
    """The configuration files of the release under ``root`` (paths relative to it, sorted)."""
    package = root / "deepspeed"
    out = []
    for path in package.rglob("*.py"):
        relative = path.relative_to(root).as_posix()
        if (_CONFIG_FILE.search(path.name) and not relative.startswith(_NOT_DS_CONFIG)) or relative in _ALSO:
            out.append(relative)
    return sorted(out)


def string_literals(source: str) -> set[str]:
    """Identifier-like string constants of one module, except attribute names given to hasattr/getattr/...
    and docstrings: the words the module could read from a config dict."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(_QUOTED.findall(source))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ATTRIBUTE_CALLS
                and len(node.args) >= 2):
            skipped.add(id(node.args[1]))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skipped.add(id(node.value))  # a docstring or a bare string statement
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
            and node.value.isidentifier()}


def top_level_read(root: pathlib.Path, keys: Iterable[str]) -> list[str]:
    """Which of ``keys`` (the latest schema's top-level keys) some module of the release names as a string."""
    wanted, found = set(keys), set()
    for path in sorted((root / "deepspeed").rglob("*.py")):
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        # parse only a file that quotes a key not yet found (most files quote none: parsing all is slow)
        if (wanted - found) & set(_QUOTED.findall(source)):
            found |= wanted & string_literals(source)
    return sorted(found)


def launch_checks(root: pathlib.Path) -> dict[str, bool]:
    out = {}
    for name, (relative, pattern) in LAUNCH_CHECKS.items():
        try:
            text = (root / "deepspeed" / relative).read_text(encoding="utf-8")
        except OSError:
            text = ""
        out[name] = re.search(pattern, text) is not None
    return out


def schema_keys() -> list[str]:
    return list(json.loads(SCHEMA.read_text(encoding="utf-8"))["properties"])


def fingerprint(root: pathlib.Path, keys: Iterable[str] | None = None) -> str:
    """16 hex digits over the configuration files' bytes, the top-level keys named and the launch checks."""
    digest = hashlib.sha256()
    for relative in relevant_files(root):
        digest.update(relative.encode() + b"\0" + (root / relative).read_bytes() + b"\0")
    named = top_level_read(root, schema_keys() if keys is None else keys)
    digest.update(json.dumps([named, launch_checks(root)], sort_keys=True).encode())
    return digest.hexdigest()[:16]


def main(folders: list[str]) -> int:
    keys = schema_keys()
    for folder in folders:
        root = pathlib.Path(folder)
        if not (root / "deepspeed" / "__init__.py").is_file():
            print(f"{folder}: no deepspeed/ package here", file=sys.stderr)
            return 2
        print(root.name, fingerprint(root, keys))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

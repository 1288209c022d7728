#!/usr/bin/env python
"""Generate zeroadvisor/schemas/ds_releases.json: how each DeepSpeed release from 0.9 to 0.19 reads a config.

    python tools/install_deepspeed_release.py 0.9.5 ... 0.19.7     (once; see docs/deepspeed-releases.md)
    python tools/gen_releases.py                 rewrite the file from every installed release
    python tools/gen_releases.py --check         exit 1 if an installed release's entry is out of date

The latest release's schema (ds_config.schema.json, tools/gen_schema.py) stays the one full schema. Each
older release is stored as an RFC 7396 merge patch over it, computed from that release's own facts
(tools/ds_release_facts.py, run under the release: its pydantic models, the top-level keys its source
reads, its defaults, probes of its own DeepSpeedConfig, its launch-time checks), plus the behaviour flags
the rules read (``behaviour``) and, per key, the releases that know it (``history``). The latest release
(the venv's DeepSpeed) is read the same way, so its facts are the baseline every difference is taken from.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pathlib
import subprocess
import sys
from typing import Any

TOOLS = pathlib.Path(__file__).resolve().parent
ROOT = TOOLS.parent
SCHEMA = ROOT / "zeroadvisor" / "schemas" / "ds_config.schema.json"
OUTPUT = ROOT / "zeroadvisor" / "schemas" / "ds_releases.json"
DEFAULT_DIR = ROOT / ".venv" / "deepspeed-releases"
sys.path.insert(0, str(ROOT))

from zeroadvisor.config.merge_patch import apply  # noqa: E402  (needs ROOT on sys.path)

# Probe -> behaviour flag the rules read (zeroadvisor/deepspeed/releases.py Behaviour).
BEHAVIOUR = {
    # pre-0.17 fp16/bf16 are read with dict.get: the string "auto" is truthy there and switches the mode on
    "precision_auto_enables": lambda p: p["fp16-auto"]["accepted"] and p["fp16-auto"]["fp16_enabled"],
    # runtime/precision_config.py _validate_dynamic_loss_scale_params (0.19.3+)
    "fp16_loss_scale_window_checked": lambda p: not p["fp16-loss-scale-window-0"]["accepted"],
    "fp16_min_loss_scale_checked": lambda p: not p["fp16-min-loss-scale-0"]["accepted"],
    # runtime/config.py _do_error_check: gradient_allreduce_op "sum" with ZeRO-3 (0.19.6+)
    "allreduce_sum_zero3_refused": lambda p: not p["allreduce-sum-zero3"]["accepted"],
    # runtime/zero/config.py DeepSpeedZeroConfig validator: offload ratio < 1 only at stage 3 (0.15+)
    "partial_offload_stage_checked": lambda p: not p["partial-offload-stage2"]["accepted"],
}
WARMUP_SCHEDULERS = ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR")


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def facts_of(path: pathlib.Path | None) -> dict[str, Any]:
    """ds_release_facts.py under one release (None: the venv's own DeepSpeed, the latest)."""
    env = {**os.environ}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    done = subprocess.run([sys.executable, str(TOOLS / "ds_release_facts.py")], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{path}: ds_release_facts.py failed:\n{done.stderr[-2000:]}")
    facts: dict[str, Any] = json.loads(done.stdout)
    return facts


def branch(node: dict[str, Any]) -> dict[str, Any]:
    """The non-"auto" alternative of a key's schema, where its type and bounds live."""
    for alternative in node.get("anyOf", ()):
        if isinstance(alternative, dict) and alternative.get("const") != "auto":
            return alternative
    return node


def object_node(schema: dict[str, Any], pointer: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for token in pointer.split("/")[1:]:
        props = (node or {}).get("properties")
        if props is None:
            for alternative in (node or {}).get("anyOf", ()):
                if isinstance(alternative, dict) and "properties" in alternative:
                    props = alternative["properties"]
        node = (props or {}).get(token)
    if node is not None and "properties" not in node:
        for alternative in node.get("anyOf", ()):
            if isinstance(alternative, dict) and "properties" in alternative:
                return alternative
    return node


_BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")


def field_node(fact: dict[str, Any], release: str) -> dict[str, Any]:
    """A property the latest release does not have, as this release declares it."""
    node: dict[str, Any] = {"description": f"Read by DeepSpeed {release}; the latest release does not have it."}
    types = [t for t in fact["types"] if t != "any"]
    if types and "any" not in fact["types"]:
        node["type"] = types[0] if len(types) == 1 else types
    for keyword in ("enum", *_BOUNDS):
        if keyword in fact:
            node[keyword] = fact[keyword]
    if "default" in fact:
        node["default"] = fact["default"]
    return node


def adjust_field(node: dict[str, Any], fact: dict[str, Any], latest: dict[str, Any]) -> None:
    """A property both releases have: the release's default, bounds and enum where they differ."""
    if "default" in fact and fact.get("default") != latest.get("default"):
        node["default"] = fact["default"]
    where = branch(node)
    for keyword in _BOUNDS:
        if fact.get(keyword) != latest.get(keyword):
            if keyword in fact:
                where[keyword] = fact[keyword]
            else:
                where.pop(keyword, None)
    if fact.get("enum") != latest.get("enum") and "enum" in where and "enum" in fact:
        where["enum"] = fact["enum"]


def edit_section(node: dict[str, Any], facts: dict[str, Any], latest: dict[str, Any], release: str) -> None:
    if facts["extra"] == "forbid":
        node["x-unknown-keys"] = "error"
        node["additionalProperties"] = False
    else:
        node["x-unknown-keys"] = "ignored"
        node.pop("additionalProperties", None)
    if facts["pydantic"] == 1:
        node["x-pydantic"] = 1
    props = node.setdefault("properties", {})
    names = {facts["fields"][f].get("alias", f): f for f in facts["fields"]} | {f: f for f in facts["fields"]}
    latest_names = {latest["fields"][f].get("alias", f): f for f in latest["fields"]} | {f: f for f in latest["fields"]}
    for key in list(props):
        sub = props[key]
        if "x-removed" in sub or "x-rejected" in sub or sub.get("x-editor-only"):
            continue
        if key not in names and key in latest_names:  # a field this release's model does not declare
            del props[key]
        elif key in names and key in latest_names:
            adjust_field(sub, facts["fields"][names[key]], latest["fields"][latest_names[key]])
    for name, fact in facts["fields"].items():
        key = fact.get("alias", name)
        if key not in props and name not in props:
            props[key] = field_node(fact, release)


def read_with_get(node: dict[str, Any]) -> None:
    """A section this release reads with dict.get: unknown keys ignored, no pydantic validation or coercion."""
    node["x-unknown-keys"] = "ignored"
    node["x-read-with-get"] = True
    for keyword in ("additionalProperties", "x-deepspeed-class", "allOf", "x-pydantic"):
        node.pop(keyword, None)


def release_schema(latest_schema: dict[str, Any], latest: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    release = facts["release"]
    schema = copy.deepcopy(latest_schema)
    props = schema["properties"]
    for pointer in sorted(latest["sections"], key=lambda p: p.count("/")):
        node = object_node(schema, pointer)
        if node is None:
            continue  # its parent section does not declare it in this release
        if pointer in facts["sections"]:
            edit_section(node, facts["sections"][pointer], latest["sections"][pointer], release)
        elif pointer.count("/") == 1:
            read_with_get(node)
    for key in list(props):
        if key in latest["top_level_read"] and key not in facts["top_level_read"]:
            del props[key]  # no file of this release names it: runtime/config.py never reads it
    for key, node in list(props.items()):
        if "x-removed" in node and facts["probes"].get(f"removed:{key}"):
            props[key] = {"description": f"Read by DeepSpeed {release}; later releases refuse it.",
                          "x-unknown-keys": "ignored", "x-removed-later": node["x-removed"]}
    zero = object_node(schema, "/zero_optimization") or {}
    for key, node in list(zero.get("properties", {}).items()):
        if "x-removed" in node and facts["probes"].get(f"removed:zero_optimization/{key}"):
            zero["properties"][key] = {"description": f"Read by DeepSpeed {release}; later releases refuse it.",
                                       "x-removed-later": node["x-removed"]}
    for key, value in facts["top_level_defaults"].items():
        if key in props and value != latest["top_level_defaults"].get(key) and "default" in props[key]:
            props[key]["default"] = value
    probes = facts["probes"]
    if probes["communication-bfp16"]["accepted"] and not probes["communication-bf16"]["accepted"]:
        node = props["communication_data_type"]  # runtime/config.py get_communication_data_type before 0.14
        words = ["bfp16" if w == "bf16" else w for w in node["x-enum-ci"]]
        node["x-enum-ci"] = words
        node["examples"] = words
        node["pattern"] = "^(?:" + "|".join("".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in w)
                                            for w in words) + ")$"
    if facts["launch_checks"]["warmup-steps-clamped"]:  # runtime/lr_schedules.py: max(2, warmup_num_steps)
        for name in WARMUP_SCHEDULERS:
            param = schema["$defs"]["scheduler_params"].get(name, {}).get("properties", {}).get("warmup_num_steps")
            if param is not None:
                branch(param).pop("exclusiveMinimum", None)
    schema["x-deepspeed-version"] = release
    return schema


def merge_diff(old: Any, new: Any) -> Any:
    """The RFC 7396 merge patch that turns ``old`` into ``new``."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return new
    patch: dict[str, Any] = {}
    for key in old:
        if key not in new:
            patch[key] = None
        elif old[key] != new[key]:
            patch[key] = merge_diff(old[key], new[key])
    for key in new:
        if key not in old:
            patch[key] = new[key]
    return patch


def pointers(node: Any, prefix: str = "", depth: int = 0) -> set[str]:
    out: set[str] = set()
    if not isinstance(node, dict) or depth > 4:
        return out
    for key, sub in (object_node({"properties": {"x": node}}, "/x") or {}).get("properties", {}).items():
        if isinstance(sub, dict) and "x-removed" not in sub:
            out.add(f"{prefix}/{key}")
            out |= pointers(sub, f"{prefix}/{key}", depth + 1)
    return out


def build(directory: pathlib.Path, only: list[str] | None) -> dict[str, Any]:
    latest_schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    latest = facts_of(None)
    if latest["release"] != latest_schema["x-deepspeed-version"]:
        raise SystemExit(f"the venv has DeepSpeed {latest['release']}, the schema is of "
                         f"{latest_schema['x-deepspeed-version']}")
    installed = sorted((p.name for p in directory.iterdir() if (p / "deepspeed").is_dir()), key=version_key)
    releases: dict[str, Any] = {}
    schemas = {latest["release"]: latest_schema}
    for name in installed if only is None else [v for v in installed if v in only]:
        facts = facts_of(directory / name)
        if facts["release"] != name:
            raise SystemExit(f"{directory / name} holds DeepSpeed {facts['release']}")
        schema = release_schema(latest_schema, latest, facts)
        schemas[name] = schema
        releases[name] = {"behaviour": {flag: bool(rule(facts["probes"])) for flag, rule in BEHAVIOUR.items()},
                          "pydantic": facts["pydantic"],
                          "patch": merge_diff(latest_schema, schema)}
        if apply(latest_schema, releases[name]["patch"]) != schema:
            raise SystemExit(f"{name}: the merge patch does not reproduce the release's schema")
    flags = {flag: bool(rule(latest["probes"])) for flag, rule in BEHAVIOUR.items()}
    releases[latest["release"]] = {"behaviour": flags, "pydantic": latest["pydantic"], "patch": {}}
    order = sorted(schemas, key=version_key)
    known = {v: pointers(schemas[v]) for v in order}
    every = set().union(*known.values())
    history = {}
    for pointer in sorted(every):
        having = [v for v in order if pointer in known[v]]
        if len(having) != len(order):
            history[pointer] = having
    return {
        "description": "How each DeepSpeed release reads a config: a merge patch over ds_config.schema.json "
                       "(the latest release), behaviour flags, and which releases know each key.",
        "x-generator": "tools/gen_releases.py (facts: tools/ds_release_facts.py under each release)",
        "latest": latest["release"],
        "releases": {v: releases[v] for v in order},
        "history": history,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases-dir", type=pathlib.Path, default=DEFAULT_DIR)
    parser.add_argument("--check", action="store_true", help="compare the installed releases' entries")
    args = parser.parse_args()
    if not args.check:
        data = build(args.releases_dir, None)
        OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(data['releases'])} releases")
        return 0
    committed = json.loads(OUTPUT.read_text(encoding="utf-8"))
    installed = [p.name for p in args.releases_dir.iterdir() if (p / "deepspeed").is_dir()]
    fresh = build(args.releases_dir, installed)
    stale = [v for v in installed if fresh["releases"].get(v) != committed["releases"].get(v)]
    if stale:
        print(f"out of date for {', '.join(sorted(stale, key=version_key))}: run tools/gen_releases.py")
        return 1
    print(f"up to date for {', '.join(sorted(installed, key=version_key))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

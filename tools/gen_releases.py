#!/usr/bin/env python
"""Generate zeroadvisor/schemas/ds_releases.json: how each DeepSpeed release from 0.9 to 0.19 reads a config.

    python tools/gen_releases.py --sdists DIR --releases-dir DIR...   rewrite the file
    python tools/gen_releases.py --check [--sdists DIR]               exit 1 where it is out of date

Every release with an sdist in --sdists (pip download --no-deps --no-binary :all: deepspeed==X, never built)
is covered. Its source fingerprint (tools/ds_release_sources.py) groups it with the releases whose
configuration code is the same; facts are gathered under one installed release of each group
(tools/install_deepspeed_release.py; the command says which to install) and the others record ``same_as``
it. ``--check`` (CI: tests/oracle/test_release_oracle.py) needs only what is installed: each installed
release's fingerprint must be the recorded one and its facts must give its committed entry, and every
``same_as`` must join releases of one recorded fingerprint; with --sdists it also recomputes every
recorded fingerprint from the sdists.

The latest release's schema (ds_config.schema.json, tools/gen_schema.py) stays the one full schema. Each
older entry is stored as an RFC 7396 merge patch over the schema of the next newer entry, computed from
that release's own facts (tools/ds_release_facts.py, run under the release: its pydantic models, the
top-level keys its source reads, its defaults, probes of its own DeepSpeedConfig, its launch-time checks),
plus the behaviour flags the rules read (``behaviour``) and, per key, the releases that know it
(``history``). The latest release (the venv's DeepSpeed) is read the same way, so its facts are the
baseline every difference is taken from.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import tempfile
from typing import Any

TOOLS = pathlib.Path(__file__).resolve().parent
ROOT = TOOLS.parent
SCHEMA = ROOT / "zeroadvisor" / "schemas" / "ds_config.schema.json"
OUTPUT = ROOT / "zeroadvisor" / "schemas" / "ds_releases.json"
DEFAULT_DIR = ROOT / ".venv" / "deepspeed-releases"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(TOOLS))

import ds_release_sources  # noqa: E402  (needs TOOLS on sys.path)
from zeroadvisor.config.merge_patch import apply  # noqa: E402  (needs ROOT on sys.path)

# Facts -> behaviour flag the rules read (zeroadvisor/deepspeed/releases.py Behaviour): probes of the release's
# DeepSpeedConfig, and launch-time checks found in its source (tools/ds_release_sources.py LAUNCH_CHECKS).
BEHAVIOUR = {
    # pre-0.17 fp16/bf16 are read with dict.get: the string "auto" is truthy there and switches the mode on
    "precision_auto_enables": lambda f: f["probes"]["fp16-auto"]["accepted"]
    and f["probes"]["fp16-auto"]["fp16_enabled"],
    # runtime/precision_config.py _validate_dynamic_loss_scale_params (0.19.3+)
    "fp16_loss_scale_window_checked": lambda f: not f["probes"]["fp16-loss-scale-window-0"]["accepted"],
    "fp16_min_loss_scale_checked": lambda f: not f["probes"]["fp16-min-loss-scale-0"]["accepted"],
    # runtime/config.py _do_error_check: gradient_allreduce_op "sum" with ZeRO-3 (0.19.6+)
    "allreduce_sum_zero3_refused": lambda f: not f["probes"]["allreduce-sum-zero3"]["accepted"],
    # runtime/zero/config.py DeepSpeedZeroConfig validator: offload ratio < 1 only at stage 3 (0.15+)
    "partial_offload_stage_checked": lambda f: not f["probes"]["partial-offload-stage2"]["accepted"],
    # runtime/engine.py: the Muon optimizer asserts ZeRO stage <= 2 (0.17.6-0.18.8)
    "muon_zero3_refused": lambda f: f["launch_checks"]["muon-zero3-refused"],
    # runtime/zero/stage3.py: Muon with zero_optimization.reduce_scatter (default true) at ZeRO-3 (0.18.9+)
    "muon_reduce_scatter_zero3_refused": lambda f: f["launch_checks"]["muon-reduce-scatter-zero3-refused"],
    # runtime/zero/stage_1_and_2.py: Muon with reduce_scatter and optimizer offload at ZeRO-1/2 (0.19.3-0.19.7)
    "muon_reduce_scatter_offload_refused": lambda f: f["launch_checks"]["muon-reduce-scatter-offload-refused"],
    # runtime/engine.py _do_sanity_check: managed_gradient_accumulation false with ZeRO offload (0.19.4), amp
    "unmanaged_accumulation_offload_refused": lambda f: f["launch_checks"]["unmanaged-accumulation-offload-refused"],
    "unmanaged_accumulation_amp_refused": lambda f: f["launch_checks"]["unmanaged-accumulation-amp-refused"],
}
WARMUP_SCHEDULERS = ("WarmupLR", "WarmupDecayLR", "WarmupCosineLR")


def version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


FACTS_CACHE: dict[str, pathlib.Path] = {}  # "dir" (--facts-cache): facts kept across runs, keyed by their sources


def _cache_file(path: pathlib.Path | None) -> pathlib.Path | None:
    if "dir" not in FACTS_CACHE:
        return None
    digest = hashlib.sha256()
    for tool in ("ds_release_facts.py", "ds_release_sources.py", "ds_release_oracle.py"):
        digest.update((TOOLS / tool).read_bytes())
    digest.update(SCHEMA.read_bytes())
    root = path if path is not None else ds_release_sources.venv_root()
    return FACTS_CACHE["dir"] / f"{root.name}-{ds_release_sources.fingerprint(root)}-{digest.hexdigest()[:12]}.json"


def facts_of(path: pathlib.Path | None) -> dict[str, Any]:
    """ds_release_facts.py under one release (None: the venv's own DeepSpeed, the latest)."""
    cached = _cache_file(path)
    if cached is not None and cached.is_file():
        kept: dict[str, Any] = json.loads(cached.read_text(encoding="utf-8"))
        return kept
    env = {**os.environ}
    if path is not None:
        env["PYTHONPATH"] = str(path)
    done = subprocess.run([sys.executable, str(TOOLS / "ds_release_facts.py")], env=env, capture_output=True,
                          text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{path}: ds_release_facts.py failed:\n{done.stderr[-2000:]}")
    facts: dict[str, Any] = json.loads(done.stdout)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(done.stdout, encoding="utf-8")
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


def field_node(fact: dict[str, Any]) -> dict[str, Any]:
    """A property the latest release does not have, as this release declares it."""
    node: dict[str, Any] = {"description": "Read by this release; the latest release does not have it."}
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


def edit_section(node: dict[str, Any], facts: dict[str, Any], latest: dict[str, Any]) -> None:
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
            props[key] = field_node(fact)


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
            edit_section(node, facts["sections"][pointer], latest["sections"][pointer])
        elif pointer.count("/") == 1:
            read_with_get(node)
    for key in list(props):
        if key in latest["top_level_read"] and key not in facts["top_level_read"]:
            del props[key]  # no file of this release names it: runtime/config.py never reads it
    for key, node in list(props.items()):
        if "x-removed" in node and facts["probes"].get(f"removed:{key}"):
            props[key] = {"description": "Read by this release; later releases refuse it.",
                          "x-unknown-keys": "ignored", "x-removed-later": node["x-removed"]}
    zero = object_node(schema, "/zero_optimization") or {}
    for key, node in list(zero.get("properties", {}).items()):
        if "x-removed" in node and facts["probes"].get(f"removed:zero_optimization/{key}"):
            zero["properties"][key] = {"description": "Read by this release; later releases refuse it.",
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


def fingerprints_of_sdists(folder: pathlib.Path) -> dict[str, str]:
    """Release -> source fingerprint, for every deepspeed-X.Y.Z.tar.gz in ``folder`` (only the .py files of its
    deepspeed/ package are unpacked, to a temporary folder; nothing is built or imported)."""
    out = {}
    for archive in sorted(folder.glob("deepspeed-*.tar.gz")):
        release = archive.name[len("deepspeed-"):-len(".tar.gz")]
        if not ds_release_sources.is_release(release):
            continue
        with tempfile.TemporaryDirectory() as temporary, tarfile.open(archive) as tar:
            members = []
            for member in tar.getmembers():
                parts = member.name.split("/", 1)
                if member.isfile() and len(parts) == 2 and parts[1].startswith("deepspeed/") and \
                        member.name.endswith(".py"):
                    member.name = parts[1]
                    members.append(member)
            tar.extractall(temporary, members=members, filter="data")
            out[release] = ds_release_sources.fingerprint(pathlib.Path(temporary))
    return out


def installed_releases(directories: list[pathlib.Path]) -> dict[str, pathlib.Path]:
    """Release -> its folder (the first of ``directories`` that holds it)."""
    out: dict[str, pathlib.Path] = {}
    for directory in directories:
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            if (path / "deepspeed" / "__init__.py").is_file() and ds_release_sources.is_release(path.name):
                out.setdefault(path.name, path)
    return out


def checked_facts(path: pathlib.Path | None) -> dict[str, Any]:
    """facts_of, refusing facts read from a file the source fingerprint does not cover (the fingerprint would
    then not prove that releases sharing it read configs the same way)."""
    facts = facts_of(path)
    root = path if path is not None else pathlib.Path(ds_release_sources.venv_root())
    covered = set(ds_release_sources.relevant_files(root))
    outside = [f for f in facts.pop("model_files") if f not in covered]
    if outside:
        raise SystemExit(f"{facts['release']}: facts read from {', '.join(outside)}, which "
                         "tools/ds_release_sources.py does not fingerprint: extend relevant_files")
    return facts


def entry_of(facts: dict[str, Any], schema: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """One release's entry: behaviour flags and its schema as a merge patch over ``base`` (the schema of the next
    newer entry: neighbours differ in a few keys, so the chain is far smaller than patches over the latest)."""
    behaviour = {flag: bool(rule(facts)) for flag, rule in BEHAVIOUR.items()}
    return {"behaviour": behaviour, "pydantic": facts["pydantic"], "patch": merge_diff(base, schema)}


def spans(having: list[str], order: list[str]) -> str:
    """Releases as runs of consecutive ``order`` entries: "0.10.0-0.13.1, 0.16.6-0.19.8"."""
    runs: list[list[str]] = []
    for version in having:
        if runs and order.index(version) == order.index(runs[-1][-1]) + 1:
            runs[-1].append(version)
        else:
            runs.append([version])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def build(directories: list[pathlib.Path], sources: dict[str, str]) -> dict[str, Any]:
    """The whole file: every release in ``sources`` (release -> fingerprint), facts gathered under one installed
    release of each fingerprint (the venv's DeepSpeed for the latest)."""
    latest_schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    latest = checked_facts(None)
    if latest["release"] != latest_schema["x-deepspeed-version"]:
        raise SystemExit(f"the venv has DeepSpeed {latest['release']}, the schema is of "
                         f"{latest_schema['x-deepspeed-version']}")
    sources = {**sources, latest["release"]: ds_release_sources.fingerprint(ds_release_sources.venv_root())}
    installed = installed_releases(directories)
    order = sorted(sources, key=version_key)
    groups: dict[str, list[str]] = {}
    for version in order:
        groups.setdefault(sources[version], []).append(version)
    stand_for: dict[str, str] = {}  # fingerprint -> the release whose facts it gets
    for fingerprint, members in groups.items():
        if latest["release"] in members:
            stand_for[fingerprint] = latest["release"]
            continue
        having = [v for v in members if v in installed]
        if not having:
            raise SystemExit(f"no release of {', '.join(members)} is installed: "
                             f"python tools/install_deepspeed_release.py {members[-1]} --into DIR")
        stand_for[fingerprint] = having[-1]
    for version, path in installed.items():
        if version in sources and ds_release_sources.fingerprint(path) != sources[version]:
            raise SystemExit(f"{path}: its source differs from DeepSpeed {version}'s sdist")
    entries: dict[str, Any] = {latest["release"]: {"behaviour": {f: bool(r(latest)) for f, r in BEHAVIOUR.items()},
                                                   "pydantic": latest["pydantic"], "patch": {}}}
    schemas = {latest["release"]: latest_schema}
    newer = latest["release"]
    for version in sorted(set(stand_for.values()) - {latest["release"]}, key=version_key, reverse=True):
        facts = checked_facts(installed[version])
        if facts["release"] != version:
            raise SystemExit(f"{installed[version]} holds DeepSpeed {facts['release']}")
        schemas[version] = release_schema(latest_schema, latest, facts)
        entries[version] = {**entry_of(facts, schemas[version], schemas[newer]), "base": newer}
        if apply(schemas[newer], entries[version]["patch"]) != schemas[version]:
            raise SystemExit(f"{version}: the merge patch does not reproduce the release's schema")
        newer = version
    releases: dict[str, Any] = {}
    for version in order:
        holder = stand_for[sources[version]]
        releases[version] = {"source": sources[version], **(entries[holder] if holder == version
                                                              else {"same_as": holder})}
    known = {v: pointers(schemas[stand_for[sources[v]]]) for v in order}
    every = set().union(*known.values())
    history = {}
    for pointer in sorted(every):
        having = [v for v in order if pointer in known[v]]
        if len(having) != len(order):
            history[pointer] = spans(having, order)
    return {
        "description": "How each DeepSpeed release reads a config: per release its source fingerprint "
                       "(tools/ds_release_sources.py) and either the release with the same configuration code "
                       "(same_as) or behaviour flags and a merge patch over the schema of the next newer entry "
                       "(base; none: ds_config.schema.json, the latest release); and which releases know each key.",
        "x-generator": "tools/gen_releases.py (facts: tools/ds_release_facts.py under one release per fingerprint)",
        "latest": latest["release"],
        "releases": releases,
        "history": history,
    }


def committed_schema(data: dict[str, Any], version: str, latest_schema: dict[str, Any]) -> dict[str, Any]:
    entry = data["releases"][version]
    if "same_as" in entry:
        return committed_schema(data, entry["same_as"], latest_schema)
    base = latest_schema if "base" not in entry else committed_schema(data, entry["base"], latest_schema)
    patched: dict[str, Any] = apply(base, entry["patch"])
    return patched


def check(directories: list[pathlib.Path], sdists: pathlib.Path | None, output: pathlib.Path = OUTPUT) -> list[str]:
    """What is out of date, in words: a recorded fingerprint that the release's files (installed, or its sdist
    where given) no longer give, a same_as between different fingerprints, an installed release whose facts
    now give another schema or other behaviour flags than its committed entry."""
    data = json.loads(output.read_text(encoding="utf-8"))
    releases = data["releases"]
    problems = []
    for version, entry in releases.items():
        holder = entry.get("same_as")
        if holder is not None and (holder not in releases or "same_as" in releases[holder]
                                   or releases[holder]["source"] != entry["source"]):
            problems.append(f"{version}: same_as {holder}, whose source fingerprint differs or that has no entry")
    if sdists is not None:
        for version, fingerprint in fingerprints_of_sdists(sdists).items():
            if version in releases and releases[version]["source"] != fingerprint:
                problems.append(f"{version}: its sdist's source fingerprint is {fingerprint}, "
                                f"{releases[version]['source']} is recorded")
    installed = sorted(installed_releases(directories).items(), key=lambda item: version_key(item[0]))
    latest_schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    latest = facts_of(None) if installed else {}
    for version, path in installed:
        if version not in releases:
            problems.append(f"{version}: installed, but the data has no entry for it")
            continue
        if ds_release_sources.fingerprint(path) != releases[version]["source"]:
            problems.append(f"{version}: its source fingerprint is not the recorded "
                            f"{releases[version]['source']} (tools/ds_release_sources.py {path})")
        facts = checked_facts(path)
        holder = releases[version].get("same_as", version)
        if release_schema(latest_schema, latest, facts) | {"x-deepspeed-version": holder} != \
                committed_schema(data, version, latest_schema):
            problems.append(f"{version}: its schema is out of date")
        if {f: bool(r(facts)) for f, r in BEHAVIOUR.items()} != releases[holder]["behaviour"]:
            problems.append(f"{version}: its behaviour flags are out of date")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases-dir", type=pathlib.Path, action="append",
                        help=f"a folder of installed releases (repeatable; default {DEFAULT_DIR})")
    parser.add_argument("--sdists", type=pathlib.Path,
                        help="a folder of deepspeed-X.Y.Z.tar.gz: the releases to cover, by their source")
    parser.add_argument("--check", action="store_true", help="compare the committed data with the installed "
                        "releases (and the sdists, where given); exit 1 where it is out of date")
    parser.add_argument("--facts-cache", type=pathlib.Path,
                        help="keep each release's facts here and reuse them while nothing they come from changed")
    args = parser.parse_args()
    if args.facts_cache is not None:
        FACTS_CACHE["dir"] = args.facts_cache
    directories = args.releases_dir or [DEFAULT_DIR]
    if args.check:
        problems = check(directories, args.sdists)
        for problem in problems:
            print(problem)
        if problems:
            print("run tools/gen_releases.py (docs/deepspeed-releases.md says how)")
            return 1
        print(f"up to date for {', '.join(sorted(installed_releases(directories), key=version_key))}")
        return 0
    if args.sdists is None:
        parser.error("--sdists DIR: the releases to cover (pip download --no-deps --no-binary :all: deepspeed==X)")
    data = build(directories, fingerprints_of_sdists(args.sdists))
    OUTPUT.write_text(json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {len(data['releases'])} releases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""What one installed DeepSpeed release reads from a config, as JSON facts (run once per release).

    PYTHONPATH=.venv/deepspeed-releases/0.14.5 python tools/ds_release_facts.py > facts-0.14.5.json

tools/gen_releases.py runs this under every release (tools/install_deepspeed_release.py installs them)
and turns the facts into zeroadvisor/schemas/ds_releases.json. The sections come from the committed
schema of the latest release (its ``x-deepspeed-class`` pointers): for each, the release's own pydantic
model of that name, if it has one, read field by field (pydantic 1 ``__fields__`` or pydantic 2
``model_fields``: names, aliases, annotations, defaults, ge/gt/le/lt, deprecations, extra=forbid);
a section with no model is read with ``dict.get`` by that release. Then:

- which of the latest schema's top-level keys the release's source names as a string, other than as an
  attribute name or a docstring (a key no file of the release spells is silently ignored by it:
  runtime/config.py reads the top level with ``dict.get``; tools/ds_release_sources.py);
- the release's top-level defaults (``<KEY>_DEFAULT`` in runtime/constants.py and friends);
- probes: small configs read by the release's own ``DeepSpeedConfig`` for what code alone does not
  show (a removed section refused; "auto" in a dict.get precision section counting as true; pydantic's
  coercion of "1", 1.5 and "yes"; the launch-time checks tools/gen_releases.py lists);
- launch-time checks of the engine and the ZeRO optimizers, by their patterns in the source
  (tools/ds_release_sources.py LAUNCH_CHECKS), and the files every model read comes from.
"""

from __future__ import annotations

import contextlib
import enum
import importlib
import io
import json
import logging
import math
import pathlib
import sys
import types
import typing
import warnings
from typing import Any

TOOLS = pathlib.Path(__file__).resolve().parent
SCHEMA = TOOLS.parent / "zeroadvisor" / "schemas" / "ds_config.schema.json"
sys.path.insert(0, str(TOOLS))

import ds_release_oracle  # noqa: E402  (needs TOOLS on sys.path)
import ds_release_sources  # noqa: E402

MISSING = object()


def pydantic_major(model: type) -> int:
    return 2 if hasattr(model, "model_fields") else 1


def to_json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    return str(value)  # torch.dtype, paths: as DeepSpeed serializes them


def annotation_types(ann: Any) -> tuple[list[str], list[Any] | None, type | None]:
    """(JSON types, enum values or None, nested model class or None) of an annotation."""
    if ann is None or ann is type(None):
        return ["null"], None, None
    if ann is typing.Any or ann is object:
        return ["any"], None, None
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return annotation_types(args[0])
    if origin in (typing.Union, types.UnionType):
        found: list[str] = []
        values: list[Any] = []
        model = None
        enums = True
        for arg in args:
            t, e, m = annotation_types(arg)
            found += t
            model = model or m
            if e is None and t != ["null"]:
                enums = False
            values += e or []
        return list(dict.fromkeys(found)), (values if enums and values else None), model
    if origin is typing.Literal:
        return sorted({_json_type(to_json(a)) for a in args}), [to_json(a) for a in args], None
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        values = [to_json(m.value) for m in ann]
        return sorted({_json_type(v) for v in values}), values, None
    if isinstance(ann, type) and _is_model(ann):
        return ["object"], None, ann
    for py, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"),
                     (pathlib.PurePath, "string")):
        if isinstance(ann, type) and issubclass(ann, py):
            return [name], None, None
    if ann in (list, tuple) or origin in (list, tuple):
        return ["array"], None, None
    if ann is dict or origin is dict:
        return ["object"], None, None
    if type(ann).__name__ == "dtype":
        return ["string"], None, None
    return ["any"], None, None


def _is_model(cls: type) -> bool:
    """A pydantic model class, of either major version (without touching v2's deprecated ``__fields__``)."""
    return any(klass.__name__ == "BaseModel" and klass.__module__.startswith("pydantic") for klass in cls.__mro__)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else "any"


_BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def model_facts(model: type) -> dict[str, Any]:
    """The fields of one pydantic model class, as the release declares them."""
    major = pydantic_major(model)
    fields: dict[str, Any] = {}
    nested: dict[str, type] = {}
    if major == 2:
        extra = (model.model_config or {}).get("extra")  # type: ignore[attr-defined]
        for name, info in model.model_fields.items():  # type: ignore[attr-defined]
            typ, values, sub = annotation_types(info.annotation)
            fact: dict[str, Any] = {"types": typ}
            if values is not None:
                fact["enum"] = values
            if info.alias and info.alias != name:
                fact["alias"] = info.alias
            for meta in info.metadata:
                for attr, keyword in _BOUNDS.items():
                    if getattr(meta, attr, None) is not None:
                        fact[keyword] = to_json(getattr(meta, attr))
            if info.default_factory is not None:
                with contextlib.suppress(Exception):
                    fact["default"] = to_json(_dump(info.default_factory()))
            elif not info.is_required():
                fact["default"] = to_json(_dump(info.default))
            extra_schema = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            if extra_schema.get("deprecated"):
                fact["deprecated"] = True
                if extra_schema.get("new_param"):
                    fact["new_param"] = extra_schema["new_param"]
            fields[name] = fact
            if sub is not None:
                nested[name] = sub
    else:
        config = getattr(model, "__config__", None)
        extra = getattr(getattr(config, "extra", None), "value", getattr(config, "extra", None))
        for name, field in model.__fields__.items():  # type: ignore[attr-defined]
            typ, values, sub = annotation_types(field.outer_type_)
            if field.allow_none and "null" not in typ:
                typ = [*typ, "null"]
            fact = {"types": typ}
            if values is not None:
                fact["enum"] = values
            if field.alias and field.alias != name:
                fact["alias"] = field.alias
            for attr, keyword in _BOUNDS.items():
                if getattr(field.field_info, attr, None) is not None:
                    fact[keyword] = to_json(getattr(field.field_info, attr))
            if not field.required:
                default = field.default
                if default is None and field.default_factory is not None:
                    with contextlib.suppress(Exception):
                        default = field.default_factory()
                fact["default"] = to_json(_dump(default))
            extra_info = field.field_info.extra or {}
            if extra_info.get("deprecated"):
                fact["deprecated"] = True
                if extra_info.get("new_param"):
                    fact["new_param"] = extra_info["new_param"]
            fields[name] = fact
            if sub is not None:
                nested[name] = sub
    return {"class": model.__name__, "pydantic": major, "extra": str(extra) if extra else "ignore",
            "fields": fields, "_nested": nested}


def _dump(value: Any) -> Any:
    """A nested model default as its dict."""
    for method in ("model_dump", "dict"):
        if hasattr(value, method) and _is_model(type(value)):
            return getattr(value, method)()
    return value


def find_model(dotted: str) -> type | None:
    """The release's class of this name: at the latest release's path, else anywhere DeepSpeed loaded it."""
    module_name, _, name = dotted.rpartition(".")
    with contextlib.suppress(Exception):
        return getattr(importlib.import_module(module_name), name)
    for module in list(sys.modules.values()):
        if (module is not None and getattr(module, "__name__", "").startswith("deepspeed.")
                and isinstance(getattr(module, name, None), type)):
            return getattr(module, name)
    return None


def section_pointers(schema: dict[str, Any]) -> dict[str, str]:
    """Pointer -> pydantic class of the latest release, for its top-level sections (nested ones follow)."""
    out = {}
    for key, node in schema["properties"].items():
        for branch in [node, *node.get("anyOf", [])]:
            if isinstance(branch, dict) and "x-deepspeed-class" in branch:
                out["/" + key] = branch["x-deepspeed-class"]
    return out


def sections(schema: dict[str, Any], read: set[type]) -> dict[str, Any]:
    """Each section's model facts, by pointer; every DeepSpeed class they come from is added to ``read``."""
    out: dict[str, Any] = {}
    for pointer, dotted in section_pointers(schema).items():
        model = find_model(dotted)
        if model is None or not _is_model(model):
            continue
        stack = [(pointer, model)]
        while stack:
            where, cls = stack.pop()
            read.update(k for k in cls.__mro__ if k.__module__.startswith("deepspeed"))
            facts = model_facts(cls)
            for name, sub in facts.pop("_nested").items():
                stack.append((f"{where}/{facts['fields'][name].get('alias', name)}", sub))
            out[where] = facts
    return dict(sorted(out.items()))


def source_files(classes: set[type], root: pathlib.Path) -> list[str]:
    """The files (relative to the folder holding deepspeed/) the classes are defined in: tools/gen_releases.py
    checks each is one ds_release_sources.py fingerprints, so releases that share a fingerprint share them."""
    files = set()
    for cls in classes:
        path = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if path is not None:
            files.add(pathlib.Path(path).resolve().relative_to(root.resolve()).as_posix())
    return sorted(files)


def top_level_defaults(keys: list[str]) -> dict[str, Any]:
    """``<KEY>_DEFAULT`` constants of the release for the latest schema's top-level keys."""
    out = {}
    modules = [importlib.import_module("deepspeed.runtime.constants")]
    for key in keys:
        name = key.upper() + "_DEFAULT"
        for module in modules:
            value = getattr(module, name, MISSING)
            if value is not MISSING:
                out[key] = to_json(value)
                break
    return out


def probe(config_class: type, config: dict[str, Any]) -> dict[str, Any]:
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = config_class(json.loads(json.dumps(config)))
    except Exception as err:  # noqa: BLE001  (the verdict is whatever the release raises)
        return {"accepted": False, "error": f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"[:300]}
    return {"accepted": True, "fp16_enabled": bool(getattr(parsed, "fp16_enabled", False)),
            "bf16_enabled": bool(getattr(parsed, "bfloat16_enabled", getattr(parsed, "bf16_enabled", False)))}


BASE = {"train_micro_batch_size_per_gpu": 1}


def probes(config_class: type, schema: dict[str, Any]) -> dict[str, Any]:
    """Behaviour only the release's parser shows, each probe a config it reads."""
    out: dict[str, Any] = {}
    for key, node in schema["properties"].items():
        if "x-removed" in node:  # a section the latest release refuses: does this one?
            # old releases index these sections' "enabled" directly (KeyError on {}): try each form
            verdicts = [probe(config_class, {**BASE, key: value}) for value in ({"enabled": False}, {}, False)]
            out[f"removed:{key}"] = any(v["accepted"] for v in verdicts)
    for key, node in schema["properties"]["zero_optimization"]["properties"].items():
        if "x-removed" in node:  # a ZeRO key the latest release refuses (mics_shard_size): its default, at stage 3
            default = {"mics_shard_size": -1, "mics_hierarchical_params_gather": False}.get(key)
            verdict = probe(config_class, {**BASE, "zero_optimization": {"stage": 3, key: default}})
            out[f"removed:zero_optimization/{key}"] = verdict["accepted"]
    out["fp16-auto"] = probe(config_class, {**BASE, "fp16": {"enabled": "auto"}})
    out["bf16-auto"] = probe(config_class, {**BASE, "bf16": {"enabled": "auto"}})
    out["fp16-bf16-auto"] = probe(config_class, {**BASE, "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"}})
    out["fp16-unknown-key"] = probe(config_class, {**BASE, "fp16": {"enabled": True, "opt_level": "O2"}})
    out["bf16-unknown-key"] = probe(config_class, {**BASE, "bf16": {"enabled": True, "auto_cast": True}})
    zero = {"stage": 3}
    out["int-from-fraction"] = probe(config_class, {**BASE, "zero_optimization": {**zero, "reduce_bucket_size": 1.5}})
    out["int-from-string"] = probe(config_class, {**BASE, "zero_optimization": {**zero, "reduce_bucket_size": "5"}})
    out["enum-from-string"] = probe(config_class, {**BASE, "zero_optimization": {"stage": "1"}})
    out["bool-from-word"] = probe(config_class, {**BASE, "zero_optimization": {**zero, "overlap_comm": "yes"}})
    out["bool-from-int"] = probe(config_class, {**BASE, "zero_optimization": {**zero, "overlap_comm": 1}})
    out["bool-from-two"] = probe(config_class, {**BASE, "zero_optimization": {**zero, "overlap_comm": 2}})
    out["str-from-int"] = probe(config_class, {**BASE, "zero_optimization": {
        **zero, "offload_param": {"device": "cpu", "nvme_path": 5}}})
    out["communication-bfp16"] = probe(config_class, {**BASE, "communication_data_type": "bfp16"})
    out["communication-bf16"] = probe(config_class, {**BASE, "communication_data_type": "bf16"})
    fp16 = {"enabled": True, "loss_scale": 0}
    out["fp16-loss-scale-window-0"] = probe(config_class, {**BASE, "fp16": {**fp16, "loss_scale_window": 0}})
    out["fp16-min-loss-scale-0"] = probe(config_class, {**BASE, "fp16": {**fp16, "min_loss_scale": 0}})
    out["partial-offload-stage2"] = probe(config_class, {**BASE, "zero_optimization": {
        "stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})
    out["allreduce-sum-zero3"] = probe(config_class, {**BASE, "gradient_allreduce_op": "sum",
                                                      "zero_optimization": {"stage": 3}})
    return out


def main() -> int:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    ds_release_oracle.choose_accelerator()
    ds_release_oracle.restore_elastic_names()
    logging.disable(logging.CRITICAL)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import deepspeed
        from deepspeed.runtime.config import DeepSpeedConfig
    logging.disable(logging.CRITICAL)
    import pydantic

    package = pathlib.Path(deepspeed.__file__).parent
    keys = list(schema["properties"])
    read: set[type] = set()
    facts = {
        "release": deepspeed.__version__.split("+")[0],
        "pydantic": pydantic.VERSION,
        "sections": sections(schema, read),
        "top_level_read": ds_release_sources.top_level_read(package.parent, keys),
        "top_level_defaults": top_level_defaults(keys),
        "probes": probes(DeepSpeedConfig, schema),
        "launch_checks": ds_release_sources.launch_checks(package.parent),
    }
    facts["model_files"] = [*source_files(read, package.parent), "deepspeed/runtime/constants.py",
                            "deepspeed/runtime/config.py"]  # the defaults' and DeepSpeedConfig's own files
    json.dump(facts, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

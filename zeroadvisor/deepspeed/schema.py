"""The committed DeepSpeed config schema (zeroadvisor/schemas/ds_config.schema.json), read at run time.

The schema is generated from DeepSpeed's own pydantic models plus a maintained table for
the sections DeepSpeed reads with ``dict.get`` (tools/gen_schema.py). It is the single
source of truth for key names, types, ranges, defaults, aliases, deprecations and removals;
the linter and the memory model read facts from here instead of repeating them.
DeepSpeed is never imported at run time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import cache

from zeroadvisor.config.merge_patch import apply
from zeroadvisor.deepspeed import releases
from zeroadvisor.jsontypes import JSONObject, JSONValue

SCHEMA_FILE = "ds_config.schema.json"
_SCHEMAS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")
# The DeepSpeed release the schema is read as (None: the latest, the committed schema itself). Set only by
# reading_as, around one release's lint or estimate of one document, so every reader of the schema (the
# walk, the rules, the memory model's defaults) sees the same release without passing it through each call.
_ACTIVE: ContextVar[str | None] = ContextVar("zeroadvisor_deepspeed_release", default=None)


@contextmanager
def reading_as(release: str | None) -> Iterator[None]:
    """Read the schema as DeepSpeed ``release`` does (deepspeed/releases.py) inside the block."""
    token = _ACTIVE.set(release)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_release() -> str:
    """The release the schema is read as now."""
    return _ACTIVE.get() or releases.latest()


def load(name: str = SCHEMA_FILE) -> JSONObject:
    """The schema of the active release (``reading_as``), or another shipped schema by file name."""
    release = _ACTIVE.get()
    if name == SCHEMA_FILE and release is not None and release != releases.latest():
        return of_release(release)
    return _load_file(name)


@cache
def of_release(version: str) -> JSONObject:
    """The whole schema of one release: its entry's merge patch applied to the schema of the entry it patches
    (the next newer entry; the latest schema for the newest)."""
    based_on = releases.base(version)
    based = of_release(based_on) if based_on else load_latest()
    return apply(based, releases.patch(version))


def reads_removed(version: str, pointer: str) -> bool:
    """Whether ``version`` still reads a key a later release refuses (schema x-removed-later)."""
    node: JSONValue = of_release(version) if version != releases.latest() else None
    for token in pointer.split("/")[1:]:
        node = _child(_child(node, "properties"), token)
    return isinstance(node, dict) and "x-removed-later" in node


def load_latest() -> JSONObject:
    """The committed schema of the latest release, whichever release is active."""
    return _load_file(SCHEMA_FILE)


@cache
def _load_file(name: str) -> JSONObject:
    """The parsed schema shipped as package data (``zeroadvisor.schemas``)."""
    # the schema files are JSON objects (tools/gen_schema.py writes them; tests/test_schema_file.py reads them)
    # The package data beside this module (zeroadvisor/schemas/), read as a plain file: importlib.resources
    # costs more to import than the whole read (tempfile, shutil and the compression modules behind it).
    with open(os.path.join(_SCHEMAS, name), encoding="utf-8") as stream:
        schema: JSONObject = json.load(stream)
    return schema


def node(*path: str) -> JSONObject | None:
    """The schema of the key at ``path`` (object keys from the root), or None if unknown."""
    current: JSONValue = load()
    for key in path:
        if not isinstance(current, dict):
            return None
        current = _child(_child(_object_branch(current), "properties"), key)
    return current if isinstance(current, dict) else None


def properties(schema: JSONValue) -> JSONObject:
    """A schema node's ``properties`` (its keys' schemas); {} for a node without them."""
    found = _child(schema, "properties")
    return found if isinstance(found, dict) else {}


def definition(name: str) -> JSONObject:
    """The active schema's ``$defs`` entry ``name`` (``optimizer_params``: the optimizers' parameters); {} without."""
    found = _child(load().get("$defs"), name)
    return found if isinstance(found, dict) else {}


def names(key: str) -> tuple[str, ...]:
    """A list of names the active schema keeps at its root (``x-deepspeed-optimizers``, ...); () without it."""
    found = load().get(key)
    return tuple(name for name in found if isinstance(name, str)) if isinstance(found, list) else ()


def _child(schema: JSONValue, key: str) -> JSONValue:
    """``schema[key]`` where the schema is an object that has it; None otherwise."""
    return schema.get(key) if isinstance(schema, dict) else None


def default(*path: str) -> JSONValue:
    """DeepSpeed's default for the key at ``path`` (as its code has it, not its docs)."""
    schema = node(*path)
    if schema is None or "default" not in schema:
        raise KeyError("/".join(path))
    return schema["default"]


def min_stage(key: str) -> int | None:
    """The lowest ZeRO stage at which ``zero_optimization.<key>`` takes effect (schema x-min-stage)."""
    stage = (node("zero_optimization", key) or {}).get("x-min-stage")
    return stage if isinstance(stage, int) else None


@dataclass(frozen=True, slots=True)
class AutoFill:
    """What the Hugging Face integration writes for "auto" in a hidden-size-based key: int(factor·h^power),
    multiplied left to right as transformers does (``int(0.9 * hidden_size * hidden_size)``)."""

    factor: int | float
    power: int

    def value(self, hidden_size: int) -> int:
        result: int | float = self.factor
        for _ in range(self.power):
            result = result * hidden_size
        return int(result)

    @property
    def formula(self) -> str:
        factor = "" if self.factor == 1 else f"{self.factor}·"
        power = {1: "h", 2: "h²"}.get(self.power, f"h^{self.power}")
        text = factor + power
        return f"int({text})" if isinstance(self.factor, float) else text


def auto_fill(*path: str) -> AutoFill | None:
    """The schema's ``x-auto-fill`` of the key at ``path``: how HF fills "auto" there (None: not hidden-size based)."""
    fill = (node(*path) or {}).get("x-auto-fill")
    if not fill:
        return None
    if not isinstance(fill, dict):
        raise TypeError(f"the schema's x-auto-fill of {'.'.join(path)} is not an object")
    factor, power = fill["factor"], fill["power"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not isinstance(power, int):
        raise TypeError(f"the schema's x-auto-fill of {'.'.join(path)} is not a factor and a power")
    return AutoFill(factor, power)


def _object_branch(schema: JSONObject) -> JSONObject:
    """The object alternative of a schema that also allows e.g. a legacy bool form."""
    if "properties" in schema:
        return schema
    alternatives = schema.get("anyOf", [])
    for alternative in alternatives if isinstance(alternatives, list) else []:
        if isinstance(alternative, dict) and "properties" in alternative:
            return alternative
    return schema

#!/usr/bin/env python
"""Generate ds_config.schema.json (JSON Schema 2020-12) from the installed DeepSpeed.

    python tools/gen_schema.py           rewrite the committed schema (both copies)
    python tools/gen_schema.py --check   exit 1 with a diff summary if it is out of date

The schema is written to zeroadvisor/schemas/ (the package data) and to schemas/ (published at its
``$id``), byte for byte the same (tools/published_schemas.py).

Sources, in order of authority:

1. DeepSpeed's pydantic models (``model_fields``: names, aliases, annotations, defaults,
   ge/gt/le/lt metadata, enums/Literals, deprecations in ``json_schema_extra``, the
   attribute docstrings as descriptions) for the sections DeepSpeed validates.
2. tools/ds_dictget_keys.py, the maintained table of everything DeepSpeed reads with
   ``dict.get``; its defaults are checked against DeepSpeed below (``verify_table_defaults``).
3. ``inspect.signature`` of the optimizer and scheduler classes DeepSpeed constructs
   (runtime/engine.py ``_configure_basic_optimizer``, ``_scheduler_from_config``), plus their
   docstrings for descriptions. Nothing is instantiated, so no op is JIT-compiled.
4. The tables at the top of this file: facts no model carries (which keys Hugging Face fills
   for "auto", which keys only matter at ZeRO stage 3, cross-field checks DeepSpeed makes in
   validators or at engine init, descriptions DeepSpeed does not document).

The schema's own conventions are listed in its ``x-conventions`` object.
"""

from __future__ import annotations

import argparse
import ast
import collections.abc
import contextlib
import copy
import difflib
import enum
import importlib
import inspect
import itertools
import json
import math
import os
import pathlib
import re
import sys
import textwrap
import types
import typing
import warnings
from typing import Any

TOOLS_DIR = pathlib.Path(__file__).resolve().parent
REPO_ROOT = TOOLS_DIR.parent
SCHEMA_NAME = "ds_config.schema.json"

if str(TOOLS_DIR) not in sys.path:
    sys.path.insert(0, str(TOOLS_DIR))

import ds_dictget_keys as table  # noqa: E402  (needs TOOLS_DIR on sys.path)
import published_schemas  # noqa: E402  (needs TOOLS_DIR on sys.path)

if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from zeroadvisor import DEEPSPEED_TARGET as TARGET_DEEPSPEED  # noqa: E402  (the version the tool targets)

# DeepSpeed prints an accelerator warning on import unless told which one to use; the schema
# does not depend on the accelerator (SEQ_PARALLEL_COMMUNICATION_DATA_TYPE_DEFAULT is forced to
# "fp32" at the end of runtime/constants.py whatever the accelerator).
os.environ.setdefault("DS_ACCELERATOR", "cpu")

from ds_facts import (  # noqa: E402  (needs TOOLS_DIR on sys.path)
    FIELD_DESCRIPTIONS,
    FIELD_KEYWORDS,
    HF,
    HF_AUTO,
    HF_AUTO_FILL,
    LEGACY_BFLOAT16,
    MODEL_RULES,
    NULLABLE_MODEL_FIELDS,
    PARAMS_AUTO,
    ROOT_RULES,
    STAGE3_ONLY,
    STAGE12_ONLY,
    ZERO_LEGACY_BOOL,
    ZERO_ONLY,
)

CONVENTIONS = {
    "x-unknown-keys": "What DeepSpeed does with a key not listed in properties: 'error' (pydantic extra=forbid, "
                      "also additionalProperties false), 'ignored' (read with dict.get), 'kwargs' (passed as keyword "
                      "arguments: TypeError at engine init), 'map' (keys are user-chosen names, values follow "
                      "additionalProperties). The top level is 'ignored' and still has additionalProperties false, "
                      "so that an editor flags a key DeepSpeed would drop (zero_optimisation); keys starting with "
                      "'_' are comments there (patternProperties).",
    "x-editor-only": "A key for editors, not DeepSpeed (which ignores it): '$schema', the schema an editor "
                     "validates the file with.",
    "x-unchecked": "DeepSpeed stores the value without checking its type; the schema states the intended type.",
    "x-operand-types": "On an x-unchecked key: the JSON types DeepSpeed's own arithmetic on the value accepts at "
                       "launch (e.g. bool | value); any other type raises TypeError there.",
    "x-alias-of": "This key is an alias of the named sibling field; giving both raises (extra_forbidden).",
    "x-replaced-by": "JSON pointer of the replacement of a deprecated key (null: none).",
    "x-deprecation": "DeepSpeed's deprecation warning (or a faithful summary where it does not warn).",
    "x-removed": "DeepSpeed's DeepSpeedConfigError message for a removed key; such keys also carry not: {}.",
    "x-rejected": "DeepSpeed's error for a key the engine refuses (e.g. optimizer max_grad_norm); also not: {}.",
    "x-auto": "Integrations that replace the string 'auto' in this key; plain DeepSpeed drops 'auto' in validated "
              "sections (the default applies) and keeps it as a string elsewhere.",
    "x-auto-fill": "What the integrations write for 'auto' here: int(factor * hidden_size ** power), multiplied "
                   "left to right as transformers does.",
    "x-min-stage": "The key only takes effect at this ZeRO stage or above.",
    "x-max-stage": "The key only takes effect at this ZeRO stage or below (ZeRO enabled).",
    "x-enum-ci": "Allowed values, compared case-insensitively (DeepSpeed lower/upper-cases the value); 'pattern' "
                 "enforces them.",
    "x-legacy-forms": "Deprecated non-object forms of a section, keyed by JSON type.",
    "x-no-default": "Why the key has no default (DeepSpeed indexes it directly when the feature is used).",
    "x-unused": "Accepted and stored, but nothing in this DeepSpeed version reads it.",
    "x-not-settable": "No JSON value passes DeepSpeed's validation for this key.",
    "x-int-literal": "DeepSpeed checks isinstance(value, int): write an integer literal, not 1e3.",
    "x-internal": "Set by DeepSpeed at run time; not meant to be configured.",
    "x-deepspeed-class": "The pydantic model DeepSpeed validates this section with.",
    "x-deepspeed-source": "DeepSpeed file and function that read this dict.get section.",
    "x-params-defs": "Where the per-type keyword-argument schemas for this params object live ($defs key by type).",
    "x-classes": "Classes the engine may construct for this optimizer type and when (runtime/engine.py).",
    "x-accepted-by": "Only these of the x-classes accept this keyword argument.",
    "lax-types": "pydantic lax mode also accepts numeric strings for int/float fields and 'true'/'yes'/'on'/1 for bool "
                 "fields; the schema states the intended JSON types.",
}

JSON_TYPES = ["object", "array", "string", "number", "integer", "boolean", "null"]

# Top-level keys an editor reads and DeepSpeed ignores (runtime/config.py reads the top level with dict.get).
EDITOR_KEYS = {
    "$schema": {
        "type": "string",
        "description": "The JSON Schema an editor validates this file with, e.g. this schema's $id. DeepSpeed "
                       "ignores the key.",
        "x-editor-only": True,
        "x-no-default": "Read by editors only.",
    },
}
# Top-level keys that are comments (the linter does not report them; DeepSpeed ignores them).
COMMENT_KEYS = {"^_": {"description": "A comment: DeepSpeed ignores top-level keys it does not read."}}

# ---------------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------------


class SchemaError(RuntimeError):
    """The generator found something it cannot express or a fact that disagrees with DeepSpeed."""


class NotJsonConfigurable(SchemaError):
    """A class has a required constructor argument that no JSON value can provide."""


def resolve(path: str) -> Any:
    """Import ``module:attribute`` or ``package.module.Class``."""
    if ":" in path:
        module, attr = path.split(":")
    else:
        module, attr = path.rsplit(".", 1)
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def to_json(value: Any) -> Any:
    """A default exactly as DeepSpeed's code has it, as a JSON value."""
    import torch

    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return to_json(value.value)
    if isinstance(value, int):  # pp_int and int-valued enums included
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SchemaError(f"non-finite default {value!r} cannot be written as JSON")
        return value
    if isinstance(value, pathlib.PurePath):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, torch.dtype):
        return str(value)  # runtime/config_utils.py serialize_torch_dtype
    raise SchemaError(f"cannot express default {value!r} ({type(value).__name__}) in JSON")


def normalize_types(types_: list[str]) -> str | list[str]:
    """Deduplicate, drop integer next to number (integer is a subset), unwrap a single type."""
    seen = list(dict.fromkeys(types_))
    if "number" in seen and "integer" in seen:
        seen.remove("integer")
    return seen[0] if len(seen) == 1 else seen


def type_list(node: dict) -> list[str]:
    t = node.get("type", [])
    return [t] if isinstance(t, str) else list(t)


def json_type_of(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def enum_schema(values: list) -> dict:
    values = list(dict.fromkeys(to_json(v) for v in values))
    return {"type": normalize_types([json_type_of(v) for v in values]), "enum": values}


def ci_pattern(values: list[str]) -> str:
    """A portable (ECMA-262 and Python) case-insensitive full-match pattern."""
    def one(word: str) -> str:
        return "".join(f"[{c.upper()}{c.lower()}]" if c.upper() != c.lower() else re.escape(c) for c in word)
    return "^(?:" + "|".join(one(v) for v in values) + ")$"


def snake_to_keyword(name: str) -> str:
    if name.startswith("x_"):
        return "x-" + name[2:].replace("_", "-")
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


_ABBREVIATIONS = {"e.g.", "i.e.", "etc.", "vs.", "cf.", "approx.", "no."}


def first_sentence(text: str) -> str:
    """Text up to the first '. ' that ends a sentence (not an abbreviation or a number)."""
    for match in re.finditer(r"[.!?](?=\s+\S)", text):
        word = text[:match.end()].rsplit(None, 1)[-1].lower()
        if word in _ABBREVIATIONS or re.fullmatch(r"[\d.e+-]+\.", word) or len(word) <= 2:
            continue
        return text[:match.end()]
    return text


def sentence(text: str) -> str:
    """The first sentence of a docstring, cleaned of reST markup."""
    text = " ".join(text.split())
    text = re.sub(r"``([^`]+)``", r"`\1`", text)
    text = re.sub(r"`([^`<]+?)`_", r"\1", text)  # reST hyperlink references
    text = re.sub(r":math:`([^`]+)`", r"\1", text)
    text = re.sub(r":(?:any|class|meth|func|ref):`~?([^`<]+?)(?:\s*<[^>]+>)?`", r"\1", text)
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u2013", "-").replace("\u2014", "-")
    first = first_sentence(text).strip().rstrip(":;,")
    if first and first[0].islower():
        first = first[0].upper() + first[1:]
    return first if first.endswith((".", "!", "?")) else first + "."


def lower_first(text: str) -> str:
    """Lower-case the first letter unless the word is an acronym (ZeRO-3, MiCS)."""
    return text[0].lower() + text[1:] if text[1:2].islower() else text


def strip_default_phrases(text: str) -> str:
    """Remove '(default: ...)' groups (balanced) and trailing 'Default: ...' sentences."""
    out, depth, i = [], 0, 0
    while i < len(text):
        if depth == 0 and text[i] == "(" and text[i + 1:i + 9].lower().startswith("default"):
            depth, i = 1, i + 1
            continue
        if depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
            continue
        out.append(text[i])
        i += 1
    text = "".join(out)
    text = re.sub(r"\s*Default\s*:.*$", "", text, flags=re.S)
    return re.sub(r"\s+([.,;])", r"\1", text).strip()


# ---------------------------------------------------------------------------------------------
# Pydantic models -> schema
# ---------------------------------------------------------------------------------------------


def field_docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right after ``name: type = ...``) along the MRO."""
    from pydantic import BaseModel

    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body
        for stmt, nxt in itertools.pairwise(body):
            if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                    and isinstance(nxt.value.value, str)):
                docs[stmt.target.id] = nxt.value.value
    return docs


def annotation_schema(ann: Any) -> dict | None:
    """JSON Schema for a Python annotation; None when no JSON value can satisfy it."""
    import torch
    from pydantic import BaseModel

    if ann is None or ann is type(None):
        return {"type": "null"}
    if ann is typing.Any or ann is object:
        return {"type": normalize_types(JSON_TYPES)}
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Annotated:
        return annotation_schema(args[0])
    if origin in (typing.Union, types.UnionType):
        return merge_union([annotation_schema(a) for a in args])
    if origin is typing.Literal:
        return enum_schema(list(args))
    if isinstance(ann, type) and issubclass(ann, enum.Enum):
        return enum_schema([m.value for m in ann])
    if ann is torch.dtype:
        return {"type": "string"}
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return {"type": "object"}
    scalars = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (pathlib.PurePath, "string"))
    for py_type, json_type in scalars:
        if isinstance(ann, type) and issubclass(ann, py_type):
            return {"type": json_type}
    if ann is tuple or origin is tuple:
        if not args:
            return {"type": "array"}
        if args[-1] is Ellipsis:
            item = annotation_schema(args[0])
            return {"type": "array", **({"items": item} if item else {})}
        items = [annotation_schema(a) for a in args]
        if any(i is None for i in items):
            return None
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    if ann is list or origin in (list, collections.abc.Sequence, collections.abc.Iterable):
        if not args:
            return {"type": "array"}
        item = annotation_schema(args[0])
        return {"type": "array", "items": item} if item else None  # e.g. list[Callable]
    if ann is dict or origin in (dict, collections.abc.Mapping):
        return {"type": "object"}
    return None  # callables, tensors, optimizers, arbitrary classes


def merge_union(parts: list[dict | None]) -> dict | None:
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    merged: dict = {"type": normalize_types([t for p in parts for t in type_list(p)])}
    enums = [p for p in parts if "enum" in p]
    if enums and all("enum" in p or type_list(p) == ["null"] for p in parts):
        values = [v for p in enums for v in p["enum"]]
        if any(type_list(p) == ["null"] for p in parts):
            values.append(None)
        merged["enum"] = list(dict.fromkeys(values))
    for key in ("items", "prefixItems", "minItems", "maxItems"):
        for p in parts:
            if key in p:
                merged.setdefault(key, p[key])
    return merged


def model_of(annotation: Any) -> tuple[type | None, bool]:
    """(pydantic model class, nullable) when the annotation is a model or Optional[model]."""
    from pydantic import BaseModel

    is_union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    args = typing.get_args(annotation) if is_union else (annotation,)
    models = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(models) == 1 and all(a is type(None) or a is models[0] for a in args):
        return models[0], type(None) in args
    return None, False


def constraint_keywords(field) -> dict:
    """ge/gt/le/lt from pydantic field metadata (annotated_types)."""
    names = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}
    out = {}
    for meta in field.metadata:
        for attr, keyword in names.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out[keyword] = to_json(value)
    return out


def deprecation_keywords(cls: type, name: str, field, pointer: str) -> dict:
    """runtime/config_utils.py DeepSpeedConfigModel._process_deprecated_field, as schema keywords."""
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    if not extra.get("deprecated"):
        return {}
    new_param = extra.get("new_param", "")
    message = extra.get("deprecated_msg", "")
    warning = (f"Config parameter {name} is deprecated" + (f" use {new_param} instead" if new_param else "")
               + (f". {message}" if message else ""))
    replaced = None
    if new_param and extra.get("set_new_param", True) and new_param in cls.model_fields:
        replaced = pointer.rsplit("/", 1)[0] + "/" + new_param
    return {"deprecated": True, "x-replaced-by": replaced, "x-deprecation": warning}


class ModelWalker:
    """Turns a DeepSpeed pydantic model into a schema node, recursively."""

    def section(self, cls: type, pointer: str, description: str, nullable: bool = False) -> dict:
        docs = field_docstrings(cls)
        node: dict = {
            "type": ["object", "null"] if nullable else "object",
            "description": description,
            "x-deepspeed-class": f"{cls.__module__}.{cls.__qualname__}",
            "x-unknown-keys": "error" if cls.model_config.get("extra") == "forbid" else "ignored",
            "properties": {},
        }
        if node["x-unknown-keys"] == "error":
            node["additionalProperties"] = False
        for name, field in cls.model_fields.items():
            prop = self.field(cls, name, field, f"{pointer}/{name}", docs.get(name))
            node["properties"][name] = prop
            if field.alias and field.alias != name:
                alias = copy.deepcopy(prop)
                alias["x-alias-of"] = name
                alias["description"] = f"Alias of {name}: {lower_first(prop['description'])}"
                node["properties"][field.alias] = alias
        rules = self.conflict_rules(cls, pointer) + copy.deepcopy(MODEL_RULES.get(cls.__name__, []))
        if rules:
            node["allOf"] = rules
        return node

    def field(self, cls: type, name: str, field, pointer: str, doc: str | None) -> dict:
        doc = doc or field.description
        description = FIELD_DESCRIPTIONS.get((cls.__name__, name)) or (sentence(doc) if doc else None)
        if not description:
            raise SchemaError(f"{cls.__name__}.{name} has no docstring; add it to FIELD_DESCRIPTIONS")
        sub_model, nullable = model_of(field.annotation)
        if sub_model is not None:
            nullable = nullable or (cls.__name__, name) in NULLABLE_MODEL_FIELDS
            node = self.section(sub_model, pointer, description, nullable)
            if field.default is None and not field.default_factory:
                node = {**node, "default": None}
        else:
            schema = annotation_schema(field.annotation)
            if schema is None:
                raise SchemaError(f"{cls.__name__}.{name}: cannot express {field.annotation!r}")
            node = {**schema, **constraint_keywords(field)}
            node["default"] = to_json(field.get_default(call_default_factory=True))
            node["description"] = description
        node.update(deprecation_keywords(cls, name, field, pointer))
        node.update(copy.deepcopy(FIELD_KEYWORDS.get((cls.__name__, name), {})))
        if name in STAGE3_ONLY.get(cls.__name__, ()):
            node["x-min-stage"] = 3
        elif name in ZERO_ONLY.get(cls.__name__, ()):
            node["x-min-stage"] = 1
        if name in STAGE12_ONLY.get(cls.__name__, ()):
            node["x-max-stage"] = 2
        return order_keys(node)

    @staticmethod
    def conflict_rules(model: type, pointer: str) -> list[dict]:
        """Field+alias together (extra_forbidden) and deprecated+replacement together (AssertionError)."""
        rules = []
        for name, field in model.model_fields.items():
            if field.alias and field.alias != name:
                rules.append({"$comment": f"pydantic populate_by_name: giving both '{name}' and its alias "
                                          f"'{field.alias}' raises extra_forbidden",
                              "not": {"type": "object", "required": [name, field.alias]}})
        for name, field in model.model_fields.items():
            extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
            new = extra.get("new_param")
            if extra.get("deprecated") and extra.get("set_new_param", True) and new in model.model_fields:
                spellings = [new] + ([model.model_fields[new].alias] if model.model_fields[new].alias else [])
                for spelling in spellings:
                    message = f"Cannot provide deprecated parameter '{name}' and replacing parameter '{new}' together"
                    rules.append({"$comment": f"runtime/config_utils.py _process_deprecated_field: \"{message}\"",
                                  "not": {"type": "object", "required": [name, spelling]}})
        return rules


_KEY_ORDER = ["type", "description", "default", "x-no-default", "deprecated", "anyOf", "const", "enum", "x-enum-ci",
              "pattern", "examples", "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "items",
              "prefixItems", "minItems", "maxItems", "not"]


def order_keys(node: dict) -> dict:
    """Stable, readable key order: validation keywords first, then x-* annotations, then children."""
    tail = ["properties", "additionalProperties", "required", "dependentRequired", "allOf"]
    head = [k for k in _KEY_ORDER if k in node]
    rest = [k for k in node if k not in head and k not in tail]
    rest.sort(key=lambda k: (not k.startswith("x-"), k))
    return {k: node[k] for k in head + rest + [k for k in tail if k in node]}


# ---------------------------------------------------------------------------------------------
# The dict.get table -> schema
# ---------------------------------------------------------------------------------------------


def enum_values_from(path: str) -> list:
    """Allowed values held by a DeepSpeed object: DtypeEnum, a dict's keys, a set, a list."""
    obj = resolve(path)
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        values = []
        for member in obj:
            values += [v for v in getattr(member, "_all_values", (member.value,)) if isinstance(v, str)]
        return list(dict.fromkeys(values))
    if isinstance(obj, dict):
        return list(obj)
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    return list(obj)


def leaf_node(spec: dict, generated: dict[str, dict] | None = None) -> dict:
    """A table leaf as a schema node (see the ds_dictget_keys.py docstring for the keywords)."""
    kw = dict(spec["keywords"])
    node: dict = {"type": normalize_types([spec["type"]] if isinstance(spec["type"], str) else spec["type"]),
                  "description": spec["description"]}
    if "default" in spec:
        node["default"] = to_json(spec["default"])
    if "no_default" in kw:
        node["x-no-default"] = kw.pop("no_default")
    nullable = kw.pop("nullable_enum", False)
    if "enum_from" in kw:
        node["enum"] = enum_values_from(kw.pop("enum_from")) + ([None] if nullable else [])
    ci_values = enum_values_from(kw.pop("ci_enum_from")) if "ci_enum_from" in kw else kw.pop("ci_enum", None)
    if ci_values:
        node.update({"pattern": ci_pattern(ci_values), "examples": list(ci_values), "x-enum-ci": list(ci_values)})
    if "generated" in kw:  # keywords computed from DeepSpeed at generation time (optimizer/scheduler names)
        node.update(copy.deepcopy((generated or {})[kw.pop("generated")]))
    for keyword, value in kw.items():
        node[snake_to_keyword(keyword)] = copy.deepcopy(value)
    return order_keys(node)


class TableBuilder:
    """Turns the tools/ds_dictget_keys.py table into schema nodes."""

    def __init__(self, walker: ModelWalker, generated: dict[str, dict]) -> None:
        self.walker = walker
        self.generated = generated

    def node(self, spec: dict, pointer: str) -> dict:
        builders = {"leaf": self.leaf, "section": self.section, "map": self.map, "model": self.model,
                    "params": self.params}
        if spec["kind"] not in builders:
            raise SchemaError(f"unknown table kind {spec['kind']!r} at {pointer}")
        return builders[spec["kind"]](spec, pointer)

    def leaf(self, spec: dict, pointer: str) -> dict:
        return leaf_node(spec, self.generated)

    def section(self, spec: dict, pointer: str) -> dict:
        types_ = ["object", *spec["extra_types"]] + (["null"] if spec["nullable"] else [])
        node = {"type": normalize_types(types_), "description": spec["description"],
                "x-deepspeed-source": spec["source"], "x-unknown-keys": spec["unknown"],
                "properties": {key: self.node(sub, f"{pointer}/{key}") for key, sub in spec["keys"].items()}}
        if "default" in spec:
            node["default"] = spec["default"]
        for keyword, value in spec["keywords"].items():
            node[snake_to_keyword(keyword)] = copy.deepcopy(value)
        if spec["required_if_enabled"]:
            node["allOf"] = [{"$comment": f"{spec['source']}: required when enabled",
                              "if": {"properties": {"enabled": {"const": True}}, "required": ["enabled"]},
                              "then": {"required": list(spec["required_if_enabled"])}}]
        return order_keys(node)

    def map(self, spec: dict, pointer: str) -> dict:
        return order_keys({"type": "object", "description": spec["description"], "x-unknown-keys": "map",
                           "x-deepspeed-source": spec["source"],
                           "additionalProperties": self.node(spec["value"], pointer + "/*")})

    def model(self, spec: dict, pointer: str) -> dict:
        return self.walker.section(resolve(spec["cls"]), pointer, spec["description"], spec["nullable"])

    @staticmethod
    def params(spec: dict, pointer: str) -> dict:
        return order_keys({"type": "object", "description": spec["description"], "x-unknown-keys": "kwargs",
                           "x-params-defs": f"#/$defs/{spec['defs']}"})


# ---------------------------------------------------------------------------------------------
# Optimizer and scheduler keyword arguments (inspect.signature)
# ---------------------------------------------------------------------------------------------

# "name (type): text", "name(type): text", "name {'a', 'b'}: text" or "name: text"
_ARG_LINE = re.compile(r"^(\w+)\s*(?:\(([^)]*(?:\([^)]*\)[^)]*)*)\)|\{([^}]*)\})?\s*:\s*(.*)$")


def docstring_args(cls: type) -> dict[str, tuple[str, str]]:
    """{name: (type text, description)} from Google-style 'Args:'/'Arguments:' sections."""
    found: dict[str, tuple[str, str]] = {}
    for doc in (cls.__doc__, getattr(cls.__init__, "__doc__", None)):
        lines = inspect.cleandoc(doc or "").splitlines()
        for start, line in enumerate(lines):
            if line.strip() not in ("Args:", "Arguments:"):
                continue
            indent, current = None, None
            for raw in lines[start + 1:]:
                if not raw.strip():
                    continue
                depth = len(raw) - len(raw.lstrip())
                if indent is None:
                    indent = depth
                if depth < indent or (current is None and not _ARG_LINE.match(raw.strip())):
                    break
                match = _ARG_LINE.match(raw.strip()) if depth == indent else None
                if match:
                    current = match.group(1)
                    found.setdefault(current, (match.group(2) or match.group(3) or "", match.group(4)))
                elif current:  # continuation, possibly unindented as in OneCycle's docstring
                    type_text, text = found[current]
                    found[current] = (type_text, text + " " + raw.strip())
    return found


_DOC_TYPES = {"float": "number", "int": "integer", "bool": "boolean", "boolean": "boolean", "str": "string",
              "string": "string", "list": "array", "tuple": "array"}


def doc_type_schema(type_text: str, default: Any) -> dict | None:
    """JSON types named in a docstring: '(float or list, optional)', '(Tuple[float, float])'."""
    container = re.match(r"\s*(?:tuple|list)\[(.*)\]", type_text, flags=re.I)
    if container:  # the bracketed names are item types, not alternatives
        items = [_DOC_TYPES[w] for w in re.findall(r"[a-z]+", container.group(1).lower()) if w in _DOC_TYPES]
        return {"type": "array", **({"items": {"type": normalize_types(items)}} if items else {})}
    found = [_DOC_TYPES[w] for w in re.findall(r"[a-z]+", type_text.lower()) if w in _DOC_TYPES]
    if not found:
        return None
    schema: dict = {"type": normalize_types(found + (["null"] if default is None else []))}
    if "array" in found and isinstance(default, (tuple, list)) and default:
        schema["items"] = {"type": normalize_types([json_type_of(to_json(v)) for v in default])}
    return schema


def default_schema(default: Any) -> dict | None:
    if default is inspect.Parameter.empty:
        return None
    if isinstance(default, (tuple, list)):
        items = [{"type": json_type_of(to_json(v))} for v in default]
        return {"type": "array", "prefixItems": items, "minItems": len(items), "maxItems": len(items)}
    # An unannotated integer default on a continuous hyper-parameter (weight_decay=0) is a number.
    return {"type": "number" if isinstance(default, int) and not isinstance(default, bool) else json_type_of(default)}


def init_parameters(cls: type) -> list[inspect.Parameter]:
    """Keyword-settable __init__ parameters, following **kwargs into the parent class."""
    params: list[inspect.Parameter] = []
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        sig = inspect.signature(klass.__init__)
        own = list(sig.parameters.values())[1:]  # drop self
        names = {p.name for p in params}
        params += [p for p in own if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name not in names]
        if not any(p.kind == p.VAR_KEYWORD for p in own):
            break
    return params


def first_positional(cls: type) -> inspect.Parameter:
    """The parameter DeepSpeed's positional argument (parameters or optimizer) binds to."""
    return next(p for p in init_parameters(cls) if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def type_hints(cls: type) -> dict[str, Any]:
    """Evaluated __init__ annotations along the **kwargs chain, one parameter at a time.

    typing.get_type_hints fails as a whole when one annotation names something imported only
    under TYPE_CHECKING (torch/optim/lr_scheduler.py uses 'Optimizer'), so evaluate each alone.
    """
    hints: dict[str, Any] = {}
    for klass in cls.__mro__:
        if "__init__" not in vars(klass):
            continue
        init = vars(klass)["__init__"]
        namespace = {**vars(typing), **vars(collections.abc), **getattr(init, "__globals__", {})}
        for name, ann in getattr(init, "__annotations__", {}).items():
            if name in hints or name == "return":
                continue
            try:
                hints[name] = eval(ann, namespace) if isinstance(ann, str) else ann
            except Exception:  # noqa: BLE001 - a string naming what this namespace lacks fails any way: not a hint
                continue
        if not any(p.kind == p.VAR_KEYWORD for p in inspect.signature(init).parameters.values()):
            break
    return hints


def class_kwargs(cls: type, skip: set[str], common_names: bool = False) -> tuple[dict[str, dict], list[str]]:
    """(properties, required) for the keyword arguments of ``cls(first, **kwargs)``.

    With ``common_names`` (optimizers) the shared PARAM_DESCRIPTIONS wording for lr, betas, eps...
    wins over the class docstring, so one config key reads the same across optimizer types.
    """
    params = init_parameters(cls)
    params.remove(first_positional(cls))  # that slot receives the model parameters / the optimizer
    hints, docs = type_hints(cls), docstring_args(cls)
    props: dict[str, dict] = {}
    required: list[str] = []
    for p in params:
        if p.name in skip:
            continue
        type_text, doc = docs.get(p.name, ("", ""))
        if p.name in hints:  # an annotation is authoritative, also when nothing in JSON satisfies it
            schema = annotation_schema(hints[p.name])
        else:
            schema = doc_type_schema(type_text, p.default) or default_schema(p.default)
        if schema is None:
            if p.default is inspect.Parameter.empty:
                raise NotJsonConfigurable(f"required parameter '{p.name}' ({p.annotation}) cannot be written in JSON")
            continue  # optional and only settable from Python: leaving it out makes a JSON value an error
        if p.default is None and "null" not in type_list(schema):
            schema = {**schema, "type": normalize_types([*type_list(schema), "null"])}
        from_doc = sentence(strip_default_phrases(doc)) if doc else None
        common = table.PARAM_DESCRIPTIONS.get(p.name)
        description = (common or from_doc) if common_names else (from_doc or common)
        if not description:
            raise SchemaError(f"{cls.__qualname__}: no description for {p.name}; add it to PARAM_DESCRIPTIONS")
        node = {**schema, "description": description}
        if p.default is inspect.Parameter.empty:
            required.append(p.name)
        else:
            node["default"] = to_json(p.default)
        props[p.name] = order_keys(node)
    return props, required


def qualified(cls: type) -> str:
    module = cls.__module__
    """The public import path of an optimizer class (torch.optim.AdamW, deepspeed.ops.adam.FusedAdam)."""
    for public in ("torch.optim", "deepspeed.ops.adam", "deepspeed.ops.adagrad", "deepspeed.ops.lamb",
                   "deepspeed.ops.lion"):
        if module.startswith(public + ".") and getattr(importlib.import_module(public), cls.__name__, None) is cls:
            module = public
    return f"{module}.{cls.__qualname__}"


def rejected_params() -> dict:
    return {name: {"description": "Rejected by the engine: use the top-level gradient_clipping instead.",
                   "not": {}, "x-rejected": spec["message"], "x-replaced-by": spec["replaced_by"]}
            for name, spec in table.REJECTED_OPTIMIZER_PARAMS.items()}


def optimizer_entry(type_name: str, variants: list[dict]) -> dict:
    """Union of the keyword arguments accepted by the classes the engine may build for a type."""
    engine_keys = table.ENGINE_OPTIMIZER_KEYS.get(type_name, {})
    props: dict[str, dict] = {k: leaf_node(v) for k, v in engine_keys.items()}
    accepted: dict[str, list[str]] = {}
    defaults: dict[str, dict[str, Any]] = {}
    required_sets, classes = [], []
    for variant in variants:
        target = resolve(variant.get("kwargs_to", variant["class"]))
        skip = set(variant.get("injected", [])) | set(engine_keys) | set(table.REJECTED_OPTIMIZER_PARAMS)
        v_props, v_required = class_kwargs(target, skip, common_names=True)
        label = variant["class"] if "kwargs_to" in variant else qualified(target)
        forwards = {"kwargs_to": variant["kwargs_to"]} if "kwargs_to" in variant else {}
        classes.append({"class": label, "when": variant["when"], **forwards})
        required_sets.append(set(v_required) | set(variant.get("required", [])))
        for name, node in v_props.items():
            accepted.setdefault(name, []).append(label)
            if "default" in node:
                defaults.setdefault(name, {})[label] = node["default"]
            if name not in props:
                props[name] = node
            else:
                merged = merge_union([props[name], node])
                props[name] = order_keys({**props[name], "type": merged["type"]})
    for name, by_class in defaults.items():
        values = list(by_class.values())
        if any(v != values[0] for v in values):  # numeric comparison: 0 == 0.0
            props[name]["x-defaults-by-class"] = by_class
    labels = [c["class"] for c in classes]
    for name, who in accepted.items():
        if len(who) != len(labels) and name not in engine_keys:
            props[name]["x-accepted-by"] = who
    for (owner, name), note in table.PARAM_NOTES.items():
        if owner == type_name and name in props:
            props[name]["description"] = note
    props.update(rejected_params())
    required = sorted(set.intersection(*required_sets)) if required_sets else []
    return {"type": "object", "description": f"Keyword arguments for optimizer type '{type_name}'.",
            "x-unknown-keys": "kwargs", "x-classes": classes,
            "properties": {k: order_keys(v) for k, v in props.items()}, "additionalProperties": False,
            "required": required}


def muon_entry() -> dict:
    """Muon: runtime/engine.py _muon_param_groups copies only known keys into param groups."""
    from deepspeed.runtime import engine

    ds_engine = engine.DeepSpeedEngine
    known = set(ds_engine._MUON_HALF_KEYS) | set(ds_engine._ADAM_HALF_KEYS) | {"muon_lr", "adam_lr"}
    if known != set(table.MUON_PARAMS):
        raise SchemaError(f"MUON_PARAMS {sorted(table.MUON_PARAMS)} != keys read by _muon_param_groups {sorted(known)}")
    props = {k: leaf_node(v) for k, v in {**table.ENGINE_OPTIMIZER_KEYS["muon"], **table.MUON_PARAMS}.items()}
    props.update(rejected_params())
    return {"type": "object", "description": "Param-group settings for optimizer type 'muon'; other keys are ignored.",
            "x-unknown-keys": "ignored",
            "x-classes": [{"class": v["class"], "when": v["when"]} for v in table.OPTIMIZER_VARIANTS["muon"]],
            "properties": props, "required": []}


def torch_optimizer_names() -> list[str]:
    """torch.optim classes reachable by getattr (names that lower-case to a DeepSpeed name are not)."""
    import torch
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS

    def is_optimizer(obj: Any) -> bool:
        return isinstance(obj, type) and issubclass(obj, torch.optim.Optimizer) and obj is not torch.optim.Optimizer

    return sorted(name for name in dir(torch.optim)
                  if is_optimizer(getattr(torch.optim, name)) and name.lower() not in DEEPSPEED_OPTIMIZERS)


def torch_variants(names: list[str]) -> dict[str, list[dict]]:
    """OPTIMIZER_VARIANTS-style entries for types resolved by getattr(torch.optim, type)."""
    return {name: [{"class": f"torch.optim.{name}", "offload": None, "default": True,
                    "when": f"getattr(torch.optim, '{name}') in _configure_basic_optimizer"}] for name in names}


def optimizer_defs() -> dict:
    """$defs/optimizer_params: DeepSpeed's names (lower-case) and reachable torch.optim classes."""
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS

    defs = {}
    for name in DEEPSPEED_OPTIMIZERS:
        defs[name] = muon_entry() if name == "muon" else optimizer_entry(name, table.OPTIMIZER_VARIANTS[name])
    for name, variants in torch_variants(torch_optimizer_names()).items():
        defs[name] = optimizer_entry(name, variants)
    unknown = set(table.OPTIMIZER_VARIANTS) - set(DEEPSPEED_OPTIMIZERS)
    if unknown or set(DEEPSPEED_OPTIMIZERS) - set(table.OPTIMIZER_VARIANTS):
        raise SchemaError(f"OPTIMIZER_VARIANTS and DEEPSPEED_OPTIMIZERS disagree: {sorted(unknown)}")
    return defs


# Argument checks the DeepSpeed schedulers make in __init__ (runtime/lr_schedules.py).
SCHEDULER_PARAM_KEYWORDS = {
    ("WarmupLR", "warmup_num_steps"): {"exclusiveMinimum": 0, "x-int-literal": True},
    ("WarmupDecayLR", "warmup_num_steps"): {"exclusiveMinimum": 0, "x-int-literal": True},
    ("WarmupCosineLR", "warmup_num_steps"): {"exclusiveMinimum": 0, "x-int-literal": True},
    ("LRRangeTest", "lr_range_test_step_size"): {"exclusiveMinimum": 0, "x-int-literal": True},
    ("OneCycle", "cycle_first_step_size"): {"exclusiveMinimum": 0},
    ("OneCycle", "cycle_second_step_size"): {"minimum": 0},
    # unknown values only warn and fall back to 'log'
    ("WarmupLR", "warmup_type"): {"enum": ["log", "linear"]},
    ("WarmupDecayLR", "warmup_type"): {"enum": ["log", "linear"]},
    ("WarmupCosineLR", "warmup_type"): {"enum": ["log", "linear"]},
}
# "(float or list)" in the DeepSpeed docstrings: one value per param group is accepted too.
_PER_GROUP_LISTS = {"warmup_min_lr", "warmup_max_lr", "cycle_min_lr", "cycle_max_lr", "lr_range_test_min_lr",
                    "cycle_min_mom", "cycle_max_mom", "warmup_min_ratio"}


def scheduler_defs() -> tuple[dict, dict]:
    """({name: kwargs schema}, {name: why it cannot be configured from JSON})."""
    import torch.optim.lr_scheduler as torch_sched
    from deepspeed.runtime import lr_schedules

    candidates = [(n, getattr(lr_schedules, n)) for n in lr_schedules.VALID_LR_SCHEDULES]
    base = (torch_sched.LRScheduler, getattr(torch_sched, "_LRScheduler", torch_sched.LRScheduler))
    candidates += [(n, getattr(torch_sched, n)) for n in sorted(dir(torch_sched))
                   if isinstance(getattr(torch_sched, n), type) and getattr(torch_sched, n) not in base
                   and (issubclass(getattr(torch_sched, n), torch_sched.LRScheduler) or n == "ReduceLROnPlateau")
                   and not hasattr(lr_schedules, n)]  # lr_schedules wins in _scheduler_from_config
    defs, unusable = {}, {}
    for name, cls in candidates:
        first = first_positional(cls).name
        if first != "optimizer":
            unusable[name] = f"its first parameter is '{first}', but DeepSpeed passes the optimizer there"
            continue
        try:
            props, required = class_kwargs(cls, set())
        except NotJsonConfigurable as err:
            unusable[name] = str(err)
            continue
        for (owner, param), note in table.PARAM_NOTES.items():
            if owner == name and param in props:
                props[param]["description"] = note
        for param, keywords in ((p, k) for (owner, p), k in SCHEDULER_PARAM_KEYWORDS.items() if owner == name):
            props[param].update(keywords)
        if name in lr_schedules.VALID_LR_SCHEDULES:
            for param in sorted(_PER_GROUP_LISTS & set(props)):
                props[param].update({"type": normalize_types([*type_list(props[param]), "array"]),
                                     "items": {"type": "number"}})
        is_ds = name in lr_schedules.VALID_LR_SCHEDULES
        source = "deepspeed.runtime.lr_schedules" if is_ds else "torch.optim.lr_scheduler"
        defs[name] = {"type": "object",
                      "description": f"Keyword arguments for {source}.{name} (scheduler(optimizer, **params)).",
                      "x-unknown-keys": "kwargs", "properties": props, "additionalProperties": False,
                      "required": required}
    return defs, unusable


def zero_supported_types(variants_by_type: dict[str, list[dict]]) -> dict:
    """Config types whose optimizer class is in ZERO_SUPPORTED_OPTIMIZERS, without/with offload.

    runtime/zero/utils.py is_zero_supported_optimizer checks type(optimizer) against the list
    (and appends MuonWithAuxAdam when importable); the classes come from OPTIMIZER_VARIANTS,
    i.e. runtime/engine.py _configure_basic_optimizer / get_optimizer_configuration.
    """
    from deepspeed.runtime.zero import utils as zero_utils

    supported = list(zero_utils.ZERO_SUPPORTED_OPTIMIZERS)
    with contextlib.suppress(ImportError):
        supported.append(resolve("deepspeed.runtime.zero.muon.muon_optimizer.MuonWithAuxAdam"))
    out: dict[str, list[str]] = {"without_offload": [], "with_offload": []}
    for type_name, variants in variants_by_type.items():
        for mode, offload in (("without_offload", False), ("with_offload", True)):
            chosen = [v for v in variants if v["default"] and v["offload"] in (offload, None)]
            if chosen and resolve(chosen[0].get("kwargs_to", chosen[0]["class"])) in supported:
                out[mode].append(type_name)
    return out


# ---------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------


def pointer_get(root: dict, pointer: str) -> dict:
    node = root
    for part in pointer.strip("/").split("/"):
        props = node.get("properties", {})
        if part not in props:
            raise SchemaError(f"pointer {pointer} does not resolve (missing {part!r})")
        node = props[part]
    return node


VALIDATION_KEYWORDS = ("type", "enum", "const", "pattern", "minimum", "maximum", "exclusiveMinimum",
                       "exclusiveMaximum", "minLength", "items", "prefixItems", "minItems", "maxItems")


def admit_auto(node: dict, who: list[str]) -> dict:
    """Wrap a leaf's constraints in anyOf [normal, {"const": "auto"}]; annotations stay outside."""
    inner = {k: node[k] for k in VALIDATION_KEYWORDS if k in node}
    outer = {k: v for k, v in node.items() if k not in inner}
    outer["anyOf"] = [inner, {"const": "auto"}]
    outer["x-auto"] = list(who)
    return order_keys(outer)


def apply_auto(root: dict) -> None:
    for pointer, who in HF_AUTO.items():
        parent_ptr, key = pointer.rsplit("/", 1)
        parent = pointer_get(root, parent_ptr) if parent_ptr else root
        if key not in parent.get("properties", {}):
            raise SchemaError(f"HF_AUTO pointer {pointer} does not resolve")
        parent["properties"][key] = admit_auto(parent["properties"][key], who)
        if pointer in HF_AUTO_FILL:
            parent["properties"][key]["x-auto-fill"] = dict(HF_AUTO_FILL[pointer])
    for pointer in HF_AUTO_FILL:
        if pointer not in HF_AUTO:
            raise SchemaError(f"HF_AUTO_FILL pointer {pointer} is not in HF_AUTO")
    for defs_name, keys in PARAMS_AUTO.items():
        for entry in root["$defs"][defs_name].values():
            for key in keys:
                if key in entry["properties"] and "not" not in entry["properties"][key]:
                    entry["properties"][key] = admit_auto(entry["properties"][key], HF)


def add_removed_keys(root: dict) -> None:
    """runtime/config.py _REMOVED_TOP_LEVEL_CONFIG_KEYS / _REMOVED_ZERO_CONFIG_KEYS."""
    from deepspeed.runtime import config as ds_config

    places = ((root, ds_config._REMOVED_TOP_LEVEL_CONFIG_KEYS),
              (root["properties"]["zero_optimization"], ds_config._REMOVED_ZERO_CONFIG_KEYS))
    for node, removed in places:
        for key, message in removed.items():
            if key in node["properties"]:
                raise SchemaError(f"removed key {key} is also a live key")
            node["properties"][key] = {"description": sentence(message), "not": {}, "x-removed": message}


def optimizer_type_keywords(torch_names: list[str]) -> dict:
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS

    return {"pattern": ci_pattern(list(DEEPSPEED_OPTIMIZERS))[:-2] + "|" + "|".join(torch_names) + ")$",
            "examples": list(DEEPSPEED_OPTIMIZERS) + torch_names,
            "x-enum-ci": list(DEEPSPEED_OPTIMIZERS), "x-enum": torch_names}


def type_dispatch(defs_name: str, defs: dict, case_insensitive: set[str]) -> list[dict]:
    """allOf entries: when 'type' names an entry, 'params' must match its $defs schema."""
    rules = []
    for name in defs:
        match = {"type": "string", "pattern": ci_pattern([name])} if name in case_insensitive else {"const": name}
        rules.append({"if": {"properties": {"type": match}, "required": ["type"]},
                      "then": {"properties": {"params": {"$ref": f"#/$defs/{defs_name}/{name}"}}}})
    return rules


def build_schema() -> dict:
    """The whole schema; DeepSpeed's import-time DeprecationWarnings (torch.jit in Muon) are muted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return _build_schema()


def _build_schema() -> dict:
    import deepspeed
    import pydantic
    import torch
    from deepspeed.runtime import lr_schedules
    from deepspeed.runtime.config import DEEPSPEED_OPTIMIZERS

    if deepspeed.__version__ != TARGET_DEEPSPEED:
        print(f"warning: generating from DeepSpeed {deepspeed.__version__}, the table targets {TARGET_DEEPSPEED}",
              file=sys.stderr)

    opt_defs = optimizer_defs()
    sched_defs, unusable = scheduler_defs()
    torch_names = torch_optimizer_names()

    generated = {"optimizer_type": optimizer_type_keywords(torch_names),
                 "scheduler_type": {"enum": [*sched_defs, None], "x-json-unconfigurable": unusable}}
    builder = TableBuilder(ModelWalker(), generated)
    properties = {key: builder.node(spec, f"/{key}") for key, spec in table.TOP_LEVEL.items()}

    zero = properties["zero_optimization"]
    zero["type"] = ["object", "boolean"]
    zero["x-legacy-forms"] = ZERO_LEGACY_BOOL
    properties["bfloat16"].update(LEGACY_BFLOAT16)
    properties["bfloat16"] = order_keys(properties["bfloat16"])
    properties["optimizer"]["allOf"] = type_dispatch("optimizer_params", opt_defs, set(DEEPSPEED_OPTIMIZERS))
    properties["scheduler"]["allOf"] = type_dispatch("scheduler_params", sched_defs, set())

    root = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": published_schemas.schema_id(SCHEMA_NAME),
        "title": f"DeepSpeed ds_config (DeepSpeed {deepspeed.__version__})",
        "description": "Keys DeepSpeed reads from ds_config.json, with DeepSpeed's own defaults, constraints, aliases, "
                       "deprecations and removals. Generated by tools/gen_schema.py; do not edit by hand.",
        "x-generator": "tools/gen_schema.py",
        "x-deepspeed-version": deepspeed.__version__,
        "x-pydantic-version": pydantic.VERSION,
        "x-torch-version": torch.__version__.split("+")[0],  # CPU and CUDA builds have the same signatures
        "x-conventions": CONVENTIONS,
        "x-deepspeed-optimizers": list(DEEPSPEED_OPTIMIZERS),
        "x-zero-supported-optimizers": {
            "$comment": "Config types whose optimizer class is in runtime/zero/utils.py ZERO_SUPPORTED_OPTIMIZERS "
                        "(others need zero_allow_untested_optimizer with ZeRO), from the class runtime/engine.py "
                        "_configure_basic_optimizer builds by default without / with optimizer offload.",
            **zero_supported_types({**table.OPTIMIZER_VARIANTS, **torch_variants(torch_names)}),
        },
        "x-deepspeed-schedulers": list(lr_schedules.VALID_LR_SCHEDULES),
        "type": "object",
        "x-unknown-keys": "ignored",
        "properties": {**copy.deepcopy(EDITOR_KEYS), **properties},
        "patternProperties": copy.deepcopy(COMMENT_KEYS),
        "additionalProperties": False,
        "allOf": copy.deepcopy(ROOT_RULES),
        "$defs": {"optimizer_params": opt_defs, "scheduler_params": sched_defs},
    }
    add_removed_keys(root)
    apply_auto(root)
    verify_table_defaults(root)
    reorder(root)
    return root


def reorder(node: dict) -> None:
    """Apply order_keys to every schema node below the root (some were edited after creation)."""
    children = list(node.get("properties", {}).items())
    children += [(name, entry) for defs in node.get("$defs", {}).values() for name, entry in defs.items()]
    for _name, child in children:
        if isinstance(child, dict):
            reorder(child)
    for container in [node.get("properties", {}), *node.get("$defs", {}).values()]:
        for key in list(container):
            container[key] = order_keys(container[key])
    if isinstance(node.get("additionalProperties"), dict):
        reorder(node["additionalProperties"])
        node["additionalProperties"] = order_keys(node["additionalProperties"])


# ---------------------------------------------------------------------------------------------
# Cross-checks of the maintained table against DeepSpeed
# ---------------------------------------------------------------------------------------------


def constants_defaults(*modules: Any) -> dict[str, Any]:
    """{key string: default} from NAME = "key" / NAME_DEFAULT pairs (ambiguous keys dropped)."""
    found: dict[str, set[str]] = {}
    for module in modules:
        names = vars(module)
        for name, value in names.items():
            if isinstance(value, str) and f"{name}_DEFAULT" in names:
                found.setdefault(value, set()).add(json.dumps(to_json(names[f"{name}_DEFAULT"])))
    return {key: json.loads(next(iter(vals))) for key, vals in found.items() if len(vals) == 1}


def default_probes() -> dict[str, tuple[dict, set[str]]]:
    """Pointer -> (defaults DeepSpeed computes for an empty section, keys to ignore)."""
    from deepspeed.autotuning import constants as at_constants
    from deepspeed.autotuning.config import DeepSpeedAutotuningConfig
    from deepspeed.module_inject.auto_ep_config import parse_autoep_config
    from deepspeed.profiling.config import DeepSpeedFlopsProfilerConfig
    from deepspeed.runtime import config as rt_config
    from deepspeed.runtime import constants as rt_constants
    from deepspeed.runtime.activation_checkpointing.config import ACT_CHKPT_DEFAULT
    from deepspeed.runtime.data_pipeline.config import get_data_efficiency_config
    from deepspeed.runtime.model_checkpointing.config import get_checkpoint_config, get_checkpoint_writer_config
    from deepspeed.runtime.swap_tensor.aio_config import AIO_DEFAULT_DICT

    top = constants_defaults(rt_constants)
    return {
        "": ({k: v for k, v in top.items() if k in table.TOP_LEVEL}, set()),
        "/activation_checkpointing": (ACT_CHKPT_DEFAULT, set()),
        "/flops_profiler": (vars(DeepSpeedFlopsProfilerConfig({})), set()),
        "/autotuning": (vars(DeepSpeedAutotuningConfig({})), {"start_step", "end_step", "model_info"}),
        "/autotuning/model_info": (at_constants.MODEL_INFO_KEY_DEFAULT_DICT, set()),
        "/aio": (AIO_DEFAULT_DICT, set()),
        "/pipeline": (rt_config.get_pipeline_config({}), set()),
        "/checkpoint": ({**{k: v for k, v in top.items() if k in table.CHECKPOINT["keys"]},
                         **get_checkpoint_config({"checkpoint": {}})}, {"writer"}),
        "/checkpoint/writer": (get_checkpoint_writer_config({"writer": {}}), set()),
        "/data_types": ({k: v for k, v in top.items() if k in table.DATA_TYPES["keys"]}, set()),
        "/data_efficiency": (get_data_efficiency_config({}), set()),
        "/expert_parallel": (vars(parse_autoep_config({"enabled": False})),
                             {"_load_balance_coeff_explicit", "expert_w3"}),
    }


def verify_table_defaults(root: dict) -> None:
    """Fail when a default in ds_dictget_keys.py differs from DeepSpeed, or DeepSpeed reads a key the table lacks."""
    problems = []

    def compare(node: dict, probe: dict, pointer: str, ignore: set[str]) -> None:
        props = node.get("properties", {})
        for key, value in probe.items():
            if key in ignore:
                continue
            if key not in props:
                problems.append(f"{pointer}/{key}: DeepSpeed reads it but the table does not list it")
                continue
            child = props[key]
            if isinstance(value, dict) and "properties" in child:
                compare(child, value, f"{pointer}/{key}", set())
            elif "default" in child and to_json(value) != child["default"]:
                problems.append(f"{pointer}/{key}: table default {child['default']!r} != DeepSpeed {to_json(value)!r}")

    for pointer, (probe, ignore) in default_probes().items():
        compare(pointer_get(root, pointer) if pointer else root, probe, pointer, ignore)
    if problems:
        raise SchemaError("tools/ds_dictget_keys.py disagrees with DeepSpeed:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------------------------------------
# Output and --check
# ---------------------------------------------------------------------------------------------


def render(schema: dict) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def check(path: pathlib.Path | None = None) -> tuple[bool, str]:
    """(up to date, summary with a unified diff) for the committed schema: both copies, or the file ``path``."""
    expected = render(build_schema())
    paths = [path] if path is not None else published_schemas.targets(SCHEMA_NAME)
    summaries = [_check_one(p, expected) for p in paths]
    return all(ok for ok, _ in summaries), "\n".join(summary for _, summary in summaries)


def _check_one(path: pathlib.Path, expected: str) -> tuple[bool, str]:
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    shown_path = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    if current == expected:
        return True, f"{shown_path} is up to date"
    diff = list(difflib.unified_diff(current.splitlines(), expected.splitlines(),
                                     f"{path.name} (committed)", f"{path.name} (generated)", lineterm="", n=1))
    added = sum(1 for line in diff if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in diff if line.startswith("-") and not line.startswith("---"))
    shown = diff[:80]
    more = f"\n... {len(diff) - len(shown)} more diff lines" if len(diff) > len(shown) else ""
    summary = (f"{shown_path} is out of date (+{added} -{removed} lines); "
               f"run: python tools/gen_schema.py\n" + "\n".join(shown) + more)
    return False, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if the committed schema differs from a fresh build")
    parser.add_argument("--output", type=pathlib.Path, default=None,
                        help="one schema file to write or check (default: both copies, zeroadvisor/schemas/ and "
                             "schemas/)")
    args = parser.parse_args(argv)
    if args.check:
        ok, summary = check(args.output)
        print(summary)
        return 0 if ok else 1
    text = render(build_schema())
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        written = [args.output]
    else:
        written = published_schemas.write(SCHEMA_NAME, text)
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    sys.exit(main())

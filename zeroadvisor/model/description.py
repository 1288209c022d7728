"""Model descriptions: what the memory model is told about the network and its training.

A description is one of

* a Hugging Face ``config.json`` (recognised by its ``model_type`` key): counted exactly
  by :mod:`zeroadvisor.model.hf`;
* a zeroadvisor YAML or JSON file (JSON is read by the same YAML path) with either
  ``hf_config: path/to/config.json`` (relative to the file) or ``parameters: 7.5B`` plus
  optional architecture fields, and the training shape (``sequence_length``,
  ``activation_checkpointing``, ``flash_attention``).

:data:`FIELDS` is the single source of truth for the description keys: the loader checks
against it and ``tools/gen_model_schema.py`` writes ``zeroadvisor/schemas/model.schema.json`` from it.

Every problem is a one-line :class:`~zeroadvisor.model.errors.ModelError` naming the file,
line and column (1-based) of the offending key, or of its value when the value is wrong.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from pathlib import Path
from typing import Any, get_args

from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.hfconfig import check_dimension, fmt
from zeroadvisor.model.spec import Checkpointing, ModelSpec, TrainingShape

SCHEMA_FILE = "model.schema.json"
MAX_BYTES = 16 * 1024 * 1024  # a description or config.json is a few kB; refuse anything absurd

CHECKPOINTING: tuple[str, ...] = get_args(Checkpointing)  # ("none", "selective", "full")

# A parameter count as text: an integer part (digits with _ separators, or commas between
# groups of exactly three digits, so that "1,5B" cannot silently read as 15B), an optional
# fraction and exponent, then an optional K/M/B/T suffix in either case: 7.5B, 70b, 1.3e9,
# 125M, 6,738,415,616. The schema's pattern and the parser are built from the same pieces.
_INT = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9][0-9_]*)"
_FRACTION, _EXPONENT, _SUFFIXES = r"(?:\.[0-9]+)?", r"(?:[eE][+-]?[0-9]+)?", "kKmMbBtT"
COUNT_PATTERN = rf"^\s*{_INT}{_FRACTION}{_EXPONENT}\s*[{_SUFFIXES}]?\s*$"
_COUNT = re.compile(
    rf"^(?P<mantissa>{_INT}{_FRACTION})(?:[eE](?P<exp>[+-]?[0-9]+))?\s*(?P<suffix>[{_SUFFIXES}]?)$"
)
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_MAX_EXACT_FLOAT = 2**53
# 1e30 parameters is not a model (the largest have ~1e12); the bound keeps byte counts in float range.
MAX_PARAMETERS = 10**30  # above this a YAML/JSON float no longer names one integer


@dataclass(frozen=True, slots=True)
class DescriptionField:
    """One key of a model description: its JSON Schema, and the words errors use."""

    name: str
    group: str  # "source" | "architecture" | "training"
    schema: Mapping[str, Any]
    expect: str  # completes "<name> must be ...", e.g. "an integer > 0"
    help: str


_POSITIVE = {"type": "integer", "minimum": 1}

FIELDS: tuple[DescriptionField, ...] = (
    DescriptionField(
        "hf_config",
        "source",
        {"type": "string", "minLength": 1},
        "a path to a Hugging Face config.json",
        "Path (relative to this file) of a Hugging Face config.json; the parameter count "
        "and architecture are derived from it exactly.",
    ),
    DescriptionField(
        "parameters",
        "source",
        {
            "anyOf": [
                {"type": "integer", "minimum": 1},
                {"type": "number", "exclusiveMinimum": 0},
                {"type": "string", "pattern": COUNT_PATTERN},
            ]
        },
        "an integer > 0 or a count like 7.5B, 70b, 1.3e9, 125M, 1T",
        "Total parameter count when there is no config.json: an integer or a string with "
        "an optional K/M/B/T suffix (7.5B = 7,500,000,000 exactly).",
    ),
    DescriptionField(
        "num_layers", "architecture", _POSITIVE, "an integer > 0", "Number of transformer layers."
    ),
    DescriptionField(
        "hidden_size", "architecture", _POSITIVE, "an integer > 0", "Model (residual) width."
    ),
    DescriptionField(
        "num_attention_heads", "architecture", _POSITIVE, "an integer > 0", "Attention heads."
    ),
    DescriptionField(
        "num_key_value_heads",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Key/value heads (grouped-query attention); defaults to num_attention_heads.",
    ),
    DescriptionField(
        "intermediate_size",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "MLP width (per expert for mixture-of-experts models).",
    ),
    DescriptionField("vocab_size", "architecture", _POSITIVE, "an integer > 0", "Vocabulary size."),
    DescriptionField(
        "encoder_layers",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Encoder-decoder models: layers of the encoder stack (run over the source sequence).",
    ),
    DescriptionField(
        "decoder_layers",
        "architecture",
        _POSITIVE,
        "an integer > 0",
        "Encoder-decoder models: layers of the decoder stack (run over the target sequence, with "
        "cross-attention to the source).",
    ),
    DescriptionField(
        "lm_head",
        "architecture",
        {"type": "boolean"},
        "true or false",
        "Whether the model computes vocabulary-wide logits (a language-model head, as *ForCausalLM, "
        "*ForMaskedLM, *ForConditionalGeneration); false for classifiers. Unknown: assumed true.",
    ),
    DescriptionField(
        "sequence_length",
        "training",
        _POSITIVE,
        "an integer > 0",
        "Training sequence length in tokens.",
    ),
    DescriptionField(
        "activation_checkpointing",
        "training",
        {"enum": list(CHECKPOINTING)},
        "one of " + ", ".join(CHECKPOINTING),
        "Activation checkpointing: none, selective (attention recomputed) or full "
        "(only layer inputs kept).",
    ),
    DescriptionField(
        "flash_attention",
        "training",
        {"type": "boolean"},
        "true or false",
        "Whether attention runs a fused (flash / memory-efficient) kernel that does not "
        "materialise the score matrix.",
    ),
)
_BY_NAME = {f.name: f for f in FIELDS}
ARCHITECTURE_FIELDS = tuple(f.name for f in FIELDS if f.group == "architecture")


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of a model description, generated from :data:`FIELDS`."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "zeroadvisor model description",
        "description": (
            "A model description for zeroadvisor: hf_config or parameters, optional "
            "architecture fields (only with parameters) and the training shape. A Hugging "
            "Face config.json (with model_type) is accepted instead and is not described here. "
            "Generated by tools/gen_model_schema.py from zeroadvisor/model/description.py."
        ),
        "type": "object",
        "properties": {f.name: {**f.schema, "description": f.help} for f in FIELDS},
        "additionalProperties": False,
        "oneOf": [{"required": ["hf_config"]}, {"required": ["parameters"]}],
        "if": {"required": ["hf_config"]},
        "then": {"not": {"anyOf": [{"required": [name]} for name in ARCHITECTURE_FIELDS]}},
    }


# --------------------------------------------------------------------------- counts


def parse_count(value: Any, what: str = "parameters") -> int:
    """A parameter count, exactly: ``7.5B`` -> 7_500_000_000, ``1.3e9``, ``125M``, ``70b``.

    Accepts an int, an integral float (up to 2**53, where floats stop being exact) or a
    string; rejects zero, negatives and fractional counts (``1.5``, ``1.2345K``).
    Decimal arithmetic keeps ``7.5B`` exact (a float would give 7499999999.999999...).
    """
    if isinstance(value, bool):
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(value)}")
    if isinstance(value, int):
        count = Fraction(value)
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")) or abs(value) > _MAX_EXACT_FLOAT:
            raise ModelError(
                f"{what} {value!r} is not an exact count; write it as an integer or a "
                "string like 7.5B"
            )
        count = Fraction(value)
    elif isinstance(value, str):
        count = _parse_count_text(value, what)
    else:
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(value)}")
    if count <= 0:
        raise ModelError(f"{what} must be > 0, got {fmt(value)}")
    if count.denominator != 1:
        raise ModelError(f"{what} {fmt(value)} is not a whole number of parameters")
    if count > MAX_PARAMETERS:
        raise ModelError(f"{what} {fmt(value)} is out of range (at most 1e30)")
    return int(count)


def _parse_count_text(text: str, what: str) -> Fraction:
    stripped = text.strip()
    if stripped.startswith("-"):
        raise ModelError(f"{what} must be > 0, got {fmt(text)}")
    match = _COUNT.match(stripped)
    if not match:
        raise ModelError(f"{what} must be a count like 7.5B, 70b, 1.3e9, 125M or 1T, got {fmt(text)}")
    try:
        mantissa = Decimal(match["mantissa"].replace("_", "").replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regex admits only decimal digits
        raise ModelError(f"{what} must be a count like 7.5B, got {fmt(text)}") from None
    exponent = int(match["exp"] or 0)
    if abs(exponent) > 30:  # 1e30 parameters is not a model; also bounds the arithmetic
        raise ModelError(f"{what} {fmt(text)} is out of range")
    scale = Fraction(10) ** exponent * _SUFFIX[match["suffix"].lower()]
    return Fraction(mantissa) * scale


def spec_from_params(n: int | str, source: str = "--params") -> ModelSpec:
    """A ModelSpec that knows only the parameter count (e.g. from ``--params 7B``)."""
    return ModelSpec(parameters=parse_count(n, "--params"), source=source)


def apply_overrides(
    shape: TrainingShape,
    seq_len: int | None = None,
    checkpointing: str | None = None,
    flash: bool | None = None,
) -> TrainingShape:
    """``shape`` with the CLI's --seq-len / --activation-checkpointing /
    --flash-attention|--no-flash-attention applied (None leaves a value as it is)."""
    changes: dict[str, Any] = {}
    if seq_len is not None:
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
            raise ModelError(f"--seq-len must be an integer > 0, got {fmt(seq_len)}")
        check_dimension("--seq-len", seq_len)
        changes["sequence_length"] = seq_len
    if checkpointing is not None:
        if checkpointing not in CHECKPOINTING:
            raise ModelError(
                f"--activation-checkpointing must be one of {', '.join(CHECKPOINTING)}, "
                f"got {fmt(checkpointing)}"
            )
        changes["activation_checkpointing"] = checkpointing
    if flash is not None:
        if not isinstance(flash, bool):
            raise ModelError(f"--flash-attention must be true or false, got {fmt(flash)}")
        changes["flash_attention"] = flash
    return dataclasses.replace(shape, **changes) if changes else shape


# --------------------------------------------------------------------------- files


@dataclass(frozen=True, slots=True)
class _Where:
    key: tuple[int, int]  # 1-based line, column of the key
    value: tuple[int, int]  # ... and of its value


@dataclass(frozen=True, slots=True)
class _Document:
    file: str
    data: Any
    where: Mapping[str, _Where]  # top-level keys

    def error(self, message: str, key: str | None = None, at_value: bool = True) -> ModelError:
        where = self.where.get(key) if key is not None else None
        line, column = (where.value if at_value else where.key) if where else (None, None)
        return ModelError(message, file=self.file, line=line, column=column, key=key)

    def locate(self, err: ModelError) -> ModelError:
        """An error from the counting code, placed at the config key it names."""
        where = self.where.get(err.key) if err.key is not None else None
        line, column = where.value if where else (None, None)
        return err.located(self.file, line, column)


def _read(path: Path) -> _Document:
    """Parse a YAML or JSON file, keeping where each top-level key sits."""
    import yaml

    file = str(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ModelError("no such file", file=file) from None
    except IsADirectoryError:
        raise ModelError("is a directory, not a model description", file=file) from None
    except OSError as err:
        raise ModelError(f"cannot read: {err.strerror or err}", file=file) from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ModelError("is UTF-16 (it starts with a UTF-16 byte-order mark): save it as UTF-8", file=file)
    if len(raw) > MAX_BYTES:
        raise ModelError(f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not a model description", file=file)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise ModelError(
            f"not UTF-8 (byte 0x{raw[err.start]:02x} at offset {err.start})", file=file, line=line
        ) from None
    if not text.strip():
        raise ModelError("is empty: expected hf_config or parameters", file=file)

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        problem = err.problem or err.context or "syntax error"
        raise ModelError(
            f"invalid YAML/JSON: {problem}",
            file=file,
            line=mark.line + 1 if mark else None,
            column=mark.column + 1 if mark else None,
        ) from None
    except (yaml.YAMLError, RecursionError, ValueError) as err:
        raise ModelError(f"invalid YAML/JSON: {err}", file=file) from None
    finally:
        loader.dispose()
    if data is None:
        raise ModelError("is empty: expected hf_config or parameters", file=file)
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise ModelError(
            f"must be a mapping of keys (hf_config: or parameters: ...), got {kind}",
            file=file,
            line=node.start_mark.line + 1,
            column=node.start_mark.column + 1,
        )

    where: dict[str, _Where] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value)
        spot = _Where(
            (key_node.start_mark.line + 1, key_node.start_mark.column + 1),
            (value_node.start_mark.line + 1, value_node.start_mark.column + 1),
        )
        if key in where:
            line, column = spot.key
            first = where[key].key[0]
            raise ModelError(
                f"duplicate key {key} (first given on line {first})",
                file=file,
                line=line,
                column=column,
                key=key,
            )
        where[key] = spot
    return _Document(file, data, where)


def load_hf_config(path: str | Path) -> tuple[dict[str, Any], ModelSpec]:
    """A Hugging Face config.json and its exact ModelSpec; errors are located in the file."""
    doc = _read(Path(path))
    if "model_type" not in doc.data:
        raise ModelError("not a Hugging Face config.json: it has no model_type key", file=doc.file)
    try:
        return doc.data, spec_from_hf_config(doc.data, source=doc.file)
    except ModelError as err:
        raise doc.locate(err) from None


def load_description(path: str | Path) -> tuple[ModelSpec, TrainingShape]:
    """The ModelSpec and TrainingShape a model description (or a config.json) gives."""
    path = Path(path)
    doc = _read(path)
    data: dict[Any, Any] = doc.data
    if "model_type" in data:  # a Hugging Face config.json given directly
        try:
            return spec_from_hf_config(data, source=doc.file), TrainingShape()
        except ModelError as err:
            raise doc.locate(err) from None

    for key in data:
        if str(key) not in _BY_NAME:
            close = difflib.get_close_matches(str(key), list(_BY_NAME), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            known = ", ".join(_BY_NAME)
            raise doc.error(
                f"unknown key {key}{hint}; a model description has: {known}", str(key), at_value=False
            )
    if "hf_config" in data and "parameters" in data:
        raise doc.error(
            "give either hf_config or parameters, not both (the config.json already fixes the count)",
            "parameters",
            at_value=False,
        )
    if "hf_config" not in data and "parameters" not in data:
        raise doc.error("needs hf_config (a config.json) or parameters (a count like 7.5B)")
    if "hf_config" in data:
        for name in ARCHITECTURE_FIELDS:
            if name in data:
                raise doc.error(
                    f"{name} cannot be given with hf_config: the config.json defines it "
                    "(remove it, or use parameters: instead of hf_config:)",
                    name,
                    at_value=False,
                )
    _validate(doc)
    for field in FIELDS:
        if field.schema is _POSITIVE and field.name in data:
            try:
                check_dimension(field.name, data[field.name])
            except ModelError as err:
                raise doc.error(err.message, field.name) from None

    if "hf_config" in data:
        target = path.parent / str(data["hf_config"])
        if not target.is_file():
            raise doc.error(f"hf_config {target} does not exist", "hf_config")
        _, spec = load_hf_config(target)
        spec = dataclasses.replace(spec, source=f"{doc.file} -> {target}")
    else:
        try:
            count = parse_count(data["parameters"])
        except ModelError as err:
            raise doc.error(err.message, "parameters") from None
        stacks = [data[name] for name in ("encoder_layers", "decoder_layers") if name in data]
        if stacks and "num_layers" in data and data["num_layers"] != sum(stacks):
            raise doc.error(
                f"num_layers {data['num_layers']} is not encoder_layers + decoder_layers ({sum(stacks)})",
                "num_layers",
            )
        spec = ModelSpec(
            parameters=count,
            source=doc.file,
            **{name: data[name] for name in ARCHITECTURE_FIELDS if name in data},
        )
        if stacks and spec.num_layers is None:
            spec = dataclasses.replace(spec, num_layers=sum(stacks))
    shape = TrainingShape(
        sequence_length=data.get("sequence_length"),
        activation_checkpointing=data.get("activation_checkpointing", "none"),
        flash_attention=data.get("flash_attention", True),
    )
    return spec, shape


def _validate(doc: _Document) -> None:
    """Check the description against zeroadvisor/schemas/model.schema.json, one error at a time, in
    file order; the message is the field's own wording, located at its value."""
    import jsonschema

    from zeroadvisor.deepspeed.schema import load

    validator = jsonschema.Draft202012Validator(load(SCHEMA_FILE))
    errors = list(validator.iter_errors(doc.data))
    if not errors:
        return

    def order(err: jsonschema.ValidationError) -> tuple[int, int, int]:
        key = str(err.absolute_path[0]) if err.absolute_path else None
        where = doc.where.get(key) if key is not None else None
        return (0, *where.key) if where else (1, 0, 0)  # errors about a key first

    first = min(errors, key=order)
    if first.absolute_path:
        key = str(first.absolute_path[0])
        field = _BY_NAME[key]
        raise doc.error(f"{key} must be {field.expect}, got {fmt(doc.data[key])}", key)
    raise doc.error(first.message)  # pragma: no cover - the checks above come first


__all__ = [
    "ARCHITECTURE_FIELDS",
    "CHECKPOINTING",
    "COUNT_PATTERN",
    "FIELDS",
    "apply_overrides",
    "json_schema",
    "load_description",
    "load_hf_config",
    "parse_count",
    "spec_from_params",
]

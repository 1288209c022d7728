"""Reading the keys of a Hugging Face ``config.json`` the way transformers' config classes do.

transformers 5 configs are dataclasses: a key absent from ``config.json`` takes the class
default, an ``attribute_map`` entry lets a second spelling set the same field (GPT-2's
``hidden_size`` is ``n_embd``), and ``__post_init__`` replaces some ``None`` values (Llama's
``num_key_value_heads=None`` becomes ``num_attention_heads``). Each family in families.py
lists the keys it reads as :class:`Field` rows with those defaults and spellings.

One deliberate difference: the keys that size the large matrices (hidden size, layer and
head counts, vocabulary, MLP widths, expert counts) are *required* here although
transformers has defaults for them. A config.json without ``hidden_size`` is truncated or
for another model; silently counting a 4096-wide default would be a wrong answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from zeroadvisor.config.limits import MAX_DIMENSION
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.model.errors import ModelError


class _Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


REQUIRED: Final = _Marker("REQUIRED")  # no default: the key must be in config.json
DERIVED: Final = _Marker("DERIVED")  # absent or null: the family builder derives it (value None)
# A config class's default for a key: a value, or one of the markers.
Default: TypeAlias = "JSONValue | _Marker"

_KIND_TEXT = {
    "pos": "an integer > 0",
    "nonneg": "an integer >= 0",
    "bool": "true or false",
    "str": "a string",
    "ints": "a list of integers >= 0",
}


@dataclass(frozen=True, slots=True)
class Field:
    """One config key as a transformers config class declares it.

    ``default`` is the class default (or REQUIRED / DERIVED). ``keys`` are the spellings
    transformers accepts, its field name first, then the ``attribute_map`` (or
    ``__post_init__``) aliases; empty means just the row's name. The row's name is the
    builders' name for the value (``hidden_size`` also for GPT-2's ``n_embd``).
    ``nullable`` says that JSON ``null`` is meaningful (transformers replaces it or tests
    ``is None``); elsewhere null would crash transformers and is an error here.
    """

    default: Default = REQUIRED
    kind: str = "pos"
    keys: tuple[str, ...] = ()
    nullable: bool | None = None

    @property
    def accepts_null(self) -> bool:
        return self.nullable if self.nullable is not None else self.default is DERIVED


def fmt(value: object) -> str:
    """A config value as the user wrote it (JSON spelling: "4k", null, true), one line.

    Containers are named, not printed: an error message stays one line, and a YAML alias
    bomb is never expanded.
    """
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check(key: str, kind: str, value: JSONValue) -> JSONValue:
    ok: bool
    if kind in ("pos", "nonneg"):
        ok = isinstance(value, int) and not isinstance(value, bool) and (value > 0 if kind == "pos" else value >= 0)
    elif kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "ints":
        ok = isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value
        )
    else:  # pragma: no cover - a table bug
        raise AssertionError(kind)
    if not ok:
        raise ModelError(f"{key} must be {_KIND_TEXT[kind]}, got {fmt(value)}", key=key)
    if isinstance(value, int) and not isinstance(value, bool):  # pos, nonneg
        check_dimension(key, value)
    elif isinstance(value, list):  # ints: the largest
        check_dimension(key, max((v for v in value if isinstance(v, int)), default=0))
    return value


def check_dimension(key: str, value: int) -> None:
    """ModelError for a size beyond MAX_DIMENSION (no model has one; see config/limits.py)."""
    if value > MAX_DIMENSION:
        raise ModelError(f"{key} {fmt(value)} is larger than any model has (at most {MAX_DIMENSION:,})", key=key)


class Cfg:
    """Resolved config values by canonical name, remembering which ones config.json gave."""

    def __init__(
        self,
        model_type: str,
        values: dict[str, JSONValue],
        spelled: dict[str, str],
        fields: Mapping[str, Field],
    ) -> None:
        self.model_type = model_type
        self._values = values
        self._spelled = spelled  # row name -> the spelling found in config.json
        self._fields = fields

    # The builders compute with the values; each was checked against its Field's kind (an int, a bool, a
    # str, a list of ints) where it was read, so the attribute is not narrowed again at every use.
    def __getattr__(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:  # a builder reading a key its family table does not declare
            raise AttributeError(f"{self.model_type} has no field {name!r}") from None

    def given(self, name: str) -> bool:
        return name in self._spelled

    def key(self, name: str) -> str:
        """How config.json spells ``name`` (for locating errors about it)."""
        if name in self._spelled:
            return self._spelled[name]
        field = self._fields.get(name)
        return field.keys[0] if field is not None and field.keys else name

    def need(self, name: str, why: str) -> Any:
        """A value that is only required in some configurations (e.g. the dense MLP width
        of an MoE model that has dense layers)."""
        if not self.given(name):
            raise ModelError(f"missing key {self.key(name)} for model_type {self.model_type} ({why})")
        return self._values[name]

    def fail(self, name: str, message: str) -> ModelError:
        """An error about the value of ``name``, located at its key."""
        return ModelError(message, key=self.key(name))


def resolve(
    model_type: str,
    fields: Mapping[str, Field],
    config: Mapping[str, JSONValue],
    extra: Mapping[str, JSONValue] | None = None,
) -> Cfg:
    """The values of ``fields`` in ``config``; ``extra`` adds values computed elsewhere."""
    values: dict[str, JSONValue] = dict(extra or {})
    spelled: dict[str, str] = {}
    for name, spec in fields.items():
        keys = spec.keys or (name,)
        found = [(k, config[k]) for k in keys if k in config]
        if len({fmt(v) for _, v in found}) > 1:
            (k1, v1), (k2, v2) = found[0], found[1]
            raise ModelError(
                f"{k1} ({fmt(v1)}) and {k2} ({fmt(v2)}) set the same {model_type} "
                f"field {name} to different values",
                key=k2,
            )
        if not found:
            if spec.default is REQUIRED:
                raise ModelError(
                    f"missing required key {keys[0]}{_also(keys[1:])} for model_type "
                    f"{model_type}: it sizes the weights, and transformers' default would be a guess"
                )
            values[name] = None if isinstance(spec.default, _Marker) else spec.default  # DERIVED: None
            continue
        key, value = found[0]
        spelled[name] = key
        if value is None and spec.accepts_null:
            values[name] = None
            continue
        values[name] = _check(key, spec.kind, value)
    return Cfg(model_type, values, spelled, fields)


def _also(aliases: Iterable[str]) -> str:
    aliases = list(aliases)
    if not aliases:
        return ""
    return " (or " + ", ".join(aliases) + ")"

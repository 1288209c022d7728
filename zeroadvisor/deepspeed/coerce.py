"""Which JSON values DeepSpeed's pydantic sections accept for a declared type.

DeepSpeed's config models validate in pydantic's lax mode (DeepSpeedConfigModel,
deepspeed/runtime/config_utils.py), so some values of the wrong JSON type are coerced
rather than rejected: ``"5"`` and ``true`` for an int, ``1`` and ``"yes"`` for a bool,
``5e8`` for an int. The table below mirrors pydantic 2's lax-mode rules (measured with
pydantic 2.14: int accepts bool, integral floats and numeric strings; bool accepts 0/1,
1.0 and the strings below; float accepts ints, bools and numeric strings).

Only the pydantic sections coerce. The sections DeepSpeed reads with ``dict.get`` take the
JSON value as it is: there a string ``"false"`` is truthy (Python ``if``), so ``LAX_TRUE`` does
not describe them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

# The strings pydantic 2's lax bool validator accepts, compared case-insensitively and without
# stripping whitespace (pydantic-core src/input/shared.rs str_as_bool; measured with pydantic
# 2.14: "T", "YES", "On" pass, " true " fails).
LAX_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
LAX_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})


def lax_bool(value: object) -> bool | None:
    """The bool a pydantic section makes of ``value`` in lax mode; None where it rejects it."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return bool(value) if value in (0, 1) else None
    if isinstance(value, str):
        text = value.lower()
        return True if text in LAX_TRUE else False if text in LAX_FALSE else None
    return None


# Python type -> JSON Schema type name, in the order they are tried (bool before int: True is an int)
_JSON_TYPES: tuple[tuple[type, str], ...] = ((bool, "boolean"), (int, "integer"), (str, "string"), (list, "array"))


def json_type(value: object) -> str:
    """The JSON Schema type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), "object")


def matches(value: object, expected: str) -> bool:
    """Strict JSON Schema type match (an integral float is an integer, as in JSON Schema)."""
    actual = json_type(value)
    return actual == expected or (expected == "number" and actual == "integer")


def is_fractional(value: object) -> bool:
    return isinstance(value, float) and math.isfinite(value) and not value.is_integer()


def lax_coercible(value: object, expected: str) -> bool:
    """True if pydantic's lax mode turns ``value`` into ``expected`` without an error."""
    if matches(value, expected):
        return True
    coercible = _LAX.get(expected)
    return coercible is not None and coercible(value)


def _lax_integer(value: object) -> bool:
    return isinstance(value, bool) or (isinstance(value, str) and _int_from_string(value))


def _lax_number(value: object) -> bool:
    if isinstance(value, bool):
        return True
    if not isinstance(value, str):
        return False
    try:
        float(value.strip())
    except ValueError:
        return False
    return True


def _lax_boolean(value: object) -> bool:
    return lax_bool(value) is not None


# JSON Schema type -> whether pydantic's lax mode turns a value of another type into it; no other type coerces
_LAX: dict[str, Callable[[object], bool]] = {"integer": _lax_integer, "number": _lax_number, "boolean": _lax_boolean}


def _int_from_string(text: str) -> bool:
    stripped = text.strip()
    try:
        return float(stripped).is_integer() and "e" not in stripped.lower()
    except ValueError:
        return False

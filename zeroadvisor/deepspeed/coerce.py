"""Which JSON values DeepSpeed's pydantic sections accept for a declared type.

DeepSpeed's config models validate in pydantic's lax mode (DeepSpeedConfigModel,
deepspeed/runtime/config_utils.py), so some values of the wrong JSON type are coerced
rather than rejected: ``"5"`` and ``true`` for an int, ``1`` and ``"yes"`` for a bool,
``5e8`` for an int. The table below mirrors pydantic 2's lax-mode rules (measured with
pydantic 2.14: int accepts bool, integral floats and numeric strings; bool accepts 0/1,
1.0 and the strings below; float accepts ints, bools and numeric strings).
"""

from __future__ import annotations

import math
from typing import Any

_TRUE_STRINGS = {"1", "on", "t", "true", "y", "yes"}
_FALSE_STRINGS = {"0", "off", "f", "false", "n", "no"}


def json_type(value: Any) -> str:
    """The JSON Schema type name of a parsed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def matches(value: Any, expected: str) -> bool:
    """Strict JSON Schema type match (an integral float is an integer, as in JSON Schema)."""
    actual = json_type(value)
    return actual == expected or (expected == "number" and actual == "integer")


def is_fractional(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and not value.is_integer()


def lax_coercible(value: Any, expected: str) -> bool:
    """True if pydantic's lax mode turns ``value`` into ``expected`` without an error."""
    if matches(value, expected):
        return True
    if expected == "integer":
        if isinstance(value, bool):
            return True
        if isinstance(value, str):
            return _int_from_string(value)
        return False
    if expected == "number":
        if isinstance(value, bool):
            return True
        if isinstance(value, str):
            try:
                float(value.strip())
            except ValueError:
                return False
            return True
        return False
    if expected == "boolean":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value in (0, 1)
        if isinstance(value, str):
            return value.strip().lower() in _TRUE_STRINGS | _FALSE_STRINGS
        return False
    return False


def _int_from_string(text: str) -> bool:
    stripped = text.strip()
    try:
        return float(stripped).is_integer() and "e" not in stripped.lower()
    except ValueError:
        return False

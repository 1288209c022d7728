"""Byte sizes in and out: ``parse_size("80GiB")`` and ``format_bytes(n, "GB")``.

Decimal units (kB/KB, MB, GB, TB, PB) are powers of 1000, binary units (KiB, MiB, GiB, TiB,
PiB) powers of 1024; "B" is bytes. Parsing is exact (decimal arithmetic, no floats), so
"1.5TiB" is exactly 1.5 * 2**40 bytes. A bare number is refused: "80" could be GB or GiB.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "pb": 10**15,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
    "pib": 2**50,
}

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?\s*([A-Za-z]+)\s*$")

FORMAT_UNITS = ("GB", "GiB")
# What reports print by default: GiB, as nvidia-smi, torch.cuda and DeepSpeed's see_memory_usage do; the ZeRO
# paper's accounting keeps the paper's decimal GB (its 7.5B example: 120 / 41.25 / 28.125 / 15 GB).
DEFAULT_UNIT = "GiB"
PAPER_UNIT = "GB"


def unit_for(accounting: str) -> str:
    """The unit a report of ``accounting`` ("deepspeed" | "paper") prints when none is asked for."""
    return PAPER_UNIT if accounting == "paper" else DEFAULT_UNIT


def parse_size(text: str) -> int:
    """Bytes in ``text`` such as "80GiB", "80GB", "1TB", "1.5TiB", "512MiB" (exact int).

    Raises ValueError (one line) for a bare number, an unknown unit, or a fraction of a byte.
    """
    if not isinstance(text, str):
        raise ValueError(f"size must be a string with a unit such as '80GiB', got {text!r}")
    match = _SIZE.match(text)
    if match is None:
        if re.match(r"^\s*[0-9.eE+-]+\s*$", text):
            raise ValueError(f"size {text!r} has no unit: write e.g. '{text.strip()}GB' or '{text.strip()}GiB'")
        raise ValueError(f"cannot read size {text!r}: expected a number and a unit such as '80GiB' or '1.5TB'")
    number, exponent, unit = match.groups()
    factor = _UNITS.get(unit.lower())
    if factor is None:
        known = ", ".join(("B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"))
        raise ValueError(f"unknown size unit {unit!r} in {text!r}; use one of {known}")
    try:
        value = Decimal(number) * (Decimal(10) ** int(exponent or 0)) * factor
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only valid numbers
        raise ValueError(f"cannot read size {text!r}") from exc
    if value != value.to_integral_value():
        raise ValueError(f"size {text!r} is not a whole number of bytes ({value} B)")
    return int(value)


def format_bytes(n: int | float, unit: str = DEFAULT_UNIT, digits: int = 2) -> str:
    """``n`` bytes as e.g. "41.25 GB" or "38.42 GiB"; always labelled with the unit."""
    if unit not in FORMAT_UNITS:
        raise ValueError(f"unit must be one of {', '.join(FORMAT_UNITS)}, got {unit!r}")
    return f"{scale(n, unit):.{digits}f} {unit}"


def scale(n: int | float, unit: str = DEFAULT_UNIT) -> float:
    """``n`` bytes expressed in ``unit`` (GB = 1e9 bytes, GiB = 2**30 bytes)."""
    factor = _UNITS.get(unit.lower())
    if factor is None:
        raise ValueError(f"unknown unit {unit!r}")
    return n / factor

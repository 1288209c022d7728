from __future__ import annotations

import pytest

from zeroadvisor.units import format_bytes, parse_size, unit_for


@pytest.mark.parametrize(("text", "expected"), [
    ("80GiB", 80 * 2**30),
    ("80GB", 80 * 10**9),
    ("1TB", 10**12),
    ("1.5TiB", 3 * 2**39),
    ("512MiB", 512 * 2**20),
    ("80 GB", 80 * 10**9),
    ("0.5KiB", 512),
    ("100B", 100),
    ("1.25PB", 1_250_000_000_000_000),
    ("80gib", 80 * 2**30),
    ("1e3MB", 10**9),
])
def test_parse_size_exact(text, expected):
    assert parse_size(text) == expected
    assert isinstance(parse_size(text), int)


@pytest.mark.parametrize("text", ["80", "80.5", "", "GB", "80XB", "80 G", "1.5B", "-1GB", "eighty GB"])
def test_parse_size_rejects(text):
    with pytest.raises(ValueError) as info:
        parse_size(text)
    assert "\n" not in str(info.value)


def test_bare_number_message_suggests_units():
    with pytest.raises(ValueError, match="no unit"):
        parse_size("80")


def test_format_bytes_labelled():
    assert format_bytes(41_250_000_000, "GB") == "41.25 GB"
    assert format_bytes(150_000_000_000, "GiB") == "139.70 GiB"
    assert format_bytes(41_250_000_000) == "38.42 GiB"  # GiB by default, as nvidia-smi and torch print
    assert format_bytes(0) == "0.00 GiB"
    assert (unit_for("paper"), unit_for("deepspeed")) == ("GB", "GiB")  # the paper's accounting in its own unit
    with pytest.raises(ValueError):
        format_bytes(1, "MB")

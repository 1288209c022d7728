"""Validate SARIF the way a consumer reads it: the OASIS SARIF 2.1.0 schema (JSON Schema draft-07,
vendored in tests/data from the OASIS TC's repository) with its ``uri``/``uri-reference`` formats
checked against RFC 3986, plus what code scanning needs from us (columnKind, rule indexes).

Every test that produces SARIF calls ``validate_sarif``.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMA_PATH = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

# RFC 3986 section 2: the characters a URI may hold (unreserved, reserved) and %XX escapes.
_URI_CHARS = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+\-.]*:")


def is_uri_reference(value: object) -> bool:
    if not isinstance(value, str) or not _URI_CHARS.fullmatch(value):
        return False
    # appendix B: a first segment with ":" before any "/" reads as a scheme, which must be valid
    head = value.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    return ":" not in head or bool(_SCHEME.match(value))


def is_uri(value: object) -> bool:
    return is_uri_reference(value) and bool(_SCHEME.match(str(value)))


@lru_cache(maxsize=1)
def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_PATH.read_text("utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    checker = jsonschema.FormatChecker()
    checker.checks("uri")(is_uri)
    checker.checks("uri-reference")(is_uri_reference)
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=checker)


def validate_sarif(sarif: str | bytes | dict[str, Any]) -> dict[str, Any]:
    """The parsed log, after asserting it is valid SARIF 2.1.0 in strict UTF-8."""
    if isinstance(sarif, bytes):
        sarif = sarif.decode("utf-8")  # strict: SARIF files are UTF-8 (spec section 3.1)
    doc = json.loads(sarif) if isinstance(sarif, str) else sarif
    errors = sorted(_validator().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10])
    for run in doc["runs"]:
        assert run.get("columnKind") == "unicodeCodePoints"
        rules = run["tool"]["driver"].get("rules", [])
        for result in run.get("results", []):
            if "ruleIndex" in result:
                assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
            for location in result.get("locations", []):
                assert is_uri_reference(location["physicalLocation"]["artifactLocation"]["uri"])
    return doc

"""The linter's schema walk and plain jsonschema validation agree on the real corpus.

The linter does not call jsonschema at run time (positions, lax coercion, "auto" and
start-up cost: see rules/schemawalk.py), so this test keeps the two honest: every place
jsonschema rejects has a finding there, and every linter error is either at a place
jsonschema rejects or comes from a rule the schema cannot express.
"""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from conftest import CORPUS, corpus_manifest
from zeroadvisor.deepspeed import schema
from zeroadvisor.lint.engine import lint_document
from zeroadvisor.config.source import ParseError, escape_pointer_token, parse

# Checks that need the world size or the engine's optimizer mapping per stage.
BEYOND_SCHEMA = {"batch-size-mismatch", "untested-optimizer", "no-batch-size"}


def _pointer(path) -> str:
    return "".join("/" + escape_pointer_token(str(p)) for p in path)


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/") or "" in (a, b)


def _configs():
    if not (CORPUS / "MANIFEST.tsv").is_file():
        return []
    return sorted(row["file"] for row in corpus_manifest(CORPUS) if row["kind"] == "ds_json")


@pytest.fixture(scope="module")
def validator():
    return Draft202012Validator(schema.load())


@pytest.mark.corpus
@pytest.mark.parametrize("name", _configs())
def test_walk_agrees_with_jsonschema(corpus, validator, name):
    try:
        doc = parse((corpus / name).read_text("utf-8"), name)
    except ParseError:
        return  # not JSON-ish at all: nothing to validate
    if doc.quoteless or not isinstance(doc.data, dict):
        return  # templates: hjson strings where numbers belong; reported as template-placeholder
    rejected = {_pointer(e.absolute_path) for e in validator.iter_errors(doc.data)}
    findings = lint_document(doc)
    for where in rejected:
        assert any(_related(where, f.pointer) for f in findings), f"jsonschema rejects {where!r}; the linter is silent"
    for f in findings:
        if f.severity.value == "error" and f.name not in BEYOND_SCHEMA:
            assert any(_related(f.pointer, where) for where in rejected), f"{f.code} at {f.pointer!r}: schema accepts"


def test_schema_is_valid_2020_12():
    Draft202012Validator.check_schema(schema.load())

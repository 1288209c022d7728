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
from zeroadvisor.config.source import ParseError, escape_pointer_token, parse
from zeroadvisor.deepspeed import schema
from zeroadvisor.rules.linter import lint_document, lint_file

# Checks that need the world size or the engine's optimizer mapping per stage, and the file's syntax (a comment or a
# trailing comma the Trainer's json.load refuses: a schema sees the parsed data only).
BEYOND_SCHEMA = {"batch-size-mismatch", "untested-optimizer", "no-batch-size", "not-strict-json"}


def _pointer(path) -> str:
    return "".join("/" + escape_pointer_token(str(p)) for p in path)


def _related(a: str, b: str) -> bool:
    return a == b or a.startswith(b + "/") or b.startswith(a + "/") or "" in (a, b)


def _configs():
    if not (CORPUS / "MANIFEST.tsv").is_file():
        return []  # no cases: pytest reports the empty parameter set as a skip, a failure in CI
    return sorted(row["file"] for row in corpus_manifest(CORPUS) if row["kind"] == "ds_json")


def _not_applicable(name: str) -> tuple[str, set[str]] | None:
    """Why jsonschema cannot judge a corpus file, and the finding codes that must report it instead
    (None: the file is plain data to validate). Decided when tests are collected, so a file is
    either compared or listed here: never a test that passes without comparing."""
    try:
        doc = parse((CORPUS / name).read_text("utf-8"), name)
    except ParseError:
        return "DeepSpeed's hjson loader cannot read it", {"ZA001"}
    if doc.quoteless:
        # hjson reads a quoteless value as a string: jsonschema would flag every number written so
        return "quoteless hjson values (template placeholders or strings)", {"ZA002", "ZA005"}
    if not isinstance(doc.data, dict):
        return "the top level is not an object", {"ZA004"}
    return None


_CONFIGS = _configs()
_LEFT_OUT = {name: why for name in _CONFIGS if (why := _not_applicable(name)) is not None}
_COMPARED = [name for name in _CONFIGS if name not in _LEFT_OUT]


@pytest.fixture(scope="module")
def validator():
    return Draft202012Validator(schema.load())


@pytest.mark.corpus
@pytest.mark.parametrize("name", _COMPARED)
def test_walk_agrees_with_jsonschema(corpus, validator, name):
    doc = parse((corpus / name).read_text("utf-8"), name)
    rejected = {_pointer(e.absolute_path) for e in validator.iter_errors(doc.data)}
    findings = lint_document(doc)
    for where in rejected:
        assert any(_related(where, f.pointer) for f in findings), f"jsonschema rejects {where!r}; the linter is silent"
    for f in findings:
        if f.severity.value == "error" and f.name not in BEYOND_SCHEMA:
            assert any(_related(f.pointer, where) for where in rejected), f"{f.code} at {f.pointer!r}: schema accepts"


@pytest.mark.corpus
@pytest.mark.parametrize("name", _COMPARED)
def test_what_the_editor_flags_at_the_top_level_the_linter_reports(corpus, validator, name):
    """The schema closes the top level for editors (additionalProperties false: a key DeepSpeed would drop is
    shown); every key it flags there is one the linter reports too, and a config the linter passes without
    an error or a warning validates, "$schema" and "_" comment keys included."""
    doc = parse((corpus / name).read_text("utf-8"), name)
    findings = lint_document(doc)
    errors = list(validator.iter_errors(doc.data))
    flagged = [e for e in errors if e.validator == "additionalProperties" and not e.absolute_path]
    for key in (k for k in doc.data if k not in schema.load()["properties"] and not str(k).startswith("_")):
        assert flagged, f"{key!r} is not flagged by the schema"
        codes = {f.code for f in findings if f.pointer in ("", _pointer([key]))}
        assert codes & {"ZA006", "ZA102", "ZA103"}, f"the editor flags {key!r}; the linter says {codes or 'nothing'}"
    if not any(f.severity.value in ("error", "warning") for f in findings):
        assert errors == [], f"lints clean, yet the schema rejects: {[e.message for e in errors]}"


def test_a_misspelt_top_level_key_fails_validation(validator):
    """What the editor shows for the classic typo (DeepSpeed runs at stage 0 without a word)."""
    (error,) = validator.iter_errors({"zero_optimisation": {"stage": 3}, "_comment": "x", "$schema": "s"})
    assert error.validator == "additionalProperties" and "'zero_optimisation'" in error.message


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(_LEFT_OUT))
def test_files_left_out_are_reported(corpus, name):
    """A file jsonschema cannot judge is one the linter reports for that very reason."""
    why, codes = _LEFT_OUT[name]
    found = {f.code for f in lint_file(corpus / name).findings}
    assert found & codes, f"{name} is left out of the comparison ({why}) but the linter reports none of {codes}"


def test_most_of_the_corpus_is_compared(corpus):
    assert len(_COMPARED) >= 0.9 * len(_CONFIGS), f"only {len(_COMPARED)} of {len(_CONFIGS)} corpus configs compared"


def test_schema_is_valid_2020_12():
    Draft202012Validator.check_schema(schema.load())

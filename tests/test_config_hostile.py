"""Hostile inputs under the 1 MiB limit (issue 7): they finish, and their output is bounded.

These are not speed targets (those live in benchmarks/): each input took 15 s to hours before
the fix and a second or two after, so the guard below only catches a return of the quadratic
behaviour, with a limit far above the linear time on a slow, shared machine.
"""

from __future__ import annotations

import json

import pytest

from conftest import must_finish as hang_guard
from zeroadvisor.config.limits import MAX_CONFIG_BYTES, MAX_POINTER_CHARS
from zeroadvisor.config.source import ParseError, parse
from zeroadvisor.lint.engine import MAX_FINDINGS_PER_RULE
from zeroadvisor.lint.schemawalk import MAX_GUESSED_UNKNOWN_KEYS
from zeroadvisor.rules.linter import lint_text

# Before the fix the smallest of these inputs took 14 s (500,000 commas) on the machine that
# measured them; each is sized near the 1 MiB limit so the quadratic versions take minutes.
FINISH_WITHIN_S = 60


def must_finish(seconds: int = FINISH_WITHIN_S):
    return hang_guard(seconds, "quadratic again")


def _codes(findings) -> list[str]:
    return [f.code for f in findings]


def test_commas_in_a_quoteless_value():
    text = '{"train_batch_size": 8, "a": x' + "," * (MAX_CONFIG_BYTES - 64) + "\n}\n"
    with must_finish():
        doc = parse(text)
    assert doc.data["a"] == "x" + "," * (MAX_CONFIG_BYTES - 64)
    # the message quotes the value, cut short
    (deviation,) = [d for d in doc.deviations if d.kind == "quoteless-string"]
    assert len(deviation.detail) < 80


def test_commas_after_a_number_and_after_a_keyword():
    # a value that starts like a number or keyword but is text: hjson re-matched the number
    # (over the 100,000 spaces) or re-stripped the value at each of the commas
    for start in ("1", "null", "true"):
        text = "[" + start + " " * 100_000 + "x" + "," * 200_000 + "\n]"
        with must_finish():
            doc = parse(text)
        assert doc.data[0] == start + " " * 100_000 + "x" + "," * 200_000


@pytest.mark.slow  # 120,000 strings on one line
def test_many_triple_quoted_strings_on_one_line():
    text = "\n[" + ",".join(["'''a'''"] * 120_000) + "]\n"
    with must_finish():
        doc = parse(text)
    assert doc.data == ["a"] * 120_000


@pytest.mark.slow  # 150,000 duplicate keys, parsed and linted
def test_duplicate_keys_are_capped():
    text = "{" + ",".join('"a":1' for _ in range(150_000)) + "}"
    assert len(text) < MAX_CONFIG_BYTES
    with must_finish():
        findings = lint_text(text, "dups.json")
    duplicates = [f for f in findings if f.code == "ZA003"]
    assert len(duplicates) == MAX_FINDINGS_PER_RULE + 1
    summary = duplicates[-1]
    assert summary.message == (f"{149_999 - MAX_FINDINGS_PER_RULE} more duplicate-key findings from here on are "
                               f"not shown (the first {MAX_FINDINGS_PER_RULE} are)")
    assert sum(len(f.message) for f in findings) < 50_000  # was 58 MB of output


@pytest.mark.slow  # 30,000 unknown keys, each a candidate for a guess
def test_unknown_keys_are_capped_and_guessed_only_for_the_first():
    keys = {"train_batch_size": 8, **{f"zero_optimizatio{i}": 1 for i in range(30_000)}}
    with must_finish():
        findings = lint_text(json.dumps(keys), "unknown.json")
    unknown = [f for f in findings if f.code in ("ZA101", "ZA102", "ZA103")]
    assert len(unknown) <= MAX_FINDINGS_PER_RULE + 1
    assert "more" in unknown[-1].message
    assert MAX_GUESSED_UNKNOWN_KEYS < 30_000


def test_long_key_over_many_values_is_refused_not_exhausting_memory():
    # 400,000-character key over 300,000 elements: 120 GB of pointers before the budget
    text = '{"train_batch_size": 1, "' + "k" * 400_000 + '": [' + ",".join(["1"] * 300_000) + "]}"
    with must_finish(), pytest.raises(ParseError) as info:
        parse(text)
    assert f"more than {MAX_POINTER_CHARS >> 20}M characters" in info.value.message
    assert info.value.line == 1


def test_a_long_leaf_key_is_fine():
    doc = parse('{"train_batch_size": 1, "_' + "c" * 100_000 + '": "a comment"}')
    assert len(doc.data) == 2


@pytest.mark.parametrize(("text", "position"), [("null", (1, 1)), ("null\n", (1, 1)), ("  null  ", (1, 3)),
                                                ("// c\nnull", (2, 1)), ("\ufeffnull", (1, 1))])
def test_top_level_null_is_an_error(text, position):
    # hjson reads it as None; DeepSpeed then fails on None.get(...). It linted clean with exit 0.
    findings = [f for f in lint_text(text, "null.json") if f.code != "ZA002"]  # ZA002: the comment, the BOM
    assert [(f.code, f.message) for f in findings] == [
        ("ZA004", "the config is null, not an object: DeepSpeed needs a JSON object of settings")]
    assert (findings[0].line, findings[0].column) == position


@pytest.mark.parametrize(("text", "kind"), [("[]", "an array"), ('"x"', "a string"), ("true", "a boolean"),
                                            ("3", "a number")])
def test_other_roots_are_errors(text, kind):
    findings = lint_text(text, "x.json")
    assert "ZA004" in _codes(findings)
    assert f"the config is {kind}, not an object" in findings[_codes(findings).index("ZA004")].message

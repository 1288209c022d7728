"""The loader: DeepSpeed's hjson semantics, positions, strict-JSON deviations, duplicates."""

from __future__ import annotations

import pytest

from zeroadvisor.config.source import ParseError, parse


def test_values_are_what_hjson_gives():
    # hjson turns integral floats below 1e10 into ints (hjson/decoder.py scantfnns).
    doc = parse('{"a": 5e8, "b": 1.0, "c": 15099494.4, "d": 1e14, "e": -0, "f": [true, null, "x"]}')
    assert doc.data == {"a": 500000000, "b": 1, "c": 15099494.4, "d": 1e14, "e": 0, "f": [True, None, "x"]}
    assert isinstance(doc.data["d"], float)


def test_positions_of_keys_and_values():
    text = '{\n  "zero_optimization": {\n    "stage": 3\n  }\n}\n'
    doc = parse(text)
    assert doc.locate("/zero_optimization", "key") == (2, 3)
    assert doc.locate("/zero_optimization/stage", "key") == (3, 5)
    assert doc.locate("/zero_optimization/stage", "value") == (3, 14)


def test_pointer_escaping():
    doc = parse('{"a/b": {"c~d": 1}}')
    assert "/a~1b/c~0d" in doc.keys


@pytest.mark.parametrize("text,kind", [
    ('{"a": 1,}', "trailing-comma"),
    ('{"a": 1 // note\n}', "comment"),
    ('{"a": 1 # note\n}', "comment"),
    ('{"a": /* x */ 1}', "comment"),
    ("{a: 1}", "unquoted-key"),
    ("{'a': 1}", "single-quotes"),
    ('{"a": 1\n"b": 2}', "missing-comma"),
    ('{"a": hello\n}', "quoteless-string"),
    ("a: 1", "root-without-braces"),
    ('\ufeff{"a": 1}', "bom"),
])
def test_deviations_from_strict_json(text, kind):
    assert kind in {d.kind for d in parse(text).deviations}


def test_strict_json_has_no_deviations():
    assert parse('{"a": [1, 2.5, "x"], "b": {"c": null}}').deviations == []


def test_duplicate_key_reported_at_second_occurrence():
    doc = parse('{"stage": 1,\n "stage": 2}')
    assert doc.data == {"stage": 2}
    (dup,) = doc.duplicates
    assert dup.pointer == "/stage"
    assert doc.position(dup.second.start) == (2, 2)
    assert doc.position(dup.first.start) == (1, 2)


def test_nested_duplicate():
    doc = parse('{"z": {"stage": 1, "stage": 2}}')
    assert [d.pointer for d in doc.duplicates] == ["/z/stage"]


@pytest.mark.parametrize("text,line,column,fragment", [
    ('{"a": 1}\n```\n', 2, 1, "after the end"),
    ('{"stage": 2,git l\n}', 1, 13, "git l"),
    ('{"a": "unterminated', 1, 7, "unterminated"),
    ('{"a": 1e999}', 1, 7, "too large"),
    ('{"a": [1, 2', 1, 12, "not closed"),
    ('{"a" 1}', 1, 6, "':'"),
])
def test_parse_errors_have_positions(text, line, column, fragment):
    with pytest.raises(ParseError) as err:
        parse(text)
    assert (err.value.line, err.value.column) == (line, column)
    assert fragment in err.value.message


def test_deep_nesting_is_an_error_not_a_crash():
    with pytest.raises(ParseError, match="nested"):
        parse("[" * 100_000 + "]" * 100_000)


def test_huge_integer_digits():
    with pytest.raises(ParseError, match="digits"):
        parse('{"a": ' + "9" * 5000 + "}")
    assert parse('{"a": 123456789012345678901234567890}').data["a"] == 123456789012345678901234567890


def test_binary_is_an_error():
    with pytest.raises(ParseError, match="binary"):
        parse('{"a": 1}\x00')


def test_empty_and_comment_only_parse_as_empty_object():
    assert parse("").data == {}
    assert parse("// nothing\n").data == {}

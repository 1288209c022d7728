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


# -- issue 7: where Python's whitespace and int() differ from JSON's, the port follows hjson 3.1 --

@pytest.mark.parametrize(("text", "key"), [
    # hjson strips an unquoted key only when " \t\n\r" ends it, so DeepSpeed sees "stage\xa0"
    # (and runs at stage 0) where str.rstrip() made it "stage"
    ("{zero_optimization: {stage\xa0: 3}}", "stage\xa0"),
    ("{zero_optimization: {stage\x0c: 3}}", "stage\x0c"),
    ("{zero_optimization: {stage\x85: 3}}", "stage\x85"),
    ("{zero_optimization: {stage\u2028: 3}}", "stage\u2028"),
    # a space after the NBSP: hjson's rstrip() then takes both
    ("{zero_optimization: {stage\xa0 : 3}}", "stage"),
    ("{zero_optimization: {\xa0stage: 3}}", "\xa0stage"),
])
def test_unquoted_key_whitespace_is_hjsons(text, key):
    assert parse(text).data == {"zero_optimization": {key: 3}}


def test_nbsp_key_is_reported_as_unknown_through_lint():
    from zeroadvisor.rules.linter import lint_text

    findings = lint_text('{"train_batch_size": 8, zero_optimization: {stage\xa0: 3}}', "ds.hjson")
    (unknown,) = [f for f in findings if f.pointer == "/zero_optimization/stage\xa0"]
    assert unknown.severity.value == "error" and "'stage'" in unknown.message


@pytest.mark.parametrize(("escape", "char"), [
    ("\\u0041", "A"), ("\\u+041", "A"), ("\\u 041", "A"), ("\\u041 ", "A"), ("\\u0_41", "A"),
    ("\\u\u0664\u0661\u0664\u0661", "\u4141"),  # int() reads Arabic-Indic digits
    ("\\ud800", "\ud800"), ("\\udc00", "\udc00"),  # lone surrogates pass through
    ("\\ud83d\\ude00", "\U0001f600"), ("\\ud83d\\u+041", "\ud83dA"),
])
def test_unicode_escapes_are_read_as_hjson_reads_them(escape, char):
    assert parse('{"a": "' + escape + '"}').data == {"a": char}


@pytest.mark.parametrize("escape", ["\\u0x41", "\\u0X41", "\\u-041", "\\uzzzz", "\\u12", "\\ud800\\uzzzz"])
def test_unicode_escapes_hjson_refuses(escape):
    with pytest.raises(ParseError):
        parse('{"a": "' + escape + '"}')


def test_non_json_escape_is_a_deviation():
    kinds = {d.kind for d in parse('{"a": "\\u+041"}').deviations}
    assert "escape" in kinds
    assert parse('{"a": "\\u0041\\ud800"}').deviations == []


def test_mojibake_bom_is_skipped_as_hjson_does():
    doc = parse('\xef\xbb\xbf{"a": 1}')
    assert doc.data == {"a": 1}
    assert [d.kind for d in doc.deviations] == ["bom"]


@pytest.mark.parametrize("text", ["\ufeff", "\xef\xbb\xbf"])
def test_bom_only_is_an_error_as_in_hjson(text):
    with pytest.raises(ParseError):
        parse(text)


def test_columns_on_line_one_count_from_after_the_bom():
    doc = parse('\ufeff{"zero_optimization": {"stage": 3}}')
    assert doc.locate("/zero_optimization") == (1, 2)
    assert doc.locate("/zero_optimization/stage", "value") == (1, 33)
    assert doc.position(0) == (1, 1)  # the BOM itself
    with pytest.raises(ParseError) as info:
        parse('\ufeff{"a": 1}}')
    assert (info.value.line, info.value.column) == (1, 9)

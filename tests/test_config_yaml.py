"""YAML configs and descriptions (config/yaml_source.py): bounded aliases, JSON-view values, one-line errors.

Every case is what ``yaml.safe_load`` accepts (or refuses) and what issue 7 found downstream:
aliases that expand to hundreds of millions of values, keys that are not strings, dates,
``!!binary``, surrogate escapes and ``.inf`` buckets. Each goes through the real CLI too.
"""

from __future__ import annotations

import pytest
import yaml

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.limits import MAX_YAML_ALIAS_VALUES
from zeroadvisor.config.source import ParseError
from zeroadvisor.config.yaml_source import parse_yaml

# The 553-byte file from issue 7, under a key DeepSpeed ignores: nine levels of nine aliases,
# 9**9 = 387,420,489 values once expanded.
BOMB = "_:\n" + "".join(
    f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9 if i else ['"lol"'] * 9) + "]\n" for i in range(9)
) + "train_batch_size: 8\n"


def test_the_bomb_is_the_size_the_issue_reports():
    assert len(BOMB.encode()) < 600
    # safe_load itself builds it cheaply (the values are shared); walking it is what explodes
    data = yaml.safe_load(BOMB)
    assert len(data["_"]["l8"]) == 9 and data["_"]["l8"][0] is data["_"]["l7"]


def test_alias_bomb_is_refused_at_its_key():
    with pytest.raises(ParseError) as info:
        parse_yaml(BOMB, "bomb.yaml")
    # each alias repeats its block: l1..l3 add 90, 819 and 7,380 values; the first alias in
    # l4 (line 6, column 3) adds 7,381 more and passes 10,000
    assert (info.value.line, info.value.column) == (6, 3)
    assert info.value.message == (f"YAML aliases here expand to more than {MAX_YAML_ALIAS_VALUES} values "
                                  "(an alias bomb?): write the values out")


def test_a_few_aliases_are_fine():
    doc = parse_yaml("defaults: &d {stage: 2}\nzero_optimization: *d\ntrain_batch_size: &b 8\n"
                     "train_micro_batch_size_per_gpu: *b\n")
    assert doc.data == {"defaults": {"stage": 2}, "zero_optimization": {"stage": 2},
                        "train_batch_size": 8, "train_micro_batch_size_per_gpu": 8}
    assert "/zero_optimization/stage" in doc.keys


def test_recursive_alias_is_refused():
    with pytest.raises(ParseError, match="refers to a block that contains it"):
        parse_yaml("a: &a [1, *a]\n")


def test_merge_key_override_is_not_a_duplicate():
    doc = parse_yaml("base: &b {stage: 1, offload: false}\nzero_optimization:\n  <<: *b\n  stage: 3\n")
    assert doc.data["zero_optimization"] == {"stage": 3, "offload": False}
    assert doc.duplicates == []


def test_real_duplicate_is_reported():
    doc = parse_yaml("train_batch_size: 8\ntrain_batch_size: 16\n")
    assert [d.pointer for d in doc.duplicates] == ["/train_batch_size"]
    assert doc.data == {"train_batch_size": 16}


@pytest.mark.parametrize(("text", "data"), [
    # keys that are not strings: what json.dumps writes for them
    ("1: a\ntrue: b\nnull: c\n1.5: d\n", {"1": "a", "true": "b", "null": "c", "1.5": "d"}),
    # a date key or value stays the text as written (as YAML-to-JSON converters write it)
    ("2024-01-01: a\nwhen: 2024-01-01 10:00:00\n", {"2024-01-01": "a", "when": "2024-01-01 10:00:00"}),
    # surrogate escapes pass through as safe_load gives them
    ('"\\ud800": "\\udc00"\n', {"\ud800": "\udc00"}),
])
def test_values_are_what_a_json_reader_sees(text, data):
    assert parse_yaml(text).data == data


@pytest.mark.parametrize(("text", "position", "fragment"), [
    ("zero_optimization:\n  reduce_bucket_size: .inf\n", (2, 23), ".inf is not a finite number"),
    ("a: -.inf\n", (1, 4), "not a finite number"),
    ("a: .nan\n", (1, 4), "not a finite number"),
    ("blob: !!binary aGVsbG8=\n", (1, 7), "!!binary value has no JSON equivalent"),
    ("s: !!set {a, b}\n", (1, 4), "!!set has no JSON equivalent"),
    ("o: !!omap [a: 1]\n", (1, 4), "!!omap has no JSON equivalent"),
    ("x: !!python/object/apply:os.getcwd []\n", (1, 4), "could not determine a constructor"),
    ("? [a, b]\n: 1\n", (1, 3), "a YAML key must be a plain value"),
    ("a: 1" + "0" * 5000 + "\n", (1, 4), "cannot be read"),
])
def test_what_json_cannot_hold_is_a_located_error(text, position, fragment):
    with pytest.raises(ParseError) as info:
        parse_yaml(text)
    assert (info.value.line, info.value.column) == position
    assert fragment in info.value.message and "\n" not in info.value.message


@pytest.mark.parametrize(("text", "position", "message"), [
    # a reader error used to be reported at 1:1 with a two-line message
    ("a: 1\nb: \x01\n", (2, 4), "invalid YAML: special characters are not allowed (character 0x1)"),
    ("a: [1\n", (2, 1), "invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("a: 1\n b: 2\n", (2, 3), "invalid YAML: mapping values are not allowed here"),
    ("a: 1\n---\nb: 2\n", (2, 1), "invalid YAML: but found another document"),
    # a BOM does not count as a column
    ("\ufeffa: [1\n", (2, 1), "invalid YAML: expected ',' or ']', but got '<stream end>'"),
    ("\ufeffa: 1\n b: 2\n", (2, 3), "invalid YAML: mapping values are not allowed here"),
])
def test_syntax_errors_are_one_line_at_the_real_place(text, position, message):
    with pytest.raises(ParseError) as info:
        parse_yaml(text)
    assert ((info.value.line, info.value.column), info.value.message) == (position, message)


def test_bom_does_not_shift_line_one_columns():
    doc = parse_yaml("\ufefftrain_batch_size: 8\n")
    assert doc.locate("/train_batch_size") == (1, 1)
    assert doc.locate("/train_batch_size", "value") == (1, 19)


ODD_YAML = {
    "bomb.yaml": BOMB,
    "keys.yaml": "train_batch_size: 8\n1: a\ntrue: b\nnull: c\n2024-01-01: d\nwhen: 2024-01-01\n",
    "inf.yaml": "train_batch_size: 8\nzero_optimization:\n  stage: 2\n  reduce_bucket_size: .inf\n",
    "binary.yaml": "train_batch_size: 8\nblob: !!binary aGVsbG8=\n",
    "surrogates.yaml": 'train_batch_size: 8\n"\\ud800": "\\udc00"\nzero_optimization: {stage: "\\ud800"}\n',
    "null.yaml": "null\n",
    "list.yaml": "- 1\n- 2\n",
    "recursive.yaml": "train_batch_size: 8\n_: &a [*a]\n",
}


# Lone surrogates reach the data as safe_load (and hjson, for JSON) gives them; the reporters escape
# them for each medium (report/escape.py), so the UTF-8 stdout never refuses them.
@pytest.mark.parametrize("name", sorted(ODD_YAML))
@pytest.mark.parametrize("command", [
    ["lint"],
    ["lint", "--format", "json"],
    ["lint", "--format", "sarif"],
    ["check", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GB"],
])
def test_the_cli_reports_odd_yaml_without_raising(cli, tmp_path, name, command):
    path = tmp_path / name
    path.write_text(ODD_YAML[name], encoding="utf-8", errors="surrogatepass")
    result = cli(*([*command, path] if command[0] == "lint" else [command[0], path, *command[1:]]))
    assert result.returncode in (0, 1, 2), result.stderr  # 3 would be an internal error (an exception)
    assert "internal error" not in result.stderr
    if "sarif" in command:  # every SARIF the tests produce is validated
        from sarif_validate import validate_sarif

        validate_sarif(result.stdout)

"""The text editor behind --fix/--suggest keeps what the user wrote (issue 7, defect 4 and 5).

Each case is the user's text, a merge patch, and the exact text a careful person would write.
Every result also reads back as MergePatch(data, patch) (patched_text checks it; asserted again here).
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import parse
from zeroadvisor.fix.editor import REFUSALS, EditError, FixError, patched_text


def edit(text: str, patch: dict) -> str:
    new = patched_text(parse(text), patch)
    assert parse(new).data == mp.apply(parse(text).data, patch)
    return new


# -- comments belong to the member they precede, or trail on its line ----------------------------------
@pytest.mark.parametrize("text, patch, expected", [
    pytest.param('{\n  "a": 1,\n  "b": 2,\n  // why c: measured on 8xA100\n  "c": 3\n}\n', {"b": None},
                 '{\n  "a": 1,\n  // why c: measured on 8xA100\n  "c": 3\n}\n',
                 id="deleting a member keeps the comment above the next key"),
    pytest.param('{\n  "a": 1, // A\n  // about b\n  // (two lines)\n  "b": 2, // B\n  "c": 3\n}\n', {"b": None},
                 '{\n  "a": 1, // A\n  "c": 3\n}\n',
                 id="deleting a member takes its own comment lines and trailing comment"),
    pytest.param('{\n  "a": 1, // keep me\n  "b": 2 // goes with b\n}\n', {"b": None}, '{\n  "a": 1 // keep me\n}\n',
                 id="deleting the last member keeps the comment on the kept line"),
    pytest.param('{\n  "a": 1,\n  // ---- optimizer ----\n\n  "b": 2,\n  "c": 3\n}\n', {"b": None},
                 '{\n  "a": 1,\n  // ---- optimizer ----\n\n  "c": 3\n}\n',
                 id="a comment after a blank line is a section comment and stays"),
    pytest.param('{ // DeepSpeed config\n  /* first */ "a": 1,\n  "b": 2 /* b */\n}\n', {"b": None},
                 '{ // DeepSpeed config\n  /* first */ "a": 1\n}\n',
                 id="a comment on the brace line and block comments stay"),
    pytest.param('{\n  "a": 1 // note\n}\n', {"b": 2}, '{\n  "a": 1, // note\n  "b": 2\n}\n',
                 id="a comment trailing the last member is kept when members are added"),
])
def test_comments_stay_with_what_they_describe(text, patch, expected):
    assert edit(text, patch) == expected


def test_comment_inside_a_block_comment_is_not_mistaken_for_a_line():
    text = '{\n  "a": 1, /* see\n  # the wiki */\n  "b": 2\n}\n'
    new = edit(text, {"b": None})
    assert "/* see\n  # the wiki */" in new and '"b"' not in new


# -- line endings ------------------------------------------------------------------------------------
def test_inserted_lines_use_the_files_crlf_line_endings():
    text = '{\r\n  "a": 1,\r\n  "zero_optimization": {\r\n    "stage": 3\r\n  }\r\n}\r\n'
    new = edit(text, {"zero_optimization": {"offload_optimizer": {"device": "cpu"}}, "b": [1, 2]})
    assert new.count("\r\n") == new.count("\n") and "\r\r" not in new
    assert new.startswith(text[: text.index('    "stage": 3')])


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_new_object_in_an_empty_object_takes_the_line_ending(eol):
    text = "{" + eol + '  "zero_optimization": {}' + eol + "}"
    new = edit(text, {"zero_optimization": {"stage": 2}})
    assert new == "{" + eol + '  "zero_optimization": {' + eol + '    "stage": 2' + eol + "  }" + eol + "}"


# -- template placeholders are never edited over ---------------------------------------------------------
TEMPLATE = '{\n  "train_batch_size": CONFIG_BATCH_SIZE,\n  "zero_optimization": {\n    "stage": ZERO_STAGE\n  }\n}\n'


@pytest.mark.parametrize("patch", [
    {"zero_optimization": {"stage": 2}},  # overwrite
    {"train_batch_size": None},  # delete
    {"zero_optimization": None},  # delete the block holding one
    {"zero_optimization": 3},  # replace the block holding one
])
def test_an_edit_over_a_placeholder_is_refused(patch):
    with pytest.raises(EditError) as err:
        patched_text(parse(TEMPLATE), patch)
    assert err.value.reason == "placeholder" and "\n" not in str(err.value)
    assert isinstance(err.value, FixError)


def test_members_added_beside_a_placeholder_keep_it_and_every_comma():
    new = edit(TEMPLATE, {"zero_optimization": {"overlap_comm": True}, "bf16": {"enabled": True}})
    assert '"stage": ZERO_STAGE\n' in new and '"train_batch_size": CONFIG_BATCH_SIZE,\n' in new
    # Once a script substitutes the placeholders, the text is strict JSON.
    substituted = new.replace("CONFIG_BATCH_SIZE", "8").replace("ZERO_STAGE", "2")
    assert json.loads(substituted) == {"train_batch_size": 8, "bf16": {"enabled": True},
                                       "zero_optimization": {"overlap_comm": True, "stage": 2}}


def test_a_quoted_shell_placeholder_is_not_overwritten():
    with pytest.raises(EditError) as err:
        patched_text(parse('{"train_micro_batch_size_per_gpu": "${MBS}"}'), {"train_micro_batch_size_per_gpu": 1})
    assert err.value.reason == "placeholder"


# -- inputs that were internal errors ---------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "\n\n", "// nothing yet\n", "# hjson comment", "/* a */\r\n"])
def test_empty_or_comment_only_config_gets_an_object(text):
    new = edit(text, {"zero_optimization": {"stage": 2}})
    assert new.startswith(text.rstrip("\r\n") if text.strip() else "")
    assert parse(new).data == {"zero_optimization": {"stage": 2}}


@pytest.mark.parametrize("text, patch, expected", [
    ('{"a": 1, "b": 2,}', {"b": None}, '{"a": 1,}'),  # last member next to a trailing comma
    ('{"a": 1, "b": 2,}', {"b": None, "c": 3}, '{"a": 1, "c": 3,}'),  # removed and renamed
    ('{\n  "a": 1,\n  "b": 2,\n}', {"b": None, "B": 2}, '{\n  "a": 1,\n  "B": 2,\n}'),
    ('{"a": 1, "b": 2}', {"a": None, "b": None}, "{}"),
    ('{"a": 1, "b": 2}', {"a": None, "b": None, "c": 1}, '{"c": 1}'),
    ("a: 1\nb: 2", {"b": None}, "a: 1"),  # brace-less hjson root
    ("a: 1\nb: 2\n", {"b": None, "c": 3}, 'a: 1\n"c": 3\n'),
    ("a: 1\n# about b\nb: 2\n", {"a": None, "b": None}, "{}"),
    ("a: 1\nb: 2\n", {"a": None}, "b: 2\n"),
])
def test_edits_that_overlapped(text, patch, expected):
    assert edit(text, patch) == expected


# -- values --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), [1, float("nan")]])
def test_non_finite_numbers_are_refused(bad):
    with pytest.raises(EditError) as err:
        patched_text(parse('{"gradient_clipping": 1.0}'), {"optimizer": {"params": {"x": bad}}})
    assert err.value.reason == "non-finite"


@pytest.mark.parametrize("text, patch, expected", [
    # true == 1 in Python; the read-back must tell them apart
    pytest.param('{"a": true}', {"a": 1}, '{"a": 1}', id="true replaced by 1"),
    pytest.param('{"a": 1}', {"a": True}, '{"a": true}', id="1 replaced by true"),
    pytest.param('{\n  "reduce_bucket_size": 5e8,\n  "stage": 2\n}\n', {"reduce_bucket_size": 500000000, "stage": 2},
                 '{\n  "reduce_bucket_size": 5e8,\n  "stage": 2\n}\n',
                 id="values equal to the patch keep their spelling"),
    pytest.param('{\n  "stage": 3   # was 2\n}', {"stage": 1}, '{\n  "stage": 1   # was 2\n}',
                 id="a number keeps the blanks before a comment"),
    pytest.param("{\n  a: 1,\n  b: 2,\n}\n", {"c": 3}, '{\n  a: 1,\n  b: 2,\n  "c": 3,\n}\n',
                 id="the hjson trailing-comma style is kept"),
])
def test_values_are_replaced_by_type_and_keep_their_style(text, patch, expected):
    assert edit(text, patch) == expected


def test_non_object_config_is_refused():
    with pytest.raises(EditError) as err:
        patched_text(parse("[1, 2]"), {"a": 1})
    assert err.value.reason == "not-an-object"


def test_refusal_reasons_are_documented():
    assert {"placeholder", "non-finite", "not-an-object"} <= set(REFUSALS)


# -- idempotence: the same patch twice changes nothing the second time ----------------------------------------
KEYS = st.sampled_from(["a", "b", "c", "stage", "zero_optimization", "x y"])
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.text("ab", max_size=3),
                   st.floats(allow_nan=False, allow_infinity=False, width=32))
VALUES = st.recursive(LEAVES, lambda inner: st.dictionaries(KEYS, inner, max_size=3), max_leaves=6)
PATCHES = st.dictionaries(KEYS, VALUES, max_size=4)
DOCS = st.dictionaries(KEYS, VALUES.filter(lambda v: v is not None), max_size=4)
STYLES = st.sampled_from([dict(indent=2), dict(indent=4), {}, dict(indent="\t")])


@pytest.mark.slow  # a property test
@settings(max_examples=300, deadline=None, derandomize=True)
@given(DOCS, PATCHES, STYLES, st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_patching_twice_is_patching_once(data, patch, style, eol, final_newline):
    text = json.dumps(data, **style).replace("\n", eol) + (eol if final_newline else "")
    once = patched_text(parse(text), patch)
    assert parse(once).data == mp.apply(data, patch)
    assert patched_text(parse(once), patch) == once
    lines = once.split("\n")
    if eol == "\r\n" and "\n" in text:
        assert all(line.endswith("\r") for line in lines[:-1])
    else:
        assert "\r" not in once
    assert parse(once).deviations == []  # strict JSON stays strict JSON

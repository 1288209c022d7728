"""zeroadvisor.config.source.parse against hjson 3.1 itself (DeepSpeed's loader): same data, same failures.

source.py ports hjson's decoder with positions; these tests check the port differentially:

(a) every corpus DeepSpeed config (.json / .conf): ``parse(text).data`` equals ``hjson.loads(text)``;
(b) hypothesis-generated JSON-ish texts (random nested data rendered with random formatting:
    ``//``, ``#`` and ``/* */`` comments, trailing and missing commas, unquoted keys, single quotes,
    quoteless and ''' strings, root without braces, whitespace variants, plus random one-character
    damage) give the same data, or both fail; on top of that, (b2) the places where Python's idea
    of whitespace and JSON's differ: Unicode spaces (NBSP, \\x0c, \\x85, U+2028...) around
    unquoted keys and quoteless values, \\u escapes that int(x, 16) reads but JSON does not
    ("\\u+041", "\\u 041", "\\u0_41"), lone and paired surrogates, and BOMs (U+FEFF and the
    mojibake "\\xef\\xbb\\xbf");
(c) duplicate keys: ``parse(text).duplicates`` is non-empty exactly when ``hjson.loads`` with
    DeepSpeed's ``dict_raise_error_on_duplicate_keys`` hook raises for duplicates.

"Agree" means: both return data and ``json.dumps`` of the two is identical (so 1 vs 1.0 and key
order count), or both raise (``ParseError`` vs any hjson exception). A NUL character is left out
of generated text on purpose: source.py refuses binary input by design, hjson does not.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest

hjson = pytest.importorskip("hjson")

from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from zeroadvisor.config.source import ParseError, parse  # noqa: E402

pytestmark = pytest.mark.oracle

_REPO = Path(__file__).resolve().parents[2]
_CORPUS = Path(os.environ.get("ZEROADVISOR_CORPUS", _REPO.parent / "shared" / "corpus" / "real"))
# Bounded for CI: a fixed number of examples, derandomized (the same inputs every run), and a
# deadline per example well above the few milliseconds one takes.
_SETTINGS = settings(max_examples=300, deadline=2000, derandomize=True,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _outcome_hjson(text: str, **kwargs: Any) -> tuple[str, Any]:
    try:
        return "ok", json.dumps(hjson.loads(text, **kwargs))
    except RecursionError:
        return "error", "RecursionError"
    except Exception as err:  # any hjson failure is a rejection
        return "error", f"{type(err).__name__}: {err}"


def _outcome_port(text: str) -> tuple[str, Any]:
    try:
        return "ok", json.dumps(parse(text).data)
    except ParseError as err:
        return "error", f"ParseError: {err}"
    except Exception as err:  # source.py promises ParseError and nothing else for bad input
        return "crash", f"{type(err).__name__} (not ParseError): {err}"


def assert_agree(text: str) -> None:
    ours, theirs = _outcome_port(text), _outcome_hjson(text)
    if ours[0] == theirs[0] == "error":
        return
    assert ours == theirs, (f"input {text!r}\n  zeroadvisor.config.source.parse: {ours[1]}\n"
                            f"  hjson.loads:              {theirs[1]}")


# --------------------------------------------------------------------------------------------
# (a) the corpus
# --------------------------------------------------------------------------------------------

def _corpus_texts() -> list[str]:
    if not _CORPUS.is_dir():
        return []
    return sorted(p.name for p in _CORPUS.iterdir() if p.is_file() and p.suffix.lower() in (".json", ".conf", ".hjson"))


@pytest.mark.corpus
@pytest.mark.parametrize("name", _corpus_texts() or ["<corpus absent>"])
def test_corpus_file_parses_like_hjson(corpus, name):
    raw = (corpus / name).read_bytes()
    assert_agree(raw.decode("utf-8"))


# --------------------------------------------------------------------------------------------
# (b) generated JSON-ish text
# --------------------------------------------------------------------------------------------

_KEY_CHARS = st.sampled_from(list("abcxyz_09 -.$'\"\\/#:,{}[]\té"))
_TEXT_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, -0.0, 1.0, 5e8, 1e10, 1e14, 15099494.4, 1e-10, 2.5e-5, 0.1]),
    st.text(_TEXT_CHARS, max_size=12),
    st.sampled_from(["auto", "true", "null", "12", "-3.5", "ZERO_STAGE", "a b", " x", "x ", "#x", "//x", "a,b",
                     "'q'", '"q"', "{", "]", "''", "'''", "\\", "\t", "\r\n", "é"]),
)
_keys = st.one_of(st.text(_KEY_CHARS, min_size=0, max_size=6),
                  st.sampled_from(["stage", "train_batch_size", "fp16", "enabled", "a", "b"]))
# Objects are lists of (key, value) pairs so that duplicate keys can occur.
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(st.tuples(_keys, inner), max_size=4).map(lambda pairs: ("object", pairs)),
    ),
    max_leaves=12,
)
_COMMENTS = ["// c\n", "# c\n", "/* c */", "/**/", "/* multi\nline */", "#\n", "//\n", "// } ] , :\n"]
_SPACES = ["", " ", "  ", "\t", "\n", "\r\n", "\n  ", " \n\t"]


def _render(draw, value: Any, depth: int = 0) -> str:
    """Render value with formatting choices drawn from hypothesis (so failures shrink)."""

    def gap() -> str:
        choice = draw(st.integers(0, 9))
        if choice < 6:
            return draw(st.sampled_from(_SPACES))
        return draw(st.sampled_from(_SPACES)) + draw(st.sampled_from(_COMMENTS)) + draw(st.sampled_from(_SPACES))

    def separator(last: bool) -> str:
        # comma, comma+newline, newline only (missing comma), trailing comma, nothing
        options = ["", "\n"] if last else [",", ",\n", "\n", ", ", " ,"]
        if last:
            options += [",", ",\n"]
        return draw(st.sampled_from(options))

    if isinstance(value, tuple) and value and value[0] == "object":
        pairs = value[1]
        parts = []
        for i, (key, item) in enumerate(pairs):
            parts.append(gap() + _render_key(draw, key) + gap() + ":" + gap() + _render(draw, item, depth + 1)
                         + separator(i == len(pairs) - 1))
        body = "".join(parts) + gap()
        if depth == 0 and draw(st.integers(0, 5)) == 0:
            return body  # a root object without braces
        return "{" + body + "}"
    if isinstance(value, list):
        parts = [gap() + _render(draw, item, depth + 1) + separator(i == len(value) - 1)
                 for i, item in enumerate(value)]
        return "[" + "".join(parts) + gap() + "]"
    if isinstance(value, str):
        style = draw(st.integers(0, 4))
        if style == 1 and "'" not in value and "\n" not in value:
            return "'" + json.dumps(value)[1:-1].replace('\\"', '"') + "'"
        if style == 2:
            return value + "\n"  # quoteless: runs to the end of the line
        if style == 3 and "'''" not in value:
            return "'''" + value + "'''"
        return json.dumps(value, ensure_ascii=draw(st.booleans()))
    if isinstance(value, float) and draw(st.booleans()):
        return repr(value) if math.isfinite(value) else json.dumps(value)
    return json.dumps(value)


def _render_key(draw, key: str) -> str:
    style = draw(st.integers(0, 2))
    if style == 0:
        return json.dumps(key)
    if style == 1 and "'" not in key:
        return "'" + json.dumps(key)[1:-1].replace('\\"', '"') + "'"
    return key  # unquoted (hjson decides whether that is legal)


@st.composite
def jsonish_text(draw) -> str:
    root = draw(st.one_of(st.lists(st.tuples(_keys, _values), max_size=5).map(lambda p: ("object", p)), _values))
    text = _render(draw, root)
    head = draw(st.sampled_from(["", "\ufeff", " ", "\n", "// head\n"]))
    text = head + text + draw(st.sampled_from(["", "\n", " ", "# tail", "\n```\n"]))
    if draw(st.integers(0, 3)) == 0 and text:  # one character of damage
        at = draw(st.integers(0, len(text) - 1))
        op = draw(st.integers(0, 2))
        char = draw(st.sampled_from(list("{}[],:\"'#/*\n \\ax1-")))
        text = text[:at] + (char if op else "") + text[at + (op != 1):]
    return text


@pytest.mark.slow  # a property test
@_SETTINGS
@given(jsonish_text())
@example('{"a": 1,}')
@example('{a: 1\n b: 2}')
@example("a: x y # not a comment\nb: 2")
@example('{"a": 5e8, "b": 1.0, "c": 1e10, "d": -0}')
@example("{'a': '''\n  multi\n  line\n  '''}")
@example('{"a": 1} ```')
def test_generated_text_parses_like_hjson(text):
    assert_agree(text)


# --------------------------------------------------------------------------------------------
# (b2) where Python's whitespace, int() and str differ from JSON's
# --------------------------------------------------------------------------------------------

# Every character str.strip() removes that hjson's own whitespace (" \t\n\r") does not, plus
# those four: hjson strips keys and quoteless values with Python's strip(), so a trailing one
# of these may or may not end up in the key DeepSpeed sees.
_UNICODE_SPACES = ["\xa0", "\x0c", "\x0b", "\x85", "\u2028", "\u2029", "\u3000", "\u200a", "\x1c", "\x1f",
                   "\ufeff", "\u200b", " ", "\t"]
_SPACE_RUNS = st.lists(st.sampled_from(_UNICODE_SPACES), max_size=3).map("".join)
# \u escapes hjson reads with int(esc, 16) (and the ones it refuses), surrogates alone and paired.
_ESCAPES = ["\\u0041", "\\u+041", "\\u 041", "\\u041 ", "\\u0_41", "\\u-041", "\\u0x41", "\\u0X41",
            "\\u\u0664\u0661\u0664\u0661",
            "\\ud800", "\\udfff", "\\ud83d\\ude00", "\\ud83d\\u+041", "\\ud83d\\uzzzz", "\\ud83d\\u0x41",
            "\\udc00\\ud800",
            "\\u", "\\u12", "\\uD800\\uDC00", "\\ud800x"]
_BOMS = ["", "\ufeff", "\xef\xbb\xbf", "\ufeff\ufeff", "\xef\xbb", "\ufeff\xef\xbb\xbf"]
_WORDS = st.sampled_from(["stage", "a", "train_batch_size", "null", "true", "false", "12", "-3", "1e5", "x y", "auto"])


@st.composite
def unicode_edge_text(draw) -> str:
    """An object whose keys and values carry the characters above, in every position."""
    members = []
    for _ in range(draw(st.integers(1, 4))):
        key_style = draw(st.integers(0, 2))
        word = draw(_WORDS)
        if key_style == 0:  # unquoted key with Unicode space before/after and before the colon
            key = draw(_SPACE_RUNS) + word.replace(" ", "_") + draw(_SPACE_RUNS)
        else:
            key = '"' + word + draw(st.sampled_from(_ESCAPES)) + '"'
        value_style = draw(st.integers(0, 2))
        if value_style == 0:  # quoteless value (a keyword or number, or text) with Unicode space
            value = draw(_SPACE_RUNS) + draw(_WORDS) + draw(_SPACE_RUNS)
            value += draw(st.sampled_from(["\n", ",", "}", " #c\n"]))
        elif value_style == 1:
            value = '"' + draw(st.sampled_from(_ESCAPES)) + draw(_WORDS) + draw(st.sampled_from(_ESCAPES)) + '"'
        else:
            value = draw(_WORDS) + "\n"
        members.append(key + ":" + draw(st.sampled_from(["", " ", "\xa0"])) + value)
    body = draw(st.sampled_from(["\n", ",\n", ", "])).join(members)
    text = ("{" + body + "\n}") if draw(st.booleans()) else body
    return draw(st.sampled_from(_BOMS)) + text + draw(st.sampled_from(["", "\n", "\xa0", "\u2028"]))


@pytest.mark.slow  # a property test
@_SETTINGS
@given(unicode_edge_text())
@example("{stage\xa0: 3}")
@example("{stage\xa0 : 3}")
@example('{"a": "\\u+041"}')
@example('{"a": "\\ud800"}')
@example('\xef\xbb\xbf{"a": 1}')
@example("a: null\x0c\n")
def test_unicode_edges_parse_like_hjson(text):
    assert_agree(text)


# Minimal inputs found by the generators above (and their neighbours), kept as named cases so
# that each disagreement is reported on its own.
_EDGE_CASES = {
    "open-brace-at-eof": "{",
    "open-brace-then-comment": "{// c\n",
    "open-brace-then-newline": "{\n",
    "bom-only": "\ufeff",
    "bom-then-comment": "\ufeff// c\n",
    "bom-then-object": '\ufeff{"a": 1}',
    "empty": "",
    "comment-only": "// c\n",
    "unterminated-block-comment-after-object": '{"a": 1} /* x',
    "unterminated-block-comment-star": '{"a": 1} /* x *',
    "unterminated-block-comment-inside": '{"a": 1 /* x',
    "block-comment-slash-star-slash": "/*/ */{}",
    "multiline-string-first-line-no-newline": "{a: '''x'''}",
    "multiline-string-first-line-in-array": "['''x''']",
    "multiline-string-first-line-indent": "{a: '''\n        y\n        '''}",
    "multiline-string-second-line-indent": "{\n a: '''\n        y\n        '''}",
    "root-multiline-string": "'''ab'''",
    "root-multiline-string-newline": "'''ab'''\n",
    "quoteless-with-hash": "a: x y # not a comment\nb: 2",
    "trailing-comma": '{"a": 1,}',
    "missing-comma": '{"a": 1\n"b": 2}',
    "integral-floats": '{"a": 5e8, "b": 1.0, "c": 1e10, "d": -0, "e": 15099494.4}',
    "markdown-fence-after-object": '{"a": 1}\n```\n',
    # issue 7: hjson keeps a trailing NBSP (\x0c, \x85, U+2028) in an unquoted key, so
    # DeepSpeed reads "stage\xa0" and runs at stage 0
    "key-trailing-nbsp": "{\n  zero_optimization: {\n    stage\xa0: 3\n  }\n}\n",
    "key-trailing-formfeed": "{stage\x0c: 3}",
    "key-trailing-nel": "{stage\x85: 3}",
    "key-trailing-line-separator": "{stage\u2028: 3}",
    "key-trailing-nbsp-then-space": "{stage\xa0 : 3}",
    "key-leading-nbsp": "{\xa0stage: 3}",
    # issue 7: escapes int(x, 16) reads, lone surrogates, a BOM saved twice
    "escape-plus": '{"a": "\\u+041"}',
    "escape-space": '{"a": "\\u 041"}',
    "escape-underscore": '{"a": "\\u0_41"}',
    "escape-minus": '{"a": "\\u-041"}',
    "escape-arabic-digits": '{"a": "\\u\u0664\u0661\u0664\u0661"}',
    "lone-high-surrogate": '{"a": "\\ud800"}',
    "lone-low-surrogate": '{"a": "\\udc00"}',
    "high-surrogate-then-bad-escape": '{"a": "\\ud800\\uzzzz"}',
    "high-surrogate-then-plus-escape": '{"a": "\\ud800\\u+041"}',
    "surrogate-key": '{"\\ud800": 1}',
    "mojibake-bom": '\xef\xbb\xbf{"a": 1}',
    "mojibake-bom-only": "\xef\xbb\xbf",
    "mojibake-bom-root-without-braces": "\xef\xbb\xbfa: 1",
    "null-then-formfeed": "a: null\x0c\n",
    "true-then-nbsp-comma": "[true\xa0, 1]",
    "number-then-nbsp": "[1\xa0]",
    # hjson's root-without-braces fallback catches only HjsonDecodeError: where it fails with
    # IndexError, OverflowError or ValueError the text is an error, not one quoteless string
    "root-negative-escape": 'stage:"\\u0041stage\\u-041"',
    "root-huge-float": "a: 1e999",
    "root-nested-huge-float": "a: {b: 1e999}",
    "root-long-integer": "a: 1" + "0" * 5000,
    "root-unclosed-block-comment": "a: 1 /* x",
    "root-triple-quote-at-end": "x: \'\'\'  ",
}


@pytest.mark.parametrize("text", list(_EDGE_CASES.values()), ids=list(_EDGE_CASES))
def test_edge_case_parses_like_hjson(text):
    assert_agree(text)


# --------------------------------------------------------------------------------------------
# (c) duplicate keys, against DeepSpeed's own hook
# --------------------------------------------------------------------------------------------

@st.composite
def text_with_maybe_duplicates(draw) -> str:
    small_keys = st.sampled_from(["a", "b", "stage", "A"])
    leaf = st.one_of(st.integers(0, 3), st.sampled_from(["x", "auto"]), st.booleans())
    obj = st.recursive(
        st.lists(st.tuples(small_keys, leaf), max_size=4).map(lambda p: ("object", p)),
        lambda inner: st.one_of(
            st.lists(st.tuples(small_keys, st.one_of(leaf, inner)), max_size=4).map(lambda p: ("object", p)),
            st.lists(inner, max_size=3),
        ),
        max_leaves=8,
    )
    return _render(draw, draw(obj))


@pytest.fixture(scope="module")
def duplicate_hook():
    # Imported once, outside the examples: importing DeepSpeed takes seconds, past the deadline.
    deepspeed_config_utils = pytest.importorskip("deepspeed.runtime.config_utils")
    return deepspeed_config_utils.dict_raise_error_on_duplicate_keys


@pytest.mark.slow  # a property test
@_SETTINGS
@given(text_with_maybe_duplicates())
@example('{"a": 1, "a": 2}')
@example('{"a": {"stage": 1, "stage": 2}}')
@example('[{"a": 1}, {"a": 1, "b": 2, "a": 3}]')
@example('{"a": 1, "b": {"a": 2}}')
def test_duplicates_match_deepspeeds_hook(duplicate_hook, text):
    hook = duplicate_hook
    assert_agree(text)  # same data (last duplicate wins in both) or both fail
    try:
        doc = parse(text)
    except ParseError:
        return  # hjson without the hook fails too (asserted above)
    try:
        hjson.loads(text, object_pairs_hook=hook)
        deepspeed_says = "no duplicates"
    except ValueError as err:
        duplicates = "Duplicate keys in DeepSpeed config" in str(err)
        deepspeed_says = "raises for duplicates" if duplicates else f"raises {err}"
    ours = [d.pointer for d in doc.duplicates]
    assert bool(ours) == (deepspeed_says == "raises for duplicates"), (
        f"input {text!r}\n  DeepSpeed's hook: {deepspeed_says}\n  parse(text).duplicates: {ours}")

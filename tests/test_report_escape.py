"""report/escape.py, medium by medium: what each escape guarantees, on hostile and generated text.

"No line is a workflow command" is checked with tests/ci_runner.py, the runner's own parsing rules.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ci_runner import assert_inert, runner_command, runner_lines
from zeroadvisor.report import escape

HOSTILE = [
    "plain",
    "line\n::error file=x.json,line=1::pwned",
    "\r::add-mask::secret",
    "  ::warning::indented",
    "text ##[add-mask]secret",
    "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x9b2J \x7f \x00",
    "bidi \u202eevil\u202c \u2066iso\u2069 \u200f",
    "sep\u2028line\u2029para\x85next\x0b\x0c",
    "bytes \udcff\udc80 lone \ud800",
    "tab\there",
]

texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=40) | st.sampled_from(HOSTILE)
SETTINGS = settings(max_examples=150, deadline=None, derandomize=True)


# --- terminal -------------------------------------------------------------------------------

def test_terminal_makes_controls_visible():
    assert escape.terminal("a\nb\rc\td") == "a\\nb\\rc\\td"
    assert escape.terminal("\x1b[31m") == "\\x1b[31m"
    assert escape.terminal("\x9b \x7f \x00") == "\\x9b \\x7f \\x00"
    assert escape.terminal("\u202eabc\u2069") == "\\u202eabc\\u2069"
    assert escape.terminal("\u2028\xa0\u200b") == "\\u2028\\xa0\\u200b"
    assert escape.terminal("\U000e0041") == "\\U000e0041"  # a tag character (Cf), beyond the BMP
    # surrogateescape: the undecodable byte 0xff of a file name is shown as that byte
    assert escape.terminal(os.fsdecode(b"bad\xff.json")) == "bad\\xff.json"
    assert escape.terminal("##[add-mask]x") == "##\\x5badd-mask]x"
    # what is printable stays as it is: non-ASCII letters, emoji, a Windows path
    assert escape.terminal("ds_zéro 🙂 C:\\cfg\\ds.json") == "ds_zéro 🙂 C:\\cfg\\ds.json"


@pytest.mark.slow  # a property test
@SETTINGS
@given(texts)
def test_terminal_is_one_printable_line(text):
    out = escape.terminal(text)
    assert out.isprintable()  # no control, format, separator or surrogate character survives
    assert "##[" not in out
    out.encode("utf-8")  # strict: encodable, whatever the input held


def test_log_safe_breaks_line_start_commands():
    out = escape.log_safe("ok\n  ::add-mask::secret\n::error::x\nsee ##[error]y\n")
    assert out == "ok\n  \\x3a:add-mask::secret\n\\x3a:error::x\nsee ##\\x5berror]y\n"
    assert_inert(out)
    assert escape.log_safe("our ::text:: inside a line") == "our ::text:: inside a line"


@pytest.mark.slow  # a property test
@SETTINGS
@given(st.lists(texts, max_size=6))
def test_escaped_pieces_wrapped_anywhere_stay_inert(pieces):
    # pieces of data joined by blanks and newlines, as textwrap or a diff could put them at a line start
    text = "\n ".join(escape.terminal(p) for p in pieces) + "\n" + " ".join(escape.terminal(p) for p in pieces)
    assert_inert(escape.output(text))


def test_terminal_block_keeps_line_ends_and_tabs():
    diff = "--- a\r\n+++ b\r\n@@ -1 +1 @@\r\n-\t\"x\": 1\r\n+\t\"x\": 2\x1b[2J\r\n lone\rcr\n"
    out = escape.terminal_block(diff)
    assert out == "--- a\r\n+++ b\r\n@@ -1 +1 @@\r\n-\t\"x\": 1\r\n+\t\"x\": 2\\x1b[2J\r\n lone\\rcr\n"


# --- workflow commands ----------------------------------------------------------------------

@pytest.mark.slow  # a property test
@SETTINGS
@given(texts, texts)
def test_workflow_command_reads_back_as_one_command(name, message):
    line = f"::error file={escape.workflow_property(name)},line=1,col=2::{escape.workflow_data(message)}"
    assert len(runner_lines(line)) == 1
    command, props, data = runner_command(line)
    assert command == "error"
    assert props.pop("file", "") == escape.terminal(name)  # the runner drops an empty value
    assert props == {"line": "1", "col": "2"}
    assert data == escape.terminal(message)


def test_workflow_escapes_follow_actions_toolkit():
    assert escape.workflow_data("100% done") == "100%25 done"
    assert escape.workflow_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert escape.workflow_data("a\nb") == "a\\nb"  # a finding is one line: shown, not a line break


# --- markdown -------------------------------------------------------------------------------

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _inline_tokens(source: str) -> list:
    tokens = []
    for block in MD.parse(source):
        tokens += block.children or []
    return tokens


@pytest.mark.slow  # a property test
@SETTINGS
@given(texts)
def test_markdown_inline_renders_exactly_the_text(text):
    source = f"- **ZA101 name**: {escape.markdown_inline(text)}"
    blocks = MD.parse(source)
    assert [t.type for t in blocks] == ["bullet_list_open", "list_item_open", "paragraph_open", "inline",
                                        "paragraph_close", "list_item_close", "bullet_list_close"]
    inline = _inline_tokens(source)
    kinds = {t.type for t in inline}
    assert kinds <= {"strong_open", "strong_close", "text", "softbreak"}, kinds
    rendered = "".join(t.content for t in inline if t.type == "text")
    expected = "ZA101 name: " + escape.terminal(text)
    # mentions and references are broken by a zero-width space, and a paragraph loses its trailing blanks
    assert rendered.replace("\u200b", "") == expected.rstrip(" ")


def test_markdown_inline_hostile_keys():
    out = escape.markdown_inline("<img src=x onerror=alert(1)> [x](https://e.example) ![i](y) **b** @team #12 `c`|")
    html = MD.render(out)
    assert "<img" not in html and "<a " not in html and "<strong>" not in html and "<code>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "@&#8203;team" in out and "#&#8203;12" in out  # github/markup#1168: \@ still mentions


def test_markdown_in_a_table_cell_stays_in_its_cell():
    source = f"| a | b |\n|---|---|\n| {escape.markdown_inline('x | y')} | z |\n"
    cells = [t.content for t in _inline_tokens(source) if t.type == "text"]
    assert cells == ["a", "b", "x | y", "z"]


@pytest.mark.slow  # a property test
@SETTINGS
@given(st.text(st.sampled_from("`~ \nab"), max_size=30))
def test_markdown_fence_holds_any_content(content):
    block = escape.markdown_fence(content, "diff")
    tokens = MD.parse(block + "\n\nafter\n")
    assert tokens[0].type == "fence" and tokens[0].info == "diff"
    assert tokens[0].content.rstrip("\n") == escape.terminal_block(content).rstrip("\n")
    assert tokens[1].type == "paragraph_open"  # the text after the fence is outside it


def test_markdown_fence_longer_than_the_backticks_inside():
    assert escape.markdown_fence("``` closes?\n`````", "diff").startswith("``````diff\n")
    assert escape.markdown_fence("no ticks").startswith("```\n")


@pytest.mark.slow  # a property test
@SETTINGS
@given(st.text(st.characters(codec="utf-8"), min_size=1, max_size=20).filter(lambda t: t.strip()))
def test_markdown_code_span_shows_the_text(text):
    tokens = _inline_tokens(escape.markdown_code(text))
    assert [t.type for t in tokens] == ["code_inline"]
    assert tokens[0].content == escape.terminal(text)


# --- JSON -----------------------------------------------------------------------------------

@pytest.mark.slow  # a property test
@SETTINGS
@given(st.recursive(st.none() | st.booleans() | st.integers() | texts,
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
                    max_leaves=8))
def test_json_dumps_is_utf8_printable_and_means_the_safe_value(value):
    out = escape.json_dumps(value)
    raw = out.encode("utf-8")  # strict: never a lone surrogate
    assert json.loads(raw.decode("utf-8")) == escape.json_safe(value)
    assert_inert(out)
    ascii_out = escape.json_dumps(value, ascii_only=True)
    assert ascii_out.isascii() and json.loads(ascii_out) == escape.json_safe(value)


def test_json_safe_shows_undecodable_bytes_like_backslashreplace():
    name = os.fsdecode(b"cfg/\xff\xfe.json")
    assert escape.json_safe({name: [name]}) == {"cfg/\\xff\\xfe.json": ["cfg/\\xff\\xfe.json"]}
    assert escape.json_safe(name) == b"cfg/\xff\xfe.json".decode("utf-8", "backslashreplace")
    assert escape.json_safe("\ud800") == "\\ud800"  # a lone surrogate an hjson escape can produce


# --- SARIF ----------------------------------------------------------------------------------

def test_sarif_uri_percent_encodes_rfc3986():
    assert escape.sarif_uri("configs/ds zero#3?.json") == "configs/ds%20zero%233%3F.json"
    assert escape.sarif_uri("100%.json") == "100%25.json"
    assert escape.sarif_uri("zéro.json") == "z%C3%A9ro.json"
    assert escape.sarif_uri("a:b.json") == "a%3Ab.json"  # not the scheme "a"
    assert escape.sarif_uri(os.fsdecode(b"bad\xff.json")) == "bad%FF.json"
    assert escape.sarif_uri("keep/this-._~/a.json") == "keep/this-._~/a.json"


@pytest.mark.slow  # a property test
@SETTINGS
@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00/"), min_size=1, max_size=20))
def test_sarif_uri_round_trips_the_bytes(name):
    uri = escape.sarif_uri(f"dir/{name}")
    assert re.fullmatch(r"(?:[A-Za-z0-9\-._~/]|%[0-9A-F]{2})*", uri)
    assert urllib.parse.unquote_to_bytes(uri) == os.fsencode(f"dir/{name}")


def test_sarif_uri_absolute_path_becomes_relative(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert escape.sarif_uri(str(tmp_path / "sub dir" / "x.json")) == "sub%20dir/x.json"


def test_sarif_message_escapes_embedded_links():
    assert escape.sarif_message("key '[x](https://e.example)' \\ ok") == "key '\\[x\\](https://e.example)' \\\\ ok"


# --- encodings ------------------------------------------------------------------------------

class _Stream:
    def __init__(self, encoding):
        self.encoding = encoding


def test_wants_ascii_from_the_stream_encoding():
    assert escape.wants_ascii(_Stream("ascii")) and escape.wants_ascii(_Stream("ANSI_X3.4-1968"))
    assert escape.wants_ascii(_Stream("latin-1")) and escape.wants_ascii(_Stream(None))
    assert not escape.wants_ascii(_Stream("utf-8")) and not escape.wants_ascii(_Stream("UTF-16"))


def test_for_encoding_words_then_escapes():
    assert escape.for_encoding("✓ fits, ✗ 1 node × 8 — zéro", "ascii") == "yes fits, NO 1 node x 8 - z\\xe9ro"
    assert escape.for_encoding("zéro ✓", "latin-1") == "zéro yes"
    assert escape.for_encoding("🙂", "ascii") == "\\U0001f642"
    assert escape.for_encoding("plain", "ascii") == "plain"


def test_log_safe_splits_lines_as_the_runner_does():
    assert escape.log_safe("a\r::add-mask::x\r\n ::error::y") == "a\r\\x3a:add-mask::x\r\n \\x3a:error::y"

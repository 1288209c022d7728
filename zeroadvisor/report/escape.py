"""Text that comes from files and file names, escaped for the medium it goes to.

A config, a key, an optimizer name or a file name is data. Printed raw it can move a terminal's
cursor or recolour it (ESC, CSI, OSC, C1), reorder what a reader sees (bidi overrides such as
U+202E), start a GitHub Actions workflow command (a line that begins with ``::`` after blanks,
or ``##[`` anywhere in a line: actions/runner ActionCommand.TryParseV2 / TryParse), render as
HTML, links or @mentions in a pull-request comment, or make JSON and SARIF invalid (a file name
with bytes that are not UTF-8 reaches Python as lone surrogates, ``surrogateescape``).

One function per medium:

- terminal, terminal_block, log_safe: terminals and CI logs (text, estimate text)
- output: the last step of every human-readable output (log_safe, then ASCII when asked)
- workflow_data, workflow_property: GitHub workflow commands (``--format github``)
- without_workflow_commands: a raw patch in a log a GitHub runner reads (``lint --diff`` in a job)
- markdown_inline, markdown_code, markdown_fence: the pull-request comment (``--format markdown``)
- json_dumps (with json_safe), sarif_uri, sarif_message: JSON and SARIF
- for_encoding, wants_ascii: output the stream can encode (``PYTHONIOENCODING=ascii``)

Undecodable bytes of a file name are shown as ``\\xNN`` everywhere a person reads them and in
JSON/SARIF strings (Python's ``backslashreplace``), so JSON stays valid UTF-8 and means the same
to every parser; in a SARIF ``uri`` they are percent-encoded, which keeps the exact bytes.
Backslashes are not doubled outside markdown and SARIF messages: a Windows path stays readable.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import PurePath, PureWindowsPath

# --- terminals and CI logs -----------------------------------------------------------------
# Patterns are strings that ``re`` compiles on first use and caches: ``lint`` starts fast.

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SURROGATE_BYTES = range(0xDC80, 0xDD00)  # os.fsdecode's surrogateescape: byte 0xNN -> U+DCNN


def _visible(ch: str) -> str:
    """One character a terminal would act on (or a reader could not see) as a visible escape."""
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if code in _SURROGATE_BYTES:
        return f"\\x{code - 0xDC00:02x}"  # the undecodable byte itself
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _printable(text: str, keep: str = "") -> str:
    # str.isprintable is False for C0/C1 controls and DEL (Cc), format characters such as the bidi
    # overrides and zero-width joiners (Cf), lone surrogates (Cs), private use (Co), unassigned
    # (Cn), line/paragraph separators (Zl, Zp) and every blank but the ASCII space (Zs): all of
    # them are escaped, so one line of data stays one visible line.
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in keep else _visible(ch) for ch in text)


def terminal(text: str) -> str:
    """One piece of one line for a terminal or a CI log: control and invisible characters as
    ``\\n``/``\\x1b``/``\\u202e`` escapes, and no ``##[`` (a runner command anywhere in a line)."""
    return _printable(str(text)).replace("##[", "##\\x5b")


_LONE_CR = r"\r(?!\n)"


def terminal_block(text: str) -> str:
    """Verbatim lines (a diff) for a terminal: keeps line ends (LF, CRLF) and tabs, escapes the rest."""
    text = re.sub(_LONE_CR, "\\\\r", str(text))
    return _printable(text, keep="\n\r\t").replace("##[", "##\\x5b")


_LINE_BREAK = r"(\r\n|\r|\n)"  # how the runner splits output (StreamReader.ReadLine)


def log_safe(text: str) -> str:
    """A whole output, last step: no line a GitHub runner reads as a workflow command.

    The runner trims leading blanks and takes a line that then starts with ``::`` as a command
    (TryParseV2), and ``##[`` anywhere in a line (TryParse). Our own lines never do; data wrapped
    to the start of a line, or a diff line of the config, could.
    """
    parts = re.split(_LINE_BREAK, text)  # lines at even indices, their breaks between
    for i in range(0, len(parts), 2):
        line = parts[i]
        stripped = line.lstrip()  # Python's blanks include every one .NET's TrimStart removes
        if stripped.startswith("::"):
            at = len(line) - len(stripped)
            line = line[:at] + "\\x3a" + line[at + 1:]
        parts[i] = line.replace("##[", "##\\x5b")
    return "".join(parts)


# --- GitHub workflow commands --------------------------------------------------------------

def workflow_data(text: str) -> str:
    """The message of ``::error ...::message`` (actions/toolkit core/src/command.ts escapeData),
    after control characters are made visible (a log viewer renders ANSI sequences)."""
    return terminal(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A property value such as ``file=`` or ``title=`` (command.ts escapeProperty)."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")


def without_workflow_commands(text: str, token: str | None = None) -> str:
    """Verbatim text (a patch of the config's own bytes) for a log a GitHub runner reads, none of its lines run as
    a workflow command: between ``::stop-commands::TOKEN`` and ``::TOKEN::``, the runner's documented way
    (actions/runner ActionCommandManager: while stopped, every command but the resume token is ignored, ``::``
    and ``##[`` alike). log_safe cannot serve here, as it changes the bytes ``git apply`` must find; the
    token is random, so a config cannot hold the line that resumes the commands. Text before the first
    ``--- `` and after the last hunk is skipped by ``git apply`` and ``patch``."""
    import secrets

    token = token or f"zeroadvisor-{secrets.token_hex(16)}"
    # the resume line must start a line of its own: the runner splits at CR and LF (StreamReader.ReadLine)
    end = "" if text.endswith("\n") else "\n"
    return f"::stop-commands::{token}\n{text}{end}::{token}::\n"


# --- Markdown (GitHub-flavoured, for a pull-request comment) -------------------------------

_MD_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
# ASCII punctuation that starts inline markdown (CommonMark backslash escapes): emphasis, code,
# links and images, tables, strikethrough, math ($), footnotes/attributes ({}); a backslash
# escape turns each into the literal character.
_MD_PUNCTUATION = frozenset("\\`*_[]()!|~${}")
_ZWSP = "&#8203;"  # GitHub links @user and #123 after rendering, so \@ does not stop a mention
# (github/markup#1168, github/cmark-gfm#181); a zero-width space after the sign does.
_MD_REFERENCE = r"([@#])(?=[0-9A-Za-z])"


def markdown_inline(text: str) -> str:
    """Text inside a paragraph, list item or table cell that renders as exactly these characters:
    no HTML (``<img>``), links, images, emphasis, pipes, mentions or issue references."""
    text = terminal(text)  # control characters visible; a newline cannot start a block
    out = "".join(_MD_ENTITIES.get(ch) or ("\\" + ch if ch in _MD_PUNCTUATION else ch) for ch in text)
    return re.sub(_MD_REFERENCE, lambda m: m.group(1) + _ZWSP, out)


def _fence(content: str, mark: str, least: int) -> str:
    longest = max((len(run) for run in re.findall(re.escape(mark) + "+", content)), default=0)
    return mark * max(least, longest + 1)


def markdown_code(text: str) -> str:
    """Inline code outside a table: a backtick string longer than any run inside it (CommonMark
    code spans); no HTML, emphasis or mention is rendered inside."""
    text = terminal(text)
    fence = _fence(text, "`", 1)
    # CommonMark strips one space from each end when both have one: pad so that gives back text
    edge = text[:1] == "`" or text[-1:] == "`" or (text[:1] == " " and text[-1:] == " " and text.strip())
    pad = " " if edge else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def markdown_fence(content: str, info: str = "") -> str:
    """A fenced code block that no line of ``content`` can close: the fence is longer than the
    longest backtick run in it (CommonMark: a closing fence is at least as long as the opening)."""
    content = terminal_block(content).rstrip("\n")
    fence = _fence(content, "`", 3)
    return f"{fence}{info}\n{content}\n{fence}"


# --- JSON and SARIF ------------------------------------------------------------------------

_SURROGATES = "[\ud800-\udfff]"


def _scalar_values(text: str) -> str:
    """Lone surrogates (undecodable file-name bytes, or a ``\\ud800`` escape hjson accepts) are not
    Unicode scalar values: UTF-8 cannot hold them and JSON parsers disagree on them."""
    return re.sub(_SURROGATES, lambda m: _visible(m.group()), text)


def json_safe(value: object) -> object:
    """``value`` with every string (keys too) made of Unicode scalar values only."""
    if isinstance(value, str):
        return _scalar_values(value)
    if isinstance(value, dict):
        return {json_safe(k) if isinstance(k, str) else k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_dumps(value: object, *, ascii_only: bool = False, indent: int | None = 2) -> str:
    """JSON text, one document plus a newline, that is valid UTF-8 and safe to print.

    The parsed value is exactly ``json_safe(value)``: invisible characters in strings are written as
    ``\\uXXXX`` escapes, which every parser reads back as the same character, so a terminal never
    sees them raw; ``##[`` becomes ``##\\u005b`` (the same string) so a CI log does not run it.
    """
    text = json.dumps(json_safe(value), indent=indent, ensure_ascii=ascii_only)
    if not ascii_only and not text.isprintable():
        # Outside strings JSON text has only printable ASCII and the newlines of the indent.
        text = "".join(ch if ch.isprintable() or ch == "\n" else _json_escape(ch)
                       for ch in text)
    return text.replace("##[", "##\\u005b") + "\n"


_URI_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")


def _percent_encode(raw: bytes) -> str:
    """RFC 3986 section 2.1: every octet but the unreserved characters and "/" as %XX. A ":" is
    encoded too, so a relative reference like ``a:b.json`` cannot read as the scheme ``a``."""
    return "".join(chr(b) if b in _URI_KEEP else f"%{b:02X}" for b in raw)


def sarif_uri(path: str) -> str:
    """``artifactLocation.uri`` for a path: relative to the working directory when it can be (what
    code scanning matches against the repository), else a ``file:`` URI; the bytes of the name
    (``os.fsencode``, so undecodable bytes come back exactly) percent-encoded."""
    pure: PurePath = PurePath(path)
    if pure.is_absolute():
        with contextlib.suppress(ValueError):  # another drive on Windows
            pure = PurePath(os.path.relpath(path))
    encoded = _percent_encode(os.fsencode(pure.as_posix()))
    if not pure.is_absolute():
        return encoded
    if isinstance(pure, PureWindowsPath):  # C:/x -> file:///C:/x (the drive colon stays)
        return "file:///" + encoded.replace("%3A", ":", 1)
    return "file://" + encoded


_SARIF_LINK = r"([\\\[\]])"


def sarif_message(text: str) -> str:
    """``message.text``: SARIF 2.1.0 section 3.11.6 reads ``[text](target)`` in a plain-text message as
    an embedded link; literal brackets (and the backslash that escapes them) are backslash-escaped."""
    return re.sub(_SARIF_LINK, r"\\\1", _scalar_values(str(text)))


# --- encodings -----------------------------------------------------------------------------

# Symbols the reports use, in words for a stream that cannot encode them.
_ASCII_WORDS = {
    "✓": "yes", "✗": "NO", "✅": "yes", "❌": "NO", "⚠️": "tight", "⚠": "tight", "–": "-", "—": "-", "×": "x", "·": "*",
    "²": "^2", "→": "->", "≤": "<=", "≥": ">=", "…": "...", "Ψ": "Psi",
    "🔴": "[error]", "🟡": "[warning]", "🔵": "[info]",
}
_PROBE = "✓✗×—"


def wants_ascii(stream: object) -> bool:
    """Whether a text stream cannot encode the report's symbols (``PYTHONIOENCODING=ascii``, a
    latin-1 console, no encoding at all): then renderers are asked for ``ascii_only`` output."""
    encoding = getattr(stream, "encoding", None)
    if not encoding:
        return True
    try:
        _PROBE.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return True
    return False


def for_encoding(text: str, encoding: str = "ascii") -> str:
    """``text`` that encodes in ``encoding`` without error: the report's symbols in words, any
    other character the encoding lacks as a ``\\xNN``/``\\uNNNN`` escape."""
    try:
        text.encode(encoding)
        return text
    except UnicodeEncodeError:
        pass
    out = []
    for ch in text:
        try:
            ch.encode(encoding)
            out.append(ch)
        except UnicodeEncodeError:
            out.append(_ASCII_WORDS.get(ch) or _visible(ch))
    return "".join(out)


def output(text: str, ascii_only: bool = False) -> str:
    """The last step of every human-readable output (text, estimate, github, markdown): no line a
    CI runner runs as a command, and only ASCII when the stream cannot take more."""
    text = log_safe(text)
    return for_encoding(text, "ascii") if ascii_only else text

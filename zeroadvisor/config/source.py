"""Config text to a document with positions, parsed the way DeepSpeed parses it.

DeepSpeed reads a config path with ``hjson.load(..., object_pairs_hook=
dict_raise_error_on_duplicate_keys)`` (deepspeed/runtime/config.py, config_utils.py), so
comments, trailing commas, unquoted keys and quoteless values pass, and a duplicate key
raises. The Hugging Face Trainer and Accelerate read the same file with ``json.load``,
which rejects all of those. This module ports hjson 3.1's decoder (hjson/decoder.py, MIT)
so the values are exactly what DeepSpeed sees, and records for every key and value its
line and column, every place strict JSON would fail, and duplicate keys.

Nothing here raises for bad input except :class:`ParseError`, which carries a position.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar, cast

from zeroadvisor.config.limits import MAX_DEPTH, MAX_POINTER_CHARS
from zeroadvisor.jsontypes import JSONArray, JSONObject, JSONValue

# hjson's own whitespace (decoder.py WHITESPACE): only these four separate tokens. Python's
# str.strip()/isspace() also take NBSP, \x0c, \x85, U+2028 and the rest; where hjson calls
# strip() the port calls it at the same place, nowhere else.
_WHITESPACE = " \t\n\r"
_PUNCTUATOR = "{}[],:"
# hjson's number grammar (hjson/decoder.py NUMBER_RE), which is JSON's.
_NUMBER_RE = re.compile(r"[\t ]*(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?[\t ]*")
_STRINGCHUNK = re.compile(r"(.*?)(['\"\\\x00-\x1f])", re.DOTALL)
_BACKSLASH = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_SPACE_RUN = re.compile(r"[ \t\n\r]*")
# What str.strip() strips: re's \s is Py_UNICODE_ISSPACE for str patterns, as strip() is.
_UNICODE_SPACE_RUN = re.compile(r"\s*")
_EOL = re.compile(r"[\r\n]")
# Python refuses to convert longer digit strings (sys.int_info.default_max_str_digits).
_MAX_INT_DIGITS = 4300
# hjson skips a BOM read as text (U+FEFF) and one decoded as Latin-1 ("\xef\xbb\xbf", which is
# what a UTF-8 file saved again through a Latin-1 editor holds): decoder.py raw_decode.
_BOM, _MOJIBAKE_BOM = "\ufeff", "\xef\xbb\xbf"
# An excerpt of the text in a message stays short however long the value is.
_EXCERPT_CHARS = 40

_T = TypeVar("_T")


class ParseError(ValueError):
    """The text cannot be read as DeepSpeed reads it; ``offset`` (or line/column) locates it."""

    def __init__(self, message: str, offset: int | None = None, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.line = line
        self.column = column


class _Abort(ParseError):
    """Where hjson fails with IndexError, OverflowError, ValueError or RecursionError rather
    than HjsonDecodeError. Its root-without-braces fallback (raw_decode: try an object, else
    one bare value) catches only HjsonDecodeError, so these end the parse: "a: 1e999" is an
    error, not the quoteless string "a: 1e999"."""


@dataclass(frozen=True, slots=True)
class Span:
    start: int  # offset of the first character
    end: int  # offset after the last character


@dataclass(frozen=True, slots=True)
class Member:
    """One ``key: value`` of an object, with the offsets an editor needs."""

    key: str
    key_span: Span
    value_span: Span
    comma: int | None  # offset of the comma after the value, if any


@dataclass(frozen=True, slots=True)
class Deviation:
    """Something DeepSpeed's hjson loader accepts and strict JSON (``json.load``) rejects."""

    kind: str  # comment, trailing-comma, missing-comma, unquoted-key, single-quotes, ...
    offset: int
    detail: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    pointer: str  # JSON pointer of the key, as it would be without the duplicate
    first: Span
    second: Span


@dataclass(slots=True)
class Document:
    """A parsed config: plain data plus positions indexed by RFC 6901 JSON pointer."""

    name: str
    text: str
    data: JSONValue = None
    keys: dict[str, Span] = field(default_factory=dict)  # pointer -> key token
    values: dict[str, Span] = field(default_factory=dict)  # pointer -> value token(s)
    members: dict[str, list[Member]] = field(default_factory=dict)  # object pointer -> members
    quoteless: dict[str, str] = field(default_factory=dict)  # pointer -> raw unquoted text
    numbers: dict[str, str] = field(default_factory=dict)  # pointer -> number as written
    deviations: list[Deviation] = field(default_factory=list)
    duplicates: list[Duplicate] = field(default_factory=list)
    _line_starts: list[int] = field(default_factory=list)
    # the text's syntax: "hjson" (what DeepSpeed reads every path with), or "yaml" where the YAML reader read it
    # (config/yaml_source.py): rules/syntax.py yaml-config says what DeepSpeed makes of a YAML by path
    syntax: str = "hjson"
    # What the layers above read from ``data`` once per document (derived); not part of the document's value.
    _derived: dict[Callable[[Document], object], object] = field(default_factory=dict, init=False, repr=False,
                                                                compare=False)

    def derived(self, compute: Callable[[Document], _T]) -> _T:
        """``compute(self)``, computed once per document: a fact a layer above reads from ``data`` (its kind,
        deepspeed/kind.py; the effective DeepSpeed settings, deepspeed/settings.py) without this layer knowing
        it. Keyed by the function. A document is not changed once parsed; a copy with other data
        (``dataclasses.replace``) starts without derived facts."""
        if compute not in self._derived:
            self._derived[compute] = compute(self)
        # the cache holds each function's own result under that function's key
        return cast(_T, self._derived[compute])

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset; columns count characters.

        A leading byte order mark is invisible in every editor, so line 1 counts from after it.
        """
        if not self._line_starts:
            first = 1 if self.text.startswith(_BOM) else 0
            self._line_starts = [first] + [m.end() for m in re.finditer(r"\r\n|\r|\n", self.text)]
        line = max(1, bisect_right(self._line_starts, offset))
        return line, max(1, offset - self._line_starts[line - 1] + 1)

    def locate(self, pointer: str, at: str = "key") -> tuple[int | None, int | None]:
        """Line and column of the key (or the value) at ``pointer``; (None, None) if unknown."""
        span = (self.keys if at == "key" else self.values).get(pointer)
        if span is None:
            span = self.values.get(pointer) or self.keys.get(pointer)
        if span is None:
            return None, None
        return self.position(span.start)


def escape_pointer_token(token: str) -> str:
    """RFC 6901: '~' -> '~0', '/' -> '~1'."""
    return token.replace("~", "~0").replace("/", "~1")


def join_pointer(parent: str, token: str | int) -> str:
    return f"{parent}/{escape_pointer_token(str(token))}"


class PointerBudget:
    """Counts the characters of every pointer a document stores (limits.MAX_POINTER_CHARS):
    a long key over many values would otherwise cost memory quadratic in the file size."""

    __slots__ = ("used",)

    def __init__(self) -> None:
        self.used = 0

    def child(self, parent: str, token: str | int) -> str | None:
        """The child pointer, or None once the budget is spent."""
        pointer = join_pointer(parent, token)
        self.used += len(pointer)
        return pointer if self.used <= MAX_POINTER_CHARS else None

    MESSAGE = (f"the key paths of this file's values add up to more than {MAX_POINTER_CHARS >> 20}M characters "
               "(very long keys over many values): not a DeepSpeed config")


def decode_bytes(raw: bytes) -> str:
    """UTF-8 text as DeepSpeed's ``open(path)`` reads it; a BOM is kept (hjson skips it)."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ParseError("the file is UTF-16 (it starts with a UTF-16 byte order mark): save it as UTF-8",
                         line=1, column=1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        message = f"not UTF-8 text (byte 0x{raw[err.start]:02x} cannot be decoded)"
        raise ParseError(message, line=line, column=column) from None


def parse(text: str, name: str = "<text>") -> Document:
    """Parse ``text`` the way hjson 3.1 (DeepSpeed's loader) does, recording positions."""
    doc = Document(name=name, text=text)
    try:
        if "\x00" in text:
            raise ParseError("binary data (a NUL byte): not a config file", text.index("\x00"))
        _Parser(doc).run()
    except ParseError as err:
        if err.line is None and err.offset is not None:
            err.line, err.column = doc.position(max(0, min(err.offset, len(text))))
        raise
    except RecursionError:
        raise ParseError("nested too deeply to read", line=1, column=1) from None
    return doc


class _Parser:
    def __init__(self, doc: Document):
        self.doc = doc
        self.s = doc.text
        self._newlines: list[int] | None = None  # offsets of every "\n", built on first need
        self._pointers = PointerBudget()

    def child(self, parent: str, token: str | int, offset: int) -> str:
        pointer = self._pointers.child(parent, token)
        if pointer is None:
            raise _Abort(PointerBudget.MESSAGE, offset)
        return pointer

    # -- whitespace and comments (hjson getNext) ---------------------------------------
    def next_token(self, end: int) -> tuple[str, int]:
        s = self.s
        while True:
            end = _run_end(_SPACE_RUN, s, end)
            ch = s[end : end + 1]
            ch2 = s[end + 1 : end + 2]
            if ch == "#" or (ch == "/" and ch2 == "/"):
                self.deviate("comment", end, "a '#' or '//' comment")
                end = self.end_of_line(end)
            elif ch == "/" and ch2 == "*":
                self.deviate("comment", end, "a '/* */' comment")
                close = s.find("*/", end + 2)
                if close < 0:  # hjson indexes past the end here: DeepSpeed fails with IndexError
                    raise _Abort("a '/*' comment is never closed", end)
                end = close + 2
            else:
                return ch, end

    def end_of_line(self, end: int) -> int:
        match = _EOL.search(self.s, end)
        return match.start() if match else len(self.s)

    def deviate(self, kind: str, offset: int, detail: str) -> None:
        self.doc.deviations.append(Deviation(kind, offset, detail))

    # -- document -------------------------------------------------------------------------
    def run(self) -> None:
        s, doc = self.s, self.doc
        idx = 0
        if s.startswith(_BOM):
            self.deviate("bom", 0, "a UTF-8 byte order mark")
            idx = 1
        elif s.startswith(_MOJIBAKE_BOM):
            self.deviate("bom", 0, "a byte order mark saved twice (the characters \xef\xbb\xbf)")
            idx = 3
        start = idx
        ch, idx = self.next_token(idx)
        if ch == "":
            if start:  # hjson returns {} only when nothing, not even a BOM, precedes the blank
                raise ParseError("unexpected end of file: a key or '}' is missing", idx)
            doc.data = {}  # an empty or comment-only file
            return
        if ch in "{[":
            doc.data, end = self.value(idx, "", 0)
        else:
            try:
                doc.data, end = self.object(idx, "", 0, braces=False)
                self.deviate("root-without-braces", idx, "an object without enclosing braces")
            except ParseError as first_error:
                if isinstance(first_error, _Abort):
                    raise
                # hjson then tries a single bare value (a number, true, a string...).
                doc.deviations = [d for d in doc.deviations if d.offset < idx]
                try:
                    doc.data, end = self.value(idx, "", 0)
                except ParseError:
                    raise first_error from None
        _, end = self.next_token(end)
        if end != len(s):
            raise ParseError(f"unexpected text after the end of the config: {_excerpt(s, end)}", end)
        # The scanner may look at the same comment twice; report each place once.
        unique = {(d.kind, d.offset): d for d in doc.deviations}
        doc.deviations = sorted(unique.values(), key=lambda d: d.offset)

    # -- values (hjson make_scanner._scan_once) ----------------------------------------------
    def value(self, idx: int, pointer: str, depth: int) -> tuple[JSONValue, int]:
        s = self.s
        ch = s[idx : idx + 1]
        value: JSONValue
        if ch == "":
            raise ParseError("unexpected end of file: a value is missing", idx)
        if ch in "\"'":
            if s.startswith("'''", idx):
                self.deviate("multiline-string", idx, "a ''' multi-line string")
                value, end = self.multiline_string(idx)
            else:
                if ch == "'":
                    self.deviate("single-quotes", idx, "a single-quoted string")
                value, end = self.string(idx + 1)
        elif ch == "{":
            return self.object(idx + 1, pointer, depth + 1, braces=True, start=idx)
        elif ch == "[":
            return self.array(idx + 1, pointer, depth + 1, start=idx)
        else:
            value, end = self.quoteless(idx, pointer)
            self.doc.values[pointer] = Span(idx, end)
            return value, end
        self.doc.values[pointer] = Span(idx, end)
        return value, end

    def object(self, idx: int, pointer: str, depth: int, braces: bool,
               start: int | None = None) -> tuple[JSONObject, int]:
        if depth > MAX_DEPTH:
            raise _Abort(f"nested more than {MAX_DEPTH} levels deep", idx - 1)
        begin = start if start is not None else idx
        doc = self.doc
        result: JSONObject = {}
        members: list[Member] = []
        doc.members[pointer] = members
        ch, end = self.next_token(idx)
        if braces and ch == "}":
            doc.values[pointer] = Span(begin, end + 1)
            return result, end + 1
        while True:
            key_start = self.next_token(end)[1]
            key, end = self.key_name(end)
            key_span = Span(key_start, end)
            ch, end = self.next_token(end)
            if ch != ":":
                raise ParseError(f"expected ':' after the key {key!r}", end)
            ch, end = self.next_token(end + 1)
            child = self.child(pointer, key, key_start)
            if key in result:
                first = doc.keys[child]
                doc.duplicates.append(Duplicate(child, first, key_span))
            doc.keys[child] = key_span
            value, end = self.value(end, child, depth)
            value_span = doc.values.get(child, Span(end, end))
            result[key] = value  # hjson's pairs -> dict keeps the last value, as json.load does
            ch, end, comma = self.member_separator(end, braces)
            members.append(Member(key, key_span, value_span, comma))
            if not braces:
                if ch == "":
                    break
            elif ch == "}":
                end += 1
                break
            elif ch == "":
                raise ParseError("unexpected end of file: an object is not closed with '}'", end)
            ch, end = self.next_token(end)
        doc.values[pointer] = Span(begin, end)
        return result, end

    def member_separator(self, end: int, braces: bool) -> tuple[str, int, int | None]:
        """After an object member: the token that follows its comma (or it, when hjson's newline stands in
        for the comma) and where; the comma's offset, None without one."""
        ch, end = self.next_token(end)
        comma = None
        if ch == ",":
            comma = end
            ch, end = self.next_token(end + 1)
            if (braces and ch == "}") or (not braces and ch == ""):
                self.deviate("trailing-comma", comma, "a comma after the last member")
        elif (braces and ch not in ("}", "")) or (not braces and ch != ""):
            self.deviate("missing-comma", end, "members separated by a newline without a comma")
        return ch, end, comma

    def array(self, idx: int, pointer: str, depth: int, start: int) -> tuple[JSONArray, int]:
        if depth > MAX_DEPTH:
            raise _Abort(f"nested more than {MAX_DEPTH} levels deep", idx - 1)
        values: JSONArray = []
        ch, end = self.next_token(idx)
        if ch == "]":
            self.doc.values[pointer] = Span(start, end + 1)
            return values, end + 1
        if ch == "":
            raise ParseError("unexpected end of file: an array is not closed with ']'", end)
        while True:
            value, end = self.value(end, self.child(pointer, len(values), end), depth)
            values.append(value)
            ch, end = self.next_token(end)
            if ch == ",":
                comma = end
                ch, end = self.next_token(end + 1)
                if ch == "]":
                    self.deviate("trailing-comma", comma, "a comma after the last element")
            elif ch not in ("]", ""):
                self.deviate("missing-comma", end, "elements separated by a newline without a comma")
            if ch == "]":
                end += 1
                break
            if ch == "":
                raise ParseError("unexpected end of file: an array is not closed with ']'", end)
            ch, end = self.next_token(end)
        self.doc.values[pointer] = Span(start, end)
        return values, end

    # -- keys (hjson scanKeyName) ------------------------------------------------------------
    def key_name(self, end: int) -> tuple[str, int]:
        ch, end = self.next_token(end)
        if ch and ch in "\"'":
            if ch == "'":
                self.deviate("single-quotes", end, "a single-quoted key")
            return self.string(end + 1)
        return self.unquoted_key(end)

    def unquoted_key(self, begin: int) -> tuple[str, int]:
        """A key without quotes, from ``begin`` to its ':' (hjson's own rules for the whitespace in it)."""
        s = self.s
        end, space = begin, -1
        while True:
            ch = s[end : end + 1]
            if ch == "":
                raise ParseError("unexpected end of file: a key or '}' is missing", end)
            if ch == ":":
                if begin == end:
                    raise ParseError("found ':' but no key name", begin)
                if space >= 0 and space != end - 1:
                    raise ParseError("whitespace inside an unquoted key name", space)
                self.deviate("unquoted-key", begin, "an unquoted key")
                # hjson strips only when one of its own whitespace characters ends the name,
                # and then with str.rstrip(): "stage\xa0:" keeps its NBSP (DeepSpeed then
                # never sees "stage"), "stage\xa0 :" loses both.
                return (s[begin:end].rstrip() if space >= 0 else s[begin:end]), end
            if ch in _WHITESPACE:
                if space < 0 or space == end - 1:
                    space = end
            elif ch in "{}[],":
                raise ParseError(
                    f"found '{ch}' where a key was expected (near {_excerpt(s, begin)})", begin
                )
            end += 1

    # -- strings (hjson scanstring, mlscanstring) ------------------------------------------------
    def string(self, end: int) -> tuple[str, int]:
        s = self.s
        begin = end - 1
        quote = s[begin]
        chunks: list[str] = []
        while True:
            chunk = _STRINGCHUNK.match(s, end)
            if chunk is None:
                raise ParseError("unterminated string", begin)
            end = chunk.end()
            content, terminator = chunk.groups()
            chunks.append(content)
            if terminator == quote:
                break
            if terminator in "\"'":
                chunks.append(terminator)
                continue
            if terminator != "\\":
                raise ParseError(f"control character {terminator!r} inside a string", end - 1)
            esc = s[end : end + 1]
            if esc == "":
                raise ParseError("unterminated string", begin)
            if esc != "u":
                if esc not in _BACKSLASH:
                    raise ParseError(f"invalid escape '\\{esc}' in a string", end - 1)
                if esc == "'":
                    self.deviate("escape", end - 1, "the escape \\' (not JSON)")
                chunks.append(_BACKSLASH[esc])
                end += 1
                continue
            char, end = self.unicode_escape(end)
            chunks.append(char)
        return "".join(chunks), end

    def unicode_escape(self, end: int) -> tuple[str, int]:
        """The character of the ``\\u`` escape at ``end`` (the "u"), as hjson scanstring reads it.

        hjson converts the four characters with ``int(esc, 16)``, refusing only an "x" second
        (so "0x41" fails) and what int() refuses: "+041", " 041", "0_41" and non-ASCII digits
        all pass, as json.load's C scanner would not. A high surrogate joins a following low
        one; a lone surrogate passes through as the character itself.
        """
        s = self.s
        esc = s[end + 1 : end + 5]
        code = self._hex4(esc, end - 1)
        if not all(c in "0123456789abcdefABCDEF" for c in esc):
            self.deviate("escape", end - 1,
                         f"the escape {_shorten(chr(92) + 'u' + esc)} (json.load takes four hex digits)")
        end += 5
        if code & 0xFC00 == 0xD800 and s[end : end + 2] == "\\u":
            low = s[end + 2 : end + 6]
            if len(low) == 4 and low[1:2] not in ("x", "X"):
                low_code = self._hex4(low, end)
                if low_code & 0xFC00 == 0xDC00:
                    code = 0x10000 + (((code - 0xD800) << 10) | (low_code - 0xDC00))
                    end += 6
        if code < 0:  # "-041": hjson's unichr() raises ValueError, and DeepSpeed stops
            raise _Abort(f"invalid escape {_shorten(chr(92) + 'u' + esc)} in a string (a negative code point)",
                             end - 6)
        return chr(code), end

    @staticmethod
    def _hex4(esc: str, offset: int) -> int:
        if len(esc) != 4 or esc[1:2] in ("x", "X"):
            raise ParseError("invalid \\uXXXX escape in a string", offset)
        try:
            return int(esc, 16)
        except ValueError:
            raise ParseError("invalid \\uXXXX escape in a string", offset) from None

    def _indent(self, end: int) -> int:
        """hjson mlscanstring's indent: it steps back from ``end`` one character at a time to
        the previous "\n", and on the first line Python's negative indexing wraps it round to
        the end of the text (IndexError when there is no "\n" at all). Found by bisection in
        the newline offsets: stepping back costs the line's length per string, quadratic for
        many triple-quoted strings on one long line."""
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", self.s)]
        newlines = self._newlines
        before = bisect_right(newlines, end - 1)
        if before:
            return end - newlines[before - 1] - 1
        if not newlines:
            raise _Abort("a triple-quoted string on the first line (hjson cannot read it)", end)
        return len(self.s) + end - 1 - newlines[-1]

    def multiline_string(self, end: int) -> tuple[str, int]:
        s = self.s
        indent = self._indent(end)
        end = _skip_indent(s, end + 3, -1)
        if end >= len(s):  # hjson reads s[end] here: IndexError
            raise _Abort("unterminated \'\'\' string", end)
        if s[end : end + 1] == "\n":
            end = _skip_indent(s, end + 1, indent)
        out: list[str] = []
        triple = 0
        while True:
            ch = s[end : end + 1]
            if ch == "":
                raise ParseError("unterminated ''' string", end)
            if ch == "'":
                triple += 1
                end += 1
                if triple == 3:
                    text = "".join(out)
                    return (text[:-1] if text.endswith("\n") else text), end
                continue
            out.append("'" * triple)
            triple = 0
            if ch == "\n":
                out.append(ch)
                end = _skip_indent(s, end + 1, indent)
            else:
                if ch != "\r":
                    out.append(ch)
                end += 1

    # -- true/false/null/number/quoteless string (hjson scantfnns) -------------------------------
    def quoteless(self, idx: int, pointer: str) -> tuple[JSONValue, int]:
        s = self.s
        first, begin = self.next_token(idx)
        if first in _PUNCTUATOR:
            raise ParseError(f"found '{first}' where a value was expected", begin)
        # hjson re-strips the whole value and re-matches the number at every ",", "}", "]",
        # "#" and "/" it passes (quadratic: 500,000 commas took 14 s). Both answers depend on
        # where the value starts, not on where this stop is, so they are worked out once: a
        # keyword matches while the stop lies within the whitespace str.strip() would remove
        # after it; a number only at the one stop where its match ends.
        literal, literal_end = None, -1
        for word, value in (("null", None), ("true", True), ("false", False)):
            if first == word[0] and s.startswith(word, begin):
                literal = value
                literal_end = _run_end(_UNICODE_SPACE_RUN, s, begin + len(word))
                break
        number = _NUMBER_RE.match(s, begin) if first == "-" or "0" <= first <= "9" else None
        end = begin
        while True:
            ch = s[end : end + 1]
            eol = ch in ("\r", "\n", "")
            if eol or ch in ",}]#" or (ch == "/" and s[end + 1 : end + 2] in ("/", "*")):
                if literal_end >= end:
                    return literal, end
                if number is not None and number.end() == end:
                    return self.number(number, pointer), end
                if eol:
                    raw = s[begin:end].strip()
                    self.doc.quoteless[pointer] = raw
                    self.deviate("quoteless-string", begin, f"the unquoted value {_shorten(raw)}")
                    return raw, end
            end += 1

    def number(self, match: re.Match[str], pointer: str) -> int | float:
        integer, frac, exp = match.groups()
        raw = integer + (frac or "") + (exp or "")
        self.doc.numbers[pointer] = raw
        if not (frac or exp):
            if len(integer) > _MAX_INT_DIGITS:
                raise _Abort(f"an integer with {len(integer)} digits", match.start(1))
            return int(integer)
        value = float(raw)
        if value in (float("inf"), float("-inf")):
            # hjson calls int(inf) here and DeepSpeed dies with OverflowError.
            raise _Abort(f"the number {raw} is too large for a 64-bit float", match.start(1))
        # hjson turns integral floats below 1e10 into ints: 5e8 -> 500000000, 1.0 -> 1.
        if value == int(value) and abs(value) < 1e10:
            return int(value)
        return value


def _run_end(run: re.Pattern[str], s: str, end: int) -> int:
    """Where a run of ``run`` (a pattern that matches the empty string too) starting at ``end`` ends."""
    match = run.match(s, end)
    return end if match is None else match.end()


def _skip_indent(s: str, end: int, n: int) -> int:
    while s[end : end + 1] not in ("",) and s[end] in " \t\r" and n != 0:
        end += 1
        n -= 1
    return end


def _shorten(text: str) -> str:
    """``repr`` of ``text``, cut to _EXCERPT_CHARS characters."""
    return repr(text) if len(text) <= _EXCERPT_CHARS else repr(text[:_EXCERPT_CHARS]) + "..."


def _excerpt(s: str, offset: int, width: int = 20) -> str:
    text = s[offset : offset + width].split("\n", 1)[0]
    return repr(text + ("..." if len(s) > offset + width and "\n" not in s[offset : offset + width] else ""))

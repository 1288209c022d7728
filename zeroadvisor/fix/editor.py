"""Apply a JSON merge patch to config *text*, keeping everything else byte for byte.

``--suggest`` shows the result as a unified diff and ``--fix`` writes it. Only the patched
members change: comments, key order, indentation, line endings and number spelling elsewhere
stay as the user wrote them. Works from the positions the loader recorded
(source.Document.members).

Comments belong to the member they describe: the comment lines directly above a key (no blank
line between) and a comment on the same line after its value. Deleting a member deletes those
and nothing else; a comment separated by a blank line, or on the line of the brace, stays.

The result must read back as MergePatch(data, patch) (RFC 7396), type for type, or nothing is
returned: every refusal is an :class:`EditError` whose ``reason`` is one of :data:`REFUSALS`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass

from zeroadvisor.config.merge_patch import apply as apply_patch
from zeroadvisor.config.source import Document, Member, ParseError, join_pointer, parse
from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.lint.schemawalk import _PLACEHOLDER as PLACEHOLDER  # the template rule's (ZA005) notion


class FixError(Exception):
    """Fixes cannot be shown or written; the message is one line, without the file name."""


class EditError(FixError):
    """The patch cannot be applied to this text; ``reason`` says which refusal (see REFUSALS)."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class WriteError(FixError):
    """The new text cannot be written to the file (permissions, changed on disk, disk full)."""


# Why an edit is refused. "readback", "overlap" and "layout" mean a defect in this module, never a bad input.
REFUSALS = {
    "not-an-object": "the config is not a JSON object",
    "placeholder": "the edit would overwrite or delete a template placeholder",
    "non-finite": "a fix holds NaN or Infinity, which JSON cannot hold",
    "unencodable": "a fix holds text that cannot be written as UTF-8",
    "readback": "the edited text does not read back as the patched config",
    "overlap": "two edits of the config overlap",
    "layout": "the text between two members is not what the loader reported",
}
# Strings a template engine substitutes: `${VAR}` (envsubst, shell heredocs) inside quotes.
_QUOTED_PLACEHOLDER = "${"
# A renamed key keeps the file's quoting: quoteless (hjson) when the new name is a plain word, single quotes
# when nothing in the name needs an escape there; otherwise a JSON string.
_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE_IN_SINGLE_QUOTES = re.compile(r"['\\\x00-\x1f]")


def _refuse(reason: str, detail: str = "") -> EditError:
    return EditError(reason, REFUSALS[reason] + (f": {detail}" if detail else ""))


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    text: str


def patched_text(doc: Document, patch: JSONObject) -> str:
    """The config text with ``patch`` applied; the result parses to MergePatch(data, patch)."""
    if not isinstance(doc.data, dict):
        raise _refuse("not-an-object")
    _check_finite(patch)
    expected = apply_patch(doc.data, patch)
    if _same(expected, doc.data):
        return doc.text  # nothing to change (a second run of the same fix)
    editor = _Editor(doc)
    if "" not in doc.values:  # an empty or comment-only file: hjson reads it as {}
        edits = [editor.new_root(expected)]
    else:
        edits = []
        editor.object("", doc.data, patch, edits)
    text = _apply_edits(doc.text, edits, editor.protected)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _refuse("unencodable") from None
    try:
        new_doc = parse(text, doc.name)
    except ParseError as err:
        raise _refuse("readback", err.message) from None
    if not _same(new_doc.data, expected):  # never write something that reads back differently
        raise _refuse("readback")
    if not doc.deviations and new_doc.deviations:  # strict JSON stays strict JSON
        raise _refuse("readback", f"it would no longer be strict JSON ({new_doc.deviations[0].detail})")
    return text


def _apply_edits(text: str, edits: list[_Edit], protected: list[tuple[int, int]]) -> str:
    """Apply non-overlapping edits; pure deletions that touch are merged first."""
    edits = sorted(edits, key=lambda e: (e.start, e.end))
    merged: list[_Edit] = []
    for edit in edits:
        last = merged[-1] if merged else None
        if last and not edit.text and not last.text and edit.start < edit.end and edit.start <= last.end:
            merged[-1] = _Edit(last.start, max(last.end, edit.end), "")
        else:
            merged.append(edit)
    out, position = [], 0
    for edit in merged:
        if edit.start < position:
            raise _refuse("overlap", f"at offset {edit.start}")
        for start, end in protected:
            if edit.start < end and start < edit.end:
                raise _refuse("placeholder", repr(text[start:end]))
        out.append(text[position : edit.start])
        out.append(edit.text)
        position = edit.end
    out.append(text[position:])
    return "".join(out)


# -- what the data must be -------------------------------------------------------------------
def _same(a: JSONValue, b: JSONValue) -> bool:
    """Equal as JSON values: unlike ``==``, true is not 1 (numbers compare by value: 2 == 2.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None:
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def _check_finite(value: JSONValue) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _refuse("non-finite", repr(value))
    if isinstance(value, dict):
        for item in value.values():
            _check_finite(item)
    elif isinstance(value, list):
        for item in value:
            _check_finite(item)


def _renames(data: JSONObject, patch: JSONObject) -> dict[str, tuple[str, JSONObject]]:
    """Pairs of the patch that rename a member: ``old: null`` and ``new: value`` where ``new`` is not in the
    config and ``value`` is the old value, or an object made from it (every old key kept; a fix or advice of the
    same run may change some). Old key -> (new key, the patch that turns the old value into the new one).

    Written as a deletion and an insertion, a renamed section would lose the comments above and inside it
    and move to the end of its object (issue 20, defect 6).
    """
    out: dict[str, tuple[str, JSONObject]] = {}
    gone = [k for k, v in patch.items() if v is None and k in data]
    for new_key, value in patch.items():
        if value is None or new_key in data:
            continue
        new_value = apply_patch(None, value)
        for old_key in gone:
            if old_key not in out and _made_from(data[old_key], new_value):
                out[old_key] = (new_key, _patch_between(data[old_key], new_value))
                break
    return out


def _made_from(old: JSONValue, new: JSONValue) -> bool:
    if isinstance(old, dict) and isinstance(new, dict):
        return old.keys() <= new.keys()
    return _same(old, new)


def _patch_between(old: JSONValue, new: JSONValue) -> JSONObject:
    """The merge patch that turns the object ``old`` into ``new`` ({} when they are the same)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return {}
    patch: JSONObject = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(old[key], dict):
            inner = _patch_between(old[key], value)
            if inner:
                patch[key] = inner
        elif not _same(old[key], value):
            patch[key] = value
    return patch


# -- the text's own style ----------------------------------------------------------------------
def _line_ending(text: str) -> str:
    """The file's dominant line ending (CRLF files get CRLF lines)."""
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    if crlf > lf and crlf >= cr:
        return "\r\n"
    if cr > lf:
        return "\r"
    return "\n"


def _line_start(text: str, offset: int) -> int:
    return max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1


def _eol_length(text: str, offset: int) -> int:
    """Length of the line break at ``offset`` (0 if there is none)."""
    if text.startswith("\r\n", offset):
        return 2
    return 1 if text[offset : offset + 1] in ("\r", "\n") else 0


def _skip_blanks(text: str, offset: int) -> int:
    while text[offset : offset + 1] in (" ", "\t"):
        offset += 1
    return offset


def _blank(s: str) -> bool:
    return s.strip(" \t\ufeff") == ""


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "comment", "line-comment" (runs to the end of its line) or "comma"
    start: int
    end: int


def _gap_tokens(text: str, start: int, end: int) -> list[_Token]:
    """Comments and commas between two members (the text holds nothing else there)."""
    tokens, i = [], start
    while i < end:
        ch, two = text[i], text[i : i + 2]
        if ch in " \t\r\n\ufeff":
            i += 1
        elif ch == "#" or two == "//":
            stop = i
            while stop < len(text) and text[stop] not in "\r\n":
                stop += 1
            tokens.append(_Token("line-comment", i, stop))
            i = stop
        elif two == "/*":
            stop = text.index("*/", i + 2) + 2
            tokens.append(_Token("comment", i, stop))
            i = stop
        elif ch == ",":
            tokens.append(_Token("comma", i, i + 1))
            i += 1
        else:  # the loader's spans disagree with this scan: refuse rather than guess
            raise _refuse("layout", f"unexpected {ch!r} at offset {i}")
    return tokens


@dataclass(frozen=True, slots=True)
class _Extent:
    """Where one member and what belongs to it lie in the text."""

    start: int  # first character it owns: its first leading comment line, or its key
    value_end: int  # end of the value, without trailing blanks
    content_end: int  # end of its value, comma and same-line comments
    whole_lines: bool  # it owns whole lines: [start, end) ends with the line break
    end: int  # content_end, or after the line break when it owns whole lines
    starts_line: bool  # only whitespace precedes its key on the key's line
    indent: str  # that whitespace
    line_comment: bool  # its content ends with a '#'/'//' comment (nothing may follow on the line)


class _Editor:
    def __init__(self, doc: Document):
        self.doc = doc
        self.text = doc.text
        self.eol = _line_ending(doc.text)
        self.unit = self._indent_unit()
        self.protected = self._placeholders()

    # -- template placeholders: never edited over ----------------------------------------------------
    def _placeholders(self) -> list[tuple[int, int]]:
        spans = []
        for pointer, raw in self.doc.quoteless.items():
            if PLACEHOLDER.match(raw) and pointer in self.doc.values:
                span = self.doc.values[pointer]
                spans.append((span.start, span.end))
        for span in self.doc.values.values():
            raw = self.text[span.start : span.end]
            if raw[:1] in "\"'" and _QUOTED_PLACEHOLDER in raw:
                spans.append((span.start, span.end))
        return spans

    # -- layout ---------------------------------------------------------------------------------------
    def _indent_unit(self) -> str:
        """The file's indentation step (two spaces, four, a tab), from its first nested key."""
        for pointer, span in self.doc.keys.items():
            if pointer.count("/") == 2:
                inner = self._indent_before(span.start)
                parent = self.doc.keys.get(pointer.rsplit("/", 1)[0])
                outer = self._indent_before(parent.start) if parent else None
                if inner is not None and outer is not None and inner.startswith(outer) and len(inner) > len(outer):
                    return inner[len(outer) :]
        for pointer, span in self.doc.keys.items():
            if pointer.count("/") == 1:
                indent = self._indent_before(span.start)
                if indent:
                    return indent
        return "  "

    def _indent_before(self, offset: int) -> str | None:
        """The whitespace before ``offset`` on its line, or None if other text precedes it."""
        prefix = self.text[_line_start(self.text, offset) : offset]
        return prefix.lstrip("\ufeff") if _blank(prefix) else None

    def _interior(self, pointer: str) -> tuple[int, int]:
        """Where the members of an object may lie: inside its braces, or the whole brace-less root."""
        span = self.doc.values[pointer]
        if self.text[span.start : span.start + 1] == "{":
            return span.start + 1, span.end - 1
        return (1 if self.text.startswith("\ufeff") else 0), len(self.text)

    def extents(self, pointer: str) -> list[_Extent]:
        text = self.text
        members = self.doc.members.get(pointer, [])
        interior_start, interior_end = self._interior(pointer)
        value_ends = [m.value_span.start + len(text[m.value_span.start : m.value_span.end].rstrip(" \t"))
                      for m in members]
        out = []
        for index, member in enumerate(members):
            gap_start = value_ends[index - 1] if index else interior_start
            gap_end = members[index + 1].key_span.start if index + 1 < len(members) else interior_end
            before = _gap_tokens(text, gap_start, member.key_span.start)
            after = _gap_tokens(text, value_ends[index], gap_end)
            indent = self._indent_before(member.key_span.start)
            start = member.key_span.start
            if indent is not None:
                start = self._leading_comments(before, _line_start(text, start), gap_start)
            content_end, line_comment = value_ends[index], False
            for token in after:  # same-line comments and the comma belong to this member
                same_line = not any(c in "\r\n" for c in text[value_ends[index] : token.start])
                if same_line or token.start == member.comma:
                    content_end, line_comment = token.end, token.kind == "line-comment"
                else:
                    break
            after_blanks = _skip_blanks(text, content_end)
            eol = _eol_length(text, after_blanks)
            whole_lines = indent is not None and (eol > 0 or after_blanks == len(text))
            end = after_blanks + eol if whole_lines else content_end
            out.append(_Extent(max(start, interior_start), value_ends[index], content_end, whole_lines, end,
                               indent is not None, indent or "", line_comment))
        return out

    def _leading_comments(self, tokens: list[_Token], line_start: int, floor: int) -> int:
        """Start of the comment lines directly above a key line (no blank line, no other text)."""
        text = self.text
        for token in reversed(tokens):
            if token.kind == "comma" or token.start < floor:
                break
            if text[token.end : line_start].lstrip(" \t") not in ("\n", "\r\n", "\r"):
                break  # a blank line (or more text) separates it: a section comment, not this member's
            token_line = _line_start(text, token.start)
            if not _blank(text[token_line : token.start]):
                break  # it trails something else on its line (the brace, a value)
            line_start = token_line
        return line_start

    # -- the patch, object by object ------------------------------------------------------------------
    def object(self, pointer: str, data: JSONObject, patch: JSONObject, edits: list[_Edit]) -> None:
        members = self.doc.members.get(pointer, [])
        last_index = {m.key: i for i, m in enumerate(members)}  # the occurrence DeepSpeed reads
        deleted: set[int] = set()
        replaced: dict[int, JSONValue] = {}
        inserts: JSONObject = {}
        renames = _renames(data, patch)
        deleted.update(self._renamed(pointer, data, renames, edits))
        handled = set(renames) | {new_key for new_key, _ in renames.values()}
        for key, value in patch.items():
            if key in handled:
                continue
            if key not in data:
                if value is not None:
                    inserts[key] = apply_patch(None, value)
                continue
            if value is None:  # every occurrence goes, or an earlier duplicate would come back
                deleted.update(i for i, m in enumerate(members) if m.key == key)
            elif isinstance(value, dict) and isinstance(current := data[key], dict):
                self.object(join_pointer(pointer, key), current, value, edits)
            else:
                new_value = apply_patch(None, value)
                if not _same(new_value, data[key]):
                    replaced[last_index[key]] = new_value
        if deleted or replaced or inserts:
            edits.extend(self._members(pointer, members, deleted, replaced, inserts))

    def _renamed(self, pointer: str, data: JSONObject, renames: dict[str, tuple[str, JSONObject]],
                 edits: list[_Edit]) -> set[int]:
        """The renames' edits: the key token changes in place, so its comments, position and value text stay;
        the value gets only the edits that make it the new value (none for a plain rename). Returns the
        members to delete: earlier duplicates of a renamed key, which would otherwise come back."""
        members = self.doc.members.get(pointer, [])
        last_index = {m.key: i for i, m in enumerate(members)}
        deleted: set[int] = set()
        for old_key, (new_key, inner) in renames.items():
            index = last_index[old_key]
            edits.append(self._rename(members[index], new_key))
            deleted.update(i for i, m in enumerate(members) if m.key == old_key and i != index)
            old_value = data[old_key]
            if inner and isinstance(old_value, dict):  # a patch between two objects: only then not empty
                self.object(join_pointer(pointer, old_key), old_value, inner, edits)
        return deleted

    def _rename(self, member: Member, new_key: str) -> _Edit:
        """The key token of ``member`` spelt as ``new_key``, quoted as the file quotes it."""
        span = member.key_span
        raw = self.text[span.start : span.end]
        if raw.startswith("'") and not _UNSAFE_IN_SINGLE_QUOTES.search(new_key):
            token = f"'{new_key}'"
        elif raw[:1] not in "\"'" and _BARE_KEY.fullmatch(new_key):
            token = new_key  # hjson's quoteless key stays quoteless
        else:
            token = self.dump_key(new_key)
        return _Edit(span.start, span.end, token)

    def _members(self, pointer: str, members: list[Member], deleted: set[int], replaced: dict[int, JSONValue],
                 inserts: JSONObject) -> list[_Edit]:
        text = self.text
        edits: list[_Edit] = []
        extents = self.extents(pointer)
        kept = [i for i in range(len(members)) if i not in deleted]
        separated = [self._comma_after(pointer, m) for m in members]
        trailing_comma = bool(members) and separated[-1]
        multiline = any(e.starts_line for e in extents) or (
            not members and any(c in "\r\n" for c in text[slice(*self._interior(pointer))]))
        has_comma = {i: separated[i] for i in kept}
        edits.extend(self._deletion(extents[index], text) for index in sorted(deleted))
        for index, value in replaced.items():
            member, extent = members[index], extents[index]
            indent = extent.indent if extent.starts_line else self._member_indent(pointer, extents)
            new = self.dump(value, indent, multiline)
            child = join_pointer(pointer, member.key)
            raw = self.doc.quoteless.get(child, "")
            if raw.endswith(","):  # the comma was part of the quoteless value: keep it a separator
                if index != kept[-1] or inserts or trailing_comma:
                    new += ","
                else:
                    has_comma[index] = False
            edits.append(_Edit(member.value_span.start, extent.value_end, new))
        if inserts:
            edits.extend(self._insertion(pointer, members, extents, kept, has_comma, inserts, trailing_comma,
                                         multiline, set(replaced)))
        elif not kept and self.text[self.doc.values[pointer].start] != "{":
            # A brace-less root loses its last member: write `{}` so the file stays an object.
            edits.append(_Edit(edits[0].start, edits[0].start, "{}"))
        elif kept and kept[-1] != len(members) - 1 and has_comma[kept[-1]] and not trailing_comma:
            comma = members[kept[-1]].comma  # the new last member: no comma where the file had none
            if comma is not None:
                edits.append(_Edit(comma, comma + 1, ""))
        return edits

    def _comma_after(self, pointer: str, member: Member) -> bool:
        """A comma follows the value (for a template's `ZERO_STAGE,` the comma is in the value)."""
        return member.comma is not None or self.doc.quoteless.get(join_pointer(pointer, member.key), "").endswith(",")

    @staticmethod
    def _deletion(extent: _Extent, text: str) -> _Edit:
        if extent.whole_lines:
            start, end = extent.start, extent.end
            if end == len(text) and _eol_length(text, end - 1) == 0 and start > 0:
                # The last line of a file without a final newline: take the break before it instead.
                start -= 2 if text[start - 2 : start] == "\r\n" else 1 if text[start - 1] in "\r\n" else 0
            return _Edit(start, end, "")
        start, end = extent.start, extent.end
        following = _skip_blanks(text, end)
        if following > end and text[following : following + 1] not in ("}", "", "\r", "\n"):
            return _Edit(start, following, "")  # `{"a": 1, "b": 2}` -> `{"b": 2}`
        preceding = start
        while preceding > 0 and text[preceding - 1] in " \t":
            preceding -= 1
        return _Edit(preceding, end, "")

    def _insertion(self, pointer: str, members: list[Member], extents: list[_Extent], kept: list[int],
                   has_comma: dict[int, bool], inserts: JSONObject, trailing_comma: bool, multiline: bool,
                   replaced: set[int]) -> list[_Edit]:
        text, eol = self.text, self.eol
        indent = self._member_indent(pointer, extents)
        entries = [f"{self.dump_key(k)}: {self.dump(v, indent, multiline)}" for k, v in inserts.items()]
        if kept:
            anchor, extent = members[kept[-1]], extents[kept[-1]]
            child = join_pointer(pointer, anchor.key)
            quoteless = child in self.doc.quoteless and kept[-1] not in replaced
            if quoteless and not has_comma[kept[-1]]:
                # A quoteless value (a template's ZERO_STAGE) runs to the end of its line and cannot
                # take a comma: the new members go before it, so the text stays valid after substitution.
                if extent.starts_line:
                    body = indent + ("," + eol + indent).join(entries) + "," + eol
                    return [_Edit(extent.start, extent.start, body)]
                return [_Edit(anchor.key_span.start, anchor.key_span.start, ", ".join(entries) + ", ")]
            edits = []
            on_new_line = multiline or extent.line_comment
            # hjson lets a line break separate members; a file written that way gets no comma.
            newline_separated = multiline and not all(self._comma_after(pointer, m) for m in members[:-1])
            if not has_comma[kept[-1]] and not newline_separated:
                edits.append(_Edit(extent.value_end, extent.value_end, ","))
            if on_new_line:
                body = eol + indent + ("," + eol + indent).join(entries) + ("," if trailing_comma else "")
            else:
                body = " " + ", ".join(entries) + ("," if trailing_comma else "")
            edits.append(_Edit(extent.content_end, extent.content_end, body))
            return edits
        if members:  # every member goes: the new ones take the first one's place
            first = self._deletion(extents[0], text)
            if extents[0].whole_lines:
                body = indent + ("," + eol + indent).join(entries) + ("," if trailing_comma else "") + eol
            else:
                body = ", ".join(entries)
            return [_Edit(first.start, first.start, body)]
        return [self._into_empty(pointer, entries, indent)]

    def _into_empty(self, pointer: str, entries: list[str], indent: str) -> _Edit:
        text, eol = self.text, self.eol
        start, end = self._interior(pointer)
        outer = self._indent_before(self.doc.values[pointer].start)
        if outer is None:
            key = self.doc.keys.get(pointer)
            outer = (self._indent_before(key.start) if key else None) or ""
        if _blank(text[start:end].replace("\r", "").replace("\n", "")):
            return _Edit(start, end, eol + indent + ("," + eol + indent).join(entries) + eol + outer)
        # Comments inside `{ }`: the members go before the closing brace.
        line = _line_start(text, end)
        if _blank(text[line:end]):
            return _Edit(line, line, indent + ("," + eol + indent).join(entries) + eol)
        return _Edit(end, end, " " + ", ".join(entries) + " ")

    def _member_indent(self, pointer: str, extents: list[_Extent]) -> str:
        for extent in reversed(extents):
            if extent.starts_line:
                return extent.indent
        if not pointer:
            return self.unit if self.text[self.doc.values[""].start : self.doc.values[""].start + 1] == "{" else ""
        outer = self._indent_before(self.doc.keys[pointer].start) if pointer in self.doc.keys else None
        return (outer or "") + self.unit

    def new_root(self, data: JSONObject) -> _Edit:
        """An empty or comment-only file gets an object after what it holds."""
        eol, text = self.eol, self.text
        entries = [f"{self.dump_key(k)}: {self.dump(v, self.unit, True)}" for k, v in data.items()]
        obj = "{" + eol + self.unit + ("," + eol + self.unit).join(entries) + eol + "}"
        if not text.strip():
            return _Edit(0, len(text), obj + eol)
        ends_with_eol = text.endswith(("\n", "\r"))
        return _Edit(len(text), len(text), ("" if ends_with_eol else eol) + obj + (eol if ends_with_eol else ""))

    # -- values --------------------------------------------------------------------------------------
    def dump(self, value: JSONValue, indent: str, multiline: bool) -> str:
        if isinstance(value, (dict, list)) and value and multiline:
            text = json.dumps(value, indent=self.unit, ensure_ascii=False, allow_nan=False)
            return text.replace("\n", self.eol + indent)
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "))

    @staticmethod
    def dump_key(key: str) -> str:
        return json.dumps(key, ensure_ascii=False)


# -- writing ------------------------------------------------------------------------------------------
def write_atomically(path: str, text: str, original: str | bytes | None = None) -> None:
    """Replace the file at ``path`` with ``text``, atomically; raises WriteError, never OSError.

    A symlink is written through: its target gets the new text (renamed into place in the
    target's folder). The file keeps its mode and, where the process may set them, owner and
    group. A read-only file is refused even for root, who bypasses permission bits. With
    ``original`` (what the caller read), a file changed on disk since then is not overwritten.
    """
    target = os.path.realpath(path)
    try:
        info = os.stat(target)
    except OSError as err:
        raise WriteError(f"cannot write the fix: {_reason(err)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise WriteError("not a regular file: the fix is not written")
    mode = stat.S_IMODE(info.st_mode)
    if not mode & 0o222 or not os.access(target, os.W_OK):
        raise WriteError(f"the file is read-only (mode {mode:04o}): the fix is not written")
    data = text.encode("utf-8")
    expected = original.encode("utf-8") if isinstance(original, str) else original
    try:
        fd, temp = tempfile.mkstemp(prefix=".zeroadvisor-", suffix=".tmp", dir=os.path.dirname(target))
    except OSError as err:
        raise WriteError(f"cannot create a file beside it: {_reason(err)}; the fix is not written") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        _keep_owner(temp, info)
        os.chmod(temp, mode)
        if expected is not None and _read(target) != expected:
            raise WriteError("the file changed on disk since it was read: the fix is not written; run again")
        os.replace(temp, target)
    except OSError as err:
        raise WriteError(f"cannot write the fix: {_reason(err)}; the file is unchanged") from None
    finally:
        if os.path.lexists(temp):
            os.unlink(temp)
    _sync_folder(os.path.dirname(target))


def _keep_owner(temp: str, info: os.stat_result) -> None:
    try:
        os.chown(temp, info.st_uid, info.st_gid)
    except PermissionError:  # not root: keep the group if we are in it, else the file becomes ours
        with contextlib.suppress(PermissionError):
            os.chown(temp, -1, info.st_gid)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def _sync_folder(folder: str) -> None:
    """Make the rename durable; best effort (some file systems refuse to fsync a folder)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _reason(err: OSError) -> str:
    return err.strerror or type(err).__name__

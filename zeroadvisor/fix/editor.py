"""Apply a JSON merge patch to config *text*, keeping everything else byte for byte.

``--suggest`` shows the result as a unified diff and ``--fix`` writes it. Only the patched
keys change: comments, key order, indentation and number spelling elsewhere stay as the
user wrote them. Works from the positions the loader recorded (source.Document.members).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from zeroadvisor.fix.merge_patch import apply as apply_patch
from zeroadvisor.config.source import Document, Member, join_pointer, parse


class EditError(ValueError):
    """The patch cannot be applied to this text (e.g. a YAML file, or a parse failure)."""


@dataclass(frozen=True, slots=True)
class _Edit:
    start: int
    end: int
    text: str


def patched_text(doc: Document, patch: dict[str, Any]) -> str:
    """The config text with ``patch`` applied; the result parses to MergePatch(data, patch)."""
    if not isinstance(doc.data, dict):
        raise EditError("the config is not an object")
    edits: list[_Edit] = []
    _object(doc, "", doc.data, patch, edits)
    text = doc.text
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: edit.start] + edit.text + text[edit.end :]
    expected = apply_patch(doc.data, patch)
    if parse(text, doc.name).data != expected:  # never write something that reads back differently
        raise EditError("the edited text does not read back as the patched config")
    return text


def _object(doc: Document, pointer: str, data: dict[str, Any], patch: dict[str, Any], edits: list[_Edit]) -> None:
    members = {m.key: m for m in doc.members.get(pointer, [])}
    inserts: dict[str, Any] = {}
    deleted: set[str] = set()
    for key, value in patch.items():
        child = join_pointer(pointer, key)
        member = members.get(key)
        if value is None:
            if member is not None:
                deleted.add(key)
        elif member is None:
            inserts[key] = apply_patch(None, value) if isinstance(value, dict) else value
        elif isinstance(value, dict) and isinstance(data.get(key), dict):
            _object(doc, child, data[key], value, edits)
        else:
            new_value = apply_patch(None, value) if isinstance(value, dict) else value
            span = member.value_span
            edits.append(_Edit(span.start, span.end, _dump(new_value, _indent_of(doc, member.key_span.start),
                                                          _indent_unit(doc))))
    edits.extend(_membership(doc, pointer, deleted, inserts))


def _membership(doc: Document, pointer: str, deleted: set[str], inserts: dict[str, Any]) -> list[_Edit]:
    """Edits that delete members and append new ones, without overlapping ranges."""
    members = doc.members.get(pointer, [])
    kept = [m for m in members if m.key not in deleted]
    if members and not kept:  # every member goes: rewrite the interior once
        if inserts:
            return [_insert_into_empty(doc, pointer, inserts)]
        span = doc.values[pointer]
        return [_Edit(span.start + 1, span.end - 1, "")]
    edits: list[_Edit] = []
    last_kept = kept[-1] if kept else None
    trailing = members[members.index(last_kept) + 1:] if last_kept is not None else []
    for index, member in enumerate(members):
        if member.key not in deleted or member in trailing:
            continue
        # From this key to the next key: removes the member, its comma and the line break.
        start = _line_start_if_blank_before(doc.text, member.key_span.start)
        next_start = _line_start_if_blank_before(doc.text, members[index + 1].key_span.start)
        edits.append(_Edit(start, next_start, ""))
    if trailing:
        # The last members go: cut from the end of the last kept value, keeping its comma
        # only when the file uses trailing commas.
        last = trailing[-1]
        end = last.comma + 1 if last.comma is not None else last.value_span.end
        keep_comma = "," if last_kept.comma is not None and last.comma is not None else ""
        edits.append(_Edit(last_kept.value_span.end, end, keep_comma))
        if inserts:
            edits.append(_append_after(doc, pointer, last_kept, inserts, has_comma=bool(keep_comma)))
    elif inserts:
        if last_kept is None:
            edits.append(_insert_into_empty(doc, pointer, inserts))
        else:
            edits.append(_append_after(doc, pointer, last_kept, inserts, has_comma=last_kept.comma is not None))
    return edits


def _append_after(doc: Document, pointer: str, last: Member, values: dict[str, Any], has_comma: bool) -> _Edit:
    members = doc.members[pointer]
    unit = _indent_unit(doc)
    indent = _indent_of(doc, last.key_span.start)
    multiline = _starts_line(doc.text, members[0].key_span.start) or _starts_line(doc.text, last.key_span.start)
    sep = "\n" + indent if multiline else " "
    body = ("," + sep).join(f"{json.dumps(k)}: {_dump(v, indent, unit)}" for k, v in values.items())
    if has_comma:  # hjson-style trailing comma: keep the style
        return _Edit(last.comma + 1, last.comma + 1, sep + body + ",")
    if join_pointer(pointer, last.key) in doc.quoteless:
        # A quoteless value runs to the end of its line: a comma would join it.
        return _Edit(last.value_span.end, last.value_span.end, "\n" + indent + body)
    return _Edit(last.value_span.end, last.value_span.end, "," + sep + body)


def _insert_into_empty(doc: Document, pointer: str, values: dict[str, Any]) -> _Edit:
    unit = _indent_unit(doc)
    span = doc.values[pointer]
    outer = _indent_of(doc, span.start)
    if pointer and outer == "" and pointer in doc.keys:
        outer = _indent_of(doc, doc.keys[pointer].start)
    indent = outer + unit
    body = (",\n" + indent).join(f"{json.dumps(k)}: {_dump(v, indent, unit)}" for k, v in values.items())
    return _Edit(span.start + 1, span.end - 1, "\n" + indent + body + "\n" + outer)


def _dump(value: Any, indent: str, unit: str) -> str:
    if isinstance(value, dict) and value:
        text = json.dumps(value, indent=len(unit) if unit.strip(" ") == "" else unit, ensure_ascii=False)
        return text.replace("\n", "\n" + indent)
    return json.dumps(value, ensure_ascii=False)


def _indent_of(doc: Document, offset: int) -> str:
    line_start = doc.text.rfind("\n", 0, offset) + 1
    prefix = doc.text[line_start:offset]
    return prefix if prefix.strip() == "" else ""


def _starts_line(text: str, offset: int) -> bool:
    line_start = text.rfind("\n", 0, offset) + 1
    return text[line_start:offset].strip() == ""


def _line_start_if_blank_before(text: str, offset: int) -> int:
    line_start = text.rfind("\n", 0, offset) + 1
    return line_start if text[line_start:offset].strip() == "" else offset


def _indent_unit(doc: Document) -> str:
    """The file's indentation step (two spaces, four, a tab), from its first nested key."""
    for pointer, span in doc.keys.items():
        if pointer.count("/") == 1:
            indent = _indent_of(doc, span.start)
            if indent:
                return indent
    return "  "


def write_atomically(path: str, text: str) -> None:
    """Replace ``path`` with ``text`` via a temporary file in the same folder and a rename,
    keeping the file's permissions; the original is never half-written."""
    folder = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, temp = tempfile.mkstemp(prefix=".zeroadvisor-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise

"""RFC 7396 JSON merge patches: how findings express their fixes.

A merge patch is a JSON object mirroring the config: a value sets a key, ``null`` deletes
it, a nested object recurses. Fixes from several findings combine with :func:`merge`.
"""

from __future__ import annotations

from typing import overload

from zeroadvisor.jsontypes import JSONObject, JSONValue


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def tokens(pointer: str) -> list[str]:
    return [unescape(t) for t in pointer.split("/")[1:]] if pointer else []


def at(pointer: str, value: JSONValue) -> JSONObject:
    """A patch that sets (or, with None, deletes) the key at ``pointer``."""
    parts = tokens(pointer)
    if not parts:
        raise ValueError("a merge patch cannot replace the whole document here")
    patch: JSONObject = {parts[-1]: value}
    for token in reversed(parts[:-1]):
        patch = {token: patch}
    return patch


def delete(pointer: str) -> JSONObject:
    return at(pointer, None)


def rename(pointer: str, new_key: str, value: JSONValue) -> JSONObject:
    """Delete the key at ``pointer`` and set ``new_key`` beside it to ``value``."""
    parent, _, _old = pointer.rpartition("/")
    return merge(delete(pointer), at(f"{parent}/{new_key}", value))


def merge(*patches: JSONObject | None) -> JSONObject:
    """Combine patches: later ones win key by key, nested objects merge."""
    out: JSONObject = {}
    for patch in patches:
        if patch:
            out = _merge_into(out, patch)
    return out


def _merge_into(base: JSONObject, patch: JSONObject) -> JSONObject:
    result = dict(base)
    for key, value in patch.items():
        inner = result.get(key)
        if isinstance(value, dict) and isinstance(inner, dict):
            result[key] = _merge_into(inner, value)
        else:
            result[key] = value
    return result


@overload
def apply(document: JSONValue, patch: JSONObject) -> JSONObject: ...
@overload
def apply(document: JSONValue, patch: JSONValue) -> JSONValue: ...
def apply(document: JSONValue, patch: JSONValue) -> JSONValue:
    """RFC 7396 MergePatch(target, patch) on plain data (returns a new object)."""
    if not isinstance(patch, dict):
        return patch
    target: JSONObject = dict(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply(target.get(key), value)
    return target

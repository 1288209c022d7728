"""RFC 7396 JSON merge patches: how findings express their fixes.

A merge patch is a JSON object mirroring the config: a value sets a key, ``null`` deletes
it, a nested object recurses. Fixes from several findings combine with :func:`merge`.
"""

from __future__ import annotations

from typing import Any


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def tokens(pointer: str) -> list[str]:
    return [unescape(t) for t in pointer.split("/")[1:]] if pointer else []


def at(pointer: str, value: Any) -> dict[str, Any]:
    """A patch that sets (or, with None, deletes) the key at ``pointer``."""
    parts = tokens(pointer)
    if not parts:
        raise ValueError("a merge patch cannot replace the whole document here")
    patch: dict[str, Any] = {parts[-1]: value}
    for token in reversed(parts[:-1]):
        patch = {token: patch}
    return patch


def delete(pointer: str) -> dict[str, Any]:
    return at(pointer, None)


def rename(pointer: str, new_key: str, value: Any) -> dict[str, Any]:
    """Delete the key at ``pointer`` and set ``new_key`` beside it to ``value``."""
    parent, _, _old = pointer.rpartition("/")
    return merge(delete(pointer), at(f"{parent}/{new_key}", value))


def merge(*patches: dict[str, Any] | None) -> dict[str, Any]:
    """Combine patches: later ones win key by key, nested objects merge."""
    out: dict[str, Any] = {}
    for patch in patches:
        if patch:
            out = _merge_into(out, patch)
    return out


def _merge_into(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    result = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = _merge_into(result[key], value)
        else:
            result[key] = value
    return result


def apply(document: Any, patch: Any) -> Any:
    """RFC 7396 MergePatch(target, patch) on plain data (returns a new object)."""
    if not isinstance(patch, dict):
        return patch
    target = dict(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = apply(target.get(key), value)
    return target

"""YAML configs and model descriptions: PyYAML's SafeLoader, read as a JSON reader would see it.

Some projects keep ds_config as YAML and hand ``yaml.safe_load``'s dict to DeepSpeed, or
convert it to JSON first. Either way only JSON's kinds of value reach DeepSpeed in a
working setup, so what YAML has beyond JSON is decided here, once, for every reader:

* keys that are not strings (``1:``, ``true:``, ``null:``, a date) become the string a JSON
  writer gives them (``json.dumps``: "1", "true", "null"; a date as written): DeepSpeed has
  no such key, and the linter then reports an unknown key by that name instead of crashing
  on a key that is not a ``str``;
* an unquoted date (``2024-01-01``) stays the text as written, as YAML-to-JSON converters
  (yq) write it;
* ``.inf``/``.nan``, ``!!binary``, ``!!set``, ``!!omap`` and other tags have no JSON
  equivalent: a clear error at their position (a ``reduce_bucket_size: .inf`` would fail
  DeepSpeed's integer field anyway);
* aliases (``*name``) may repeat a block, but may add at most
  :data:`~zeroadvisor.config.limits.MAX_YAML_ALIAS_VALUES` values in all, and may not refer
  to a block that contains them: a 553-byte "billion laughs" file is refused at once, even
  under a key DeepSpeed ignores, instead of expanding to hundreds of millions of values;
* merge keys (``<<: *base``) merge as PyYAML does; a key that overrides a merged one is
  not a duplicate.

PyYAML's pure-Python SafeLoader is used, not libyaml's CSafeLoader: ``yaml.safe_load`` is
the pure one, and the two differ (libyaml refuses ``"\\ud800"``, which safe_load accepts).
Every error is a one-line :class:`~zeroadvisor.config.source.ParseError` with the line and
column of the place, counted as everywhere else (after a BOM; CR, LF and CRLF end lines).
"""

from __future__ import annotations

import datetime
import json
import math
from typing import TYPE_CHECKING

from zeroadvisor.config.limits import MAX_DEPTH, MAX_YAML_ALIAS_VALUES
from zeroadvisor.config.source import (
    Document,
    Duplicate,
    Member,
    ParseError,
    PointerBudget,
    Span,
)
from zeroadvisor.jsontypes import JSONObject, JSONValue

if TYPE_CHECKING:  # yaml itself is imported where it is used: `zeroadvisor lint` of a JSON file never loads it
    from yaml import MappingNode, Node, SafeLoader

_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"


def parse_yaml(text: str, name: str = "<text>") -> Document:
    """A YAML config as a Document: JSON-view data plus the position of every key and value."""
    doc = Document(name=name, text=text, syntax="yaml")
    load_yaml(text, doc)
    return doc


def load_yaml(text: str, doc: Document | None = None, syntax: str = "YAML") -> tuple[Node | None, JSONValue]:
    """The root node (None for an empty document) and the JSON-view data of a one-document
    YAML text. With ``doc``, its data and positions are filled in. ``syntax`` names the
    format in syntax errors ("invalid YAML: ...")."""
    import yaml

    doc = doc if doc is not None else Document(name="<text>", text=text)
    loader = None
    try:
        try:
            loader = yaml.SafeLoader(text)  # the reader refuses control characters right here
            node = loader.get_single_node()
            data: JSONValue = _Converter(loader, doc, syntax).value(node, "", 0) if node is not None else {}
        except yaml.MarkedYAMLError as err:
            mark = err.problem_mark or err.context_mark
            problem = err.problem or err.context or "syntax error"
            raise _error(doc, f"invalid {syntax}: {problem}", mark.index if mark else None) from None
        except yaml.reader.ReaderError as err:
            code = ord(err.character) if isinstance(err.character, str) else err.character
            raise _error(doc, f"invalid {syntax}: {err.reason} (character {code:#x})", err.position) from None
        except yaml.YAMLError as err:
            raise _error(doc, f"invalid {syntax}: {err}", None) from None
        except RecursionError:
            raise _error(doc, "nested too deeply to read", None) from None
    finally:
        if loader is not None:
            loader.dispose()
    doc.data = data
    return node, data


def _error(doc: Document, message: str, index: int | None) -> ParseError:
    line, column = doc.position(max(0, min(index, len(doc.text)))) if index is not None else (1, 1)
    return ParseError(" ".join(message.split()), line=line, column=column)


class _Converter:
    """One walk over the node graph: JSON-view data, positions, duplicates, bounded aliases."""

    def __init__(self, loader: SafeLoader, doc: Document, syntax: str):
        self.loader = loader
        self.doc = doc
        self.syntax = syntax
        self.seen: set[int] = set()  # nodes already converted once: a second visit is an alias
        self.open: set[int] = set()  # collection nodes being converted: an alias to one recurses
        self.repeated = 0  # values added by aliases so far
        self.own_keys: dict[int, set[int]] = {}  # mapping -> its key nodes before merging
        self.pointers = PointerBudget()

    def fail(self, message: str, node: Node) -> ParseError:
        return _error(self.doc, message, node.start_mark.index)

    def child(self, parent: str, token: str | int, node: Node) -> str:
        pointer = self.pointers.child(parent, token)
        if pointer is None:
            raise self.fail(PointerBudget.MESSAGE, node)
        return pointer

    def value(self, node: Node, pointer: str, depth: int, at: Node | None = None) -> JSONValue:
        """``at`` is the node an error about an alias is placed at (its key, if any)."""
        import yaml

        if depth > MAX_DEPTH:
            raise self.fail(f"nested more than {MAX_DEPTH} levels deep", node)
        ident = id(node)
        if ident in self.open:
            raise self.fail("a YAML alias refers to a block that contains it: the data would be infinite",
                            at or node)
        if ident in self.seen:
            self.repeated += 1
            if self.repeated > MAX_YAML_ALIAS_VALUES:
                raise self.fail(f"YAML aliases here expand to more than {MAX_YAML_ALIAS_VALUES} values "
                                "(an alias bomb?): write the values out", at or node)
        self.seen.add(ident)
        self.doc.values[pointer] = Span(node.start_mark.index, node.end_mark.index)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        self.open.add(ident)
        try:
            if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
                return self.mapping(node, pointer, depth)
            if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
                return [self.value(item, self.child(pointer, index, item), depth + 1, at or item)
                        for index, item in enumerate(node.value)]
        finally:
            self.open.discard(ident)
        raise self.unknown_tag(node)

    def unknown_tag(self, node: Node) -> ParseError:
        if node.tag in self.loader.yaml_constructors:  # !!set, !!omap, !!pairs, !!binary...
            return self.fail(f"the YAML tag {_short_tag(node.tag)} has no JSON equivalent", node)
        # what yaml.safe_load says of a tag it has no constructor for (!!python/..., !custom)
        return self.fail(f"invalid {self.syntax}: could not determine a constructor for the tag {node.tag}", node)

    def mapping(self, node: MappingNode, pointer: str, depth: int) -> JSONObject:
        ident = id(node)
        if ident not in self.own_keys:  # before flatten_mapping splices merged pairs in
            self.own_keys[ident] = {id(key) for key, _ in node.value if key.tag != _MERGE}
            self.loader.flatten_mapping(node)
        own = self.own_keys[ident]
        result: JSONObject = {}
        members: list[Member] = []
        first_own: dict[str, Span] = {}
        for key_node, value_node in node.value:
            key = self.key(key_node)
            child = self.child(pointer, key, key_node)
            key_span = Span(key_node.start_mark.index, key_node.end_mark.index)
            if id(key_node) in own:
                if key in first_own:
                    self.doc.duplicates.append(Duplicate(child, first_own[key], key_span))
                else:
                    first_own[key] = key_span
                members.append(Member(key, key_span, Span(value_node.start_mark.index, value_node.end_mark.index),
                                      None))
            self.doc.keys[child] = key_span
            result[key] = self.value(value_node, child, depth + 1, key_node)  # the last one wins, as in PyYAML
        self.doc.members[pointer] = members
        return result

    def key(self, node: Node) -> str:
        import yaml

        if not isinstance(node, yaml.ScalarNode):
            raise self.fail("a YAML key must be a plain value, not a list or a mapping", node)
        value = self.construct(node)
        if isinstance(value, str):
            return value
        if value is None or isinstance(value, (bool, int, float)):
            return json.dumps(value)  # what a JSON writer makes of the key: "1", "true", "null"
        return str(node.value)  # a date (or bytes): the text as written (a scalar node holds text)

    def scalar(self, node: Node) -> JSONValue:
        value = self.construct(node)
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(f"the YAML value {node.value} is not a finite number: JSON, and the number fields "
                            "DeepSpeed reads, have no such value", node)
        if isinstance(value, (datetime.date, datetime.datetime)):
            written: str = node.value  # a scalar node holds its text
            return written  # as YAML-to-JSON converters write it
        if isinstance(value, bytes):
            raise self.fail("a !!binary value has no JSON equivalent", node)
        if value is None or isinstance(value, (str, bool, int, float)):
            return value
        raise self.unknown_tag(node)  # pragma: no cover - SafeConstructor makes only the kinds above

    def construct(self, node: Node) -> object:
        try:
            return self.loader.construct_object(node)
        except ValueError as err:  # int() of more digits than Python converts
            raise self.fail(f"the value cannot be read: {err}", node) from None


def _short_tag(tag: str) -> str:
    return "!!" + tag[len("tag:yaml.org,2002:"):] if tag.startswith("tag:yaml.org,2002:") else tag

"""YAML configs (some projects keep ds_config as YAML and pass the dict to DeepSpeed).

Parsed with PyYAML's SafeLoader only; node marks give every key's and value's position.
"""

from __future__ import annotations

from typing import Any

from zeroadvisor.config.source import MAX_DEPTH, Document, Duplicate, Member, ParseError, Span, join_pointer


def parse_yaml(text: str, name: str = "<text>") -> Document:
    import yaml

    doc = Document(name=name, text=text)
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else {}
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (None, None)
        raise ParseError(f"invalid YAML: {err.problem or err.context}", line=line, column=column) from None
    except (yaml.YAMLError, RecursionError, ValueError) as err:
        raise ParseError(f"invalid YAML: {err}", line=1, column=1) from None
    doc.data = data
    if node is not None:
        _index(doc, node, "", 0)
    return doc


def _index(doc: Document, node: Any, pointer: str, depth: int) -> None:
    import yaml

    if depth > MAX_DEPTH:
        raise ParseError(f"nested more than {MAX_DEPTH} levels deep", line=node.start_mark.line + 1,
                         column=node.start_mark.column + 1)
    doc.values[pointer] = Span(node.start_mark.index, node.end_mark.index)
    if isinstance(node, yaml.MappingNode):
        members: list[Member] = []
        seen: dict[str, Span] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = join_pointer(pointer, key)
            key_span = Span(key_node.start_mark.index, key_node.end_mark.index)
            if key in seen:
                doc.duplicates.append(Duplicate(child, seen[key], key_span))
            seen[key] = key_span
            doc.keys[child] = key_span
            members.append(Member(key, key_span, Span(value_node.start_mark.index, value_node.end_mark.index), None))
            _index(doc, value_node, child, depth + 1)
        doc.members[pointer] = members
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _index(doc, item, join_pointer(pointer, index), depth + 1)

"""A config as given: a file, standard input, or text in memory. A config given as a dict is written as JSON
text and read like a file, so a dict and a file take the same path through every flow (and findings on a dict
have lines)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from zeroadvisor.inputs.errors import UsageError

if TYPE_CHECKING:
    from zeroadvisor.config.source import Document

STDIN = "-"  # the path that means "read standard input" (config/paths.py STDIN)


@dataclass(frozen=True)
class ConfigSource:
    """``name``: the path, or the name the findings of in-memory ``text`` carry; ``stdin``: read standard input."""

    name: str
    text: str | None = None  # None: read the file (or standard input)
    stdin: bool = False
    # where a diff of an in-memory config applies, where that is not its name: a trainer's own config, named by
    # the trainer's release in the findings, and by its path in the trainer's repository in the diff
    patch_path: str | None = None

    @classmethod
    def path(cls, path: str | os.PathLike[str], *, dash_is_stdin: bool = False) -> ConfigSource:
        if not isinstance(path, (str, os.PathLike)):
            raise UsageError(f"expected a config path, got {path!r}")
        name = os.fspath(path)
        if not isinstance(name, str):  # a bytes path: file names are text here
            raise UsageError(f"expected a config path as text, got {path!r}")
        return cls(name, stdin=dash_is_stdin and name == STDIN)

    @classmethod
    def in_memory(cls, text: str, name: str | None = None) -> ConfigSource:
        if not isinstance(text, str):
            raise UsageError(f"text: expected the config as a string, got {type(text).__name__}")
        return cls(_name(name) or "<text>", text)

    @classmethod
    def mapping(cls, config: Mapping[str, Any], name: str | None = None) -> ConfigSource:
        """A dict, as indented JSON (NaN and Infinity as DeepSpeed's json.load reads them)."""
        label = _name(name) or "<config>"
        try:
            text = json.dumps(dict(config), indent=2, allow_nan=True)
        except (TypeError, ValueError) as err:
            raise UsageError(f"{label}: the config is not JSON data: {err}") from None
        return cls(label, text)

    @classmethod
    def given(cls, config: str | os.PathLike[str] | Mapping[str, Any] | ConfigSource,
              name: str | None = None) -> ConfigSource:
        """A path or a dict (the Python API's ``config``), or a source the inputs resolved (a trainer's own config,
        its text as the trainer ships it: inputs/run.py)."""
        if isinstance(config, ConfigSource):
            return config
        if isinstance(config, Mapping):
            return cls.mapping(config, name)
        if isinstance(config, (str, os.PathLike)):
            return cls.path(config)
        raise UsageError(f"config: expected a path or a dict, got {type(config).__name__}")

    @property
    def is_file(self) -> bool:
        return self.text is None and not self.stdin

    @property
    def display(self) -> str:
        """The name findings and messages carry: the path, ``<stdin>``, or the in-memory config's name."""
        if self.stdin:
            from zeroadvisor.config.reader import STDIN_NAME

            return STDIN_NAME
        return self.name

    def read(self, stdin: BinaryIO | None = None) -> Document:
        """The document, under the same limits for every source (config/reader.py); ParseError where it does not
        parse, reader.InputError where it cannot be read."""
        from zeroadvisor.config import reader

        if self.text is not None:
            return reader.read_text_document(self.text, self.name)
        if self.stdin:
            import sys

            return reader.read_stream_document(stdin if stdin is not None else sys.stdin.buffer, reader.STDIN_NAME)
        return reader.read_document(self.name)


def _name(name: object) -> str | None:
    """The name a config in memory is reported by: text, or None for the default."""
    if name is not None and not isinstance(name, str):
        raise UsageError(f"name: expected the config's name as a string, got {name!r}")
    return name

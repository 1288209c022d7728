"""The command line's parsed values (cli/options.py parse_simple, or typer's callback: the same keywords) as the
typed Request the Python API makes too (inputs/request.py), for the one builder (inputs/run.py build)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zeroadvisor.cli.options import CommandSpec, merge_aliases
from zeroadvisor.inputs.request import ENUMS, Request, member


def to_request(command: CommandSpec, values: Mapping[str, object]) -> Request:
    """The Request of ``command`` for its parsed values; it takes the command's parameters, in their order (an old
    spelling merged into the parameter it is an alias of)."""
    run = command.run
    if run is None:
        raise ValueError(f"{command.name} makes no run")
    merged = merge_aliases(command, dict(values))
    # each value is of its parameter's kind (str, int, bool, a list of str), as the parser checked it against the
    # table; a choice becomes its enum's member and a list a tuple, as the Request's fields hold them
    typed: dict[str, Any] = {name: _typed(name, value) for name, value in merged.items()}
    return Request(run, tuple(merged), **typed)


def _typed(name: str, value: object) -> object:
    if name in ENUMS and isinstance(value, str):
        return member(name, value)
    return tuple(value) if isinstance(value, list) else value

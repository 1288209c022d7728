"""The one name for data that really is arbitrary JSON (or YAML/TOML read as JSON's values).

A parsed config, a model's config.json, a project's [tool.zeroadvisor] table and a merge patch hold whatever
their author wrote; code that reads them narrows with ``isinstance`` where it looks. The alias is the real
recursive union, not an escape from typing, so mypy checks that narrowing. A value that is only passed
through or checked with ``isinstance`` is ``object``; a value of a known shape gets its own type (a
dataclass, an enum, a TypedDict). tests/test_any_budget.py keeps this module the only place such an alias
is declared.
"""

from __future__ import annotations

from typing import TypeAlias

# What json.load, hjson and the project's YAML reader return: no other types ever appear.
JSONValue: TypeAlias = "bool | int | float | str | list[JSONValue] | dict[str, JSONValue] | None"
JSONObject: TypeAlias = "dict[str, JSONValue]"
JSONArray: TypeAlias = "list[JSONValue]"

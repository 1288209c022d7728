"""One walk of a config against the committed schema, shared by the key and value rules.

The walk yields facts (:class:`Event`), not messages: each rule module turns the events it
owns into findings. Why not plain ``jsonschema`` validation? It has no positions, no
notion of DeepSpeed's lax pydantic coercion, of "auto", of quoteless template
placeholders, or of sections DeepSpeed silently ignores; and importing it costs half of
the linter's start-up budget. The committed schema stays the single source of truth;
tests check that ``jsonschema`` and this walk agree on every corpus file.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from zeroadvisor.config.source import join_pointer
from zeroadvisor.deepspeed import coerce, releases, schema
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.jsontypes import JSONObject, JSONValue

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context

# An unquoted identifier where a value belongs: a shell/sed template placeholder such as
# ZERO_STAGE (Megatron-DeepSpeed examples_deepspeed/**/ds_config_*TEMPLATE*.json).
_PLACEHOLDER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_${}.-]*,?$")
# Did-you-mean costs about a millisecond per unknown key (an edit distance to every sibling
# and difflib): 30,000 unknown keys took 30 s. A file with more unknown keys than this is not
# a config with a few typos, so the keys after these are reported without a guess.
MAX_GUESSED_UNKNOWN_KEYS = 200


@dataclass(frozen=True, slots=True)
class Event:
    kind: str
    pointer: str
    data: dict[str, Any] = field(default_factory=dict)


def walk(ctx: Context) -> list[Event]:
    events: list[Event] = []
    if isinstance(ctx.data, dict):
        _Walker(ctx, events).object(ctx.data, schema.load(), "", "ignored")
    return events


def _is_operand(value: JSONValue, types: list[str]) -> bool:
    """Whether Python arithmetic takes ``value`` as one of the JSON ``types``: unlike JSON Schema, an
    integral float is no integer to ``bool | value``."""
    return any(coerce.matches(value, t) and not (t == "integer" and isinstance(value, float)) for t in types)


def spellings(pointer: str) -> list[str]:
    """The pointer of a field and of each alias of it: pydantic (populate_by_name) records the field
    as set under either name, so _process_deprecated_field's 'Cannot provide deprecated parameter ...
    and replacing parameter ... together' fires for both (runtime/config_utils.py)."""
    parent, _, name = pointer.rpartition("/")
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in parent.split("/")[1:]]
    props = _properties(schema.node(*tokens))
    aliases = [key for key, sub in props.items() if sub.get("x-alias-of") == name]
    return [pointer] + [join_pointer(parent, alias) for alias in aliases]


class _Walker:
    def __init__(self, ctx: Context, events: list[Event]):
        self.ctx = ctx
        self.events = events
        self.guessed = 0  # unknown keys given a did-you-mean so far
        self.pydantic = 2  # the pydantic major of the section being walked (its coercion rules)
        self.unchecked = False  # inside a section this release reads with dict.get

    def emit(self, kind: str, pointer: str, **data: Any) -> None:
        self.events.append(Event(kind, pointer, data))

    # -- objects ----------------------------------------------------------------------------
    def object(self, value: JSONObject, node: JSONObject, pointer: str, policy: str) -> None:
        # A section validated by a pydantic 1 model (DeepSpeed before 0.15, schema x-pydantic) coerces as
        # pydantic 1 does; one read with dict.get (x-read-with-get) takes its values unchecked.
        outer = (self.pydantic, self.unchecked)
        major = node.get("x-pydantic", 2 if "x-deepspeed-class" in node else self.pydantic)
        self.pydantic = major if isinstance(major, int) else self.pydantic  # the schema's is an int
        self.unchecked = bool(node.get("x-read-with-get", self.unchecked and "x-deepspeed-class" not in node))
        try:
            self._keys(value, node, pointer, policy)
        finally:
            self.pydantic, self.unchecked = outer

    def _keys(self, value: JSONObject, node: JSONObject, pointer: str, policy: str) -> None:
        props = _properties(node)
        declared = node.get("x-unknown-keys", policy)
        policy = declared if isinstance(declared, str) else policy
        for key, child in value.items():
            child_pointer = join_pointer(pointer, key)
            sub = props.get(key)
            if sub is None and policy == "map":  # user-chosen names (e.g. curriculum metrics)
                self.value(child, _object(node.get("additionalProperties")), child_pointer, "ignored")
                continue
            if sub is None:
                self.unknown(key, child, child_pointer, props, policy)
                continue
            if "x-removed" in sub:
                self.emit("removed", child_pointer, key=key, reason=sub["x-removed"])
                continue
            if "x-removed-later" in sub:  # this release reads it; a later one refuses it
                self.emit("removed-later", child_pointer, key=key, reason=sub["x-removed-later"])
                continue
            if "x-rejected" in sub:
                continue  # a key the engine refuses (optimizer max_grad_norm): its own rule words it
            if sub.get("x-editor-only"):
                continue  # "$schema": an editor's, which DeepSpeed never reads, whatever its value
            alias_of = sub.get("x-alias-of")
            if isinstance(alias_of, str) and alias_of in value:
                # pydantic reports extra_forbidden on the field name, not on the alias
                self.emit("alias-conflict", join_pointer(pointer, alias_of), key=alias_of, other=key)
            if sub.get("deprecated"):
                self.deprecated(key, sub, child_pointer, value, policy)
            self.value(child, sub, child_pointer, policy)

    def unknown(self, key: str, child: JSONValue, pointer: str, props: dict[str, JSONObject], policy: str) -> None:
        if policy == "ignored" and key.startswith("_"):
            return  # a comment key; DeepSpeed ignores it and so do we
        typo, suggestions = None, []
        # a key other releases read (added later, or dropped since): no typo, the releases that have it
        knowing = releases.releases_knowing(_plain(pointer))
        if knowing:
            self.emit("unknown", pointer, key=key, policy=policy, typo=None, suggestions=[], elsewhere=[],
                      knowing=knowing)
            return
        if self.guessed < MAX_GUESSED_UNKNOWN_KEYS:
            self.guessed += 1
            typo = likely_typo(key, child, props)
            suggestions = (typo and [typo]) or difflib.get_close_matches(key, list(props), n=3, cutoff=0.6)
        self.emit(
            "unknown",
            pointer,
            key=key,
            policy=policy,
            typo=typo,
            suggestions=suggestions,
            elsewhere=[p for p in known_elsewhere(key) if p != pointer],
            knowing=None,
        )

    def deprecated(self, key: str, sub: JSONObject, pointer: str, siblings: JSONObject, policy: str) -> None:
        replaced_by = sub.get("x-replaced-by")
        replacement_present = isinstance(replaced_by, str) and any(self.ctx.has(p) for p in spellings(replaced_by))
        kind = "deprecated-with-replacement" if replacement_present else "deprecated"
        self.emit(kind, pointer, key=key, replaced_by=replaced_by, note=sub.get("x-deprecation", ""), policy=policy)

    # -- values -------------------------------------------------------------------------------
    def value(self, value: JSONValue, node: JSONObject, pointer: str, policy: str) -> None:
        if self.placeholder(value, node, pointer, policy):
            return
        types = _types(node)
        if isinstance(value, dict) and ("object" in types or "properties" in node):
            schema_for_object = self.object_schema(node, pointer)
            if schema_for_object is not None:  # None: params of a type the type rules report
                self.object(value, schema_for_object, pointer, policy)
        elif not types or any(coerce.matches(value, t) for t in types):
            self.constraints(value, node, pointer, policy)
            items = node.get("items")
            if isinstance(value, list) and isinstance(items, dict):
                for index, item in enumerate(value):
                    self.value(item, items, join_pointer(pointer, index), policy)
        else:
            self.type_mismatch(value, node, pointer, policy, types)

    def placeholder(self, value: JSONValue, node: JSONObject, pointer: str, policy: str) -> bool:
        """Whether the value stands for one given later: an "auto" the key does not take as a plain string,
        or a template placeholder left unquoted (``{{ batch }}``); its event is emitted."""
        if value == dsconfig.AUTO and not _admits_plain_auto(node):
            self.emit("auto", pointer, filled_by=node.get("x-auto", []), policy=policy, node=node)
            return True
        raw = self.ctx.doc.quoteless.get(pointer)
        if raw is not None and _PLACEHOLDER.match(raw) and "string" not in _types(node):
            self.emit("template", pointer, raw=raw.rstrip(","))
            return True
        return False

    def type_mismatch(self, value: JSONValue, node: JSONObject, pointer: str, policy: str, types: list[str]) -> None:
        """A value of none of the node's types: which problem that is, as DeepSpeed meets it."""
        if self.unchecked and policy != "error":
            self.emit("unchecked-type", pointer, value=value, types=types)  # dict.get: stored as written
        elif "integer" in types and coerce.is_fractional(value) and self.pydantic == 1:
            # pydantic 1's int validator is int(value): 15099494.4 becomes 15099494 (DeepSpeed before 0.15)
            self.emit("truncated", pointer, value=value, raw=self.ctx.doc.numbers.get(pointer))
        elif "integer" in types and coerce.is_fractional(value):
            self.emit("fractional", pointer, value=value, raw=self.ctx.doc.numbers.get(pointer))
        elif self.pydantic == 1 and isinstance(value, str) and any("enum" in b for b in _branches(node)):
            # pydantic 1 looks an Enum member up by the value as given: "1" is no ZeroStageEnum
            self.emit("wrong-type", pointer, value=value, types=types, policy=policy)
        elif "x-operand-types" in node and not _is_operand(value, _strings(node["x-operand-types"])):
            self.emit("wrong-type", pointer, value=value, types=types, policy=policy)  # DeepSpeed computes with it
        elif node.get("x-unchecked") or policy == "kwargs":
            self.emit("unchecked-type", pointer, value=value, types=types)
        elif policy == "error" and any(coerce.lax_coercible(value, t) for t in types):
            self.emit("loose-type", pointer, value=value, types=types)
        else:
            self.emit("wrong-type", pointer, value=value, types=types, policy=policy)

    def object_schema(self, node: JSONObject, pointer: str) -> JSONObject | None:
        """The schema for an object; optimizer/scheduler params depend on the named type
        (None when the type is unknown: unknown-optimizer/unknown-scheduler report that)."""
        if pointer == "/optimizer/params":
            name = self.ctx.deepspeed.optimizer_type
            params = schema.definition("optimizer_params").get(name) if name else None
            return params if isinstance(params, dict) else None
        if pointer == "/scheduler/params":
            named = self.ctx.get("/scheduler/type")
            params = schema.definition("scheduler_params").get(named) if isinstance(named, str) else None
            return params if isinstance(params, dict) else None
        return _object_branch(node)

    def constraints(self, value: JSONValue, node: JSONObject, pointer: str, policy: str) -> None:
        problem = constraint_problem(value, node)
        if problem is not None:
            self.emit("range", pointer, value=value, problem=problem, unchecked=bool(node.get("x-unchecked")))


def constraint_problem(value: JSONValue, node: JSONObject) -> str | None:
    """Why ``value`` breaks the node's enum/range/pattern, or None."""
    for branch in _branches(node):
        pattern, enum = branch.get("pattern"), branch.get("enum")
        if isinstance(value, str) and isinstance(pattern, str) and not _regex(pattern).search(value):
            choices = branch.get("x-enum-ci") or node.get("x-enum-ci")
            if isinstance(choices, list) and choices:
                return "must be one of " + ", ".join(repr(c) for c in choices) + " (any case)"
            return f"must match {pattern}"
        if isinstance(enum, list) and value not in enum:
            if isinstance(value, str) and any(isinstance(e, str) for e in enum):
                return "must be one of " + ", ".join(repr(e) for e in enum)
            return "must be one of " + ", ".join(_fmt(e) for e in enum)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for keyword, test, words in _BOUNDS:
                bound = branch.get(keyword)
                if isinstance(bound, (int, float)) and not test(value, bound):
                    return f"must be {words} {_fmt(bound)}"
    return None


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


_BOUNDS: tuple[tuple[str, Callable[[float, float], bool], str], ...] = (
    ("minimum", lambda v, b: v >= b, ">="),
    ("exclusiveMinimum", lambda v, b: v > b, ">"),
    ("maximum", lambda v, b: v <= b, "<="),
    ("exclusiveMaximum", lambda v, b: v < b, "<"),
)


def _fmt(value: JSONValue) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def _branches(node: JSONObject) -> list[JSONObject]:
    """The non-"auto" alternatives of a node (anyOf with a const "auto" branch, or itself)."""
    if "anyOf" in node:
        return [b for b in _alternatives(node) if b.get("const") != dsconfig.AUTO]
    return [node]


def _alternatives(node: JSONObject) -> list[JSONObject]:
    """The node's ``anyOf`` branches (every one is an object schema)."""
    found = node.get("anyOf", [])
    return [branch for branch in found if isinstance(branch, dict)] if isinstance(found, list) else []


def _object(node: JSONValue) -> JSONObject:
    return node if isinstance(node, dict) else {}


def _strings(values: JSONValue) -> list[str]:
    """A schema list of names (types, keys) as strings."""
    return [value for value in values if isinstance(value, str)] if isinstance(values, list) else []


def _properties(node: JSONValue) -> dict[str, JSONObject]:
    """A node's keys and their schemas (every one an object schema)."""
    return {key: sub for key, sub in schema.properties(node).items() if isinstance(sub, dict)}


def _types(node: JSONObject) -> list[str]:
    types: list[str] = []
    for branch in _branches(node):
        declared, enum = branch.get("type"), branch.get("enum")
        if isinstance(declared, str):
            types.append(declared)
        elif isinstance(declared, list):
            types.extend(_strings(declared))
        elif "const" in branch:
            types.append(coerce.json_type(branch["const"]))
        elif isinstance(enum, list):
            types.extend(coerce.json_type(e) for e in enum)
    return types


def _admits_plain_auto(node: JSONObject) -> bool:
    """True where DeepSpeed itself takes "auto" (pipeline.stages, keep_in_fp32_modules...)."""
    if node.get("x-auto"):
        return False
    if node.get("default") == dsconfig.AUTO:  # DeepSpeed's own default (pipeline.stages, zenflow intervals)
        return True
    for branch in _branches(node):
        if branch.get("const") == dsconfig.AUTO or dsconfig.AUTO in _strings(branch.get("enum")):
            return True
        declared = branch.get("type")
        if "string" in ([declared] if isinstance(declared, str) else _strings(declared)) and "enum" not in branch:
            return True
    return False


def _object_branch(node: JSONObject) -> JSONObject:
    if "properties" in node or "x-unknown-keys" in node:
        return node
    for branch in _alternatives(node):
        if "properties" in branch:
            return branch
    return node


# -- did-you-mean --------------------------------------------------------------------------------
def likely_typo(key: str, value: JSONValue, props: dict[str, JSONObject]) -> str | None:
    """A known key that ``key`` is a misspelling of, or None.

    A typo is a small edit (Damerau-Levenshtein distance 1, or 2 for keys longer than 8
    characters, ignoring case) whose value has the same shape: a foreign block such as
    ``checkpointing: {save_steps: ...}`` is not a typo of ``checkpoint`` even though the
    names are close, because none of its keys belong to ``checkpoint``.
    """
    best: tuple[int, str] | None = None
    for known, node in props.items():
        if "x-removed" in node:
            continue
        distance = _edit_distance(key.lower(), known.lower())
        limit = 1 if len(known) <= 8 else 2
        if distance <= limit and _same_shape(value, node) and (best is None or distance < best[0]):
            best = (distance, known)
    return best[1] if best else None


def _same_shape(value: JSONValue, node: JSONObject) -> bool:
    is_section = "properties" in _object_branch(node) or "object" in _types(node)
    if isinstance(value, dict):
        if not is_section:
            return False
        known = schema.properties(_object_branch(node))
        return not value or not known or any(k in known for k in value)
    return not is_section or value is None or isinstance(value, bool)


def _edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance (adjacent transpositions count as one edit)."""
    if abs(len(a) - len(b)) > 2:
        return 3
    previous2: list[int] = []
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                current[j] = min(current[j], previous2[j - 2] + 1)
        previous2, previous = previous, current
    return previous[-1]


def _plain(pointer: str) -> str:
    """A pointer with its tokens unescaped, as ds_releases.json's history spells keys."""
    return "/".join(t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/"))


@lru_cache(maxsize=32)
def _key_index(release: str) -> dict[str, tuple[str, ...]]:
    """Every key name in the schema -> the pointers of the sections that have it."""
    index: dict[str, list[str]] = {}

    def visit(node: JSONObject, pointer: str, depth: int) -> None:
        if depth > 6:
            return
        for key, sub in _properties(_object_branch(node)).items():
            child = join_pointer(pointer, key)
            if "x-removed" not in sub:
                index.setdefault(key, []).append(child)
            visit(sub, child, depth + 1)

    visit(schema.load(), "", 0)
    return {k: tuple(v) for k, v in index.items()}


def known_elsewhere(key: str) -> tuple[str, ...]:
    return _key_index(schema.active_release()).get(key, ())

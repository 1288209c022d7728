"""What a rule sees: the parsed document, lint options, and facts derived once per file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed.kind import deepspeed_keys, kind_of
from zeroadvisor.deepspeed.settings import DeepSpeedSettings, settings_of

if TYPE_CHECKING:
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.jsontypes import JSONValue
    from zeroadvisor.lint.schemawalk import Event



class Integration(StrEnum):
    """``--integration``: who reads the config, so who fills its "auto" values."""

    ANY = "any"  # accept what either the HF Trainer or Accelerate fills (the default)
    DEEPSPEED = "deepspeed"  # plain DeepSpeed: fills no "auto"
    HF_TRAINER = "hf-trainer"
    ACCELERATE = "accelerate"


INTEGRATIONS: tuple[Integration, ...] = tuple(Integration)  # the choices, in the order help lists them


@dataclass(frozen=True, slots=True)
class LintOptions:
    integration: Integration = Integration.ANY
    gpus: int | None = None  # data-parallel world size, when known (--gpus)
    # the Hugging Face Trainer's arguments (config/training_args.TrainingArgs, or a mapping of
    # TrainingArguments fields), when given: --training-args or a launch command (rules/trainer.py)
    training: TrainingArgs | Mapping[str, JSONValue] | None = None
    # the DeepSpeed releases the config is read as (deepspeed/releases.py known versions, oldest first);
    # () reads it as the latest. More than one: each is linted and the findings name the releases they affect.
    releases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # a rule example's or fixture's options give the name (rules/*.py Example options, tests/rules/): as the
        # member, so that every rule compares members (a name that is none of them: ValueError, a broken fixture)
        object.__setattr__(self, "integration", Integration(self.integration))


@dataclass
class Context:
    doc: Document
    options: LintOptions = field(default_factory=LintOptions)
    # Whether this context carries a memory estimate for the advice rules: only the advisor's
    # context does (advisor/rules.py AdviceRuleContext); the engine skips advice rules elsewhere.
    advised: ClassVar[bool] = False

    @property
    def data(self) -> JSONValue:
        return self.doc.data

    def get(self, pointer: str, default: JSONValue = None) -> JSONValue:
        """The value at an RFC 6901 pointer, or ``default``."""
        found, node = self._lookup(pointer)
        return node if found else default

    def has(self, pointer: str) -> bool:
        return self._lookup(pointer)[0]

    def _lookup(self, pointer: str) -> tuple[bool, JSONValue]:
        """(whether the document has ``pointer``, its value there)."""
        node = self.data
        if pointer == "":
            return True, node
        for escaped in pointer[1:].split("/"):
            token = escaped.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and token in node:
                node = node[token]
            elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
                node = node[int(token)]
            else:
                return False, None
        return True, node

    @property
    def kind(self) -> str | None:
        """The document's kind (deepspeed/kind.py: DEEPSPEED, ACCELERATE or None), decided once per document."""
        return kind_of(self.doc)

    @cached_property
    def deepspeed(self) -> DeepSpeedSettings:
        """The effective DeepSpeed settings of the document (deepspeed/settings.py), read once per document."""
        return settings_of(self.doc)

    @property
    def stage(self) -> int | None:
        return self.deepspeed.stage

    @cached_property
    def foreign(self) -> list[str]:
        """Top-level keys when none of them is a DeepSpeed key: the file is something else
        (a Hugging Face model config, an Accelerate YAML); [] for a DeepSpeed config."""
        if not isinstance(self.data, dict) or not self.data:
            return []
        known = deepspeed_keys()
        keys = [k for k in self.data if not str(k).startswith("_")]
        return [] if not keys or any(k in known for k in keys) else keys

    @cached_property
    def schema_events(self) -> list[Event]:
        """The schema walk, done once per file and shared by the key/type rules."""
        from zeroadvisor.lint.schemawalk import walk

        return walk(self)

    def events(self, kind: str, **match: object) -> list[Event]:
        """Schema-walk events of one kind whose data has the given values."""
        return [e for e in self.schema_events if e.kind == kind and all(e.data.get(k) == v for k, v in match.items())]

"""What the readers of the trainers' files share (config/training_args.py, config/method_reader.py,
config/launch.py): their one error, the words a bool takes, and how a value is quoted in a one-line message."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeroadvisor.jsontypes import JSONValue

__all__ = ["FALSE_WORDS", "TRUE_WORDS", "TrainerInputError", "as_bool", "shown"]

# transformers.hf_argparser.string_to_bool: the words a bool field accepts.
TRUE_WORDS = ("yes", "true", "t", "y", "1")
FALSE_WORDS = ("no", "false", "f", "n", "0")


def shown(value: object, limit: int = 40) -> str:
    """``value`` quoted for a one-line message, a long one cut (a 5,000-digit number is not a message)."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return repr(value)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


class TrainerInputError(ValueError):
    """Training arguments or a launch command that cannot be read; ``str()`` is one line."""


def as_bool(value: JSONValue, where: str) -> bool:
    """A bool field's value as HfArgumentParser reads it (a bool, or one of the words); TrainerInputError else."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise TrainerInputError(f"{where}: expected true or false, got {shown(value)}")

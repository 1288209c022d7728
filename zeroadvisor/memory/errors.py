"""The one error type of the memory model: an input it cannot use (not a bug in it)."""

from __future__ import annotations


class EstimateError(ValueError):
    """A config value, model size or cluster size the memory model cannot use; ``str(err)`` is one line.

    ``pointer``: the RFC 6901 pointer of the config value it names ("" when it is not one config value: a
    flag, the model, the cluster), so that check's no-estimate finding (ZA812) stands at that key.

    Callers catch this, not ValueError/TypeError: anything else raised while estimating is a bug.
    """

    def __init__(self, message: str, pointer: str = ""):
        super().__init__(message)
        self.pointer = pointer


def config_pointer(dotted: str) -> str:
    """The pointer of a config key written dotted ("zero_optimization.stage" -> "/zero_optimization/stage");
    DeepSpeed's keys hold no "." or "/"."""
    return "/" + dotted.replace(".", "/")

"""The one error type of the memory model: an input it cannot use (not a bug in it)."""

from __future__ import annotations


class EstimateError(ValueError):
    """A config value, model size or cluster size the memory model cannot use; ``str(err)`` is one line.

    Callers catch this, not ValueError/TypeError: anything else raised while estimating is a bug.
    """

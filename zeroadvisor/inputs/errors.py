"""The two errors of bad input this package and the flows raise; each ``str(err)`` is one line.

``zeroadvisor.api`` lists them with the lower layers' errors in ``EXPECTED_ERRORS``.
"""

from __future__ import annotations


class UsageError(ValueError):
    """A bad option value (an unknown rule, a size that is not a size, two options that exclude each other)."""


class UnusableConfig(ValueError):
    """A config that was read but cannot serve this flow (``estimate`` of a file that does not parse)."""

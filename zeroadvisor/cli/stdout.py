"""What standard output is, decided once per command, and how a patch is written to it.

A diff of the fixes (``lint --diff``, ``check --suggest``) is a patch when it goes to a file or a pipe: the
files' own bytes (a BOM, a no-break space, a tab, CR), so ``git apply`` finds the lines it changes. A person at a
terminal gets control and invisible characters as visible escapes instead (a config's bytes must not move the
cursor), which no patch tool could read back. Under GitHub Actions a pipe may be the job's log, whose runner
executes lines such as ``::add-mask::`` or ``##[set-output ...]`` as workflow commands: the raw patch is written
between ``::stop-commands::TOKEN`` and ``::TOKEN::`` (report/escape.py ``without_workflow_commands``), which git
apply and patch skip as text around the patch.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Mapping
from enum import Enum
from typing import TextIO


class Stdout(Enum):
    TERMINAL = "terminal"  # a person reads it: escapes for control and invisible characters
    FILE = "file"  # a regular file (``> fix.diff``): the bytes
    STREAM = "stream"  # a pipe, a socket, a device, or a stream without a descriptor: the bytes
    RUNNER_LOG = "runner-log"  # a stream under GitHub Actions (it may be the job log): the bytes, commands stopped

    @property
    def terminal(self) -> bool:
        return self is Stdout.TERMINAL


def classify(stream: TextIO | None = None, environ: Mapping[str, str] | None = None) -> Stdout:
    """What ``stream`` (standard output) is. GITHUB_ACTIONS is "true" in every step of a GitHub Actions job
    (the runner sets it); a regular file there is the user's own redirection, not the log."""
    stream = sys.stdout if stream is None else stream
    environ = os.environ if environ is None else environ
    if _is_terminal(stream):
        return Stdout.TERMINAL
    if _is_regular_file(stream):
        return Stdout.FILE
    return Stdout.RUNNER_LOG if environ.get("GITHUB_ACTIONS") == "true" else Stdout.STREAM


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):  # a closed stream
        return False


def _is_regular_file(stream: object) -> bool:
    fileno = getattr(stream, "fileno", None)
    try:
        return fileno is not None and stat.S_ISREG(os.fstat(fileno()).st_mode)
    except (OSError, ValueError):  # no descriptor (an embedding program's stream, a test's capture), or closed
        return False


def write_patch(diff: str, kind: Stdout, stream: TextIO | None = None) -> None:
    """``diff`` on standard output as ``kind`` wants it: escaped for a terminal, else the files' bytes (whatever
    the stream's encoding), inside stop-commands lines where a GitHub runner may read it as its log."""
    from zeroadvisor.report import escape

    stream = sys.stdout if stream is None else stream
    if not diff:
        return
    if kind.terminal:
        stream.write(escape.output(escape.terminal_block(diff), not can_encode(stream, DRAWING)))
        return
    if kind is Stdout.RUNNER_LOG:
        diff = escape.without_workflow_commands(diff)
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stream (an embedding program's): the characters themselves
        stream.write(diff)
        return
    stream.flush()  # what was written as text goes first
    buffer.write(patch_bytes(diff))
    buffer.flush()


def patch_bytes(diff: str) -> bytes:
    """The diff as the files' bytes: configs are read as strict UTF-8, and a file name's undecodable bytes reached
    Python as surrogates (surrogateescape), which give those bytes back; anything else unencodable is escaped."""
    try:
        return diff.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return diff.encode("utf-8", "backslashreplace")


# Characters the text reports draw with; a stream that cannot encode them gets the ASCII drawing.
DRAWING = "✓✗×"


def can_encode(stream: object, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True

"""Exit codes, defined once: what a script or CI step can rely on."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # no finding at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    USAGE = 2  # a bad flag, or an input that cannot be read or used
    INTERNAL = 3  # a bug in zeroadvisor: please report it
    # a config named that is an Accelerate config of a run without DeepSpeed (FSDP, MULTI_GPU): nothing checked;
    # findings elsewhere (1) and unreadable inputs (2) come first
    NOT_DEEPSPEED = 4
    VERDICT_UNKNOWN = 5  # check: no finding fails, but the verdict is unknown (verdict-unknown names the input)
    INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, as a shell reports it
    BROKEN_PIPE = 141  # stdout closed early (`| head`): 128 + SIGPIPE, as `cat` or `grep` end there

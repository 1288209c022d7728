"""The command line: parses flags, calls the library (zeroadvisor.api), maps the result to an exit code.

``lint`` with plain flags runs without importing typer (the typer app costs more than linting a
file): cli/options.py parses it from the same table the typer app is built from, and anything
it does not recognise (--help, a typo, a bad value) goes to typer. Exit codes: cli/exits.py.
"""

from __future__ import annotations

import os
import sys

from zeroadvisor.cli.exits import ExitCode

DEBUG_VARIABLE = "ZEROADVISOR_DEBUG"


def run(argv: list[str]) -> int:
    """Run one command line in this process and return its exit code (output on sys.stdout/stderr)."""
    from zeroadvisor.cli import commands

    try:
        return _dispatch(argv)
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        raise  # main() handles a closed stdout
    except Exception as err:  # a bug: one line, not a traceback
        if os.environ.get(DEBUG_VARIABLE):
            raise
        commands.error(f"internal error: {type(err).__name__}: {err} (please report; {DEBUG_VARIABLE}=1 shows the "
                       "traceback)")
        return ExitCode.INTERNAL


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["lint"]:
        from zeroadvisor.cli import commands, options

        values = options.parse_simple(options.LINT, argv[1:])
        if values is not None:
            return commands.guarded(commands.lint, values)
    from zeroadvisor.cli import app

    return app.run(argv)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run, flush, exit; a closed stdout ends quietly."""
    for stream in (sys.stdout, sys.stderr):  # text the stream cannot encode is escaped, never a crash
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")
    try:
        code = run(sys.argv[1:] if argv is None else argv)
        sys.stdout.flush()
    except BrokenPipeError:
        from zeroadvisor.cli.commands import stdout_closed

        code = stdout_closed()
    sys.exit(int(code))

"""The command line: parses flags, calls the library (zeroadvisor.api), maps the result to an exit code.

A command with plain flags runs without importing typer (building the typer app, with pydantic behind it,
costs more than linting a file and a third of a whole ``check``): cli/options.py parses it from the same
table the typer app is built from, and anything it does not recognise (--help, --version, a typo, a bad
value) goes to typer, so help and error messages come from one place. Exit codes: cli/exits.py.
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
    from zeroadvisor.cli import commands, options

    command = next((c for c in options.COMMANDS if argv[:1] == [c.name]), None)
    if command is not None:
        values = options.parse_simple(command, options.launch_words_to_flag(argv)[1:])
        if values is not None:
            return commands.guarded(commands.RUNNERS[command.name], values)
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

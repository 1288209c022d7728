"""One table of parameters: typer's parse and the typer-free ``lint`` parse agree, and every choice
is the library's own tuple."""

from __future__ import annotations

import pytest

from zeroadvisor import report, units
from zeroadvisor.cli import app, commands, options
from zeroadvisor.cli.exits import ExitCode
from zeroadvisor.inputs import request, settings
from zeroadvisor.inputs.command import Command
from zeroadvisor.lint import context
from zeroadvisor.memory import estimate
from zeroadvisor.model import spec


def by_name(command: options.CommandSpec, name: str) -> options.Param:
    (param,) = [p for p in command.params if p.name == name]
    return param


def test_choices_are_the_librarys_tuples():
    assert by_name(options.LINT, "format").choice_values() == report.LINT_FORMATS
    assert by_name(options.CHECK, "format").choice_values() == report.CHECK_FORMATS
    assert by_name(options.ESTIMATE, "format").choice_values() == settings.ESTIMATE_FORMATS
    assert set(settings.ESTIMATE_FORMATS) <= set(report.REPORTERS)
    for command in (options.LINT, options.CHECK):
        assert by_name(command, "fail_on").choice_values() == ("error", "warning", "info", "never")
        assert by_name(command, "integration").choice_values() == context.INTEGRATIONS
    for command in (options.ESTIMATE, options.CHECK):
        assert by_name(command, "accounting").choice_values() == estimate.ACCOUNTINGS
        assert by_name(command, "unit").choice_values() == units.FORMAT_UNITS
        assert by_name(command, "activation_checkpointing").choice_values() == tuple(spec.Checkpointing)


def test_every_parameter_is_a_run_input_and_each_fallback_is_stated_once():
    """The tables are the flags' spelling and help; what each value means is the inputs' (zeroadvisor/inputs)."""
    for command in (options.LINT, options.ESTIMATE, options.CHECK):
        # an old spelling (alias_of) is merged into its parameter before the inputs are built
        assert {p.name for p in command.params if p.alias_of is None} <= set(request.INPUT_NAMES), command.name
        for param in command.params:
            fallback = settings.fallback(Command(command.name), param.name)
            if fallback is settings.NEEDED:
                assert "(or set it in the project configuration)" in param.full_help(command.name)
            elif fallback is not None and param.default is None:  # the project configuration may set it
                assert f"(default: {fallback}," in param.full_help(command.name)
            elif fallback is not None:
                assert param.default == fallback, param.name
    assert settings.fallback(Command.CHECK, "gpus") is settings.NEEDED
    assert settings.fallback(Command.LINT, "gpus") is None


def test_every_command_in_the_table_is_in_the_app_and_runs():
    registered = {c.name for c in app.app.registered_commands}
    assert registered == {c.name for c in options.COMMANDS} == set(commands.RUNNERS)


def test_each_flag_belongs_to_one_parameter():
    for command in options.COMMANDS:
        flags = [f for p in command.params for flag in p.flags for f in flag.split("/")]
        assert len(flags) == len(set(flags)), command.name
        assert len({p.name for p in command.params}) == len(command.params), command.name


@pytest.fixture
def typer_values(monkeypatch):
    """What typer passes to the lint command for an argv, or the exit code when it does not run it."""
    def parse(argv: list[str]):
        seen = []
        monkeypatch.setitem(commands.RUNNERS, "lint", lambda values: seen.append(values) or ExitCode.OK)
        code = app.run(["lint", *argv])
        return seen[0] if seen else code

    return parse


PLAIN = [
    ["a.json"],
    ["a.json", "b.json", "c/"],
    ["-f", "json", "a.json"],
    ["--format=sarif", "a.json"],
    ["a.json", "--fail-on", "warning"],
    ["--fail-on=never", "a.json", "--format", "github"],
    ["--gpus", "8", "a.json"],
    ["--gpus=1", "a.json"],
    ["--gpus", "08", "a.json"],
    ["--select", "ZA1", "--select", "ZA2,ZA3", "a.json"],
    ["--ignore", "unknown-key", "--select=ZA1", "a.json"],
    ["--integration", "hf-trainer", "a.json"],
    ["-", "a.json"],
    ["--", "-x.json"],
    ["a.json", "--", "--format"],
    ["--format", "json", "--format", "text", "a.json"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_fast_parse_gives_what_typer_gives(typer_values, argv):
    fast = options.parse_simple(options.LINT, argv)
    assert fast is not None
    assert fast == typer_values(argv)


# argv the fast parse leaves to typer, and what typer then does: a usage error, help, or run lint
NOT_PLAIN = [
    ([], ExitCode.USAGE),
    (["--help"], ExitCode.OK),
    (["-h", "a.json"], ExitCode.OK),
    (["a.json", "-f", "xml"], ExitCode.USAGE),
    (["a.json", "--gpus", "0"], ExitCode.USAGE),
    (["a.json", "--gpus", "eight"], ExitCode.USAGE),
    (["a.json", "--gpus", "-1"], ExitCode.USAGE),
    (["--frobnicate", "a.json"], ExitCode.USAGE),
    (["a.json", "--format"], ExitCode.USAGE),
    (["a.json", "--fail-on", "ERROR"], ExitCode.USAGE),
    (["-fjson", "a.json"], "runs"),  # bundled short flag and value: valid, but typer's to parse
]


@pytest.mark.parametrize("argv, outcome", NOT_PLAIN, ids=[" ".join(argv) for argv, _ in NOT_PLAIN])
def test_anything_else_is_left_to_typer(typer_values, argv, outcome, capsys):
    assert options.parse_simple(options.LINT, argv) is None
    result = typer_values(argv)
    assert (isinstance(result, dict) if outcome == "runs" else result == outcome), result


@pytest.mark.parametrize("columns", [None, "120", "0", "-5", "wide", " 90 "])
def test_the_text_width_is_shutils_without_importing_it(monkeypatch, columns):
    """cli/commands.py terminal_columns follows shutil.get_terminal_size (COLUMNS, the terminal, 80) step for step;
    it exists so that a lint does not import shutil (and bz2, lzma behind it) for the width alone."""
    import shutil

    from zeroadvisor.cli.commands import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns

"""The typer app, built from the parameter tables in cli/options.py; the commands are in cli/commands.py.

Exit codes: cli/exits.py. Start-up: ``lint`` usually runs without this module (cli/__init__.py).
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING, Any, Literal

import typer

from zeroadvisor.cli import commands, options
from zeroadvisor.cli.exits import ExitCode
from zeroadvisor.version import __version__

if TYPE_CHECKING:  # typed as the typer this project is checked with (pip install -e '.[test]' brings no click)
    from typer._click import Context, HelpFormatter
    from typer._click.exceptions import ClickException
else:
    try:  # recent typer vendors click
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer: the same class under click's own module name
        from click.exceptions import ClickException

# Plain (click) help, not rich's boxes: at 80 columns rich's four columns cut flag names and squeeze the help into
# a few characters; two columns wrap whole, and GroupedCommand lists the options by group (options.PANELS).
app = typer.Typer(
    name="zeroadvisor",
    help="Lint DeepSpeed configs, estimate ZeRO memory, and advise the lowest stage that fits.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class GroupedCommand(typer.core.TyperCommand):
    """--help with the arguments first, then the options group by group (options.PANELS), in plain text."""

    def format_options(self, ctx: Context, formatter: HelpFormatter) -> None:
        groups: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            title = "Arguments" if param.param_type_name == "argument" else \
                getattr(param, "rich_help_panel", None) or "Options"
            groups.setdefault(title, []).append(record)
        order = ["Arguments", *options.PANELS, "Options"]
        for title in sorted(groups, key=lambda t: order.index(t) if t in order else len(order)):
            with formatter.section(title):
                formatter.write_dl(groups[title])


def _annotation(param: options.Param) -> Any:
    kind: Any = param.kind
    choices = param.choice_values()
    if choices is not None:
        kind = Literal[choices]
    if param.multiple:
        kind = list[kind]
    return kind if param.required or param.default is not None else kind | None


def _typer_parameter(command: options.CommandSpec, param: options.Param) -> inspect.Parameter:
    default = ... if param.required else param.default
    text = param.full_help(command.name)
    if param.positional:
        info = typer.Argument(default, metavar=param.metavar, help=text)
    else:
        info = typer.Option(default, *param.flags, help=text, min=param.minimum,
                            metavar=param.choice_metavar or param.metavar,
                            rich_help_panel=param.panel, hidden=param.alias_of is not None)
    return inspect.Parameter(param.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=_annotation(param))


def _register(command: options.CommandSpec) -> None:
    def callback(**values: object) -> None:
        # typer.Exit carries the code whether or not typer runs in standalone mode
        raise typer.Exit(commands.guarded(commands.RUNNERS[command.name], values))

    parameters = [_typer_parameter(command, p) for p in command.params]
    callback.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    callback.__annotations__ = {p.name: p.annotation for p in parameters}
    callback.__name__ = command.name.replace("-", "_")
    callback.__doc__ = command.help
    app.command(command.name, epilog=command.epilog, cls=GroupedCommand)(callback)


for _command in options.COMMANDS:
    _register(_command)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"zeroadvisor {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
) -> None:
    """Lint DeepSpeed configs, estimate ZeRO memory, and advise the lowest stage that fits."""


def run(argv: list[str]) -> int:
    """Parse ``argv`` with typer and run the command; a usage error is one line and exit 2."""
    argv = options.launch_words_to_flag(argv)  # check -- <launch command>
    try:
        return int(app(args=argv, prog_name="zeroadvisor", standalone_mode=False) or ExitCode.OK)
    except ClickException as err:  # one line, not click's three-line box
        if type(err).__name__ == "NoArgsIsHelpError":  # no arguments at all: the help, as typer shows it
            sys.stderr.write(err.format_message().rstrip("\n") + "\n")
            return ExitCode.USAGE
        names = {c.name for c in options.COMMANDS}
        command = next((a for a in argv[:1] if a in names), "")
        hint = f" (see 'zeroadvisor {command} --help')" if command else " (see 'zeroadvisor --help')"
        message = err.format_message().strip()
        if message:  # (no arguments at all: typer has shown the help instead)
            commands.error(f"{message}{hint}")
        return ExitCode.USAGE if err.exit_code == 2 else err.exit_code
    except typer.Abort:  # click's word for Ctrl-C or end of input at a prompt
        return ExitCode.INTERRUPTED

"""The command line: a thin typer layer over the library (lint, rules, estimate, check).

Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage error or unreadable input.
Heavy modules are imported inside the commands so ``lint`` starts fast.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import List, Optional

import typer

from zeroadvisor import __version__

app = typer.Typer(
    name="zeroadvisor",
    help="Lint DeepSpeed configs, estimate ZeRO memory, and advise the lowest stage that fits.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class LintFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"
    never = "never"


class Integration(str, Enum):
    any = "any"
    deepspeed = "deepspeed"
    hf_trainer = "hf-trainer"
    accelerate = "accelerate"


def fail(message: str) -> "typer.Exit":
    typer.echo(f"zeroadvisor: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _split(values: Optional[List[str]]) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def select_rules(select: Optional[List[str]], ignore: Optional[List[str]], registry_module=None):
    from zeroadvisor.rules import registry

    chosen, dropped = _split(select), _split(ignore)
    unknown = registry.unknown_references(chosen + dropped)
    if unknown:
        raise fail(f"unknown rule {unknown[0]!r}: see 'zeroadvisor rules'")
    return registry.select(chosen, dropped)


def exit_code(findings, fail_on: FailOn) -> int:
    if fail_on is FailOn.never:
        return EXIT_OK
    from zeroadvisor.findings import Severity

    threshold = Severity(fail_on.value).rank
    return EXIT_FINDINGS if any(f.severity.rank >= threshold for f in findings) else EXIT_OK


def use_colour() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def render_findings(findings, rules, files: int, fmt: LintFormat, extra=None) -> str:
    if fmt is LintFormat.json:
        from zeroadvisor.report import json_report

        return json_report.render(findings, files, extra)
    if fmt is LintFormat.sarif:
        from zeroadvisor.report import sarif

        return sarif.render(findings, rules)
    if fmt is LintFormat.github:
        from zeroadvisor.report import github

        return github.render(findings, files)
    from zeroadvisor.report import text

    return text.render(findings, colour=use_colour(), files=files)


@app.command()
def lint(
    paths: List[str] = typer.Argument(..., metavar="PATH...", help="Config files, directories or glob patterns."),
    format: LintFormat = typer.Option(LintFormat.text, "--format", "-f", help="Output format."),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 on findings of this severity or worse."),
    gpus: Optional[int] = typer.Option(None, "--gpus", min=1, help="Data-parallel world size: check the batch exactly."),
    integration: Integration = typer.Option(
        Integration.any, "--integration",
        help="Who reads the file: deepspeed, hf-trainer, accelerate, or any (accept what either integration fills)."),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Only these rules (codes, names or code prefixes)."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip these rules (codes, names or code prefixes)."),
) -> None:
    """Lint DeepSpeed config files."""
    from zeroadvisor.lint import InputError, lint_file
    from zeroadvisor.paths import PathError, expand
    from zeroadvisor.rules.context import LintOptions

    rules = select_rules(select, ignore)
    try:
        files = expand(paths)
    except PathError as err:
        raise fail(str(err))
    options = LintOptions(integration=integration.value, gpus=gpus)
    findings, unreadable = [], []
    for path in files:
        try:
            findings.extend(lint_file(path, options, rules).findings)
        except InputError as err:
            unreadable.append(str(err))
    for message in unreadable:
        typer.echo(f"zeroadvisor: {message}", err=True)
    sys.stdout.write(render_findings(findings, rules, len(files) - len(unreadable), format))
    code = exit_code(findings, fail_on)
    raise typer.Exit(EXIT_USAGE if unreadable else code)


@app.command("rules")
def list_rules() -> None:
    """List every rule: code, name, default severity and summary."""
    from zeroadvisor.rules import registry

    width = max(len(r.name) for r in registry.ALL)
    for rule in registry.ALL:
        typer.echo(f"{rule.code}  {rule.name:<{width}}  {rule.severity.value:<7}  {rule.summary}")


@app.command("rule")
def explain_rule(name: str = typer.Argument(..., help="A rule code (ZA101) or name (unknown-key).")) -> None:
    """Explain one rule, with a failing and a passing example."""
    from zeroadvisor.rules import registry

    rule = registry.find(name)
    if rule is None:
        raise fail(f"unknown rule {name!r}: see 'zeroadvisor rules'")
    typer.echo(f"{rule.code} {rule.name} [{rule.severity.value}]\n\n{rule.summary}\n\n{rule.explanation}\n")
    for example in rule.examples:
        label = "Fails" if example.fails else "Passes"
        options = f" (with {', '.join(f'--{k} {v}' for k, v in example.options.items())})" if example.options else ""
        typer.echo(f"{label}{options}:\n  {example.config}\n")
    if rule.source:
        typer.echo(f"Source: {rule.source}")


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"zeroadvisor {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=version_callback, is_eager=True, help="Show the version."),
) -> None:
    """Lint DeepSpeed configs, estimate ZeRO memory, and advise the lowest stage that fits."""


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as err:  # a bug: one line, not a traceback (ZEROADVISOR_DEBUG=1 shows it)
        if os.environ.get("ZEROADVISOR_DEBUG"):
            raise
        typer.echo(f"zeroadvisor: internal error: {type(err).__name__}: {err} (set ZEROADVISOR_DEBUG=1 for details)",
                   err=True)
        sys.exit(EXIT_USAGE)

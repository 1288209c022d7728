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
from zeroadvisor.memory.gpus import GPUS as GPU_NAMES

app = typer.Typer(
    name="zeroadvisor",
    help="Lint DeepSpeed configs, estimate ZeRO memory, and advise the lowest stage that fits.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def _choices(name: str, values: tuple[str, ...]) -> type[Enum]:
    """A str Enum for typer from the values the library defines (one list per fact)."""
    return Enum(name, {value.replace("-", "_"): value for value in values}, type=str)


LintFormat = _choices("LintFormat", ("text", "json", "sarif", "github"))
CheckFormat = _choices("CheckFormat", ("text", "json", "sarif", "github", "markdown"))
EstimateFormat = _choices("EstimateFormat", ("text", "json"))
FailOn = _choices("FailOn", ("error", "warning", "info", "never"))
Integration = _choices("Integration", ("any", "deepspeed", "hf-trainer", "accelerate"))
Accounting = _choices("Accounting", ("deepspeed", "paper"))
Unit = _choices("Unit", ("GB", "GiB"))
Checkpointing = _choices("Checkpointing", ("none", "selective", "full"))


def fail(message: str) -> "typer.Exit":
    typer.echo(f"zeroadvisor: {message}", err=True)
    return typer.Exit(EXIT_USAGE)


def _split(values: Optional[List[str]]) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def select_rules(select: Optional[List[str]], ignore: Optional[List[str]], lint_only: bool = True):
    from zeroadvisor.rules import registry

    chosen, dropped = _split(select), _split(ignore)
    unknown = registry.unknown_references(chosen + dropped)
    if unknown:
        raise fail(f"unknown rule {unknown[0]!r}: see 'zeroadvisor rules'")
    return registry.select(chosen, dropped, among=registry.LINT if lint_only else registry.ALL)


def exit_code(findings, fail_on: FailOn) -> int:
    if fail_on is FailOn.never:
        return EXIT_OK
    from zeroadvisor.lint.findings import Severity

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
    paths: List[str] = typer.Argument(..., metavar="PATH", help="Config files, directories or glob patterns."),
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
    from zeroadvisor.lint.engine import InputError, lint_file
    from zeroadvisor.config.paths import PathError, expand
    from zeroadvisor.lint.context import LintOptions

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


def _load_config(path: str):
    """A config document for estimate/check; InputError when it cannot be read at all."""
    from zeroadvisor.cli.inputs import InputError
    from zeroadvisor.lint.engine import InputError as UnreadableError
    from zeroadvisor.lint.engine import read_document
    from zeroadvisor.config.source import ParseError

    try:
        return read_document(path)
    except UnreadableError as err:
        raise InputError(str(err)) from None
    except ParseError as err:
        where = f"{path}:{err.line}:{err.column}" if err.line else path
        raise InputError(f"{where}: {err.message}") from None


# Options shared by estimate and check (typer reads these as the parameters' defaults).
MODEL = typer.Option(None, "--model", "-m", help="A model description (YAML/JSON) or a Hugging Face config.json.")
PARAMS = typer.Option(None, "--params", help="Parameter count instead of --model, e.g. 7.5B.")
GPUS = typer.Option(..., "--gpus", min=1, help="Number of GPUs (data-parallel degree).")
GPUS_PER_NODE = typer.Option(None, "--gpus-per-node", min=1, help="GPUs per node (default 8).")
GPU_MEMORY = typer.Option(None, "--gpu-memory", help="Memory per GPU, e.g. 80GiB.")
GPU = typer.Option(None, "--gpu", help="GPU name instead of --gpu-memory (memory as the driver reports it): "
                   + ", ".join(GPU_NAMES) + ".")
CPU_MEMORY = typer.Option(None, "--cpu-memory", help="Host RAM per node, e.g. 1TB.")
NVME = typer.Option(None, "--nvme", help="NVMe space per node, e.g. 4TB.")
ACCOUNTING = typer.Option(Accounting.deepspeed, "--accounting",
                          help="deepspeed: what DeepSpeed allocates; paper: the ZeRO paper's 2 + 2 + K bytes.")
UNIT = typer.Option(Unit.GB, "--unit", help="GB (10^9 bytes) or GiB (2^30 bytes).")
SEQ_LEN = typer.Option(None, "--seq-len", help="Override the sequence length.")
CHECKPOINTING = typer.Option(None, "--activation-checkpointing", help="Override: none, selective or full.")
FLASH = typer.Option(None, "--flash-attention/--no-flash-attention", help="Override FlashAttention.")


@app.command()
def estimate(
    config: Optional[str] = typer.Option(None, "--config", "-c", help="The DeepSpeed config (default: fp16 Adam)."),
    model: Optional[str] = MODEL,
    params: Optional[str] = PARAMS,
    gpus: int = GPUS,
    gpus_per_node: Optional[int] = GPUS_PER_NODE,
    gpu_memory: Optional[str] = GPU_MEMORY,
    gpu: Optional[str] = GPU,
    cpu_memory: Optional[str] = CPU_MEMORY,
    nvme: Optional[str] = NVME,
    accounting: Accounting = ACCOUNTING,
    format: EstimateFormat = typer.Option(EstimateFormat.text, "--format", "-f"),
    unit: Unit = UNIT,
    seq_len: Optional[int] = SEQ_LEN,
    activation_checkpointing: Optional[Checkpointing] = CHECKPOINTING,
    flash_attention: Optional[bool] = FLASH,
) -> None:
    """Estimate memory per GPU and per node for every ZeRO stage and offload option."""
    import json

    from zeroadvisor.cli import inputs
    from zeroadvisor.memory.estimate import Cluster
    from zeroadvisor.memory.estimate import estimate as run_estimate
    from zeroadvisor.report import estimate_text

    try:
        spec, shape = inputs.model_and_shape(model, params, seq_len,
                                             activation_checkpointing.value if activation_checkpointing else None,
                                             flash_attention)
        memory = inputs.gpu_memory(gpu_memory, gpu, required=False)
        cluster = Cluster(gpus=gpus, gpus_per_node=gpus_per_node, gpu_memory=memory,
                          cpu_memory=inputs.size("--cpu-memory", cpu_memory), nvme=inputs.size("--nvme", nvme))
        data = None
        if config is not None:
            doc = _load_config(config)
            if not isinstance(doc.data, dict):
                raise inputs.InputError(f"{config}: the config is not a JSON object")
            data = doc.data
        try:
            result = run_estimate(data, spec, shape, cluster, accounting.value)
        except (ValueError, TypeError) as err:
            raise inputs.InputError(f"{config}: cannot estimate from this config ({err}); see "
                                    f"'zeroadvisor lint {config}'") from None
    except (inputs.InputError, ValueError) as err:
        raise fail(str(err))
    if format is EstimateFormat.json:
        sys.stdout.write(json.dumps(result.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(estimate_text.render(result, unit.value, ascii_only=not _unicode_ok()))


def _unicode_ok() -> bool:
    encoding = (sys.stdout.encoding or "").lower()
    return "utf" in encoding


@app.command()
def check(
    config: str = typer.Argument(..., metavar="CONFIG", help="The DeepSpeed config to check."),
    model: Optional[str] = MODEL,
    params: Optional[str] = PARAMS,
    gpus: int = GPUS,
    gpu_memory: Optional[str] = GPU_MEMORY,
    gpu: Optional[str] = GPU,
    gpus_per_node: Optional[int] = GPUS_PER_NODE,
    cpu_memory: Optional[str] = CPU_MEMORY,
    nvme: Optional[str] = NVME,
    headroom: str = typer.Option("10%", "--headroom", help="GPU memory to keep free, e.g. 10% or 0.1."),
    format: CheckFormat = typer.Option(CheckFormat.text, "--format", "-f"),
    fail_on: FailOn = typer.Option(FailOn.error, "--fail-on", help="Exit 1 on findings of this severity or worse."),
    suggest: bool = typer.Option(False, "--suggest", help="Print the fixes as a unified diff of CONFIG."),
    fix: bool = typer.Option(False, "--fix", help="Write the fixes into CONFIG (atomically)."),
    integration: Integration = typer.Option(Integration.any, "--integration"),
    select: Optional[List[str]] = typer.Option(None, "--select", help="Only these rules."),
    ignore: Optional[List[str]] = typer.Option(None, "--ignore", help="Skip these rules."),
    accounting: Accounting = ACCOUNTING,
    unit: Unit = UNIT,
    seq_len: Optional[int] = SEQ_LEN,
    activation_checkpointing: Optional[Checkpointing] = CHECKPOINTING,
    flash_attention: Optional[bool] = FLASH,
) -> None:
    """Pre-flight check: lint findings and memory advice, with fixes as a diff."""
    from zeroadvisor.cli import inputs
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.fix.apply import FixError, combined_patch, unified_diff, write_fix

    rules = select_rules(select, ignore, lint_only=False)
    try:
        spec, shape = inputs.model_and_shape(model, params, seq_len,
                                             activation_checkpointing.value if activation_checkpointing else None,
                                             flash_attention)
        options = CheckOptions(
            model=spec, shape=shape, gpus=gpus, gpu_memory=inputs.gpu_memory(gpu_memory, gpu, required=True),
            gpus_per_node=gpus_per_node, cpu_memory=inputs.size("--cpu-memory", cpu_memory),
            nvme=inputs.size("--nvme", nvme), headroom=inputs.headroom(headroom), accounting=accounting.value,
            integration=integration.value, unit=unit.value)
        result, document = _check_file(config, options, rules)
    except (inputs.InputError, ValueError) as err:
        raise fail(str(err))
    diff = ""
    patch = combined_patch(result.findings)
    if document is not None and patch and (suggest or fix or format is CheckFormat.markdown):
        try:
            diff = unified_diff(document, patch, config)
            if fix:
                write_fix(config, document, patch)
        except FixError as err:
            raise fail(f"{config}: {err}")
    if "estimate_error" in result.extra:
        typer.echo(f"zeroadvisor: {config}: no memory estimate ({result.extra['estimate_error']}): fix the errors "
                   "reported first", err=True)
    _print_check(result, rules, format, diff if (suggest or format is CheckFormat.markdown) else "", config, unit.value)
    if fix:
        fixed = sum(1 for f in result.findings if f.fix)
        typer.echo(f"zeroadvisor: applied {fixed} fix(es) to {config}" if patch
                   else f"zeroadvisor: nothing to fix in {config}", err=True)
    raise typer.Exit(exit_code(result.findings, fail_on))


def _check_file(config: str, options, rules):
    """Check CONFIG; a file that does not parse is reported as findings, not an estimate."""
    from zeroadvisor.advisor.check import CheckResult, check_document
    from zeroadvisor.cli.inputs import InputError
    from zeroadvisor.lint.engine import InputError as UnreadableError
    from zeroadvisor.lint.engine import lint_file, read_document
    from zeroadvisor.config.source import ParseError

    try:
        document = read_document(config)
    except UnreadableError as err:
        raise InputError(str(err)) from None
    except ParseError:
        lint_rules = [r for r in rules if not r.needs_advice]
        return CheckResult(lint_file(config, None, lint_rules).findings, None, options), None
    return check_document(document, options, rules), document


def _print_check(result, rules, fmt, diff: str, config: str, unit: str) -> None:
    if fmt is CheckFormat.json:
        from zeroadvisor.report import json_report

        extra = {"estimate": result.estimate_dict()}
        sys.stdout.write(json_report.render(result.findings, 1, extra))
        return
    if fmt is CheckFormat.markdown:
        from zeroadvisor.report import markdown

        o = result.options
        sys.stdout.write(markdown.render(config, result.findings, result.estimate, o.usable, o.gpu_memory,
                                         o.headroom, diff, unit))
        return
    if fmt in (CheckFormat.sarif, CheckFormat.github):
        sys.stdout.write(render_findings(result.findings, rules, 1, LintFormat(fmt.value)))
        return
    from zeroadvisor.report import estimate_text, text

    out = text.render(result.findings, colour=use_colour(), files=1)
    if result.estimate is not None:
        out += "\n" + estimate_text.render(result.estimate, unit, ascii_only=not _unicode_ok())
    if diff:
        out += "\n" + diff
    sys.stdout.write(out)


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
        options = f" (with {example.describe_options()})" if example.options else ""
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
    try:  # recent typer vendors click
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer
        from click.exceptions import ClickException
    try:
        code = app(standalone_mode=False)
    except ClickException as err:  # usage errors: one line, exit 2 (not click's three-line box)
        commands = {c.name or c.callback.__name__ for c in app.registered_commands}
        command = next((a for a in sys.argv[1:2] if a in commands), "")
        hint = f" (see 'zeroadvisor {command} --help')" if command else " (see 'zeroadvisor --help')"
        typer.echo(f"zeroadvisor: {err.format_message()}{hint}", err=True)
        sys.exit(EXIT_USAGE if err.exit_code == 2 else err.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)
    except Exception as err:  # a bug: one line, not a traceback (ZEROADVISOR_DEBUG=1 shows it)
        if os.environ.get("ZEROADVISOR_DEBUG"):
            raise
        typer.echo(f"zeroadvisor: internal error: {type(err).__name__}: {err} (set ZEROADVISOR_DEBUG=1 for details)",
                   err=True)
        sys.exit(EXIT_USAGE)
    sys.exit(code or EXIT_OK)

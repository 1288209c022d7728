"""What each command does with its parsed values: call the library, render, choose the exit code.

Typer-free, so that ``lint`` can run without building the typer app (see cli/__init__.py).
Each function takes the keyword values described in cli/options.py and returns an ExitCode.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

from zeroadvisor.cli.exits import ExitCode

Values = dict[str, Any]

# Characters the text reports draw with; a stream that cannot encode them gets the ASCII drawing.
_DRAWING = "✓✗×"


def guarded(command: Callable[[Values], ExitCode], values: Values) -> int:
    """Run a command; the library's expected errors (bad input) become one line and exit 2."""
    from zeroadvisor.api import EXPECTED_ERRORS

    try:
        return int(command(values))
    except EXPECTED_ERRORS as err:
        error(str(err))
        return ExitCode.USAGE
    except BrokenPipeError:  # here, not in typer: typer would turn it into exit 1
        return stdout_closed()


def stdout_closed() -> ExitCode:
    """The reader of stdout went away (``| head``): end quietly, without Python's report at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # pragma: no cover - stdout without a descriptor (in-process tests)
        pass
    return ExitCode.BROKEN_PIPE


def error(message: str) -> None:
    """One line on stderr; file names and values in it are data (escaped for the terminal)."""
    from zeroadvisor.report.escape import terminal

    sys.stderr.write(f"zeroadvisor: {terminal(message)}\n")


def lint(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.lint.context import LintOptions

    rules = api.select_rules(v["select"], v["ignore"], lint_only=True)
    training = _trainer(v).get("training")
    run = api.lint_paths(v["paths"], LintOptions(integration=v["integration"], gpus=v["gpus"], training=training),
                         rules)
    for message in run.unreadable:
        error(message)
    extra = {"unreadable": run.unreadable} if run.unreadable else {}  # json lists them, text counts them
    _show(v["format"], run.findings, files=run.files, rules=rules, extra=extra)
    if run.unreadable:
        return ExitCode.USAGE
    return ExitCode.FINDINGS if api.fails(run.findings, v["fail_on"]) else ExitCode.OK


def estimate(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.cli import inputs
    from zeroadvisor.memory.estimate import Cluster

    trainer = _trainer(v)
    v = {**v, **{k: val for k, val in trainer.items() if k in v}}
    spec, shape = inputs.model_and_shape(v["model"], v["params"], v["seq_len"], v["activation_checkpointing"],
                                         v["flash_attention"], **inputs.run_inputs(v))
    cluster = Cluster(gpus=v["gpus"], gpus_per_node=v["gpus_per_node"],
                      gpu_memory=inputs.gpu_memory(v["gpu_memory"], v["gpu"], required=False),
                      cpu_memory=inputs.size("--cpu-memory", v["cpu_memory"]), nvme=inputs.size("--nvme", v["nvme"]),
                      headroom=inputs.headroom(v["headroom"]), gpu=inputs.gpu(v["gpu"]))
    result = api.estimate_config(v["config"], spec, shape, cluster, v["accounting"], trainer.get("training"))
    _show(v["format"], [], estimate=result, unit=v["unit"], explain=v["explain"],
          throughput=_throughput(v, result))
    return ExitCode.OK


def _throughput(v: Values, result) -> dict:
    """Step time per option (throughput/): the config is read again for its batch and ZeRO++ keys."""
    from zeroadvisor.cli import inputs
    from zeroadvisor.lint.engine import read_document
    from zeroadvisor.throughput import per_option

    data = read_document(v["config"]).data if v["config"] is not None else None
    return per_option(result, inputs.hardware(v), data if isinstance(data, dict) else None)


def check(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.cli import inputs

    rules = api.select_rules(v["select"], v["ignore"], lint_only=False)
    trainer = _trainer(v)
    v = {**v, **{k: val for k, val in trainer.items() if k in v}}
    if v["config"] is None:
        raise api.UsageError("give CONFIG, or the launch command after -- (its --deepspeed names the config)")
    if v["gpus"] is None:
        why = f": {trainer['world_from']}" if trainer.get("world_from") else ""
        raise api.UsageError(f"give --gpus N (or the launch command after --){why}")
    if trainer and v["integration"] == "any":
        v["integration"] = "hf-trainer"  # the Trainer reads the config
    spec, shape = inputs.model_and_shape(v["model"], v["params"], v["seq_len"], v["activation_checkpointing"],
                                         v["flash_attention"], **inputs.run_inputs(v))
    options = CheckOptions(
        model=spec, shape=shape, gpus=v["gpus"], gpu_memory=inputs.gpu_memory(v["gpu_memory"], v["gpu"], True),
        gpus_per_node=v["gpus_per_node"], cpu_memory=inputs.size("--cpu-memory", v["cpu_memory"]),
        nvme=inputs.size("--nvme", v["nvme"]), headroom=inputs.headroom(v["headroom"]), accounting=v["accounting"],
        integration=v["integration"], unit=v["unit"], gpu=inputs.gpu(v["gpu"]), training=trainer.get("training"),
        hardware=inputs.hardware(v))
    for note in trainer.get("notes", ()):
        error(f"note: {note}")
    show_diff = v["suggest"] or v["format"] == "markdown"
    run = api.check_config(v["config"], options, rules, diff=show_diff, fix=v["fix"])
    for note in run.notes:
        error(note)
    _show(v["format"], run.result.findings, rules=rules, check=run.result, path=v["config"],
          diff=run.diff if show_diff else "", unit=v["unit"], explain=v["explain"])
    if run.error is not None:  # after the report: the findings are never lost to a failed write
        error(run.error)
        return ExitCode.USAGE
    if v["fix"]:
        error(f"applied {run.fixed} fix(es) to {v['config']}" if run.fixed else f"nothing to fix in {v['config']}")
    return ExitCode.FINDINGS if api.fails(run.result.findings, v["fail_on"]) else ExitCode.OK


def list_rules(v: Values) -> ExitCode:
    from zeroadvisor.rules import registry

    width = max(len(r.name) for r in registry.ALL)
    sys.stdout.write("".join(f"{r.code}  {r.name:<{width}}  {r.severity.value:<7}  {r.summary}\n"
                             for r in registry.ALL))
    return ExitCode.OK


def explain_rule(v: Values) -> ExitCode:
    from zeroadvisor import api

    rule = api.find_rule(v["name"])
    out = [f"{rule.code} {rule.name} [{rule.severity.value}]\n\n{rule.summary}\n\n{rule.explanation}\n"]
    for example in rule.examples:
        label = "Fails" if example.fails else "Passes"
        options = f" (with {example.describe_options()})" if example.options else ""
        out.append(f"{label}{options}:\n  {example.config}\n")
    if rule.source:
        out.append(f"Source: {rule.source}")
    sys.stdout.write("".join(line + "\n" for line in out))
    return ExitCode.OK


# command name (cli/options.py) -> what runs it
RUNNERS: dict[str, Callable[[Values], ExitCode]] = {
    "lint": lint, "estimate": estimate, "check": check, "rules": list_rules, "rule": explain_rule,
}


def _show(fmt: str, findings, **fields) -> None:
    from zeroadvisor.report import Report, render

    report = Report(findings, colour=use_colour(), ascii_only=not can_encode(sys.stdout, _DRAWING), **fields)
    sys.stdout.write(render(fmt, report))


def use_colour() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def can_encode(stream, text: str) -> bool:
    try:
        text.encode(getattr(stream, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _trainer(v: Values) -> dict:
    """The Trainer's inputs (--training-args, --launch) as command values (cli/inputs.trainer_inputs)."""
    from zeroadvisor.cli import inputs

    return inputs.trainer_inputs(v)

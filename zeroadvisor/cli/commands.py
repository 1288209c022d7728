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
    from zeroadvisor.cli import defaults, options
    from zeroadvisor.lint.context import LintOptions

    v = defaults.resolve(options.LINT, v)
    rules = api.select_rules(v["select"], v["ignore"], lint_only=True)
    training = _trainer(v).get("training")
    run = api.lint_paths(v["paths"], LintOptions(integration=v["integration"], gpus=v["gpus"], training=training),
                         rules, only_configs=v["only_configs"],
                         rules_for=defaults.rules_for(v["select"], v["ignore"], True))
    for message in run.unreadable:
        error(message)
    extra: dict = {"unreadable": run.unreadable} if run.unreadable else {}  # json lists them, text counts them
    if run.skipped:
        extra["skipped"] = run.skipped
    _show(v["format"], run.findings, files=run.files, rules=run.rules, extra=extra)
    if run.unreadable:
        return ExitCode.USAGE
    return ExitCode.FINDINGS if api.fails(run.findings, v["fail_on"]) else ExitCode.OK


def estimate(v: Values) -> ExitCode:
    from zeroadvisor import api
    from zeroadvisor.cli import defaults, inputs, options
    from zeroadvisor.memory.estimate import Cluster

    v = defaults.resolve(options.ESTIMATE, v)
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
          all_options=v["all_options"], throughput=_throughput(v, result))
    return ExitCode.OK


def _throughput(v: Values, result) -> dict:
    """Step time per option (throughput/), on the machine the flags describe."""
    from zeroadvisor import api
    from zeroadvisor.cli import inputs

    return api.estimate_throughput(result, inputs.hardware(v))


def check(v: Values) -> ExitCode:
    """Each config against the same model and cluster: text and markdown reports one after another, json
    one document per config (a JSON array when there are several), sarif and github one report of all."""
    from zeroadvisor import api
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.cli import defaults, inputs, options

    from_trainer = ("gpus",) if v.get("launch") is not None or v.get("training_args") is not None else ()
    v = defaults.resolve(options.CHECK, v, defer=from_trainer)
    rules_for = defaults.rules_for(v["select"], v["ignore"], lint_only=False)
    trainer = _trainer({**v, "config": v["config"] or None})
    v = {**v, **{k: val for k, val in trainer.items() if k in v}}
    if not v["config"]:
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
    show_diff = v["suggest"] or v["format"] in ("markdown", "html")
    configs = [v["config"]] if isinstance(v["config"], str) else list(v["config"])
    combined = v["format"] in ("sarif", "github")  # one report of every config's findings
    documents, findings, used, failed, code = [], [], {}, False, ExitCode.OK
    for path in configs:
        rules = rules_for(path)
        run = api.check_config(path, options, rules, diff=show_diff, fix=v["fix"])
        for note in run.notes:
            error(note)
        findings.extend(run.result.findings)
        used.update((r.code, r) for r in rules)
        if not combined:
            documents.append(_text(v["format"], run.result.findings, rules=rules, check=run.result, path=path,
                                   diff=run.diff if show_diff else "", unit=v["unit"], explain=v["explain"],
                                   all_options=v["all_options"]))
        if run.error is not None:  # after the report: the findings are never lost to a failed write
            error(run.error)
            code = ExitCode.USAGE
        elif v["fix"]:
            error(f"applied {run.fixed} fix(es) to {path}" if run.fixed else f"nothing to fix in {path}")
        failed = failed or api.fails(run.result.findings, v["fail_on"])
    if combined:
        # one config: its verdict and cluster go with the findings (SARIF run properties, a GitHub notice)
        single = {"check": run.result, "unit": v["unit"], "path": configs[0]} if len(configs) == 1 else {}
        documents.append(_text(v["format"], findings, files=len(configs), rules=tuple(used.values()), **single))
    if v["format"] == "json" and len(documents) > 1:
        sys.stdout.write("[\n" + ",\n".join(d.rstrip("\n") for d in documents) + "\n]\n")
    else:
        sys.stdout.write("\n".join(documents))
    if code != ExitCode.OK:
        return code
    return ExitCode.FINDINGS if failed else ExitCode.OK


def list_rules(v: Values) -> ExitCode:
    from zeroadvisor.advisor import registry

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
    sys.stdout.write(_text(fmt, findings, **fields))


def _text(fmt: str, findings, **fields) -> str:
    from zeroadvisor.report import Report, render

    import shutil

    report = Report(findings, colour=use_colour(), ascii_only=not can_encode(sys.stdout, _DRAWING),
                    width=shutil.get_terminal_size().columns, **fields)  # COLUMNS, the terminal, else 80
    return render(fmt, report)


def use_colour() -> bool:
    """ANSI colour on a terminal; NO_COLOR (no-color.org: set and not empty) turns it off, FORCE_COLOR on."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return sys.stdout.isatty()


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

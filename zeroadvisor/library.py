"""The Python API: ``zeroadvisor.lint``, ``zeroadvisor.estimate`` and ``zeroadvisor.check``, typed results.

Thin wrappers over the flows in ``zeroadvisor.api`` (the same ones the command line runs), taking
Python values (byte counts or sizes such as ``"80GiB"``, a config as a path, text or dict) and
returning dataclasses that render to any report format. Bad input raises one of
``zeroadvisor.api.EXPECTED_ERRORS`` (each a ValueError subclass) with a one-line message.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from zeroadvisor.lint.findings import Finding, Severity

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions, CheckResult
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

__all__ = ["CheckReport", "EstimateResult", "LintResult", "check", "estimate", "lint"]

# The training-shape keywords (the run-input flags of cli/options.py, as Python names).
TRAINING_KEYWORDS = ("seq_len", "activation_checkpointing", "flash_attention", "target_len", "micro_batch",
                     "precision", "stage", "load_dtype", "zero_init", "meta_load", "tensor_parallel",
                     "pipeline_parallel", "sequence_parallel", "expert_parallel", "peft", "lora_r",
                     "lora_target_modules", "quantization")


def _count(findings: Sequence[Finding], severity: Severity) -> int:
    return sum(1 for f in findings if f.severity is severity)


def _render(fmt: str, findings: list[Finding], **fields: Any) -> str:
    from zeroadvisor.report import REPORTERS, Report, render

    if fmt not in REPORTERS:
        from zeroadvisor.api import UsageError

        raise UsageError(f"format must be one of {', '.join(REPORTERS)}, got {fmt!r}")
    return render(fmt, Report(findings, **fields))


# -- lint -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LintResult:
    """What ``lint`` found.

    findings: every finding, in file order; files: inputs read and linted; unreadable: one line per
    input that could not be read; skipped: files found in a folder that are not DeepSpeed or
    Accelerate configs (judged by content).
    """

    findings: list[Finding]
    files: int
    unreadable: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return _count(self.findings, Severity.ERROR)

    @property
    def warnings(self) -> int:
        return _count(self.findings, Severity.WARNING)

    @property
    def ok(self) -> bool:
        """No error and every input read."""
        return not self.errors and not self.unreadable

    def fails(self, fail_on: str = "error") -> bool:
        """Whether a finding is at or above ``fail_on`` (error, warning, info or never), as ``--fail-on``."""
        from zeroadvisor.api import fails

        return fails(self.findings, fail_on)

    def report(self, format: str = "text") -> str:
        """The report the command line prints: text, json, sarif or github."""
        extra: dict[str, Any] = {"unreadable": self.unreadable} if self.unreadable else {}
        if self.skipped:
            extra["skipped"] = self.skipped
        return _render(format, self.findings, files=self.files, extra=extra)


def lint(*paths: str | os.PathLike[str], text: str | None = None, config: Mapping[str, Any] | None = None,
         name: str | None = None, select: Sequence[str] | None = None, ignore: Sequence[str] | None = None,
         integration: str = "any", gpus: int | None = None, only_configs: bool = False) -> LintResult:
    """Lint DeepSpeed configs: files, folders or glob patterns, or one config given as ``text`` (JSON,
    hjson, or YAML when ``name`` ends in .yaml/.yml) or as a ``config`` dict.

    ``select``/``ignore``: rules by code, name or code prefix; ``integration``: who fills "auto"
    (deepspeed, hf-trainer, accelerate, any); ``gpus``: the data-parallel world size, to check the
    batch exactly. The project configuration is not read here (the command line reads it).

    >>> zeroadvisor.lint(config={"train_batch_size": 8, "zero_optimisation": {"stage": 3}}).errors
    1
    """
    from zeroadvisor import api
    from zeroadvisor.lint.context import LintOptions

    given = [p for p in (paths and "paths", text is not None and "text", config is not None and "config") if p]
    if len(given) != 1:
        raise api.UsageError("give paths, text= or config=: exactly one of them")
    rules = api.select_rules(select, ignore, lint_only=True)
    options = LintOptions(integration=integration, gpus=gpus)
    if paths:
        run = api.lint_paths([os.fspath(p) for p in paths], options, rules, only_configs=only_configs)
        return LintResult(run.findings, run.files, run.unreadable, run.skipped)
    from zeroadvisor.config.reader import read_text_document
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.rules.linter import lint_document, parse_error_findings

    label, source = _as_text(text, config, name)
    try:
        document = read_text_document(source, label)
    except ParseError as err:
        return LintResult(parse_error_findings(label, err, rules), 1)
    return LintResult(lint_document(document, options, rules), 1)


def _as_text(text: str | None, config: Mapping[str, Any] | None, name: str | None) -> tuple[str, str]:
    """(display name, text) for a config given in memory; a dict is written as indented JSON so that
    findings have lines."""
    if config is not None:
        return name or "<config>", json.dumps(config, indent=2, allow_nan=True)
    return name or "<text>", text or ""


# -- the model, the shape and the cluster, from keywords ----------------------------------------

def _model_and_shape(model: "str | os.PathLike[str] | ModelSpec | None", params: int | str | None,
                     training: Mapping[str, Any]) -> tuple["ModelSpec", "TrainingShape"]:
    from zeroadvisor.api import UsageError
    from zeroadvisor.cli import inputs
    from zeroadvisor.model.description import apply_overrides
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    unknown = sorted(set(training) - set(TRAINING_KEYWORDS))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}; the training shape takes {', '.join(TRAINING_KEYWORDS)}")
    values = {key: training.get(key) for key in TRAINING_KEYWORDS}
    targets = values["lora_target_modules"]
    values["lora_target_modules"] = [targets] if isinstance(targets, str) else targets
    if values["stage"] is not None:
        values["stage"] = int(values["stage"])
    head = (values.pop("seq_len"), values.pop("activation_checkpointing"), values.pop("flash_attention"))
    if isinstance(model, ModelSpec):
        if params is not None:
            raise UsageError("give model= or params=, not both")
        peft = inputs.peft_flags(values)
        if any(v is not None for v in peft.values()):
            raise UsageError("LoRA/QLoRA keywords need model= as a path to a config.json, not a ModelSpec")
        return model, apply_overrides(TrainingShape(), *head, **values)
    path = os.fspath(model) if model is not None else None
    return inputs.model_and_shape(path, str(params) if isinstance(params, int) else params, *head, **values)


def _size(option: str, value: int | str | None) -> int | None:
    from zeroadvisor.api import UsageError
    from zeroadvisor.cli import inputs

    if value is None or isinstance(value, str):
        return inputs.size(option, value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{option}: expected a byte count or a size such as '80GiB', got {value!r}")
    return inputs.size(option, f"{value}B")


def _gpu(gpu: str | None):
    """The named card (hardware/gpus.py GpuSpec), None when no name is given."""
    from zeroadvisor.cli import inputs

    return inputs.gpu(gpu)


def _gpu_memory(gpu: str | None, gpu_memory: int | str | None, required: bool) -> int | None:
    from zeroadvisor.cli import inputs

    if gpu_memory is not None and not isinstance(gpu_memory, str):
        gpu_memory = f"{_size('gpu_memory', gpu_memory)}B"
    return inputs.gpu_memory(gpu_memory, gpu, required)


def _headroom(value: float | str) -> float:
    from zeroadvisor.cli import inputs

    return inputs.headroom(value if isinstance(value, str) else repr(float(value)))


def _read_config(config: Any, name: str | None):
    """A Document for a path, text is not accepted here (a path names the file in the report)."""
    from zeroadvisor.config.reader import read_text_document

    label, source = _as_text(None, config, name)
    return read_text_document(source, label)


# -- estimate ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class EstimateResult:
    """Memory per GPU and node for every ZeRO stage and offload option.

    estimate: the full estimate (``stages``, each a StageEstimate with ``per_gpu`` rows, ``phases``,
    ``verdict`` and the ``terms`` with their sources); configured: the config's own option.
    """

    estimate: "Estimate"

    @property
    def configured(self) -> "StageEstimate | None":
        return self.estimate.configured

    @property
    def verdict(self) -> str | None:
        """fits, tight or does-not-fit for the configured option; None without a GPU memory."""
        return None if self.configured is None else self.configured.verdict

    def to_dict(self) -> dict[str, Any]:
        return self.estimate.to_dict()

    def report(self, format: str = "text", unit: str = "GB", explain: bool = False) -> str:
        """The estimate table (text) or its JSON."""
        return _render(format, [], estimate=self.estimate, unit=unit, explain=explain)


def estimate(config: "str | os.PathLike[str] | Mapping[str, Any] | None" = None, *,
             model: "str | os.PathLike[str] | ModelSpec | None" = None, params: int | str | None = None,
             gpus: int = 1, gpus_per_node: int | None = None, gpu: str | None = None,
             gpu_memory: int | str | None = None, cpu_memory: int | str | None = None,
             nvme: int | str | None = None, headroom: float | str = "10%", accounting: str = "deepspeed",
             **training: Any) -> EstimateResult:
    """Estimate ZeRO memory for a config (a path or a dict; None: DeepSpeed's defaults, fp16 Adam).

    ``model``: a model description or a Hugging Face config.json (path), or ``params`` ("7B", 7e9 as
    int); sizes are byte counts or strings such as "80GiB"; ``training``: the training-shape
    keywords (seq_len, micro_batch, precision, stage, activation_checkpointing, ... as the flags).

    >>> zeroadvisor.estimate(params="7B", gpus=8, gpu="A100-SXM4-80GB").verdict
    """
    from zeroadvisor import api
    from zeroadvisor.memory.estimate import Cluster

    spec, shape = _model_and_shape(model, params, training)
    cluster = Cluster(gpus=gpus, gpus_per_node=gpus_per_node, gpu_memory=_gpu_memory(gpu, gpu_memory, False),
                      cpu_memory=_size("cpu_memory", cpu_memory), nvme=_size("nvme", nvme),
                      headroom=_headroom(headroom), gpu=_gpu(gpu))
    if isinstance(config, Mapping):  # the checks estimate_config makes of a file, then the estimate
        from zeroadvisor.memory.estimate import estimate as run_estimate

        data = dict(config)
        api._refuse_conflicts("<config>", data, spec, cluster.gpus, shape)
        api._refuse_layout("<config>", data, cluster.gpus, shape)
        return EstimateResult(run_estimate(data, spec, shape, cluster, accounting))
    path = os.fspath(config) if config is not None else None
    return EstimateResult(api.estimate_config(path, spec, shape, cluster, accounting))


# -- check ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckReport:
    """Lint findings and memory advice for one config.

    findings: lint findings and the advice (ZA8xx: does-not-fit with the cheapest change that fits,
    ...); result: the full CheckResult (its ``estimate`` is None when the config does not parse or
    holds a value the memory model cannot use, and ``notes`` say why); diff: the fixes as a unified
    diff of the file (``diff=True``).
    """

    path: str
    result: "CheckResult"
    diff: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return self.result.findings

    @property
    def estimate(self) -> "Estimate | None":
        return self.result.estimate

    @property
    def verdict(self) -> str | None:
        """fits, tight or does-not-fit for the configured stage and offload; None without an estimate."""
        configured = self.estimate.configured if self.estimate is not None else None
        return None if configured is None else configured.verdict

    @property
    def fits(self) -> bool | None:
        """False on does-not-fit ("tight" fits, inside the headroom); None without an estimate."""
        return None if self.verdict is None else self.verdict != "does-not-fit"

    @property
    def errors(self) -> int:
        return _count(self.findings, Severity.ERROR)

    def fails(self, fail_on: str = "error") -> bool:
        from zeroadvisor.api import fails

        return fails(self.findings, fail_on)

    def report(self, format: str = "text", explain: bool = False) -> str:
        """The report the command line prints: text, json, sarif, github or markdown."""
        from zeroadvisor.advisor import registry

        return _render(format, self.findings, rules=registry.ALL, check=self.result, path=self.path,
                       diff=self.diff, unit=self.result.options.unit, explain=explain)


def check_options(*, model: Any = None, params: int | str | None = None, gpus: int, gpu: str | None = None,
                  gpu_memory: int | str | None = None, gpus_per_node: int | None = None,
                  cpu_memory: int | str | None = None, nvme: int | str | None = None,
                  headroom: float | str = "10%", accounting: str = "deepspeed", integration: str = "any",
                  unit: str = "GB", **training: Any) -> "CheckOptions":
    """The CheckOptions ``check`` runs with (shared with ``preflight``)."""
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.api import UsageError

    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise UsageError(f"gpus must be a whole number of at least 1, got {gpus!r}")
    spec, shape = _model_and_shape(model, params, training)
    return CheckOptions(model=spec, shape=shape, gpus=gpus, gpu_memory=_gpu_memory(gpu, gpu_memory, True),
                        gpus_per_node=gpus_per_node, cpu_memory=_size("cpu_memory", cpu_memory),
                        nvme=_size("nvme", nvme), headroom=_headroom(headroom), accounting=accounting,
                        integration=integration, unit=unit, gpu=_gpu(gpu))


def check(config: "str | os.PathLike[str] | Mapping[str, Any]", *, gpus: int, name: str | None = None,
          select: Sequence[str] | None = None, ignore: Sequence[str] | None = None, diff: bool = False,
          **options: Any) -> CheckReport:
    """Pre-flight check of one config (a path or a dict) for a model on a cluster: lint findings, the
    memory verdict and the cheapest change that fits.

    Keywords as ``estimate`` (model or params, gpu or gpu_memory, cpu_memory, nvme, headroom, the
    training shape) plus integration, unit, select/ignore and ``diff`` (the fixes as a unified diff).

    >>> zeroadvisor.check("ds_config.json", model="config.json", gpus=8, gpu="A100-SXM4-80GB").verdict
    """
    from zeroadvisor import api

    run_options = check_options(gpus=gpus, **options)
    rules = api.select_rules(select, ignore, lint_only=False)
    if isinstance(config, Mapping):
        from zeroadvisor.advisor.check import check_document
        from zeroadvisor.advisor.check import combined_patch
        from zeroadvisor.fix.apply import unified_diff

        document = _read_config(dict(config), name)
        result = check_document(document, run_options, rules)
        patch = combined_patch(result.findings) if diff else None
        return CheckReport(document.name, result, unified_diff(document, patch, document.name) if patch else "")
    path = os.fspath(config)
    run = api.check_config(path, run_options, rules, diff=diff)
    return CheckReport(path, run.result, run.diff, run.notes)

"""The Python API: ``lint``, ``estimate``, ``check`` and ``preflight``, their typed results, and the errors
bad input raises. ``import zeroadvisor`` gives the same names (zeroadvisor/__init__.py).

Each function resolves its inputs once (``zeroadvisor.inputs.run.build``, the builder the command line uses
too, from keywords here) and runs the flow (zeroadvisor/flows.py) on them: a config given as a path or as a
dict takes the same path (a dict is written as JSON text and read like a file). Values are Python values or
the command line's text: byte counts or sizes such as ``"80GiB"``, shares such as ``0.1`` or ``"10%"``.

Bad input raises one of ``EXPECTED_ERRORS`` (each a ValueError subclass) with a one-line message; anything
else is a bug. The command line calls ``run_lint``, ``run_estimate`` and ``run_check`` on the RunInputs it
built from its flags and the project configuration.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, BinaryIO

from zeroadvisor.config.project import ProjectConfigError
from zeroadvisor.config.reader import InputError as UnreadableInput
from zeroadvisor.config.trainer_errors import TrainerInputError
from zeroadvisor.flows import CheckReport, CheckRun, EstimateResult, LintResult, fails
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.errors import UnusableConfig, UsageError
from zeroadvisor.inputs.request import Request, check_training_keywords
from zeroadvisor.model.errors import ModelError
from zeroadvisor.vocab import Verdict

if TYPE_CHECKING:
    from zeroadvisor.inputs.environment import Readings
    from zeroadvisor.inputs.run import RunInputs
    from zeroadvisor.model.spec import ModelSpec

__all__ = [
    "EXPECTED_ERRORS",
    "CheckReport",
    "EstimateResult",
    "LintResult",
    "PreflightError",
    "PreflightResult",
    "UnreadableInput",
    "UnusableConfig",
    "UsageError",
    "check",
    "estimate",
    "fails",
    "lint",
    "preflight",
    "run_check",
    "run_estimate",
    "run_lint",
]

# The errors bad input raises, each ``str(err)`` one line; anything else is a bug.
EXPECTED_ERRORS: tuple[type[Exception], ...] = (UsageError, UnreadableInput, UnusableConfig, ModelError,
                                                TrainerInputError, ProjectConfigError)

def _build(request: Request, readings: Readings | None = None) -> RunInputs:
    from zeroadvisor.inputs.run import build

    return build(request, readings=readings)


# -- on inputs already resolved (what the command line calls) -------------------------------------

def run_lint(inputs: RunInputs, stdin: BinaryIO | None = None) -> LintResult:
    """``lint`` of RunInputs built once (zeroadvisor.inputs.run.build); ``-`` reads ``stdin``."""
    from zeroadvisor import flows

    with _documented(inputs):
        return flows.lint(inputs, stdin)


def run_estimate(inputs: RunInputs, step_times: bool = False) -> EstimateResult:
    """``estimate`` of RunInputs; ``step_times``: the step time per option too, on ``inputs.hardware``."""
    from zeroadvisor import flows

    with _documented(inputs):
        return flows.estimate(inputs, step_times)


def run_check(inputs: RunInputs) -> CheckRun:
    """``check`` of each of the RunInputs' configs (directories and glob patterns expanded as ``lint`` expands
    them), one report each, in order: iterate the CheckRun; its ``skipped`` lists the files found that are not
    configs."""
    from zeroadvisor import flows

    with _documented(inputs):
        run = flows.check(inputs)
    return _DocumentedRun(**{name.name: getattr(run, name.name) for name in fields(run)})


class _DocumentedRun(CheckRun):
    """A CheckRun whose reports, made while it is iterated, raise only the documented errors (``_documented``)."""

    def __iter__(self) -> Iterator[CheckReport]:
        with _documented(self.inputs):
            yield from super().__iter__()


@contextmanager
def _documented(inputs: RunInputs) -> Iterator[None]:
    """The memory model's own error (memory/errors.py EstimateError: a value it cannot use, never a bug) as the
    documented error it is: an UnusableConfig naming the config where there is one, else a UsageError. The
    flows raise it where a value the inputs accepted alone cannot be used with the rest (a micro batch the
    config derives past the model's bound)."""
    try:
        yield
    except Exception as err:
        # memory/errors.py is looked up, not imported: an EstimateError exists only where the memory model ran,
        # and plain `lint` must start without the memory package (tests/test_packaging.py)
        errors = sys.modules.get("zeroadvisor.memory.errors")
        if errors is None or not isinstance(err, errors.EstimateError):
            raise
        if len(inputs.configs) == 1:
            raise UnusableConfig(f"{inputs.configs[0].display}: cannot estimate: {err}") from None
        raise UsageError(str(err)) from None


# -- lint -------------------------------------------------------------------------------------

# lint's keywords, in its order (the first bad value is the one reported); estimate, check and preflight take every
# input, in the Request's field order, which is theirs
_LINT_KEYWORDS = ("paths", "text", "config", "name", "select", "ignore", "integration", "gpus", "only_configs",
                  "deepspeed_version", "exclude", "no_default_excludes")


def lint(*paths: str | os.PathLike[str], text: str | None = None, config: Mapping[str, Any] | None = None,
         name: str | None = None, select: Sequence[str] | str | None = None,
         ignore: Sequence[str] | str | None = None, integration: str = "any", gpus: int | None = None,
         only_configs: bool = False, deepspeed_version: str | None = None, exclude: Sequence[str] | str = (),
         default_excludes: bool = True) -> LintResult:
    """Lint DeepSpeed configs: files, folders or glob patterns, or one config given as ``text`` (JSON,
    hjson, or YAML when ``name`` ends in .yaml/.yml) or as a ``config`` dict.

    ``select``/``ignore``: rules by code, name or code prefix; ``integration``: who fills "auto"
    (deepspeed, hf-trainer, accelerate, any); ``gpus``: the data-parallel world size, to check the
    batch exactly; ``deepspeed_version``: the DeepSpeed release (0.14.5), release line (0.14) or PEP 440 range
    (>=0.10,<0.17) to read the configs as (default: the pin beside each config, else the installed DeepSpeed,
    else the latest). The project configuration is not read here (the command line reads it).

    Folders are walked as the command line walks them: ``exclude`` (``--exclude``): glob patterns, relative to
    the current folder, of files and folders left out; ``default_excludes=False`` (``--no-default-excludes``):
    walk into hidden folders, virtual environments, node_modules and build output too. A file named in
    ``paths`` is always read.

    >>> zeroadvisor.lint(config={"train_batch_size": 8, "zero_optimisation": {"stage": 3}}).errors
    1
    """
    if not isinstance(default_excludes, bool):
        # a truthy text ("no") or number would otherwise decide the walk silently
        raise UsageError(f"default_excludes: expected True or False, got {default_excludes!r}")
    request = Request(Command.LINT, _LINT_KEYWORDS, paths=tuple(paths), text=text, config=config, name=name,
                      select=select, ignore=ignore, integration=integration, gpus=gpus, only_configs=only_configs,
                      deepspeed_version=deepspeed_version, exclude=exclude, no_default_excludes=not default_excludes)
    return run_lint(_build(request))


# -- estimate ---------------------------------------------------------------------------------

def estimate(config: str | os.PathLike[str] | Mapping[str, Any] | None = None, *,
             model: str | os.PathLike[str] | ModelSpec | None = None, params: int | str | None = None,
             gpus: int | None = None, gpus_per_node: int | None = None, gpu: str | None = None,
             gpu_memory: int | str | None = None, cpu_memory: int | str | None = None,
             nvme: int | str | None = None, headroom: float | str = "10%", accounting: str = "deepspeed",
             deepspeed_version: str | None = None, step_times: bool = False, trainer: str | None = None,
             training_args: str | os.PathLike[str] | None = None, **training: Any) -> EstimateResult:
    """Estimate ZeRO memory for a config (a path or a dict; None: DeepSpeed's defaults, fp16 Adam).

    ``model``: a model description or a Hugging Face config.json (path), or ``params`` ("7B", 7e9 as
    int); ``gpus``: the data-parallel world size, needed as ``zeroadvisor estimate`` needs ``--gpus`` (the
    partitions, and so the answer, depend on it; an Accelerate config's num_processes gives it too); sizes are
    byte counts or strings such as "80GiB"; ``training``: the training-shape keywords (seq_len, micro_batch,
    precision, stage, activation_checkpointing, transformers_version, ... as the flags); ``deepspeed_version``: the
    DeepSpeed release whose defaults the estimate reads (as ``lint``); ``step_times``: each option's step time too,
    as the ``estimate`` command gives it (with the machine's assumed inputs: efficiency, CPU cores, launcher);
    ``trainer``: the training method (sft, dpo, kto, orpo, cpo, grpo, rloo, ppo, reward, gkd), as ``--trainer``;
    ``training_args``: the trainer's file (a TrainingArguments, TRL, LLaMA-Factory or axolotl YAML/JSON), as
    ``--training-args``: what it says fills what the keywords leave out.

    >>> zeroadvisor.estimate(params="7B", gpus=8, gpu="A100-SXM4-80GB").verdict
    """
    if not isinstance(step_times, bool):  # as default_excludes: a truthy string is no answer
        raise UsageError(f"step_times: expected True or False, got {step_times!r}"[:200])
    check_training_keywords(training)
    return run_estimate(_build(Request(
        Command.ESTIMATE, config=config, model=model, params=params, gpus=gpus, gpus_per_node=gpus_per_node, gpu=gpu,
        gpu_memory=gpu_memory, cpu_memory=cpu_memory, nvme=nvme, headroom=headroom, accounting=accounting,
        deepspeed_version=deepspeed_version, trainer=trainer, training_args=_training_args(training_args),
        **training)), step_times=step_times)


# -- check ------------------------------------------------------------------------------------

def check(config: str | os.PathLike[str] | Mapping[str, Any], *, gpus: int | None = None,
          model: str | os.PathLike[str] | ModelSpec | None = None, params: int | str | None = None,
          gpus_per_node: int | None = None, gpu: str | None = None, gpu_memory: int | str | None = None,
          cpu_memory: int | str | None = None, nvme: int | str | None = None, headroom: float | str = "10%",
          accounting: str = "deepspeed", integration: str = "any", unit: str | None = None, name: str | None = None,
          select: Sequence[str] | str | None = None, ignore: Sequence[str] | str | None = None,
          diff: bool = False, deepspeed_version: str | None = None, trainer: str | None = None,
          training_args: str | os.PathLike[str] | None = None, launch: str | Sequence[str] | None = None,
          **training: Any) -> CheckReport:
    """Pre-flight check of one config (a path or a dict) for a model on a cluster: lint findings, the
    memory verdict and the cheapest change that fits.

    Keywords as ``estimate`` (model or params, gpus, gpu or gpu_memory, cpu_memory, nvme, headroom, the
    training shape) plus integration, unit, ``name`` (a dict's name in the report), select/ignore,
    ``diff`` (the fixes as a unified diff), ``deepspeed_version`` (as ``lint``) and ``trainer`` (the training
    method, as ``--trainer``), ``training_args`` and ``launch`` (the trainer's file and the launch command, as
    ``--training-args`` and ``--launch``: a string, or its words). ``gpus`` is needed as
    ``zeroadvisor check`` needs ``--gpus`` (an Accelerate config's num_processes or the launch command gives it
    too).

    >>> zeroadvisor.check("ds_config.json", model="config.json", gpus=8, gpu="A100-SXM4-80GB").verdict
    """
    _one_config(config)
    check_training_keywords(training)
    request = Request(Command.CHECK, config=config, model=model, params=params, gpus=gpus, gpus_per_node=gpus_per_node,
                      gpu=gpu, gpu_memory=gpu_memory, cpu_memory=cpu_memory, nvme=nvme, headroom=headroom,
                      accounting=accounting, integration=integration, unit=unit, name=name, select=select,
                      ignore=ignore, diff=diff, deepspeed_version=deepspeed_version, trainer=trainer,
                      training_args=_training_args(training_args), launch=_launch(launch), **training)
    return _one(run_check(_build(request)), config)


def _training_args(path: object) -> str | None:
    """``training_args`` as the request takes it: the path's text (a UsageError for anything else)."""
    if path is None:
        return None
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if not isinstance(text, str):
        raise UsageError(f"training_args: expected a path, got {type(path).__name__}")
    return text


def _launch(command: object) -> str | None:
    """``launch`` as the request takes it: the command line, or its words joined as a shell would split them."""
    import shlex

    if command is None or isinstance(command, str):
        return command
    if isinstance(command, Sequence) and all(isinstance(word, str) for word in command):
        return shlex.join(command)
    raise UsageError(f"launch: expected the command as a string or a list of words, got {type(command).__name__}")


def _one(run: CheckRun, config: object) -> CheckReport:
    """The report of the one config a call checks; a directory or pattern naming several is a UsageError."""
    if len(run) != 1:
        raise UsageError(f"config: {config} names {len(run)} configs; check one per call (the command line's "
                         "check takes a directory)")
    (report,) = run
    return report


def _one_config(config: object) -> None:
    if isinstance(config, (list, tuple)):
        raise UsageError("config: give one path or dict (check one config per call)")


# -- preflight ----------------------------------------------------------------------------------

class PreflightError(RuntimeError):
    """The configured run does not fit, or could not be judged (``result.fits`` is None: the verdict is unknown, or
    nothing was estimated); ``str()`` is the text report, ``result`` the PreflightResult."""

    def __init__(self, message: str, result: PreflightResult):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class PreflightResult:
    """The check (``report``), the readings it used, and notes about this node (one line each)."""

    report: CheckReport
    readings: Readings
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict | None:
        return self.report.verdict

    @property
    def fits(self) -> bool | None:
        return self.report.fits

    def text(self) -> str:
        """The text report and the notes: the PreflightError's message."""
        return self.report.report("text") + "".join(f"preflight: {note}\n" for note in self.notes)


def preflight(config: str | os.PathLike[str] | Mapping[str, Any],
              model: str | os.PathLike[str] | ModelSpec | None = None, *, params: int | str | None = None,
              gpus: int | None = None, gpus_per_node: int | None = None, gpu: str | None = None,
              gpu_memory: int | str | None = None, cpu_memory: int | str | None = None, nvme: int | str | None = None,
              headroom: float | str = "10%", warn_only: bool = False, select: Sequence[str] | str | None = None,
              ignore: Sequence[str] | str | None = None, integration: str = "any", trainer: str | None = None,
              training_args: str | os.PathLike[str] | None = None, launch: str | Sequence[str] | None = None,
              **training: Any) -> PreflightResult:
    """Check ``config`` (a path or a dict) for ``model`` on this job's hardware before loading the model.

    What is not given is read from the job (zeroadvisor/inputs/environment.py): world size, GPUs per node,
    GPU memory (torch.cuda), host RAM (/proc/meminfo). ``training``: the training-shape keywords (seq_len,
    micro_batch, precision, activation_checkpointing, ...), ``trainer`` (the training method), ``training_args`` and
    ``launch`` (the trainer's file and launch command) as for ``check``.
    Every rank runs the same check
    and raises the same error.

    Raises PreflightError (its message: the text report) when the configured stage and offload do not
    fit, and when the check could not decide: the verdict is unknown (no sequence length: activations not
    counted) or there is none (a value the memory model cannot use: no-estimate); ``result.fits`` is then
    None. With ``warn_only`` it warns (``warnings.warn``, RuntimeWarning) and returns instead: it never
    passes silently. A missing GPU memory (no CUDA here and no ``gpu``/``gpu_memory``) is a UsageError.

    Example, in the training script::

        zeroadvisor.preflight("ds_config.json", "meta-llama/Llama-3.1-8B", seq_len=4096, micro_batch=4)
        model = AutoModelForCausalLM.from_pretrained(...)
    """
    from zeroadvisor.inputs import environment

    readings = environment.read_all()
    _one_config(config)
    check_training_keywords(training)
    request = Request(Command.PREFLIGHT, config=config, model=model, params=params, gpus=gpus,
                      gpus_per_node=gpus_per_node, gpu=gpu, gpu_memory=gpu_memory, cpu_memory=cpu_memory, nvme=nvme,
                      headroom=headroom, integration=integration, select=select, ignore=ignore, trainer=trainer,
                      training_args=_training_args(training_args), launch=_launch(launch), **training)
    report = _one(run_check(_build(request, readings)), config)
    result = PreflightResult(report, readings, _node_notes(report, readings))
    if report.verdict in (Verdict.DOES_NOT_FIT, Verdict.UNKNOWN, None):  # "could not decide" is never a pass either
        judged = "" if report.verdict == Verdict.DOES_NOT_FIT else \
            f"zeroadvisor could not judge the run (verdict {report.verdict or 'none'}): "
        if not warn_only:
            raise PreflightError(judged + result.text(), result)
        warnings.warn(judged + result.text(), RuntimeWarning, stacklevel=2)
    return result


def _node_notes(report: CheckReport, readings: Readings) -> list[str]:
    """What this node's free memory says beside the verdict (which is on the totals)."""
    from zeroadvisor.units import format_bytes

    configured = report.estimate.configured if report.estimate is not None else None
    if configured is None:
        return []
    notes: list[str] = []
    # mem_get_info gives both or neither
    if readings.gpu_free is not None and readings.gpu_total is not None and configured.peak_gpu > readings.gpu_free:
        notes.append(f"this GPU has {format_bytes(readings.gpu_free)} free of {format_bytes(readings.gpu_total)} "
                     f"now and the run peaks at {format_bytes(configured.peak_gpu)}: another process holds GPU "
                     "memory")
    if readings.host_available is not None and configured.peak_host_per_node > readings.host_available:
        notes.append(f"this node has {format_bytes(readings.host_available)} of RAM available (MemAvailable) and "
                     f"the run peaks at {format_bytes(configured.peak_host_per_node)} per node")
    return notes

"""``RunInputs``: everything one run needs, typed; ``build``: the one place a run's inputs are resolved.

The command line (flags), the Python API (keywords) and ``preflight`` (keywords and the job's readings) all
call ``build``. For each input the first of these that gives it wins:

1. the flag or keyword;
2. the project configuration (``project=True``: the command line), nearest the current folder;
3. the Hugging Face Trainer's inputs: a training arguments file, a launch command (inputs/trainer.py);
4. what preflight read from the job (inputs/environment.py);
5. the fallback (inputs/settings.py), or a usage error for an input the command cannot run without.

Each value is parsed and checked once, by the parser of its kind (inputs/values.py, inputs/model.py), with a
message that names the flag, keyword or project key it came from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.model import TRAINING_INPUTS, model_and_shape
from zeroadvisor.inputs.rules import RuleChoice
from zeroadvisor.inputs.settings import DIFF_FORMATS, FORMATS, NEEDED, NEEDED_BY, fallback
from zeroadvisor.inputs.source import ConfigSource
from zeroadvisor.inputs.trainer import TrainerInputs, read_trainer
from zeroadvisor.inputs.values import KEYWORDS, PARSERS, Spelling, choice, parse
from zeroadvisor.vocab import ACCOUNTINGS, Accounting

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.inputs.environment import Readings
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import Hardware

COMMANDS = ("lint", "estimate", "check", "preflight")
MODEL_COMMANDS = ("estimate", "check", "preflight")  # a model, a training shape and a whole cluster
ADVICE_COMMANDS = ("check", "preflight")  # the advice needs the memory per GPU
# Every input a run can be given, by name (the command line's parameters, the Python API's keywords).
INPUTS: frozenset[str] = frozenset({
    *PARSERS, *TRAINING_INPUTS, "paths", "text", "config", "name", "model", "params", "select", "ignore",
    "accounting", "unit", "format", "explain", "all_options", "suggest", "diff", "fix", "only_configs",
    "training_args", "launch",
})
# Inputs that exclude each other: giving one drops the project configuration's value for all of them.
EXCLUSIVE = (("gpu", "gpu_memory"),)


@dataclass(frozen=True)
class Output:
    """How the result is shown and judged (the command line; the Python results render on request)."""

    format: str = "text"
    fail_on: str = "error"
    unit: str = "GB"
    explain: bool = False
    all_options: bool = False


@dataclass(frozen=True)
class RunInputs:
    """Everything one run needs, resolved once by :func:`build`."""

    command: str  # lint, estimate, check or preflight
    # lint: files, folders, patterns, "-" or one config in memory; estimate: none (DeepSpeed's defaults) or one;
    # check: one or more
    configs: tuple[ConfigSource, ...] = ()
    model: ModelSpec | None = None  # None: lint
    shape: TrainingShape | None = None  # None: lint (no model, so no shape)
    cluster: Cluster | None = None  # None: lint without a world size (memory/cluster.py: the one cluster type)
    accounting: Accounting = Accounting.DEEPSPEED
    integration: str = "any"
    training: TrainingArgs | None = None  # the Trainer's arguments, when a file or launch command gives them
    hardware: Hardware | None = None  # the step-time model's machine (estimate, check)
    rules: RuleChoice = field(default_factory=RuleChoice)
    output: Output = field(default_factory=Output)
    diff: bool = False  # lint, check: the fixes as a unified diff
    fix: bool = False  # lint, check: write the fixes
    only_configs: bool = False  # lint: named files are judged by content too
    notes: tuple[str, ...] = ()  # what the Trainer's inputs gave and assumed, one line each
    readings: Readings | None = None  # preflight: what was read from the job
    # check --fix/--suggest given no model: the lint part alone (the lint flow, its fixes), no memory advice
    lint_only: bool = False

    def lint_options(self) -> LintOptions:
        from zeroadvisor.lint.context import LintOptions

        return LintOptions(integration=self.integration, gpus=self.cluster.gpus if self.cluster else None,
                           training=self.training)

    def check_options(self) -> CheckOptions:
        from zeroadvisor.advisor.check import CheckOptions

        if self.model is None or self.shape is None or self.cluster is None:  # build() refuses a check without them
            raise ValueError("check options need the model and the cluster")
        return CheckOptions(model=self.model, shape=self.shape, cluster=self.cluster, accounting=self.accounting,
                            integration=self.integration, unit=self.output.unit, training=self.training,
                            hardware=self.hardware)


def build(command: str, given: Mapping[str, Any], *, keywords: Mapping[str, Any] | None = None,
          spelling: Spelling = KEYWORDS, project: bool = False, readings: Readings | None = None) -> RunInputs:
    """The run's inputs from ``given`` (input name -> value as given: flag text, a Python value; None or empty:
    not given) and ``keywords`` (the Python API's training-shape keywords, TRAINING_INPUTS).

    ``spelling`` names the inputs in messages (flags or keywords); ``project``: read the project configuration;
    ``readings``: preflight's. Bad input raises UsageError, ProjectConfigError, ModelError or TrainerInputError.
    """
    if command not in COMMANDS:
        raise ValueError(f"unknown command {command!r}")
    unknown = sorted(set(given) - INPUTS) or sorted(set(keywords or ()) - set(TRAINING_INPUTS))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}; the training shape takes {', '.join(TRAINING_INPUTS)}")
    values = {**given, **(keywords or {})}
    for name, value in values.items():
        if _given(value):
            values[name] = parse(name, spelling.label(name), value)
    both = [group for group in EXCLUSIVE if all(_given(values.get(name)) for name in group)]
    if both:
        first, second = both[0]
        raise UsageError(f"give {spelling.ask(second)} or {spelling.ask(first)}, not both")
    if project:
        _from_project(command, values)
    if readings is not None:
        _from_readings(values, readings)
    trainer = read_trainer(values.get("training_args"), values.get("launch"))
    lint_only = command == "check" and _fixes_only(values, trainer)
    # check with a launch command or arguments file: those may still give the GPU count
    deferred = ("gpus",) if command == "check" and trainer is not None else ()
    if not lint_only:
        _refuse_missing(command, values, spelling, project, deferred)
    notes = _from_trainer(values, trainer, spelling) if trainer is not None else []
    configs = _configs(command, values, spelling)
    if trainer is not None and deferred and values.get("gpus") is None and not lint_only:
        why = f": {trainer.world_from}" if trainer.world_from else ""
        raise UsageError(f"give {spelling.ask('gpus', 'N')} (or the launch command after --){why}")
    _refuse_fix_without_file(command, values, configs, spelling)
    return _assemble(command, values, spelling, project, trainer, configs, tuple(notes), readings, lint_only)


def _fixes_only(values: dict[str, Any], trainer: TrainerInputs | None) -> bool:
    """check asked to fix (--fix) or show the fixes (--suggest) and given no model (nor a Trainer file naming one):
    there is no memory estimate without a model, so the lint part runs alone, on its own fixes."""
    if not (values.get("fix") or values.get("suggest")):
        return False
    named = trainer is not None and bool(trainer.training.model)
    return not (_given(values.get("model")) or _given(values.get("params")) or named)


def _refuse_fix_without_file(command: str, values: dict[str, Any], configs: tuple[ConfigSource, ...],
                             spelling: Spelling) -> None:
    """lint --fix writes files: standard input and text in memory have none (--diff shows their fixes); and --fix
    with --diff is one too many. (check keeps its result and says why its fixes were not written: flows.)"""
    if command != "lint" or not values.get("fix"):
        return
    if values.get("diff"):
        raise UsageError(f"give {spelling.ask('fix')} (write the fixes) or {spelling.ask('diff')} (show them), not "
                         "both")
    unwritable = next((source for source in configs if source.stdin or source.text is not None), None)
    if unwritable is not None:
        raise UsageError(f"{spelling.ask('fix')} writes the fixed files and {unwritable.display} is not one; "
                         f"{spelling.ask('diff')} shows the fixes without writing")


def _given(value: Any) -> bool:
    return value is not None and not (isinstance(value, (list, tuple)) and not value)


def _from_project(command: str, values: dict[str, Any]) -> None:
    """What no flag gave, from the project configuration nearest the current folder (only the inputs this
    command takes: the keys of ``values``)."""
    from zeroadvisor.config.project import ProjectConfigError
    from zeroadvisor.inputs import project

    project.forget()  # each run reads the files as they are now
    found = project.for_run()
    if found is None:
        return
    config, configured = found
    given = {name for name, value in values.items() if _given(value)}
    held = {name for group in EXCLUSIVE if given & set(group) for name in group}
    for name, value in configured.items():
        if name not in values or name in given or name in held:
            continue
        if name == "format" and value not in FORMATS[command]:
            raise ProjectConfigError(f"{config.path}: format {value!r} is not one of {command}'s: "
                                     f"{', '.join(FORMATS[command])}")
        values[name] = value


def _from_readings(values: dict[str, Any], readings: Readings) -> None:
    """preflight: the world size, GPUs per node, GPU memory and host RAM the job has, where not given."""
    if values.get("gpus") is None:
        values["gpus"] = readings.world_size or 1
    if values.get("gpus_per_node") is None:
        values["gpus_per_node"] = readings.local_world_size
    if values.get("gpu") is None and values.get("gpu_memory") is None:
        if readings.gpu_total is None:
            raise UsageError("preflight: no GPU memory to check against: CUDA is not available here; "
                             "pass gpu='A100-SXM4-80GB' or gpu_memory='80GiB'")
        values["gpu_memory"] = parse("gpu_memory", "preflight: the GPU's memory", readings.gpu_total)
    if values.get("cpu_memory") is None and readings.host_total is not None:
        values["cpu_memory"] = parse("cpu_memory", "preflight: the node's MemTotal", readings.host_total)


def _refuse_missing(command: str, values: dict[str, Any], spelling: Spelling, project: bool,
                    deferred: tuple[str, ...]) -> None:
    """A value the command cannot run without (settings.NEEDED_BY) that nobody gave is a usage error; ``deferred``:
    those another input (a launch command) may still give."""
    for name in NEEDED_BY.get(command, ()):
        if values.get(name) is not None or name in deferred:
            continue
        from zeroadvisor.config.project import CLUSTER_KEYS

        key = next((k for k, n in CLUSTER_KEYS.items() if n == name), name)
        where = f" (or {key} under [tool.zeroadvisor.cluster] in pyproject.toml)" if project else ""
        raise UsageError(f"give {spelling.ask(name)}{where}")


def _setting(command: str, values: dict[str, Any], name: str, spelling: Spelling) -> Any:
    """The value given (by a flag, keyword, the project configuration, ...), else the fallback (settings.py)."""
    value = values.get(name)
    if value is None:
        default = fallback(command, name)
        if default is not None and default is not NEEDED:
            value = parse(name, spelling.label(name), default)
    return value


def _from_trainer(values: dict[str, Any], trainer: TrainerInputs, spelling: Spelling) -> list[str]:
    """What the Trainer's inputs give where the flags, keywords and project configuration left it out (only the
    inputs this command takes); the notes on what was read and assumed."""
    notes = list(trainer.notes)
    training = trainer.training

    def fill(name: str, value: Any) -> bool:
        if name not in values or _given(values[name]) or value is None:
            return False
        values[name] = value
        return True

    if "config" in values and not _given(values["config"]) and isinstance(training.deepspeed, dict):
        raise UsageError(f"{training.source}: the DeepSpeed config is given inline; save it as a file and give its "
                         "path")
    fill("config", training.deepspeed)
    world = trainer.world
    if fill("gpus", world):
        notes.append(f"world size {world} from the launch command ({trainer.world_from})")
    elif world is not None and values.get("gpus") not in (None, world):
        notes.append(f"{spelling.label('gpus')} {values['gpus']} used; the launch command runs {world} process(es) "
                     f"({trainer.world_from})")
    if values.get("params") is None:
        fill("model", training.model or None)
    if fill("seq_len", training.sequence_length or None):
        notes.append(f"sequence length {training.sequence_length} from {training.sequence_key}")
    fill("activation_checkpointing", trainer.checkpointing)
    fill("launcher", trainer.launcher)  # the step time's CPU optimizer threads (hardware/machine.py)
    return notes


def _configs(command: str, values: dict[str, Any], spelling: Spelling) -> tuple[ConfigSource, ...]:
    name = values.get("name")
    if command == "lint":
        given = [key for key in ("paths", "text", "config") if _given(values.get(key))]
        if len(given) != 1:
            raise UsageError("give paths, text= or config=: exactly one of them")
        if given == ["text"]:
            return (ConfigSource.in_memory(values["text"], name),)
        if given == ["config"]:
            return (ConfigSource.mapping(values["config"], name),)
        return tuple(ConfigSource.path(path, dash_is_stdin=True) for path in values["paths"])
    config = values.get("config")
    if command == "estimate":
        return () if config is None else (ConfigSource.given(config, name),)
    configs = list(config) if isinstance(config, (list, tuple)) else [] if config is None else [config]
    if not configs:
        raise UsageError(f"give {spelling.ask('config')}, or the launch command after -- (its --deepspeed names the "
                         "config)")
    return tuple(ConfigSource.given(each, name) for each in configs)


def _assemble(command: str, values: dict[str, Any], spelling: Spelling, project: bool,
              trainer: TrainerInputs | None, configs: tuple[ConfigSource, ...], notes: tuple[str, ...],
              readings: Readings | None, lint_only: bool = False) -> RunInputs:
    from zeroadvisor.units import FORMAT_UNITS

    model: ModelSpec | None = None
    shape: TrainingShape | None = None
    cluster, hardware, accounting = None, None, Accounting.DEEPSPEED
    if command in MODEL_COMMANDS and not lint_only:
        model, shape = model_and_shape(values.get("model"), values.get("params"), spelling=spelling,
                                       **{key: values.get(key) for key in TRAINING_INPUTS})
        cluster = _cluster(command, values, spelling)
        hardware = _hardware(values, cluster)
        accounting = Accounting(choice(spelling.label("accounting"),
                                       _setting(command, values, "accounting", spelling), ACCOUNTINGS))
    elif values.get("gpus") is not None:
        from zeroadvisor.memory.cluster import Cluster

        cluster = Cluster(gpus=values["gpus"])  # lint: the world size, to check the batch exactly
    integration = _setting(command, values, "integration", spelling)
    if command == "check" and trainer is not None and integration == "any":
        integration = "hf-trainer"  # the Trainer reads the config
    output = Output(format=choice(spelling.label("format"), _setting(command, values, "format", spelling),
                                  FORMATS[command]),
                    fail_on=_setting(command, values, "fail_on", spelling),
                    unit=choice(spelling.label("unit"), _setting(command, values, "unit", spelling), FORMAT_UNITS),
                    explain=bool(values.get("explain")), all_options=bool(values.get("all_options")))
    rules = RuleChoice(_references(values.get("select")), _references(values.get("ignore")),
                       lint_only=command == "lint", project=project)
    if lint_only and output.format in DIFF_FORMATS:
        raise UsageError(f"{spelling.label('format')} {output.format} shows the memory advice: give "
                         f"{spelling.ask('model')} (or {spelling.ask('params')}), {spelling.ask('gpus', 'N')} and "
                         f"{spelling.ask('gpu')} (or {spelling.ask('gpu_memory')})")
    diff = bool(values.get("suggest") or values.get("diff")) or (command == "check" and output.format in DIFF_FORMATS)
    return RunInputs(command, configs, model, shape, cluster, accounting, integration,
                     trainer.training if trainer is not None else None, hardware, rules, output, diff,
                     bool(values.get("fix")), bool(values.get("only_configs")), notes, readings, lint_only)


def _references(value: Any) -> tuple[str, ...]:
    """--select/--ignore (given once or more) or select=/ignore= (a string or a list) as a tuple."""
    if not _given(value):
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def _cluster(command: str, values: dict[str, Any], spelling: Spelling) -> Cluster:
    from zeroadvisor.memory.cluster import Cluster

    if command in ADVICE_COMMANDS and values.get("gpu_memory") is None and values.get("gpu") is None:
        raise UsageError(f"give the memory per GPU: {spelling.ask('gpu_memory', '80GiB')} or "
                         f"{spelling.ask('gpu', 'A100-SXM4-80GB')}")
    return Cluster(gpus=values["gpus"], gpus_per_node=values.get("gpus_per_node"), gpu_memory=values.get("gpu_memory"),
                   cpu_memory=values.get("cpu_memory"), nvme=values.get("nvme"),
                   headroom=_setting(command, values, "headroom", spelling), gpu=values.get("gpu"))


def _hardware(values: dict[str, Any], cluster: Cluster) -> Hardware:
    """The step-time model's machine: the named card and the machine inputs given; each one not given keeps its
    stated default and is listed in ``defaulted`` (hardware/machine.py DEFAULTS)."""
    from zeroadvisor.hardware.machine import DEFAULTS, Hardware
    from zeroadvisor.memory.assumed import HARDWARE_INPUTS

    given: dict[str, Any] = {}
    defaulted: list[str] = []
    for name in DEFAULTS:  # a Hardware field; the input (flag, keyword) that gives it is HARDWARE_INPUTS'
        value = values.get(HARDWARE_INPUTS[name])
        if value is None:
            defaulted.append(name)
        else:
            given[name] = value
    return Hardware(cluster.gpu, defaulted=tuple(defaulted), **given)

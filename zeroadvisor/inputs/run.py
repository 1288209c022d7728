"""``RunInputs``: everything one run needs, typed; ``build``: the one place a run's inputs are resolved.

The command line (its flags) and the Python API (its keywords; ``preflight`` with the job's readings) each make a
typed Request (inputs/request.py) and call ``build`` on it. For each input the first of these that gives it wins:

1. the request (a flag or keyword);
2. the project configuration (``project=True``: the command line), nearest the current folder;
3. the Hugging Face Trainer's inputs: a training arguments file, a launch command (inputs/trainer.py);
4. what preflight read from the job (inputs/environment.py);
5. the fallback (inputs/settings.py), or a usage error for an input the command cannot run without.

Each value is parsed and checked once, by the parser of its kind (inputs/values.py, inputs/model.py), with a
message that names the flag, keyword or project key it came from.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

from zeroadvisor.config.excludes import Excludes
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.model import PEFT_INPUTS, SHAPE_INPUTS, TRAINING_INPUTS, model_and_shape
from zeroadvisor.inputs.request import ConfigGiven, Request
from zeroadvisor.inputs.rules import RuleChoice
from zeroadvisor.inputs.settings import DIFF_FORMATS, FORMATS, NEEDED, NEEDED_BY, FailOn, fallback
from zeroadvisor.inputs.source import ConfigSource
from zeroadvisor.inputs.trainer import TrainerInputs, read_trainer
from zeroadvisor.inputs.values import KEYWORDS, PARSERS, Spelling, choice, gpu, gpus, output_format, parse
from zeroadvisor.lint.context import Integration
from zeroadvisor.report.formats import OutputFormat
from zeroadvisor.units import DEFAULT_UNIT
from zeroadvisor.vocab import ACCOUNTINGS, TRAINER_NAMES, Accounting, TrainerFamily

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions
    from zeroadvisor.config.launch import Override
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.config.openrlhf_config import OpenRLHFFlags
    from zeroadvisor.config.project import ProjectConfig
    from zeroadvisor.config.shipped_copies import ShippedConfig
    from zeroadvisor.config.trainer_pins import TrainerPin
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.hardware.table import GpuSpec
    from zeroadvisor.inputs.environment import Readings
    from zeroadvisor.inputs.release import ReleaseChoice
    from zeroadvisor.jsontypes import JSONObject
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import Hardware
    from zeroadvisor.vocab import TrainerChoice

MODEL_COMMANDS = (Command.ESTIMATE, Command.CHECK, Command.PREFLIGHT)  # a model, a training shape and a cluster
ADVICE_COMMANDS = (Command.CHECK, Command.PREFLIGHT)  # the advice needs the memory per GPU
# What the files may say when no flag does: the world size (a launch command, an Accelerate config).
WORLD_INPUTS = ("gpus",)
# The builder's working table: each input the request's interface takes -> its value, as given until parsed (a
# Python API value may be of any type: each parser checks it), then filled from the files, the project
# configuration and the fallbacks.
Values = dict[str, object]
# Inputs that exclude each other: giving one drops the project configuration's value for all of them.
EXCLUSIVE = (("gpu", "gpu_memory"),)


@dataclass(frozen=True)
class Output:
    """How the result is shown and judged (the command line; the Python results render on request)."""

    format: OutputFormat = OutputFormat.TEXT
    fail_on: FailOn = FailOn.ERROR
    unit: str = DEFAULT_UNIT
    explain: bool = False
    verbose: bool = False
    all_options: bool = False


@dataclass(frozen=True)
class RunInputs:
    """Everything one run needs, resolved once by :func:`build`."""

    command: Command
    # lint: files, folders, patterns, "-" or one config in memory; estimate: none (DeepSpeed's defaults) or one;
    # check: one or more
    configs: tuple[ConfigSource, ...] = ()
    model: ModelSpec | None = None  # None: lint
    shape: TrainingShape | None = None  # None: lint (no model, so no shape)
    cluster: Cluster | None = None  # None: lint without a world size (memory/cluster.py: the one cluster type)
    accounting: Accounting = Accounting.DEEPSPEED
    integration: Integration = Integration.ANY
    training: TrainingArgs | None = None  # the Trainer's arguments, when a file or launch command gives them
    hardware: Hardware | None = None  # the step-time model's machine (estimate, check)
    rules: RuleChoice = field(default_factory=RuleChoice)
    output: Output = field(default_factory=Output)
    diff: bool = False  # lint, check: the fixes as a unified diff
    fix: bool = False  # lint, check: write the fixes
    only_configs: bool = False  # lint: named files are judged by content too
    notes: tuple[str, ...] = ()  # what the Trainer's inputs gave and assumed, one line each
    readings: Readings | None = None  # preflight: what was read from the job
    # check of the config an ``accelerate launch --config_file`` names: the command's options over its keys
    accelerate_config: str | None = None
    overrides: tuple[Override, ...] = ()
    # check --fix/--suggest given no model: the lint part alone (the lint flow, its fixes), no memory advice
    lint_only: bool = False
    # the DeepSpeed release(s) asked for (--deepspeed-version, deepspeed_version=, the project configuration),
    # with the words naming where it came from; None: each config's own pin decides (release_for)
    deepspeed_version: str | None = None
    deepspeed_version_label: str = "--deepspeed-version"
    # what folder walks leave out (config/excludes.py): --exclude, the project configuration's exclude, defaults
    excludes: Excludes = field(default_factory=Excludes)

    def release_for(self, source: ConfigSource | None) -> ReleaseChoice:
        """The releases one config is read as (inputs/release.py): the request, else its pin, else the installed
        DeepSpeed, else the latest."""
        from zeroadvisor.inputs.release import choose_release

        path = source.name if source is not None and source.is_file else None
        return choose_release(flag=self.deepspeed_version, config_path=path, flag_name=self.deepspeed_version_label)

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


def build(request: Request, *, spelling: Spelling = KEYWORDS, project: bool = False,
          readings: Readings | None = None) -> RunInputs:
    """The run's inputs from ``request`` (what the command line or the Python API was given).

    ``spelling`` names the inputs in messages (flags or keywords); ``project``: read the project configuration;
    ``readings``: preflight's. Bad input raises UsageError, ProjectConfigError, ModelError or TrainerInputError.
    """
    command = request.command
    found = _project() if project else None
    declared: tuple[GpuSpec, ...] = ()  # a --gpu name may be a card the project configuration declares
    if found is not None:
        from zeroadvisor.inputs.project import cards

        declared = cards(found[0])
    # the working table: each input this request's interface takes -> its value, filled in the order above
    values = {name: _plain(name, getattr(request, name)) for name in request.inputs()}
    for name, value in values.items():
        # an empty list is "not given" for the list inputs (select, paths), and a bad value for the rest
        if _given(value) or (name in PARSERS and value is not None):
            label = spelling.label(name)
            values[name] = gpu(label, value, declared) if name == "gpu" else parse(name, label, value)
    both = [group for group in EXCLUSIVE if all(_given(values.get(name)) for name in group)]
    if both:
        first, second = both[0]
        raise UsageError(f"give {spelling.ask(second)} or {spelling.ask(first)}, not both")
    if found is not None:
        if values.get("trainer") is None and "trainer" in found[0].origins:  # named as the file sets it
            values["trainer_from"] = found[0].origins["trainer"]
        _from_project(command, values, found)
    if readings is not None:
        _from_readings(values, readings)
    # file names and a command line, as the command line (or the project configuration) gives text
    trainer = read_trainer(cast("str | None", values.get("training_args")), cast("str | None", values.get("launch")))
    lint_only = command is Command.CHECK and _fixes_only(values, trainer)
    # a launch command or an Accelerate config may still give the world size: asked for once all were read
    deferred = WORLD_INPUTS if command in MODEL_COMMANDS else ()
    if not lint_only:
        _refuse_missing(command, values, spelling, project, deferred)
    configs, notes = _from_files(command, values, spelling, project, trainer, need_world=not lint_only)
    _refuse_fix_without_file(command, values, configs, spelling)
    if command in MODEL_COMMANDS:  # only an estimate reads them (lint does not import the memory model)
        values["alloc_conf"], alloc_notes = alloc_conf(trainer, pin_start=_pin_start(trainer, configs))
        notes += alloc_notes
        notes += _attention_from_trainer(values, trainer, _pin_start(trainer, configs))
        values["dataloader_workers"] = dataloader_workers(trainer)
    inputs = _assemble(command, values, spelling, project, trainer, configs, tuple(notes), readings, lint_only)
    return replace(inputs, excludes=_excludes(values, found[0] if found is not None else None, spelling))


def dataloader_workers(trainer: TrainerInputs | None) -> int:
    """The data-loader workers each rank forks (the Trainer's dataloader_num_workers; 0 without training arguments:
    TrainingArguments' default), refused by the key that gave it where no machine runs that many."""
    from zeroadvisor.memory.cluster import MAX_DATALOADER_WORKERS

    if trainer is None:
        return 0
    workers = trainer.training.get("dataloader_num_workers")
    if not 0 <= workers <= MAX_DATALOADER_WORKERS:
        raise UsageError(f"{trainer.training.label('dataloader_num_workers')}: {workers} data-loader workers; give 0 "
                         f"to {MAX_DATALOADER_WORKERS}")
    return workers


def alloc_conf(trainer: TrainerInputs | None, environ: Mapping[str, str] | None = None,
               pin_start: str | None = None) -> tuple[str | None, list[str]]:
    """The run's PYTORCH_CUDA_ALLOC_CONF (memory/allocator.py) and the note on where it came from: what the trainer's
    own launcher sets (config/launch.py CliEnv: it overrides the environment), unless the trainer's pin nearest
    ``pin_start`` is a release before it does; else the launch command's VAR=value prefix, else this process's
    environment (the job's, for preflight; the shell's that runs the launch command, for the CLI); None where
    nothing sets it."""
    from packaging.version import Version  # only a model command reads the allocator

    from zeroadvisor.config.method import release_of
    from zeroadvisor.config.trainer_pins import find_trainer_pin
    from zeroadvisor.vocab import ALLOC_CONF_ENV as ENV

    cli = trainer.cli_env if trainer is not None else None
    if cli is not None and ENV in dict(cli.values):
        value = dict(cli.values)[ENV]
        pin = find_trainer_pin(pin_start or os.curdir, cli.family)
        release = release_of(pin.version) if pin is not None else None
        if release is None or release >= Version(cli.since):
            said = f"{cli.family} {pin.version} ({pin.origin})" if pin is not None else \
                f"{cli.family}'s release not pinned: {cli.since} or later taken"
            return value, [f"{ENV}={value}: set by {cli.family}'s launcher from {cli.since} on; {said}"]
    given = dict(trainer.env) if trainer is not None else {}
    if ENV in given:
        return given[ENV], []
    return (os.environ if environ is None else environ).get(ENV), []



# OpenRLHF loads the models with attn_implementation "eager" unless --flash_attn, up to v0.8.9 (openrlhf/models/
# actor.py Actor.__init__: ``"flash_attention_2" if use_flash_attention_2 else "eager"``, v0.5.1 to v0.8.9.post1);
# from v0.8.10 --attn_implementation defaults to flash_attention_2 (cli/train_*.py argparse)
OPENRLHF_FLASH_DEFAULT = "0.8.10"


def _attention_from_trainer(values: Values, trainer: TrainerInputs | None, pin_start: str | None) -> list[str]:
    """--flash-attention as the trainer's file or command says (config/training_args.py ATTENTION_NAMES), where no
    flag or model description gave it; OpenRLHF's silence by its pinned release (OPENRLHF_FLASH_DEFAULT). The note
    on what was taken."""
    if trainer is None or "flash_attention" not in values or _given(values["flash_attention"]):
        return []
    training = trainer.training
    if training.attention is not None:
        values["flash_attention"] = training.attention
        kind = "a fused kernel (no s x s scores kept)" if training.attention else "eager (the s x s scores kept)"
        return [f"attention {kind} from {training.attention_from}"]
    if training.project != "openrlhf":
        return []
    from packaging.version import Version

    from zeroadvisor.config.method import release_of
    from zeroadvisor.config.trainer_pins import find_trainer_pin
    from zeroadvisor.vocab import TrainerFamily

    pin = find_trainer_pin(pin_start or os.curdir, TrainerFamily.OPENRLHF)
    release = release_of(pin.version) if pin is not None else None
    said = f"OpenRLHF {pin.version} ({pin.origin})" if pin is not None else "OpenRLHF's release not pinned"
    if release is not None and release < Version(OPENRLHF_FLASH_DEFAULT):
        values["flash_attention"] = False
        return [(f"attention eager: {said} loads the models with \"eager\" without --flash_attn "
                "(openrlhf/models/actor.py)")]
    return [(f"attention flash_attention_2: {said}, whose --attn_implementation defaults to it from "
            f"{OPENRLHF_FLASH_DEFAULT}; before that, without --flash_attn, the models load eager attention")]


def _plain(name: str, value: object) -> object:
    """A shape input as the model description's reader takes it from every source (its value: "bf16", 3)."""
    return value.value if name in SHAPE_INPUTS and isinstance(value, Enum) else value


def _excludes(values: Values, config: ProjectConfig | None, spelling: Spelling) -> Excludes:
    """What folder walks leave out: --exclude (relative to the current folder), the project configuration's
    exclude (relative to its folder), and the defaults unless --no-default-excludes."""
    from zeroadvisor.config.excludes import ExcludePattern, excludes_from

    given = values.get("exclude")
    given = () if given is None else given  # 0, False or {} are no patterns: refused below, never read as none
    patterns = (given,) if isinstance(given, str) else tuple(given) if isinstance(given, (list, tuple)) else None
    if patterns is None or not all(isinstance(pattern, str) for pattern in patterns):
        raise UsageError(f"{spelling.label('exclude')}: expected glob patterns (a string or a list of strings), "
                         f"got {given!r}")
    excludes = excludes_from(patterns, os.curdir, defaults=not values.get("no_default_excludes"))
    if config is None or not config.exclude:
        return excludes
    configured = tuple(ExcludePattern(pattern, config.root) for pattern in config.exclude if pattern.strip("/"))
    return replace(excludes, patterns=configured + excludes.patterns)


def _fixes_only(values: Values, trainer: TrainerInputs | None) -> bool:
    """check asked to fix (--fix) or show the fixes (--suggest) and given no model (nor a Trainer file naming one):
    there is no memory estimate without a model, so the lint part runs alone, on its own fixes."""
    if not (values.get("fix") or values.get("suggest")):
        return False
    named = trainer is not None and bool(trainer.training.model)
    return not (_given(values.get("model")) or _given(values.get("params")) or named)


def _refuse_fix_without_file(command: Command, values: Values, configs: tuple[ConfigSource, ...],
                             spelling: Spelling) -> None:
    """lint --fix writes files: standard input and text in memory have none (--diff shows their fixes); and --fix
    with --diff is one too many. (check keeps its result and says why its fixes were not written: flows.)"""
    if command is not Command.LINT or not values.get("fix"):
        return
    if values.get("diff"):
        raise UsageError(f"give {spelling.ask('fix')} (write the fixes) or {spelling.ask('diff')} (show them), not "
                         "both")
    unwritable = next((source for source in configs if source.stdin or source.text is not None), None)
    if unwritable is not None:
        raise UsageError(f"{spelling.ask('fix')} writes the fixed files and {unwritable.display} is not one; "
                         f"{spelling.ask('diff')} shows the fixes without writing")


def _from_files(command: Command, values: Values, spelling: Spelling, project: bool,
                trainer: TrainerInputs | None, need_world: bool = True) -> tuple[tuple[ConfigSource, ...], list[str]]:
    """The configs, and what the user's files say that no flag did: the Trainer's inputs, then the world size
    of the Accelerate configs checked; one error for all that is still missing. The notes on what was taken."""
    notes = _from_trainer(values, trainer, spelling) if trainer is not None else []
    if command is Command.CHECK and not _given(values.get("config")):  # one error for all that is missing
        world = f"; and {_missing_world(trainer, spelling, project)}" if values.get("gpus") is None else ""
        raise UsageError(_missing_config(trainer, spelling) + world)
    configs = _configs(command, values, spelling)
    accelerate = _accelerate_configs(configs) if command in MODEL_COMMANDS else None
    if command in MODEL_COMMANDS:
        notes += _sequence_parallel_from_accelerate(values, trainer, accelerate)
    if command in MODEL_COMMANDS and values.get("gpus") is None:
        notes += _from_accelerate_configs(values, accelerate)
        if values.get("gpus") is None and need_world:
            raise UsageError(_missing_world(trainer, spelling, project))
    return configs, notes


def _given(value: object) -> bool:
    return value is not None and not (isinstance(value, (list, tuple)) and not value)


def _project() -> tuple[ProjectConfig, dict[str, object]] | None:
    """The project configuration nearest the current folder and its values parsed, read afresh."""
    from zeroadvisor.inputs import project

    project.forget()  # each run reads the files as they are now
    return project.for_run()


def _from_project(command: Command, values: Values, found: tuple[ProjectConfig, dict[str, object]]) -> None:
    """What no flag gave, from the project configuration nearest the current folder (only the inputs this
    command takes: the keys of ``values``)."""
    from zeroadvisor.config.project import PATH_KEYS, ProjectConfigError

    config, configured = found
    given = {name for name, value in values.items() if _given(value)}
    held = {name for group in EXCLUSIVE if given & set(group) for name in group}
    for name, value in configured.items():
        if name not in values or name in given or name in held:
            continue
        if name == "format" and value not in FORMATS[command]:
            raise ProjectConfigError(f"{config.path}: format {str(value)!r} is not one of {command}'s: "
                                     f"{', '.join(FORMATS[command])}")
        if name in ("training_args", "launch") and not isinstance(value, str):
            raise ProjectConfigError(f"{config.origins.get(name, config.path)}: expected text, got "
                                     f"{type(value).__name__}")
        relative = name in PATH_KEYS and isinstance(value, str) and not os.path.isabs(value)
        values[name] = os.path.join(config.root, str(value)) if relative else value  # from the configuration's folder


def _from_readings(values: Values, readings: Readings) -> None:
    """preflight: the world size, GPUs per node, GPU memory and host RAM the job has, where not given."""
    source = readings.world_size_from or "WORLD_SIZE"
    if values.get("gpus") is None:  # within the cluster's bounds, as the gpus keyword
        values["gpus"] = parse("gpus", f"preflight: the world size ({source})", readings.world_size or 1)
    if values.get("gpus_per_node") is None:
        values["gpus_per_node"] = parse("gpus_per_node", "preflight: LOCAL_WORLD_SIZE", readings.local_world_size)
    if values.get("gpu") is None and values.get("gpu_memory") is None:
        if readings.gpu_total is None:
            raise UsageError("preflight: no GPU memory to check against: CUDA is not available here; "
                             "pass gpu='A100-SXM4-80GB' or gpu_memory='80GiB'")
        values["gpu_memory"] = parse("gpu_memory", "preflight: the GPU's memory", readings.gpu_total)
    if values.get("cpu_memory") is None and readings.host_total is not None:
        values["cpu_memory"] = parse("cpu_memory", "preflight: the node's MemTotal", readings.host_total)


def _refuse_missing(command: Command, values: Values, spelling: Spelling, project: bool,
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


def _missing_world(trainer: TrainerInputs | None, spelling: Spelling, project: bool) -> str:
    """The one error for a run whose world size nothing gave: what is missing and what would give it."""
    where = " (or gpus under [tool.zeroadvisor.cluster] in pyproject.toml)" if project else ""
    if trainer is None or not trainer.world_from:
        return f"give {spelling.ask('gpus')}{where}"
    alternative = f", or {trainer.world_missing}" if trainer.world_missing else ""
    return (f"the world size is missing: {trainer.world_from}; give {spelling.ask('gpus', 'N')}{where}"
            f"{alternative}")


def _missing_config(trainer: TrainerInputs | None, spelling: Spelling) -> str:
    """What to give for a check without a config: CONFIG, or what names it in the launch command."""
    if trainer is not None and trainer.builds_config:  # OpenRLHF: no file to read, and none is guessed
        return (f"{trainer.builds_config}: give {spelling.ask('config')} (the config it builds, saved as JSON: "
                "zeroadvisor checks a config as DeepSpeed reads it, not one rebuilt from the flags)")
    if trainer is not None and trainer.world_from:
        return (f"give {spelling.ask('config')}, or --deepspeed FILE in the launch command's script arguments "
                "(accelerate launch: --config_file FILE)")
    return f"give {spelling.ask('config')}, or the launch command after -- (its --deepspeed names the config)"


def _accelerate_configs(configs: tuple[ConfigSource, ...]) -> list[tuple[str, JSONObject]] | None:
    """Each Accelerate config among those checked, read once: (its display name, its data); None where a config
    cannot be read (the check reports it itself, and nothing is taken from the others). Standard input is read
    once, by the check."""
    from zeroadvisor.config.reader import InputError
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.kind import ACCELERATE, kind_of_data

    out: list[tuple[str, JSONObject]] = []
    for source in configs:
        if source.stdin:
            continue
        try:
            data = source.read().data
        except (InputError, ParseError):
            return None
        if kind_of_data(data) == ACCELERATE and isinstance(data, dict):
            out.append((source.display, data))
    return out


def _sequence_parallel_from_accelerate(values: Values, trainer: TrainerInputs | None,
                                       accelerate: list[tuple[str, JSONObject]] | None) -> list[str]:
    """The Ulysses degree of the Accelerate config the run launches with (a config checked, else the launch
    command's --config_file: deepspeed/accelerate_map.py sequence_parallel), where nothing gave one; the note."""
    from zeroadvisor.config.reader import InputError, read_document
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed.accelerate_map import SP_SIZE, sequence_parallel

    if accelerate is None or "sequence_parallel" not in values or _given(values["sequence_parallel"]):
        return []
    found: dict[int, str] = {}
    for name, data in accelerate:
        degree = sequence_parallel(data)
        if degree is not None:
            found.setdefault(degree, name)
    launched = trainer.accelerate_config if trainer is not None else None
    if not accelerate and launched and os.path.isfile(launched):  # the config checked is not the launcher's YAML
        try:
            degree = sequence_parallel(read_document(launched, launched).data)
        except (InputError, ParseError):
            degree = None
        if degree is not None:
            found[degree] = launched
    if len(found) != 1:  # none, or configs that disagree: each is checked as it is
        return []
    (degree, name), = found.items()
    values["sequence_parallel"] = parse("sequence_parallel", f"{SP_SIZE} in {name}", degree)
    return [f"sequence parallel {degree} from {SP_SIZE} in {name} (Accelerate registers DeepSpeed's Ulysses)"]


def _from_accelerate_configs(values: Values, accelerate: list[tuple[str, JSONObject]] | None) -> list[str]:
    """The world size (num_processes, the total across num_machines) of the Accelerate configs checked, where
    nothing else gave it and every such config states the same; the note saying so."""
    from zeroadvisor.deepspeed.accelerate_map import processes

    if accelerate is None:  # a config that cannot be read: the world size is asked for
        return []
    worlds: dict[tuple[int | None, int, int | None], str] = {}
    for name, data in accelerate:
        launch = processes(data)
        worlds.setdefault((launch.world_size, launch.num_machines, launch.per_node), name)
    if len(worlds) != 1:
        return []
    (world, machines, per_node), name = next(iter(worlds.items()))
    if world is None:
        return []
    label = f"num_processes in {name}"  # within the cluster's bounds, as --gpus
    values["gpus"] = parse("gpus", label, world)
    if machines > 1 and values.get("gpus_per_node") is None:
        values["gpus_per_node"] = parse("gpus_per_node", label, per_node)
    over = f" over {machines} machines, {per_node} each" if machines > 1 else ""
    return [f"world size {world} from num_processes in {name}{over}"]


def _unit(values: Values, accounting: Accounting) -> object:
    """The unit given (a flag or a keyword), else the accounting's (units.py unit_for)."""
    from zeroadvisor.units import unit_for

    return values.get("unit") or unit_for(accounting)


def _setting(command: Command, values: Values, name: str, spelling: Spelling) -> object:
    """The value given (by a flag, keyword, the project configuration, ...), else the fallback (settings.py)."""
    value = values.get(name)
    if value is None:
        default = fallback(command, name)
        if default is not None and default is not NEEDED:
            value = parse(name, spelling.label(name), default)
    return value


def _from_trainer(values: Values, trainer: TrainerInputs, spelling: Spelling) -> list[str]:
    """What the Trainer's inputs give where the flags, keywords and project configuration left it out (only the
    inputs this command takes); the notes on what was read and assumed, and on each value given over theirs."""
    notes = [*trainer.notes, *_config_from_trainer(values, trainer)]
    training = trainer.training

    def fill(name: str, value: object) -> bool:
        return _fill(values, name, value)

    def fill_noted(name: str, value: object, taken: str, theirs: str) -> None:
        if fill(name, value):
            notes.append(taken)
        elif value is not None and values.get(name) not in (None, value):
            notes.append(f"{spelling.label(name)} {values[name]} used; {theirs}")

    world, per_node = _launch_world(trainer)
    fill_noted("gpus", world, f"world size {world} from the launch command ({trainer.world_from})",
               f"the launch command runs {world} process(es) ({trainer.world_from})")
    if world is not None and values.get("gpus") == world and fill("gpus_per_node", per_node) \
            and per_node != world:
        notes.append(f"{per_node} GPU(s) per node from the launch command")
    if values.get("params") is None:
        fill("model", training.model or None)
    fill_noted("seq_len", training.sequence_length or None,
               f"sequence length {training.sequence_length} from {training.sequence_from}",
               f"the Trainer's arguments give {training.sequence_length} ({training.sequence_from})")
    fill_noted("padding", training.padding, f"padding {training.padding} from {training.padding_from}",
               f"the Trainer's arguments pad to {training.padding} ({training.padding_from})")
    fill("activation_checkpointing", trainer.checkpointing)
    _checkpointing_from_trainer(training, fill_noted)
    fill_noted("sequence_parallel", training.sequence_parallel,
               f"sequence parallel {training.sequence_parallel} from {training.sequence_parallel_from}",
               f"the trainer's own sequence parallel is {training.sequence_parallel} "
               f"({training.sequence_parallel_from})")
    if training.given("optim"):  # the client optimizer (memory/step_temporaries.py, memory/bytes.py)
        from zeroadvisor.model.spec import CLIENT_OPTIMIZER_NAMES

        optim = training.get("optim")
        if optim in CLIENT_OPTIMIZER_NAMES:
            fill_noted("optim", optim, f"optim {optim} from {training.label('optim')}",
                       f"the Trainer's arguments give {optim} ({training.label('optim')})")
        else:  # a name this release does not know (a newer Trainer's, a project's own): the file is not refused
            notes.append(f"{training.label('optim')} gives {optim!r}, not a Trainer optim name zeroadvisor knows: "
                         "not used (the optimizer's states and step costed as the default's; --optim sets one)")
    if training.given("use_liger_kernel"):  # the Liger kernel's loss, norms and MLP (memory/liger.py)
        on, where = bool(training.get("use_liger_kernel")), training.label("use_liger_kernel")
        fill_noted("liger_kernel", on, f"Liger kernel {'on' if on else 'off'} from {where}",
                   f"the Trainer's arguments turn it {'on' if on else 'off'} ({where})")
    fill("launcher", trainer.launcher)  # the step time's CPU optimizer threads (hardware/machine.py)
    # the stage a trainer's flags give its generated config (OpenRLHF --zero_stage): where a config says "auto"
    fill_noted("stage", trainer.stage, f"ZeRO stage {trainer.stage} from {trainer.stage_from}",
               f"the launch command gives stage {trainer.stage} ({trainer.stage_from})")
    return notes


def _checkpointing_from_trainer(training: TrainingArgs, fill_noted: Callable[[str, object, str, str], None]) -> None:
    """The offloader the trainer's switches turn on (memory/activation_offload.py), the checkpointed layers'
    spacing and Cut Cross-Entropy, where nothing else gives them."""
    offload, where = training.activation_offload, training.activation_offload_from
    if offload is not None:
        fill_noted("activation_offload", offload, f"activation offload {offload} from {where}",
                   f"the Trainer's arguments give {offload} ({where})")
    every, where = training.checkpoint_every, training.checkpoint_every_from
    if every is not None:
        fill_noted("checkpoint_every", every, f"every {every} layer(s) checkpointed from {where}",
                   f"the Trainer's arguments give {every} ({where})")
    for name, label, value, where in (
            ("cut_cross_entropy", "Cut Cross-Entropy", training.cut_cross_entropy, training.cut_cross_entropy_from),
            ("tiled_mlp", "TiledMLP", training.tiled_mlp, training.tiled_mlp_from),
            ("tiled_mlp_shards", "TiledMLP shards", training.tiled_mlp_shards, training.tiled_mlp_from),
            ("vision_checkpointing", "vision tower checkpointing", training.vision_checkpointing,
             training.vision_checkpointing_from)):
        if value is not None:
            said = ("on" if value else "off") if isinstance(value, bool) else str(value)
            fill_noted(name, value, f"{label} {said} from {where}", f"the trainer's file gives {said} ({where})")


def _launch_world(trainer: TrainerInputs) -> tuple[int | None, int | None]:
    """The launch command's processes in all and per node, each within the cluster's bounds (the parser of
    --gpus): a command of no process (a hostfile of slots=0) or of more than any cluster has is a usage error."""
    label = f"the launch command ({trainer.world_from})"
    return gpus(label, trainer.world), gpus(label, trainer.per_node)  # the parser of --gpus and --gpus-per-node


def _fill(values: Values, name: str, value: object) -> bool:
    """Set the input ``name`` (one this command takes) to ``value`` where nothing gave it; whether it did."""
    if name not in values or _given(values[name]) or value is None:
        return False
    values[name] = value
    return True


def _config_from_trainer(values: Values, trainer: TrainerInputs) -> list[str]:
    """The config the Trainer's inputs name (the script's --deepspeed, else accelerate launch --config_file)
    where none was given; the note on which was taken."""
    from zeroadvisor.config.training_args import DEEPSPEED_KEY

    training = trainer.training
    if "config" in values and not _given(values["config"]) and isinstance(training.deepspeed, dict):
        raise UsageError(f"{training.source}: the DeepSpeed config is given inline; save it as a file and give its "
                         "path")
    notes = []
    if _fill(values, "config", training.deepspeed) and isinstance(training.deepspeed, str):
        flag = "--deepspeed" if training.source == "the launch command" else DEEPSPEED_KEY
        notes.append(f"config {training.deepspeed} from {flag} in {training.source or 'the arguments'}")
        if not os.path.lexists(training.deepspeed):
            notes.extend(_example_config(values, trainer, training.deepspeed))
    if trainer.swift_config is not None and not _given(values.get("config")):
        return _swift_config(values, trainer, trainer.swift_config)
    if trainer.openrlhf_flags is not None and not _given(values.get("config")):
        return _openrlhf_config(values, trainer, trainer.openrlhf_flags)
    if trainer.openrlhf_flags is not None:  # a config given stands for the one the flags build
        notes.append("the config given is checked as it says, not the one OpenRLHF builds from its flags "
                     "(--zero_stage, --adam_offload, ...: without CONFIG that one is checked)")
    if trainer.accelerate_config is None:
        return notes
    if _fill(values, "config", trainer.accelerate_config):
        return _trl_accelerate_source(values, trainer.accelerate_config)
    if values.get("config") == training.deepspeed:
        return [(f"the script's --deepspeed {training.deepspeed} is the DeepSpeed config checked (the Trainer hands "
                 f"it to Accelerate); {trainer.accelerate_config} gives the launch only")]
    return notes


def _trl_accelerate_source(values: Values, path: str) -> list[str]:
    """The launch command's accelerate config: a file, or TRL's own (``trl CMD --accelerate_config zero3``, read
    from the copy shipped here: config/launch.py), which is checked as TRL's file, by its path in TRL's package,
    not by where this install keeps the copy."""
    from zeroadvisor.config.launch import TRL_ACCELERATE_CONFIGS, trl_accelerate_config

    own = next((name for name in TRL_ACCELERATE_CONFIGS if trl_accelerate_config(name) == path), None)
    if own is None:
        return [f"config {path} from the launch command (accelerate launch --config_file)"]
    from pathlib import Path

    shown = f"trl/accelerate_configs/{own}.yaml"
    values["config"] = ConfigSource(f"TRL {shown}", Path(path).read_text("utf-8"), patch_path=shown)
    return []


def _example_config(values: Values, trainer: TrainerInputs, path: str) -> list[str]:
    """The trainer's own config that a training file names by its place in the trainer's repository
    (``examples/deepspeed/ds_z3_config.json``: config/example_configs.py) where no such file is here: read as the
    release the pins (else the installed trainer) give ships it, checked as an in-memory config (a fix is shown,
    never written). Nothing where the path names no such file (the config's own error then says it is missing)."""
    from zeroadvisor.config.example_configs import shipped_example, shipped_stem
    from zeroadvisor.config.trainer_pins import find_trainer_pin

    project = trainer.training.project
    if shipped_stem(path, project) is None:
        return []
    family = TrainerFamily(project)  # one with shipped configs: a family's value (config/example_configs.py)
    name = TRAINER_NAMES[family]
    pin = find_trainer_pin(trainer.source or os.curdir, family)
    found, known = shipped_example(path, project, pin.version if pin is not None else None)
    if found is None:
        said = f" ({pin.origin})" if pin is not None else ""
        raise UsageError(f"{path}: no such file, and {name} {pin.version if pin is not None else ''}{said} ships no "
                         "such config known here; give the file's path as CONFIG")
    read = _read_shipped(values, found, known, pin)
    return [(f"config: {path} is not here: {name}'s own, read as {read}; a fix is shown, not written (give a copy's "
            "path as CONFIG to --fix it)")]


def _read_shipped(values: Values, found: ShippedConfig, known: bool, pin: TrainerPin | None) -> str:
    """Check a trainer's own config as an in-memory config, its text as the trainer ships it: the findings name
    the trainer's release, a diff the file's path in the trainer's repository. The words on the release read."""
    values["config"] = replace(ConfigSource.in_memory(found.text, found.display), patch_path=found.path)
    if known and pin is not None:
        return f"{found.project} {pin.version} ({pin.origin})"
    unknown = f"exact: {pin.origin}" if pin is not None else "pinned or installed"
    return (f"the newest content shipped, {found.project} {found.release} (the release is not {unknown}: a pin of "
            f"{found.project} sets it)")


def _swift_config(values: Values, trainer: TrainerInputs, name: str) -> list[str]:
    """ms-swift's own config that ``swift ... --deepspeed NAME`` picks (config/swift_configs.py), as the ms-swift
    release the pins (else the installed ms-swift) give reads it, checked as an in-memory config: it is ms-swift's
    file, not the user's, so a fix is shown, never written into it."""
    from zeroadvisor.config.swift_configs import shipped
    from zeroadvisor.config.trainer_pins import find_trainer_pin
    from zeroadvisor.vocab import TrainerFamily

    pin = find_trainer_pin(trainer.source or os.curdir, TrainerFamily.MS_SWIFT)
    found, known = shipped(name, pin.version if pin is not None else None)
    if found is None:
        said = f" ({pin.origin})" if pin is not None else ""
        raise UsageError(f"swift --deepspeed {name}: no such config of ms-swift "
                         f"{pin.version if pin is not None else ''}{said} is known here; give the file's path as "
                         "CONFIG")
    return [(f"config: swift --deepspeed {name} is ms-swift's {found.path}, read as "
             f"{_read_shipped(values, found, known, pin)}; a fix is shown, not written (give a copy's path as CONFIG "
             "to --fix it)")]


def _openrlhf_config(values: Values, trainer: TrainerInputs, flags: OpenRLHFFlags) -> list[str]:
    """The DeepSpeed config OpenRLHF builds from the command's flags (config/openrlhf_config.py) at the release the
    pins (else the installed OpenRLHF) give, checked as an in-memory config: no file holds it, so a fix is said in
    the flags (advisor/trainer_settings.py), never written."""
    from zeroadvisor.config.method import release_of
    from zeroadvisor.config.openrlhf_config import train_config
    from zeroadvisor.config.trainer_pins import find_trainer_pin
    from zeroadvisor.vocab import TrainerFamily

    pin = find_trainer_pin(trainer.source or os.curdir, TrainerFamily.OPENRLHF)
    release = release_of(pin.version) if pin is not None else None
    values["config"] = train_config(flags, release)
    values["name"] = "the DeepSpeed config OpenRLHF builds"
    unknown = "no pin gives the release" if pin is None else f"{pin.origin} is no single release"
    at = (f"OpenRLHF {release} ({pin.origin})" if release is not None and pin is not None else
          f"{unknown}: bf16 unless --bf16 or --param_dtype say otherwise, 0.8's batch defaults")
    return [(f"config: the one {flags.entry} builds from its flags (get_ds_train_config, "
             f"openrlhf/utils/deepspeed/deepspeed.py), as {at}")]


def _configs(command: Command, values: Values, spelling: Spelling) -> tuple[ConfigSource, ...]:
    # as the Request gives them (a Python value the source refuses where it cannot read it), the config perhaps
    # filled from the Trainer's inputs (a path)
    name = cast("str | None", values.get("name"))
    if command is Command.LINT:
        given = [key for key in ("paths", "text", "config") if _given(values.get(key))]
        if len(given) != 1:
            raise UsageError("give paths, text= or config=: exactly one of them")
        if given == ["text"]:
            return (ConfigSource.in_memory(cast(str, values["text"]), name),)
        if given == ["config"]:
            return (ConfigSource.mapping(cast("Mapping[str, object]", values["config"]), name),)
        paths = cast("Sequence[str | os.PathLike[str]]", values["paths"])
        return tuple(ConfigSource.path(path, dash_is_stdin=True) for path in paths)
    config = cast("ConfigGiven | Sequence[ConfigGiven] | None", values.get("config"))
    if command is Command.ESTIMATE:
        return () if config is None else (ConfigSource.given(cast("ConfigGiven", config), name),)
    configs = list(config) if isinstance(config, (list, tuple)) else [] if config is None else [config]
    return tuple(ConfigSource.given(cast("ConfigGiven", each), name) for each in configs)


def _assemble(command: Command, values: Values, spelling: Spelling, project: bool,
              trainer: TrainerInputs | None, configs: tuple[ConfigSource, ...], notes: tuple[str, ...],
              readings: Readings | None, lint_only: bool = False) -> RunInputs:
    from zeroadvisor.units import FORMAT_UNITS

    model: ModelSpec | None = None
    shape: TrainingShape | None = None
    cluster, hardware, accounting = None, None, Accounting.DEEPSPEED
    if command in MODEL_COMMANDS and not lint_only:
        notes = (*notes, *_peft_from_trainer(values, spelling, trainer))
        frozen = trainer.training.vision_freeze if trainer is not None else None
        model, shape = model_and_shape(cast("str | os.PathLike[str] | ModelSpec | None", values.get("model")),
                                       cast("int | str | None", values.get("params")), spelling=spelling,
                                       vision_freeze=frozen, **{key: values.get(key) for key in TRAINING_INPUTS})
        pinned = _transformers_pin(values, model, trainer, configs, readings)
        notes = (*notes, *pinned)
        if pinned and values.get("transformers_version") is not None:  # the pin's release: counted again as it
            model, shape = model_and_shape(cast("str | os.PathLike[str]", values.get("model")), None,
                                           spelling=spelling, vision_freeze=frozen,
                                           **{key: values.get(key) for key in TRAINING_INPUTS})
        setup, method_notes = _method(values, spelling, trainer, configs)
        setup, shape, length_notes = _default_lengths(setup, shape, trainer)
        method_notes = [*method_notes, *length_notes]
        if method_notes or setup != shape.method:  # nothing said: the shape as it was (MethodSetup())
            from zeroadvisor.inputs.method import auxiliary_specs

            others, other_notes = auxiliary_specs(setup, values.get("model"), model.transformers_version)
            shape = replace(shape, method=setup, auxiliary_specs=others)
            notes = (*notes, *method_notes, *other_notes)
        cluster = _cluster(command, values, spelling)
        hardware = _hardware(values, cluster)
        accounting = Accounting(choice(spelling.label("accounting"),
                                       _setting(command, values, "accounting", spelling), ACCOUNTINGS))
    elif values.get("gpus") is not None:
        from zeroadvisor.memory.cluster import Cluster

        cluster = Cluster(gpus=cast(int, values["gpus"]))  # lint: the world size, to check the batch exactly
    integration = cast(Integration, _setting(command, values, "integration", spelling))  # its parser's
    if command is Command.CHECK and trainer is not None and integration is Integration.ANY:
        integration = Integration.HF_TRAINER  # the Trainer reads the config
    output = Output(format=output_format(spelling.label("format"), _setting(command, values, "format", spelling),
                                         FORMATS[command]),
                    fail_on=cast(FailOn, _setting(command, values, "fail_on", spelling)),
                    unit=choice(spelling.label("unit"), _unit(values, accounting), FORMAT_UNITS),
                    explain=bool(values.get("explain")), verbose=bool(values.get("verbose")),
                    all_options=bool(values.get("all_options")))
    rules = RuleChoice(_references(values.get("select"), spelling.label("select")),
                       _references(values.get("ignore"), spelling.label("ignore")),
                       lint_only=command is Command.LINT, project=project)
    if lint_only and output.format in DIFF_FORMATS:
        raise UsageError(f"{spelling.label('format')} {output.format} shows the memory advice: give "
                         f"{spelling.ask('model')} (or {spelling.ask('params')}), {spelling.ask('gpus', 'N')} and "
                         f"{spelling.ask('gpu')} (or {spelling.ask('gpu_memory')})")
    diff = bool(values.get("suggest") or values.get("diff")) or (command is Command.CHECK
                                                                 and output.format in DIFF_FORMATS)
    return RunInputs(command, configs, model, shape, cluster, accounting, integration,
                     trainer.training if trainer is not None else None, hardware, rules, output, diff,
                     bool(values.get("fix")), bool(values.get("only_configs")), notes, readings,
                     trainer.accelerate_config if trainer is not None else None,
                     trainer.overrides if trainer is not None else (), lint_only,
                     cast("str | None", values.get("deepspeed_version")), spelling.label("deepspeed_version"))


def _pin_start(trainer: TrainerInputs | None, configs: tuple[ConfigSource, ...]) -> str | None:
    """Where the user's pins are looked for: the training arguments file (--training-args, or the one the launch
    command names), else the config checked; None: the current folder."""
    files = (trainer.source, trainer.training.source) if trainer is not None else ()
    return next((name for name in files if name and os.path.isfile(name)), None) or \
        next((source.name for source in configs if source.is_file), None)


def _transformers_pin(values: Values, model: ModelSpec, trainer: TrainerInputs | None,
                      configs: tuple[ConfigSource, ...], readings: Readings | None) -> list[str]:
    """The transformers release, set in ``values``, where the model's layout depends on it (an MoE model:
    ModelSpec release_dependent) or what its activations keep does (grouped-query attention:
    release_moves_activations) and neither a flag, a keyword, the project configuration nor the model
    description gave it: preflight's, the job's installed transformers; else the user's pins (config/
    trainer_pins.py, the files and order DeepSpeed's pin is read from); the note saying so (none: nothing read).
    Not this machine's installed transformers outside preflight: the one running check is not the job's."""
    from zeroadvisor.config.trainer_pins import find_distribution_pin
    from zeroadvisor.model.transformers_release import ReleaseError, resolve

    if not (model.release_dependent or model.release_moves_activations) or model.transformers_version is not None or \
            not isinstance(values.get("model"), (str, os.PathLike)):
        return []
    if readings is not None and readings.transformers_version is not None:
        values["transformers_version"] = readings.transformers_version
        return [f"transformers {readings.transformers_version} (installed in the job)"]
    pin = find_distribution_pin(_pin_start(trainer, configs) or os.curdir, "transformers", installed=False)
    if pin is None:
        return []
    try:
        release = resolve(pin.version)
    except ReleaseError as err:
        return [f"transformers pin not used ({pin.origin}): {err}"]
    values["transformers_version"] = pin.version
    return [f"transformers {release} ({pin.origin})"]


def _peft_from_trainer(values: Values, spelling: Spelling, trainer: TrainerInputs | None) -> list[str]:
    """LoRA/QLoRA as the trainer's file says it (config/peft_reader.py), put in ``values`` where no PEFT input is
    given: a flag (or the Python API's keyword) and a model description's ``peft:`` block win over the file's whole
    LoRA setup; the note says what was read. A model given as a parameter count has no layout to put adapters on:
    then the note says so."""
    reading = trainer.training.peft if trainer is not None else None
    if reading is None:
        return []
    if any(values.get(key) is not None for key in PEFT_INPUTS):
        return [f"the trainer's files say {reading.words()}; the LoRA inputs given are used instead"]
    model = values.get("model")
    if model is None or not isinstance(model, (str, os.PathLike)):
        return [(f"the trainer's files say {reading.words()}: not counted without a model layout (give "
                 f"{spelling.ask('model')} with a config.json); costed as a full fine-tune")]
    from zeroadvisor.model.description import has_peft_block

    if has_peft_block(model):
        return [f"the trainer's files say {reading.words()}; the model description's peft block is used instead"]
    values.update(reading.inputs())
    return [f"{reading.words()}: read from the trainer's files"]


def _method(values: Values, spelling: Spelling, trainer: TrainerInputs | None,
            configs: tuple[ConfigSource, ...]) -> tuple[MethodSetup, list[str]]:
    """The training method (inputs/method.py): --trainer over the Trainer's files; the trainer's pins looked for
    from the training arguments file (--training-args, or the one the launch command names), else the config
    checked, else the current folder."""
    from zeroadvisor.inputs.method import resolve

    flag = cast("TrainerChoice | None", values.get("trainer"))
    reading = trainer.training.method if trainer is not None else None
    start = _pin_start(trainer, configs)
    label = cast(str, values.get("trainer_from") or spelling.label("trainer"))
    return resolve(reading, flag, label, spelling.ask("trainer", "METHOD"), start)


def _default_lengths(setup: MethodSetup, shape: TrainingShape,
                     trainer: TrainerInputs | None) -> tuple[MethodSetup, TrainingShape, list[str]]:
    """The lengths a trainer's file or command leaves to the trainer's defaults at the pinned release
    (config/default_lengths.py), where nothing else gives them: the sequence, GRPO's prompt and completion caps;
    the note on them. OpenRLHF's only where its command sets none of its lengths."""
    from zeroadvisor.vocab import TrainerFamily

    if setup.trainer is TrainerFamily.OPENRLHF:
        from zeroadvisor.config.default_lengths import openrlhf_default

        said = setup.generation.max_prompt_length or setup.generation.max_completion_length
        default = openrlhf_default(setup)
        if default is None or shape.sequence_length is not None or said or trainer is None \
                or trainer.openrlhf_flags is None:
            return setup, shape, []
        return setup, replace(shape, sequence_length=default[0]), [default[1]]
    if setup.trainer is not TrainerFamily.TRL:
        return _swift_defaults(setup, shape) if setup.trainer is TrainerFamily.MS_SWIFT else (setup, shape, [])
    from zeroadvisor.config.default_lengths import CLASS_DEFAULT, trl_defaults

    found = trl_defaults(setup)
    notes: list[str] = []
    if found.max_length is not None and shape.sequence_length is None:
        shape, notes = replace(shape, sequence_length=found.max_length), [found.note]
        if found.max_completion_length is None:
            return setup, shape, notes
    if found.max_prompt_length is None and found.max_completion_length is None:
        return setup, shape, notes
    gen = setup.generation
    filled = tuple((name, CLASS_DEFAULT) for name, value in (("max_prompt_length", found.max_prompt_length),
                                                             ("max_completion_length", found.max_completion_length))
                   if value is not None)
    gen = replace(gen, max_prompt_length=gen.max_prompt_length or found.max_prompt_length,
                  max_completion_length=gen.max_completion_length or found.max_completion_length)
    return replace(setup, generation=gen, origin=(*setup.origin, *filled)), shape, \
        [*notes, found.generation_note or found.note]  # GKD's max_new_tokens has a note of its own


def _swift_defaults(setup: MethodSetup, shape: TrainingShape) -> tuple[MethodSetup, TrainingShape, list[str]]:
    """ms-swift's default completion cap for GRPO and PPO where the command gives none (config/default_lengths.py
    swift_completion_default), filled as the class default so that it is still listed as assumed."""
    from zeroadvisor.config.default_lengths import CLASS_DEFAULT, SWIFT_COMPLETION_SOURCE, swift_completion_default

    completion = swift_completion_default(setup)
    if completion is None:
        return setup, shape, []
    gen = replace(setup.generation, max_completion_length=completion)
    at = f"ms-swift {setup.trainer_version}" if setup.release is not None else \
        "ms-swift not pinned: the newest release's"
    return replace(setup, generation=gen, origin=(*setup.origin, ("max_completion_length", CLASS_DEFAULT))), shape, \
        [f"max_completion_length {completion} from ms-swift's default {SWIFT_COMPLETION_SOURCE} ({at})"]


def _number(values: Values, name: str) -> int | None:
    """A count or a size in bytes as its parser read it (inputs/values.py PARSERS: an int), None where not given."""
    return cast("int | None", values.get(name))


def _references(value: object, label: str) -> tuple[str, ...]:
    """--select/--ignore (given once or more) or select=/ignore= (a string or a list of them) as a tuple."""
    if not _given(value):
        return ()
    references = (value,) if isinstance(value, str) else tuple(value) if isinstance(value, (list, tuple)) else None
    if references is None or not all(isinstance(reference, str) for reference in references):
        raise UsageError(f"{label}: expected rule codes or names (a string or a list of strings), got {value!r}")
    return references


def _cluster(command: Command, values: Values, spelling: Spelling) -> Cluster:
    from zeroadvisor.memory.cluster import Cluster

    if command in ADVICE_COMMANDS and values.get("gpu_memory") is None and values.get("gpu") is None:
        raise UsageError(f"give the memory per GPU: {spelling.ask('gpu_memory', '80GiB')} or "
                         f"{spelling.ask('gpu', 'A100-SXM4-80GB')}")
    from zeroadvisor.memory.cluster import check_usable
    from zeroadvisor.memory.errors import EstimateError

    headroom = cast(float, _setting(command, values, "headroom", spelling))  # inputs/values.py headroom
    card = cast("GpuSpec | None", values.get("gpu"))  # its parser's (inputs/values.py gpu)
    try:
        # each value was checked alone where it was read; together the headroom may leave no memory to use
        check_usable(spelling.label("headroom"),
                     _number(values, "gpu_memory") or (card.memory_bytes if card else None), headroom)
        return Cluster(gpus=cast(int, values["gpus"]), gpus_per_node=_number(values, "gpus_per_node"),
                       gpu_memory=_number(values, "gpu_memory"), cpu_memory=_number(values, "cpu_memory"),
                       nvme=_number(values, "nvme"), headroom=headroom, gpu=card,
                       alloc_conf=cast("str | None", values.get("alloc_conf")),
                       dataloader_workers=cast(int, values.get("dataloader_workers") or 0))
    except EstimateError as err:  # the bounds of memory/cluster.py, on values given together
        raise UsageError(str(err)) from None


def _hardware(values: Values, cluster: Cluster) -> Hardware:
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

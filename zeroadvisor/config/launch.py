"""A launch command, read as its launcher and the Trainer script's HfArgumentParser would read it.

``deepspeed``, ``torchrun`` (or ``python -m torch.distributed.run``), ``accelerate launch`` and ``python``
are recognised; what each launcher makes of its own options decides the world size (processes = GPUs x
nodes), and the script's arguments are TrainingArguments (config/training_args.py) as HfArgumentParser
parses them: ``--name value``, ``--name=value``, a bare ``--bf16`` (bool fields take an optional value,
transformers hf_argparser.py ``nargs="?", const=True``), dashes for underscores. A script whose only
argument is a ``.yaml``/``.yml``/``.json`` file reads its arguments from that file (HfArgumentParser's
parse_yaml_file/parse_json_file as LLaMA-Factory and axolotl scripts call them), with ``key=value``
overrides after it (LLaMA-Factory's OmegaConf.from_cli).

What a launcher leaves to the machine it runs on (``deepspeed`` without ``--num_gpus``, a hostfile that is not
here) is a world size of None with the option that would state it (:class:`World`); ``accelerate launch
--config_file`` names the config to check, and its options that override the file's keys are
:data:`ACCELERATE_OVERRIDES`.

Each launcher's options that take NO value are listed (:data:`LAUNCHERS`); every other option takes one.
tests/oracle/test_hf_fill_oracle.py compares these lists with the launchers' own argparse parsers, the
hostfile arithmetic with DeepSpeed's runner and the overrides with accelerate's launch parser.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import yaml

from zeroadvisor.config import method_reader, peft_reader, swift_configs, vision_freeze
from zeroadvisor.config.limits import MAX_GPUS
from zeroadvisor.config.method import RAY_GROUP_GPUS_PER_NODE, RAY_GROUP_NODES, MethodSetup, ray_group
from zeroadvisor.config.openrlhf_config import COUNT_FLAGS as OPENRLHF_COUNT_FLAGS
from zeroadvisor.config.openrlhf_config import FLAGS as OPENRLHF_CONFIG_FLAGS
from zeroadvisor.config.openrlhf_config import OpenRLHFFlags
from zeroadvisor.config.trainer_errors import TrainerInputError, as_bool, shown
from zeroadvisor.config.trainer_refusals import read_keys
from zeroadvisor.config.training_args import (
    ATTENTION_KEYS,
    ATTENTION_SWITCHES,
    DEEPSPEED_KEY,
    DEFAULTS,
    MODEL_KEYS,
    OFFLOAD_KWARGS_KEYS,
    PACKING_KEYS,
    PAD_TO_MAX_KEY,
    SEQUENCE_KEYS,
    SEQUENCE_PARALLEL_KEYS,
    TYPES,
    VISION_CHECKPOINTING_KEY,
    TrainingArgs,
    from_mapping,
    read_mapping,
)
from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.vocab import ALLOC_CONF_ENV as ALLOC_CONF
from zeroadvisor.vocab import Method, ModelRole, TrainerFamily


class LaunchError(TrainerInputError):
    """A launch command that cannot be read; one line."""


@dataclass(frozen=True)
class Launcher:
    name: str
    flags: frozenset[str]  # options that take no value (argparse nargs=0); all others take one
    module_flags: frozenset[str] = frozenset()  # options after which the script is a module name


# deepspeed/launcher/runner.py parse_args (0.19.8); torch/distributed/run.py get_args_parser (2.13);
# accelerate/commands/launch.py launch_command_parser: their store_true options.
LAUNCHERS: dict[str, Launcher] = {
    "deepspeed": Launcher("deepspeed", frozenset({
        "-h", "--help", "--module", "--no_python", "--no_local_rank", "--no_ssh", "--no_ssh_check", "--force_multi",
        "--save_pid", "--bind_cores_to_rank", "-q", "--quiet"}), frozenset({"--module"})),
    "torchrun": Launcher("torchrun", frozenset({
        "-h", "--help", "--standalone", "-m", "--module", "--no-python", "--no_python", "--run-path", "--run_path",
        "--virtual-local-rank", "--virtual_local_rank"}), frozenset({"-m", "--module"})),
    "accelerate": Launcher("accelerate launch", frozenset({
        "-h", "--help", "--quiet", "-q", "--cpu", "--multi_gpu", "--multi-gpu", "--tpu", "--enable_cpu_affinity",
        "--enable-cpu-affinity", "--dynamo_use_fullgraph", "--dynamo-use-fullgraph", "--dynamo_use_dynamic",
        "--dynamo-use-dynamic", "--dynamo_use_regional_compilation", "--dynamo-use-regional-compilation",
        "--use_deepspeed", "--use-deepspeed", "--use_fsdp", "--use-fsdp", "--use_parallelism_config",
        "--use-parallelism-config", "--use_megatron_lm", "--use-megatron-lm", "--same_network", "--same-network",
        "-m", "--module", "--no_python", "--no-python", "--tpu_cluster", "--tpu-cluster", "--no_tpu_cluster",
        "--no-tpu-cluster", "--tpu_use_sudo", "--tpu-use-sudo", "--downcast_bf16", "--downcast-bf16",
        "--fp8_use_autocast_during_eval", "--fp8-use-autocast-during-eval", "--debug"}), frozenset({"-m", "--module"})),
    # CPython's own options that take no value (python --help); -m and -c end the interpreter's options.
    "python": Launcher("python", frozenset({
        "-b", "-B", "-d", "-E", "-i", "-I", "-O", "-OO", "-P", "-q", "-s", "-S", "-u", "-v", "-x", "-h", "-?",
        "--help", "-V", "--version"}), frozenset({"-m"})),
}
# python -m <module> that is a launcher itself
MODULE_LAUNCHERS = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun",
                    "deepspeed.launcher.runner": "deepspeed", "accelerate.commands.launch": "accelerate"}
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_ARGS_FILES = (".yaml", ".yml", ".json")
# Script keys read besides TrainingArguments fields (bool ones parse as bool flags).
# OpenRLHF's --flash_attn and axolotl's attention switches take no value (ATTENTION_SWITCHES)
_EXTRA_BOOLS = ("disable_gradient_checkpointing", PAD_TO_MAX_KEY, "activation_offloading", "use_unsloth_gc",
                *(key for keys in ATTENTION_SWITCHES.values() for key in keys),
                *(key for keys in PACKING_KEYS.values() for key in keys))
_EXTRA_KEYS = (DEEPSPEED_KEY, *MODEL_KEYS, *SEQUENCE_KEYS, *_EXTRA_BOOLS, *ATTENTION_KEYS, *OFFLOAD_KWARGS_KEYS,
               *(key for keys in SEQUENCE_PARALLEL_KEYS.values() for key in keys))
# A launcher's options as the command gives them: the value, or True for an option that takes none.
_Options = dict[str, str | bool]
# accelerate launch options that override a key of its --config_file: _validate_launch_command copies the
# file's value onto an option only where the command left it unset (a deepspeed_config key only where the
# option is not among args.nondefault). Option -> (the key's path in the file, the option's argparse type).
ACCELERATE_OVERRIDES: dict[str, tuple[tuple[str, ...], type]] = {
    "num_processes": (("num_processes",), int),
    "num_machines": (("num_machines",), int),
    "mixed_precision": (("mixed_precision",), str),
    "zero_stage": (("deepspeed_config", "zero_stage"), int),
    "offload_optimizer_device": (("deepspeed_config", "offload_optimizer_device"), str),
    "offload_param_device": (("deepspeed_config", "offload_param_device"), str),
    "gradient_accumulation_steps": (("deepspeed_config", "gradient_accumulation_steps"), int),
}


@dataclass(frozen=True)
class Override:
    """A launcher option that replaces a key of the config file it launches with: ``path`` in the file."""

    option: str  # as the command spells it, e.g. --num_processes
    path: tuple[str, ...]
    value: str | int


@dataclass(frozen=True)
class CliEnv:
    """Environment variables a trainer's own launcher sets for the processes it starts, from one of its releases on
    (LLaMA-Factory's llamafactory-cli from 0.9.3: PYTORCH_CUDA_ALLOC_CONF): applied unless the trainer's pin is
    older (inputs/run.py alloc_conf)."""

    values: tuple[tuple[str, str], ...]
    family: TrainerFamily
    since: str  # the first release that sets them (PEP 440)


@dataclass(frozen=True)
class Launch:
    """What a launch command runs: ``world_size`` processes (None: the launcher takes every GPU it finds,
    which only the machine knows; ``world_missing`` names the option that would state it), the script and its
    TrainingArguments, and for ``accelerate launch`` the config file it launches with."""

    launcher: str
    world_size: int | None
    world_from: str  # how the world size follows from the command, for messages
    script: str
    training: TrainingArgs
    notes: tuple[str, ...] = ()
    per_node: int | None = None  # processes each machine runs, where the command says (None: not stated, uneven)
    accelerate_config: str | None = None  # accelerate launch --config_file, as given
    # what to give where the command leaves the world size to the machine ("" when it states it)
    world_missing: str = ""
    overrides: tuple[Override, ...] = ()  # accelerate launch options over its --config_file's keys
    env: tuple[tuple[str, str], ...] = ()  # the command's VAR=value prefixes, in order (the run's environment)
    # a trainer that builds its DeepSpeed config from its own flags (OpenRLHF): what does, for the message asking
    # for the config ("" where the script reads a config file)
    builds_config: str = ""
    stage: int | None = None  # the ZeRO stage the trainer's flags give (OpenRLHF --zero_stage), for "auto"
    stage_from: str = ""
    cli_env: CliEnv | None = None  # what the trainer's own launcher sets in its processes' environment
    # ms-swift's own config named by --deepspeed (zero3, default-zero2, ...: config/swift_configs.py), which the
    # inputs resolve by the ms-swift release; None where the command names a file or nothing
    swift_config: str | None = None
    # OpenRLHF's flags its DeepSpeed config follows from (config/openrlhf_config.py), built by the inputs at the
    # OpenRLHF release; None for other commands
    openrlhf_flags: OpenRLHFFlags | None = None


def parse_launch(words: list[str] | str, cwd: str | None = None) -> Launch:
    """The launch command's world size and the script's TrainingArguments (LaunchError if unreadable)."""
    if isinstance(words, str):
        try:
            words = shlex.split(words)
        except ValueError as err:
            raise LaunchError(f"launch command: {err}") from None
    words = list(words)
    env: dict[str, str] = {}
    while words and _ENV.match(words[0]):  # VAR=value prefixes, as the shell passes them
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    if not words:
        raise LaunchError("launch command: empty; give it after --, e.g. -- deepspeed --num_gpus 8 train.py "
                          "--deepspeed ds_config.json")
    named = _NAMED_TRAINERS.get(os.path.basename(words[0]))
    if named is not None:  # a launcher that names the trainer: ray job submit, trl, swift
        return named(words, env, cwd)
    launcher, rest = _launcher(words)
    options, script, script_args, module = _split(LAUNCHERS[launcher], rest)
    notes: list[str] = []
    if launcher == "python" and module in MODULE_LAUNCHERS:  # python -m torch.distributed.run ...
        launcher = MODULE_LAUNCHERS[module]
        options, script, script_args, module = _split(LAUNCHERS[launcher], script_args)
    if not script:
        raise LaunchError(f"launch command: {LAUNCHERS[launcher].name} runs no script (expected a script "
                          "path or -m module after its options)")
    world = WORLD[launcher](options, env, cwd, notes)
    config = _accelerate_config_option(options) if launcher == "accelerate" else None
    overrides = _accelerate_overrides(options) if config is not None else ()
    openrlhf = _openrlhf_entry(script, module)
    if openrlhf is not None:
        return _openrlhf_launch(Launch(LAUNCHERS[launcher].name, world.size, world.origin, script,
                                       TrainingArgs(), tuple(notes), world.per_node, config, world.missing, overrides,
                                       tuple(env.items())), openrlhf, script_args)
    trl = _trl_script(script, module)
    training = script_training_args(script_args, cwd, config_flag=trl is not None)
    if trl is not None:
        method, rloo = trl
        training = replace(training, method=method_reader.stated(
            training.method, method, TrainerFamily.TRL, f"the TRL script {script}", rloo))
    return Launch(LAUNCHERS[launcher].name, world.size, world.origin, script, training, tuple(notes),
                  world.per_node, config, world.missing, overrides, tuple(env.items()))


# -- launchers that name the trainer: ray job submit, trl, swift; OpenRLHF's and TRL's scripts -------------

# ray job submit's options that take no value (ray/dashboard/modules/job/cli.py submit: its click flags)
_RAY_FLAGS = frozenset({"--no-wait", "--verify", "--disable-usage-stats", "-v", "--verbose", "--help"})


def _ray_job(words: list[str], env: dict[str, str], cwd: str | None) -> Launch:
    """``ray job submit [--address A] [--runtime-env-json J] ... -- ENTRYPOINT``: the entrypoint is the launch
    command (ray runs it on the cluster's head; OpenRLHF's train_ppo_ray then places the models by its flags)."""
    if words[1:3] != ["job", "submit"]:
        raise LaunchError(f"launch command: only 'ray job submit ... -- ENTRYPOINT' starts a run, got "
                          f"{shown(shlex.join(words[:3]))}")
    if "--" not in words:
        raise LaunchError("launch command: ray job submit names no entrypoint (expected '-- python3 -m "
                          "openrlhf.cli.train_ppo_ray ...' after its options)")
    entry = words[words.index("--") + 1:]
    if not entry or os.path.basename(entry[0]) == "ray":
        raise LaunchError("launch command: ray job submit names no entrypoint after --")
    launch = parse_launch(entry, cwd)
    return replace(launch, launcher=f"ray job submit ({launch.launcher})",
                   notes=(*launch.notes, "ray job submit: the entrypoint after -- read as the launch command"))


def _trl_script(script: str, module: str) -> tuple[Method, bool] | None:
    """The method of the TRL trainer a script is (trl/scripts/dpo.py, the repository's examples/scripts/grpo.py and
    gspo.py, ``-m trl.scripts.dpo``: TRL_SCRIPTS, TRL_EXAMPLE_SCRIPTS; trl/scripts/rloo.py: GRPO's sibling) and
    whether it is RLOO, None for any other script; a TRL trainer zeroadvisor does not cost (TRL_UNCOSTED_SCRIPTS)
    is a LaunchError."""
    if module:
        head, _, name = module.rpartition(".")
        trl_folder = head == "trl.scripts"
    else:
        folder, _, base = script.replace(os.sep, "/").rpartition("/")
        name = base[:-3] if base.endswith(".py") else ""
        parent, _, sub = folder.rpartition("/")
        if sub in ("ppo", "rloo") and parent.endswith("examples/scripts"):  # examples/scripts/ppo/ppo.py
            folder, name = parent, f"{sub}/{name}"
        trl_folder = folder.endswith(("trl/scripts", "examples/scripts", "trl/examples/scripts"))
    if not trl_folder:
        return None
    _refuse_uncosted(name, shown(script or module))
    if name in method_reader.TRL_SIBLING_SCRIPTS:
        return method_reader.TRL_SIBLING_SCRIPTS[name], True
    method = method_reader.TRL_SCRIPTS.get(name) or method_reader.TRL_EXAMPLE_SCRIPTS.get(name)
    return None if method is None else (method, False)


def _refuse_uncosted(name: str, said: str) -> None:
    """A LaunchError where ``name`` (a script's or ``trl`` command's) is a TRL trainer zeroadvisor does not cost."""
    if name in method_reader.TRL_UNCOSTED_SCRIPTS:
        raise LaunchError(f"launch command: {said} is TRL's {method_reader.TRL_UNCOSTED_SCRIPTS[name]} trainer, which "
                          f"zeroadvisor does not cost (it reads "
                          f"{' | '.join({**method_reader.TRL_SCRIPTS, **method_reader.TRL_SIBLING_SCRIPTS})})")


# trl CLI (trl/cli.py main): the accelerate launch options it passes on (launch_args), and their value-less flags
# (not --gradient_accumulation_steps: TrainingArguments takes it, so TrlParser keeps it for the script, never for
# accelerate launch: trl/cli.py main @ v0.21.0, trl/cli/commands/training.py TrainingCommand.run @ v1.9.0)
_TRL_LAUNCH_OPTIONS = ("--num_processes", "--num-processes", "--num_machines", "--num-machines", "--config_file",
                       "--config-file", "--accelerate_config", "--mixed_precision", "--zero_stage",
                       "--offload_optimizer_device", "--offload_param_device",
                       "--main_process_port", "--machine_rank", "--main_process_ip")


# TRL's own accelerate configs, which ``trl CMD --accelerate_config NAME`` launches with (trl/cli.py main @ v0.18.0,
# trl/cli/accelerate_config.py resolve_accelerate_config_argument @ v1.9.0: a file of that name, else
# trl/accelerate_configs/NAME.yaml); each file the same from v0.18.0 to v1.9.0, copied into zeroadvisor/schemas/trl/
TRL_ACCELERATE_CONFIGS = ("zero1", "zero2", "zero3", "fsdp1", "fsdp2", "multi_gpu", "single_gpu")


def trl_accelerate_config(name: str) -> str | None:
    """The path of TRL's accelerate config ``name`` as shipped here (None: TRL has no such config)."""
    from importlib import resources

    if name not in TRL_ACCELERATE_CONFIGS:
        return None
    return str(resources.files("zeroadvisor.schemas").joinpath("trl", f"{name}.yaml"))


def _trl_command(words: list[str], env: dict[str, str], cwd: str | None) -> Launch:
    """``trl dpo --config f.yaml [--num_processes 8] ...``: accelerate launch of trl/scripts/<command>.py with the
    launch options given; the rest are the script's (TrlParser: ``--config`` names the YAML of its arguments, the
    other flags override it). The launch options come from the command line and, in TRL 1.x, from the YAML's keys
    that no dataclass takes (trl/cli/commands/training.py TrainingCommand.run: config_remaining + cli_remaining go
    to accelerate launch; trl 0.21 trl/cli.py main passed the command line's to ``trl sft`` only)."""
    command = words[1] if len(words) > 1 else ""
    _refuse_uncosted(command, f"trl {shown(command)}")
    commands = {**method_reader.TRL_SCRIPTS, **method_reader.TRL_SIBLING_SCRIPTS}
    if command not in commands:
        raise LaunchError(f"launch command: trl {shown(command)} is not a TRL training command zeroadvisor reads (trl "
                          f"{' | '.join(commands)})")
    options: dict[str, str] = {}  # launch option (--num_processes) -> its value
    script_words: list[str] = []
    rest = words[2:]
    index = 0
    while index < len(rest):
        flag, equals, value = rest[index].partition("=")
        if flag in _TRL_LAUNCH_OPTIONS and (equals or index + 1 < len(rest)):
            options[flag] = value if equals else rest[index + 1]
            index += 1 if equals else 2
        else:
            script_words.append(rest[index])
            index += 1
    if "--config" in script_words[:-1]:  # the YAML's launch keys, under the command line's
        path = script_words[script_words.index("--config") + 1]
        data = read_mapping(os.path.join(cwd or "", path), path)
        for flag in _TRL_LAUNCH_OPTIONS:
            held = data.get(flag[2:])
            if "-" not in flag[2:] and isinstance(held, (str, int)) and held is not True and held is not False:
                options.setdefault(flag, str(held))
    notes: list[str] = []
    named = options.pop("--accelerate_config", None)
    if named is not None and "--config_file" not in options:
        if os.path.isfile(os.path.join(cwd or "", named)):
            options["--config_file"] = named
        else:  # trl/cli accelerate_config: a name of trl/accelerate_configs/*.yaml (zero3, ...), TRL's own file
            own = trl_accelerate_config(named)
            if own is None:
                raise LaunchError(f"launch command: trl --accelerate_config {shown(named)} is neither a file nor one "
                                  f"of TRL's accelerate configs ({', '.join(TRL_ACCELERATE_CONFIGS)}): TRL raises "
                                  "\"Accelerate config ... is neither a file nor a valid config in the `trl` "
                                  "package\"")
            options["--config_file"] = own
            notes.append(f"trl --accelerate_config {named}: TRL's own trl/accelerate_configs/{named}.yaml (the same "
                         "file from TRL 0.18.0, when the option came, to 1.16.0; read from the copy shipped here)")
    launch_words = [word for flag, value in options.items() for word in (flag, value)]
    launch = parse_launch(["accelerate", "launch", *launch_words, f"trl/scripts/{command}.py", *script_words], cwd)
    launch = replace(launch, launcher="accelerate launch", notes=(*notes, *launch.notes),
                     env=tuple(env.items()))
    training = replace(launch.training, method=method_reader.stated(
        launch.training.method, commands[command], TrainerFamily.TRL, f"trl {command}",
        command in method_reader.TRL_SIBLING_SCRIPTS))
    return replace(launch, training=training)


# ms-swift argument names that are TrainingArguments' under another name
_SWIFT_RENAMES = {"model": "model_name_or_path"}


def _swift_command(words: list[str], env: dict[str, str], cwd: str | None) -> Launch:
    """``NPROC_PER_NODE=8 [NNODES=2] swift rlhf --rlhf_type dpo --model M --deepspeed zero3 ...``: ms-swift runs
    torchrun with NPROC_PER_NODE processes per node where it is set (swift/cli/main.py), else one process."""
    command = words[1] if len(words) > 1 else ""
    if command not in ("rlhf", *method_reader.SWIFT_SFT_COMMANDS):
        raise LaunchError(f"launch command: swift {shown(command)} is not an ms-swift training command zeroadvisor "
                          "reads (swift rlhf | sft | pt)")
    notes: list[str] = []
    per_node_text, nodes_text = env.get("NPROC_PER_NODE"), env.get("NNODES")
    per_node = count(per_node_text, "NPROC_PER_NODE") if per_node_text is not None else None
    nodes = count(nodes_text, "NNODES") if nodes_text is not None else 1
    if per_node is None:
        world = World(1, "swift without NPROC_PER_NODE runs one process", 1)
    else:
        world = World(per_node * nodes, f"NPROC_PER_NODE={per_node} x {nodes} node(s)", per_node)
    given, origin, ignored = _script_arguments(words[2:], overrides=False, reads=_swift_reads)
    data: JSONObject = {_SWIFT_RENAMES.get(key, key): value for key, value in given.items()}
    labels = {_SWIFT_RENAMES.get(key, key): flag for key, flag in origin.items()}
    dtype = data.pop("torch_dtype", None)
    if dtype in ("bfloat16", "bf16", "float16", "fp16"):  # the Trainer's bf16/fp16 follow --torch_dtype
        half = "bf16" if "b" in str(dtype) else "fp16"
        data.setdefault(half, True)
        labels.setdefault(half, f"--torch_dtype {dtype}")
    deepspeed = data.get(DEEPSPEED_KEY)
    _swift_device_map(env, per_node, deepspeed is not None)
    named = None
    if isinstance(deepspeed, str) and deepspeed in swift_configs.NAMES:  # ms-swift's own file (config/swift_configs)
        del data[DEEPSPEED_KEY]
        named = deepspeed
    notes += _ignored_notes("ms-swift arguments", ignored)
    data.update({key: _number(value) for key, value in given.items() if key in SEQUENCE_KEYS})

    def where(key: str) -> str:
        return labels.get(key, f"--{key}")

    training = from_mapping(data, _COMMAND_LINE, "ms-swift", where)
    method = method_reader.read_swift(command, data, where)
    training = replace(training, method=method)
    return Launch(f"swift {command}", world.size, world.origin, f"swift {command}", training, tuple(notes),
                  world.per_node, env=tuple(env.items()), swift_config=named)


def _swift_device_map(env: dict[str, str], per_node: int | None, deepspeed: bool) -> None:
    """ms-swift splits the model over the GPUs a process sees beyond its own (swift/utils/env.py is_mp: the visible
    GPUs // the local processes >= 2, unless SWIFT_SINGLE_DEVICE_MODE=1) and then refuses DeepSpeed
    (swift/arguments/sft_args.py _init_deepspeed @ v4.5.2, swift/llm/argument/train_args.py @ v3.0.0 to v3.12):
    decided where CUDA_VISIBLE_DEVICES says what it sees; a LaunchError, as the run stops there."""
    visible, local = _visible(env), per_node or 1
    if not deepspeed or visible is None or visible // local < 2 or env.get("SWIFT_SINGLE_DEVICE_MODE", "0") == "1":
        return
    raise LaunchError(f"launch command: swift sees {visible} GPUs (CUDA_VISIBLE_DEVICES) for {local} process(es) per "
                      "node, so ms-swift splits the model over them (device_map) and refuses DeepSpeed (\"DeepSpeed is "
                      "not compatible with `device_map`.\", swift/arguments/sft_args.py _init_deepspeed): put "
                      f"NPROC_PER_NODE={visible} before it")


def _swift_reads(key: str) -> bool:
    return _reads(key) or key in ("model", "torch_dtype") or key in peft_reader.LAUNCH_KEYS \
        or key in vision_freeze.LAUNCH_KEYS or key == VISION_CHECKPOINTING_KEY or key in _SWIFT_REFUSAL_KEYS


_SWIFT_REFUSAL_KEYS = read_keys(TrainerFamily.MS_SWIFT)  # ms-swift's own refusals (config/trainer_refusals.py)


# LLaMA-Factory's CLI (llamafactory/cli.py at v0.8.0 to v0.9.2, launcher.py from v0.9.3): ``train`` runs torchrun
# with NPROC_PER_NODE processes (default: every GPU it finds) on each of NNODES machines where FORCE_TORCHRUN is on or
# it finds more than one GPU, else one process; from v0.9.3 that torchrun's environment gets
# PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True unless OPTIM_TORCH is off (is_env_enabled("OPTIM_TORCH", "1")).
_LLAMA_FACTORY_CLI = "llamafactory/launcher.py launch @ v0.9.3"
_LLAMA_FACTORY_ALLOC = "expandable_segments:True"
_LLAMA_FACTORY_ALLOC_SINCE = "0.9.3"
_ENABLED = ("true", "y", "1")  # extras/misc.py is_env_enabled


def _llama_factory_command(words: list[str], env: dict[str, str], cwd: str | None) -> Launch:
    """``[NPROC_PER_NODE=8] [FORCE_TORCHRUN=1] llamafactory-cli train config.yaml [key=value ...]`` (or ``lmf``, or
    ``--key value`` flags instead of a file): hparams/parser.py read_args takes a YAML/JSON file with OmegaConf
    ``key=value`` overrides after it, else the flags (HfArgumentParser)."""
    program = os.path.basename(words[0])
    command = words[1] if len(words) > 1 else ""
    if command != "train":
        raise LaunchError(f"launch command: {program} {shown(command)} is not the LLaMA-Factory training command "
                          f"zeroadvisor reads ({program} train CONFIG.yaml)")
    source, base, args = _arguments_file(words[2:], cwd)
    given, origin, ignored = _script_arguments(args, overrides=bool(base), reads=lambda key: True)
    notes = _ignored_notes(f"{program} train arguments", ignored)
    data: JSONObject = {**base, **{key: _scalar(value) for key, value in given.items()}}
    labels = {**{key: f"{key} in {source}" for key in base}, **origin}
    training = from_mapping(data, source, "llama-factory", origin_of=lambda key: labels.get(key, key))
    force = env.get("FORCE_TORCHRUN", "0").lower() in _ENABLED
    nodes = count(env["NNODES"], "NNODES") if "NNODES" in env else 1
    per_node = count(env["NPROC_PER_NODE"], "NPROC_PER_NODE") if "NPROC_PER_NODE" in env else None
    visible = _visible(env)  # get_device_count(): the GPUs it finds (None: the machine's, not known here)
    if visible == 1 and not force:  # one GPU found: run_exp in this process, whatever NPROC_PER_NODE says
        if training.deepspeed is not None:
            raise LaunchError(f"launch command: {program} train with one GPU runs one process without "
                              "FORCE_TORCHRUN, and LLaMA-Factory refuses DeepSpeed there (\"Please use "
                              "`FORCE_TORCHRUN=1` to launch DeepSpeed training.\", hparams/parser.py "
                              "get_train_args): put FORCE_TORCHRUN=1 before it")
        world = World(1, f"{program} train with one GPU (CUDA_VISIBLE_DEVICES) runs one process", 1)
    elif per_node is None and visible is None:
        world = World(None, f"{program} train runs torchrun over every GPU of the machine it runs on",
                      missing=f"NPROC_PER_NODE=N before {program} in the launch command")
    else:
        each = per_node if per_node is not None else visible or 1
        origin_words = f"NPROC_PER_NODE={each}" if per_node is not None else f"CUDA_VISIBLE_DEVICES ({each} GPU(s))"
        world = World(each * nodes, f"{origin_words} x {nodes} node(s) ({_LLAMA_FACTORY_CLI})", each)
    launcher = "python" if visible == 1 and not force else "torchrun"
    cli_env = None
    if launcher == "torchrun" and env.get("OPTIM_TORCH", "1").lower() in _ENABLED:
        cli_env = CliEnv(((ALLOC_CONF, _LLAMA_FACTORY_ALLOC),), TrainerFamily.LLAMA_FACTORY, _LLAMA_FACTORY_ALLOC_SINCE)
    return Launch(launcher, world.size, world.origin, f"{program} train", training, tuple(notes), world.per_node,
                  world_missing=world.missing, env=tuple(env.items()), cli_env=cli_env)


def _scalar(value: str | bool) -> JSONValue:
    """A ``key=value`` override or flag value as LLaMA-Factory types it: OmegaConf reads the text as YAML, and
    HfArgumentParser converts by the field's type, which YAML's scalars match for the numbers and booleans read
    (quantization_bit 8, bf16 true); text that is no YAML scalar stays text."""
    if isinstance(value, bool):
        return value
    try:
        parsed = yaml.safe_load(value) if len(value) <= _SCALAR_CHARS else value
    except yaml.YAMLError:
        return value
    return parsed if isinstance(parsed, (str, int, float, bool)) else value


_SCALAR_CHARS = 200  # a value longer than any number or flag: kept as text, never parsed


# axolotl's CLI (axolotl/cli/main.py train, cli/utils/train.py launch_training @ 067b021): ``axolotl train CONFIG``
# runs ``accelerate launch [--num_processes N] [ARGS after --] -m axolotl.cli.train CONFIG [options]`` (--launcher
# accelerate, the default), ``torchrun [ARGS after --] -m axolotl.cli.train CONFIG`` (--launcher torchrun), or trains
# in this process (--launcher python).
_AXOLOTL_CLI = "axolotl/cli/utils/train.py launch_training"
_AXOLOTL_LAUNCHERS = ("accelerate", "torchrun", "python")


def _axolotl_command(words: list[str], env: dict[str, str], cwd: str | None) -> Launch:
    """``axolotl train config.yml [--launcher L] [--num-processes N] [--key value ...] [-- LAUNCHER ARGS]``: read as
    the launch command it runs (_AXOLOTL_CLI)."""
    command = words[1] if len(words) > 1 else ""
    if command != "train":
        raise LaunchError(f"launch command: axolotl {shown(command)} is not the axolotl training command zeroadvisor "
                          "reads (axolotl train CONFIG.yml)")
    rest = words[2:]
    cut = rest.index("--") if "--" in rest else len(rest)
    own, launcher_args = rest[:cut], rest[cut + 1:]
    options: dict[str, str] = {}
    script: list[str] = []
    index = 0
    while index < len(own):
        flag, equals, value = own[index].partition("=")
        name = flag.replace("-", "_")
        if name in ("__launcher", "__num_processes", "__cloud", "__sweep", "__main_process_port"):
            if not equals and index + 1 >= len(own):
                raise LaunchError(f"launch command: axolotl train {flag} needs a value")
            options[name[2:]] = value if equals else own[index + 1]
            index += 1 if equals else 2
        else:
            script.append(own[index])
            index += 1
    if "sweep" in options or "cloud" in options:
        which = "--sweep trains one run per permutation of its file" if "sweep" in options else \
            "--cloud trains on the machines its file configures"
        raise LaunchError(f"launch command: axolotl train {which}; check each run's config with its own cluster "
                          "(--gpus, --gpu) and the launch command it runs")
    config = next((word for word in script if not word.startswith("-")), None)
    if config is None:
        raise LaunchError("launch command: axolotl train names no config file (axolotl train CONFIG.yml)")
    script.remove(config)
    launcher = options.get("launcher", "accelerate")
    if launcher not in _AXOLOTL_LAUNCHERS:
        raise LaunchError(f"launch command: axolotl train --launcher expects one of {', '.join(_AXOLOTL_LAUNCHERS)}, "
                          f"got {shown(launcher)}")
    internal = [word for key in ("main_process_port", "num_processes") if key in options
                for word in (f"--{key}", options[key])]
    entry = ["-m", "axolotl.cli.train", config, *script]
    runs = {"accelerate": ["accelerate", "launch", *internal, *launcher_args, *entry],
            "torchrun": ["torchrun", *launcher_args, *entry], "python": ["python", *entry]}[launcher]
    launch = parse_launch(runs, cwd)
    runner = "accelerate launch" if launcher == "accelerate" else launcher
    return replace(launch, notes=(f"axolotl train runs {runner} -m axolotl.cli.train ({_AXOLOTL_CLI})",
                                  *launch.notes), env=tuple(env.items()))


# ray job submit [options] -- ENTRYPOINT (OpenRLHF's documented launch), trl CMD, swift CMD
_NAMED_TRAINERS: dict[str, Callable[[list[str], dict[str, str], str | None], Launch]] = {
    "ray": _ray_job, "trl": _trl_command, "swift": _swift_command, "llamafactory-cli": _llama_factory_command,
    "lmf": _llama_factory_command, "axolotl": _axolotl_command}


def _openrlhf_entry(script: str, module: str) -> str | None:
    """OpenRLHF's entry point (``openrlhf.cli.train_dpo``) a module or script path names, None for others."""
    name = module or script.replace(os.sep, "/").removesuffix(".py").replace("/", ".")
    head, _, tail = name.rpartition(".")
    if head.endswith("openrlhf.cli") and tail in method_reader.OPENRLHF_MODULES:
        return f"openrlhf.cli.{tail}"
    return None


OPENRLHF_BUILDS_CONFIG = ("OpenRLHF builds its DeepSpeed config from its flags (openrlhf/utils/deepspeed/"
                          "deepspeed_utils.py get_train_ds_config), not from a file")


def _openrlhf_launch(launch: Launch, entry: str, words: list[str]) -> Launch:
    """OpenRLHF's flags (0.8 openrlhf/cli/train_*.py argparse; the 0.10+ dotted spellings): the TrainingArguments
    the Trainer would hold, the method, and for train_ppo_ray the actor's world (its Ray placement)."""
    words = [_undotted(word) for word in words]
    given, origin, ignored = _script_arguments(words, overrides=False)
    data: JSONObject = dict(given)
    labels = dict(origin)
    for old, new in (("pretrain", "model_name_or_path"), ("max_len", "max_length")):
        if old in data:
            data[new], labels[new] = data[old], labels[old]
    dtype = data.pop("param_dtype", None)
    if dtype is not None:  # --param_dtype bf16|fp16 (v0.9.2 on, default bf16): the models' and DeepSpeed's dtype
        for half in ("bf16", "fp16"):
            data[half], labels[half] = str(dtype).strip().lower() == half, labels["param_dtype"]
    data.update({key: _number(value) for key, value in given.items() if key in SEQUENCE_KEYS})
    if "max_len" in given:
        data["max_length"] = _number(given["max_len"])

    def where(key: str) -> str:
        return labels.get(key, f"--{key}")

    training = from_mapping(data, _COMMAND_LINE, "openrlhf", where)
    method = method_reader.read_openrlhf(entry, data, where)
    training = replace(training, method=method)
    notes = [*launch.notes, *_ignored_notes("OpenRLHF flags", ignored)]
    flags = _openrlhf_flags(entry, given, labels)  # the counts read once, as argparse's int
    stage_number = flags.values.get("zero_stage")
    if not isinstance(stage_number, int):
        stage_number = None
    elif stage_number > 3:
        raise LaunchError(f"launch command: {labels['zero_stage']} {stage_number}: expected a ZeRO stage 0 to 3")
    launch = replace(launch, training=training, notes=tuple(notes), builds_config=OPENRLHF_BUILDS_CONFIG,
                     stage=stage_number, stage_from=labels.get("zero_stage", ""), openrlhf_flags=flags)
    if entry.endswith("_ray"):
        world, actor = _ray_actor_world(data, labels)
        _ray_placement_asserts(method.setup, actor, data, labels)
        return replace(launch, world_size=world.size, world_from=world.origin, per_node=world.per_node,
                       world_missing="")
    return launch


def _openrlhf_flags(entry: str, given: Mapping[str, JSONValue], labels: dict[str, str]) -> OpenRLHFFlags:
    """The flags OpenRLHF's DeepSpeed config follows from (config/openrlhf_config.py), each count a whole number as
    argparse's int reads it (else one line, exit 2)."""
    values = {key: given[key] for key in OPENRLHF_CONFIG_FLAGS if key in given}
    for key in OPENRLHF_COUNT_FLAGS:
        if key in values:  # given without a value too: argparse wants one
            values[key] = whole("" if values[key] is None else str(values[key]), labels.get(key, f"--{key}"))
    norm = values.get("max_norm")
    if norm is not None:  # argparse's float
        try:
            values["max_norm"] = float(str(norm))
        except ValueError:
            raise LaunchError(f"launch command: {labels.get('max_norm', '--max_norm')} expects a number, got "
                              f"{shown(norm)}") from None
    return OpenRLHFFlags(entry, values)


def _undotted(word: str) -> str:
    """``--ref.num_nodes`` (OpenRLHF 0.10+) as its 0.8 spelling ``--ref_num_nodes``."""
    flag, equals, value = word.partition("=")
    name = method_reader.DOTTED.get(flag[2:]) if flag.startswith("--") else None
    return f"--{name}{equals}{value}" if name else word


def _ray_placement_asserts(setup: MethodSetup, actor: tuple[int, int], data: JSONObject,
                           labels: dict[str, str]) -> None:
    """What train_ppo_ray asserts of its placement before it builds a model (openrlhf/cli/train_ppo_ray.py train @
    v0.8.5, the same at v0.11.0 with the dotted names), on the setup read_openrlhf read: a LaunchError, as the run
    stops there.

    * --colocate_actor_ref or --colocate_all_models with a reference model (--init_kl_coef > 0, default 0.01): the
      reference group's nodes and GPUs per node are the actor's ("num_nodes and num_gpus_per_node must be the same
      when colocate actor and ref model.");
    * --colocate_all_models with vLLM engines (not --async_train): the actor's GPUs are the engines' x their tensor
      parallel size;
    * --colocate_critic_reward with a critic (--advantage_estimator gae, the default): the reward group is the
      critic's."""
    if (setup.colocate_actor_ref or setup.colocate_all_models) and setup.use_reference is not False:
        ref = ray_group(setup, ModelRole.REFERENCE)
        if ref != actor:
            raise LaunchError(f"launch command: the reference colocated with the actor needs the actor's {actor[0]} x "
                              f"{actor[1]} GPUs, not {ref[0]} x {ref[1]} (--ref_num_nodes, --ref_num_gpus_per_node): "
                              "train_ppo_ray asserts \"num_nodes and num_gpus_per_node must be the same when colocate "
                              "actor and ref model.\"")
    engines = setup.generation.vllm_num_gpus  # --vllm_num_engines x --vllm_tensor_parallel_size (None: none)
    async_train = data.get("async_train") is not None and as_bool(data["async_train"], labels["async_train"])
    if setup.colocate_all_models and engines and not async_train and engines != actor[0] * actor[1]:
        n, tp = data.get("vllm_num_engines"), data.get("vllm_tensor_parallel_size", 1)
        raise LaunchError(f"launch command: --colocate_all_models puts the vLLM engines on the actor's "
                          f"{actor[0] * actor[1]} GPUs, but {n} engine(s) x tensor parallel {tp} is {engines}: "
                          "train_ppo_ray asserts actor_num_nodes * actor_num_gpus_per_node == vllm_num_engines * "
                          "vllm_tensor_parallel_size")
    critic = not any(p.role == ModelRole.CRITIC and p.loaded is False for p in setup.placements)  # gae only
    if setup.colocate_critic_reward and critic:
        mine, reward = ray_group(setup, ModelRole.CRITIC), ray_group(setup, ModelRole.REWARD)
        if mine != reward:
            raise LaunchError(f"launch command: the reward model colocated with the critic needs the critic's "
                              f"{mine[0]} x {mine[1]} GPUs, not {reward[0]} x {reward[1]} (--reward_num_nodes, "
                              "--reward_num_gpus_per_node): train_ppo_ray asserts \"num_nodes and num_gpus_per_node "
                              "must be the same when colocate critic and reward model.\"")


def _ray_actor_world(data: JSONObject, labels: dict[str, str]) -> tuple[World, tuple[int, int]]:
    """train_ppo_ray.py: the actor (the model trained) runs on --actor_num_nodes x --actor_num_gpus_per_node GPUs
    (argparse defaults 1 and 8); the other models' GPUs are theirs (config/method.py Placement)."""
    nodes = count(str(data.get("actor_num_nodes", RAY_GROUP_NODES)),
                  labels.get("actor_num_nodes", "--actor_num_nodes"))
    each = count(str(data.get("actor_num_gpus_per_node", RAY_GROUP_GPUS_PER_NODE)),
                 labels.get("actor_num_gpus_per_node", "--actor_num_gpus_per_node"))
    said = "given" if "actor_num_gpus_per_node" in data else "OpenRLHF's default"
    if nodes * each > MAX_GPUS:
        raise LaunchError(f"launch command: {nodes} x {each} actor GPUs is more than any cluster has (at most "
                          f"{MAX_GPUS:,})")
    return World(nodes * each, f"the actor's {nodes} node(s) x {each} GPU(s) ({said}; train_ppo_ray places it with "
                               "Ray)", each), (nodes, each)


def _launcher(words: list[str]) -> tuple[str, list[str]]:
    program = os.path.basename(words[0])
    if program in ("deepspeed", "torchrun"):
        return program, words[1:]
    if program == "accelerate":
        if words[1:2] != ["launch"]:
            raise LaunchError(f"launch command: only 'accelerate launch' runs a script, got "
                              f"{shown(shlex.join(words[:2]))}")
        return "accelerate", words[2:]
    if _PYTHON.match(program):
        return "python", words[1:]
    raise LaunchError(f"launch command: {shown(words[0])} is not a launcher zeroadvisor reads (deepspeed, torchrun, "
                      "accelerate launch, python, trl, swift, llamafactory-cli, axolotl, ray job submit)")


def _split(launcher: Launcher, words: list[str]) -> tuple[dict[str, str | bool], str, list[str], str]:
    """(launcher options, the script or module, the script's arguments, the module name or "")."""
    options: _Options = {}
    module_next = False
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            index += 1
            break
        if not word.startswith("-") or word == "-":
            break
        flag, equals, value = word.partition("=")
        if flag in launcher.flags:
            options[flag] = True
            module_next = module_next or flag in launcher.module_flags
            index += 1
            continue
        if launcher.name == "python" and flag == "-m" and not equals:  # python -m MODULE args
            module_next = True
            index += 1
            break
        if equals:
            options[flag] = value
            index += 1
        elif index + 1 < len(words):
            options[flag] = words[index + 1]
            index += 2
        else:
            raise LaunchError(f"launch command: {launcher.name} option {flag} needs a value")
    if index >= len(words):
        return options, "", [], ""
    script = words[index]
    return options, script, words[index + 1:], script if module_next else ""


def _int_option(options: _Options, names: tuple[str, ...], launcher: str, *, zero: bool = False) -> int | None:
    """The count the first of ``names`` gives (``count``; ``zero``: 0 allowed, where the launcher reads 0 as
    "not given"), None where none is given."""
    for name in names:
        if name in options:
            return count(str(options[name]), f"{launcher} {name}", zero=zero)
    return None


# ASCII digits: str.isdigit() also takes "²" and other digits int() refuses.
_DIGITS = re.compile(r"[0-9]+")
# Whole numbers of at most this many digits are read (int() refuses more than 4,300, sys.get_int_max_str_digits):
# past any count, length or step number a launch command writes (the int64 range has 19).
_NUMBER_DIGITS = 18


def whole(text: str, option: str) -> int:
    """The whole number (ASCII digits, at most _NUMBER_DIGITS) the launch command writes after ``option``."""
    stripped = text.strip()
    if not _DIGITS.fullmatch(stripped):
        raise LaunchError(f"launch command: {option} expects a whole number, got {shown(text)}")
    digits = stripped.lstrip("0") or "0"
    if len(digits) > _NUMBER_DIGITS:
        raise LaunchError(f"launch command: {option} {shown(stripped)} is larger than any value it takes")
    return int(digits)


def count(text: str, option: str, *, zero: bool = False) -> int:
    """A count of processes, GPUs or nodes the launch command writes after ``option``: a whole number of at least
    1 (0 too with ``zero``) and at most MAX_GPUS (config/limits.py); LaunchError otherwise."""
    try:
        value = whole(text, option)
    except LaunchError:
        if _DIGITS.fullmatch(text.strip()):  # digits past int64: past the bound too
            value = MAX_GPUS + 1
        else:
            raise
    if value > MAX_GPUS:
        raise LaunchError(f"launch command: {option} {shown(text.strip())} is more than any cluster has (at most "
                          f"{MAX_GPUS:,})")
    if value == 0 and not zero:
        raise LaunchError(f"launch command: {option} 0 starts no process")
    return value


@dataclass(frozen=True)
class World:
    """What a launch command says of its processes: ``size`` in all (None: left to the machine it runs on),
    ``per_node`` on each machine (None: not stated, or not the same on all); ``missing``: where ``size`` is
    None, the launcher option that would state it."""

    size: int | None
    origin: str  # how the size follows from the command, for messages
    per_node: int | None = None
    missing: str = ""


def _even(counts: list[int]) -> int | None:
    """The processes per machine where every machine runs the same number."""
    return counts[0] if counts and len(set(counts)) == 1 else None


@dataclass(frozen=True)
class _Resources:
    """The deepspeed launcher's resource options (runner.py parse_args): 0 and "" where not given."""

    nodes: int
    gpus: int
    include: str
    exclude: str


def _deepspeed_world(options: _Options, env: dict[str, str], cwd: str | None, notes: list[str]) -> World:
    """deepspeed/launcher/runner.py main: the hostfile's hosts and slots (fetch_hostfile, default /job/hostfile),
    narrowed by --include/--exclude (parse_resource_filter), or the first --num_nodes hosts with --num_gpus slots
    each (apply_num_nodes_and_gpus); without a hostfile, the local GPUs (CUDA_VISIBLE_DEVICES when set)."""
    # runner.py acts on --num_nodes/--num_gpus only when > 0 (its default is -1): 0 is "not given" here too
    nodes = _int_option(options, ("--num_nodes",), "deepspeed", zero=True) or 0
    gpus = _int_option(options, ("--num_gpus", "--num_accelerators"), "deepspeed", zero=True) or 0
    include, exclude = (str(options.get(f"--{n}", options.get(f"-{n[0]}", ""))) for n in ("include", "exclude"))
    if (include or exclude) and (nodes or gpus):
        raise LaunchError("launch command: deepspeed --num_nodes/--num_gpus with --include/--exclude: DeepSpeed "
                          "raises 'Cannot specify num_nodes/gpus with include/exclude'")
    if include and exclude:
        raise LaunchError("launch command: deepspeed --include and --exclude: DeepSpeed raises 'include_str and "
                          "exclude_str are mutually exclusive'")
    wanted = _Resources(nodes, gpus, include, exclude)
    hostfile = options.get("--hostfile", options.get("-H"))
    if isinstance(hostfile, str):
        return _hostfile_world(hostfile, cwd, wanted, notes)
    return _local_world(wanted, env)


def _hostfile_world(hostfile: str, cwd: str | None, wanted: _Resources, notes: list[str]) -> World:
    pool = _hostfile(hostfile, cwd)
    if pool is None:
        if wanted.gpus and wanted.nodes:
            notes.append(f"hostfile {hostfile} is not here: its first {wanted.nodes} host(s) taken with --num_gpus "
                         f"{wanted.gpus} each, as DeepSpeed takes them")
            return World(wanted.gpus * wanted.nodes, f"--num_gpus {wanted.gpus} x --num_nodes {wanted.nodes}",
                         wanted.gpus)
        return World(None, f"the hostfile {hostfile} (its hosts and their GPU slots) is not here to read",
                     missing=f"run the check where {hostfile} is, or give --num_gpus and --num_nodes in the launch "
                             "command")
    if wanted.include:
        pool = _filtered(wanted.include, pool, include=True) or {}
        return World(sum(pool.values()), f"--include {wanted.include}", _even(list(pool.values())))
    if wanted.exclude:
        pool = _filtered(wanted.exclude, pool, include=False) or {}
    hosts = list(pool.values())[:wanted.nodes] if wanted.nodes else list(pool.values())
    slots = [wanted.gpus or count for count in hosts]
    return World(sum(slots), f"hostfile {hostfile}: {len(slots)} node(s), {'+'.join(map(str, slots))} GPU(s)",
                 _even(slots))


def _local_world(wanted: _Resources, env: dict[str, str]) -> World:
    """No hostfile: one machine's GPUs (``localhost`` in --include)."""
    if wanted.include:
        slots = _filtered(wanted.include, None, include=True)
        if slots is not None:
            return World(sum(slots.values()), f"--include {wanted.include}", _even(list(slots.values())))
        return World(None, f"deepspeed --include {wanted.include} takes every GPU of a host named without slots",
                     missing="list each host's slots in --include (host:0,1,...)")
    if wanted.exclude:
        return World(None, f"deepspeed --exclude {wanted.exclude} runs on the machine's GPUs but those it names",
                     missing="--include localhost:SLOTS in the launch command")
    count = wanted.nodes or 1
    per_machine = wanted.gpus or _visible(env)
    if per_machine:
        origin = f"--num_gpus {wanted.gpus}" if wanted.gpus else f"CUDA_VISIBLE_DEVICES ({per_machine} GPU(s))"
        return World(per_machine * count, f"{origin} x {count} node(s)", per_machine if wanted.nodes else None)
    return World(None, "deepspeed without --num_gpus runs one process per GPU of the machine it runs on",
                 missing="--num_gpus N in the launch command")


def _hostfile(path: str, cwd: str | None) -> dict[str, int] | None:
    """runner.py _parse_hostfile: ``host slots=N`` lines; '#' comments and blank lines skipped (None: no such
    file here, as fetch_hostfile's ``os.path.isfile``)."""
    full = os.path.join(cwd or "", path)
    if not os.path.isfile(full):
        return None
    try:
        with open(full, encoding="utf-8") as handle:
            lines = handle.read(1 << 20).splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise LaunchError(f"{path}: hostfile cannot be read: {getattr(err, 'strerror', None) or err}") from None
    pool: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.search(r"^(\S+)\s+slots=([0-9]+)", line)
        if not match:
            raise LaunchError(f"{path}:{number}: hostfile line is not 'host slots=N' (DeepSpeed rejects it)")
        if match.group(1) in pool:
            raise LaunchError(f"{path}:{number}: host {match.group(1)!r} listed twice (DeepSpeed rejects it)")
        pool[match.group(1)] = count(match.group(2), f"{path}:{number}: slots", zero=True)
    if not pool:
        raise LaunchError(f"{path}: hostfile lists no host (DeepSpeed rejects it)")
    return pool


def _filtered(spec: str, pool: dict[str, int] | None, *, include: bool) -> dict[str, int] | None:
    """runner.py parse_resource_filter: ``host:0,1@host2`` kept (``include``) or removed from ``pool``; host ->
    the GPUs left. None: a host without slots and no hostfile to count its GPUs."""
    named: dict[str, set[str] | None] = {}
    for part in spec.split("@"):
        host, _, listed = part.partition(":")
        named[host] = {slot for slot in listed.split(",") if slot} or None
    if pool is not None:
        unknown = [host for host in named if host not in pool]
        if unknown:
            raise LaunchError(f"launch command: deepspeed --{'include' if include else 'exclude'} {spec}: DeepSpeed "
                              f"raises \"Hostname '{unknown[0]}' not found in hostfile\"")
    if include:
        if any(slots is None for slots in named.values()) and pool is None:
            return None
        return {host: len(slots) if slots is not None else (pool or {})[host] for host, slots in named.items()}
    left = dict(pool or {})
    for host, slots in named.items():
        left[host] = 0 if slots is None else max(left[host] - len(slots), 0)
    return {host: count for host, count in left.items() if count}


def _visible(env: dict[str, str]) -> int | None:
    """The GPUs CUDA_VISIBLE_DEVICES lets the launcher see (None: not set); set to none, the launcher finds no
    GPU and starts no process (deepspeed: "Unable to proceed, no GPU resources available"), a LaunchError."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    visible = len([d for d in value.split(",") if d.strip()])
    if not visible:
        raise LaunchError(f"launch command: CUDA_VISIBLE_DEVICES={shown(value)} shows the launcher no GPU: it starts "
                          "no process")
    return visible


def _torchrun_world(options: _Options, env: dict[str, str], cwd: str | None, notes: list[str]) -> World:
    """torch/distributed/run.py: --nnodes N or MIN:MAX (elastic: up to MAX), --nproc-per-node N or
    gpu/auto (every visible GPU); --standalone is one node."""
    nnodes_text = str(options.get("--nnodes", "1"))
    low, colon, high = nnodes_text.partition(":")
    if not (_DIGITS.fullmatch(low) and (not colon or _DIGITS.fullmatch(high))):
        raise LaunchError(f"launch command: torchrun --nnodes expects N or MIN:MAX, got {shown(nnodes_text)}")
    nodes = count(high or low, "torchrun --nnodes")
    if high and high != low:
        notes.append(f"torchrun --nnodes {nnodes_text} is elastic: checked at its maximum, {nodes} node(s)")
    per_node = next((str(options[n]) for n in ("--nproc-per-node", "--nproc_per_node") if n in options), "1")
    if per_node in ("gpu", "auto", "cuda"):
        visible = _visible(env)
        if visible is not None:
            return World(visible * nodes, f"CUDA_VISIBLE_DEVICES ({visible} GPU(s)) x {nodes} node(s)", visible)
        return World(None, f"torchrun --nproc-per-node {per_node} runs one process per GPU of the machine it runs on",
                     missing="--nproc-per-node N in the launch command")
    if not _DIGITS.fullmatch(per_node.strip()):
        raise LaunchError(f"launch command: torchrun --nproc-per-node expects a number or gpu/auto, got "
                          f"{shown(per_node)}")
    each = count(per_node, "torchrun --nproc-per-node")
    return World(each * nodes, f"--nproc-per-node {each} x {nodes} node(s)", each)


def _accelerate_config_option(options: _Options) -> str | None:
    config = options.get("--config_file", options.get("--config-file"))
    return config if isinstance(config, str) else None


def _accelerate_overrides(options: _Options) -> tuple[Override, ...]:
    """The options of ACCELERATE_OVERRIDES the command gives, typed as accelerate's argparse types them."""
    found: list[Override] = []
    for name, (path, kind) in ACCELERATE_OVERRIDES.items():
        for flag in (f"--{name}", f"--{name.replace('_', '-')}"):
            if isinstance(options.get(flag), str):
                text = str(options[flag])
                value = whole(text, f"accelerate launch {flag}") if kind is int else text
                found.append(Override(flag, path, text if value is None else value))
                break
    return tuple(found)


def overridden(data: Mapping[str, JSONValue], overrides: tuple[Override, ...]) -> JSONObject:
    """``data`` (an Accelerate config) as ``accelerate launch`` holds it with ``overrides`` over its keys."""
    out: JSONObject = dict(data)
    for override in overrides:
        *outer, key = override.path
        target = out
        for name in outer:
            inner = target.get(name)
            nested: JSONObject = dict(inner) if isinstance(inner, dict) else {}
            target[name] = nested
            target = nested
        target[key] = override.value
    return out


def override_notes(name: str, data: JSONObject, overrides: tuple[Override, ...]) -> list[str]:
    """One note for each launch option that replaces a different value of the Accelerate config ``data``'s
    (``name``: the config as the report names it)."""
    notes = []
    for override in overrides:
        held: object = data
        for key in override.path:
            held = held.get(key) if isinstance(held, dict) else None
        if held != override.value:
            stated = "unset" if held is None else repr(held)
            notes.append(f"{name}: {override.option} {override.value} from the launch command used over "
                         f"{'.'.join(override.path)} ({stated} in the file), as accelerate launch does")
    return notes


def _accelerate_world(options: _Options, env: dict[str, str], cwd: str | None, notes: list[str]) -> World:
    """accelerate launch: --num_processes is the total over all machines (launch.py _validate_launch_command),
    --num_machines the machines; each one the command leaves out comes from the config file."""
    count = _int_option(options, ("--num_processes", "--num-processes"), "accelerate launch")
    # launch.py takes num_machines 0 as one machine (it compares num_machines > 1)
    machines = _int_option(options, ("--num_machines", "--num-machines"), "accelerate launch", zero=True)
    config = _accelerate_config_option(options)
    stated, stated_machines = _accelerate_config_world(config, cwd) if config is not None else (None, None)
    machines = machines or stated_machines or 1
    total = count if count is not None else stated
    if total is not None:
        origin = f"--num_processes {count}" if count is not None else f"num_processes in {config}"
        if machines > 1:
            origin += f" over {machines} machines"
        return World(total, origin, total // machines if total % machines == 0 else None)
    if config is not None:
        return World(None, f"{config} sets no num_processes",
                     missing=f"--num_processes N in the launch command, or num_processes in {config}")
    return World(None, "accelerate launch without --num_processes or --config_file takes the default config of "
                       "the machine it runs on", missing="--num_processes N or --config_file FILE in the launch "
                                                         "command")


def _accelerate_config_world(path: str, cwd: str | None) -> tuple[int | None, int | None]:
    """(num_processes, num_machines) of an Accelerate config file; LaunchError where it cannot be read."""
    from zeroadvisor.config.reader import InputError, read_document
    from zeroadvisor.config.source import ParseError

    try:
        document = read_document(os.path.join(cwd or "", path), path)
    except InputError as err:
        raise LaunchError(f"accelerate launch --config_file {err}") from None
    except ParseError as err:
        where = f"{path}:{err.line}:{err.column}" if err.line else path
        raise LaunchError(f"{where}: {err.message}") from None
    data = document.data if isinstance(document.data, dict) else {}

    def whole(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    return whole("num_processes"), whole("num_machines")


def _python_world(options: _Options, env: dict[str, str], cwd: str | None, notes: list[str]) -> World:
    return World(1, "python runs one process")


WORLD = {"deepspeed": _deepspeed_world, "torchrun": _torchrun_world, "accelerate": _accelerate_world,
         "python": _python_world}


# -- the script's arguments ---------------------------------------------------------------------

def script_training_args(words: list[str], cwd: str | None = None, *, config_flag: bool = False) -> TrainingArgs:
    """The Trainer script's arguments as TrainingArgs (unknown ones ignored, named in one note). ``config_flag``:
    a TRL script, whose TrlParser.parse_args_and_config reads ``--config FILE`` (YAML) under its other flags."""
    source, base, words = _arguments_file(words, cwd)
    if source == _COMMAND_LINE and config_flag and "--config" in words[:-1]:
        at = words.index("--config")
        source = words[at + 1]
        base = read_mapping(os.path.join(cwd or "", source), source)
        words = words[:at] + words[at + 2:]
    given, origin, ignored = _script_arguments(words, overrides=bool(base) and not config_flag)
    notes = _ignored_notes("script arguments", ignored)
    data: JSONObject = {**base, **given}
    data.update({key: _number(value) for key, value in given.items() if key in SEQUENCE_KEYS})
    labels = {**{key: f"{key} in {source}" for key in base}, **origin}
    return from_mapping(data, source, origin_of=lambda key: labels.get(key, key), notes=tuple(notes))


def _arguments_file(words: list[str], cwd: str | None) -> tuple[str, JSONObject, list[str]]:
    """(where the arguments come from, the arguments file's mapping, the words after it) where the first word is a
    YAML/JSON arguments file (HfArgumentParser.parse_yaml_file, LLaMA-Factory's read_args); else the launch command,
    no mapping and every word."""
    if words and words[0].endswith(_ARGS_FILES) and not words[0].startswith("-"):
        return words[0], read_mapping(os.path.join(cwd or "", words[0]), words[0]), words[1:]
    return _COMMAND_LINE, {}, words


_COMMAND_LINE = "the launch command"  # where arguments come from without an arguments file


def _ignored_notes(what: str, ignored: list[str]) -> list[str]:
    """The one note naming the arguments not read (the first eight), or none."""
    if not ignored:
        return []
    more = f" and {len(ignored) - 8} more" if len(ignored) > 8 else ""
    return [f"{what} zeroadvisor does not read were ignored: {', '.join(ignored[:8])}{more}"]


def _script_arguments(words: list[str], *, overrides: bool, reads: Callable[[str], bool] | None = None,
                      ) -> tuple[dict[str, str | bool], dict[str, str], list[str]]:
    """(the fields read from ``words``, the word each came from, the words not read). ``overrides``: the
    arguments follow an arguments file, so ``key=value`` words override its keys (OmegaConf.from_cli);
    ``reads``: which keys are read (default: the Trainer's and the method's, ``_reads``)."""
    reads = reads or _reads
    given: dict[str, str | bool] = {}
    origin: dict[str, str] = {}
    ignored: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if overrides and not word.startswith("-") and "=" in word:  # OmegaConf.from_cli key=value
            key, _, text = word.partition("=")
            given[key] = text
            origin[key] = word
        elif not word.startswith("--"):
            ignored.append(word)
        else:
            flag = word.partition("=")[0]
            key = flag[2:].replace("-", "_")
            value, index = _option_value(word, words, index)
            if key in peft_reader.LIST_KEYS and reads(key) and not word.partition("=")[1]:
                # nargs="+" (ms-swift's --target_modules q_proj v_proj): every word up to the next option
                more = []
                while index < len(words) and not words[index].startswith("-"):
                    more.append(words[index])
                    index += 1
                value = " ".join([str(value), *more]) if more else value
            if reads(key):
                given[key] = value
                origin[key] = flag
            else:
                ignored.append(flag)
                # an unread option's further values are its own (nargs="+": --reward_funcs accuracy format)
                while index < len(words) and not words[index].startswith("-") \
                        and not (overrides and "=" in words[index]):
                    index += 1
    return given, origin, ignored


def _option_value(word: str, words: list[str], index: int) -> tuple[str | bool, int]:
    """The value HfArgumentParser gives the option ``word`` (``--name`` or ``--name=value``) when the words
    after it start at ``words[index]``, and the index of the first word after its value."""
    flag, equals, attached = word.partition("=")
    key = flag[2:].replace("-", "_")
    if equals:
        return attached, index
    following = words[index] if index < len(words) else None
    if (TYPES.get(key) is bool or key in _EXTRA_BOOLS or key in method_reader.METHOD_BOOLS
            or key in peft_reader.SCRIPT_BOOLS or key in vision_freeze.LAUNCH_KEYS or key == VISION_CHECKPOINTING_KEY):
        # nargs="?", const=True: the next word is the value only when it is not an option
        if following is not None and not following.startswith("-"):
            return following, index + 1
        return True, index
    if following is not None and not following.startswith("--"):
        return following, index + 1
    if _reads(key):
        raise LaunchError(f"launch command: {flag} needs a value")
    return True, index


def _reads(key: str) -> bool:
    """Whether zeroadvisor reads the script argument ``key``: a TrainingArguments field or one of its own."""
    return (key in DEFAULTS or key in _EXTRA_KEYS or key in method_reader.METHOD_KEYS
            or key in peft_reader.SCRIPT_KEYS)


def _number(value: str | bool) -> str | bool | int:
    """A script argument of digits as the int HfArgumentParser's type=int makes of it; anything else as given
    (the Trainer's arguments check it: config/training_args.py), "²" and 5,000 digits too, which int() refuses."""
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()) and len(value.strip()) <= _NUMBER_DIGITS:
        return int(value)
    return value


"""A launch command, read as its launcher and the Trainer script's HfArgumentParser would read it.

``deepspeed``, ``torchrun`` (or ``python -m torch.distributed.run``), ``accelerate launch`` and ``python``
are recognised; what each launcher makes of its own options decides the world size (processes = GPUs x
nodes), and the script's arguments are TrainingArguments (config/training_args.py) as HfArgumentParser
parses them: ``--name value``, ``--name=value``, a bare ``--bf16`` (bool fields take an optional value,
transformers hf_argparser.py ``nargs="?", const=True``), dashes for underscores. A script whose only
argument is a ``.yaml``/``.yml``/``.json`` file reads its arguments from that file (HfArgumentParser's
parse_yaml_file/parse_json_file as LLaMA-Factory and axolotl scripts call them), with ``key=value``
overrides after it (LLaMA-Factory's OmegaConf.from_cli).

Each launcher's options that take NO value are listed (:data:`LAUNCHERS`); every other option takes one.
tests/oracle/test_hf_fill_oracle.py compares these lists with the launchers' own argparse parsers.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

from zeroadvisor.config.training_args import (
    DEEPSPEED_KEY,
    DEFAULTS,
    MODEL_KEYS,
    SEQUENCE_KEYS,
    TYPES,
    TrainerInputError,
    TrainingArgs,
    from_mapping,
    read_mapping,
)


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
_EXTRA_BOOLS = ("disable_gradient_checkpointing",)
_EXTRA_KEYS = (DEEPSPEED_KEY, *MODEL_KEYS, *SEQUENCE_KEYS, *_EXTRA_BOOLS)
# A launcher's options as the command gives them: the value, or True for an option that takes none.
_Options = dict[str, str | bool]


@dataclass(frozen=True)
class Launch:
    """What a launch command runs: ``world_size`` processes (None: the launcher takes every GPU it finds,
    which only the machine knows), the script and its TrainingArguments."""

    launcher: str
    world_size: int | None
    world_from: str  # how the world size follows from the command, for messages
    script: str
    training: TrainingArgs
    notes: tuple[str, ...] = ()


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
    launcher, rest = _launcher(words)
    options, script, script_args, module = _split(LAUNCHERS[launcher], rest)
    notes: list[str] = []
    if launcher == "python" and module in MODULE_LAUNCHERS:  # python -m torch.distributed.run ...
        launcher = MODULE_LAUNCHERS[module]
        options, script, script_args, module = _split(LAUNCHERS[launcher], script_args)
    if not script:
        raise LaunchError(f"launch command: {LAUNCHERS[launcher].name} runs no script (expected a script "
                          "path or -m module after its options)")
    world, world_from = WORLD[launcher](options, env, cwd, notes)
    training = script_training_args(script_args, cwd)
    return Launch(LAUNCHERS[launcher].name, world, world_from, script, training, tuple(notes))


def _launcher(words: list[str]) -> tuple[str, list[str]]:
    program = os.path.basename(words[0])
    if program in ("deepspeed", "torchrun"):
        return program, words[1:]
    if program == "accelerate":
        if words[1:2] != ["launch"]:
            raise LaunchError(f"launch command: only 'accelerate launch' runs a script, got "
                              f"{shlex.join(words[:2])!r}")
        return "accelerate", words[2:]
    if _PYTHON.match(program):
        return "python", words[1:]
    raise LaunchError(f"launch command: {words[0]!r} is not a launcher zeroadvisor reads (deepspeed, torchrun, "
                      "accelerate launch, python)")


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


def _int_option(options: _Options, names: tuple[str, ...], launcher: str) -> int | None:
    for name in names:
        if name in options:
            text = str(options[name])
            if not text.isdigit():
                raise LaunchError(f"launch command: {launcher} {name} expects a whole number, got {text!r}")
            return int(text)
    return None


def _deepspeed_world(options: _Options, env: dict[str, str], cwd: str | None,
                     notes: list[str]) -> tuple[int | None, str]:
    """deepspeed/launcher/runner.py main: the hostfile's hosts and slots (fetch_hostfile, default /job/hostfile),
    narrowed by --include/--exclude, then the first --num_nodes hosts with --num_gpus slots each
    (apply_num_nodes_and_gpus); without a hostfile, the local GPUs (CUDA_VISIBLE_DEVICES when set)."""
    nodes = _int_option(options, ("--num_nodes",), "deepspeed")
    gpus = _int_option(options, ("--num_gpus", "--num_accelerators"), "deepspeed")
    hostfile = options.get("--hostfile", options.get("-H"))
    pool = _hostfile(str(hostfile), cwd, notes) if isinstance(hostfile, str) else None
    include = options.get("--include", options.get("-i"))
    if isinstance(include, str) and include:
        counted = _include_slots(include)
        if counted is not None:
            return counted, f"--include {include}"
    if pool:
        hosts = list(pool.values())[:nodes] if nodes and nodes > 0 else list(pool.values())
        slots = [gpus if gpus and gpus > 0 else count for count in hosts]
        return sum(slots), f"hostfile {hostfile}: {len(slots)} node(s), {'+'.join(map(str, slots))} GPU(s)"
    nodes = nodes if nodes and nodes > 0 else 1
    if gpus and gpus > 0:
        return gpus * nodes, f"--num_gpus {gpus} x {nodes} node(s)"
    visible = _visible(env)
    if visible is not None:
        return visible * nodes, f"CUDA_VISIBLE_DEVICES ({visible} GPU(s)) x {nodes} node(s)"
    return None, "deepspeed without --num_gpus runs one process per local GPU"


def _hostfile(path: str, cwd: str | None, notes: list[str]) -> dict[str, int] | None:
    """runner.py _parse_hostfile: ``host slots=N`` lines; '#' comments and blank lines skipped."""
    full = os.path.join(cwd or "", path)
    try:
        with open(full, encoding="utf-8") as handle:
            lines = handle.read(1 << 20).splitlines()
    except OSError as err:
        notes.append(f"hostfile {path} not read ({err.strerror or err}): world size from the other options")
        return None
    pool: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = re.search(r"^(\S+)\s+slots=(\d+)", line)
        if not match:
            raise LaunchError(f"{path}:{number}: hostfile line is not 'host slots=N' (DeepSpeed rejects it)")
        if match.group(1) in pool:
            raise LaunchError(f"{path}:{number}: host {match.group(1)!r} listed twice (DeepSpeed rejects it)")
        pool[match.group(1)] = int(match.group(2))
    if not pool:
        raise LaunchError(f"{path}: hostfile lists no host (DeepSpeed rejects it)")
    return pool


def _include_slots(include: str) -> int | None:
    """``host:0,1@host2:2,3``: the listed slots (a host without slots means all of its GPUs: unknown)."""
    total = 0
    for part in include.split("@"):
        _, colon, slots = part.partition(":")
        if not colon or not slots:
            return None
        total += len([s for s in slots.split(",") if s])
    return total


def _visible(env: dict[str, str]) -> int | None:
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    return len([d for d in value.split(",") if d.strip()])


def _torchrun_world(options: _Options, env: dict[str, str], cwd: str | None,
                    notes: list[str]) -> tuple[int | None, str]:
    """torch/distributed/run.py: --nnodes N or MIN:MAX (elastic: up to MAX), --nproc-per-node N or
    gpu/auto (every visible GPU)."""
    nnodes_text = str(options.get("--nnodes", "1"))
    low, _, high = nnodes_text.partition(":")
    if not (low.isdigit() and (not high or high.isdigit())):
        raise LaunchError(f"launch command: torchrun --nnodes expects N or MIN:MAX, got {nnodes_text!r}")
    nodes = int(high or low)
    if high and high != low:
        notes.append(f"torchrun --nnodes {nnodes_text} is elastic: checked at its maximum, {nodes} node(s)")
    per_node = next((str(options[n]) for n in ("--nproc-per-node", "--nproc_per_node") if n in options), "1")
    if per_node.isdigit():
        return int(per_node) * nodes, f"--nproc-per-node {per_node} x {nodes} node(s)"
    if per_node in ("gpu", "auto", "cuda"):
        visible = _visible(env)
        if visible is not None:
            return visible * nodes, f"CUDA_VISIBLE_DEVICES ({visible} GPU(s)) x {nodes} node(s)"
        return None, f"torchrun --nproc-per-node {per_node} runs one process per local GPU"
    raise LaunchError(f"launch command: torchrun --nproc-per-node expects a number or gpu/auto, got {per_node!r}")


def _accelerate_world(options: _Options, env: dict[str, str], cwd: str | None,
                      notes: list[str]) -> tuple[int | None, str]:
    """accelerate launch: --num_processes is the total over all machines (launch.py _validate_launch_command);
    without it, the config file's num_processes."""
    count = _int_option(options, ("--num_processes", "--num-processes"), "accelerate launch")
    if count is not None:
        return count, f"--num_processes {count}"
    config = options.get("--config_file", options.get("--config-file"))
    if isinstance(config, str):
        value = _accelerate_config_processes(config, cwd, notes)
        if value is not None:
            return value, f"num_processes in {config}"
    return None, "accelerate launch without --num_processes takes its default config's process count"


def _accelerate_config_processes(path: str, cwd: str | None, notes: list[str]) -> int | None:
    from zeroadvisor.config.reader import InputError, read_document
    from zeroadvisor.config.source import ParseError

    try:
        document = read_document(os.path.join(cwd or "", path), path)
    except (InputError, ParseError) as err:
        notes.append(f"accelerate config {path} not read ({err}): world size unknown from it")
        return None
    data = document.data if isinstance(document.data, dict) else {}
    value = data.get("num_processes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _python_world(options: _Options, env: dict[str, str], cwd: str | None,
                  notes: list[str]) -> tuple[int | None, str]:
    return 1, "python runs one process"


WORLD = {"deepspeed": _deepspeed_world, "torchrun": _torchrun_world, "accelerate": _accelerate_world,
         "python": _python_world}


# -- the script's arguments ---------------------------------------------------------------------

def script_training_args(words: list[str], cwd: str | None = None) -> TrainingArgs:
    """The Trainer script's arguments as TrainingArgs (unknown ones ignored, named in one note)."""
    notes: list[str] = []
    base: dict[str, Any] = {}
    source = "the launch command"
    if words and words[0].endswith(_ARGS_FILES) and not words[0].startswith("-"):
        source = words[0]
        base = read_mapping(os.path.join(cwd or "", source), source)
        words = words[1:]
    given, origin, ignored = _script_arguments(words, overrides=bool(base))
    if ignored:
        notes.append(f"script arguments zeroadvisor does not read were ignored: {', '.join(ignored[:8])}"
                     + (f" and {len(ignored) - 8} more" if len(ignored) > 8 else ""))
    data = {**base, **given}
    data.update({key: _number(value) for key, value in given.items() if key in SEQUENCE_KEYS})
    labels = {**{key: f"{key} in {source}" for key in base}, **origin}
    return from_mapping(data, source, origin_of=lambda key: labels.get(key, key), notes=tuple(notes))


def _script_arguments(words: list[str], *, overrides: bool) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(the fields read from ``words``, the word each came from, the words not read). ``overrides``: the
    arguments follow an arguments file, so ``key=value`` words override its keys (OmegaConf.from_cli)."""
    given: dict[str, Any] = {}
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
            if _reads(key):
                given[key] = value
                origin[key] = flag
            else:
                ignored.append(flag)
    return given, origin, ignored


def _option_value(word: str, words: list[str], index: int) -> tuple[Any, int]:
    """The value HfArgumentParser gives the option ``word`` (``--name`` or ``--name=value``) when the words
    after it start at ``words[index]``, and the index of the first word after its value."""
    flag, equals, attached = word.partition("=")
    key = flag[2:].replace("-", "_")
    if equals:
        return attached, index
    following = words[index] if index < len(words) else None
    if TYPES.get(key) is bool or key in _EXTRA_BOOLS:
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
    return key in DEFAULTS or key in _EXTRA_KEYS


def _number(value: Any) -> Any:
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value

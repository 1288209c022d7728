"""The DeepSpeed config that ``accelerate launch --config_file FILE`` makes the training processes run.

Accelerate 1.15.0 does it in three steps, replayed here in order:

1. commands/launch.py ``_validate_launch_command`` copies the YAML's ``deepspeed_config:`` keys onto
   the launch arguments (mixed_precision from the top level, "no" when absent);
2. utils/launch.py ``prepare_deepspeed_cmd_env`` turns them into ACCELERATE_* environment
   variables, each ``str(value)`` (lower-cased for most). It sets no variable for the two
   ``offload_*_nvme_path`` keys, so the processes never see them;
3. utils/dataclasses.py ``DeepSpeedPlugin.__post_init__`` reads the environment back and builds
   the DeepSpeed config, from the plugin keys or from ``deepspeed_config_file``, and
   ``set_mixed_precision`` (called by AcceleratorState) adds the fp16/bf16 blocks.

What Accelerate raises on along the way is a :class:`Problem` at the YAML key that causes it.
``steps_per_print: inf`` (logging only; JSON has no infinity) is left out of the result.
The batch keys stay "auto": Accelerator._prepare_deepspeed fills them from the dataloader.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from zeroadvisor.config import accelerate as A
from zeroadvisor.config.source import Document
from zeroadvisor.jsontypes import JSONObject, JSONValue

AUTO = "auto"
DS = A.DEEPSPEED_SECTION

# DeepSpeedPlugin.__post_init__ plugin_to_config_mapping: plugin attribute -> DeepSpeed key it fills.
PLUGIN_TO_CONFIG: dict[str, str] = {
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "gradient_clipping": "gradient_clipping",
    "zero_stage": "zero_optimization.stage",
    "offload_optimizer_device": "zero_optimization.offload_optimizer.device",
    "offload_param_device": "zero_optimization.offload_param.device",
    "offload_param_nvme_path": "zero_optimization.offload_param.nvme_path",
    "offload_optimizer_nvme_path": "zero_optimization.offload_optimizer.nvme_path",
    "zero3_save_16bit_model": "zero_optimization.stage3_gather_16bit_weights_on_model_save",
}
# The keys prepare_deepspeed_cmd_env passes on (the nvme paths are not among them).
PASSED_ON = ("zero_stage", "gradient_accumulation_steps", "gradient_clipping", "offload_optimizer_device",
             "offload_param_device", "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_config_file")


@dataclass(frozen=True, slots=True)
class Problem:
    """Something Accelerate raises on (error) or silently does otherwise than written (warning)."""

    kind: str  # the rule that reports it (rules/accelerate.py)
    pointer: str  # the YAML key it is about
    message: str


@dataclass
class Launch:
    """What ``accelerate launch`` runs for one config."""

    deepspeed: bool  # distributed_type is DEEPSPEED
    ds_config: JSONObject | None = None  # None: Accelerate could not build it (see problems)
    origin: dict[str, str] = field(default_factory=dict)  # DeepSpeed pointer -> YAML pointer it comes from
    config_file: str | None = None  # the deepspeed_config_file read, as found
    config_document: Document | None = None  # that file, with positions
    world_size: int | None = None  # processes in all (num_processes is the total across machines)
    num_machines: int = 1
    per_node: int | None = None  # processes each machine starts
    mixed_precision: str = "no"
    precision_from_yaml: bool = False  # the YAML sets mixed_precision (else "no" or the script's)
    zero3_init: bool | None = None
    problems: list[Problem] = field(default_factory=list)

    def problem(self, kind: str, pointer: str, message: str) -> None:
        self.problems.append(Problem(kind, pointer, message))


def build(doc: Document, script_precision: str | None = None, cwd: str | None = None) -> Launch:
    """The launch of ``doc`` (an Accelerate config). ``script_precision`` ("no", "fp16", "bf16") is
    what the training script passes to ``Accelerator(mixed_precision=...)`` where the YAML sets
    none; ``cwd`` is where ``accelerate launch`` runs (a relative deepspeed_config_file is looked
    up beside the YAML first, then there)."""
    data = doc.data if isinstance(doc.data, dict) else {}
    launch = Launch(deepspeed=A.uses_deepspeed(data))
    _processes(data, launch)
    section = A.deepspeed_section(data)
    _precision(data, launch, script_precision)
    if not launch.deepspeed:
        return launch
    env = _environment(section, launch)
    plugin = _plugin(env, launch)
    if env.get("deepspeed_config_file") is not None:
        _conflicts_with_file(data, section, launch)
        config = _from_file(doc, env["deepspeed_config_file"], plugin, launch, cwd)
    else:
        config = _from_plugin_keys(plugin, launch, doc)
        _nvme_paths(section, plugin, launch)
    if config is None:
        return launch
    if not _set_mixed_precision(config, launch):
        return launch
    launch.ds_config = config  # zero3_init_flag below stage 3: Accelerate warns and turns it off
    return launch


# The YAML's parallelism_config section (commands/config/config_args.py ClusterConfig.parallelism_config): launch
# copies each key to its --parallelism_config_* argument, prepare_extend_env_parallelism_config exports it
# (PARALLELISM_CONFIG_SP_SIZE, _SP_BACKEND) and ParallelismConfig reads it back (accelerate 1.15
# commands/launch.py _validate_launch_command, utils/launch.py, parallelism_config.py). With the deepspeed backend
# (its only one, and the default) and a size above 1, Accelerator.prepare registers DeepSpeed's Ulysses
# (runtime/sequence_parallel/ulysses_sp.py UlyssesSPAttentionHF.register_with_transformers(sequence_parallel_size=
# sp_size), its groups handed to deepspeed.initialize as mpu) and divides the world by it in train_batch_size:
# the layout DeepSpeed's sequence_parallel_size gives, though the config it builds has no such key.
PARALLELISM = "parallelism_config"
SP_SIZE, SP_BACKEND = "parallelism_config_sp_size", "parallelism_config_sp_backend"


def sequence_parallel(data: JSONValue) -> int | None:
    """The Ulysses degree an Accelerate config's parallelism_config gives (None: none, or not DeepSpeed's)."""
    section = data.get(PARALLELISM) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        return None
    size = _whole(section.get(SP_SIZE))
    return size if size is not None and size > 1 and section.get(SP_BACKEND, "deepspeed") == "deepspeed" else None


def processes(data: JSONObject) -> Launch:
    """The processes an Accelerate config launches (world_size, num_machines, per_node), as :func:`build`
    finds them, without building its DeepSpeed config (the run's inputs read the world size from it)."""
    launch = Launch(deepspeed=A.uses_deepspeed(data))
    _processes(data, launch)
    return launch


# -- processes and precision ------------------------------------------------------------------

def _whole(value: JSONValue) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _processes(data: JSONObject, launch: Launch) -> None:
    """num_processes is the total across machines; each machine starts num_processes // num_machines
    (prepare_deepspeed_cmd_env: --num_gpus / nproc_per_node), so the world is that times num_machines."""
    machines = _whole(data.get("num_machines", 1))
    launch.num_machines = machines if machines and machines > 0 else 1
    if "num_processes" not in data or data["num_processes"] is None:
        launch.problem("processes", "", "no num_processes: 'accelerate launch' raises 'You need to manually pass in "
                       "`--num_processes` using this config yaml' unless the command gives --num_processes")
        return
    processes = _whole(data["num_processes"])
    if processes is None or processes < 1:
        launch.problem("invalid-value", "/num_processes", f"num_processes {data['num_processes']!r} is not a "
                       "positive whole number: the launcher cannot start that many processes")
        return
    per_node = processes // launch.num_machines
    if per_node == 0 or per_node * launch.num_machines != processes:
        launch.problem("processes", "/num_processes",
                       f"num_processes {processes} is the total across machines, and does not divide by "
                       f"num_machines {launch.num_machines}: each machine starts {per_node} "
                       f"({processes} // {launch.num_machines}), {per_node * launch.num_machines} in all")
    launch.per_node = per_node
    launch.world_size = per_node * launch.num_machines if per_node else None


def _precision(data: JSONObject, launch: Launch, script_precision: str | None) -> None:
    """_validate_launch_command: the YAML's mixed_precision, else "no" (the script may still pass its own
    to Accelerator); process_config turns the old ``fp16: true`` into mixed_precision fp16."""
    value = data.get("mixed_precision")
    if value is None and "mixed_precision" not in data and data.get("fp16"):
        value = "fp16"
    if value is None:
        launch.mixed_precision = script_precision or "no"
        return
    if not isinstance(value, str):
        hint = " (YAML reads an unquoted no as the boolean false: write 'no')" if value is False else ""
        launch.problem("invalid-value", "/mixed_precision", f"mixed_precision {json.dumps(value)} is not text: "
                       f"'accelerate launch' calls .lower() on it and fails{hint}")
        return
    if value.lower() not in A.PRECISIONS:
        launch.problem("invalid-value", "/mixed_precision", f"mixed_precision {value!r}: 'accelerate launch' raises "
                       f"'Unknown mixed_precision mode'; choose one of {', '.join(A.PRECISIONS)}")
        return
    launch.mixed_precision = value.lower()
    launch.precision_from_yaml = True


# -- the environment and the plugin -----------------------------------------------------------

def _environment(section: JSONObject, launch: Launch) -> dict[str, str]:
    """prepare_deepspeed_cmd_env: ``str(value)`` (lower-cased except for the stage, the accumulation
    steps and the file) of each key that is given and not null."""
    env: dict[str, str] = {}
    for key in PASSED_ON:
        value = section.get(key)
        if value is None:
            continue
        text = str(value)  # str(True) is "True", as Python writes it
        env[key] = text if key in ("zero_stage", "gradient_accumulation_steps", "deepspeed_config_file") \
            else text.lower()
    return env


def _plugin(env: dict[str, str], launch: Launch) -> JSONObject:
    """DeepSpeedPlugin.__post_init__'s attributes from the environment (its defaults where none is set)."""
    where = {key: f"{DS}/{key}" for key in PASSED_ON}
    plugin: JSONObject = {}

    gas = env.get("gradient_accumulation_steps", AUTO)
    try:
        plugin["gradient_accumulation_steps"] = int(gas) if gas.isdigit() else gas
    except ValueError:  # "²" (str.isdigit takes it, int() does not) or past int()'s 4,300 digits
        plugin["gradient_accumulation_steps"] = None
        launch.problem("invalid-value", where["gradient_accumulation_steps"],
                       f"gradient_accumulation_steps {gas[:40]!r}: DeepSpeedPlugin raises ValueError (int() of it); "
                       "give a positive integer")
    if isinstance(plugin["gradient_accumulation_steps"], str) and gas != AUTO:
        launch.problem("invalid-value", where["gradient_accumulation_steps"],
                       f"gradient_accumulation_steps {gas!r} is not a whole number: Accelerate passes the text on "
                       "and DeepSpeed fails on it; give a positive integer")
    elif plugin["gradient_accumulation_steps"] == 0:
        launch.problem("invalid-value", where["gradient_accumulation_steps"],
                       "gradient_accumulation_steps 0: DeepSpeed asserts it is positive")

    clipping = env.get("gradient_clipping", AUTO)
    try:
        plugin["gradient_clipping"] = clipping if clipping == AUTO else float(clipping)
    except ValueError:
        plugin["gradient_clipping"] = None
        launch.problem("invalid-value", where["gradient_clipping"], f"gradient_clipping {clipping!r}: "
                       "DeepSpeedPlugin raises ValueError (float() of it); give a number")

    plugin["zero_stage"] = _zero_stage(env.get("zero_stage"), launch, where["zero_stage"])

    for key in ("offload_optimizer_device", "offload_param_device"):
        device = env.get(key, "none")
        plugin[key] = device
        if device not in A.OFFLOAD_DEVICES:
            launch.problem("invalid-value", where[key], f"{key} {device!r}: Accelerate passes it to DeepSpeed, "
                           f"which accepts {', '.join(A.OFFLOAD_DEVICES)} (OffloadDeviceEnum) and raises on others")
    # Never passed on by the launcher: the plugin's default, the text "none".
    plugin["offload_optimizer_nvme_path"] = "none"
    plugin["offload_param_nvme_path"] = "none"
    plugin["zero3_save_16bit_model"] = env.get("zero3_save_16bit_model", "false") == "true"

    init = env.get("zero3_init_flag")
    if init is not None and init not in A.TRUTH_WORDS:
        launch.problem("invalid-value", where["zero3_init_flag"], f"zero3_init_flag {init!r}: DeepSpeedPlugin raises "
                       "'invalid truth value' (str_to_bool); give true or false")
    elif init is not None:
        launch.zero3_init = A.TRUTH_WORDS.index(init) < 6
    return plugin


def _zero_stage(stage: str | None, launch: Launch, at: str) -> int | None:
    """The plugin's zero_stage from its text (None: DeepSpeedPlugin raises); a stage DeepSpeed refuses is reported."""
    try:
        value = int(stage) if stage is not None else A.DEFAULT_ZERO_STAGE
    except ValueError:  # past 4,300 digits too: the message shows the start
        launch.problem("invalid-value", at, f"zero_stage {str(stage)[:40]!r}: DeepSpeedPlugin raises "
                       "ValueError (int() of it); give 0, 1, 2 or 3")
        return None
    if value not in (0, 1, 2, 3):
        launch.problem("invalid-value", at, f"zero_stage {value}: DeepSpeed "
                       "accepts stages 0, 1, 2 and 3 (ZeroStageEnum) and raises on others")
    return value


def _from_plugin_keys(plugin: JSONObject, launch: Launch, doc: Document) -> JSONObject | None:
    """DeepSpeedPlugin.__post_init__ without a config file."""
    if any(plugin[key] is None for key in ("gradient_clipping", "zero_stage")):
        return None  # the plugin raised
    optimizer_device, param_device = plugin["offload_optimizer_device"], plugin["offload_param_device"]
    config: JSONObject = {
        "train_batch_size": AUTO,
        "train_micro_batch_size_per_gpu": AUTO,
        "gradient_accumulation_steps": plugin["gradient_accumulation_steps"],
        "zero_optimization": {
            "stage": plugin["zero_stage"],
            "offload_optimizer": {
                "device": optimizer_device,
                "nvme_path": plugin["offload_optimizer_nvme_path"] if optimizer_device == "nvme" else None,
            },
            "offload_param": {
                "device": param_device,
                "nvme_path": plugin["offload_param_nvme_path"] if param_device == "nvme" else None,
            },
            "stage3_gather_16bit_weights_on_model_save": plugin["zero3_save_16bit_model"],
        },
    }
    if plugin["gradient_clipping"]:  # `if self.gradient_clipping:` (0.0 leaves the key out)
        config["gradient_clipping"] = plugin["gradient_clipping"]
    origin = {"": DS, "/fp16": "/mixed_precision", "/bf16": "/mixed_precision"}
    for attribute, dotted in PLUGIN_TO_CONFIG.items():
        origin["/" + dotted.replace(".", "/")] = f"{DS}/{attribute}"
    origin["/zero_optimization/offload_optimizer"] = f"{DS}/offload_optimizer_device"
    origin["/zero_optimization/offload_param"] = f"{DS}/offload_param_device"
    launch.origin = origin
    return config


def _nvme_paths(section: JSONObject, plugin: JSONObject, launch: Launch) -> None:
    for kind in ("optimizer", "param"):
        device_key, path_key = f"offload_{kind}_device", f"offload_{kind}_nvme_path"
        given = section.get(path_key)
        if plugin[device_key] != "nvme" and given in (None, "none"):
            continue
        at = f"{DS}/{path_key}" if path_key in section else f"{DS}/{device_key}"
        shown = f" ({given!r} is dropped)" if given not in (None, "none") else ""
        consequence = ("DeepSpeed swaps to the relative folder 'none'" if plugin[device_key] == "nvme"
                       else "it has no effect")
        launch.problem("nvme-path-dropped", at,
                       f"'accelerate launch' does not pass {path_key} to the training processes (no "
                       f"ACCELERATE_DEEPSPEED_{path_key.upper()} in prepare_deepspeed_cmd_env){shown}: {consequence}; "
                       "set nvme_path in a JSON file named by deepspeed_config_file")


# -- deepspeed_config_file --------------------------------------------------------------------

def _conflicts_with_file(data: JSONObject, section: JSONObject, launch: Launch) -> None:
    """DeepSpeedPlugin._deepspeed_config_checks: each deepspeed_config key in its list, and a mixed_precision
    the YAML sets, raise ValueError next to a deepspeed_config_file (the key's presence is enough)."""
    for key in section:
        if key in A.IGNORED_WITH_CONFIG_FILE:
            launch.problem("config-file-conflict", f"{DS}/{key}", f"{key} next to deepspeed_config_file: "
                           "Accelerate raises 'When using `deepspeed_config_file`, the following accelerate config "
                           "variables will be ignored'; set it in the DeepSpeed config file and delete it here")
    if data.get("mixed_precision") is not None:
        launch.problem("config-file-conflict", "/mixed_precision", "mixed_precision next to deepspeed_config_file: "
                       "Accelerate raises 'When using `deepspeed_config_file`, the following accelerate config "
                       "variables will be ignored'; set fp16/bf16 in the DeepSpeed config file (or \"auto\" there, "
                       "filled from Accelerator(mixed_precision=...)) and delete it here")


def candidates(doc: Document, value: str, cwd: str | None = None) -> list[str]:
    """Where a deepspeed_config_file may be: as written when absolute; else beside the YAML, then in the
    folder 'accelerate launch' runs in (HfDeepSpeedConfig opens the path relative to the process)."""
    path = os.path.expanduser(value)
    if os.path.isabs(path):
        return [path]
    folder = os.path.dirname(doc.name) if doc.name and not doc.name.startswith("<") else ""
    places = [os.path.normpath(os.path.join(folder, path))]
    here = os.path.normpath(os.path.join(cwd or os.getcwd(), path))
    if os.path.abspath(places[0]) != os.path.abspath(here):
        places.append(here)
    return places


def _from_file(doc: Document, value: str, plugin: JSONObject, launch: Launch,
               cwd: str | None) -> JSONObject | None:
    """HfDeepSpeedConfig(path) (json.load), then __post_init__'s checks and "auto" fills."""
    from zeroadvisor.config.reader import InputError, read_document
    from zeroadvisor.config.source import ParseError

    at = f"{DS}/deepspeed_config_file"
    places = candidates(doc, value, cwd)
    found = next((place for place in places if os.path.isfile(place)), None)
    config: JSONValue  # any JSON value until checked below
    if found is None:
        inline = _inline_json(value)
        if inline is None:
            launch.problem("config-file-missing", at, f"deepspeed_config_file {value!r} is not found (looked at "
                           f"{' and '.join(repr(p) for p in places)}): Accelerate raises if it is missing where the "
                           "job starts; the DeepSpeed settings in it are not checked")
            return None
        config = inline
    else:
        launch.config_file = found
        try:
            launch.config_document = read_document(found)
        except (InputError, ParseError) as err:
            where = f":{err.line}:{err.column}" if isinstance(err, ParseError) and err.line else ""
            launch.problem("config-file-unusable", at, f"deepspeed_config_file {found!r}{where}: {err}")
            return None
        try:
            config = json.loads(launch.config_document.text)
        except ValueError as err:
            launch.problem("config-file-unusable", at, f"deepspeed_config_file {found!r} is not strict JSON ({err}): "
                           "Accelerate reads it with json.load and fails")
            return None
    if not isinstance(config, dict):
        launch.problem("config-file-unusable", at, f"deepspeed_config_file {value!r} does not hold a JSON object")
        return None
    config.setdefault("gradient_accumulation_steps", 1)
    if "zero_optimization" not in config:
        launch.problem("config-file-unusable", at, f"deepspeed_config_file {value!r} has no zero_optimization: "
                       "Accelerate raises 'Please specify the ZeRO optimization config in the DeepSpeed config'")
        return None
    for attribute, dotted in PLUGIN_TO_CONFIG.items():  # fill_match(must_match=False): only "auto" is replaced
        if plugin.get(attribute) is not None:
            _fill_auto(config, dotted, plugin[attribute])
    return config


def _inline_json(value: str) -> JSONObject | None:
    """HfDeepSpeedConfig also takes the config itself as JSON text."""
    try:
        config = json.loads(value)
    except ValueError:
        return None
    return config if isinstance(config, dict) else None


def _fill_auto(config: JSONObject, dotted: str, value: JSONValue) -> None:
    """HfDeepSpeedConfig.find_config_node + fill_match: a missing parent means nothing to fill."""
    *parents, key = dotted.split(".")
    node: JSONValue = config
    for name in parents:
        node = node.get(name) if isinstance(node, dict) else None
        if node is None:
            return
    if isinstance(node, dict) and node.get(key) == AUTO:
        node[key] = value


# -- mixed precision ----------------------------------------------------------------------------

def _set_mixed_precision(config: JSONObject, launch: Launch) -> bool:
    """DeepSpeedPlugin.set_mixed_precision; False where it raises."""
    precision = launch.mixed_precision
    if precision == "fp16" and "fp16" not in config:
        config["fp16"] = {"enabled": True, "auto_cast": True}
    elif precision in ("bf16", "fp8") and "bf16" not in config:
        config["bf16"] = {"enabled": True}
    if precision != "no":
        other = "bf16" if precision == "fp16" else "fp16"
        block = config.get(other, {})
        if isinstance(block, dict) and str(block.get("enabled", "False")).lower() == "true":
            launch.problem("config-file-conflict", "/mixed_precision" if launch.precision_from_yaml
                           else f"{DS}/deepspeed_config_file",
                           f"mixed precision {precision} while the DeepSpeed config enables {other}: Accelerate "
                           f"raises '`--mixed_precision` arg cannot be set to `{precision}` when `{other}` is set in "
                           "the DeepSpeed config file'")
            return False
    for dtype in ("fp16", "bf16"):
        config.setdefault(dtype, {"enabled": False})
    _fill_auto(config, "fp16.enabled", precision == "fp16")
    _fill_auto(config, "bf16.enabled", precision in ("bf16", "fp8"))
    return True


def yaml_pointer(launch: Launch, doc: Document, ds_pointer: str) -> str:
    """The YAML key a pointer of the built DeepSpeed config comes from: the longest mapped prefix whose
    key the YAML has, else the deepspeed_config block, else the whole file."""
    probe = ds_pointer
    while True:
        mapped = launch.origin.get(probe)
        if mapped is not None and (mapped in doc.keys or mapped == ""):
            return mapped
        if probe == "":
            break
        probe = probe.rsplit("/", 1)[0]
    return DS if DS in doc.keys else ""


__all__ = ["Launch", "Problem", "build", "candidates", "yaml_pointer"]

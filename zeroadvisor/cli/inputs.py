"""Command-line values to library values; each bad value is a one-line ``UsageError`` (exit 2)."""

from __future__ import annotations

from fractions import Fraction

from zeroadvisor.api import UsageError
from zeroadvisor.model.spec import ModelSpec, TrainingShape


def run_inputs(values: dict) -> dict:
    """The run-input flags (options.RUN_INPUTS) from a command's parsed values, as apply_overrides
    keywords; --stage's choice text becomes its int."""
    from zeroadvisor.cli.options import PEFT_INPUTS, RUN_INPUTS

    out = {param.name: values.get(param.name) for param in RUN_INPUTS + PEFT_INPUTS}
    if out["stage"] is not None:
        out["stage"] = int(out["stage"])
    return out


def peft_flags(inputs: dict) -> dict:
    """Pops the PEFT flags from ``inputs`` as the description's peft: keys (None: not given)."""
    targets = inputs.pop("lora_target_modules", None) or None
    if targets is not None:
        names = [name.strip() for text in targets for name in text.split(",")]
        if not all(names):
            raise UsageError("--lora-target-modules: empty module name")
        targets = names[0] if names == ["all-linear"] else names
    return {"method": inputs.pop("peft", None), "r": inputs.pop("lora_r", None), "target_modules": targets,
            "quantization": inputs.pop("quantization", None)}


def model_and_shape(model: str | None, params: str | None, seq_len: int | None = None,
                    checkpointing: str | None = None, flash: bool | None = None,
                    **inputs) -> tuple[ModelSpec, TrainingShape]:
    """``--model PATH`` or ``--params N``, with the training-shape overrides applied (ModelError if unusable);
    ``inputs``: apply_overrides' keywords (--target-len, --micro-batch, --precision, --stage, load inputs)."""
    from zeroadvisor.model.description import apply_overrides, spec_from_params
    from zeroadvisor.model.hub import load_model

    if (model is None) == (params is None):
        raise UsageError("give exactly one of --model PATH or --params N")
    peft = peft_flags(inputs)
    if model is not None:
        spec, shape = load_model(model, peft)  # a path, a model directory or a Hub id (model/hub.py)
    else:
        if any(v is not None for v in peft.values()):
            raise UsageError("LoRA/QLoRA flags need --model with a Hugging Face config.json (the trainable "
                             "parameters are counted from its layout), not --params")
        spec, shape = spec_from_params(params), TrainingShape()
    return spec, apply_overrides(shape, seq_len, checkpointing, flash, **inputs)


def size(option: str, text: str | None) -> int | None:
    from zeroadvisor.memory import EstimateError
    from zeroadvisor.memory.estimate import check_memory
    from zeroadvisor.units import parse_size

    if text is None:
        return None
    try:
        value = parse_size(text)
    except ValueError as err:
        raise UsageError(f"{option}: {err}") from None
    except ArithmeticError:  # an exponent past what Decimal holds
        value = None
    try:  # the memory model's bound, one definition (memory/estimate.py MAX_MEMORY_BYTES)
        check_memory(option, value if value is not None else 10**400)
    except EstimateError as err:
        raise UsageError(str(err)) from None
    return value


def gpu(name: str | None):
    """``--gpu NAME`` as the table's card (hardware/gpus.py), None when not given; an unknown or ambiguous
    name is a usage error listing the cards it could mean."""
    from zeroadvisor.hardware.gpus import resolve_gpu

    if name is None:
        return None
    try:
        return resolve_gpu(name)
    except ValueError as err:
        raise UsageError(f"--gpu: {err}") from None


def gpu_memory(gpu_memory_text: str | None, gpu_name: str | None, required: bool) -> int | None:
    """``--gpu-memory 80GiB`` or ``--gpu H100-SXM5-80GB`` (one of them; both is a usage error)."""
    if gpu_memory_text is not None and gpu_name is not None:
        raise UsageError("give --gpu-memory or --gpu, not both")
    if gpu_name is not None:
        return gpu(gpu_name).memory_bytes
    if gpu_memory_text is None and required:
        raise UsageError("give the memory per GPU: --gpu-memory 80GiB or --gpu A100-SXM4-80GB")
    return size("--gpu-memory", gpu_memory_text)


def headroom(text: str) -> float:
    """``10%`` or ``0.1``: the share of GPU memory to keep free."""
    raw = text.strip()
    try:
        value = Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--headroom: expected a share like 10% or 0.1, got {text!r}") from None
    if not 0 <= value < 1:
        raise UsageError(f"--headroom: must be at least 0% and below 100%, got {text!r}")
    return float(value)


def _bandwidth(flag: str, text: str) -> float:
    """``25``, ``25GB/s`` or ``200Gb/s`` (bits) as GB/s."""
    raw = text.strip()
    scale = 1.0
    for suffix, factor in (("GB/s", 1.0), ("Gb/s", 1 / 8), ("Gbps", 1 / 8)):
        if raw.endswith(suffix):
            raw, scale = raw[: -len(suffix)].strip(), factor
            break
    try:
        value = float(Fraction(raw)) * scale
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"{flag}: expected a bandwidth like 25GB/s or 200Gb/s, got {text!r}") from None
    if not 0 < value <= 1e6:
        raise UsageError(f"{flag}: must be above 0 and at most 1,000,000 GB/s, got {text!r}")
    return value


def _efficiency(text: str) -> float:
    raw = text.strip()
    try:
        value = Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--efficiency: expected a share like 0.4 or 40%, got {text!r}") from None
    if not 0 < value <= 1:
        raise UsageError(f"--efficiency: must be above 0 and at most 1 (100%), got {text!r}")
    return float(value)


def hardware(values: dict):
    """The step-time model's Hardware from --gpu and the throughput flags; each flag not given keeps its
    stated default and is listed in ``defaulted`` (hardware/machine.py DEFAULTS)."""
    from zeroadvisor.throughput import DEFAULTS, Hardware

    card = gpu(values.get("gpu"))
    # Hardware field -> (the flag's value name, its parser)
    parse = {"inter_node_gb_s": ("inter_node_bandwidth", lambda t: _bandwidth("--inter-node-bandwidth", t)),
             "nvme_gb_s": ("nvme_bandwidth", lambda t: _bandwidth("--nvme-bandwidth", t)),
             "efficiency": ("efficiency", _efficiency), "cpu_cores": ("cpu_cores", int), "launcher": ("launcher", str)}
    given: dict = {}
    defaulted: list[str] = []
    for field in DEFAULTS:
        name, read = parse[field]
        text = values.get(name)
        if text is None:
            defaulted.append(field)
        else:
            given[field] = read(text)
    return Hardware(card, defaulted=tuple(defaulted), **given)


# -- the Hugging Face Trainer's inputs -----------------------------------------------------------

# config/launch.py Launch.launcher -> hardware/machine.py LAUNCHERS (python: one process, no launcher to read)
LAUNCHER_OF_COMMAND = {"torchrun": "torchrun", "accelerate launch": "accelerate", "deepspeed": "deepspeed"}


def trainer_inputs(values: dict) -> dict:
    """--training-args FILE and --launch / ``-- COMMAND``: the Trainer's arguments (``training``), and the
    config path, GPU count, model and shape flags they give where the flags leave them out. Flags given
    explicitly win; ``notes`` lists what was read and assumed, one line each. {} when neither is given."""
    from zeroadvisor.config.launch import parse_launch
    from zeroadvisor.config.training_args import merge, read_training_args

    file_text, launch_text = values.get("training_args"), values.get("launch")
    if file_text is None and launch_text is None:
        return {}
    notes: list[str] = []
    training = read_training_args(file_text) if file_text is not None else None
    world, world_from = None, ""
    launcher_from_command = None
    if launch_text is not None:
        launch = parse_launch(launch_text)
        notes += launch.notes
        world, world_from = launch.world_size, launch.world_from
        launcher = LAUNCHER_OF_COMMAND.get(launch.launcher)
        if values.get("launcher") is None and launcher is not None:
            launcher_from_command = launcher
        training = merge(training, launch.training) if training is not None else launch.training
    notes += training.notes
    out: dict = {"training": training, "notes": notes, "world_from": world_from}
    if launcher_from_command is not None:
        out["launcher"] = launcher_from_command  # the step time's CPU optimizer threads (hardware/machine.py)
    if "config" in values and values["config"] is None:
        if isinstance(training.deepspeed, dict):
            raise UsageError(f"{training.source}: the DeepSpeed config is given inline; save it as a file and give "
                             "its path")
        if training.deepspeed is not None:
            out["config"] = training.deepspeed
    if "gpus" in values and values["gpus"] is None and world is not None:
        out["gpus"] = world
        notes.append(f"world size {world} from the launch command ({world_from})")
    elif world is not None and values.get("gpus") not in (None, world):
        notes.append(f"--gpus {values['gpus']} used; the launch command runs {world} process(es) ({world_from})")
    if values.get("model") is None and values.get("params") is None and training.model:
        out["model"] = training.model
    if values.get("seq_len") is None and training.sequence_length:
        out["seq_len"] = training.sequence_length
        notes.append(f"sequence length {training.sequence_length} from {training.sequence_key}")
    if values.get("activation_checkpointing") is None and training.checkpointing is not None:
        out["activation_checkpointing"] = "full" if training.checkpointing else "none"
    return out

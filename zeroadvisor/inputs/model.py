"""The model and the training shape: a model description, Hugging Face config.json, model directory or Hub id
(``model``), or a parameter count (``params``), with the training-shape and LoRA/QLoRA inputs applied.

Shape values are checked where the shape is built (model/description.py apply_overrides, ModelError).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.values import KEYWORDS, Spelling

if TYPE_CHECKING:  # imported where a model is read: lint never needs one (its start-up)
    from zeroadvisor.config.vision_freeze import VisionFreeze
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

# The training-shape inputs (the run-input flags of cli/options.py, as Python names): what the DeepSpeed
# config may leave open, and the parallel degrees.
SHAPE_INPUTS = ("seq_len", "activation_checkpointing", "flash_attention", "target_len", "image_tokens",
                "vision_checkpointing", "padding", "micro_batch",
                "precision", "stage", "load_dtype", "zero_init", "meta_load", "optim", "liger_kernel",
                "cut_cross_entropy", "tiled_mlp", "tiled_mlp_shards", "activation_offload", "checkpoint_every",
                "tensor_parallel", "pipeline_parallel", "sequence_parallel", "expert_parallel")
# LoRA/QLoRA (model/peft.py): the keys of the model description's peft: block, which they override.
PEFT_INPUTS = ("peft", "lora_r", "lora_target_modules", "lora_modules_to_save", "quantization", "double_quant",
               "lora_dropout")
# The transformers release the model is built as (model/transformers_release.py: an MoE model's layout).
RELEASE_INPUTS = ("transformers_version",)
TRAINING_INPUTS = SHAPE_INPUTS + PEFT_INPUTS + RELEASE_INPUTS


def peft_inputs(values: Mapping[str, Any], spelling: Spelling = KEYWORDS) -> dict[str, Any]:
    """The PEFT inputs as the description's peft: keys (None: not given); ``lora_target_modules`` and
    ``lora_modules_to_save`` are a name, a comma-separated list, or several of either."""
    names = _names(values.get("lora_target_modules") or None, "lora_target_modules", spelling)
    targets: str | list[str] | None = names[0] if names in (["all-linear"], ["peft-default"]) else names
    saved = _names(values.get("lora_modules_to_save") or None, "lora_modules_to_save", spelling)
    return {"method": values.get("peft"), "r": values.get("lora_r"), "target_modules": targets,
            "modules_to_save": saved, "quantization": values.get("quantization"),
            "double_quant": _flag(values.get("double_quant"), spelling),
            "lora_dropout": _dropout(values.get("lora_dropout"), spelling)}


def _names(value: object, name: str, spelling: Spelling) -> list[str] | None:
    """Module names from a string, a comma-separated list, or several of either; None where not given."""
    if value is None:
        return None
    texts = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
    if not texts or not all(isinstance(text, str) for text in texts):
        raise UsageError(f"{spelling.label(name)}: expected module names (a string or a list of strings), got "
                         f"{value!r}")
    names = [part.strip() for text in texts for part in str(text).split(",")]
    if not all(names):
        raise UsageError(f"{spelling.label(name)}: empty module name")
    return names


def _flag(value: object, spelling: Spelling) -> bool | None:
    """--double-quant as a bool (the Python API's keyword: True or False); None where not given."""
    if value is None or isinstance(value, bool):
        return value
    raise UsageError(f"{spelling.label('double_quant')}: expected true or false, got {value!r}")


def _dropout(value: object, spelling: Spelling) -> float | None:
    """--lora-dropout as a probability 0 <= p < 1 (peft's nn.Dropout(p)); None where not given."""
    from zeroadvisor.config.peft_reader import probability

    if value is None:
        return None
    p = probability(value)
    if p is None:
        raise UsageError(f"{spelling.label('lora_dropout')}: expected a probability 0 <= p < 1, got {value!r}")
    return p


def model_and_shape(model: str | os.PathLike[str] | ModelSpec | None = None, params: int | str | None = None,
                    *, spelling: Spelling = KEYWORDS, vision_freeze: VisionFreeze | None = None,
                    **training: Any) -> tuple[ModelSpec, TrainingShape]:
    """The ModelSpec and TrainingShape of ``model`` (a path, model directory or Hub id, or a ModelSpec) or
    ``params`` (a count such as "7B" or 7_000_000_000), with the ``training`` inputs (TRAINING_INPUTS) applied;
    ``vision_freeze``: what the trainer's files freeze of a vision-language model (config/vision_freeze.py).
    ModelError where the description or a shape value cannot be used."""
    from zeroadvisor.model.description import apply_overrides, load_model, spec_from_params
    from zeroadvisor.model.spec import ModelSpec, TrainingShape

    unknown = sorted(set(training) - set(TRAINING_INPUTS))
    if unknown:
        raise UsageError(f"unknown keyword {unknown[0]!r}; the training shape takes {', '.join(TRAINING_INPUTS)}")
    peft = peft_inputs(training, spelling)
    release = _release(training.get("transformers_version"), spelling)
    values = {key: training.get(key) for key in SHAPE_INPUTS}
    stage = values["stage"]
    if isinstance(stage, str) and stage.isascii() and stage.isdigit() and len(stage) < 3:  # --stage's choice text
        values["stage"] = int(stage)  # (not "²", which str.isdigit takes and int refuses: refused as a stage)
    head = (values.pop("seq_len"), values.pop("activation_checkpointing"), values.pop("flash_attention"))
    if isinstance(model, ModelSpec):
        if params is not None:
            raise UsageError(f"give {spelling.ask('model')} or {spelling.ask('params')}, not both")
        if any(v is not None for v in peft.values()) or release is not None:
            raise UsageError("LoRA/QLoRA inputs and the transformers release need the model as a path to a "
                             "config.json (its layout is counted), not a ModelSpec")
        return model, apply_overrides(TrainingShape(), *head, **values)
    path = _model_path(model, spelling)
    if isinstance(params, int) and not isinstance(params, bool):
        params = str(params)
    if (path is None) == (params is None):
        raise UsageError(f"give exactly one of {spelling.ask('model', 'PATH')} or {spelling.ask('params', 'N')}")
    if path is not None:
        # a path, a model directory or a Hub id (model/hub.py resolve)
        spec, shape = load_model(path, peft, transformers=release, vision_freeze=vision_freeze)
    else:
        if any(v is not None for v in peft.values()):
            raise UsageError(f"LoRA/QLoRA inputs need {spelling.ask('model')} with a Hugging Face config.json (the "
                             f"trainable parameters are counted from its layout), not {spelling.ask('params')}")
        spec, shape = spec_from_params(params if isinstance(params, str) else str(params)), TrainingShape()
    return spec, apply_overrides(shape, *head, **values)


def _release(value: object, spelling: Spelling) -> str | None:
    """The transformers release asked for (its parser, inputs/values.py, checked the text), None where not given."""
    if value is not None and not isinstance(value, str):
        raise UsageError(f"{spelling.label('transformers_version')}: give a transformers release as text, e.g. "
                         f"4.41.2, 4.41 or >=4.41,<4.46")
    return value


def _model_path(model: str | os.PathLike[str] | None, spelling: Spelling) -> str | None:
    """``model`` as a path, model directory or Hub id (text); a UsageError for anything else (a number, bytes)."""
    if model is None:
        return None
    path = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    if not isinstance(path, str):  # names are text here: a bytes path too is refused
        raise UsageError(f"{spelling.label('model')}: expected a path, a model directory or a Hub id, got {model!r}")
    return path

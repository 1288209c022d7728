"""What a config holds, judged by its content: a DeepSpeed config, an Accelerate config, or something else
(a model's config.json, package.json, a CI workflow).

``kind_of(document)`` is the document's kind, decided once per document (config/source.py
``Document.derived``): the linter reads an Accelerate launcher config through the Accelerate rules and
anything else through the DeepSpeed rules (rules/linter.py), and the Accelerate rules run only on one.
The same test decides, where files are *found* rather than named (``lint DIR`` and the pre-commit hook,
``lint --only-configs``, whose file pattern admits every config extension), which are linted at all
(``kind_of_file``). A file named on the command line is always linted, except an Accelerate config of a run
without DeepSpeed (FSDP, plain multi-GPU: ``not_deepspeed``) or a training-arguments file (LLaMA-Factory's or
axolotl's training YAML, a Hugging Face TrainingArguments YAML/JSON: ``TRAINING``), which ``lint`` and ``check``
name in one line instead (and skip, with a note, where they find it): read as a DeepSpeed config such a file is a
dozen false findings (``bf16: true`` "must be an object") on a file DeepSpeed never reads.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from zeroadvisor.config.accelerate import is_accelerate_config, other_launcher
from zeroadvisor.config.source import Document
from zeroadvisor.config.training_args import DEEPSPEED_KEY, DEFAULTS, MARKERS, MODEL_KEYS, project_of
from zeroadvisor.jsontypes import JSONValue

DEEPSPEED = "deepspeed"
ACCELERATE = "accelerate"
TRAINING = "training-args"  # the Trainer's arguments: LLaMA-Factory, axolotl, TrainingArguments

# How the one line names a training-arguments file, by its project (config/training_args.py project_of).
TRAINING_NAMES: dict[str, str] = {
    "llama-factory": "LLaMA-Factory training arguments", "axolotl": "axolotl training arguments",
    "transformers": "Hugging Face TrainingArguments",
}
# Top-level keys a training-arguments file shares with DeepSpeed's top level, with a value of another shape
# (``bf16: true`` where DeepSpeed reads an object; axolotl's ``optimizer: adamw_bnb_8bit``): TrainingArguments
# fields (transformers 5.24) that are DeepSpeed keys too, and axolotl's optimizer name.
_SHARED_KEYS = frozenset({"activation_checkpointing", "bf16", "dataloader_drop_last", "fp16",
                          "gradient_accumulation_steps", "log_level", "optimizer"})
# Keys that only a training-arguments file has: the TrainingArguments fields the integration reads, the projects'
# own markers, the model and output paths, and the path to the DeepSpeed config itself (none a DeepSpeed key:
# tests/test_training_args_kind.py).
TRAINING_MARKERS = frozenset({*DEFAULTS, *(key for keys in MARKERS.values() for key in keys), *MODEL_KEYS,
                              DEEPSPEED_KEY, "output_dir", "do_train", "num_train_epochs",
                              "lr_scheduler_type"}) - _SHARED_KEYS

# Top-level keys of the YAML `accelerate config` writes that name its launcher setup
# (accelerate/commands/config/config_args.py, ClusterConfig.distributed_type / deepspeed_config).
ACCELERATE_KEYS = frozenset({"distributed_type", "deepspeed_config"})

# What the skipped files are called in the summary line ("3 skipped: not DeepSpeed configs"): files that are no
# config at all, and Accelerate configs of a run without DeepSpeed (``not_deepspeed``).
NOT_A_CONFIG = "not DeepSpeed configs"

# How the one line names an Accelerate launcher that runs without DeepSpeed, by its distributed_type
# (config/accelerate.py DISTRIBUTED_TYPES; a type not listed is named as written).
LAUNCHER_NAMES: dict[str, str] = {
    "FSDP": "FSDP", "MULTI_GPU": "multi-GPU", "MULTI_CPU": "multi-CPU", "NO": "single-process",
    "MEGATRON_LM": "Megatron-LM", "XLA": "XLA",
}


@lru_cache(maxsize=1)
def deepspeed_keys() -> frozenset[str]:
    """The top-level keys DeepSpeed 0.19.8 reads: the generated schema's properties but those for editors
    (``x-editor-only``: ``$schema``, which half the JSON files in a repository carry), one source of truth
    with the not-a-deepspeed-config rule (lint/context.py ``foreign``) and the Accelerate rules."""
    from zeroadvisor.deepspeed import schema

    properties = schema.properties(schema.load_latest())
    return frozenset(key for key, node in properties.items()
                     if not (isinstance(node, dict) and node.get("x-editor-only")))


@lru_cache(maxsize=1)
def _description_keys() -> frozenset[str]:
    """The keys of zeroadvisor's own model description (zeroadvisor/schemas/model.schema.json, generated from
    model/description.py): the one file beside the configs in a repository that shares a key with DeepSpeed
    (``activation_checkpointing``)."""
    from zeroadvisor.deepspeed import schema

    return frozenset(schema.properties(schema.load("model.schema.json")))


def is_model_description(data: JSONValue) -> bool:
    """A zeroadvisor model description: ``hf_config`` or ``parameters``, and no key the description lacks."""
    if not isinstance(data, dict) or not ({"hf_config", "parameters"} & set(data)):
        return False
    return all(str(key) in _description_keys() or str(key).startswith("_") for key in data)


def kind_of_data(data: JSONValue) -> str | None:
    """DEEPSPEED, ACCELERATE, TRAINING or None for a parsed config.

    An Accelerate launcher config is one config/accelerate.py recognises (``distributed_type``, or a
    ``deepspeed_config`` mapping). An object with any DeepSpeed top-level key is a DeepSpeed config, and
    so is an empty object (DeepSpeed runs on its defaults; the corpus has one); so is one with an
    Accelerate key that is not an Accelerate config (a ``deepspeed_config`` that is not a mapping): the
    DeepSpeed rules read it and say what it is. A zeroadvisor model description is none of them, though its
    ``activation_checkpointing`` is a DeepSpeed key too; a training-arguments file is TRAINING
    (``is_training_args``). Keys starting with ``_`` are comments.
    """
    if is_accelerate_config(data):
        return ACCELERATE
    if not isinstance(data, dict) or is_model_description(data):  # check --model's file, found beside the configs
        return None
    if is_training_args(data):
        return TRAINING
    keys = {str(key) for key in data if not str(key).startswith("_")}
    if not data or keys & (deepspeed_keys() | ACCELERATE_KEYS):
        return DEEPSPEED
    return None


def is_training_args(data: JSONValue) -> bool:
    """A training-arguments file: a key only such a file has (``output_dir``, ``cutoff_len``, ``base_model``,
    ``per_device_train_batch_size``), and nothing that makes it a DeepSpeed config: no DeepSpeed key besides the
    shared ones (``train_batch_size``, ``zero_optimization``), no shared key holding an object (``bf16:
    {enabled: true}``). A DeepSpeed config with a stray ``learning_rate`` still has its sections, so it is
    linted (and the stray key reported)."""
    if not isinstance(data, dict):
        return False
    if not {str(key) for key in data} & TRAINING_MARKERS:
        return False
    ours = deepspeed_keys()
    return all(str(key) in _SHARED_KEYS and not isinstance(value, (dict, list))
               for key, value in data.items() if str(key) in ours)


def _document_kind(document: Document) -> str | None:
    return kind_of_data(document.data)


def kind_of(document: Document) -> str | None:
    """DEEPSPEED, ACCELERATE or None for a parsed document, decided once per document."""
    return document.derived(_document_kind)


def _not_deepspeed(document: Document) -> str | None:
    launcher = other_launcher(document.data)
    if launcher is not None:
        return f"an Accelerate {LAUNCHER_NAMES.get(launcher, launcher)} config (distributed_type: {launcher})"
    if kind_of(document) == TRAINING and isinstance(document.data, dict):  # a training file is a mapping
        project = TRAINING_NAMES[project_of(document.data)]
        return f"{project} (check reads them with --training-args)"
    return None


def not_deepspeed(document: Document) -> str | None:
    """What an Accelerate config that starts no DeepSpeed run is ("an Accelerate FSDP config (distributed_type:
    FSDP)"), or a training-arguments file ("LLaMA-Factory training arguments, ..."), None for any other document;
    decided once per document. ``lint`` and ``check`` say so in one line
    (``not_deepspeed_line``) instead of linting it, and skip such a file found in a folder."""
    return document.derived(_not_deepspeed)


def not_deepspeed_line(name: str, what: str) -> str:
    """The one line ``lint`` and ``check`` print for a config ``not_deepspeed`` describes as ``what``."""
    return f"{name}: not a DeepSpeed config: {what}; zeroadvisor checks DeepSpeed runs"


@lru_cache(maxsize=1)
def _key_pattern() -> re.Pattern[str]:
    """A top-level-looking ``key:`` (quoted or not) at the start of a line, for text that does not parse
    (templates with placeholders, a stray comma): the lint then reports the syntax error."""
    names = "|".join(sorted(re.escape(k) for k in deepspeed_keys() | ACCELERATE_KEYS))
    return re.compile(rf"""(?m)^[ \t{{]*["']?({names})["']?[ \t]*:""")


def kind_of_text(text: str) -> str | None:
    """The kind of a config that does not parse, from its key names."""
    match = _key_pattern().search(text)
    if match is None:
        return None
    return ACCELERATE if match.group(1) in ACCELERATE_KEYS else DEEPSPEED


def kind_of_file(path: str | os.PathLike[str]) -> str | None:
    """DEEPSPEED, ACCELERATE or None for a file; a file that cannot be read counts as a config, so that
    the lint says why it could not be read rather than skipping it without a word."""
    from zeroadvisor.config.reader import InputError, read_bytes, read_document
    from zeroadvisor.config.source import ParseError

    try:
        return kind_of(read_document(path))
    except InputError:
        return DEEPSPEED
    except ParseError:
        pass
    try:
        raw = read_bytes(path)
    except InputError:
        return DEEPSPEED
    return kind_of_text(raw.decode("utf-8", "replace"))

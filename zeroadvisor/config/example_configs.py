"""The DeepSpeed configs LLaMA-Factory and axolotl ship in their repositories, read where a training file names one
by its usual place and the file is not there.

A LLaMA-Factory YAML says ``deepspeed: examples/deepspeed/ds_z3_config.json`` (its examples all do), a path that
``llamafactory-cli`` resolves from the LLaMA-Factory checkout it runs in; an axolotl YAML says
``deepspeed: deepspeed_configs/zero3_bf16.json``, the folder ``axolotl fetch deepspeed_configs`` copies from the
installed release. A YAML checked outside that checkout names a file the trainer has and the user's folder does
not; the file the trainer's release ships is read instead, with a note, and a fix is shown, never written.

The contents (``zeroadvisor/schemas/llama_factory/``, ``zeroadvisor/schemas/axolotl/``), by the release where each
first appears, read at the trainers' repositories:

- LLaMA-Factory ``examples/deepspeed/``: ``ds_z2_config``, ``ds_z2_offload_config``, ``ds_z3_config`` and
  ``ds_z3_offload_config`` from v0.6.0 (added 2024-03-21, "support fsdp + qlora"), ``ds_z0_config`` from v0.7.1
  (2024-05-14); each with ``overlap_comm: true`` until #7205 ("fix ds config", 2025-03-07) set it false, first
  released in v0.9.2 (the buckets' memory depends on it); ``ds_z3_fp8_config`` and ``ds_z2_autotp_config`` as
  v0.9.4 ships them;
- axolotl ``deepspeed_configs/`` at each tag from v0.4.0: v0.5.0 drops the ``optimizer`` block (AdamW with
  ``"auto"`` parameters) from ``zero1``, ``zero2``, ``zero3`` and ``zero3_bf16`` and adds the CPU-offload files;
  v0.7.0 adds ``zero1_torch_compile``, v0.10.0 ``zero2_torch_compile``; v0.12.0 spells the ZeRO-3 limits by
  their field names (``max_live_parameters``, ...), which DeepSpeed reads as the ``stage3_`` aliases.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from zeroadvisor.config.shipped_copies import ShippedConfig, content_at, contents, read_copy, release_for
from zeroadvisor.vocab import TRAINER_NAMES, TrainerFamily


@dataclass(frozen=True, slots=True)
class ExampleFolder:
    """Where a trainer keeps its DeepSpeed configs, and the copies of them shipped here."""

    folder: str  # in the trainer's repository, as its YAMLs name it
    copies: str  # under zeroadvisor/schemas/
    stems: frozenset[str]  # the files it ships, without .json (any release)


# keyed by the trainer, whose value is the project a training file's keys name (config/training_args.py project_of)
FOLDERS: dict[TrainerFamily, ExampleFolder] = {
    TrainerFamily.LLAMA_FACTORY: ExampleFolder("examples/deepspeed", "llama_factory", frozenset((
        "ds_z0_config", "ds_z2_config", "ds_z2_offload_config", "ds_z3_config", "ds_z3_offload_config",
        "ds_z3_fp8_config", "ds_z2_autotp_config"))),
    TrainerFamily.AXOLOTL: ExampleFolder("deepspeed_configs", "axolotl", frozenset((
        "zero1", "zero1_torch_compile", "zero2", "zero2_torch_compile", "zero3", "zero3_bf16",
        "zero3_bf16_cpuoffload_all", "zero3_bf16_cpuoffload_params"))),
}


def _family(project: str) -> TrainerFamily | None:
    """The trainer whose shipped configs a training file of ``project`` names (None: one that ships none)."""
    return next((family for family in FOLDERS if family.value == project), None)


def shipped_stem(path: str, project: str) -> str | None:
    """The shipped config ``path`` names (its stem), where it ends in the trainer's folder and one of its files
    (``examples/deepspeed/ds_z3_config.json``, ``./LLaMA-Factory/examples/deepspeed/ds_z3_config.json``); None
    otherwise, and for a project that ships none."""
    family = _family(project)
    if family is None:
        return None
    where = FOLDERS[family]
    parts = posixpath.normpath(path.replace("\\", "/")).split("/")
    folder = where.folder.split("/")
    name = parts[-1]
    if not name.endswith(".json") or parts[-1 - len(folder):-1] != folder:
        return None
    stem = name.removesuffix(".json")
    return stem if stem in where.stems else None


def shipped_example(path: str, project: str, requirement: str | None) -> tuple[ShippedConfig | None, bool]:
    """The config ``path`` names as the trainer's ``requirement`` (a release or a PEP 440 range; None: not known)
    ships it, and whether that release decided it (False: the newest content, an assumption). None: not one of its
    files, or one that release does not ship (older than its first copy)."""
    stem, family = shipped_stem(path, project), _family(project)
    if stem is None or family is None:
        return None, True
    where = FOLDERS[family]
    releases = contents(where.copies, stem)
    chosen, known = release_for(requirement, releases)
    since = content_at(releases, chosen)
    if since is None:
        return None, True
    shown = str(chosen) if chosen is not None else f"{since} or later"
    return ShippedConfig(TRAINER_NAMES[family], f"{where.folder}/{stem}.json", str(since), shown,
                         read_copy(where.copies, stem, since)), known

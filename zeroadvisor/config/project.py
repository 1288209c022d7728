"""Project configuration: ``[tool.zeroadvisor]`` in ``pyproject.toml``, or ``.zeroadvisor.toml``.

Found by walking up from a file's folder; the nearest wins, and in one folder ``.zeroadvisor.toml``
wins over ``pyproject.toml`` (a ``pyproject.toml`` without a ``[tool.zeroadvisor]`` table does not
count, and the walk goes on). ``.zeroadvisor.toml`` holds the same keys at its top level (a
``[tool.zeroadvisor]`` table there is read too)::

    select = ["ZA1", "ZA8"]          # rules by code, name or code prefix (default: all)
    ignore = ["ZA006"]
    fail-on = "warning"              # error | warning | info | never
    format = "text"                  # any --format the command accepts
    integration = "hf-trainer"       # deepspeed | hf-trainer | accelerate | any
    deepspeed-version = "0.14"       # the DeepSpeed release(s) to read configs as (else: the pins found)
    trainer = "dpo"                  # the training method (check/estimate --trainer): sft, dpo, grpo, ...
    training-args = "configs/dpo.yaml"  # the trainer's file (--training-args), relative to this file's folder
    launch = "trl dpo --config configs/dpo.yaml"  # the launch command (check --launch)
    exclude = ["legacy/", "third_party"]  # left out of folder walks, beside the defaults (config/excludes.py)

    [per-file-ignores]               # globs relative to this file's folder
    "legacy/**/*.json" = ["ZA101"]

    [cluster]                        # defaults for check/estimate (lint uses gpus for the batch)
    gpus = 16
    gpus-per-node = 8
    gpu = "H100-SXM5-80GB"                # or gpu-memory = "80GiB"
    cpu-memory = "1TB"
    nvme = "4TB"
    headroom = "10%"
    efficiency = 0.45                # the machine the step time ranks fixes on (check --help)
    cpu-cores = 64
    launcher = "deepspeed"

    [training]                       # where the DeepSpeed config leaves it open (check/estimate)
    seq-len = 4096
    load-dtype = "bf16"
    transformers-version = "4.45"    # the release the model is built as (an MoE model's layout)

    [gpus.MyCard]                    # a card of your own, for --gpu MyCard or cluster.gpu
    memory = "48GB"                  # as the driver reports it (nvidia-smi memory.total)
    dense-tflops = 200               # dense bf16/fp16 tensor peak
    intra-node-bandwidth = "32GB/s"  # per GPU, one direction, to the node's other GPUs
    host-link-bandwidth = "32GB/s"   # per GPU, one direction (PCIe x16 Gen4: 32GB/s)
    memory-bandwidth = "960GB/s"     # optional
    source = "https://..."           # optional: where the figures come from

A flag on the command line overrides the key it names. The rule keys (select, ignore,
per-file-ignores) apply per file, from that file's nearest configuration; the others (fail-on,
format, integration, cluster) apply to the whole run, from the configuration nearest the current
folder, as ruff does. Unknown keys and bad values are a usage error naming the file and key.

This module reads the TOML: the keys it knows, the shape of their values, and where each is set. The values
are checked (choices, rule codes, sizes, GPU names) where the run's inputs are resolved, by the same parsers
as the flags (zeroadvisor/inputs/project.py), so nothing here imports the rules or the command line.
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

PYPROJECT = "pyproject.toml"
DEDICATED = ".zeroadvisor.toml"
# In one folder the dedicated file wins (it exists only for zeroadvisor).
FILE_NAMES = (DEDICATED, PYPROJECT)


class ProjectConfigError(ValueError):
    """A project configuration that cannot be used; ``str()`` names the file (and key)."""


def _strings(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError("expected a string or a list of strings")


# Run-wide keys: config key -> the command's parameter name. One table for what the file may hold and which
# flag each key stands in for (cli/options.py names the flags). The values are read as the file has them and
# parsed where a run's inputs are resolved (zeroadvisor/inputs/project.py), as a flag's value is.
RUN_KEYS: dict[str, str] = {"fail-on": "fail_on", "format": "format", "integration": "integration",
                            "deepspeed-version": "deepspeed_version", "trainer": "trainer",
                            "training-args": "training_args", "launch": "launch"}
# run keys that name a file, relative to the configuration's folder
PATH_KEYS = frozenset({"training_args"})
CLUSTER_KEYS: dict[str, str] = {"gpus": "gpus", "gpus-per-node": "gpus_per_node", "gpu": "gpu",
                                "gpu-memory": "gpu_memory", "cpu-memory": "cpu_memory", "nvme": "nvme",
                                "headroom": "headroom",
                                # the machine the step time ranks fixes on (hardware/machine.py DEFAULTS)
                                "efficiency": "efficiency", "inter-node-bandwidth": "inter_node_bandwidth",
                                "cpu-cores": "cpu_cores", "nvme-bandwidth": "nvme_bandwidth", "launcher": "launcher"}
# The training shape and how the script loads the model, where the DeepSpeed config leaves it open: the flags
# of cli/options.py, checked as the model description's fields are (model/description.py apply_overrides).
TRAINING_KEYS: dict[str, str] = {"seq-len": "seq_len", "target-len": "target_len", "image-tokens": "image_tokens",
                                 "vision-checkpointing": "vision_checkpointing",
                                 "padding": "padding",
                                 "micro-batch": "micro_batch",
                                 "precision": "precision", "activation-checkpointing": "activation_checkpointing",
                                 "flash-attention": "flash_attention", "load-dtype": "load_dtype",
                                 "zero-init": "zero_init", "meta-load": "meta_load", "optim": "optim",
                                 "liger-kernel": "liger_kernel", "activation-offload": "activation_offload",
                                 "cut-cross-entropy": "cut_cross_entropy", "tiled-mlp": "tiled_mlp",
                                 "tiled-mlp-shards": "tiled_mlp_shards",
                                 "checkpoint-every": "checkpoint_every",
                                 "transformers-version": "transformers_version"}
TABLES: dict[str, dict[str, str]] = {"cluster": CLUSTER_KEYS, "training": TRAINING_KEYS}
RULE_KEYS = ("select", "ignore", "per-file-ignores")
# Patterns folder walks leave out (config/excludes.py), relative to the configuration's folder.
EXCLUDE_KEY = "exclude"
# A card the project declares, [gpus.NAME]: key -> the GpuSpec field (hardware/table.py) it gives. The values are
# parsed where the run's inputs are resolved (zeroadvisor/inputs/project.py), as the cluster's are.
GPU_KEYS: dict[str, str] = {"memory": "memory", "dense-tflops": "dense_tflops",
                            "intra-node-bandwidth": "intra_node_gb_s", "host-link-bandwidth": "host_link_gb_s",
                            "memory-bandwidth": "memory_gb_s", "source": "source"}
GPU_REQUIRED = ("memory", "dense-tflops", "intra-node-bandwidth", "host-link-bandwidth")
# What a declared card may be called: what --gpu can be given on any shell, and what messages show as is.
_GPU_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}")
# Flags that exclude each other: a flag given for one drops the configuration's value for all.
EXCLUSIVE = (("gpu", "gpu_memory"),)


@dataclass(frozen=True)
class DeclaredGpu:
    """One ``[gpus.NAME]`` table as the file has it: the values unparsed, each with where it is set."""

    name: str
    # GpuSpec field (GPU_KEYS' values) -> value as the file has it (inputs/values.py's parsers want int | str)
    values: dict[str, Any]
    origins: dict[str, str]  # field -> "pyproject.toml:12: 'tool.zeroadvisor.gpus.MyCard.memory'"
    origin: str  # the card's table: "pyproject.toml:11: 'tool.zeroadvisor.gpus.MyCard'"


@dataclass(frozen=True)
class ProjectConfig:
    path: str  # the file it came from
    select: tuple[str, ...] | None = None  # None: every rule
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (glob, rules), globs relative to root
    values: dict[str, object] = field(default_factory=dict)  # run-wide: parameter name -> value as the file has it
    # parameter name -> where the file sets it, for messages: "pyproject.toml:9: 'tool.zeroadvisor.cluster.gpus'"
    origins: dict[str, str] = field(default_factory=dict)
    gpus: tuple[DeclaredGpu, ...] = ()  # the cards the project declares ([gpus.NAME])
    exclude: tuple[str, ...] = ()  # what folder walks leave out, patterns relative to root

    @property
    def root(self) -> str:
        return os.path.dirname(self.path)

    def ignored_for(self, path: str) -> tuple[str, ...]:
        """The rules per-file-ignores drops for ``path`` (its path relative to this file's folder)."""
        relative = os.path.relpath(os.path.abspath(path), self.root).replace(os.sep, "/")
        out: list[str] = []
        for pattern, rules in self.per_file_ignores:
            if _glob_match(relative, pattern):
                out.extend(rules)
        return tuple(out)


def _glob_match(relative: str, pattern: str) -> bool:
    """``fnmatch`` where ``**/`` also matches no folder, and a pattern without ``/`` matches the name in any
    folder (as .gitignore and ruff's per-file-ignores do)."""
    if "/" not in pattern:
        return fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(relative, pattern) or ("**/" in pattern and
                                                       fnmatch.fnmatchcase(relative, pattern.replace("**/", "")))


# -- finding and reading ----------------------------------------------------------------------

def find_for(path: str) -> ProjectConfig | None:
    """The configuration nearest to ``path`` (a file, or "-" / a folder: from the current folder)."""
    if path == "-" or os.path.isdir(path):
        start = os.path.abspath(path if path != "-" else os.curdir)
    else:
        start = os.path.dirname(os.path.abspath(path))
    return _find_from(start)


def find_for_run() -> ProjectConfig | None:
    """The configuration for run-wide settings: the one nearest the current folder."""
    return _find_from(os.path.abspath(os.curdir))


def forget() -> None:
    """Drop what earlier lookups found (each command run starts fresh; files may have changed)."""
    _find_from.cache_clear()


@lru_cache(maxsize=256)
def _find_from(folder: str) -> ProjectConfig | None:
    for name in FILE_NAMES:
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            found = load(candidate)
            if found is not None:
                return found
    parent = os.path.dirname(folder)
    return None if parent == folder else _find_from(parent)


def load(path: str) -> ProjectConfig | None:
    """The configuration in one file; None for a pyproject.toml without ``[tool.zeroadvisor]``."""
    from zeroadvisor.config.pin_files import Skipped, read_bytes

    try:  # the repository's file: a regular file, bounded, never a FIFO or a device (a link may point anywhere)
        raw = read_bytes(path, os.sep)
    except Skipped as err:
        raise ProjectConfigError(f"{path}: cannot read: {err}") from None
    if os.path.basename(path) == PYPROJECT and not _may_name_us(raw):
        return None
    import tomllib
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ProjectConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise ProjectConfigError(f"{path}: invalid TOML: {err}") from None
    except RecursionError:  # tomllib parses nested arrays and inline tables by recursion, without a depth limit
        raise ProjectConfigError(f"{path}: invalid TOML: arrays or inline tables nested too deeply to read") from None
    except ValueError as err:  # int() of an integer past 4,300 digits (sys.get_int_max_str_digits)
        raise ProjectConfigError(f"{path}: invalid TOML: a number too long to read ({str(err)[:60]})") from None
    text = raw.decode("utf-8")
    found = document.get("tool")
    tool: dict[str, object] = found if isinstance(found, dict) else {}
    if os.path.basename(path) == PYPROJECT:
        if "zeroadvisor" not in tool:
            return None
        return _parse(tool["zeroadvisor"], path, text, "tool.zeroadvisor")
    if set(document) == {"tool"} and "zeroadvisor" in tool:
        return _parse(tool["zeroadvisor"], path, text, "tool.zeroadvisor")
    return _parse(document, path, text, "")


# What a pyproject.toml that configures zeroadvisor must contain (TOML 1.0 keys, bare or quoted): a
# ``tool.zeroadvisor`` dotted key or table header, or a ``tool`` table or inline table with a ``zeroadvisor``
# key somewhere; a \u or \U escape could spell either inside a quoted key, so it counts too.
_OUR_TABLE = re.compile(rb"""tool["']?\s*\.\s*["']?zeroadvisor""")
_TOOL_TABLE = re.compile(rb"""^\s*\[\s*["']?tool["']?\s*\]|(?:^|[\s{,])["']?tool["']?\s*=""", re.MULTILINE)


def _may_name_us(raw: bytes) -> bool:
    """Whether a pyproject.toml can hold ``tool.zeroadvisor``; without it the file is not parsed (most
    projects' pyproject.toml; tomllib's import is a share of ``lint``'s start-up)."""
    if b"\\u" in raw or b"\\U" in raw or _OUR_TABLE.search(raw):
        return True
    return b"zeroadvisor" in raw and _TOOL_TABLE.search(raw) is not None


def _parse(table: object, path: str, text: str, prefix: str) -> ProjectConfig:
    if not isinstance(table, dict):
        raise ProjectConfigError(f"{path}: [{prefix}] must be a table")
    parsing = _Parsing(path, text, prefix)
    for key, value in table.items():
        try:
            parsing.read(key, value)
        except ProjectConfigError:
            raise
        except (TypeError, ValueError) as err:
            raise ProjectConfigError(f"{parsing.where(key)}: '{parsing.dotted(key)}': {err}") from None
    if "gpu" in parsing.values and "gpu_memory" in parsing.values:
        raise ProjectConfigError(f"{path}: give cluster.gpu or cluster.gpu-memory, not both")
    return ProjectConfig(os.path.abspath(path), parsing.select, parsing.ignore, tuple(parsing.per_file),
                         parsing.values, parsing.origins, tuple(parsing.gpus), parsing.exclude)


@dataclass
class _Parsing:
    """One table being read into a ProjectConfig's fields: each key where it was set (file:line 'key')."""

    path: str
    text: str
    prefix: str  # the table's dotted name ("tool.zeroadvisor"; "" for a zeroadvisor.toml)
    values: dict[str, object] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    select: tuple[str, ...] | None = None
    ignore: tuple[str, ...] = ()
    per_file: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    gpus: list[DeclaredGpu] = field(default_factory=list)
    exclude: tuple[str, ...] = ()

    def where(self, key: str) -> str:
        line = _line_of(self.text, key)
        return f"{self.path}:{line}" if line else self.path

    def dotted(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def read(self, key: str, value: object) -> None:
        if key == "select":
            self.select = _strings(value)
        elif key == "ignore":
            self.ignore = _strings(value)
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise TypeError("expected a table of glob = [rules]")
            self.per_file = [(pattern, _strings(rules)) for pattern, rules in value.items()]
        elif key == EXCLUDE_KEY:
            self.exclude = _strings(value)
        elif key in RUN_KEYS:
            self._set(RUN_KEYS[key], value, key, key)
        elif key in TABLES:
            self._read_table(key, value)
        elif key == "gpus":
            self._read_gpus(value)
        else:
            known = ", ".join((*RULE_KEYS, EXCLUDE_KEY, *RUN_KEYS, *TABLES, "gpus"))
            raise ProjectConfigError(f"{self.where(key)}: unknown key '{self.dotted(key)}' (known: {known})")

    def _read_table(self, name: str, table: object) -> None:
        """[cluster] or [training]: each key the flag it stands for (TABLES)."""
        if not isinstance(table, dict):
            raise TypeError("expected a table")
        keys = TABLES[name]
        for sub, value in table.items():
            if sub not in keys:
                raise ProjectConfigError(f"{self.where(sub)}: unknown key '{self.dotted(name + '.' + sub)}' "
                                         f"(known: {', '.join(keys)})")
            self._set(keys[sub], value, sub, f"{name}.{sub}")

    def _read_gpus(self, table: object) -> None:
        if not isinstance(table, dict):
            raise TypeError("expected a table of [gpus.NAME] tables")
        for name, card in table.items():
            dotted = self.dotted(f"gpus.{name}")
            line = _line_of_table(self.text, self.prefix, name)
            where = f"{self.path}:{line}" if line else self.path
            if not _GPU_NAME.fullmatch(name):  # shown escaped: the file's text is data
                raise ProjectConfigError(f"{where}: '{self.dotted('gpus')}': GPU name {name!r}: a GPU name is "
                                         "letters, digits, spaces, '.', '_' and '-' (at most 64), starting with a "
                                         "letter or digit")
            if not isinstance(card, dict):
                raise ProjectConfigError(f"{where}: '{dotted}': expected a table of "
                                         f"{', '.join(GPU_KEYS)}")
            values: dict[str, object] = {}
            origins: dict[str, str] = {}
            for sub, value in card.items():
                sub_line = _line_of_table(self.text, self.prefix, name, sub) or line
                sub_where = f"{self.path}:{sub_line}" if sub_line else self.path
                if sub not in GPU_KEYS:
                    shown = f"'{dotted}.{sub}'" if sub.isprintable() else f"{sub!r} under '{dotted}'"
                    raise ProjectConfigError(f"{sub_where}: unknown key {shown} (known: {', '.join(GPU_KEYS)})")
                values[GPU_KEYS[sub]] = value
                origins[GPU_KEYS[sub]] = f"{sub_where}: '{dotted}.{sub}'"
            missing = [sub for sub in GPU_REQUIRED if GPU_KEYS[sub] not in values]
            if missing:
                raise ProjectConfigError(f"{where}: '{dotted}': give {', '.join(missing)} (a declared GPU needs "
                                         f"{', '.join(GPU_REQUIRED)})")
            self.gpus.append(DeclaredGpu(name, values, origins, f"{where}: '{dotted}'"))

    def _set(self, name: str, value: object, key: str, dotted: str) -> None:
        self.values[name] = value
        self.origins[name] = f"{self.where(key)}: '{self.dotted(dotted)}'"


def _line_of_table(text: str, prefix: str, name: str, key: str | None = None) -> int | None:
    """The line of the ``[gpus.NAME]`` header (``key`` None) or of ``key`` under it; for a card given as an
    inline table (``NAME = {...}``), the line of its name."""
    dotted = r"tool[ \t]*\.[ \t]*zeroadvisor[ \t]*\.[ \t]*" if prefix else ""
    quoted = rf"""(?:{re.escape(name)}|"{re.escape(name)}"|'{re.escape(name)}')"""
    header = re.search(rf"(?m)^[ \t]*\[[ \t]*{dotted}gpus[ \t]*\.[ \t]*{quoted}[ \t]*\]", text)
    if header is None:
        inline = re.search(rf"(?m)^[ \t]*(?:gpus[ \t]*\.[ \t]*)?{quoted}[ \t]*=", text)
        return None if inline is None else text.count("\n", 0, inline.start()) + 1
    if key is None:
        return text.count("\n", 0, header.start()) + 1
    end = re.compile(r"(?m)^[ \t]*\[").search(text, header.end())
    body = text[header.end(): end.start() if end else len(text)]
    match = re.search(rf"""(?m)^[ \t]*["']?{re.escape(key)}["']?[ \t]*=""", body)
    return None if match is None else text.count("\n", 0, header.end() + match.start()) + 1


def _line_of(text: str, key: str) -> int | None:
    """The line where ``key`` is first set (tomllib gives no positions for keys)."""
    match = re.search(rf"""(?m)^[ \t]*["']?{re.escape(key)}["']?[ \t]*=""", text)
    return None if match is None else text.count("\n", 0, match.start()) + 1

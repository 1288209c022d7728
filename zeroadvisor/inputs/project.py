"""The project configuration (config/project.py reads ``[tool.zeroadvisor]`` / ``.zeroadvisor.toml``) checked
as run inputs: each value parsed by the parser its flag uses (inputs/values.py), each rule reference against
the registry, every error one line naming the file, the line and the key.

Every configuration a run finds is checked whole, the keys this command does not use included, so a bad
value is reported wherever the file is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from zeroadvisor.config import project
from zeroadvisor.config.project import DeclaredGpu, ProjectConfig, ProjectConfigError
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.values import PARSERS, bandwidth, gpu, gpu_memory, output_format, parse, tflops
from zeroadvisor.report import CHECK_FORMATS

if TYPE_CHECKING:
    from zeroadvisor.hardware.table import GpuSpec

# path -> (the configuration, its values parsed); forget() empties it with the file lookups
_CHECKED: dict[str, tuple[ProjectConfig, dict[str, object]]] = {}
# path -> (the configuration, the cards it declares); emptied with _CHECKED
_CARDS: dict[str, tuple[ProjectConfig, tuple[GpuSpec, ...]]] = {}


def forget() -> None:
    """Drop what earlier runs found and checked (each command run starts fresh; files may have changed)."""
    project.forget()
    _CHECKED.clear()
    _CARDS.clear()


def for_run() -> tuple[ProjectConfig, dict[str, object]] | None:
    """The configuration nearest the current folder and its run-wide values parsed (None: no configuration)."""
    config = project.find_for_run()
    return None if config is None else (config, checked(config))


def for_file(path: str) -> ProjectConfig | None:
    """The configuration nearest ``path``, checked."""
    config = project.find_for(path)
    if config is not None:
        checked(config)
    return config


def checked(config: ProjectConfig) -> dict[str, object]:
    """``config``'s run-wide values as the run uses them (parameter name -> value); ProjectConfigError for a value
    or rule reference that cannot be used."""
    known = _CHECKED.get(config.path)
    if known is not None and known[0] is config:
        return known[1]
    _check_rules(config)
    declared = cards(config)  # checked whether or not this run names one of them
    values: dict[str, object] = {}
    for name, raw in config.values.items():
        label = config.origins.get(name, config.path)
        try:
            # the format each command takes is checked against that command's (inputs/run.py)
            if name == "format":
                values[name] = output_format(label, raw, CHECK_FORMATS)
            elif name == "gpu":  # one of the table's cards or of those this file declares
                values[name] = gpu(label, raw, declared)
            elif name in project.TRAINING_KEYS.values() and name not in PARSERS:  # the shape's (not the release)
                values[name] = _training(name, label, raw)
            else:
                values[name] = parse(name, label, raw)
        except UsageError as err:
            raise ProjectConfigError(str(err)) from None
    _CHECKED[config.path] = (config, values)
    return values


def _training(name: str, label: str, value: object) -> object:
    """A [training] value, checked as its flag's is where the shape is built (model/description.py
    apply_overrides): the error names the file, line and key."""
    from zeroadvisor.model.description import apply_overrides
    from zeroadvisor.model.errors import ModelError
    from zeroadvisor.model.spec import TrainingShape

    # a TOML value of any type, which apply_overrides checks as it checks a flag's
    head: dict[str, Any] = {"seq_len": None, "activation_checkpointing": None, "flash_attention": None}
    rest: dict[str, Any] = {}
    (head if name in head else rest)[name] = value
    try:
        apply_overrides(TrainingShape(), head["seq_len"], head["activation_checkpointing"], head["flash_attention"],
                        **rest)
    except (ModelError, TypeError, ValueError) as err:
        raise UsageError(f"{label}: {err}") from None
    return value


def cards(config: ProjectConfig) -> tuple[GpuSpec, ...]:
    """The GPUs ``config`` declares ([gpus.NAME]), each value parsed as a flag's would be; ProjectConfigError
    (file:line 'key') for a value that cannot be used or a name the table already has."""
    known = _CARDS.get(config.path)
    if known is not None and known[0] is config:
        return known[1]
    from zeroadvisor.hardware.gpus import normalise, table_cards

    built: list[GpuSpec] = []
    for declared in config.gpus:
        taken = table_cards(declared.name)
        if taken:
            raise ProjectConfigError(f"{declared.origin}: names a card of the table ({', '.join(taken)}); give the "
                                     "declared GPU a name of its own")
        twin = next((card.name for card in built if normalise(card.name) == normalise(declared.name)), None)
        if twin is not None:
            raise ProjectConfigError(f"{declared.origin}: the same name as the declared GPU {twin!r} (names are "
                                     "compared without case, spaces and hyphens)")
        try:
            built.append(_card(declared, config.path))
        except UsageError as err:
            raise ProjectConfigError(str(err)) from None
    result = tuple(built)
    _CARDS[config.path] = (config, result)
    return result


def _card(declared: DeclaredGpu, path: str) -> GpuSpec:
    from zeroadvisor.hardware.table import MIB, GpuSpec

    raw, origins = declared.values, declared.origins
    memory = gpu_memory(origins["memory"], raw["memory"])  # at least 1 MiB, as --gpu-memory
    if memory is None:  # pragma: no cover - a declared card's memory is required (config/project.py)
        raise UsageError(f"{origins['memory']}: expected a size, got {raw['memory']!r}")
    links = {name: bandwidth(origins[name], raw[name]) for name in ("intra_node_gb_s", "host_link_gb_s")}
    memory_gb_s = bandwidth(origins["memory_gb_s"], raw["memory_gb_s"]) if "memory_gb_s" in raw else None
    source = raw.get("source", f"declared in {path}")
    if not isinstance(source, str) or not source.strip() or not source.isprintable():
        raise UsageError(f"{origins.get('source', declared.origin)}: expected a line of text (a URL), got {source!r}")
    return GpuSpec(declared.name, memory // MIB, tflops(origins["dense_tflops"], raw["dense_tflops"]),
                   links["intra_node_gb_s"], links["host_link_gb_s"], source.strip(), memory_gb_s=memory_gb_s)


def _check_rules(config: ProjectConfig) -> None:
    from zeroadvisor.advisor import registry

    for key, references in (("select", config.select or ()), ("ignore", config.ignore),
                            *((f"per-file-ignores '{p}'", rules) for p, rules in config.per_file_ignores)):
        unknown = registry.unknown_references(list(references))
        if unknown:
            raise ProjectConfigError(f"{config.path}: {key}: unknown rule {unknown[0]!r} (see 'zeroadvisor rules')")

"""The project configuration (config/project.py reads ``[tool.zeroadvisor]`` / ``.zeroadvisor.toml``) checked
as run inputs: each value parsed by the parser its flag uses (inputs/values.py), each rule reference against
the registry, every error one line naming the file, the line and the key.

Every configuration a run finds is checked whole, the keys this command does not use included, so a bad
value is reported wherever the file is read.
"""

from __future__ import annotations

from typing import Any

from zeroadvisor.config import project
from zeroadvisor.config.project import ProjectConfig, ProjectConfigError
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.values import choice, parse
from zeroadvisor.report import CHECK_FORMATS

# path -> (the configuration, its values parsed); forget() empties it with the file lookups
_CHECKED: dict[str, tuple[ProjectConfig, dict[str, Any]]] = {}


def forget() -> None:
    """Drop what earlier runs found and checked (each command run starts fresh; files may have changed)."""
    project.forget()
    _CHECKED.clear()


def for_run() -> tuple[ProjectConfig, dict[str, Any]] | None:
    """The configuration nearest the current folder and its run-wide values parsed (None: no configuration)."""
    config = project.find_for_run()
    return None if config is None else (config, checked(config))


def for_file(path: str) -> ProjectConfig | None:
    """The configuration nearest ``path``, checked."""
    config = project.find_for(path)
    if config is not None:
        checked(config)
    return config


def checked(config: ProjectConfig) -> dict[str, Any]:
    """``config``'s run-wide values as the run uses them (parameter name -> value); ProjectConfigError for a value
    or rule reference that cannot be used."""
    known = _CHECKED.get(config.path)
    if known is not None and known[0] is config:
        return known[1]
    _check_rules(config)
    values: dict[str, Any] = {}
    for name, raw in config.values.items():
        label = config.origins.get(name, config.path)
        try:
            # the format each command takes is checked against that command's (inputs/run.py)
            values[name] = choice(label, raw, CHECK_FORMATS) if name == "format" else parse(name, label, raw)
        except UsageError as err:
            raise ProjectConfigError(str(err)) from None
    _CHECKED[config.path] = (config, values)
    return values


def _check_rules(config: ProjectConfig) -> None:
    from zeroadvisor.advisor import registry

    for key, references in (("select", config.select or ()), ("ignore", config.ignore),
                            *((f"per-file-ignores '{p}'", rules) for p, rules in config.per_file_ignores)):
        unknown = registry.unknown_references(list(references))
        if unknown:
            raise ProjectConfigError(f"{config.path}: {key}: unknown rule {unknown[0]!r} (see 'zeroadvisor rules')")

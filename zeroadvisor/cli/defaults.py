"""Each command's values: the flag when given, else the project configuration's (config/project.py),
else the built-in fallback (cli/options.py ``Param.fallback``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

from zeroadvisor.cli.options import NEEDED, Command
from zeroadvisor.config import project

Values = dict[str, Any]


def resolve(command: Command, values: Values, defer: Sequence[str] = ()) -> Values:
    """``values`` with what no flag gave filled from the run's project configuration, then the fallbacks;
    a NEEDED value that nobody gives, or a configured value this command does not accept, is a usage error.
    ``defer``: NEEDED values another input may still give (a launch command's world size), left None."""
    from zeroadvisor.api import UsageError

    project.forget()
    out = dict(values)
    params = {p.name: p for p in command.params}
    given = {name for name, value in values.items() if value not in (None, [], ())}
    config = project.find_for_run()
    if config is not None:
        held = {name for group in project.EXCLUSIVE if given & set(group) for name in group}
        for name, value in config.values.items():
            param = params.get(name)
            if param is None or name in given or name in held:
                continue
            choices = param.choice_values()
            if choices is not None and value not in choices:
                raise project.ProjectConfigError(f"{config.path}: {name.replace('_', '-')} {value!r} is not one "
                                                 f"of {command.name}'s: {', '.join(choices)}")
            out[name] = value
    for param in command.params:
        if out.get(param.name) is None and param.fallback is not None:
            if param.fallback is NEEDED and param.name in defer:
                continue
            if param.fallback is NEEDED:
                flag = param.flags[0] if param.flags else param.name
                key = next((k for k, (n, _) in project.CLUSTER_KEYS.items() if n == param.name), param.name)
                raise UsageError(f"give {flag} (or {key} under [tool.zeroadvisor.cluster] in pyproject.toml)")
            out[param.name] = param.fallback
    return out


def rules_for(select: Sequence[str] | None, ignore: Sequence[str] | None,
              lint_only: bool) -> Callable[[str], tuple]:
    """The rules for one file: the flags' --select/--ignore where given, else its nearest project
    configuration's, less that configuration's per-file ignores for it."""
    from zeroadvisor.api import select_rules

    cache: dict[tuple, tuple] = {}

    def choose(path: str) -> tuple:
        config = project.find_for(path)
        chosen = list(select) if select else (list(config.select) if config and config.select else None)
        dropped = list(ignore) if ignore else (list(config.ignore) if config else [])
        if config is not None:
            dropped += config.ignored_for(path) if path != "-" else ()
        key = (tuple(chosen) if chosen is not None else None, tuple(dropped))
        if key not in cache:
            cache[key] = select_rules(chosen, dropped, lint_only=lint_only)
        return cache[key]

    return choose

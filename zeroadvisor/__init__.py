"""zeroadvisor: lint DeepSpeed configs and advise on ZeRO memory.

The Python API (zeroadvisor/api.py, each name documented there)::

    import zeroadvisor

    zeroadvisor.lint("ds_config.json")                 # LintResult: findings, errors, report(format)
    zeroadvisor.estimate("ds_config.json", model="config.json", gpus=8, gpu="A100-SXM4-80GB")   # EstimateResult
    zeroadvisor.check("ds_config.json", model="config.json", gpus=8, gpu="A100-SXM4-80GB")      # CheckReport
    zeroadvisor.preflight("ds_config.json", model="config.json")   # in the training script, before loading
                                                                   # the model: raises PreflightError if it
                                                                   # does not fit on this job's GPUs

The names are imported on first use (``lint`` on the command line does not pay for them), and the
core never imports torch; ``preflight`` reads torch only if the training script can import it.
"""

from __future__ import annotations

import importlib
import types
from typing import TYPE_CHECKING, Any

from zeroadvisor.version import DEEPSPEED_TARGET, __version__

# public name -> the module that defines it (``lint``: see below)
_PUBLIC = {
    "estimate": "zeroadvisor.api", "check": "zeroadvisor.api", "preflight": "zeroadvisor.api",
    "LintResult": "zeroadvisor.api", "EstimateResult": "zeroadvisor.api", "CheckReport": "zeroadvisor.api",
    "PreflightError": "zeroadvisor.api", "PreflightResult": "zeroadvisor.api",
    "UsageError": "zeroadvisor.api", "EXPECTED_ERRORS": "zeroadvisor.api",
    "Readings": "zeroadvisor.inputs.environment",
    "Finding": "zeroadvisor.lint.findings", "Severity": "zeroadvisor.lint.findings",
}

# written out (not ``*_PUBLIC``) so that linters and type checkers read it; tests/test_public_api.py checks that it
# names exactly these, _PUBLIC's keys and ``lint``
__all__ = [
    "DEEPSPEED_TARGET", "EXPECTED_ERRORS", "CheckReport", "EstimateResult", "Finding", "LintResult", "PreflightError",
    "PreflightResult", "Readings", "Severity", "UsageError", "__version__", "check", "estimate", "lint", "preflight",
]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on use
    from zeroadvisor.api import (
        EXPECTED_ERRORS,
        CheckReport,
        EstimateResult,
        LintResult,
        PreflightError,
        PreflightResult,
        UsageError,
        check,
        estimate,
        preflight,
    )
    from zeroadvisor.inputs.environment import Readings
    from zeroadvisor.lint.findings import Finding, Severity


class _CallableLintPackage(types.ModuleType):
    """The ``zeroadvisor.lint`` subpackage, callable as the function ``zeroadvisor.api.lint``.

    A function and a subpackage cannot share the name ``zeroadvisor.lint``: importing any
    ``zeroadvisor.lint.*`` module binds that name in this package to the subpackage, whatever was bound
    before. So the name is the subpackage, and calling it calls the function. The binding is done here,
    in the facade (which may import the API), not in the subpackage, so that the lint engine never
    imports above itself; the subpackage's own __init__ imports nothing, so this costs nothing at start-up.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> LintResult:
        from zeroadvisor.api import lint

        return lint(*args, **kwargs)


from zeroadvisor import lint  # noqa: E402 - the subpackage, bound before any import of its modules can bind it

lint.__class__ = _CallableLintPackage


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'zeroadvisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

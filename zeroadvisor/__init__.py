"""zeroadvisor: lint DeepSpeed configs and advise on ZeRO memory.

The Python API (each name documented where it is defined)::

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
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

DEEPSPEED_TARGET = "0.19.8"

# public name -> the module that defines it
_PUBLIC = {
    "lint": "zeroadvisor.lint",  # the lint package is callable: it calls zeroadvisor.library.lint
    "estimate": "zeroadvisor.library", "check": "zeroadvisor.library",
    "LintResult": "zeroadvisor.library", "EstimateResult": "zeroadvisor.library",
    "CheckReport": "zeroadvisor.library",
    "preflight": "zeroadvisor.preflight",  # the module is callable: it calls preflight.preflight
    "PreflightError": "zeroadvisor.preflight",
    "PreflightResult": "zeroadvisor.preflight", "Readings": "zeroadvisor.preflight",
    "Finding": "zeroadvisor.lint.findings", "Severity": "zeroadvisor.lint.findings",
    "UsageError": "zeroadvisor.api", "EXPECTED_ERRORS": "zeroadvisor.api",
}

__all__ = ["DEEPSPEED_TARGET", "__version__", *_PUBLIC]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on use
    from zeroadvisor.api import EXPECTED_ERRORS, UsageError
    from zeroadvisor.library import CheckReport, EstimateResult, LintResult, check, estimate, lint
    from zeroadvisor.lint.findings import Finding, Severity
    from zeroadvisor.preflight import PreflightError, PreflightResult, Readings, preflight


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'zeroadvisor' has no attribute {name!r}")
    imported = importlib.import_module(module)
    # A function named as its own submodule is the (callable) submodule: importing a submodule binds
    # its name in this package, so a function of the same name would be replaced (lint/__init__.py).
    value = imported if module == f"{__name__}.{name}" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))

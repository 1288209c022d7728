"""The lint engine: rule contract, context, schema walk, findings.

This package is also the public function ``zeroadvisor.lint(...)`` (zeroadvisor/library.py): a
subpackage and a function cannot share the name ``zeroadvisor.lint`` (importing the subpackage
rebinds the name), so the package itself is callable and calls the function.
"""

import sys as _sys
import types as _types


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        from zeroadvisor.library import lint

        return lint(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule

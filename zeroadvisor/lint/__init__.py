"""The lint engine: rule contract, context, schema walk, findings.

``zeroadvisor.lint`` is also the public function ``zeroadvisor.lint(...)``: zeroadvisor/__init__.py makes
this package callable (it calls ``zeroadvisor.api.lint``). Nothing here imports above the engine.
"""

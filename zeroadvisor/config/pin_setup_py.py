"""setup.py, read by its syntax tree and never run: the requirements setuptools gets as ``install_requires=`` and
``extras_require=``, never any other string of the file (a ``description=`` that starts with "DeepSpeed ..." is
prose, and an extras key named "deepspeed" is a name, not a requirement).

A value is read where it is literal: a string (one requirement a line), a list, tuple or set of them, a dict of
extras, ``+`` of those, ``dict(...)``/``list(...)``, or a module-level variable holding one (``REQS = [...]``,
``REQS += [...]``, in ``if``/``try`` blocks too). Requirements computed by a function are not followed.

The file is parsed only where it names deepspeed at all, and only up to MAX_SETUP_PY_BYTES: the tree of 1 MB of
code takes about 175 MB and 0.6 s, and a 5 MB one 1.8 GB. Python's own parser refuses deep nesting with a
SyntaxError, MemoryError or RecursionError within milliseconds; the caller makes any of them a note.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator

from zeroadvisor.config.pin_requirements import MENTION, Reading, add_requirement

MAX_SETUP_PY_BYTES = 256 * 1024  # DeepSpeed's own setup.py is 14 KB
_KEYS = ("install_requires", "extras_require")
_MAX_DEPTH = 16  # nested values and variables followed from one keyword: real ones are 2 or 3 deep
_MAX_NODES = 20_000  # nodes visited in all: a file of literal requirements has a few hundred
_LITERAL_CALLS = ("dict", "list", "tuple", "set", "sorted")


def setup_py(reading: Reading, text: str) -> None:
    if not MENTION.search(text):
        return
    if len(text) > MAX_SETUP_PY_BYTES:
        reading.note(None, f"not parsed: larger than {MAX_SETUP_PY_BYTES >> 10} KB of Python")
        return
    with warnings.catch_warnings():  # the user's code, not ours: its SyntaxWarnings are not for this run's output
        warnings.simplefilter("ignore")
        tree = ast.parse(text)
    variables = _module_variables(tree)
    budget, seen = [_MAX_NODES], set()
    for value in _keyword_values(tree):
        for string, line in _strings(value, variables, budget):
            if (string, line) in seen:  # one literal reached through several variables
                continue
            seen.add((string, line))
            for offset, piece in enumerate(string.splitlines()):
                if piece.strip() and not piece.strip().startswith("#"):
                    add_requirement(reading, line + offset, piece.strip())


def _keyword_values(tree: ast.Module) -> Iterator[ast.expr]:
    """The values given as install_requires/extras_require: a keyword of any call (setup(), setuptools.setup(),
    dict(...)) or a key of a dict literal passed as **kwargs."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield from (kw.value for kw in node.keywords if kw.arg in _KEYS)
        elif isinstance(node, ast.Dict):
            yield from (v for k, v in zip(node.keys, node.values, strict=True)
                        if isinstance(k, ast.Constant) and k.value in _KEYS)


def _module_variables(tree: ast.Module) -> dict[str, list[ast.expr]]:
    """What each module-level name is assigned (=, +=, annotated), in statement order; the bodies of if, try,
    with and for statements count as module level (a platform switch), functions and classes do not."""
    found: dict[str, list[ast.expr]] = {}
    pending: list[ast.stmt] = list(reversed(tree.body))
    while pending:
        statement = pending.pop()
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, (ast.AugAssign, ast.AnnAssign)):
            targets, value = [statement.target], statement.value
        elif isinstance(statement, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
            for block in ("body", "orelse", "finalbody"):
                pending.extend(reversed(getattr(statement, block, [])))
            for handler in getattr(statement, "handlers", []):
                pending.extend(reversed(handler.body))
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                found.setdefault(target.id, []).append(value)
    return found


def _strings(node: ast.expr, variables: dict[str, list[ast.expr]], budget: list[int], depth: int = 0
             ) -> Iterator[tuple[str, int]]:
    """The string literals a requirements value is made of, with their lines. ``budget`` counts the nodes visited
    (variables referring to variables many times over would otherwise multiply)."""
    budget[0] -= 1
    if depth > _MAX_DEPTH or budget[0] < 0:
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            yield node.value, node.lineno
        return
    for child in _parts(node, variables):
        yield from _strings(child, variables, budget, depth + 1)


def _parts(node: ast.expr, variables: dict[str, list[ast.expr]]) -> list[ast.expr]:
    """The expressions a requirements value is built from (none where it is computed)."""
    inner: list[ast.expr] = []
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        inner = node.elts
    elif isinstance(node, ast.Dict):  # extras: the values are requirements, the keys are extra names
        inner = node.values
    elif isinstance(node, ast.Starred):
        inner = [node.value]
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        inner = [node.left, node.right]
    elif isinstance(node, ast.Name):
        inner = variables.get(node.id, [])
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _LITERAL_CALLS:
        inner = [*node.args, *(kw.value for kw in node.keywords)]
    return inner

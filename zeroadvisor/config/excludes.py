"""What a folder walk leaves out (``lint DIR``, ``check DIR``, the Action's ``lint .``), as ruff's walk does.

By default: the folders no project keeps its own configs in (DEFAULT_EXCLUDED_DIRS: virtual environments,
installed packages, caches, build output, where an installed DeepSpeed's own autotuning templates lie) and every
hidden folder (``.git``, ``.venv``, ``.github``, ``.idea``); the files ``.gitignore`` leaves out come from git
itself (config/gitfiles.py). ``--exclude PATTERN`` (and the project configuration's ``exclude``) add patterns,
``--no-default-excludes`` drops the defaults and ``.gitignore``. A file named on the command line is always read.

A pattern is a gitignore-style glob: without a ``/`` (a trailing one aside) it matches a file or folder name at
any depth (``legacy``, ``*.yaml``); with one it matches the path relative to its base folder (the current folder
for ``--exclude``, the configuration file's folder for ``exclude``), ``*`` and ``?`` within one component and
``**`` across any number of them; a trailing ``/`` matches folders only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache

# ruff's default excludes that apply to configs, plus build/ (setuptools' build output holds copies of a
# package's data files, the configs among them); the hidden ones are here for the record: every hidden folder
# is left out.
DEFAULT_EXCLUDED_DIRS = frozenset({
    ".git", ".hg", ".svn", ".venv", "venv", "node_modules", "site-packages", "__pycache__", "__pypackages__",
    "build", "dist", "_build", "buck-out", ".tox", ".nox", ".mypy_cache", ".ruff_cache", ".pytest_cache",
    ".eggs", ".direnv", ".ipynb_checkpoints",
})


# Version control's own folders: never walked, --no-default-excludes or not (they hold no file of the project's).
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".jj"})


@dataclass(frozen=True)
class ExcludePattern:
    """One ``--exclude`` pattern and the folder a pattern with ``/`` is relative to (absolute)."""

    pattern: str
    base: str

    @property
    def dirs_only(self) -> bool:
        return self.pattern.endswith("/")

    @property
    def anchored(self) -> bool:
        """Matched against the relative path (it has a ``/`` before its last character), not the name."""
        return "/" in self.pattern.rstrip("/")

    def matches(self, path: str, is_dir: bool) -> bool:
        if self.dirs_only and not is_dir:
            return False
        glob = self.pattern.rstrip("/")
        if not self.anchored:
            return _compiled(glob).fullmatch(os.path.basename(os.path.normpath(path))) is not None
        relative = os.path.relpath(os.path.abspath(path), self.base)
        if relative == os.pardir or relative.startswith(os.pardir + os.sep):
            return False
        return _compiled(glob.lstrip("/")).fullmatch(relative.replace(os.sep, "/")) is not None


@dataclass(frozen=True)
class Excludes:
    """What a walk leaves out: the defaults (and ``.gitignore``) unless ``defaults`` is off, and ``patterns``."""

    patterns: tuple[ExcludePattern, ...] = ()
    defaults: bool = True

    @property
    def gitignore(self) -> bool:
        """Whether ``.gitignore`` is asked (the defaults' part that git knows)."""
        return self.defaults

    def excludes(self, path: str, is_dir: bool) -> bool:
        """Whether the walk leaves out ``path`` (a folder when ``is_dir``), found below the folder walked."""
        name = os.path.basename(os.path.normpath(path))
        if is_dir and name in VCS_DIRS:
            return True
        if self.defaults and is_dir and (name in DEFAULT_EXCLUDED_DIRS or name.startswith(".")):
            return True
        return any(pattern.matches(path, is_dir) for pattern in self.patterns)


def excludes_from(patterns: tuple[str, ...], base: str, defaults: bool = True) -> Excludes:
    """Excludes of ``patterns`` relative to ``base`` (made absolute now: a walk never changes folder)."""
    root = os.path.abspath(base)
    return Excludes(tuple(ExcludePattern(pattern, root) for pattern in patterns if pattern.strip("/")), defaults)


@lru_cache(maxsize=256)
def _compiled(glob: str) -> re.Pattern[str]:
    """A gitignore-style glob as a regular expression: ``*``/``?`` within a component, ``**`` across any."""
    out: list[str] = []
    i = 0
    while i < len(glob):
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif glob[i] == "*":
            out.append("[^/]*")
            i += 1
        elif glob[i] == "?":
            out.append("[^/]")
            i += 1
        elif glob[i] == "[" and (end := glob.find("]", i + 2)) != -1 and "[" not in glob[i + 1:end]:
            body = glob[i + 1:end]
            negated = body.startswith(("!", "^"))
            body = body[1:] if negated else body
            out.append(f"[{'^/' if negated else ''}{body.replace(chr(92), chr(92) * 2)}]")
            i = end + 1
        else:
            out.append(re.escape(glob[i]))
            i += 1
    try:
        return re.compile("".join(out))
    except re.error:  # a bracket expression re cannot read ("[z-a]"): the text as written
        return re.compile(re.escape(glob))

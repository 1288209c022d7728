"""Expand the PATH arguments of ``lint``: files, directories and glob patterns.

Directories and ``**`` patterns are walked here rather than by ``glob``/``rglob``: those
follow symlinked directories without noticing loops, so a link back to its parent made one
file appear 41 times (until the OS refused the path), and two such links make the walk
exponential. Here every real directory is entered at most once per position in the
pattern, and every file is listed once, by its real path.
"""

from __future__ import annotations

import fnmatch
import os
from collections import deque
from dataclasses import dataclass

# Extensions collected when a directory is given (explicit files may have any extension); each file
# found is then judged by its content (deepspeed/kind.py): DeepSpeed reads .json, .conf and hjson
# (deepspeed/runtime/config.py loads any path with hjson), Accelerate writes YAML.
CONFIG_SUFFIXES = (".json", ".hjson", ".conf", ".yaml", ".yml")
_GLOB_CHARS = set("*?[")
STDIN = "-"  # the argument that means "read standard input"


class PathError(Exception):
    """A PATH that names nothing: exit code 2."""


@dataclass(frozen=True)
class Input:
    path: str
    found: bool = False  # listed from a directory: its content decides whether it is a config


def expand(arguments: list[str]) -> list[str]:
    """Every file to lint, in argument order, each once (by real path); ``-`` is kept as is."""
    return [item.path for item in expand_inputs(arguments)]


def expand_inputs(arguments: list[str]) -> list[Input]:
    """``expand``, saying of each file whether it was found in a directory or named (by path or pattern)."""
    out: list[Input] = []
    for argument in arguments:
        if argument != STDIN and os.path.isdir(argument):
            found = [p for p in _files_under(argument) if os.path.splitext(p)[1].lower() in CONFIG_SUFFIXES]
            if not found:
                raise PathError(f"{argument}: directory has no {'/'.join(CONFIG_SUFFIXES)} files")
            out.extend(Input(path, found=True) for path in sorted(found))
        elif _GLOB_CHARS & set(argument) and not os.path.exists(argument):
            found = sorted(_glob(argument))
            if not found:
                raise PathError(f"{argument}: pattern matches no files")
            out.extend(Input(path) for path in found)
        else:
            out.append(Input(argument))  # missing files are reported per file by the linter
    return _unique(out)


def _unique(inputs: list[Input]) -> list[Input]:
    """The first mention of each file, counted as named when any mention names it."""
    first: dict[str, int] = {}
    out: list[Input] = []
    for item in inputs:
        key = item.path if item.path == STDIN else os.path.realpath(item.path)
        if key not in first:
            first[key] = len(out)
            out.append(item)
        elif not item.found and out[first[key]].found:
            out[first[key]] = Input(out[first[key]].path, found=False)
    return out


def _files_under(root: str) -> list[str]:
    found = _glob(os.path.join(root, "**", "*"), include_hidden=True)
    if root == os.curdir:  # "." (the Action's default): names as the repository has them, which annotations,
        # SARIF and the job summary match against the diff ("configs/x.json", not "./configs/x.json")
        return [path.removeprefix(os.curdir + os.sep) for path in found]
    return found


def _glob(pattern: str, include_hidden: bool = False) -> list[str]:
    """Regular files matching ``pattern`` (``glob`` syntax with ``**``; hidden names only
    when the pattern component starts with '.', as ``glob.glob`` does)."""
    parts = [part for part in pattern.split(os.sep) if part]
    if not parts:
        return []
    root = os.sep if pattern.startswith(os.sep) else ""
    return _shortest_names(_GlobWalk(parts, include_hidden).run(root))


class _GlobWalk:
    """The paths matching pattern components ``parts``, walked breadth first, so that each real directory is
    first reached by its shortest path; each real directory is entered once per pattern position."""

    def __init__(self, parts: list[str], include_hidden: bool):
        self.parts = parts
        self.include_hidden = include_hidden
        self.queue: deque[tuple[str, int]] = deque()  # (directory, position in parts) to walk
        self.done: set[tuple[int, int, int]] = set()  # (device, inode, pattern position) already walked
        self.found: list[str] = []

    def run(self, root: str) -> list[str]:
        self.queue.append((root, 0))
        while self.queue:
            directory, index = self.queue.popleft()
            if not self._first_visit(directory, index):
                continue
            if self.parts[index] == "**":
                self._any_depth(directory, index)
            else:
                self._one_component(directory, index)
        return self.found

    def _first_visit(self, directory: str, index: int) -> bool:
        """False for a directory that cannot be read, or whose real directory was walked at this position."""
        try:
            info = os.stat(directory or ".")
        except OSError:
            return False
        key = (info.st_dev, info.st_ino, index)
        if key in self.done:
            return False
        self.done.add(key)
        return True

    def _any_depth(self, directory: str, index: int) -> None:
        """``**``: this directory (as no directory at all) and every directory below it."""
        last = index == len(self.parts) - 1
        if not last:
            self.queue.appendleft((directory, index + 1))  # "**" as no directory at all
        for name, is_dir in _entries(directory, "*", self.include_hidden):
            if is_dir:
                self.queue.append((os.path.join(directory, name), index))
            elif last:
                self.found.append(os.path.join(directory, name))

    def _one_component(self, directory: str, index: int) -> None:
        last = index == len(self.parts) - 1
        for name, is_dir in _entries(directory, self.parts[index], self.include_hidden):
            path = os.path.join(directory, name)
            if last and not is_dir:
                self.found.append(path)
            elif not last and is_dir:
                self.queue.append((path, index + 1))


def _shortest_names(found: list[str]) -> list[str]:
    """One name per real file: the shortest way to it (not a detour through a symlink loop)."""
    best: dict[str, str] = {}
    for path in found:
        if os.path.isfile(path):
            real = os.path.realpath(path)
            if real not in best or (path.count(os.sep), path) < (best[real].count(os.sep), best[real]):
                best[real] = path
    return list(best.values())


def _entries(directory: str, part: str, include_hidden: bool) -> list[tuple[str, bool]]:
    """(name, is a directory) of the entries of ``directory`` matching one pattern component."""
    if not _GLOB_CHARS & set(part):
        path = os.path.join(directory, part)
        return [(part, os.path.isdir(path))] if os.path.lexists(path) else []
    try:
        with os.scandir(directory or ".") as scan:
            entries = [(entry.name, _is_dir(entry)) for entry in scan]
    except OSError:
        return []
    hidden_ok = include_hidden or part.startswith(".")
    return sorted((name, is_dir) for name, is_dir in entries
                  if (hidden_ok or not name.startswith(".")) and fnmatch.fnmatchcase(name, part))


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows symlinks; loops are cut by the (device, inode) memo
    except OSError:
        return False

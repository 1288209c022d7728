"""Expand the PATH arguments of ``lint`` and ``check``: files, directories and glob patterns.

A directory is walked as ruff walks one (``_FolderWalk``): the folders config/excludes.py leaves out (hidden
ones, virtual environments, ``node_modules``, build output, ``--exclude`` patterns) are not entered, and inside
a git repository only the files git does not ignore are taken (config/gitfiles.py). A file named on the command
line is always taken, whatever the excludes say.

Directories and ``**`` patterns are walked here rather than by ``glob``/``rglob``: those
follow symlinked directories without noticing loops, so a link back to its parent made one
file appear 41 times (until the OS refused the path), and two such links make the walk
exponential. Here every real directory is entered at most once per position in the
pattern, and every file is listed once, by its real path. A folder walk takes no symlink (to a file or a
folder) whose target lies outside the folder walked: a link committed to a repository must not make the Action
read ``/`` or the runner's home.
"""

from __future__ import annotations

import fnmatch
import os
from collections import deque
from dataclasses import dataclass, field

from zeroadvisor.config.excludes import Excludes

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


@dataclass(frozen=True)
class Expansion:
    """The files to read, and what the walks could not do (one line each: git failed inside a repository)."""

    inputs: list[Input]
    notes: list[str] = field(default_factory=list)


def expand(arguments: list[str], excludes: Excludes | None = None) -> list[str]:
    """Every file to lint, in argument order, each once (by real path); ``-`` is kept as is."""
    return [item.path for item in expand_inputs(arguments, excludes)]


def expand_inputs(arguments: list[str], excludes: Excludes | None = None) -> list[Input]:
    """``expand``, saying of each file whether it was found in a directory or named (by path or pattern)."""
    return expand_walk(arguments, excludes).inputs


def expand_walk(arguments: list[str], excludes: Excludes | None = None) -> Expansion:
    """``expand_inputs`` with the notes of the walks; ``excludes`` default: the default excludes alone."""
    excludes = excludes if excludes is not None else Excludes()
    out: list[Input] = []
    notes: list[str] = []
    for argument in arguments:
        if argument != STDIN and os.path.isdir(argument):
            walk = _FolderWalk(argument, excludes)
            found = [p for p in walk.run() if _is_config_name(p)]
            notes.extend(walk.notes)
            if not found:
                left_out = ("; hidden folders, virtual environments, build output, what .gitignore ignores and "
                            "--exclude patterns are not walked (--no-default-excludes walks them)")
                raise PathError(f"{argument}: directory has no {'/'.join(CONFIG_SUFFIXES)} files"
                                + (left_out if excludes.defaults or excludes.patterns else ""))
            out.extend(Input(path, found=True) for path in sorted(found))
        elif _GLOB_CHARS & set(argument) and not os.path.exists(argument):
            found = sorted(_glob(argument, excludes=excludes))
            if not found:
                raise PathError(f"{argument}: pattern matches no files")
            out.extend(Input(path) for path in found)
        else:
            out.append(Input(argument))  # missing files are reported per file by the linter
    return Expansion(_unique(out), notes)


def _is_config_name(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in CONFIG_SUFFIXES


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


class _FolderWalk:
    """The files below one folder given on the command line: git's list where the folder is in a repository
    (each nested repository or submodule asked in turn), else every folder the excludes leave in, breadth first;
    each real folder entered once, no symlink followed out of the folder."""

    def __init__(self, root: str, excludes: Excludes):
        self.root = root
        self.excludes = excludes
        self.real_root = os.path.realpath(root)
        self.notes: list[str] = []
        self.done: set[tuple[int, int]] = set()  # (device, inode) of the real folders walked

    def run(self) -> list[str]:
        found = _shortest_names(self._walk(self.root))
        if self.root == os.curdir:  # "." (the Action's default): names as the repository has them, which
            # annotations, SARIF and the job summary match against the diff ("configs/x.json", not "./configs/x.json")
            return [path.removeprefix(os.curdir + os.sep) for path in found]
        return found

    def _walk(self, folder: str) -> list[str]:
        if not self._first_visit(folder):
            return []
        if self.excludes.gitignore:
            from zeroadvisor.config.gitfiles import listing

            listed = listing(folder)
            if listed.note is not None:
                self.notes.append(listed.note)
            if listed.paths is not None:
                return self._from_git(folder, listed.paths)
        return self._scan(folder)

    def _first_visit(self, folder: str) -> bool:
        try:
            info = os.stat(folder)
        except OSError:
            return False
        key = (info.st_dev, info.st_ino)
        if key in self.done:
            return False
        self.done.add(key)
        return True

    def _inside(self, path: str) -> bool:
        """Whether ``path``'s real path lies in the folder walked (a symlink's target, for one)."""
        real = os.path.realpath(path)
        return real == self.real_root or real.startswith(self.real_root.rstrip(os.sep) + os.sep)

    def _from_git(self, folder: str, listed: tuple[str, ...]) -> list[str]:
        """The config files among git's list, less the excluded; a folder listed (a nested repository, a
        submodule) is walked as a repository of its own."""
        out: list[str] = []
        parents: dict[str, bool] = {}  # relative folder -> left out (itself or a folder above it)
        for relative in listed:
            path = os.path.join(folder, relative)
            if self._parent_left_out(folder, os.path.dirname(relative), parents):
                continue
            if os.path.islink(path):  # git lists a link as a file: take it to a regular file inside the folder
                if os.path.isfile(path) and _is_config_name(path) and self._inside(path) \
                        and not self.excludes.excludes(path, False):
                    out.append(path)
            elif _is_config_name(path) and not os.path.isdir(path):
                if not self.excludes.excludes(path, False):
                    out.append(path)
            elif os.path.isdir(path) and not self.excludes.excludes(path, True):
                out.extend(self._walk(path))
        return out

    def _parent_left_out(self, folder: str, relative: str, memo: dict[str, bool]) -> bool:
        if not relative:
            return False
        if relative not in memo:
            memo[relative] = (self._parent_left_out(folder, os.path.dirname(relative), memo)
                              or self.excludes.excludes(os.path.join(folder, relative), True))
        return memo[relative]

    def _scan(self, folder: str) -> list[str]:
        """Every config file below ``folder`` in folders not left out; a repository found below it is asked."""
        out: list[str] = []
        queue = deque([folder])
        while queue:
            directory = queue.popleft()
            try:
                with os.scandir(directory) as scan:
                    entries = sorted(scan, key=lambda entry: entry.name)
            except OSError:
                continue
            for entry in entries:
                try:
                    is_link, is_dir, is_file = entry.is_symlink(), entry.is_dir(), entry.is_file()
                except OSError:
                    continue
                if is_link and (is_dir or not self._inside(entry.path)):
                    # a linked folder inside is walked by its own name, one outside never; a linked file only inside
                    continue
                if is_dir and not self.excludes.excludes(entry.path, True):
                    if self.excludes.gitignore and os.path.lexists(os.path.join(entry.path, ".git")):
                        out.extend(self._walk(entry.path))  # a repository of its own: its .gitignore counts
                    elif self._first_visit(entry.path):
                        queue.append(entry.path)
                elif is_file and _is_config_name(entry.path) and not self.excludes.excludes(entry.path, False):
                    out.append(entry.path)
        return out


def _glob(pattern: str, include_hidden: bool = False, excludes: Excludes | None = None) -> list[str]:
    """Regular files matching ``pattern`` (``glob`` syntax with ``**``; hidden names only
    when the pattern component starts with '.', as ``glob.glob`` does); what a wildcard component reaches is
    left out where ``excludes`` says (a ``**`` does not walk into ``.venv`` or ``node_modules``), what the
    pattern spells out is not."""
    parts = [part for part in pattern.split(os.sep) if part]
    if not parts:
        return []
    root = os.sep if pattern.startswith(os.sep) else ""
    return _shortest_names(_GlobWalk(parts, include_hidden, excludes).run(root))


class _GlobWalk:
    """The paths matching pattern components ``parts``, walked breadth first, so that each real directory is
    first reached by its shortest path; each real directory is entered once per pattern position."""

    def __init__(self, parts: list[str], include_hidden: bool, excludes: Excludes | None = None):
        self.parts = parts
        self.include_hidden = include_hidden
        self.excludes = excludes
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
            if self._left_out(os.path.join(directory, name), is_dir, "*"):
                continue
            if is_dir:
                self.queue.append((os.path.join(directory, name), index))
            elif last:
                self.found.append(os.path.join(directory, name))

    def _one_component(self, directory: str, index: int) -> None:
        last = index == len(self.parts) - 1
        for name, is_dir in _entries(directory, self.parts[index], self.include_hidden):
            path = os.path.join(directory, name)
            if self._left_out(path, is_dir, self.parts[index]):
                continue
            if last and not is_dir:
                self.found.append(path)
            elif not last and is_dir:
                self.queue.append((path, index + 1))


    def _left_out(self, path: str, is_dir: bool, part: str) -> bool:
        """An entry a wildcard reached (not one the pattern spells, nor a hidden one it asks for with '.')."""
        wildcard = bool(_GLOB_CHARS & set(part)) and not part.startswith(".")
        return wildcard and self.excludes is not None and self.excludes.excludes(path, is_dir)


def _shortest_names(found: list[str]) -> list[str]:
    """One name per real file: its own name where it was found by it, else the shortest way to it (not a detour
    through a symlink loop)."""
    best: dict[str, tuple[bool, int, str]] = {}
    for path in found:
        if os.path.isfile(path):
            real = os.path.realpath(path)
            key = (real != os.path.abspath(path), path.count(os.sep), path)
            if real not in best or key < best[real]:
                best[real] = key
    return [key[2] for key in best.values()]


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

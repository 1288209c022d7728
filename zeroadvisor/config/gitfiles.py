"""The files of a folder that ``.gitignore`` does not leave out, as git itself says.

git knows every rule a reimplementation would miss (nested ``.gitignore`` files, ``.git/info/exclude``,
``core.excludesFile``, negations, tracked files that a pattern would match), so a folder walk asks it:
``git ls-files --cached --others --exclude-standard -z`` run in the folder lists the tracked files and the
untracked ones not ignored, below that folder. No shell, a time limit, and fsmonitor off (a repository's own
``core.fsmonitor`` names a command git would run). Where git is not installed, the folder is in no repository,
or git fails, the walk goes on with the default excludes alone (config/paths.py); a failure inside a repository
(a repository git refuses as another user's, a time out) is said in a note.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass

TIMEOUT_S = 20.0  # a large monorepo lists in well under a second; a hung filesystem must not hang CI
# Variables that would point git at another repository or index than the folder's own (pre-commit sets
# GIT_INDEX_FILE in its hooks for a partial commit).
_REDIRECTING = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
                "GIT_NAMESPACE", "GIT_CEILING_DIRECTORIES")
_NOT_A_REPOSITORY = "not a git repository"


@dataclass(frozen=True)
class Listing:
    """What git said of one folder: the paths below it (relative, os separators; a nested repository or a
    submodule as its folder), or why it said nothing (``note``; None where the folder is in no repository)."""

    paths: tuple[str, ...] | None
    note: str | None = None


def listing(folder: str) -> Listing:
    """The files below ``folder`` that ``.gitignore`` leaves in, or ``paths`` None where git cannot say."""
    environment = {key: value for key, value in os.environ.items() if key not in _REDIRECTING}
    environment["LC_ALL"] = "C"  # the "not a git repository" message, untranslated
    command = ["git", "-c", "core.fsmonitor=false", "-c", "core.quotePath=false", "ls-files", "--cached",
               "--others", "--exclude-standard", "-z"]
    try:
        done = subprocess.run(command, cwd=folder, env=environment, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=TIMEOUT_S, check=False)
    except FileNotFoundError:  # no git: the default excludes alone
        return Listing(None)
    except subprocess.TimeoutExpired:
        return Listing(None, f"{folder}: git ls-files took over {TIMEOUT_S:.0f} s: walked without .gitignore")
    except OSError as err:
        return Listing(None, f"{folder}: cannot run git ({err.strerror or err}): walked without .gitignore")
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip()
        if _NOT_A_REPOSITORY in message:
            return Listing(None)
        first = message.splitlines()[0][:200] if message else f"exit {done.returncode}"
        return Listing(None, f"{folder}: git could not list the files ({first}): walked without .gitignore")
    names = (os.fsdecode(raw) for raw in done.stdout.split(b"\0") if raw)
    return Listing(tuple(name.rstrip("/").replace("/", os.sep) for name in names))

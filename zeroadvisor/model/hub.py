"""``--model ORG/NAME``: find a model's config.json offline, the way a training job would.

In order (the first that has it wins):

1. a local path: a file is read as today (config.json or model description); a directory
   must hold ``config.json`` (what ``save_pretrained`` writes and ``from_pretrained`` reads);
2. the local Hugging Face cache, laid out as huggingface_hub lays it out
   (``file_download.py`` ``try_to_load_from_cache``): ``<cache>/models--ORG--NAME/refs/main``
   holds a commit hash, ``snapshots/<hash>/config.json`` is the file. The cache folder is
   found as ``huggingface_hub/constants.py`` finds it (:func:`hub_cache_dir`);
3. the catalog shipped with zeroadvisor (``model/catalog/``, written by
   ``tools/gen_model_catalog.py``): the config.json of the most used open models.

Nothing here touches the network. A miss is one :class:`ModelError` line that names every
place searched and how to give the config.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from zeroadvisor.model.errors import ModelError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

CONFIG_NAME = "config.json"  # transformers utils/__init__.py CONFIG_NAME
CATALOG_INDEX = "index.json"

# huggingface_hub utils/_validators.py validate_repo_id: an optional namespace, a name of
# word characters, "-" and "."; at most 96 characters; no "--" or ".." anywhere.
_REPO_ID = re.compile(r"^(\b[\w\-.]+\b/)?\b[\w\-.]+\b$")
_REPO_ID_MAX = 96


@dataclass(frozen=True, slots=True)
class Resolved:
    """Where ``--model NAME`` was found."""

    path: Path  # the file to read (a config.json or a model description)
    origin: str  # "path" | "directory" | "hf-cache" | "catalog"
    source: str  # what the report names as the model's source
    note: str | None = None  # a fact the user should know (a snapshot picked without refs/main)


# a name with one of these endings is a file the user means, not a Hub id (ids never end so)
FILE_SUFFIXES = frozenset({".json", ".yaml", ".yml"})


def is_repo_id(name: str) -> bool:
    """Whether ``name`` is a valid Hub model id (``gpt2``, ``meta-llama/Llama-2-7b-hf``)."""
    return (
        len(name) <= _REPO_ID_MAX
        and "--" not in name
        and ".." not in name
        and _REPO_ID.match(name) is not None
    )


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The Hugging Face hub cache, as huggingface_hub/constants.py computes it:
    ``HF_HUB_CACHE``, else the legacy ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, where
    HF_HOME defaults to ``$XDG_CACHE_HOME/huggingface`` and that to ``~/.cache/huggingface``."""
    env = os.environ if environ is None else environ

    def expand(text: str) -> str:
        return os.path.expandvars(os.path.expanduser(text))

    # os.getenv(name, default) there: a variable set to "" is used as given, as huggingface_hub does.
    home = env.get("HF_HOME", os.path.join(env.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")),
                                           "huggingface"))
    legacy = env.get("HUGGINGFACE_HUB_CACHE", os.path.join(expand(home), "hub"))
    return Path(expand(env.get("HF_HUB_CACHE", legacy)))


def repo_folder(repo_id: str) -> str:
    """huggingface_hub file_download.py repo_folder_name: ``models--ORG--NAME``."""
    return "--".join(["models", *repo_id.split("/")])


def from_cache(repo_id: str, cache: Path) -> tuple[Path | None, str]:
    """The cached config.json of ``repo_id`` and a note, or (None, why not).

    Follows ``refs/main`` as try_to_load_from_cache does. Without ``refs/main`` (a cache
    copied by hand, or filled by ``snapshot_download(revision=<hash>)``) the only snapshot
    holding a config.json is used, or the newest of several, and the note says which.
    """
    repo = cache / repo_folder(repo_id)
    if not repo.is_dir():
        return None, f"no {repo}"
    snapshots = repo / "snapshots"
    ref = repo / "refs" / "main"
    if ref.is_file():
        try:
            commit = ref.read_text(encoding="utf-8", errors="replace").strip()
        except OSError as err:
            return None, f"{ref} unreadable ({err.strerror})"
        config = snapshots / commit / CONFIG_NAME
        if commit and "/" not in commit and config.is_file():
            return config, ""
        return None, f"refs/main of {repo} names snapshot {commit[:40]!r}, which has no {CONFIG_NAME}"
    try:
        candidates = [p / CONFIG_NAME for p in snapshots.iterdir() if (p / CONFIG_NAME).is_file()]
    except OSError:
        candidates = []
    if not candidates:
        return None, f"no snapshot with {CONFIG_NAME} in {repo}"
    candidates.sort(key=lambda p: (p.stat().st_mtime, p.parent.name))
    chosen = candidates[-1]
    which = "the only snapshot" if len(candidates) == 1 else f"the newest of {len(candidates)} snapshots"
    return chosen, f"{repo} has no refs/main: used {which}, {chosen.parent.name}"


# --------------------------------------------------------------------------- catalog


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    id: str
    file: str  # the config.json's name in model/catalog/
    source: str  # URL of the config.json on huggingface.co
    revision: str
    aliases: tuple[str, ...]
    published_parameters: int | str
    published_source: str


def _catalog_dir() -> Traversable:
    # imported here: importlib.resources brings tempfile and random, and a --model given as a path never asks
    from importlib import resources

    return resources.files("zeroadvisor.model") / "catalog"


@lru_cache(maxsize=1)
def catalog() -> dict[str, CatalogEntry]:
    """The shipped catalog, by Hub id."""
    index = json.loads((_catalog_dir() / CATALOG_INDEX).read_text(encoding="utf-8"))
    return {
        model_id: CatalogEntry(
            id=model_id,
            file=row["file"],
            source=row["source"],
            revision=row["revision"],
            aliases=tuple(row.get("aliases", ())),
            published_parameters=row["published_parameters"],
            published_source=row["published_source"],
        )
        for model_id, row in index["models"].items()
    }


@lru_cache(maxsize=1)
def _names() -> dict[str, str]:
    """Lower-cased id or alias -> catalog id (Hub ids are case-insensitive on huggingface.co)."""
    names: dict[str, str] = {}
    for entry in catalog().values():
        for name in (entry.id, *entry.aliases):
            names[name.lower()] = entry.id
    return names


def catalog_entry(name: str) -> CatalogEntry | None:
    """The catalog entry for a Hub id or a former id, case-insensitively."""
    model_id = _names().get(name.lower())
    return catalog()[model_id] if model_id is not None else None


def catalog_config_path(entry: CatalogEntry) -> Path:
    return Path(str(_catalog_dir() / entry.file))


def suggestions(name: str, n: int = 3) -> list[str]:
    """Catalog ids close to ``name`` (a typo, a missing organisation, another size)."""
    key = name.lower()
    names = _names()
    found: list[str] = []
    bare = {k.rsplit("/", 1)[-1]: v for k, v in names.items()}
    if key.rsplit("/", 1)[-1] in bare:  # the right model name under another organisation
        found.append(bare[key.rsplit("/", 1)[-1]])
    found.extend(names[close] for close in difflib.get_close_matches(key, list(names), n=n, cutoff=0.75))
    return list(dict.fromkeys(found))[:n]


# --------------------------------------------------------------------------- resolution


# What to give instead of a name found nowhere: --model's path, or hf_config's (relative to the description)
_INSTEAD = {True: "--model PATH (a config.json, a model directory or a model description)",
            False: "hf_config the path of a config.json or a model directory, relative to the description"}


def resolve(name: str, environ: Mapping[str, str] | None = None, relative_to: Path | None = None) -> Resolved:
    """Where the config of ``--model NAME`` is; ModelError (one line) when nowhere. ``relative_to``: the folder a
    local path is read from (a model description's ``hf_config:``: its own folder; --model: the current one)."""
    path = Path(name) if relative_to is None else relative_to / name
    shown = name if relative_to is None else str(path)
    if path.is_dir():
        config = path / CONFIG_NAME
        if config.is_file():
            return Resolved(config, "directory", str(config))
        raise ModelError(
            f"is a directory without {CONFIG_NAME}: give the model directory that "
            f"save_pretrained wrote, or the path of a config.json or model description",
            file=shown,
        )
    if path.exists() or not is_repo_id(name) or path.suffix.lower() in FILE_SUFFIXES:
        return Resolved(path, "path", shown)  # the reader reports a missing or unreadable file
    searched = [f"no file or directory {shown}"]
    cache = hub_cache_dir(environ)
    cached, why = from_cache(name, cache)
    if cached is not None:
        return Resolved(cached, "hf-cache", f"{name} in the Hugging Face cache ({cached})", why or None)
    searched.append(f"Hugging Face cache: {why}")
    entry = catalog_entry(name)
    if entry is not None:
        renamed = f" (the catalog's name for {name})" if entry.id != name else ""
        return Resolved(
            catalog_config_path(entry),
            "catalog",
            f"zeroadvisor catalog: {entry.id} (config.json of {entry.source}){renamed}",
        )
    close = suggestions(name)
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    searched.append(f"not in zeroadvisor's catalog of {len(catalog())} models{hint}")
    raise ModelError(
        f"model {name} not found offline: {'; '.join(searched)}. Give {_INSTEAD[relative_to is None]}, or fetch "
        f"the config: "
        f"hf download {name} {CONFIG_NAME}"
    )


__all__ = [
    "CatalogEntry",
    "Resolved",
    "catalog",
    "catalog_entry",
    "hub_cache_dir",
    "is_repo_id",
    "resolve",
    "suggestions",
]

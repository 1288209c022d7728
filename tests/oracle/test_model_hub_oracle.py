"""model/hub.py against huggingface_hub itself: the cache folder its constants compute from the
environment, and the file ``try_to_load_from_cache`` returns from a cache laid out as it lays
one out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

huggingface_hub = pytest.importorskip("huggingface_hub")

from zeroadvisor.model import hub  # noqa: E402

C1, C2 = "1" * 40, "2" * 40
ENV_NAMES = ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")


@pytest.mark.parametrize(
    "given",
    [
        {},
        {"XDG_CACHE_HOME": "{t}/xdg"},
        {"HF_HOME": "{t}/hfhome", "XDG_CACHE_HOME": "{t}/xdg"},
        {"HUGGINGFACE_HUB_CACHE": "{t}/legacy", "HF_HOME": "{t}/hfhome"},
        {"HF_HUB_CACHE": "~/hc", "HUGGINGFACE_HUB_CACHE": "{t}/legacy"},
    ],
)
def test_cache_folder_is_huggingface_hubs(tmp_path, monkeypatch, given):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # "~" is expanded with this process's HOME
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update({k: v.format(t=tmp_path) for k, v in given.items()})
    theirs = subprocess.run(
        [sys.executable, "-c", "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout.strip()
    assert hub.hub_cache_dir(env) == Path(theirs)


def test_resolution_agrees_with_try_to_load_from_cache(tmp_path):
    cache = tmp_path / "cache"
    for repo_id, main in (("acme/one", C1), ("acme/two", C2), ("solo", C1)):
        repo = cache / hub.repo_folder(repo_id)
        (repo / "blobs").mkdir(parents=True)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(main)
        for commit in (C1, C2):
            blob = repo / "blobs" / commit[:8]
            blob.write_text(json.dumps({"commit": commit}))
            (repo / "snapshots" / commit).mkdir(parents=True)
            (repo / "snapshots" / commit / "config.json").symlink_to(Path("..", "..", "blobs", commit[:8]))
    for repo_id in ("acme/one", "acme/two", "solo", "acme/absent"):
        theirs = huggingface_hub.try_to_load_from_cache(repo_id, "config.json", cache_dir=cache)
        ours, _ = hub.from_cache(repo_id, cache)
        assert (str(ours) if ours else None) == (theirs if isinstance(theirs, str) else None), repo_id

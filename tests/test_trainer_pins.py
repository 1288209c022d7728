"""The trainer's release from the user's pins (config/trainer_pins.py, issue 35), found as DeepSpeed's is: the same
files and order, nearest folder first up to the repository root, read as untrusted input."""

from __future__ import annotations

import os

import pytest

from zeroadvisor.config import pin_files
from zeroadvisor.config.trainer_pins import DISTRIBUTIONS, find_trainer_pin
from zeroadvisor.vocab import TrainerFamily


@pytest.fixture
def repo(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    pin_files.clear_cache()
    monkeypatch.chdir(tmp_path)
    # no installed trainer answers in these tests (the fallback is tested on its own)
    monkeypatch.setattr("zeroadvisor.config.trainer_pins._installed", lambda name: None)
    return tmp_path


@pytest.mark.parametrize(("text", "version", "line"), [
    ("torch\ntrl==0.21.0\n", "0.21.0", 2),
    ("# trl==0.9 was old\ntrl >= 0.19, < 0.22\n", ">=0.19,<0.22", 2),
    ("trl[vllm]==0.23.1 ; python_version >= '3.10'\n", "0.23.1", 1),
    ("deepspeed==0.16.4\n", None, 0),
    ("trlx==0.7.0\n", None, 0),  # another distribution whose name starts the same
])
def test_requirements(repo, text, version, line):
    (repo / "requirements.txt").write_text(text)
    pin = find_trainer_pin(str(repo / "ds.json"), TrainerFamily.TRL)
    if version is None:
        assert pin is None
    else:
        assert pin is not None and pin.version == version and pin.origin.endswith(f"requirements.txt:{line}")


def test_pyproject_and_the_nearest_folder_wins(repo):
    (repo / "pyproject.toml").write_text('[project]\ndependencies = ["openrlhf>=0.8.5", "deepspeed"]\n')
    (repo / "train").mkdir()
    (repo / "train" / "requirements.txt").write_text("openrlhf==0.8.9\n")
    assert find_trainer_pin(str(repo / "train" / "ds.json"), TrainerFamily.OPENRLHF).version == "0.8.9"
    assert find_trainer_pin(str(repo / "ds.json"), TrainerFamily.OPENRLHF).version == ">=0.8.5"


@pytest.mark.parametrize("spelling", ["ms-swift", "ms_swift", "MS.Swift"])
def test_names_are_matched_as_pep_503_normalises_them(repo, spelling):
    (repo / "requirements.txt").write_text(f"{spelling}==3.8.1\n")
    assert find_trainer_pin(str(repo), TrainerFamily.MS_SWIFT).version == "3.8.1"


def test_a_lock_file_gives_the_locked_release(repo):
    (repo / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "torch"\nversion = "2.6.0"\n\n'
                                  '[[package]]\nname = "llamafactory"\nversion = "0.9.3"\n'
                                  'source = { registry = "x" }\n')
    (repo / "requirements.txt").write_text("llamafactory>=0.9\n")
    pin = find_trainer_pin(str(repo), TrainerFamily.LLAMA_FACTORY)
    assert pin.version == "0.9.3" and pin.origin == "llamafactory 0.9.3 (locked) at uv.lock:9"


def test_a_file_that_cannot_be_read_is_skipped_not_an_error(repo):
    os.mkfifo(repo / "requirements.txt")  # a FIFO that never answers: config/pin_files.py skips it
    (repo / "setup.cfg").write_text("[options]\ninstall_requires =\n    axolotl==0.18.0\n")
    assert find_trainer_pin(str(repo), TrainerFamily.AXOLOTL).version == "0.18.0"


def test_without_a_pin_the_installed_distribution_answers(tmp_path, monkeypatch):
    from importlib import metadata

    (tmp_path / ".git").mkdir()
    pin_files.clear_cache()
    monkeypatch.setattr(metadata, "version", lambda name: {"trl": "0.21.0"}[name])
    pin = find_trainer_pin(str(tmp_path), TrainerFamily.TRL)
    assert pin.version == "0.21.0" and pin.origin == "the installed trl 0.21.0"


def test_every_trainer_has_its_distribution():
    assert set(DISTRIBUTIONS) == set(TrainerFamily)

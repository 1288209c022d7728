"""config/pins.py: the DeepSpeed requirement in the user's files, found walking up from a config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from zeroadvisor.config.pins import find_pin, poetry_specifier


def _config(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ds_config.json"
    path.write_text('{"train_batch_size": 8}\n', encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("name", "text", "specifier", "line"), [
    ("requirements.txt", "torch==2.3\n# pinned\ndeepspeed==0.14.5  # cluster image\n", "==0.14.5", 3),
    ("requirements-train.txt", "DeepSpeed[autotuning] >=0.10.0, <=0.16.9 ; python_version>'3.8'\n",
     ">=0.10.0,<=0.16.9", 1),
    ("requirements.txt", "deepspeed==0.15.4 \\\n    --hash=sha256:abc\n", "==0.15.4", 1),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch", "deepspeed>=0.10.0,<=0.16.9"]\n',
     ">=0.10.0,<=0.16.9", 3),
    ("pyproject.toml", '[project]\nname = "x"\n[project.optional-dependencies]\ntrain = ["deepspeed==0.12.6"]\n',
     "==0.12.6", 4),
    ("pyproject.toml", '[tool.poetry.dependencies]\npython = "^3.10"\ndeepspeed = "^0.14.2"\n', ">=0.14.2,<0.15.0", 3),
    ("setup.cfg", "[options]\ninstall_requires =\n    torch\n    deepspeed~=0.13.1\n", "~=0.13.1", 4),
    ("setup.py", "from setuptools import setup\nREQS = ['torch', 'deepspeed==0.9.5']\nsetup(install_requires=REQS)\n",
     "==0.9.5", 2),
    ("environment.yml", "dependencies:\n  - python=3.10\n  - deepspeed=0.16.9\n", "==0.16.9", 3),
    ("environment.yml", "dependencies:\n  - pip\n  - pip:\n    - deepspeed==0.17.6\n", "==0.17.6", 4),
    ("Pipfile", '[packages]\ndeepspeed = "==0.18.9"\n', "==0.18.9", 2),
    ("uv.lock", 'version = 1\n[[package]]\nname = "deepspeed"\nversion = "0.14.5"\n', "==0.14.5", 4),
    ("poetry.lock", ('[[package]]\nname = "torch"\nversion = "2.3.0"\n\n[[package]]\nname = "deepspeed"\n'
                     'version = "0.15.4"\n'), "==0.15.4", 7),
    ("Pipfile.lock", json.dumps({"default": {"deepspeed": {"version": "==0.13.5"}}}, indent=1), "==0.13.5", 3),
])
def test_each_format(tmp_path, name, text, specifier, line):
    (tmp_path / name).write_text(text, encoding="utf-8")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None, found.notes
    assert (found.pin.specifier, found.pin.line) == (specifier, line)
    assert found.pin.file.endswith(name)


def test_requirements_folder(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "base.txt").write_text("deepspeed==0.11.2\n", encoding="utf-8")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None and found.pin.specifier == "==0.11.2"


def test_lock_wins_over_declared_range_in_one_folder(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["deepspeed>=0.10"]\n')
    (tmp_path / "uv.lock").write_text('[[package]]\nname = "deepspeed"\nversion = "0.14.5"\n')
    assert find_pin(_config(tmp_path)).pin.specifier == "==0.14.5"


def test_nearest_folder_wins_and_walk_stops_at_repository_root(tmp_path):
    (tmp_path / "requirements.txt").write_text("deepspeed==0.9.5\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "requirements.txt").write_text("deepspeed==0.16.9\n")
    assert find_pin(_config(repo / "configs")).pin.specifier == "==0.16.9"
    (repo / "requirements.txt").unlink()
    assert find_pin(_config(repo / "configs")).pin is None  # outside the repository does not count


def test_no_version_is_an_empty_specifier(tmp_path):
    (tmp_path / "requirements.txt").write_text("deepspeed\n")
    assert find_pin(_config(tmp_path)).pin.specifier == ""


@pytest.mark.parametrize(("name", "text"), [
    ("pyproject.toml", "[project\nname = 'deepspeed'"),
    ("setup.py", "def (:\n    'deepspeed'\n"),
    ("environment.yml", b"dependencies:\n  - deepspeed=0.14.5\xff\n"),
    ("Pipfile.lock", '{"default": {"deepspeed": '),
    ("requirements.txt", b"\xff\xfe\x00junk"),
])
def test_broken_file_is_a_note_not_an_error(tmp_path, name, text):
    (tmp_path / ".git").mkdir()
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    found = find_pin(_config(tmp_path))
    assert found.pin is None
    assert len(found.notes) == 1 and name in found.notes[0] and "\n" not in found.notes[0]


def test_huge_file_is_skipped(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("# x\n" * 1_500_000 + "deepspeed==0.14.5\n")
    found = find_pin(_config(tmp_path))
    assert found.pin is None and "larger than 5 MB" in found.notes[0]


def test_other_packages_are_not_deepspeed(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("deepspeed-mii==0.2\ndeepspeedx==1\n")
    assert find_pin(_config(tmp_path)).pin is None


@pytest.mark.parametrize(("poetry", "pep440"), [
    ("^0.14.2", ">=0.14.2,<0.15.0"), ("^1.2", ">=1.2.0,<2.0.0"), ("^0.0.3", ">=0.0.3,<0.0.4"),
    ("~0.14.2", ">=0.14.2,<0.15.0"), ("*", ""), ("0.14.5", "==0.14.5"), (">=0.10,<0.17", ">=0.10,<0.17"),
])
def test_poetry_constraints(poetry, pep440):
    assert poetry_specifier(poetry) == pep440

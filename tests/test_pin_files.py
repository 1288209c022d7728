"""config/pin_files.py through the pin search: a pull request's build files are read as untrusted input (issue 32).

Devices, FIFOs and links out of the repository are skipped with a note before anything blocks or reads without
end; text is decoded as pip decodes it; each file is parsed once a run however many configs share it.
"""

from __future__ import annotations

import codecs
import os
import time
import tomllib
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config import pin_files
from zeroadvisor.config.pins import clear_cache, find_pin
from zeroadvisor.inputs import release as choice

needs_posix = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs and /dev/zero are POSIX")


@pytest.fixture
def repo(tmp_path):
    (tmp_path / ".git").mkdir()
    clear_cache()
    choice._pin_choice.cache_clear()
    yield tmp_path
    clear_cache()
    choice._pin_choice.cache_clear()


def _config(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ds_config.json"
    path.write_text('{"train_batch_size": 8}\n')
    return str(path)


def _timed_search(config: str):
    start = time.monotonic()
    found = find_pin(config)
    assert time.monotonic() - start < 2
    return found


@needs_posix
def test_a_fifo_is_skipped_without_blocking(repo):
    os.mkfifo(repo / "requirements.txt")  # nothing ever writes to it: an open() without O_NONBLOCK waits forever
    (repo / "pyproject.toml").write_text('[project]\ndependencies = ["deepspeed==0.14.5"]\n')
    found = _timed_search(_config(repo))
    assert found.pin is not None and found.pin.file.endswith("pyproject.toml")  # the search goes on past it
    assert len(found.notes) == 1
    assert found.notes[0].endswith("requirements.txt: not read for the DeepSpeed pin: not a regular file")


@needs_posix
def test_a_fifo_put_in_place_after_the_stat_does_not_block(repo):
    """The open itself does not wait (O_NONBLOCK) and the opened file is checked again (fstat)."""
    fifo = repo / "swapped"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(pin_files.Skipped, match="not a regular file"):
        pin_files._read(pin_files._Identity(str(fifo), 0, 0))
    assert time.monotonic() - start < 1


@needs_posix
def test_a_link_to_dev_zero_is_not_read(repo):
    (repo / "requirements.txt").symlink_to("/dev/zero")
    found = _timed_search(_config(repo))
    assert found.pin is None
    assert len(found.notes) == 1 and "requirements.txt: not read for the DeepSpeed pin: a link to /dev/zero" in \
        found.notes[0]


def test_a_link_out_of_the_repository_is_not_followed(tmp_path):
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("deepspeed==0.9.5\n")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "requirements.txt").symlink_to(outside)
    clear_cache()
    found = find_pin(_config(project))
    assert found.pin is None and "outside" in found.notes[0]


def test_a_link_inside_the_repository_is_followed(repo):
    (repo / "deps").mkdir()
    (repo / "deps" / "train.txt").write_text("deepspeed==0.15.4\n")
    (repo / "requirements.txt").symlink_to(repo / "deps" / "train.txt")
    found = find_pin(_config(repo / "configs"))
    assert found.pin is not None and found.pin.specifier == "==0.15.4" and not found.notes


def test_a_requirements_folder_linked_out_of_the_repository_is_not_listed(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "base.txt").write_text("deepspeed==0.9.5\n")
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    (project / "requirements").symlink_to(outside, target_is_directory=True)
    clear_cache()
    found = find_pin(_config(project))
    assert (found.pin, found.notes) == (None, ())


def test_a_link_loop_is_a_note(repo):
    (repo / "requirements.txt").symlink_to(repo / "requirements-dev.txt")
    (repo / "requirements-dev.txt").symlink_to(repo / "requirements.txt")
    found = find_pin(_config(repo))
    assert found.pin is None and found.notes and all("not read for the DeepSpeed pin" in n for n in found.notes)


def test_without_a_repository_a_link_stays_in_its_own_folder(tmp_path):
    (tmp_path / "pins.txt").write_text("deepspeed==0.9.5\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "requirements.txt").symlink_to(tmp_path / "pins.txt")
    clear_cache()
    found = find_pin(_config(tmp_path / "sub"))
    assert found.notes and "outside" in found.notes[0]


@pytest.mark.parametrize("encode", [
    lambda t: codecs.BOM_UTF16_LE + t.replace("\n", "\r\n").encode("utf-16-le"),  # PowerShell's pip freeze >
    lambda t: codecs.BOM_UTF16_BE + t.encode("utf-16-be"),
    lambda t: codecs.BOM_UTF8 + t.encode(),
    lambda t: codecs.BOM_UTF32_LE + t.encode("utf-32-le"),
], ids=["utf-16-le", "utf-16-be", "utf-8-sig", "utf-32-le"])
def test_requirements_decoded_as_pip_decodes_them(repo, encode):
    (repo / "requirements.txt").write_bytes(encode("torch==2.3.0\ndeepspeed==0.14.5\n"))
    found = find_pin(_config(repo))
    assert found.pin is not None and (found.pin.specifier, found.pin.line) == ("==0.14.5", 2), found.notes


def test_text_that_is_not_its_encoding_is_a_note(repo):
    (repo / "requirements.txt").write_bytes(b"deepspeed==0.14.5\n\xff\xfe")
    found = find_pin(_config(repo))
    assert found.pin is None and len(found.notes) == 1
    assert found.notes[0].endswith("requirements.txt: not read for the DeepSpeed pin: not UTF-8 text (byte 18)")


def test_each_file_is_parsed_once_however_many_configs_share_it(repo, monkeypatch):
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed>=0.14,<0.16"]\n')
    parses = []
    real = tomllib.loads
    monkeypatch.setattr(tomllib, "loads", lambda text: parses.append(len(text)) or real(text))
    configs = [_config(repo / "configs" / name) for name in ("a", "b", "c")]
    chosen = {choice.choose_release(flag=None, config_path=c).releases for c in configs}
    assert len(chosen) == 1 and parses == [len((repo / "pyproject.toml").read_text())]
    (repo / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed==0.14.5"]\n')
    choice._pin_choice.cache_clear()
    assert choice.choose_release(flag=None, config_path=configs[0]).releases == ("0.14.5",)
    assert len(parses) == 2  # a new version of the file is read again


def test_a_file_that_never_names_deepspeed_is_not_parsed(repo, monkeypatch):
    (repo / "pyproject.toml").write_text("[project\n" + "x = 1\n" * 1000)  # broken, but holds no pin either
    parses = []
    monkeypatch.setattr(tomllib, "loads", lambda text: parses.append(1))
    found = find_pin(_config(repo))
    assert (found.pin, found.notes, parses) == (None, (), [])


def test_hostile_pin_files_reach_lint_as_notes_not_errors(repo, cli):
    """A malformed build file never fails lint (exit 2/3): the config is linted, the file is a note."""
    (repo / "pyproject.toml").write_text('project = [1]\n[tool.poetry]\ndependencies = ["deepspeed"]\n')
    (repo / "environment.yml").write_text("dependencies:\n  - pip:\n  - deepspeed=0.14|0.15\n")
    (repo / "setup.py").write_text("# deepspeed\nx = " + "-" * 7000 + "1\n")
    if hasattr(os, "mkfifo"):
        os.mkfifo(repo / "requirements.txt")
    config = _config(repo)
    done = cli("lint", config)
    assert done.returncode == 0, done.stderr
    for said in ("pyproject.toml: [project] is a list, not a table",
                 "[tool.poetry.dependencies] is a list, not a table",
                 "setup.py: not read for the DeepSpeed pin: nested too deeply to parse",
                 "environment.yml:3: 'deepspeed=0.14|0.15' is not a conda match spec"):
        assert said in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr


NEWER_KEYS = '{"train_batch_size": 8, "zero_optimization": {"stage": 3, "stage3_module_granularity_threshold": 0}}\n'


@pytest.mark.parametrize(("name", "data"), [
    ("requirements.txt", b"deepspeed==0.14.5+cu121\n"),
    ("requirements.txt", b"deepspeed==0.14.5 --global-option=build_ext\n"),
    ("requirements.txt", codecs.BOM_UTF16_LE + "deepspeed==0.14.5\r\n".encode("utf-16-le")),
    ("environment.yml", b"dependencies:\n  - pip:\n  - deepspeed=0.14.5=py310_0\n"),
    ("environment.yml", b"dependencies:\n  - deepspeed 0.14.5\n"),
    ("pyproject.toml", (b'[tool.poetry.dependencies]\ndeepspeed = [{version = "0.14.5", python = ">=3.8"},\n'
                       b'  {version = "0.9.5", python = "<3.8"}]\n')),
    ("setup.py", b"setup(description='DeepSpeed made easy', extras_require={'deepspeed': ['deepspeed==0.14.5']})\n"),
])
def test_spellings_the_issue_found_refused_are_read_by_lint(repo, cli, name, data):
    """Each was exit 2 ("not a DeepSpeed version") or no pin at all; read as 0.14.5, the config's 0.16 key is
    an error (exit 1) and stderr names the pin."""
    (repo / name).write_bytes(data)
    config = repo / "ds_config.json"
    config.write_text(NEWER_KEYS)
    done = cli("lint", str(config))
    assert done.returncode == 1, done.stderr
    assert "read as DeepSpeed 0.14" in done.stderr and name in done.stderr and "ZA101" in done.stdout

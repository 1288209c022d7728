"""Reading configs (config/reader.py) and expanding PATH arguments (config/paths.py)."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from zeroadvisor.config import reader
from zeroadvisor.config.limits import MAX_CONFIG_BYTES
from zeroadvisor.config.paths import PathError, expand
from zeroadvisor.config.source import ParseError

GOOD = b'{"train_batch_size": 8}\n'


# -- what cannot be read is a typed InputError, never a hang --------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    # Run in a thread: with no writer, open() of a FIFO blocks forever unless the reader refuses
    # it first. The thread is a daemon so a regression fails the test instead of hanging it.
    worker = threading.Thread(target=lambda: _catch(outcome, reader.read_document, fifo), daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():
        with open(fifo, "wb"):  # release the blocked reader
            pass
        pytest.fail("reading a FIFO blocked")
    (error,) = outcome
    assert isinstance(error, reader.NotAFile)
    assert str(error) == f"{fifo}: is a named pipe (FIFO), not a config file"


def _catch(outcome: list, function, *args) -> None:
    try:
        function(*args)
    except BaseException as err:  # noqa: BLE001 - handed back to the test
        outcome.append(err)


def test_missing_file_and_directory_are_typed(tmp_path):
    with pytest.raises(reader.MissingInput) as missing:
        reader.read_document(tmp_path / "nope.json", "nope.json")
    assert (str(missing.value), missing.value.name, missing.value.reason) == (
        "nope.json: no such file", "nope.json", "no such file")
    with pytest.raises(reader.NotAFile, match="is a directory, not a config file"):
        reader.read_document(tmp_path)
    assert issubclass(reader.NotAFile, reader.InputError) and issubclass(reader.MissingInput, reader.InputError)


def test_unreadable_file_is_typed(tmp_path):
    if os.name == "posix" and os.geteuid() != 0:
        path = tmp_path / "secret.json"
        path.write_bytes(GOOD)
        path.chmod(0)
        expected = "cannot read: Permission denied"
    else:  # root reads every file; /proc/self/mem is a regular file whose read fails with EIO
        path, expected = Path("/proc/self/mem"), "cannot read: Input/output error"
        if not path.exists():
            pytest.skip("needs a non-root user or Linux /proc")
    with pytest.raises(reader.UnreadableInput, match=expected):
        reader.read_document(path)


def test_character_device_is_refused():
    with pytest.raises(reader.NotAFile, match="is a character device"):
        reader.read_document("/dev/null")


def test_too_large_is_a_finding_not_an_input_error(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * (MAX_CONFIG_BYTES + 10))
    with pytest.raises(ParseError, match=r"file is 1\.0 MB; a DeepSpeed config is a few KB \(limit 1024 KiB\)"):
        reader.read_document(path)


def test_utf16_is_named(tmp_path):
    path = tmp_path / "u16.json"
    path.write_bytes('{"train_batch_size": 8}'.encode("utf-16"))
    with pytest.raises(ParseError, match="UTF-16"):
        reader.read_document(path)


# -- stdin and text already in memory (the CLI's "-") ----------------------------------------------

def test_stream_document_reads_like_a_file():
    doc = reader.read_stream_document(
        io.BytesIO(b'\xef\xbb\xbf{"train_batch_size": 8, "zero_optimization": {stage: 3}}'))
    assert doc.name == "<stdin>"
    assert doc.data == {"train_batch_size": 8, "zero_optimization": {"stage": 3}}
    assert doc.locate("/zero_optimization/stage") == (1, 47)  # counted from after the BOM


def test_stream_document_has_the_same_limits():
    with pytest.raises(ParseError, match="a DeepSpeed config is a few KB"):
        reader.read_stream_document(io.BytesIO(b" " * (MAX_CONFIG_BYTES + 1)))
    with pytest.raises(ParseError, match="not UTF-8"):
        reader.read_stream_document(io.BytesIO(b'{"a": "\xe9"}'))


def test_stream_document_can_be_yaml():
    doc = reader.read_stream_document(io.BytesIO(b"train_batch_size: 8\n"), syntax="yaml")
    assert doc.data == {"train_batch_size": 8}
    assert reader.read_stream_document(io.BytesIO(b"train_batch_size: 8\n"), name="ds.yaml").data == doc.data
    with pytest.raises(ValueError, match="unknown config syntax"):
        reader.read_text_document("{}", syntax="toml")


def test_text_document():
    doc = reader.read_text_document('{"train_batch_size": 8}', "pasted")
    assert (doc.name, doc.data) == ("pasted", {"train_batch_size": 8})
    with pytest.raises(ParseError, match="a DeepSpeed config is a few KB"):
        reader.read_text_document(" " * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ParseError, match="a DeepSpeed config is a few KB"):
        reader.read_text_document("\u00e9" * (MAX_CONFIG_BYTES // 2 + 1))  # bytes count, not characters


# -- PATH arguments ---------------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path, monkeypatch) -> Path:
    """a/x.json, a/b/c.json, and two symlinks from a/b back up the tree (a loop each)."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "x.json").write_bytes(GOOD)
    (tmp_path / "a" / "b" / "c.json").write_bytes(GOOD)
    (tmp_path / "a" / "b" / "up").symlink_to("..")
    (tmp_path / "a" / "b" / "up2").symlink_to("../..")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_double_star_glob_through_symlink_loops_lists_each_file_once(tree):
    # glob.glob follows both loops (41 copies of each file with one; exponential with two)
    assert expand(["a/**/*.json"]) == ["a/b/c.json", "a/x.json"]
    assert expand(["**/c.json"]) == ["a/b/c.json"]


def test_directory_through_symlink_loops_lists_each_file_once(tree):
    assert expand(["a"]) == ["a/b/c.json", "a/x.json"]


def test_same_file_twice_by_another_path_is_listed_once(tree):
    (tree / "link.json").symlink_to("a/x.json")
    assert expand(["a/x.json", "link.json", "./a/x.json"]) == ["a/x.json"]


def test_symlinked_directory_is_followed(tree, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "e.json").write_bytes(GOOD)
    (tree / "a" / "ext").symlink_to(tmp_path / "elsewhere")
    assert "a/ext/e.json" in expand(["a/**/*.json"])


def test_hidden_files_follow_glob(tree):
    (tree / "a" / ".h.json").write_bytes(GOOD)
    assert "a/.h.json" not in expand(["a/*.json"])
    assert "a/.h.json" in expand(["a/.*.json"])
    assert "a/.h.json" in expand(["a"])  # a directory argument lists every config file in it


def test_stdin_and_missing_paths_pass_through(tree):
    assert expand(["-", "missing.json", "-"]) == ["-", "missing.json"]
    with pytest.raises(PathError, match="pattern matches no files"):
        expand(["a/**/*.yaml"])

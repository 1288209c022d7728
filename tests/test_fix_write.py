"""--fix writes atomically and only where the user lets it (issue 7, defects 4 and 5).

Real files, real permissions, a real symlink, a real file-size limit: nothing is mocked.
"""

from __future__ import annotations

import os
import resource
import signal
import tempfile
from pathlib import Path

import pytest

from cli_run import cli, cli_process  # noqa: F401 - the fixture
from zeroadvisor.config.reader import read_document
from zeroadvisor.fix.apply import FixError, plan_fixes, write_fix, write_fixes
from zeroadvisor.fix.editor import WriteError, write_atomically
from zeroadvisor.lint.findings import Finding, Severity

TEXT = '{\n  // tuned on 8xA100\n  "zero_optimization": {\n    "stage": 3\n  }\n}\n'
PATCH = {"zero_optimization": {"stage": 2}}
FIXED = TEXT.replace('"stage": 3', '"stage": 2')


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".zeroadvisor-")]


def test_a_symlink_is_written_through_to_its_target(tmp_path):
    (tmp_path / "configs").mkdir()
    target = tmp_path / "configs" / "ds.json"
    target.write_text(TEXT)
    link = tmp_path / "ds.json"
    link.symlink_to(os.path.join("configs", "ds.json"))
    write_fix(str(link), read_document(link), PATCH)
    assert link.is_symlink() and os.readlink(link) == os.path.join("configs", "ds.json")
    assert target.read_text() == FIXED
    assert leftovers(tmp_path) == [] and leftovers(tmp_path / "configs") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another owner")
def test_owner_group_and_mode_are_kept(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(TEXT)
    os.chown(path, 1234, 5678)
    path.chmod(0o664)
    write_fix(str(path), read_document(path), PATCH)
    info = path.stat()
    assert (info.st_uid, info.st_gid, info.st_mode & 0o7777) == (1234, 5678, 0o664)
    assert path.read_text() == FIXED


def test_a_read_only_file_is_refused_even_for_root(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(TEXT)
    path.chmod(0o444)
    with pytest.raises(WriteError) as err:
        write_fix(str(path), read_document(path), PATCH)
    assert "read-only" in str(err.value) and "\n" not in str(err.value)
    assert path.read_text() == TEXT and path.stat().st_mode & 0o777 == 0o444
    assert leftovers(tmp_path) == []


def test_a_file_saved_during_the_fix_is_not_overwritten(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(TEXT)
    document = read_document(path)
    saved = TEXT.replace("8xA100", "16xH100")  # the user saves while the check runs
    path.write_text(saved)
    with pytest.raises(FixError) as err:
        write_fix(str(path), document, PATCH)
    assert "changed" in str(err.value) and "\n" not in str(err.value)
    assert path.read_text() == saved and leftovers(tmp_path) == []


def test_write_atomically_keeps_bytes_as_given(tmp_path):
    path = tmp_path / "ds.json"
    path.write_bytes(b'{"a": 1}\r\n')
    write_atomically(str(path), '{"a": 2}\r\n', original='{"a": 1}\r\n')
    assert path.read_bytes() == b'{"a": 2}\r\n'


def _finding(fix: dict) -> Finding:
    return Finding(file="ds.json", code="ZA802", name="lower-stage-fits", severity=Severity.WARNING, pointer="",
                   line=1, column=1, message="m", fix=fix)


def test_plan_then_write_reports_a_read_only_folder_as_a_fix_error(tmp_path):
    """The plan (diff, findings) exists before the write fails; the failure is one FixError line."""
    folder = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        path = folder / "ds.json"
        path.write_text(TEXT)
        path.chmod(0o666)  # the file is writable, its folder is not: no temporary file can be made
        plan = plan_fixes(str(path), read_document(path), [_finding(PATCH)])
        assert plan.error is None and '+    "stage": 2' in plan.diff
        folder.chmod(0o755)
        if os.geteuid() == 0:  # root writes anywhere: try as nobody, in a child that keeps the plan
            outcome = _as_nobody(lambda: write_fixes(plan))
        else:
            folder.chmod(0o555)
            outcome = _outcome(lambda: write_fixes(plan))
        kind, message = outcome.split(":", 1)
        assert kind == "WriteError" and "Permission denied" in message and "\n" not in message.strip()
        assert path.read_text() == TEXT and leftovers(folder) == []
    finally:
        folder.chmod(0o755)
        for p in folder.iterdir():
            p.unlink()
        folder.rmdir()


def _outcome(action) -> str:
    try:
        action()
    except FixError as err:
        return f"{type(err).__name__}:{err}"
    except BaseException as err:  # noqa: BLE001 - the test reports what escaped
        return f"{type(err).__name__}:{err}"
    return "ok:"


def _as_nobody(action) -> str:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, run, report through the pipe
        try:
            os.close(read)
            os.setgid(65534)
            os.setuid(65534)
            os.write(write, _outcome(action).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        result = pipe.read().decode()
    os.waitpid(pid, 0)
    return result


# -- through the real CLI ------------------------------------------------------------------------------
MODEL_CONFIG = ('{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, '
                '"intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, '
                '"num_key_value_heads": 32, "vocab_size": 32000, "tie_word_embeddings": false}')
# --gpu-memory, not --gpu: without a named card advice keeps the fixed order, where ZeRO-3 -> a lower stage is the fix
# (these tests are about how a fix is written, not which one the step-time model ranks first)
CHECK = ["check", "ds.json", "--model", "model.yaml", "--gpus", "8", "--gpu-memory", "80GiB"]
DS = ('{\r\n  "train_micro_batch_size_per_gpu": 1,\r\n  "bf16": {"enabled": true},\r\n'
      '  "zero_optimization": {\r\n    "stage": 3\r\n  }\r\n}')


@pytest.fixture
def project(tmp_path):
    (tmp_path / "config.json").write_text(MODEL_CONFIG)
    (tmp_path / "model.yaml").write_text("hf_config: config.json\nsequence_length: 4096\n"
                                         "activation_checkpointing: full\n")
    (tmp_path / "ds.json").write_bytes(DS.encode())
    return tmp_path


def test_cli_fix_keeps_crlf_and_the_missing_final_newline(cli, project):
    result = cli(*CHECK, "--fix", cwd=project)
    assert result.returncode == 0, result.stderr
    after = (project / "ds.json").read_bytes()
    assert after != DS.encode() and b"\r\n" in after
    assert after.count(b"\n") == after.count(b"\r\n") and not after.endswith(b"\n")


def test_cli_fix_through_a_symlink_fixes_the_target(cli, project):
    (project / "real").mkdir()
    (project / "ds.json").rename(project / "real" / "ds.json")
    (project / "ds.json").symlink_to("real/ds.json")
    result = cli(*CHECK, "--fix", cwd=project)
    assert result.returncode == 0, result.stderr
    assert (project / "ds.json").is_symlink()
    assert b'"stage": 3' not in (project / "real" / "ds.json").read_bytes()


def test_cli_fix_on_a_read_only_file_is_one_line_and_changes_nothing(cli, project):
    (project / "ds.json").chmod(0o444)
    result = cli(*CHECK, "--fix", cwd=project)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0 and "read-only" in result.stderr
    assert "Traceback" not in result.stderr and (project / "ds.json").read_bytes() == DS.encode()


def _small_file_limit():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))


def test_cli_fix_when_the_disk_takes_no_more_is_one_line_and_changes_nothing(project):
    # a real process: the file-size limit is the process's own
    result = cli_process(*CHECK, "--fix", cwd=project, preexec_fn=_small_file_limit)
    assert result.returncode == 2, result.stderr
    assert "cannot write the fix" in result.stderr and result.stderr.strip().count("\n") == 0
    assert "Traceback" not in result.stderr
    assert (project / "ds.json").read_bytes() == DS.encode() and leftovers(project) == []


@pytest.mark.parametrize("text", ["", "// filled in later\n"])
@pytest.mark.parametrize("mode", [["--suggest"], ["--format", "markdown"], ["--fix"]])
def test_cli_empty_or_comment_only_config_is_reported_not_an_internal_error(cli, project, text, mode):
    (project / "ds.json").write_text(text)
    result = cli(*CHECK, *mode, cwd=project)
    assert result.returncode in (0, 1), result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
    if mode == ["--fix"]:
        after = (project / "ds.json").read_text()
        assert after.startswith(text) and after != text
    else:
        assert "+{" in result.stdout and (project / "ds.json").read_text() == text

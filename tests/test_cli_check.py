"""check and estimate through the command line (in this process): the report is always shown,
then a one-line error; exit codes 0/1/2/3."""

from __future__ import annotations

import errno
import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture

STAGE3 = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "bf16": {"enabled": true},\n'
          '  "zero_optimisation": {"stage": 3}\n}\n')
YAML = "train_micro_batch_size_per_gpu: 1\nzero_optimisation:\n  stage: 3\n"
CLUSTER = ("--params", "7B", "--gpus", "8", "--gpu", "H100-SXM5-80GB")


@pytest.fixture
def files(tmp_path):
    (tmp_path / "ds.json").write_text(STAGE3)
    (tmp_path / "ds.yaml").write_text(YAML)
    return tmp_path


def test_check_reports_findings_and_the_estimate(cli, files):
    result = cli("check", files / "ds.json", *CLUSTER)  # 250 columns: the long temporary path stays on one line
    assert result.returncode == 1, result.stderr  # ZA102 is an error
    assert f"{files / 'ds.json'}:4:3: ZA102 [error]" in result.stdout
    assert "peak/GPU" in result.stdout  # the options, one row each
    verbose = cli("check", files / "ds.json", *CLUSTER, "--verbose").stdout
    assert "ZeRO memory estimate: 7,000,000,000 parameters" in verbose
    assert result.stderr == ""


def test_check_fail_on_never_exits_0(cli, files):
    assert cli("check", files / "ds.json", *CLUSTER, "--fail-on", "never").returncode == 0


@pytest.mark.parametrize("mode, code, report", [
    (["--format", "markdown"], 1, ("### zeroadvisor: `ds.yaml`", "ZA102 misspelled-key")),
    (["--suggest"], 1, ("Verdict (", "ds.yaml:2:1: ZA102 [error]")),
    (["--fix"], 2, ("Verdict (", "ds.yaml:2:1: ZA102 [error]")),  # asked to write and could not: exit 2
])
def test_a_yaml_config_shows_the_report_then_says_fixes_are_json_only(cli, files, mode, code, report):
    result = cli("check", "ds.yaml", *CLUSTER, *mode, cwd=files)
    assert result.returncode == code
    assert result.stdout.startswith(report[0]) and report[1] in result.stdout and "```diff" not in result.stdout
    assert result.stderr == "zeroadvisor: ds.yaml: fixes are written into JSON configs only; apply the suggested " \
                            "change by hand\n"
    assert (files / "ds.yaml").read_text() == YAML


def test_failed_fix_write_prints_the_findings_then_one_line(cli, files, monkeypatch):
    from zeroadvisor.fix import apply

    def disk_full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(apply, "write_fix", disk_full)
    result = cli("check", "ds.json", *CLUSTER, "--fix", cwd=files)
    assert result.returncode == 2
    assert "ds.json:4:3: ZA102 [error]" in result.stdout
    assert result.stderr == "zeroadvisor: ds.json: cannot write the fixes: No space left on device\n"
    assert (files / "ds.json").read_text() == STAGE3


def test_fix_writes_and_says_so(cli, files):
    result = cli("check", "ds.json", *CLUSTER, "--fix", cwd=files)
    assert result.stderr.startswith("zeroadvisor: applied ") and result.stderr.endswith(" fix(es) to ds.json\n")
    assert "zero_optimization" in json.loads((files / "ds.json").read_text())
    again = cli("check", "ds.json", *CLUSTER, "--fix", "--select", "ZA102", cwd=files)
    # --params without an architecture: activations are not counted, so the verdict is unknown (exit 5)
    assert again.returncode == 5 and again.stderr == "zeroadvisor: nothing to fix in ds.json\n"


def test_estimate_text_and_json(cli, files):
    text = cli("estimate", "--params", "7B", "--gpus", "8")
    assert text.returncode == 0 and text.stdout.startswith("Verdict: ")
    assert "\nZeRO memory estimate: 7,000,000,000 parameters" in text.stdout
    data = json.loads(cli("estimate", "--params", "7B", "--gpus", "8", "-f", "json").stdout)
    assert data["model"]["parameters"] == 7_000_000_000


@pytest.mark.parametrize("args, message", [
    (("estimate", "--params", "7B", "--gpus", "8", "--gpu-memory", "1e308GB"), "--gpu-memory of about 10^317 bytes is more than any machine"),
    (("estimate", "--params", "7B", "--gpus", "8", "--gpu-memory", "1e999999999GB"), "is more than any machine has"),
    (("estimate", "--params", "7B", "--gpus", "8", "--config", "nope.json"), "nope.json: no such file"),
    (("estimate", "--gpus", "8", "--model", "nope.yaml"), "nope.yaml: no such file"),
    (("check", "ds.json", "--params", "7B", "--gpus", "8"), "give the memory per GPU"),
    (("check", "ds.json", "--gpus", "8", "--gpu", "H100-SXM5-80GB"), "give exactly one of --model PATH or --params N"),
    (("check", "ds.json", *CLUSTER, "--select", "ZA999"), "unknown rule 'ZA999'"),
    (("rule", "no-such-rule"), "unknown rule 'no-such-rule'"),
])
def test_bad_input_is_one_line_and_exit_2(cli, files, args, message):
    result = cli(*args, cwd=files)
    assert result.returncode == 2
    assert result.stderr.startswith("zeroadvisor: ") and result.stderr.count("\n") == 1, result.stderr
    assert message in result.stderr
    assert result.stdout == ""


def test_estimate_of_a_config_the_model_cannot_use_is_exit_2(cli, files):
    (files / "bad.json").write_text('{"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "big"}}')
    result = cli("estimate", "--params", "7B", "--gpus", "8", "--config", "bad.json", cwd=files)
    assert result.returncode == 2
    assert result.stderr.startswith("zeroadvisor: bad.json:1:")
    assert "see 'zeroadvisor lint bad.json'" in result.stderr


def test_a_bug_is_an_internal_error_exit_3(cli, files, monkeypatch):
    from zeroadvisor import flows

    def bug(*args, **kwargs):
        raise KeyError("")

    monkeypatch.setattr(flows, "check_one", bug)
    result = cli("check", "ds.json", *CLUSTER, cwd=files)
    assert result.returncode == 3
    assert result.stderr == ("zeroadvisor: internal error: KeyError: '' (please report; ZEROADVISOR_DEBUG=1 shows "
                             "the traceback)\n")
    monkeypatch.setattr(flows, "lint", lambda *a, **k: 1 / 0)
    lint = cli("lint", "ds.json", cwd=files)  # the typer-free path too
    assert lint.returncode == 3 and "internal error: ZeroDivisionError" in lint.stderr


def test_debug_shows_the_traceback(cli, files, monkeypatch):
    from zeroadvisor import flows

    monkeypatch.setattr(flows, "lint", lambda *a, **k: 1 / 0)
    monkeypatch.setenv("ZEROADVISOR_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        cli("lint", "ds.json", cwd=files)

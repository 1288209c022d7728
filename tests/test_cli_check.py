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
    # asked to write (--fix, exit 2) it is an error, as lint --fix says it; else a note, as lint --diff says it
    said = "" if "--fix" in mode else "note: "
    assert result.stderr == (f"zeroadvisor: {said}ds.yaml: fixes are written into JSON configs only; apply the "
                             "suggested change by hand\n")
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
    (("estimate", "--params", "7B", "--gpus", "8", "--gpu-memory", "1e308GB"),
     "--gpu-memory of about 10^317 bytes is more than any machine"),
    (("estimate", "--params", "7B", "--gpus", "8", "--gpu-memory", "1e999999999GB"), "is more than any machine has"),
    (("estimate", "--params", "7B", "--gpus", "8", "nope.json"), "nope.json: no such file"),
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
    result = cli("estimate", "--params", "7B", "--gpus", "8", "bad.json", cwd=files)
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


# -- check --fix without a cluster; check DIR ----------------------------------------------------

SKIPPED_NOTE = ("zeroadvisor: note: the memory part was skipped (give --model, --gpus N and --gpu for it): lint "
                "findings and their fixes only\n")


def test_fix_without_a_cluster_writes_the_lint_fixes(cli, files):
    result = cli("check", "ds.json", "--fix", cwd=files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "1 file checked: no problems\n"
    assert result.stderr == SKIPPED_NOTE + "zeroadvisor: 1 file checked: 1 finding (1 fixed, 0 remaining)\n"
    text = (files / "ds.json").read_text()
    # the lines before the fix, byte for byte
    assert text.startswith(STAGE3.split('  "zero_optimisation"', maxsplit=1)[0])
    assert json.loads(text) == {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                "zero_optimization": {"stage": 3}}


def test_suggest_without_a_cluster_shows_the_lint_fixes_and_writes_nothing(cli, files):
    result = cli("check", "ds.json", "--suggest", cwd=files)
    assert result.returncode == 1  # ZA102 is in the file as it is
    assert "ds.json:4:3: ZA102 [error]" in result.stdout
    assert '\n-  "zero_optimisation": {"stage": 3}\n' in result.stdout and "+++ b/ds.json" in result.stdout
    assert result.stderr == SKIPPED_NOTE and (files / "ds.json").read_text() == STAGE3


@pytest.mark.parametrize("args, message", [
    (["--fix", "--format", "markdown"], ("--format markdown shows the memory advice: give --model (or --params), "
                                         "--gpus N and --gpu (or --gpu-memory)")),
    ([], "give --gpus"),  # no --fix/--suggest: the check needs its cluster, as before
    (["--fix", "--params", "7B"], "give --gpus"),  # a model given: the memory part runs and needs the cluster
])
def test_without_a_cluster_the_memory_part_is_skipped_only_for_fixes(cli, files, args, message):
    result = cli("check", "ds.json", *args, cwd=files)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines()[-1].startswith(f"zeroadvisor: {message}"), result.stderr
    assert (files / "ds.json").read_text() == STAGE3


def test_cluster_flags_keep_the_full_check_with_fix(cli, files):
    result = cli("check", "ds.json", *CLUSTER, "--fix", cwd=files)
    assert result.stdout.startswith("Verdict (") and "memory part was skipped" not in result.stderr


@pytest.fixture
def folder(tmp_path):
    """Two configs (one with a misspelt key) and a model's config.json, which is no DeepSpeed config."""
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "a.json").write_text(STAGE3)
    (tmp_path / "configs" / "b.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true},'
                                                 ' "zero_optimization": {"stage": 2}}\n')
    (tmp_path / "configs" / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 8}\n')
    return tmp_path


def test_check_dir_checks_every_config_and_skips_other_json(cli, folder):
    result = cli("check", "configs", *CLUSTER, "--format", "json", cwd=folder)
    reports = json.loads(result.stdout)
    assert [report["findings"][0]["file"] for report in reports] == ["configs/a.json", "configs/b.json"]
    assert all(report["estimate"] is not None for report in reports)
    assert result.returncode == 1  # combined: a.json has an error (ZA102), b.json none
    assert result.stderr == ("zeroadvisor: note: 1 file skipped (not DeepSpeed configs): "
                             "configs/config.json\n")
    text = cli("check", "configs", *CLUSTER, cwd=folder)
    assert text.stdout.count("Verdict (") == 2 and "configs/config.json" not in text.stdout


def test_check_dir_exit_code_is_0_when_every_config_passes(cli, folder):
    (folder / "configs" / "a.json").unlink()
    # --params alone: activations are not counted, so the verdict is unknown (5) unless the caller says never
    assert cli("check", "configs", *CLUSTER, cwd=folder).returncode == 5
    assert cli("check", "configs", *CLUSTER, "--fail-on", "never", cwd=folder).returncode == 0


def test_check_glob_and_dir_fix_every_config(cli, folder):
    result = cli("check", "configs/*.json", "--fix", cwd=folder)  # a pattern names config.json: linted too
    assert result.returncode == 0, result.stdout + result.stderr
    assert "zero_optimization" in json.loads((folder / "configs" / "a.json").read_text())
    fixed = cli("check", "configs", *CLUSTER, "--fix", "--select", "ZA102", cwd=folder)
    assert fixed.stderr.count("nothing to fix in configs/") == 2


def test_check_dir_without_configs_is_a_usage_error(cli, folder):
    (folder / "configs" / "a.json").unlink()
    (folder / "configs" / "b.json").unlink()
    result = cli("check", "configs", *CLUSTER, cwd=folder)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "zeroadvisor: configs: no config to check (1 file(s) skipped: not DeepSpeed configs)\n"


def test_the_api_checks_one_config_per_call(folder):
    import zeroadvisor

    with pytest.raises(zeroadvisor.UsageError, match="names 2 configs; check one per call"):
        zeroadvisor.check(str(folder / "configs"), params="7B", gpus=8, gpu="H100-SXM5-80GB")


def test_check_precision_fills_an_auto_fp16(cli, tmp_path):
    # issue 32: the docs' promise, tried: --precision bf16 on fp16.enabled "auto" was refused (exit 2)
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": "auto"}, '
                      '"zero_optimization": {"stage": 2}}\n')
    result = cli("check", config, *CLUSTER, "--precision", "bf16", "--format", "json")
    assert result.returncode in (0, 1, 5), result.stderr
    assert json.loads(result.stdout)["estimate"]["model"]["precision"] == "bf16"
    config.write_text('{"fp16": {"enabled": "auto"}, "bf16": {"enabled": false}}\n')
    refused = cli("check", config, *CLUSTER, "--precision", "bf16")
    assert refused.returncode == 2 and "bf16.enabled to false" in refused.stderr


@pytest.mark.parametrize("flag, said", [("--suggest", "no diff"), ("--fix", "nothing written")])
@pytest.mark.parametrize("model", [("--model", "meta-llama/Llama-3.1-8B", "--gpu", "A100-SXM4-80GB"), ()])
def test_check_an_accelerate_yaml_says_why_there_is_no_diff(cli, tmp_path, flag, said, model):
    # issue 32: `check acc.yaml --suggest` printed no diff and no word why (its findings, ZA802/ZA804 with a
    # model, ZA051 without, name changes a JSON config would get as a diff)
    from conftest import REPO

    config = tmp_path / "acc.yaml"
    text = (REPO / "sample_configs" / "accelerate_zero3.yaml").read_text().replace("zero_stage: 3", "zero_stag: 3")
    config.write_text(text)
    result = cli("check", config, *model, flag)
    assert f"{config}: {said}: an Accelerate config is YAML, and fixes are written into JSON configs only" in \
        result.stderr, result.stderr
    assert "nothing to fix" not in result.stderr and "@@" not in result.stdout
    assert config.read_text() == text


@pytest.mark.parametrize("text", [YAML,
                                  "zero_optimization:\n  stage: 3\n  stage3_gather_fp16_weights_on_model_save: true\n"])
def test_lint_a_yaml_deepspeed_config_says_why_there_is_no_diff(cli, tmp_path, text):
    # a fix the findings carry (ZA102's rename) or none (ZA104 on YAML): either way one line says why no diff
    config = tmp_path / "ds.yaml"
    config.write_text(text)
    result = cli("lint", config, "--diff")
    assert f"{config}: " in result.stderr and "fixes are written into JSON configs only" in result.stderr
    assert result.stdout == ""


def test_lint_and_check_say_the_pinned_release_in_the_same_note(cli, files):
    # issue 32 follow-up: check printed "zeroadvisor: read as DeepSpeed ..." where lint printed "zeroadvisor: note:
    # read as DeepSpeed ..." (one helper, cli/commands.py note, says both)
    (files / "requirements.txt").write_text("deepspeed>=0.16,<0.17\n")
    line = "zeroadvisor: note: read as DeepSpeed 0.16 (deepspeed>=0.16,<0.17 at requirements.txt:1)"
    linted = cli("lint", "ds.json", cwd=files)
    checked = cli("check", "ds.json", *CLUSTER, cwd=files)
    assert line in linted.stderr.splitlines(), linted.stderr
    assert line in checked.stderr.splitlines(), checked.stderr

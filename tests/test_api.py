"""The library's flows (zeroadvisor.api), called directly: what the CLI renders and maps to exit codes."""

from __future__ import annotations

import errno
import io
import json

import pytest

from zeroadvisor import api
from zeroadvisor.advisor.check import CheckOptions
from zeroadvisor.config.limits import MAX_CONFIG_BYTES as MAX_BYTES
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.memory.estimate import Cluster
from zeroadvisor.model.description import spec_from_params
from zeroadvisor.model.spec import TrainingShape
from zeroadvisor.advisor import registry

TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'
GIB = 1 << 30


def check_options(**overrides) -> CheckOptions:
    fields = dict(model=spec_from_params("7B"), shape=TrainingShape(), gpus=8, gpu_memory=80 * GIB)
    return CheckOptions(**{**fields, **overrides})


# -- lint --------------------------------------------------------------------------------

def test_lint_paths_counts_read_files_and_lists_unreadable(tmp_path):
    (tmp_path / "typo.json").write_text(TYPO)
    run = api.lint_paths([str(tmp_path / "typo.json"), str(tmp_path / "nope.json"), str(tmp_path)])
    assert run.files == 1  # the folder holds typo.json only: each file once
    assert run.unreadable == [f"{tmp_path / 'nope.json'}: no such file"]
    assert [f.code for f in run.findings] == ["ZA102"]
    assert run.rules == registry.LINT


def test_lint_paths_reads_dash_from_the_given_stream(tmp_path):
    run = api.lint_paths(["-"], LintOptions(), stdin=io.BytesIO(TYPO.encode()))
    assert run.files == 1
    (finding,) = run.findings
    assert (finding.file, finding.line, finding.column, finding.code) == ("<stdin>", 3, 3, "ZA102")


def test_standard_input_has_the_file_limit():
    run = api.lint_paths(["-"], stdin=io.BytesIO(b" " * (MAX_BYTES + 1)))
    # too large to be a config: a finding about the input, as for a file (config/reader.py)
    assert run.files == 1 and [f.code for f in run.findings] == ["ZA001"] and not run.unreadable
    assert run.findings[0].file == "<stdin>" and "limit" in run.findings[0].message
    assert api.lint_paths(["-"], stdin=io.BytesIO(b'{"train_batch_size": 8}')).findings == []


def test_a_path_that_names_nothing_is_a_usage_error(tmp_path):
    with pytest.raises(api.UsageError, match="pattern matches no files"):
        api.lint_paths([str(tmp_path / "*.json")])


def test_select_rules_takes_comma_lists_and_refuses_unknown_rules():
    chosen = api.select_rules(["ZA102,unknown-key"], None)
    assert {r.code for r in chosen} == {"ZA101", "ZA102"}
    assert all(not r.needs_advice for r in chosen)
    assert any(r.needs_advice for r in api.select_rules(None, None, lint_only=False))
    with pytest.raises(api.UsageError, match="unknown rule 'ZA999'"):
        api.select_rules(None, ["ZA999"])
    with pytest.raises(api.UsageError):
        api.find_rule("no-such-rule")


def test_fails_compares_severity_ranks(tmp_path):
    (tmp_path / "warn.json").write_text('{"train_batch_size": 8, "moe": {}}')
    findings = api.lint_paths([str(tmp_path / "warn.json")]).findings
    assert {f.severity.value for f in findings} == {"warning"}
    assert api.fails(findings, "info") and api.fails(findings, "warning")
    assert not api.fails(findings, "error") and not api.fails(findings, "never")
    assert api.FAIL_ON == ("error", "warning", "info", "never")


# -- estimate ----------------------------------------------------------------------------

def estimate(config, **cluster):
    return api.estimate_config(config, spec_from_params("7B"), TrainingShape(), Cluster(gpus=8, **cluster))


def test_estimate_config_refuses_what_it_cannot_use(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(api.UnusableConfig, match="list.json: the config is not a JSON object"):
        estimate(str(tmp_path / "list.json"))
    (tmp_path / "broken.json").write_text('{\n  "zero_optimization": {"stage": 3,\n')
    with pytest.raises(api.UnusableConfig, match=r"broken\.json:3:1: "):
        estimate(str(tmp_path / "broken.json"))
    (tmp_path / "bad.json").write_text('{"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "big"}}')
    with pytest.raises(api.UnusableConfig, match=r"bad\.json:1:\d+: cannot estimate.*see 'zeroadvisor lint "):
        estimate(str(tmp_path / "bad.json"))
    with pytest.raises(api.UnreadableInput):
        estimate(str(tmp_path / "nope.json"))


def test_an_estimate_failure_on_a_clean_config_is_a_bug_not_bad_input(tmp_path, monkeypatch):
    from zeroadvisor.memory import estimate as memory

    def broken(*args, **kwargs):
        raise ValueError("a bug in the memory model")

    (tmp_path / "clean.json").write_text('{"train_micro_batch_size_per_gpu": 1}')
    monkeypatch.setattr(memory, "estimate", broken)
    with pytest.raises(ValueError, match="a bug in the memory model"):
        estimate(str(tmp_path / "clean.json"))


# -- check -------------------------------------------------------------------------------

STAGE3 = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "bf16": {"enabled": true},\n'
          '  "zero_optimisation": {"stage": 3}\n}\n')


def test_check_config_of_a_file_that_does_not_parse_is_findings(tmp_path):
    (tmp_path / "broken.json").write_text('{"zero_optimization": ')
    run = api.check_config(str(tmp_path / "broken.json"), check_options(), diff=True, fix=True)
    assert [f.name for f in run.result.findings] == ["invalid-syntax"]
    assert run.result.estimate is None and run.diff == "" and run.error is None


def test_check_config_diff_leaves_the_file(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(STAGE3)
    run = api.check_config(str(path), check_options(), diff=True)
    assert '-  "zero_optimisation": {"stage": 3}' in run.diff
    assert run.fixed is None and run.error is None
    assert path.read_text() == STAGE3


def test_check_config_fix_writes_and_counts(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(STAGE3)
    run = api.check_config(str(path), check_options(), fix=True)
    assert run.error is None
    assert run.fixed == sum(1 for f in run.result.findings if f.fix) > 0
    assert "zero_optimization" in json.loads(path.read_text())


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"),
                                     PermissionError(errno.EACCES, "Permission denied")])
def test_a_failed_write_keeps_the_findings(tmp_path, monkeypatch, failure):
    from zeroadvisor.fix import apply

    def write_fails(*args):
        raise failure

    monkeypatch.setattr(apply, "write_fix", write_fails)
    path = tmp_path / "ds.json"
    path.write_text(STAGE3)
    run = api.check_config(str(path), check_options(), fix=True)
    assert run.error == f"{path}: cannot write the fixes: {failure.strerror}"
    assert "ZA102" in {f.code for f in run.result.findings}
    assert run.fixed is None
    assert path.read_text() == STAGE3


def test_yaml_configs_get_a_report_and_a_note_not_a_diff(tmp_path):
    path = tmp_path / "ds.yaml"
    path.write_text("train_micro_batch_size_per_gpu: 1\nzero_optimisation:\n  stage: 3\n")
    shown = api.check_config(str(path), check_options(), diff=True)
    assert shown.diff == "" and shown.error is None
    assert "ZA102" in {f.code for f in shown.result.findings}
    assert any("JSON configs only" in note for note in shown.notes)
    fixed = api.check_config(str(path), check_options(), fix=True)
    assert fixed.error is not None and "JSON configs only" in fixed.error
    assert path.read_text().startswith("train_micro_batch_size_per_gpu: 1\n")

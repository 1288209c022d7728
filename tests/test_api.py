"""The flows (zeroadvisor/flows.py) on inputs built once (zeroadvisor.inputs.run.build), called through the API's
``run_*`` functions: what the CLI renders and maps to exit codes."""

from __future__ import annotations

import errno
import io
import json

import pytest

from zeroadvisor import api
from zeroadvisor.advisor import registry
from zeroadvisor.config.limits import MAX_CONFIG_BYTES as MAX_BYTES
from zeroadvisor.inputs import settings
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request
from zeroadvisor.inputs.rules import find_rule, select_rules
from zeroadvisor.inputs.run import build

TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'
GIB = 1 << 30


def lint_paths(paths, stdin=None):
    return api.run_lint(build(Request.taking(Command.LINT, paths=tuple(paths))), stdin=stdin)


def check_config(path, **given):
    (report,) = api.run_check(build(Request.taking(Command.CHECK, config=path, params="7B", gpus=8,
                                                           gpu_memory=80 * GIB, **given)))
    return report


# -- lint --------------------------------------------------------------------------------

def test_lint_paths_counts_read_files_and_lists_unreadable(tmp_path):
    (tmp_path / "typo.json").write_text(TYPO)
    run = lint_paths([str(tmp_path / "typo.json"), str(tmp_path / "nope.json"), str(tmp_path)])
    assert run.files == 1  # the folder holds typo.json only: each file once
    assert run.unreadable == [f"{tmp_path / 'nope.json'}: no such file"]
    assert [f.code for f in run.findings] == ["ZA102"]
    assert run.rules == registry.LINT


def test_lint_paths_reads_dash_from_the_given_stream(tmp_path):
    run = lint_paths(["-"], stdin=io.BytesIO(TYPO.encode()))
    assert run.files == 1
    (finding,) = run.findings
    assert (finding.file, finding.line, finding.column, finding.code) == ("<stdin>", 3, 3, "ZA102")


def test_standard_input_has_the_file_limit():
    run = lint_paths(["-"], stdin=io.BytesIO(b" " * (MAX_BYTES + 1)))
    # too large to be a config: a finding about the input, as for a file (config/reader.py)
    assert run.files == 1 and [f.code for f in run.findings] == ["ZA001"] and not run.unreadable
    assert run.findings[0].file == "<stdin>" and "limit" in run.findings[0].message
    assert lint_paths(["-"], stdin=io.BytesIO(b'{"train_batch_size": 8}')).findings == []


def test_a_path_that_names_nothing_is_a_usage_error(tmp_path):
    with pytest.raises(api.UsageError, match="pattern matches no files"):
        lint_paths([str(tmp_path / "*.json")])


def test_select_rules_takes_comma_lists_and_refuses_unknown_rules():
    chosen = select_rules(["ZA102,unknown-key"], None)
    assert {r.code for r in chosen} == {"ZA101", "ZA102"}
    assert all(not r.needs_advice for r in chosen)
    assert any(r.needs_advice for r in select_rules(None, None, lint_only=False))
    with pytest.raises(api.UsageError, match="unknown rule 'ZA999'"):
        select_rules(None, ["ZA999"])
    with pytest.raises(api.UsageError, match="unknown rule 'ZA999'"):  # refused when the inputs are built
        build(Request.taking(Command.LINT, paths=("x.json",), ignore="ZA999"))
    with pytest.raises(api.UsageError):
        find_rule("no-such-rule")


def test_fails_compares_severity_ranks(tmp_path):
    (tmp_path / "warn.json").write_text('{"train_batch_size": 8, "moe": {}}')
    findings = lint_paths([str(tmp_path / "warn.json")]).findings
    assert {f.severity.value for f in findings} == {"warning"}
    assert api.fails(findings, "info") and api.fails(findings, "warning")
    assert not api.fails(findings, "error") and not api.fails(findings, "never")
    assert settings.FAIL_ON == ("error", "warning", "info", "never")


# -- estimate ----------------------------------------------------------------------------

def estimate(config, **cluster):
    request = Request.taking(Command.ESTIMATE, config=config, params="7B", gpus=8, **cluster)
    return api.run_estimate(build(request)).estimate


def test_estimate_config_refuses_what_it_cannot_use(tmp_path):
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(api.UnusableConfig, match=r"list\.json: the config is not a JSON object"):
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
    run = check_config(str(tmp_path / "broken.json"), diff=True, fix=True)
    assert [f.name for f in run.result.findings] == ["invalid-syntax"]
    assert run.result.estimate is None and run.diff == "" and run.error is None


def test_check_config_diff_leaves_the_file(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(STAGE3)
    run = check_config(str(path), diff=True)
    assert '-  "zero_optimisation": {"stage": 3}' in run.diff
    assert run.fixed is None and run.error is None
    assert path.read_text() == STAGE3


def test_check_config_fix_writes_and_counts(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(STAGE3)
    run = check_config(str(path), fix=True)
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
    run = check_config(str(path), fix=True)
    assert run.error == f"{path}: cannot write the fixes: {failure.strerror}"
    assert "ZA102" in {f.code for f in run.result.findings}
    assert run.fixed is None
    assert path.read_text() == STAGE3


def test_yaml_configs_get_a_report_and_a_note_not_a_diff(tmp_path):
    path = tmp_path / "ds.yaml"
    path.write_text("train_micro_batch_size_per_gpu: 1\nzero_optimisation:\n  stage: 3\n")
    shown = check_config(str(path), diff=True)
    assert shown.diff == "" and shown.error is None
    assert "ZA102" in {f.code for f in shown.result.findings}
    assert any("JSON configs only" in note for note in shown.notes)
    fixed = check_config(str(path), fix=True)
    assert fixed.error is not None and "JSON configs only" in fixed.error
    assert path.read_text().startswith("train_micro_batch_size_per_gpu: 1\n")


# -- the inputs, built once ------------------------------------------------------------------

def test_one_builder_for_flags_and_keywords():
    """The command line's text and the Python API's values build the same inputs."""
    from zeroadvisor.cli import options

    flags = options.parse_simple(options.CHECK, ["ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
                                                 "--headroom", "20%", "--micro-batch", "2"])
    assert flags is not None
    from zeroadvisor.cli.request import to_request

    from_flags = build(to_request(options.CHECK, flags), spelling=options.CHECK.spelling())
    from_keywords = build(Request(Command.CHECK, config="ds.json", params=7_000_000_000, gpus=8, gpu_memory=80 * GIB,
                                  headroom=0.2, micro_batch=2))
    for name in ("configs", "shape", "cluster", "accounting", "integration", "training"):
        assert getattr(from_flags, name) == getattr(from_keywords, name), name
    assert from_flags.cluster.headroom == 0.2 and from_flags.shape.micro_batch_size == 2
    assert from_flags.model.parameters == from_keywords.model.parameters == 7_000_000_000


@pytest.mark.parametrize("value, message", [("150%", "must be at least 0% and below 100%"),
                                            ("ten", "expected a share like 10% or 0.1")])
def test_a_bad_value_names_the_flag_or_the_keyword(value, message):
    from zeroadvisor.cli import options

    given = {"config": "ds.json", "params": "7B", "gpus": 8, "gpu_memory": "80GiB", "headroom": value}
    with pytest.raises(api.UsageError, match=f"^--headroom: {message}"):
        build(Request.taking(Command.CHECK, **given), spelling=options.CHECK.spelling())
    with pytest.raises(api.UsageError, match=f"^headroom: {message}"):
        build(Request.taking(Command.CHECK, **given))


def test_the_cluster_is_one_type_and_its_bounds_are_usage_errors():
    run = build(Request.taking(Command.CHECK, config="ds.json", params="7B", gpus=16, gpu="A100-SXM4-80GB"))
    options = run.check_options()
    assert options.cluster is run.cluster and run.cluster.gpus_per_node == 8 and not run.cluster.per_node_given
    assert run.cluster.gpu_memory == run.cluster.gpu.memory_bytes
    with pytest.raises(api.UsageError, match="gpus = 100,000,000 is more than any cluster has"):
        build(Request.taking(Command.ESTIMATE, params="7B", gpus=100_000_000))

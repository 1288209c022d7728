""""Could not decide" is never a pass (issue 20, defect 5): a config the memory model cannot estimate gets the
no-estimate error (ZA812) at the value it names, a failing exit (5 with the rule ignored), no "looks good" in
the markdown heading; preflight raises (tests/test_preflight.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture

BASE = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2}}
LLAMA_7B = Path(__file__).resolve().parent.parent / "sample_configs" / "models" / "llama-2-7b" / "config.json"
RUN = ["--model", str(LLAMA_7B), "--gpus", "8", "--gpu-memory", "80GB", "--seq-len", "2048", "--cpu-memory", "1TB"]
CASES = {  # the config, and the pointer the finding stands at
    "bucket-beyond-int64": ({"zero_optimization": {"stage": 2, "allgather_bucket_size": 1e20}},
                            "/zero_optimization/allgather_bucket_size"),
    "negative-sequence-parallel": ({"sequence_parallel_size": -1}, "/sequence_parallel_size"),
    "micro-batch-beyond-memory": ({"train_micro_batch_size_per_gpu": 2_000_000_000},
                                  "/train_micro_batch_size_per_gpu"),
}


def _config(tmp_path: Path, change: dict) -> Path:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({**BASE, **change}, indent=2))
    return path


@pytest.mark.parametrize("name", CASES)
def test_no_estimate_is_an_error_at_the_value(cli, tmp_path, name):
    change, pointer = CASES[name]
    result = cli("check", _config(tmp_path, change), *RUN, "--format", "json")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["estimate"] is None
    found = [f for f in report["findings"] if f["code"] == "ZA812"]
    assert len(found) == 1 and found[0]["severity"] == "error" and found[0]["pointer"] == pointer
    assert found[0]["line"] is not None and found[0]["message"].startswith("no memory estimate, so no verdict: ")
    assert "fix the errors reported first" not in result.stderr  # the old note, about errors nobody reported


@pytest.mark.parametrize("name", CASES)
def test_ignoring_the_finding_still_exits_verdict_unknown(cli, tmp_path, name):
    result = cli("check", _config(tmp_path, CASES[name][0]), *RUN, "--ignore", "ZA812")
    assert result.returncode == 5, result.stdout + result.stderr
    assert cli("check", _config(tmp_path, CASES[name][0]), *RUN, "--ignore", "ZA812",
               "--fail-on", "never").returncode == 0  # the caller asked for 0


def test_the_markdown_heading_never_says_looks_good_without_an_estimate(cli, tmp_path):
    result = cli("check", _config(tmp_path, CASES["bucket-beyond-int64"][0]), *RUN, "--format", "markdown")
    heading = result.stdout.splitlines()[0]
    assert "looks good" not in heading and "no memory estimate" in heading


def test_the_more_extreme_value_fails_too(cli, tmp_path):
    """A micro batch of 1e6 is estimated and does not fit; 2e9 (beyond the model) used to pass."""
    for micro in (1_000_000, 2_000_000_000):
        result = cli("check", _config(tmp_path, {"train_micro_batch_size_per_gpu": micro}), *RUN)
        assert result.returncode == 1, (micro, result.stdout)


def test_an_estimated_config_has_no_such_finding(cli, tmp_path):
    result = cli("check", _config(tmp_path, {}), *RUN, "--format", "json")
    assert not [f for f in json.loads(result.stdout)["findings"] if f["code"] == "ZA812"]

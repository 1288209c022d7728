"""The lint command end to end (in this process): formats, exit codes, selection, stdin, hostile input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from sarif_validate import validate_sarif
from zeroadvisor.advisor import registry

GOOD = '{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}\n'
TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'


@pytest.fixture
def run(cli):
    return cli


@pytest.fixture
def configs(tmp_path: Path) -> Path:
    (tmp_path / "good.json").write_text(GOOD)
    (tmp_path / "typo.json").write_text(TYPO)
    return tmp_path


def test_clean_file_exits_0(run, configs):
    result = run("lint", str(configs / "good.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no problems" in result.stdout


def test_text_format_line(run, configs):
    result = run("lint", str(configs / "typo.json"))
    assert result.returncode == 1
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{configs / 'typo.json'}:3:3: ZA102 [error] ")
    assert "did you mean 'zero_optimization'" in first
    assert "\033[" not in result.stdout  # no colour when not a terminal


def test_json_contract(run, configs):
    result = run("lint", "--format", "json", str(configs / "typo.json"), str(configs / "good.json"))
    data = json.loads(result.stdout)
    (finding,) = data["findings"]
    assert set(finding) >= {"file", "code", "name", "severity", "pointer", "line", "column", "message"}
    assert finding["pointer"] == "/zero_optimisation"
    assert (finding["line"], finding["column"]) == (3, 3)
    assert finding["severity"] == "error" and finding["name"] == "misspelled-key"
    assert finding["fix"] == {"zero_optimisation": None, "zero_optimization": {"stage": 3}}


def test_sarif_shape(run, configs):
    result = run("lint", "--format", "sarif", str(configs / "typo.json"))
    sarif = validate_sarif(result.stdout)
    assert sarif["version"] == "2.1.0"
    run0 = sarif["runs"][0]
    ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
    assert ids == [r.code for r in registry.LINT]
    (res,) = run0["results"]
    assert res["ruleId"] == "ZA102" and res["level"] == "error"
    assert res["locations"][0]["physicalLocation"]["region"] == {"startLine": 3, "startColumn": 3}
    assert res["partialFingerprints"]
    assert ids[res["ruleIndex"]] == "ZA102"


def test_github_format_escapes(run, configs):
    result = run("lint", "--format", "github", str(configs / "typo.json"))
    line = result.stdout.splitlines()[0]
    assert line.startswith("::error file=")
    assert ",line=3,col=3,title=ZA102 misspelled-key::" in line


def test_fail_on_threshold(run, configs):
    (configs / "warn.json").write_text('{"train_batch_size": 8, "moe": {}}')
    assert run("lint", str(configs / "warn.json")).returncode == 0
    assert run("lint", "--fail-on", "warning", str(configs / "warn.json")).returncode == 1
    assert run("lint", "--fail-on", "never", str(configs / "typo.json")).returncode == 0


def test_select_and_ignore(run, configs):
    assert run("lint", "--ignore", "ZA102", str(configs / "typo.json")).returncode == 0
    assert run("lint", "--ignore", "misspelled-key", str(configs / "typo.json")).returncode == 0
    assert run("lint", "--select", "ZA1", str(configs / "typo.json")).returncode == 1
    assert run("lint", "--select", "ZA4", str(configs / "typo.json")).returncode == 0
    bad = run("lint", "--select", "ZA999", str(configs / "typo.json"))
    assert bad.returncode == 2 and "unknown rule" in bad.stderr


def test_directory_and_glob(run, configs):
    result = run("lint", "--format", "json", str(configs))
    assert json.loads(result.stdout)["files"] == 2
    result = run("lint", "--format", "json", str(configs / "*.json"))
    assert json.loads(result.stdout)["files"] == 2


def test_gpus_checks_batch_exactly(run, configs):
    (configs / "batch.json").write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, '
                                        '"gradient_accumulation_steps": 2}')
    assert run("lint", str(configs / "batch.json")).returncode == 0
    assert run("lint", "--gpus", "8", str(configs / "batch.json")).returncode == 0
    result = run("lint", "--gpus", "4", "--format", "json", str(configs / "batch.json"))
    (finding,) = json.loads(result.stdout)["findings"]
    assert "64 != 4 * 2 * 4" in finding["message"]
    assert finding["fix"] == {"gradient_accumulation_steps": 4}


def test_rules_and_rule_commands(run):
    listing = run("rules")
    assert listing.returncode == 0 and "ZA102  misspelled-key" in listing.stdout
    one = run("rule", "misspelled-key")
    assert one.returncode == 0 and "Fails" in one.stdout and "Passes" in one.stdout
    assert run("rule", "ZA102").stdout == one.stdout
    assert run("rule", "nope").returncode == 2


HOSTILE = {
    "empty.json": b"",
    "array.json": b"[1, 2, 3]",
    "latin1.json": '{"name": "caf\u00e9"}'.encode("latin-1"),
    "binary.json": bytes(range(256)) * 4,
    "truncated.json": b'{"zero_optimization": {"stage": 3, "offload_param": {"dev',
    "nan.json": b'{"train_batch_size": NaN}',
    "inf.json": b'{"train_batch_size": 1e999}',
    "hugeint.json": b'{"train_batch_size": ' + b"9" * 100_000 + b"}",
    "deep.json": b"[" * 100_000 + b"]" * 100_000,
    "big.json": b'{"a": [' + b"1, " * 4_000_000 + b"1]}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_is_one_line(run, tmp_path, name):
    path = tmp_path / name
    path.write_bytes(HOSTILE[name])
    result = run("lint", str(path))
    assert result.returncode in (1, 2), result.stdout + result.stderr
    assert "internal error" not in result.stderr
    problem_lines = [line for line in (result.stdout + result.stderr).splitlines() if name in line]
    assert problem_lines, result.stdout + result.stderr


def test_missing_path_and_directory_exit_2(run, tmp_path):
    missing = run("lint", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "nope.json: no such file" in missing.stderr
    empty_dir = run("lint", str(tmp_path))
    assert empty_dir.returncode == 2 and str(tmp_path) in empty_dir.stderr
    assert "Traceback" not in missing.stderr + empty_dir.stderr


def test_bad_option_is_usage_error(run, configs):
    assert run("lint", "--format", "xml", str(configs / "good.json")).returncode == 2
    assert run("lint", "--gpus", "0", str(configs / "good.json")).returncode == 2


@pytest.mark.parametrize("args", [
    ["lint"],
    ["lint", "--format", "xml", "x.json"],
    ["lint", "--gpus", "0", "x.json"],
    ["estimate", "--params", "7B"],
    ["estimate", "--params", "seven", "--gpus", "8"],
    ["check", "x.json", "--params", "7B", "--gpus", "8"],
    ["frobnicate"],
])
def test_usage_errors_are_one_line(run, args):
    result = run(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("zeroadvisor: "), result.stderr
    assert "internal error" not in lines[0]


def test_dash_reads_standard_input(run):
    result = run("lint", "-", stdin=TYPO.encode())
    assert result.returncode == 1, result.stderr
    assert result.stdout.startswith("<stdin>:3:3: ZA102 [error] ")
    assert result.stdout.endswith("1 file checked: 1 error\n")


def test_standard_input_that_does_not_parse_is_a_finding(run):
    result = run("lint", "--format", "json", "-", stdin=b'{"train_batch_size": ')
    (finding,) = json.loads(result.stdout)["findings"]
    assert finding["file"] == "<stdin>" and finding["name"] == "invalid-syntax"
    assert result.returncode == 1


def test_standard_input_beside_files(run, configs):
    result = run("lint", "--format", "json", str(configs / "good.json"), "-", stdin=TYPO.encode())
    data = json.loads(result.stdout)
    assert data["files"] == 2
    assert [f["file"] for f in data["findings"]] == ["<stdin>"]


def test_unreadable_input_never_says_no_problems(run, configs, tmp_path):
    alone = run("lint", str(tmp_path / "nope.json"))
    assert alone.returncode == 2
    assert alone.stdout == "1 file could not be read\n"
    assert alone.stderr == f"zeroadvisor: {tmp_path / 'nope.json'}: no such file\n"
    beside = run("lint", str(configs / "good.json"), str(tmp_path / "nope.json"))
    assert beside.returncode == 2
    assert beside.stdout == "1 file checked: no problems; 1 file could not be read\n"


def test_unreadable_input_is_listed_in_json(run, configs, tmp_path):
    result = run("lint", "--format", "json", str(configs / "typo.json"), str(tmp_path / "nope.json"))
    data = json.loads(result.stdout)
    assert result.returncode == 2
    assert data["files"] == 1 and len(data["findings"]) == 1
    assert data["unreadable"] == [f"{tmp_path / 'nope.json'}: no such file"]


def test_options_after_paths_and_equals_form(run, configs):
    result = run("lint", str(configs / "typo.json"), "--format=json", "--fail-on", "never")
    assert result.returncode == 0
    assert json.loads(result.stdout)["findings"][0]["code"] == "ZA102"

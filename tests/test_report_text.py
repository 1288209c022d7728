"""The check report a person reads at a terminal: the verdict first, nothing wider than the terminal,
colour only where asked, and ASCII when the stream takes nothing else."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from cli_run import cli, cli_process  # noqa: F401 - the fixture
from zeroadvisor import vocab as labels

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "sample_configs" / "models" / "llama-2-7b.yaml"
HF_CONFIG = REPO / "sample_configs" / "models" / "llama-2-7b" / "config.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# a finding's line: outside a terminal (these tests' pipes) its message is whole, at any width (issue 32)
FINDING = re.compile(r": ZA\d{3} \[(error|warning|info)\] ")

# Real configs and models with clusters that fit, are tight, do not fit, and offload.
CASES = [
    ("zero3_offload.json", ["--model", MODEL, "--gpus", "8", "--gpu-memory", "80GiB", "--cpu-memory", "1TB"]),
    ("zero2_bf16.json", ["--model", MODEL, "--gpus", "8", "--gpu-memory", "24GB", "--cpu-memory", "512GB"]),
    ("zero2_bf16.json", ["--model", HF_CONFIG, "--gpus", "16", "--gpu-memory", "40GB", "--seq-len", "2048"]),
    ("hf_trainer_auto.json", ["--params", "13B", "--gpus", "4", "--gpu-memory", "48GB", "--cpu-memory", "256GB",
                              "--nvme", "2TB"]),
]


def copy_with_long_name(tmp_path: Path, name: str) -> Path:
    """The sample config under a directory and file name longer than the terminal is wide."""
    folder = tmp_path / ("experiments-" + "x" * 40) / "runs_2024_with_a_rather_long_folder_name"
    folder.mkdir(parents=True)
    target = folder / f"deepspeed_config_for_the_llama_finetune_{name}"
    shutil.copy(REPO / "sample_configs" / name, target)
    return target


@pytest.mark.parametrize("name, args", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("long_name", [False, True], ids=["short-name", "long-name"])
def test_no_line_of_the_default_report_is_wider_than_80(cli, tmp_path, name, args, long_name):
    path = copy_with_long_name(tmp_path, name) if long_name else REPO / "sample_configs" / name
    result = cli("check", path, *args, columns=80)
    assert result.returncode in (0, 1), result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Verdict (")  # the verdict is the first line
    for line in lines:  # only a location longer than the terminal is wider: it is never broken
        assert len(line) <= 80 or line.startswith(f"{path}:"), line
    if long_name:  # the file name whole on one line, the message below it
        assert any(line.startswith(f"{path}:") for line in lines)


def test_the_report_uses_a_wide_terminal(cli):
    name, args = CASES[1]
    wide = cli("check", REPO / "sample_configs" / name, *args, "--all", "--verbose", columns=200).stdout
    narrow = cli("check", REPO / "sample_configs" / name, *args, "--all", "--verbose", columns=80).stdout
    report_lines = [line for line in narrow.splitlines() if not FINDING.search(line)]  # findings: whole lines
    assert max(map(len, wide.splitlines())) > 150 and max(map(len, report_lines)) <= 80
    assert len(wide.splitlines()) < len(narrow.splitlines())
    assert sum(line.startswith("TOTAL per GPU") for line in wide.splitlines()) == 1


def test_verdict_names_the_fix_the_advice_recommends(cli):
    name, args = CASES[1]  # Llama-2-7B at ZeRO-2 on 24 GB cards: does not fit
    out = cli("check", REPO / "sample_configs" / name, *args, "--verbose", columns=100).stdout
    verdict = " ".join(out.split("\n\n", 1)[0].split())
    assert verdict.startswith("Verdict (ZeRO-2): does not fit; peak ")
    rest = " ".join(out.split("ZA801 [error]", 1)[1].split("\n1 file checked", 1)[0].split())
    words = re.search(r"Recommended \(ZA801 does-not-fit\): (.+?), peak ", verdict)
    assert words, verdict
    assert f"Cheapest change that fits: {words.group(1)}:" in rest  # the option the finding names
    cost = verdict.split("; cost: ", 1)[1]
    assert f"; cost: {cost}" in rest  # the same cost words (the finding adds what is needed outside the config)
    # the recommended option's column is marked and shown by default next to the configured one, when a column
    # of the table is that run (a change that also moves the micro batch or the layout is not one)
    header = next(line for line in out.splitlines() if re.search(r"\*Z2\b", line))
    peak = re.search(r", peak ([\d.]+) GiB per GPU", verdict).group(1)
    total = next(line for line in out.splitlines() if line.startswith("TOTAL per GPU"))
    assert (">Z" in header) == (peak in total.split())


def test_explain_adds_the_source_notes(cli):
    name, args = CASES[0]
    plain = cli("check", REPO / "sample_configs" / name, *args, columns=80).stdout
    explained = cli("check", REPO / "sample_configs" / name, *args, "--explain", columns=80).stdout
    assert "stage3.py" not in plain and "stage3.py" in explained
    for line in explained.splitlines():
        assert len(line) <= 80 or FINDING.search(line), line


def test_ascii_stream_gets_ascii_and_no_crash():
    # a real process: the interpreter opens its stdout as PYTHONIOENCODING says
    name, args = CASES[0]
    for command in (["check", REPO / "sample_configs" / name, *args, "--suggest"],
                    ["estimate", REPO / "sample_configs" / name, *args]):
        result = cli_process(*command, env={"PYTHONIOENCODING": "ascii", "COLUMNS": "80"}, text=False, cwd=REPO)
        assert result.returncode in (0, 1), result.stderr
        text = result.stdout.decode("ascii")  # strict: nothing else came out
        assert "Traceback" not in result.stderr.decode()
        assert text.startswith("Verdict (") and "yes" in text
        assert all(len(line) <= 80 for line in text.splitlines()[:-1]
                   if not line.startswith(("+", "-", " ", "@")) and not FINDING.search(line))


@pytest.mark.parametrize("env, coloured", [
    ({}, False),  # a pipe: no colour
    ({"FORCE_COLOR": "1"}, True),
    ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),  # NO_COLOR wins (no-color.org)
    ({"FORCE_COLOR": "1", "NO_COLOR": ""}, True),  # an empty NO_COLOR is not set
])
def test_colour_only_where_asked(cli, env, coloured):
    name, args = CASES[1]
    result = cli("check", REPO / "sample_configs" / name, *args, env={"NO_COLOR": None, "FORCE_COLOR": None, **env},
                 columns=80)
    text = result.stdout
    assert ("\x1b[" in text) is coloured
    for line in ANSI.sub("", text).splitlines():
        assert len(line) <= 80 or FINDING.search(line), line


def test_lint_lines_are_unchanged_one_per_finding(cli):
    # lint keeps file:line:col: CODE [severity] message, one line each (editors and problem matchers parse it)
    result = cli("lint", REPO / "sample_configs" / "zero3_offload.json", "--select", "ZA604,ZA103", columns=40)
    assert all(not line.startswith(" ") for line in result.stdout.splitlines())


def test_verdict_words_come_from_one_table():
    assert set(labels.VERDICT_WORDS) == set(labels.VERDICT_MARKS)

"""The check's one-screen report (report/check_text.py): the README's first check in 45 lines at 80 columns,
the verdict first, each finding one line, and a diff with less context that makes the same change."""

from __future__ import annotations

import difflib
import random
import subprocess
from pathlib import Path

import pytest

from cli_run import cli, cli_terminal  # noqa: F401 - the fixture
from zeroadvisor.report.check_text import narrow_diff

REPO = Path(__file__).resolve().parent.parent
README_CHECK = ("check", "sample_configs/zero3_offload.json", "--model", "sample_configs/models/llama-2-7b.yaml",
                "--gpus", "8", "--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--suggest")


def test_the_readmes_first_check_fits_one_screen():
    result = cli_terminal(*README_CHECK, columns=80, cwd=REPO)  # a person at an 80-column terminal
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) <= 45 and all(len(line) <= 80 for line in lines), len(lines)
    assert any(line.endswith("…") and " [warning] " in line for line in lines)  # a finding cut at the width
    assert lines[0].startswith("Verdict (ZeRO-3 + CPU optimizer and parameter offload): fits")
    findings = [line for line in lines if " [warning] " in line or " [info] " in line or " [error] " in line]
    assert sum(" [warning] " in line for line in findings) <= 3
    assert all(line.split(": ", 1)[0].endswith(":18:5") for line in findings)  # one line each, location whole
    assert any(line.startswith("Recommended (ZA802 lower-stage-fits): ZeRO-1") for line in lines)
    assert any(line.startswith("> ZeRO-1 ") for line in lines) and any(line.startswith("* ZeRO-3 +") for line in lines)
    # ZeRO-1 model states by hand: 2 (bf16 params) + 2 (grads) + 12/8 (fp32 master, Adam m and v over 8 GPUs)
    # bytes per parameter, Llama-2-7B's 6,738,415,616 parameters (its config.json), in GiB
    states = (2 + 2 + 12 / 8) * 6_738_415_616 / 2**30
    assert f"model states {states:.2f} GiB (all DeepSpeed's estimator counts)" in result.stdout
    assert result.stdout.index("Assumed: ") < result.stdout.index("--- a/")


def test_outside_a_terminal_every_finding_is_whole_on_its_line(cli):
    """A CI log, a pipe or a file (issue 32): each finding's full message on its one line, at any width; the
    rest of the report keeps the width."""
    import json

    findings = json.loads(cli(*README_CHECK, "--format", "json", cwd=REPO).stdout)["findings"]
    for verbose in ((), ("--verbose",)):  # the one-screen report, and the whole one (not wrapped either)
        text = cli(*README_CHECK, *verbose, columns=80, cwd=REPO).stdout
        lines = text.splitlines()
        for finding in findings:
            where = f"{finding['file']}:{finding['line']}:{finding['column']}"
            line = f"{where}: {finding['code']} [{finding['severity']}] {finding['message']}"
            assert line in lines, (verbose, finding["code"])
        assert "…" not in text and max(len(line) for line in lines) > 80
    short = cli(*README_CHECK, columns=80, cwd=REPO).stdout.splitlines()
    assert all(len(line) <= 80 for line in short if " [" not in line and not line.startswith(("-", "+", " ")))


def test_on_a_terminal_verbose_prints_the_findings_whole():
    whole = cli_terminal(*README_CHECK, "--verbose", columns=80, cwd=REPO).stdout
    assert "…" not in whole and "pin_memory is true (DeepSpeed's default)" in " ".join(whole.split())
    finding_lines = [line for line in whole.splitlines() if ": ZA8" in line]
    assert finding_lines and all(len(line) <= 80 for line in finding_lines)  # wrapped to the terminal


def test_verbose_is_the_whole_report(cli):
    short = cli(*README_CHECK, columns=80, cwd=REPO).stdout
    whole = cli(*README_CHECK, "--verbose", columns=80, cwd=REPO).stdout
    assert "TOTAL per GPU" in whole and "TOTAL per GPU" not in short
    assert "pin_memory is true (DeepSpeed's default)" in " ".join(whole.split())  # the findings in full


def _apply(diff: str, text: str, tmp: Path) -> str:
    (tmp / "f.txt").write_text(text, newline="")
    (tmp / "p.diff").write_text(diff, newline="")
    subprocess.run(["git", "apply", "--unidiff-zero", "p.diff"], cwd=tmp, check=True, capture_output=True)
    return (tmp / "f.txt").read_bytes().decode()


@pytest.mark.parametrize("seed", range(12))
def test_a_narrowed_diff_makes_the_same_change(tmp_path, seed):
    """Random edits of a random file: the diff with 1 line of context applies (git apply) and gives the same
    file as difflib's 3-line diff, with no more lines."""
    rng = random.Random(seed)
    before = [f"line {i} {rng.randint(0, 9)}\n" for i in range(rng.randint(5, 60))]
    after = list(before)
    for _ in range(rng.randint(1, 6)):
        at = rng.randrange(len(after))
        choice = rng.choice(("drop", "add", "change"))
        if choice == "drop" and len(after) > 1:
            del after[at]
        elif choice == "add":
            after.insert(at, f"new {rng.random():.3f}\n")
        else:
            after[at] = f"changed {rng.random():.3f}\n"
    if after == before:
        after.append("tail\n")
    full = "".join(difflib.unified_diff(before, after, "a/f.txt", "b/f.txt"))
    short = narrow_diff(full)
    assert len(short.splitlines()) <= len(full.splitlines())
    assert _apply(short, "".join(before), tmp_path) == "".join(after)


def test_help_is_readable_at_80_columns(cli):
    """check --help: nothing wider than 80 columns, every flag whole on some line, the options in groups."""
    from zeroadvisor.cli import options

    text = cli("check", "--help", columns=80).stdout
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines), max(lines, key=len)
    for param in options.CHECK.params:
        for flag in param.flags:
            assert any(flag.split("/")[0] in line.replace(",", " ").split() for line in lines), flag
    assert [title for title in options.PANELS if f"\n{title}:\n" in text] == list(options.PANELS)
    # the project configuration is named only where it has a key: format has one, the unit does not
    assert "(default: text, or the project configuration's)" in " ".join(text.split())
    assert "or the project configuration's" not in text.split("--unit", 1)[1].split("--explain", 1)[0]

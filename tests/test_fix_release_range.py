"""--fix, --diff and --suggest are conservative across the releases a pin admits (issue 32, item 4).

With ``deepspeed>=0.16,<0.20`` beside the config, lint reads it as every known release in the range
(rules/linter.py by_release). 0.19.8 refuses the top-level ``curriculum_learning`` and its fix deletes it, but
every other release of the range reads it: the fix is not written, the finding stays and says who disagrees.
Fixes every release wants (renames of misspelt keys) are still written. Real pin files, real processes.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from cli_run import cli, cli_process  # noqa: F401 - the fixture
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Hit, Rule
from zeroadvisor.rules.linter import lint_text

RANGE = "deepspeed>=0.16,<0.20"
CONFIG = ('{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 2},\n'
          '  "fp16": {"enabled": true, "loss_scale_windows": 100},\n  "curriculum_learning": {"enabled": false}\n}\n')
RENAMED = CONFIG.replace("zero_optimisation", "zero_optimization").replace("loss_scale_windows", "loss_scale_window")
MODEL = ["--params", "1B", "--gpus", "8", "--gpu-memory", "80GiB", "--seq-len", "1024"]


def _in_range() -> tuple[str, ...]:
    return releases.matching(RANGE.removeprefix("deepspeed")).releases


def _readers() -> str:
    """The releases of the range that read the top-level curriculum_learning, as the message names them."""
    readers = [v for v in _in_range() if schema.reads_removed(v, "/curriculum_learning")]
    assert readers and len(readers) < len(_in_range())  # the range holds both kinds: the test means something
    return releases.span(readers)


@pytest.fixture
def repo(tmp_path) -> Iterator:
    """A repository (.git bounds the pin search) with the range pinned beside the config."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(f"torch\n{RANGE}\n")
    (tmp_path / "ds_config.json").write_text(CONFIG)
    return tmp_path


def test_fix_leaves_a_section_the_other_pinned_releases_read(repo):
    done = cli_process("lint", "--fix", "ds_config.json", cwd=repo)
    assert done.returncode == 1, done.stderr  # the removed section is still an error of 0.19.8's
    assert (repo / "ds_config.json").read_text() == RENAMED  # the renames every release wants are written
    assert "(3 fixed, 2 remaining)" in done.stderr
    removed = next(line for line in done.stdout.splitlines() if "ZA107" in line)
    assert removed.endswith(f"Not fixed: DeepSpeed {_readers()} read it as it is.")


def test_diff_is_what_fix_writes_and_keeps_the_section(repo):
    diff = cli_process("lint", "--diff", "ds_config.json", cwd=repo)
    assert diff.returncode == 1
    assert "curriculum_learning" not in "".join(line for line in diff.stdout.splitlines(True)
                                                if line.startswith(("-", "+")))
    assert "would fix 3 of 5 findings in 1 file" in diff.stderr
    (repo / "fix.diff").write_text(diff.stdout)
    subprocess.run(["git", "apply", "fix.diff"], cwd=repo, check=True, capture_output=True)
    assert (repo / "ds_config.json").read_text() == RENAMED


def test_a_fix_every_pinned_release_wants_is_written(repo):
    """Pinned to 0.19.8 alone, the section is refused by every release the pin admits: the fix deletes it."""
    (repo / "requirements.txt").write_text(f"deepspeed=={releases.latest()}\n")
    done = cli_process("lint", "--fix", "ds_config.json", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    after = json.loads((repo / "ds_config.json").read_text())
    assert "curriculum_learning" not in after and after["zero_optimization"] == {"stage": 2}


def test_json_report_carries_no_fix_a_pinned_release_does_not_want(repo):
    done = cli_process("lint", "--format", "json", "ds_config.json", cwd=repo)
    findings = {f["code"] + f["pointer"]: f for f in json.loads(done.stdout)["findings"]}
    assert "fix" not in findings["ZA107/curriculum_learning"]
    assert findings["ZA102/zero_optimisation"]["fix"] == {"zero_optimisation": None, "zero_optimization": {"stage": 2}}


def test_check_fix_with_a_model_reads_the_pinned_range(repo):
    """check's lint part reads every release of the pin too (it read the latest alone before), so its --suggest
    and --fix leave the section; its memory part reads the newest release of the range."""
    suggest = cli_process("check", "ds_config.json", *MODEL, "--suggest", cwd=repo)
    assert "-  \"curriculum_learning\"" not in suggest.stdout and "+  \"zero_optimization\"" in suggest.stdout
    done = cli_process("check", "ds_config.json", *MODEL, "--fix", cwd=repo)
    assert "curriculum_learning" in json.loads((repo / "ds_config.json").read_text()), done.stderr


def test_check_lints_as_the_pinned_release(repo):
    """Pinned to 0.14.5, which reads curriculum_learning: check reports no removed key (ZA108 says the later
    refusal) and its fix leaves the section."""
    (repo / "requirements.txt").write_text("deepspeed==0.14.5\n")
    done = cli_process("check", "ds_config.json", *MODEL, "--verbose", "--fix", cwd=repo)
    assert "ZA107" not in done.stdout and "ZA108" in done.stdout
    assert "curriculum_learning" in json.loads((repo / "ds_config.json").read_text())


def test_check_without_a_model_shares_lint_fix(repo):
    done = cli_process("check", "ds_config.json", "--fix", cwd=repo)
    assert (repo / "ds_config.json").read_text() == RENAMED, done.stderr


def test_a_fix_some_releases_have_no_fix_for_stays():
    """'zenflow' exists from 0.17.5: those releases' unknown-key error renames 'zenflw' to it, the older ones have
    nothing to rename to (the rename would not make them start either); the finding keeps no fix and says so."""
    chosen = releases.matching(">=0.16,<0.18").releases
    found = lint_text('{"train_batch_size": 8, "zero_optimization": {"stage": 3, "zenflw": {}}}', "ds.json",
                      LintOptions(releases=chosen))
    typo = [f for f in found if f.pointer == "/zero_optimization/zenflw"]
    assert typo and all(f.fix is None for f in typo)
    zero = {v: schema.of_release(v)["properties"]["zero_optimization"]["properties"] for v in chosen}
    older = [v for v in chosen if "zenflow" not in zero[v]]
    assert older and len(older) < len(chosen)
    assert any(f.message.endswith(f"; not fixed: DeepSpeed {releases.span(older)} "
                                  f"{'has' if len(older) == 1 else 'have'} no fix for it") for f in typo)


def _by_release_fix(ctx):
    """A rule whose fix differs by release: the newest release of the pair sets 2, the older 1."""
    value = 2 if schema.active_release() == releases.latest() else 1
    yield Hit("/x", "x is wrong", fix={"x": value})


def test_releases_that_want_another_edit_are_named():
    rule = Rule("ZA999", "test-by-release", Severity.ERROR, "test", "test", _by_release_fix, ())
    older, newest = releases.known()[-2], releases.latest()
    found = lint_text('{"x": 0}', "ds.json", LintOptions(releases=(older, newest)), rules=[rule])
    assert len(found) == 1 and found[0].fix is None
    assert found[0].message == f"x is wrong; not fixed: DeepSpeed {newest} would change it otherwise"
    alone = lint_text('{"x": 0}', "ds.json", LintOptions(releases=(newest,)), rules=[rule])
    assert [f.fix for f in alone] == [{"x": 2}]

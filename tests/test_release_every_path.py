"""Every lint path reads a config as the releases its pin (or --deepspeed-version) decides.

``lint`` itself did; two paths read the latest release alone: the DeepSpeed config Accelerate builds from a
launcher YAML (rules/accelerate.py deepspeed_findings) and the lint errors that say why ``estimate`` cannot
read a config (flows.py _lint_errors). 0.19.8 refuses the top-level ``curriculum_learning`` (ZA107) that the
releases before it read (ZA108 says the later refusal): the test configs hold it, and a pin decides which.
"""

from __future__ import annotations

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor import api
from zeroadvisor.deepspeed import releases, schema

DS_CONFIG = ('{\n  "train_batch_size": "auto",\n  "train_micro_batch_size_per_gpu": "auto",\n'
             '  "zero_optimization": {"stage": 2},\n  "curriculum_learning": {"enabled": false}\n}\n')
ACCELERATE = "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
MODEL = ["--params", "1B", "--gpu-memory", "80GiB", "--seq-len", "1024"]


def _readers_and_refusers() -> tuple[str, str]:
    """A release that reads the top-level section and one that refuses it (the test means something)."""
    readers = [v for v in releases.known() if schema.reads_removed(v, "/curriculum_learning")]
    refusers = [v for v in releases.known() if v not in readers]
    assert "0.14.5" in readers and releases.latest() in refusers
    return "0.14.5", releases.latest()


@pytest.fixture
def accelerate_repo(tmp_path):
    """An Accelerate YAML whose deepspeed_config_file holds the section, in a repository pinning 0.14.5."""
    (tmp_path / ".git").mkdir()  # bounds the pin search
    (tmp_path / "requirements.txt").write_text("torch\ndeepspeed==0.14.5\n")
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    (tmp_path / "ds.json").write_text(DS_CONFIG)
    return tmp_path


def _codes(stdout: str, where: str) -> set[str]:
    return {line.split()[1] for line in stdout.splitlines() if line.startswith(where)}


def test_lint_of_an_accelerate_yaml_reads_its_deepspeed_config_as_the_pin(cli, accelerate_repo):
    reader, refuser = _readers_and_refusers()
    done = cli("lint", "acc.yaml", cwd=accelerate_repo)
    assert done.returncode == 0, done.stdout + done.stderr  # 0.14.5 reads the section: no error
    assert _codes(done.stdout, "ds.json:5:3:") == {"ZA108"}
    alone = cli("lint", "ds.json", cwd=accelerate_repo)  # the same file linted by itself: the same finding
    assert _codes(alone.stdout, "ds.json:5:3:") == {"ZA108"}
    # the flag decides over the pin, for the YAML's DeepSpeed config too
    flagged = cli("lint", "--deepspeed-version", refuser, "acc.yaml", cwd=accelerate_repo)
    assert flagged.returncode == 1 and _codes(flagged.stdout, "ds.json:5:3:") == {"ZA107"}
    assert reader != refuser


def test_check_and_the_api_read_an_accelerate_yaml_as_the_pin(cli, accelerate_repo):
    done = cli("check", "acc.yaml", *MODEL, "--verbose", cwd=accelerate_repo)
    assert "ZA107" not in done.stdout and "ZA108" in done.stdout, done.stdout
    found = zeroadvisor.lint(str(accelerate_repo / "acc.yaml")).findings
    assert {f.code for f in found if f.pointer == "/curriculum_learning"} == {"ZA108"}
    newest = zeroadvisor.lint(str(accelerate_repo / "acc.yaml"), deepspeed_version=releases.latest()).findings
    assert {f.code for f in newest if f.pointer == "/curriculum_learning"} == {"ZA107"}


def test_the_lint_options_carry_the_releases_to_the_built_config(tmp_path):
    """In the library: LintOptions.releases reaches the config Accelerate builds (no pin file involved)."""
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.rules.linter import lint_file

    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    (tmp_path / "ds.json").write_text(DS_CONFIG)
    reader, refuser = _readers_and_refusers()
    for version, code in ((reader, "ZA108"), (refuser, "ZA107")):
        found = lint_file(tmp_path / "acc.yaml", LintOptions(releases=(version,))).findings
        assert {f.code for f in found if f.pointer == "/curriculum_learning"} == {code}, version


# estimate: a value the memory model cannot read; lint explains why. Above it, the section 0.19.8 refuses.
UNREADABLE = ('{\n  "curriculum_learning": {"enabled": false},\n  "train_micro_batch_size_per_gpu": 1,\n'
              '  "zero_optimization": {"stage": 3, "stage3_prefetch_bucket_size": "big"}\n}\n')


@pytest.fixture
def estimate_repo(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("deepspeed>=0.16,<0.17\n")
    (tmp_path / "ds.json").write_text(UNREADABLE)
    return tmp_path


def test_estimate_names_the_error_the_pinned_releases_give(cli, estimate_repo):
    """Under a 0.16 pin the one error is the bucket size; read as the latest, the removed section (line 2)
    came first and the count was 2: the message blamed a section every pinned release reads."""
    assert all(schema.reads_removed(v, "/curriculum_learning") for v in releases.matching(">=0.16,<0.17").releases)
    done = cli("estimate", "ds.json", *MODEL, "--gpus", "8", cwd=estimate_repo)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "ds.json:4:" in done.stderr and "stage3_prefetch_bucket_size" in done.stderr
    assert "curriculum_learning" not in done.stderr and "(1 error(s);" in done.stderr
    # the same config read as the latest (the flag decides): both errors, the removed section first
    newest = cli("estimate", "ds.json", *MODEL, "--gpus", "8", "--deepspeed-version", releases.latest(),
                 cwd=estimate_repo)
    assert newest.returncode == 2 and "ds.json:2:3:" in newest.stderr and "(2 error(s);" in newest.stderr


def test_the_estimate_api_names_the_pinned_error(estimate_repo):
    with pytest.raises(api.UnusableConfig, match=r"ds\.json:4:\d+: .*stage3_prefetch_bucket_size.*"
                                                         r"\(1 error\(s\);"):
        zeroadvisor.estimate(str(estimate_repo / "ds.json"), params="1B", gpus=8, gpu_memory="80GiB")
    with pytest.raises(api.UnusableConfig, match=r"ds\.json:4:.*\(1 error\(s\);"):
        zeroadvisor.estimate(str(estimate_repo / "ds.json"), params="1B", gpus=8, gpu_memory="80GiB",
                             deepspeed_version="0.14.5")

"""Project configuration ([tool.zeroadvisor] / .zeroadvisor.toml): found by walking up, nearest wins,
flags override it, bad keys are one-line usage errors naming the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli, cli_process  # noqa: F401 - the fixture
from zeroadvisor.config import project

TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'
NO_OPTIMIZER = '{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}\n'


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "configs" / "legacy").mkdir(parents=True)
    (tmp_path / "configs" / "typo.json").write_text(TYPO)
    (tmp_path / "configs" / "legacy" / "old.json").write_text(TYPO)
    project.forget()
    return tmp_path


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    project.forget()
    return path


def test_nearest_configuration_wins_and_dedicated_file_wins_in_one_folder(repo):
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nignore = ["ZA101"]\n')
    assert project.find_for(str(repo / "configs" / "typo.json")).ignore == ("ZA101",)
    write(repo / "configs" / "pyproject.toml", '[project]\nname = "x"\n')  # no table: the walk goes on
    assert project.find_for(str(repo / "configs" / "typo.json")).path == str(repo / "pyproject.toml")
    write(repo / "configs" / ".zeroadvisor.toml", 'ignore = ["ZA102"]\n')
    assert project.find_for(str(repo / "configs" / "typo.json")).ignore == ("ZA102",)
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nignore = ["ZA006"]\n')
    write(repo / ".zeroadvisor.toml", '[tool.zeroadvisor]\nignore = ["ZA103"]\n')  # the table form is read too
    assert project.find_for(str(repo / "x.json")).ignore == ("ZA103",)


@pytest.mark.parametrize("text", [
    '[tool]\nzeroadvisor = { ignore = ["ZA101"] }\n',
    'tool = { zeroadvisor = { ignore = ["ZA101"] } }\n',
    'tool.zeroadvisor.ignore = ["ZA101"]\n',
    '[ "tool" . \'zeroadvisor\' ]\nignore = ["ZA101"]\n',
    '[tool."\\u007aeroadvisor"]\nignore = ["ZA101"]\n',  # a quoted key spelled with an escape
])
def test_every_toml_spelling_of_the_table_is_read(repo, text):
    """The pyproject.toml that is not parsed (no table can be in it) is only the one without any spelling of
    tool.zeroadvisor (config/project.py _may_name_us): each spelling TOML allows is still read."""
    write(repo / "pyproject.toml", text)
    assert project.find_for(str(repo / "configs" / "typo.json")).ignore == ("ZA101",)


@pytest.mark.parametrize("text", [
    '[project]\nname = "zeroadvisor"\n[project.scripts]\nzeroadvisor = "zeroadvisor.cli:main"\n',
    '[tool.ruff]\nline-length = 100\n',
    '[tool.ruff\n',  # not valid TOML, but no table of ours can be in it: another tool's file to judge
])
def test_a_pyproject_without_the_table_is_not_ours(repo, text):
    write(repo / "pyproject.toml", text)
    assert project.find_for(str(repo / "configs" / "typo.json")) is None


@pytest.mark.parametrize("text, message", [
    ('[tool.zeroadvisor]\nselct = ["ZA1"]\n', "pyproject.toml:2: unknown key 'tool.zeroadvisor.selct'"),
    ('[tool.zeroadvisor.cluster]\ngpu_count = 8\n',
     "pyproject.toml:2: unknown key 'tool.zeroadvisor.cluster.gpu_count'"),
    ('[tool.zeroadvisor]\nfail-on = "fatal"\n', "'tool.zeroadvisor.fail-on': expected one of error"),
    ('[tool.zeroadvisor]\nignore = ["ZA999"]\n', "ignore: unknown rule 'ZA999'"),
    ('[tool.zeroadvisor.cluster]\ncpu-memory = "1T"\n', "unknown size unit"),
    ('[tool.zeroadvisor.cluster]\ngpus = 0\n', "at least 1"),
    ('[tool.zeroadvisor\n', "invalid TOML"),
    ('[tool.zeroadvisor.training]\nseq-len = "4k"\n',
     "pyproject.toml:2: 'tool.zeroadvisor.training.seq-len': --seq-len must be an integer > 0"),
    ('[tool.zeroadvisor.training]\nzero-init = "yes"\n', "'tool.zeroadvisor.training.zero-init'"),
    ('[tool.zeroadvisor.training]\nsequence-length = 4096\n',
     "pyproject.toml:2: unknown key 'tool.zeroadvisor.training.sequence-length'"),
    ('[tool.zeroadvisor.cluster]\nlauncher = "mpirun"\n', "'tool.zeroadvisor.cluster.launcher': expected one of"),
    ('[tool.zeroadvisor.cluster]\nefficiency = 2\n', "'tool.zeroadvisor.cluster.efficiency'"),
])
def test_bad_configuration_is_a_usage_error_naming_file_and_key(repo, cli, text, message):
    write(repo / "pyproject.toml", text)
    result = cli("lint", "configs/typo.json", cwd=repo)
    assert result.returncode == 2 and result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_rule_keys_apply_per_file_and_flags_override(repo, cli):
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nfail-on = "never"\n'
                                   '[tool.zeroadvisor.per-file-ignores]\n"legacy/*.json" = ["ZA102"]\n')
    write(repo / "configs" / ".zeroadvisor.toml", '[per-file-ignores]\n"legacy/*.json" = ["ZA102"]\n')
    result = cli("lint", "--format", "json", "configs", cwd=repo)
    files = {f["file"] for f in json.loads(result.stdout)["findings"]}
    assert files == {"configs/typo.json"}  # legacy/old.json: its nearest configuration ignores ZA102
    assert result.returncode == 0  # fail-on = never from the configuration nearest the current folder
    assert cli("lint", "--fail-on", "error", "configs", cwd=repo).returncode == 1  # the flag wins
    # --ignore replaces the configuration's ignore list; its per-file-ignores still apply
    result = cli("lint", "--format", "json", "--ignore", "ZA006", "configs", cwd=repo)
    assert len(json.loads(result.stdout)["findings"]) == 1  # per-file-ignores still apply


def test_cluster_defaults_feed_check_and_flags_override(repo, cli):
    (repo / "ds.json").write_text(NO_OPTIMIZER)
    assert "give --gpus" in cli("check", "ds.json", "--params", "7B", "--gpu", "A100-SXM4-80GB", cwd=repo).stderr
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nformat = "json"\n'
                                   '[tool.zeroadvisor.cluster]\ngpus = 16\ngpu-memory = "40GiB"\n')
    result = cli("check", "ds.json", "--params", "7B", "--fail-on", "never", cwd=repo)
    cluster = json.loads(result.stdout)["estimate"]["cluster"]
    assert (cluster["gpus"], cluster["gpu_memory"]) == (16, 40 << 30)
    # --gpu replaces the configured gpu-memory (the two exclude each other); --gpus replaces gpus
    result = cli("check", "ds.json", "--params", "7B", "--gpus", "4", "--gpu", "A100-SXM4-80GB", "--fail-on", "never",
                 cwd=repo)
    cluster = json.loads(result.stdout)["estimate"]["cluster"]
    assert cluster["gpus"] == 4 and cluster["gpu_memory"] > 80 * 10**9


LLAMA = Path(__file__).resolve().parents[1] / "sample_configs" / "models" / "llama-2-7b" / "config.json"


def test_machine_and_training_keys_silence_the_assumptions_they_set(repo, cli):
    """Every machine fact and training input an assumption names has a key: given there, nothing is assumed,
    so --fail-on warning is usable in CI; a flag still wins over the key."""
    (repo / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                                  '"optimizer": {"type": "AdamW"}, "zero_optimization": {"stage": 3, '
                                  '"offload_optimizer": {"device": "cpu"}}}')
    base = ("check", "ds.json", "--model", str(LLAMA), "--format", "json")
    write(repo / "pyproject.toml", '[tool.zeroadvisor.cluster]\ngpus = 8\ngpu = "A100-SXM4-80GB"\n'
                                   'cpu-memory = "1TB"\n')
    before = {a["name"] for a in json.loads(cli(*base, cwd=repo).stdout)["estimate"]["assumed"]}
    assert {"sequence_length", "load_dtype", "zero_init"} <= before
    write(repo / "pyproject.toml", '[tool.zeroadvisor.cluster]\ngpus = 8\ngpu = "A100-SXM4-80GB"\n'
                                   'cpu-memory = "1TB"\n[tool.zeroadvisor.training]\nseq-len = 2048\n')
    timed = {a["name"] for a in json.loads(cli(*base, cwd=repo).stdout)["estimate"]["assumed"]}
    assert "sequence_length" not in timed and {"efficiency", "cpu_cores", "launcher"} <= timed  # a step time now
    write(repo / "pyproject.toml", '[tool.zeroadvisor.cluster]\ngpus = 8\ngpu = "A100-SXM4-80GB"\n'
                                   'cpu-memory = "1TB"\nefficiency = 0.45\ncpu-cores = 64\nlauncher = "deepspeed"\n'
                                   'inter-node-bandwidth = "25GB/s"\nnvme-bandwidth = "3GB/s"\n'
                                   '[tool.zeroadvisor.training]\nseq-len = 2048\nactivation-checkpointing = "full"\n'
                                   'load-dtype = "bf16"\nzero-init = true\nmeta-load = false\n'
                                   'optim = "adamw_torch_fused"\n')
    result = cli(*base, cwd=repo)
    data = json.loads(result.stdout)
    assert data["estimate"]["assumed"] == [] and not [f for f in data["findings"] if f["code"] == "ZA808"]
    assert data["estimate"]["model"]["sequence_length"] == 2048
    assert cli(*base, "--seq-len", "1024", cwd=repo).stdout.count('"sequence_length": 1024') == 1  # the flag wins
    warned = cli("check", "ds.json", "--model", str(LLAMA), "--fail-on", "warning", cwd=repo)
    assert "ZA808" not in warned.stdout


def test_a_format_the_command_lacks_is_a_usage_error(repo, cli):
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nformat = "markdown"\n')
    result = cli("lint", "configs/typo.json", cwd=repo)
    assert result.returncode == 2 and "pyproject.toml: format 'markdown' is not one of lint's" in result.stderr


@pytest.mark.parametrize("relative, pattern, matches", [
    ("a/b.json", "a/*.json", True), ("a/b.json", "*.json", True), ("x/a/b.json", "a/*.json", False),
    ("a/b/c.json", "a/**/*.json", True), ("a/c.json", "a/**/*.json", True), ("b.yaml", "*.json", False),
])
def test_per_file_ignore_globs(relative, pattern, matches):
    assert project._glob_match(relative, pattern) is matches


# -- GPUs the project declares ([gpus.NAME]) ----------------------------------------------------------

MY_CARD = ('[tool.zeroadvisor.gpus.MyCard]\nmemory = "48GB"\ndense-tflops = 200\n'
           'intra-node-bandwidth = "64GB/s"\nhost-link-bandwidth = "32GB/s"\nmemory-bandwidth = "960GB/s"\n')


def test_a_declared_gpu_is_usable_with_the_gpu_flag_and_as_the_cluster_gpu(repo, cli):
    (repo / "ds.json").write_text(NO_OPTIMIZER)
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nformat = "json"\n' + MY_CARD)
    result = cli("check", "ds.json", "--params", "7B", "--gpus", "8", "--gpu", "my-card", "--fail-on", "never",
                 cwd=repo)
    assert result.returncode == 0, result.stderr
    gpu = json.loads(result.stdout)["estimate"]["cluster"]["gpu"]
    assert gpu["name"] == "MyCard" and gpu["memory_bytes"] == (48 * 10**9 // 2**20) * 2**20
    assert (gpu["dense_tflops"], gpu["intra_node_gb_s"], gpu["host_link_gb_s"], gpu["memory_gb_s"]) == (
        200.0, 64.0, 32.0, 960.0)
    assert gpu["source"] == f"declared in {repo / 'pyproject.toml'}"
    # the cluster's gpu may name it too, in a .zeroadvisor.toml (no tool.zeroadvisor prefix)
    (repo / "pyproject.toml").unlink()
    write(repo / ".zeroadvisor.toml", 'format = "json"\n[cluster]\ngpus = 4\ngpu = "MyCard"\n'
          + MY_CARD.replace("[tool.zeroadvisor.gpus.MyCard]", "[gpus.MyCard]"))
    result = cli("check", "ds.json", "--params", "7B", "--fail-on", "never", cwd=repo)
    assert json.loads(result.stdout)["estimate"]["cluster"]["gpu"]["name"] == "MyCard", result.stderr
    # the table's cards still resolve beside it
    result = cli("check", "ds.json", "--params", "7B", "--gpu", "L4", "--fail-on", "never", cwd=repo)
    assert json.loads(result.stdout)["estimate"]["cluster"]["gpu"]["name"] == "L4"


@pytest.mark.parametrize("card, message", [
    (MY_CARD.replace('dense-tflops = 200\n', ''),
     "pyproject.toml:1: 'tool.zeroadvisor.gpus.MyCard': give dense-tflops"),
    (MY_CARD + 'tflops = 3\n', "pyproject.toml:7: unknown key 'tool.zeroadvisor.gpus.MyCard.tflops' (known: memory,"),
    (MY_CARD.replace('"48GB"', '"48"'), "pyproject.toml:2: 'tool.zeroadvisor.gpus.MyCard.memory': "),
    (MY_CARD.replace('= 200', '= "fast"'), ("pyproject.toml:3: 'tool.zeroadvisor.gpus.MyCard.dense-tflops': "
                                           "expected TFLOPS")),
    (MY_CARD.replace('= 200', '= 0'), "expected TFLOPS, a number above 0"),
    (MY_CARD.replace('"64GB/s"', '"fast"'), ("pyproject.toml:4: 'tool.zeroadvisor.gpus.MyCard.intra-node-bandwidth': "
                                            "expected a bandwidth")),
    (MY_CARD.replace('"960GB/s"', '-1'), ("pyproject.toml:6: 'tool.zeroadvisor.gpus.MyCard.memory-bandwidth': must "
                                         "be above 0")),
    (MY_CARD + 'source = ""\n', "pyproject.toml:7: 'tool.zeroadvisor.gpus.MyCard.source': expected a line of text"),
    (MY_CARD.replace("MyCard", "A100"), ("pyproject.toml:1: 'tool.zeroadvisor.gpus.A100': names a card of the table "
                                        "(A100-SXM4-80GB, A100-PCIE-80GB, A100-SXM4-40GB, A100-PCIE-40GB)")),
    (MY_CARD.replace("MyCard", "nvidia-l4"), "names a card of the table (L4)"),
    (MY_CARD + MY_CARD.replace("MyCard", '"my card"'), "the same name as the declared GPU 'MyCard'"),
    (MY_CARD.replace("MyCard", '"my/card"'), ("pyproject.toml:1: 'tool.zeroadvisor.gpus': GPU name 'my/card': a GPU "
                                             "name is letters, digits")),
    (MY_CARD.replace("MyCard", '"my\\u001b[31mcard"'), "GPU name 'my\\x1b[31mcard'"),  # escaped, not sent raw
    (MY_CARD + '"x\\u001b" = 1\n', "unknown key 'x\\x1b' under 'tool.zeroadvisor.gpus.MyCard'"),
    ('[tool.zeroadvisor.gpus]\nMyCard = 3\n', "pyproject.toml:2: 'tool.zeroadvisor.gpus.MyCard': expected a table"),
    ('[tool.zeroadvisor]\ngpus = 3\n', "'tool.zeroadvisor.gpus': expected a table of [gpus.NAME] tables"),
])
def test_a_bad_declared_gpu_is_one_line_naming_file_line_and_key(repo, cli, card, message):
    write(repo / "pyproject.toml", card)
    result = cli("lint", "configs/typo.json", cwd=repo)  # every run checks the whole configuration
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert message in result.stderr and result.stderr.count("\n") == 1, result.stderr


def test_an_unknown_gpu_name_suggests_the_declared_ones(repo, cli):
    (repo / "ds.json").write_text(NO_OPTIMIZER)
    write(repo / "pyproject.toml", MY_CARD)
    result = cli("check", "ds.json", "--params", "7B", "--gpus", "8", "--gpu", "MyCrad", cwd=repo)
    assert result.returncode == 2 and "did you mean MyCard" in result.stderr and result.stderr.count("\n") == 1


def test_a_project_file_that_is_no_regular_file_is_never_read(repo):
    """A pull request chooses the repository's files: a FIFO or a link to a device named like the project
    configuration is passed over (no hang, no read), as the pin files are."""
    import os

    os.mkfifo(repo / ".zeroadvisor.toml")
    (repo / "pyproject.toml").symlink_to("/dev/zero")
    project.forget()
    result = cli_process("lint", "configs/typo.json", cwd=repo, timeout=60)  # a read of either never ends
    assert result.returncode == 1, result.stderr
    assert "ZA101" in result.stdout or "zero_optimisation" in result.stdout


def test_a_project_file_past_the_read_bound_is_one_line(repo, cli):
    from zeroadvisor.config.pin_files import MAX_FILE_BYTES

    write(repo / ".zeroadvisor.toml", "[lint]\n" + "#" * (MAX_FILE_BYTES + 10) + "\n")
    result = cli("lint", "configs/typo.json", cwd=repo)
    assert result.returncode == 2 and result.stdout == ""
    assert ".zeroadvisor.toml: cannot read: larger than 5 MB" in result.stderr and result.stderr.count("\n") == 1


def test_the_trainer_s_file_and_launch_command_from_the_configuration(repo, cli):
    """training-args (relative to the configuration's folder, read from any folder below it) and launch are
    --training-args and --launch: what they say fills the run, named as read; a flag wins; a value that is not text
    is one line naming the file and key, exit 2."""
    (repo / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto", '
                                  '"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}')
    (repo / "configs" / "dpo.yaml").write_text("per_device_train_batch_size: 2\nmax_length: 2048\nbf16: true\n"
                                               "beta: 0.1\n")
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\ntrainer = "dpo"\ntraining-args = "configs/dpo.yaml"\n'
                                   '[tool.zeroadvisor.cluster]\ngpus = 8\ngpu = "A100-SXM4-80GB"\n')
    args = ("check", str(repo / "ds.json"), "--model", str(LLAMA), "--format", "json", "--fail-on", "never")
    result = cli(*args, cwd=repo / "configs" / "legacy")
    assert result.returncode == 0, result.stderr
    assert f"sequence length 2048 from max_length in {repo / 'configs' / 'dpo.yaml'}" in result.stderr
    (configured,) = [st for st in json.loads(result.stdout)["estimate"]["stages"] if st["configured"]]
    assert "reference_model" in configured["per_gpu"]  # DPO, from the configuration's trainer
    over = cli(*args, "--seq-len", "1024", cwd=repo)
    assert "--seq-len 1024 used" in over.stderr
    write(repo / "pyproject.toml", '[tool.zeroadvisor]\nlaunch = "deepspeed --num_gpus 4 train.py --deepspeed ds.json '
                                   '--per_device_train_batch_size 2 --bf16"\n')
    launched = cli("check", "--params", "7B", "--gpu", "A100-SXM4-80GB", "--seq-len", "1024", "--format", "json",
                   "--fail-on", "never", cwd=repo)
    assert launched.returncode == 0, launched.stderr
    assert json.loads(launched.stdout)["estimate"]["cluster"]["gpus"] == 4
    write(repo / "pyproject.toml", "[tool.zeroadvisor]\ntraining-args = 3\n")
    bad = cli(*args, "--gpus", "8", "--gpu", "A100-SXM4-80GB", cwd=repo)
    assert bad.returncode == 2 and "'tool.zeroadvisor.training-args': expected text, got int" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1

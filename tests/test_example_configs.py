"""LLaMA-Factory's and axolotl's own DeepSpeed configs (config/example_configs.py): a training YAML naming
``examples/deepspeed/ds_z3_config.json`` or ``deepspeed_configs/zero3_bf16.json`` where no such file is beside it
(a YAML checked outside the trainer's checkout) is checked as the file that trainer's release ships; a file that is
there is the user's and is read as it is."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.example_configs import FOLDERS, shipped_example, shipped_stem
from zeroadvisor.config.shipped_copies import contents

QWEN = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}
COPIES = Path(__file__).resolve().parent.parent / "zeroadvisor" / "schemas"


@pytest.mark.parametrize(("path", "project", "stem"), [
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", "ds_z3_config"),
    ("./examples/deepspeed/ds_z2_offload_config.json", "llama-factory", "ds_z2_offload_config"),
    ("/root/LLaMA-Factory/examples/deepspeed/ds_z0_config.json", "llama-factory", "ds_z0_config"),
    ("examples/deepspeed/my_z3.json", "llama-factory", None),  # not one of LLaMA-Factory's files
    ("configs/ds_z3_config.json", "llama-factory", None),  # not in its folder
    ("deepspeed_configs/zero3_bf16.json", "axolotl", "zero3_bf16"),
    ("deepspeed_configs/zero3_bf16.json", "llama-factory", None),  # another trainer's folder
    ("examples/deepspeed/ds_z3_config.json", "transformers", None),  # a plain Trainer ships none
    ("deepspeed_configs/zero3.yaml", "axolotl", None)])
def test_which_paths_name_a_trainers_own_config(path, project, stem):
    assert shipped_stem(path, project) == stem


@pytest.mark.parametrize(("path", "project", "requirement", "since", "known"), [
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.6.0", "0.6.0", True),
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.9.1", "0.6.0", True),
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.9.2", "0.9.2", True),
    ("examples/deepspeed/ds_z0_config.json", "llama-factory", "0.8.3", "0.7.1", True),
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", None, "0.9.2", False),  # the newest, assumed
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", ">=0.8,<0.9.2", "0.6.0", True),  # one content
    ("examples/deepspeed/ds_z3_config.json", "llama-factory", ">=0.8", "0.9.2", False),
    ("deepspeed_configs/zero3_bf16.json", "axolotl", "0.4.0", "0.4.0", True),
    ("deepspeed_configs/zero3_bf16.json", "axolotl", "0.11.0", "0.5.0", True),
    ("deepspeed_configs/zero3_bf16.json", "axolotl", "0.18.0", "0.12.0", True),
    ("deepspeed_configs/zero2_torch_compile.json", "axolotl", "0.10.0", "0.10.0", True)])
def test_the_content_each_release_ships(path, project, requirement, since, known):
    found, decided = shipped_example(path, project, requirement)
    assert found is not None and (found.content_since, decided) == (since, known)
    assert found.path == f"{FOLDERS[project].folder}/{shipped_stem(path, project)}.json"


def test_what_changed_between_the_contents():
    # LLaMA-Factory #7205 (v0.9.2) turned overlap_comm off in every ZeRO config; the buckets' memory follows it
    for stem in ("ds_z0_config", "ds_z2_config", "ds_z2_offload_config", "ds_z3_config", "ds_z3_offload_config"):
        old, new = (shipped_example(f"examples/deepspeed/{stem}.json", "llama-factory", release)[0]
                    for release in ("0.9.1", "0.9.2"))
        assert old is not None and new is not None
        assert (old.data["zero_optimization"]["overlap_comm"], new.data["zero_optimization"]["overlap_comm"]) == \
            (True, False)
    # axolotl 0.5.0 dropped the optimizer block (AdamW, "auto"); a reference engine built from it differs
    old, new = (shipped_example("deepspeed_configs/zero3.json", "axolotl", release)[0]
                for release in ("0.4.0", "0.5.0"))
    assert old is not None and new is not None and "optimizer" in old.data and "optimizer" not in new.data


def test_what_no_copy_covers():
    assert shipped_example("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.5.3") == (None, True)
    assert shipped_example("examples/deepspeed/ds_z0_config.json", "llama-factory", "0.7.0") == (None, True)
    assert shipped_example("examples/deepspeed/ds_z3_fp8_config.json", "llama-factory", "0.9.3") == (None, True)
    assert shipped_example("deepspeed_configs/zero1_torch_compile.json", "axolotl", "0.6.0") == (None, True)


def test_every_copy_is_shipped_and_names_its_stage():
    for where in FOLDERS.values():
        for stem in where.stems:
            releases = contents(where.copies, stem)
            assert releases, stem
            for release in releases:
                found, _ = shipped_example(f"{where.folder}/{stem}.json", next(
                    key for key, value in FOLDERS.items() if value == where), str(release))
                assert found is not None
                stage = found.data["zero_optimization"]["stage"]
                assert f"z{stage}" in stem or f"zero{stage}" in stem


def test_the_newest_copies_are_the_files_of_the_corpus(corpus):
    # the corpus holds LLaMA-Factory's and axolotl's folders at commits after their newest content here
    for where, repo in ((FOLDERS["llama-factory"], "hiyouga__LLaMA-Factory__examples__deepspeed__"),
                        (FOLDERS["axolotl"], "axolotl-ai-cloud__axolotl__deepspeed_configs__")):
        for stem in where.stems:
            newest = contents(where.copies, stem)[-1]
            copy = (COPIES / where.copies / f"{stem}@{newest}.json").read_bytes()
            assert copy == (corpus / f"{repo}{stem}.json").read_bytes(), stem


LF_DPO = """\
model_name_or_path: {model}
stage: dpo
do_train: true
finetuning_type: full
pref_beta: 0.1
deepspeed: examples/deepspeed/{ds}.json  # choices: [ds_z0_config.json, ds_z2_config.json, ds_z3_config.json]
cutoff_len: 4096
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
bf16: true
"""


def _run(tmp_path, monkeypatch, cli, *more, ds="ds_z3_config", output="json"):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    (tmp_path / "dpo.yaml").write_text(LF_DPO.format(model=tmp_path / "model", ds=ds))
    return cli("check", "--training-args", "dpo.yaml", "--gpus", "8", "--gpu", "A100-SXM4-40GB",
               "--cpu-memory", "1TB", "--format", output, *more)


def _configured(result):
    report = json.loads(result.stdout)
    return next(stage for stage in report["estimate"]["stages"] if stage["configured"]), report


def test_a_yaml_naming_the_trainers_file_is_checked_as_that_file(cli, tmp_path, monkeypatch):
    """Before, the check stopped: "examples/deepspeed/ds_z3_config.json: no such file"."""
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.1\n")
    shipped = _run(tmp_path, monkeypatch, cli)
    assert shipped.returncode in (0, 1), shipped.stderr
    assert ("examples/deepspeed/ds_z3_config.json is not here: LLaMA-Factory's own, read as LLaMA-Factory 0.9.1 "
            "(llamafactory==0.9.1 at " in shipped.stderr)
    stage, report = _configured(shipped)
    assert {f["file"] for f in report["findings"]} == {"LLaMA-Factory 0.9.1 examples/deepspeed/ds_z3_config.json"}
    # the same run with the file placed where llamafactory-cli reads it: the same estimate, the file's name
    found, _ = shipped_example("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.9.1")
    assert found is not None
    (tmp_path / "examples" / "deepspeed").mkdir(parents=True)
    (tmp_path / "examples" / "deepspeed" / "ds_z3_config.json").write_text(found.text)
    placed = _run(tmp_path, monkeypatch, cli)
    assert "is not here" not in placed.stderr
    assert _configured(placed)[0]["per_gpu"] == stage["per_gpu"]
    # a file of the user's at that place is theirs: read as it is (stage 2 here), never replaced by the copy
    (tmp_path / "examples" / "deepspeed" / "ds_z3_config.json").write_text(
        found.text.replace('"stage": 3', '"stage": 2'))
    own = _configured(_run(tmp_path, monkeypatch, cli))[0]
    assert own["stage"] == 2


def test_the_release_decides_the_content_and_an_older_one_asks_for_the_file(cli, tmp_path, monkeypatch):
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.1\n")
    old = _configured(_run(tmp_path, monkeypatch, cli, ds="ds_z2_config"))[0]
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.2\n")
    new = _configured(_run(tmp_path, monkeypatch, cli, ds="ds_z2_config"))[0]
    # overlap_comm (on before 0.9.2) keeps ZeRO-2's gradient buckets doubled (stage_1_and_2.py ipg_buffer)
    assert old["per_gpu"]["buffers"] > new["per_gpu"]["buffers"]
    (tmp_path / "requirements.txt").write_text("llamafactory==0.5.3\n")
    refused = _run(tmp_path, monkeypatch, cli)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        "zeroadvisor: examples/deepspeed/ds_z3_config.json: no such file, and LLaMA-Factory 0.5.3 "
        "(llamafactory==0.5.3 at requirements.txt:1) ships no such config known here; give the file's path as CONFIG")


def test_a_fix_is_shown_on_the_trainers_text_never_written(cli, tmp_path, monkeypatch):
    (tmp_path / "requirements.txt").write_text("llamafactory==0.9.2\n")
    suggested = _run(tmp_path, monkeypatch, cli, "--suggest", output="text")
    diff = suggested.stdout[suggested.stdout.index("--- a/"):]
    # the diff is on the trainer's text as it ships it (1e9), not on a re-dump of its data (1000000000.0), under
    # the file's path in the trainer's repository: it applies in a LLaMA-Factory checkout
    assert diff.startswith("--- a/examples/deepspeed/ds_z3_config.json\n+++ b/examples/deepspeed/ds_z3_config.json")
    assert '"stage3_max_reuse_distance": 1e9' in diff and "1000000000.0" not in diff
    checkout = tmp_path / "LLaMA-Factory"
    (checkout / "examples" / "deepspeed").mkdir(parents=True)
    found, _ = shipped_example("examples/deepspeed/ds_z3_config.json", "llama-factory", "0.9.2")
    assert found is not None
    (checkout / "examples" / "deepspeed" / "ds_z3_config.json").write_text(found.text)
    (checkout / "fix.diff").write_text(diff)
    applied = subprocess.run(["git", "apply", "fix.diff"], check=False, cwd=checkout, capture_output=True,
                             text=True)
    assert applied.returncode == 0, applied.stderr
    fixed = _run(tmp_path, monkeypatch, cli, "--fix")
    assert fixed.returncode == 2 and "not read from a file" in fixed.stderr
    assert not (tmp_path / "examples").exists()


def test_an_axolotl_yaml_reads_its_release_of_the_folder(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    (tmp_path / "ax.yaml").write_text(f"base_model: {tmp_path / 'model'}\nrl: dpo\nsequence_len: 2048\n"
                                      "micro_batch_size: 2\ngradient_accumulation_steps: 4\nbf16: true\n"
                                      "flash_attention: true\ndeepspeed: deepspeed_configs/zero3_bf16.json\n")
    (tmp_path / "requirements.txt").write_text("axolotl==0.12.0\n")
    result = cli("check", "--training-args", "ax.yaml", "--gpus", "8", "--gpu", "H100-SXM5-80GB", "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    assert "axolotl's own, read as axolotl 0.12.0 (axolotl==0.12.0 at requirements.txt:1)" in result.stderr
    stage, _ = _configured(result)
    assert stage["stage"] == 3
    shutil.rmtree(tmp_path / "model")


def test_every_copy_lints_without_errors_as_deepspeed_reads_it():
    """Each copy lints clean under DeepSpeed 0.19.8, but axolotl's torch_compile files: their compile.disable and
    compile.backend left DeepSpeed after 0.14.3, and 0.19.8's CompileConfig forbids them (the corpus oracle holds
    DeepSpeed rejecting the same file)."""
    import zeroadvisor

    for where in FOLDERS.values():
        for path in sorted((COPIES / where.copies).glob("*.json")):
            result = zeroadvisor.lint(text=path.read_text("utf-8"), name=path.name, deepspeed_version="0.19.8")
            errors = {f.message.split(":")[0] for f in result.findings if f.severity == "error"}
            compile_keys = {"unknown key 'disable' in 'compile'",
                            "DeepSpeed 0.19.8 does not have 'backend' in 'compile' (read up to 0.14.3)"}
            expected = compile_keys if "torch_compile" in path.name else set()
            assert errors == expected, path.name

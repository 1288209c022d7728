"""ms-swift's own DeepSpeed configs (config/swift_configs.py): ``swift sft|rlhf --deepspeed zero3`` is read as the
file that ms-swift release ships, by the pin (else the installed ms-swift), and checked as such; a name that release
does not map, or a release older than the copies shipped, asks for the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.swift_configs import NAMES, V2_NAMES, V3_NAMES, shipped, stem_of

FIELD = Path(__file__).resolve().parent.parent / "benchmarks" / "field" / "cases"
QWEN = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}


@pytest.mark.parametrize(("name", "release", "stem"), [
    ("default-zero3", "2.6.1", "zero3"), ("zero3-offload", "2.4.1", "zero3_offload"), ("zero3", "2.6.1", None),
    ("default-zero2", "3.0.0", None), ("zero2_offload", "3.12.6", "zero2_offload"), ("zero0", "4.5.2", "zero0"),
    ("zero3_offload_cpu", None, None)])
def test_the_names_each_release_maps(name, release, stem):
    from packaging.version import Version

    assert stem_of(name, Version(release) if release else None) == stem


@pytest.mark.parametrize(("name", "requirement", "since", "path", "known"), [
    ("default-zero3", "2.6.1", "2.4.1", "swift/llm/ds_config/zero3.json", True),
    ("zero3", "3.1.0", "3.0.1", "swift/llm/ds_config/zero3.json", True),
    ("zero3", "3.2.0", "3.2.0", "swift/llm/ds_config/zero3.json", True),
    ("zero3", "3.12.0", "3.2.2", "swift/llm/ds_config/zero3.json", True),
    ("zero3", "4.5.2", "3.2.2", "swift/config/zero3.json", True),
    ("zero3_offload", "3.0.3", "3.0.3", "swift/llm/ds_config/zero3_offload.json", True),
    ("zero2", None, "3.2.2", "swift/config/zero2.json", False),  # no release: the newest content, assumed
    ("zero2", ">=3.0.1,<3.2", "3.0.1", "swift/llm/ds_config/zero2.json", True),  # one content in the range
    # 3.0.0 still ships 2.4.1's content: two contents, the newest assumed
    ("zero2", ">=3.0,<3.2", "3.0.1", "swift/llm/ds_config/zero2.json", False),
    ("zero2", "~=3.1.0", "3.0.1", "swift/llm/ds_config/zero2.json", True),  # 3.1.x: the content from 3.0.1
    ("zero3", ">=3.0,<3.3", "3.2.2", "swift/llm/ds_config/zero3.json", False),  # three: the newest, assumed
    ("zero2", ">=3.5", "3.2.2", "swift/config/zero2.json", False)])
def test_the_file_each_release_ships(name, requirement, since, path, known):
    found, decided = shipped(name, requirement)
    assert found is not None and (found.content_since, found.path, decided) == (since, path, known)
    assert found.data["zero_optimization"]["stage"] == int(found.path.split("zero")[-1][0])


def test_what_no_shipped_copy_covers():
    assert shipped("zero3", "2.0.0") == (None, True)  # older than the copies (v2.4.1 on)
    assert shipped("zero0", "3.0.0") == (None, True)  # zero0.json first shipped in v3.0.1
    assert shipped("default-zero2", "4.0.0") == (None, True)  # a 2.x name
    assert NAMES == set(V2_NAMES) | set(V3_NAMES)


def test_the_copy_is_the_config_the_field_cases_quote():
    # the ms-swift DPO example at commit 3602360 (4.x) ran --deepspeed zero3; its case holds the file as it was there
    case = yaml.safe_load((FIELD / "swift-dpo-qwen2.5-7b-4gpu-z3-full-8k.yaml").read_text())
    found, _ = shipped("zero3", None)

    def numbers(value):  # YAML 1.1 reads 1e9 (no dot) as text; JSON as a number
        if isinstance(value, dict):
            return {key: numbers(each) for key, each in value.items()}
        try:
            return float(value) if isinstance(value, str) else value
        except ValueError:
            return value

    assert found is not None and numbers(found.data) == numbers(case["ds_config"])


def test_the_launch_command_keeps_the_name_and_no_path():
    launch = parse_launch("NPROC_PER_NODE=4 swift sft --model m --deepspeed zero3_offload")
    assert launch.swift_config == "zero3_offload" and launch.training.deepspeed is None
    assert parse_launch("swift sft --model m --deepspeed ds.json").swift_config is None


def test_a_swift_command_naming_its_own_config_is_checked_as_that_file(cli, tmp_path, monkeypatch):
    """Before, the command was refused ("give CONFIG"): the config it runs is ms-swift's, read by the release."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    command = (f"NPROC_PER_NODE=8 swift sft --model {tmp_path / 'model'} --train_type full --torch_dtype bfloat16 "
               "--max_length 4096 --per_device_train_batch_size 1 --deepspeed zero2")
    args = ("check", "--launch", command, "--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--format", "json")
    (tmp_path / "requirements.txt").write_text("ms-swift==3.1.0\n")
    old = cli(*args)
    assert old.returncode == 0, old.stderr
    assert "ms-swift's swift/llm/ds_config/zero2.json, read as ms-swift 3.1.0 (ms-swift==3.1.0 at " in old.stderr
    report = json.loads(old.stdout)
    assert {f["file"] for f in report["findings"]} == {"ms-swift 3.1.0 swift/llm/ds_config/zero2.json"}
    (tmp_path / "requirements.txt").write_text("ms-swift==4.5.2\n")
    new = cli(*args)
    assert "read as ms-swift 4.5.2" in new.stderr and "swift/config/zero2.json" in new.stderr
    # v3.2.2 turned overlap_comm off: the buckets ZeRO-2 keeps differ, so the two releases' estimates differ
    buffers = [next(st for st in json.loads(r.stdout)["estimate"]["stages"] if st["configured"])["per_gpu"]["buffers"]
               for r in (old, new)]
    assert buffers[0] > buffers[1]
    small = [word if word != "A100-SXM4-80GB" else "A10G" for word in args[:-2]]  # 24 GB: a fix is needed
    fixed = cli(*small, "--fix")
    assert fixed.returncode == 2 and "not read from a file" in fixed.stderr and "Traceback" not in fixed.stderr
    (tmp_path / "requirements.txt").write_text("ms-swift==2.0.0\n")
    refused = cli(*args)
    assert refused.returncode == 2 and "swift --deepspeed zero2: no such config of ms-swift 2.0.0" in refused.stderr

"""The DeepSpeed config OpenRLHF builds from its flags (config/openrlhf_config.py, get_ds_train_config): an OpenRLHF
command is checked without a saved config, the config built at the pinned release, and the same command with that
config saved as a file checks the same."""

from __future__ import annotations

import json

import pytest
from packaging.version import Version

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.openrlhf_config import OpenRLHFFlags, train_config

QWEN = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}
PPO = ("ray job submit -- python3 -m openrlhf.cli.train_ppo_ray --pretrain {model} --actor_num_nodes 1 "
       "--actor_num_gpus_per_node 8 --zero_stage 3 --bf16 --adam_offload --prompt_max_len 1024 --generate_max_len 1024 "
       "--micro_train_batch_size 2 --advantage_estimator group_norm --init_kl_coef 0 --remote_rm_url http://rm "
       "--vllm_num_engines 2 --gradient_checkpointing --flash_attn")


@pytest.mark.parametrize(("words", "release", "expected"), [
    # 0.8: --bf16 store_true, off by default (fp32); ppo's micro batch default 4; no optimizer block
    ("--zero_stage 3 --bf16 --adam_offload", "0.8.5",
     {"stage": 3, "offload": "cpu", "bf16": True, "fp16": False, "micro": 4, "optimizer": None}),
    ("--zero_stage 2", "0.8.5", {"stage": 2, "offload": "none", "bf16": False, "fp16": False, "micro": 4}),
    # 0.9.2 on: --param_dtype, bf16 by default; 0.10 on: ppo's micro batch default 1; 0.10.4 on: AdamW in the config
    ("--param_dtype fp16", "0.11.0", {"stage": 2, "bf16": False, "fp16": True, "micro": 1, "optimizer": "AdamW"}),
    ("--ds.zero_stage 3 --train.micro_batch_size 2 --ds.ring_attn_size 2", "0.11.0",
     {"stage": 3, "bf16": True, "micro": 2, "train_batch_size": 256}),
    # no release known: bf16 (a command without --bf16 or --param_dtype is a 0.9.2+ one), 0.8's batch defaults
    ("--zero_stage 1", None, {"stage": 1, "bf16": True, "micro": 4, "optimizer": None}),
])
def test_the_config_each_release_builds(words, release, expected):
    flags = parse_launch(f"python -m openrlhf.cli.train_ppo_ray --pretrain m --remote_rm_url http://rm {words}"
                         ).openrlhf_flags
    assert flags is not None and flags.entry == "openrlhf.cli.train_ppo_ray"
    config = train_config(flags, Version(release) if release else None)
    zero = config["zero_optimization"]
    seen = {"stage": zero["stage"], "offload": zero["offload_optimizer"]["device"], "bf16": config["bf16"]["enabled"],
            "fp16": config["fp16"]["enabled"], "micro": config["train_micro_batch_size_per_gpu"],
            "optimizer": config.get("optimizer", {}).get("type"), "train_batch_size": config["train_batch_size"]}
    assert {key: seen[key] for key in expected} == expected
    assert zero["offload_param"] == {"device": "none"}  # the trained model's parameters are never offloaded
    assert not any(value == "auto" for value in zero.values())  # DeepSpeed drops them (the oracle holds it)


def test_the_entry_points_micro_batch_defaults():
    for entry, micro in (("train_sft", 8), ("train_dpo", 8), ("train_rm", 1), ("train_ppo_ray", 4)):
        config = train_config(OpenRLHFFlags(f"openrlhf.cli.{entry}", {}), Version("0.8.5"))
        assert config["train_micro_batch_size_per_gpu"] == micro and config["train_batch_size"] == 128


def test_an_openrlhf_command_is_checked_without_a_saved_config(cli, tmp_path, monkeypatch):
    """Before, the command was refused (give CONFIG). Now the config is the one the flags build, and that config
    saved as a file and given as CONFIG checks to the same peak; the pin decides the release."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    (tmp_path / "requirements.txt").write_text("openrlhf==0.8.5\n")
    command = PPO.format(model=tmp_path / "model")
    args = ("--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--format", "json", "--fail-on", "never")
    built = cli("check", "--launch", command, *args)
    assert built.returncode == 0, built.stderr
    assert "config: the one openrlhf.cli.train_ppo_ray builds from its flags" in built.stderr
    assert "as OpenRLHF 0.8.5 (openrlhf==0.8.5 at requirements.txt:1)" in built.stderr
    flags = parse_launch(command).openrlhf_flags
    assert flags is not None
    (tmp_path / "ds.json").write_text(json.dumps(train_config(flags, Version("0.8.5"))))
    saved = cli("check", str(tmp_path / "ds.json"), "--launch", command, *args)

    def configured(result) -> dict:
        return next(st for st in json.loads(result.stdout)["estimate"]["stages"] if st["configured"])

    assert configured(built)["peak_gpu"] == configured(saved)["peak_gpu"]
    assert configured(built)["label"] == "Z3 +opt:cpu"
    fixed = cli("check", "--launch", command, *args, "--fix")  # no file to write: the flags are the fix
    assert fixed.returncode == 2 and "not read from a file" in fixed.stderr


@pytest.mark.parametrize(("flag", "words"), [("--zpg inf", "--zpg expects a whole number"),
                                             ("--train.batch_size -1", "--train_batch_size expects a whole number"),
                                             ("--max_norm abc", "--max_norm expects a number")])
def test_a_flag_the_config_is_built_from_that_argparse_refuses_is_one_line(cli, flag, words):
    result = cli("check", "--params", "7B", "--gpu-memory", "80GiB", "--", "deepspeed", "--num_gpus", "8",
                 "--module", "openrlhf.cli.train_dpo", "--pretrain", "m", *flag.split())
    assert result.returncode == 2 and words in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1

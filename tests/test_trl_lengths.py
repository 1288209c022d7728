"""The lengths a TRL config file leaves to its class's defaults (config/default_lengths.py): DPOConfig & co.'s
max_length, SFTConfig's, GRPOConfig's prompt and completion caps, by the pinned TRL release. Before, a TRL DPO
config without max_length left the activations uncounted ("give --seq-len") though TRL truncates every row."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.default_lengths import trl_defaults
from zeroadvisor.config.method import Generation, MethodSetup
from zeroadvisor.vocab import Method, TrainerFamily

QWEN = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}
Z3 = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
      "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}


@pytest.mark.parametrize(("method", "release", "length"), [
    (Method.DPO, "0.13.0", None), (Method.DPO, "0.14.0", 1024), (Method.DPO, "1.9.0", 1024), (Method.DPO, None, 1024),
    (Method.KTO, "0.13.0", 512), (Method.ORPO, "0.11.4", 512), (Method.CPO, "0.14.0", 1024),
    (Method.REWARD, "0.9.6", 512), (Method.SFT, "0.12.2", 1024), (Method.SFT, "0.21.0", 1024),
    (Method.PPO, "0.21.0", None)])
def test_max_length_by_release(method, release, length):
    found = trl_defaults(MethodSetup(method, TrainerFamily.TRL, trainer_version=release))
    assert found.max_length == length
    assert (found.note != "") == (length is not None)


@pytest.mark.parametrize(("release", "given", "prompt", "completion"), [
    ("0.21.0", Generation(), 512, 256), ("0.25.1", Generation(), 512, 256), ("0.26.0", Generation(), None, 256),
    ("1.9.2", Generation(), None, 256), ("1.10.0", Generation(), None, 512), (None, Generation(), None, 512),
    ("0.21.0", Generation(max_completion_length=1024), 512, None),
    ("0.21.0", Generation(max_prompt_length=300, max_completion_length=1024), None, None)])
def test_grpo_caps_by_release(release, given, prompt, completion):
    found = trl_defaults(MethodSetup(Method.GRPO, TrainerFamily.TRL, trainer_version=release, generation=given))
    assert (found.max_prompt_length, found.max_completion_length) == (prompt, completion)


def _check(cli, tmp_path, script: str, config: str, release: str) -> tuple[dict, str]:
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    (tmp_path / "ds.json").write_text(json.dumps(Z3))
    (tmp_path / "run.yaml").write_text(f"model_name_or_path: {tmp_path / 'model'}\n{config}bf16: true\n"
                                       "gradient_checkpointing: true\n")
    (tmp_path / "requirements.txt").write_text(f"trl=={release}\n")
    result = cli("check", str(tmp_path / "ds.json"), "--launch",
                 f"accelerate launch --num_processes 8 trl/scripts/{script}.py --config {tmp_path / 'run.yaml'}",
                 "--gpu", "H100-SXM5-80GB", "--cpu-memory", "1TB", "--format", "json", "--fail-on", "never",
                 cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def test_a_dpo_config_without_max_length_is_costed_at_trl_s_default(cli, tmp_path):
    report, notes = _check(cli, tmp_path, "dpo", "per_device_train_batch_size: 2\nbeta: 0.1\n", "0.21.0")
    assert "sequence length 1024 from DPOConfig's default max_length (TRL 0.21.0" in notes
    assert report["estimate"]["model"]["sequence_length"] == 1024
    configured = next(s for s in report["estimate"]["stages"] if s["configured"])
    assert configured["per_gpu"]["activations"] > 0 and configured["verdict"] != "unknown"
    # the same file with max_length 1024 said: the same estimate
    (tmp_path / "said").mkdir()
    said, _ = _check(cli, tmp_path / "said", "dpo", "per_device_train_batch_size: 2\nbeta: 0.1\nmax_length: 1024\n",
                     "0.21.0")
    assert next(s for s in said["estimate"]["stages"] if s["configured"])["per_gpu"] == configured["per_gpu"]
    # before TRL 0.14, DPOTrainer truncated nothing: no length is known, the activations are asked for
    old, _ = _check(cli, tmp_path, "dpo", "per_device_train_batch_size: 2\nbeta: 0.1\n", "0.13.0")
    assert next(s for s in old["estimate"]["stages"] if s["configured"])["verdict"] == "unknown"


def test_a_grpo_config_without_lengths_scores_trl_s_default_completion(cli, tmp_path):
    report, notes = _check(cli, tmp_path, "grpo", "per_device_train_batch_size: 4\nnum_generations: 8\n", "0.21.0")
    assert "max_prompt_length 512 and max_completion_length 256 from GRPOConfig's defaults (TRL 0.21.0)" in notes
    configured = next(s for s in report["estimate"]["stages"] if s["configured"])
    assert configured["verdict"] != "unknown"
    # the logits are the completion's (logits_to_keep), 256 tokens per row, a term of their own
    (logits,) = [term for term in configured["terms"] if term["key"] == "completion_logits"]
    # TRL 0.21 by its parts (trl_grpo_out_of_place): 4 rows x 256 positions, a whole row's entropy chunk
    assert "V 152,064 × max(forward 2 × 1,024 + 3 × 256 entropy positions" in logits["formula"]
    assert any("GRPO's are the completion's only" in note for note in report["estimate"]["model"]["assumptions"])


LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "vocab_size": 32000}


@pytest.mark.parametrize(("command", "length"), [
    ("deepspeed --num_gpus 8 --module openrlhf.cli.train_dpo --pretrain {m} --zero_stage 3 --bf16", 512),
    ("deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --pretrain {m} --zero_stage 2 --bf16", 2048),
    ("deepspeed --num_gpus 8 --module openrlhf.cli.train_rm --pretrain {m} --zero_stage 2 --bf16", 512),
    ("deepspeed --num_gpus 8 --module openrlhf.cli.train_dpo --pretrain {m} --bf16 --max_len 4096", 4096),
    (("python3 -m openrlhf.cli.train_ppo_ray --pretrain {m} --actor_num_gpus_per_node 8 --bf16 --init_kl_coef 0 "
     "--advantage_estimator group_norm --remote_rm_url http://rm"), 2048)])
def test_openrlhf_s_default_lengths_bound_the_sequence(cli, tmp_path, command, length):
    """OpenRLHF's datasets truncate to --max_len, whose default is the entry point's (openrlhf/cli/train_*.py @ v0.6.0
    to v0.11.0); before, a command without it left the activations uncounted. PPO's prompt and generation default to
    1024 + 1024 up to 0.9 and --max_len 2048 from 0.10: the same sequence."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA))
    result = cli("check", "--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--format", "json", "--fail-on", "never",
                 "--launch", command.format(m=tmp_path / "model"))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["estimate"]["model"]["sequence_length"] == length
    assert (f"sequence length {length} from OpenRLHF's" in result.stderr) == ("--max_len" not in command)


def test_openrlhf_s_default_gives_way_to_a_length_said_elsewhere(cli, tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA))
    command = f"deepspeed --num_gpus 8 --module openrlhf.cli.train_dpo --pretrain {tmp_path / 'model'} --bf16"
    result = cli("check", "--gpu", "A100-SXM4-80GB", "--format", "json", "--fail-on", "never", "--seq-len", "1024",
                 "--launch", command)
    assert json.loads(result.stdout)["estimate"]["model"]["sequence_length"] == 1024
    assert "from OpenRLHF's" not in result.stderr

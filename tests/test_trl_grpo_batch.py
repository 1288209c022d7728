"""TRL's GRPO batch checks (memory/method.py grpo_batch_refusal): TRL raises before training where the batch
of completions does not hold whole groups of num_generations, in words and arithmetic that changed by release. The
configured run is refused (ZA814), and no micro batch change that TRL would refuse is recommended. Before, such a
run was called "fits"."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.method import Generation, MethodSetup
from zeroadvisor.memory.method import grpo_batch_refusal
from zeroadvisor.vocab import Method, TrainerFamily


def _setup(release: str | None, **generation: int) -> MethodSetup:
    return MethodSetup(Method.GRPO, TrainerFamily.TRL, trainer_version=release, generation=Generation(**generation))


@pytest.mark.parametrize(("release", "generation", "batch", "words"), [
    ("0.14.0", {"num_generations": 16}, (1, 1, 8), None),  # the batch counted prompts: no check
    ("0.16.1", {"num_generations": 16}, (2, 1, 8), None),
    ("0.16.1", {"num_generations": 16}, (1, 4, 8), ("The global train batch size (8 x 1) must be evenly divisible by "
                                                   "the number of generations per prompt (16)")),
    ("0.17.0", {"num_generations": 16}, (1, 4, 8), None),  # the accumulation counts from 0.17
    ("0.17.0", {"num_generations": 16}, (1, 1, 8), ("The effective train batch size (8 x 1 x 1) must be evenly "
                                                   "divisible by the number of generations per prompt (16)")),
    ("0.19.1", {}, (4, 1, 7), ("The effective train batch size (7 x 4 x 1) must be evenly divisible by the number of "
                              "generations per prompt (8)")),
    ("0.23.0", {}, (4, 1, 7), "generation_batch_size (28) must be divisible by num_generations (8)."),
    ("0.23.0", {}, (4, 2, 7), None),
    ("0.23.0", {"steps_per_generation": 2}, (4, 1, 7), None),  # the steps, not the accumulation
    ("0.23.0", {"generation_batch_size": 56}, (4, 1, 7), None),
    ("0.23.0", {"generation_batch_size": 60}, (4, 1, 7), ("generation_batch_size (60) must be divisible by the global "
                                                         "batch size (28).")),
    ("0.23.0", {"generation_batch_size": 56, "steps_per_generation": 2}, (4, 1, 7),
     "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time"),
    (None, {"num_generations": 6}, (4, 1, 8), "generation_batch_size (32) must be divisible by num_generations (6)."),
])
def test_trl_s_checks_by_release(release, generation, batch, words):
    found = grpo_batch_refusal(_setup(release, **generation), *batch)
    assert (found is None) == (words is None)
    if words is not None:
        assert f'raises "{words}"' in found


def test_only_grpo_is_checked():
    assert grpo_batch_refusal(MethodSetup(Method.DPO, TrainerFamily.TRL), 1, 1, 7) is None
    assert grpo_batch_refusal(MethodSetup(Method.GRPO, TrainerFamily.OPENRLHF), 1, 1, 7) is None


@pytest.mark.parametrize(("release", "batch", "words"), [
    ("3.3.0", (1, 1, 7), None),  # before ms-swift's own check
    ("3.4.0", (1, 1, 7), ("The effective train batch size (7 x 1 x 1) must be evenly divisible by the number of "
                         "generations per prompt (8)")),
    ("3.5.1", (1, 1, 7), None),  # none of its own in 3.5.0 and 3.5.1
    ("3.8.0", (4, 2, 7), None),
    ("4.5.2", (4, 1, 7), "generation_batch_size (28) must be evenly divisible by num_generations (8).")])
def test_ms_swift_s_own_grpo_check_by_release(release, batch, words):
    setup = MethodSetup(Method.GRPO, TrainerFamily.MS_SWIFT, trainer_version=release)
    found = grpo_batch_refusal(setup, *batch)
    assert (found is None) == (words is None)
    if words is not None:
        assert found.startswith(f'ms-swift {release} raises "{words}"'), found


QWEN = {"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
        "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064, "tie_word_embeddings": False}
Z3 = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
      "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}}


def _check(cli, tmp_path, release: str, flags: str, gpu: str = "H100-SXM5-80GB", config: dict = Z3) -> dict:
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(QWEN))
    (tmp_path / "ds.json").write_text(json.dumps(config))
    (tmp_path / "requirements.txt").write_text(f"trl=={release}\n")
    result = cli("check", str(tmp_path / "ds.json"), "--gpu", gpu, "--cpu-memory", "1TB", "--format", "json",
                 "--fail-on", "never", "--launch",
                 f"accelerate launch --num_processes 8 -m trl.scripts.grpo --model_name_or_path {tmp_path / 'model'} "
                 f"--gradient_checkpointing --bf16 --max_prompt_length 512 {flags}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_refused_grpo_batch_stops_the_check_and_no_refused_micro_batch_is_advised(cli, tmp_path):
    refused = _check(cli, tmp_path, "0.23.0", "--per_device_train_batch_size 2 --num_generations 6")
    (finding,) = [f for f in refused["findings"] if f["code"] == "ZA814"]
    assert 'TRL 0.23.0 raises "generation_batch_size (16) must be divisible by num_generations (6)."' in \
        finding["message"]
    # TRL 0.16 counts the global batch alone: with 16 generations on 8 GPUs only even micro batches run, so the
    # long completion that does not fit at micro batch 2 on a 24 GB card, fully offloaded, gets no micro batch 1
    # (which fits, and was the fix before), but a bigger card
    (tmp_path / "old").mkdir()
    offloaded = {**Z3, "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                                             "offload_param": {"device": "cpu"}}}
    old = _check(cli, tmp_path / "old", "0.16.1", "--per_device_train_batch_size 2 --num_generations 16 "
                 "--max_completion_length 7168", gpu="A10G", config=offloaded)
    assert not [f for f in old["findings"] if f["code"] == "ZA814"]
    for f in old["findings"]:
        change = (f.get("recommends") or {}).get("change", "")
        assert "micro batch 1" not in change, f["message"]
    (dominate,) = [f for f in old["findings"] if f["code"] == "ZA803"]
    assert "micro batch that fits is 1 (now 2), which the trainer refuses: TRL 0.16.1 raises" in dominate["message"]
    (short,) = [f for f in old["findings"] if f["code"] == "ZA801"]
    assert "instead of the A10G" in short["message"]  # a bigger card


@pytest.mark.parametrize(("release", "batch", "words"), [
    ("0.12.0", (4, 1, 7), ('TRL 0.21.0 (axolotl 0.12.0\'s pin) raises "generation_batch_size (28) must be divisible by '
                          'num_generations (8)."')),
    ("0.8.0", (1, 1, 4), ('TRL 0.16.0 (axolotl 0.8.0\'s pin) raises "The global train batch size (4 x 1) must be '
                         'evenly divisible by the number of generations per prompt (8)"')),
    ("0.12.0", (4, 2, 7), None), ("0.6.0", (1, 1, 4), None),  # before axolotl's GRPO
    (None, (4, 1, 7), "TRL (axolotl not pinned: the newest release's check) raises")])
def test_axolotl_s_grpo_is_checked_at_the_trl_release_it_pins(release, batch, words):
    """axolotl runs TRL's GRPOTrainer at the TRL release each of its releases pins (memory/method.py AXOLOTL_TRL)."""
    setup = MethodSetup(Method.GRPO, TrainerFamily.AXOLOTL, trainer_version=release)
    found = grpo_batch_refusal(setup, *batch)
    assert (found is None) == (words is None)
    if words is not None:
        assert found.startswith(words), found


def test_grpo_completion_logits_match_trl_s_own_scoring_measured_on_cpu():
    """benchmarks/grpo_logits.json: TRL's own GRPOTrainer._get_per_token_logps_and_entropies (_get_per_token_logps
    before 0.20), a clipped-ratio loss and its backward on CPU (benchmarks/calibrate_grpo_logits.py). From 1.0 the
    temperature divides the sliced output in place and the backward holds 4.02-4.03 copies of the completion's logits
    at every micro batch: the estimate's four copies are within 1% of each. Before, out of place, by its parts
    (memory/method.py trl_grpo_out_of_place): 0.19 no entropy, 0.21 a row's entropy chunk, 0.24 and 0.29 128
    positions'; within 1.5% of each, where three copies were off by up to 25% (1 row) and 50% (0.19 at 4 rows)."""
    from pathlib import Path

    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config

    data = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "grpo_logits.json").read_text())
    spec = spec_from_hf_config(data["model"])
    releases = {row["trl"] for row in data["rows"] if "ms_swift" not in row}
    assert {"0.19.1", "0.21.0", "0.24.0", "0.29.0", "1.9.0"} <= releases
    assert {row["ms_swift"] for row in data["rows"] if "ms_swift" in row} >= {"3.12.0", "4.3.0"}
    three_off = []
    for row in data["rows"]:
        generation = Generation(max_completion_length=row["completion"], max_prompt_length=1)
        setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version=row["trl"],
                            generation=generation) if "ms_swift" not in row else \
            MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version=row["ms_swift"],
                        trl_version=row["trl"], generation=generation)
        s = read_settings({"train_micro_batch_size_per_gpu": row["rows"], "bf16": {"enabled": True}}, spec, 1)
        [term] = completion_logits_terms(setup, spec, s)
        assert abs(term.nbytes / row["peak"] - 1) < 0.015, row
        assert ("in place" in term.what) == (not row["trl"].startswith("0."))
        if row["trl"].startswith("0."):
            three_off.append(abs(3 / row["measured_copies"] - 1))
    assert max(three_off) > 0.4  # what a flat three copies missed


def test_ms_swift_grpo_scores_with_trl_s_method_without_the_entropy_unless_it_logs_it():
    """ms-swift up to 4.3 calls TRL's method with compute_entropy=self.compute_entropy (--log_entropy or
    --top_entropy_quantile < 1): measured 2.02 copies at 3 to 8 rows without it (grpo_logits.json's ms-swift rows);
    with it TRL's entropy chunk joins the forward (a row where the TRL beside it is unknown)."""
    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config

    spec = spec_from_hf_config({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 32768})
    s = read_settings({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}}, spec, 1)
    one = 2 * 4 * 256 * 32768

    def copies(**fields: object) -> float:
        setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT,
                            generation=Generation(max_completion_length=256, max_prompt_length=1), **fields)
        [term] = completion_logits_terms(setup, spec, s)
        return term.nbytes / one

    assert copies(trainer_version="3.8.0") == 2
    assert copies(trainer_version="3.8.0", entropy_computed=True) == 2.75  # 2 + 3 x a row of 256 / 1,024
    assert copies(trainer_version="3.12.0", entropy_computed=True, trl_version="0.24.0") == 2.375  # 3 x 128
    assert copies(trainer_version="4.3.0") == 2
    assert copies(trainer_version="4.4.0") == copies() == 4  # the local forward, in place: the whole gradient
    # padding-free: TRL's method up to 3.10, the local forward from 3.11 (in place from 4.1.2)
    assert copies(trainer_version="3.10.3", padding_free=True) == 2
    assert copies(trainer_version="4.1.1", padding_free=True) == 2
    assert copies(trainer_version="4.1.2", padding_free=True) == 4


def test_trl_grpo_out_of_place_parts_by_hand():
    """0.29 at 2 rows of 512: forward 2 x 1024 + 3 x 128 positions, backward max(1024 + 3 x 512, 2 x 1024):
    2,560 positions' logits (2.5 copies); 0.21: the entropy chunk a row, 2 x 1024 + 3 x 512 = 3,584; 0.19: none."""
    from zeroadvisor.memory.method import EntropyChunk, grpo_entropy_chunk, trl_grpo_out_of_place

    def chunk(trl: str) -> EntropyChunk:
        return grpo_entropy_chunk(MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version=trl))

    assert trl_grpo_out_of_place(chunk("0.29.0"), 2, 512)[0] == 2560
    assert trl_grpo_out_of_place(chunk("0.21.0"), 2, 512)[0] == 3584
    assert trl_grpo_out_of_place(chunk("0.19.1"), 8, 128)[0] == 2048
    assert trl_grpo_out_of_place(chunk("0.29.0"), 1, 512)[0] == 2048  # one row: 512 + 3 x 512


@pytest.mark.parametrize(("release", "sequence", "copies"), [("4.1.1", 1, 2.5), ("4.1.2", 1, 2.5), ("4.4.0", 1, 4),
                                                             ("4.5.2", 1, 4), (None, 1, 4), ("4.5.2", 2, 2.5),
                                                             ("3.8.0", 1, 2.5)])
def test_ms_swift_grpo_divides_in_place_on_its_local_forward_without_sequence_parallelism(release, sequence, copies):
    """swift/rlhf_trainers/grpo_trainer.py _get_logps_via_local_forward: ``logits.div_(self.temperature)`` from 4.1.2
    (``/ self.temperature`` at 4.1.1 and in 3.x), its sole non-SP path from 4.4.0 (TRL's out-of-place method for a
    text model before: 2 rows of 512, backward 1,024 + 3 x 512 positions, 2.5 copies); _get_logps_via_sp divides out
    of place. The release unknown: the newest read (4.6)."""
    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config

    spec = spec_from_hf_config({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 32768})
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version=release,
                        generation=Generation(max_completion_length=512, max_prompt_length=1))
    s = read_settings({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}}, spec, 1)
    [term] = completion_logits_terms(setup, spec, s, sequence=sequence)
    assert term.nbytes == int(copies * 2 * 2 * 512 * 32768)
    assert ("swift/rlhf_trainers" in term.source) and (("in place" in term.what) == (copies == 4))


def test_ms_swift_sequence_parallel_scores_each_rank_s_shard_of_the_whole_sequence():
    """_get_logps_via_sp runs the model over the rank's shard of prompt and completion, without logits_to_keep, and
    scores every position (swift/rlhf_trainers/grpo_trainer.py @ v4.5.2): 2 rows of a 6,144-token sequence over SP 2
    are rows of 3,072 positions, not the 512-token completion (out of place, by TRL's parts: the backward's 6,144
    positions and a row's three transients, 15,360 positions at the peak)."""
    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config

    spec = spec_from_hf_config({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 32768})
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version="4.5.2",
                        generation=Generation(max_completion_length=512, max_prompt_length=5632))
    s = read_settings({"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": True}}, spec, 1)
    [term] = completion_logits_terms(setup, spec, s, sequence=2, sequence_length=6144)
    assert term.nbytes == 2 * 32768 * (2 * 3072 + 3 * 3072) and "shard" in term.what
    [local] = completion_logits_terms(setup, spec, s, sequence=1, sequence_length=6144)
    assert local.nbytes == 4 * 2 * 2 * 512 * 32768  # the local forward keeps the completion's logits only


def test_grpo_logits_where_the_trl_beside_axolotl_is_not_known_stay_three_copies():
    """An axolotl release past the ones read pins a TRL the estimate does not know (pinned_trl.axolotl_trl: None):
    neither TRL's in-place count nor its out-of-place parts is assumed for it."""
    from zeroadvisor.config.pinned_trl import AXOLOTL_TRL_PINS
    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config

    newest = AXOLOTL_TRL_PINS[-1][0]
    spec = spec_from_hf_config({"model_type": "qwen2", "hidden_size": 64, "intermediate_size": 172,
                                "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                                "vocab_size": 32768})
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.AXOLOTL,
                        trainer_version=f"{newest.major}.{newest.minor + 1}.0",
                        generation=Generation(max_completion_length=512, max_prompt_length=1))
    s = read_settings({"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": True}}, spec, 1)
    [term] = completion_logits_terms(setup, spec, s)
    assert term.nbytes == 3 * 2 * 4 * 512 * 32768  # the logits, the per-row log-softmax and their gradient

"""LoRA/QLoRA read from the trainer's own files (config/peft_reader.py): LLaMA-Factory's training YAML and ms-swift's
command line become the PEFT inputs where no flag gives them, with their trainers' defaults; a flag wins over the
file's whole setup; a model given as a count is costed in full and said so; bad values are one-line errors."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from test_model_peft import BASE_7B, LLAMA_2_7B
from zeroadvisor.config.launch import parse_launch
from zeroadvisor.config.trainer_errors import TrainerInputError
from zeroadvisor.config.training_args import read_training_args
from zeroadvisor.inputs import run as inputs_run
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request

# Llama-2-7B, r=16 on q_proj and v_proj: 32 layers x 2 modules x 16 x (4096 + 4096), what peft prints
R16_QV = 8_388_608


@pytest.fixture
def project(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_2_7B))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}}')
    return tmp_path


def _build(project, training_args: str, **extra):
    (project / "lf.yaml").write_text(training_args)
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), training_args=str(project / "lf.yaml"),
                      gpus=2, gpu_memory="80GiB", seq_len=1024, **({"model": str(project / "config.json")} | extra))
    return inputs_run.build(request)


def test_llama_factory_lora_is_read_with_its_rank_targets_and_dropout(project):
    inputs = _build(project, "stage: sft\nfinetuning_type: lora\nlora_rank: 16\nlora_target: q_proj,v_proj\n"
                             "lora_dropout: 0.1\n")
    assert inputs.model.trainable_parameters == R16_QV and inputs.model.parameters == BASE_7B
    assert inputs.model.peft == "LoRA r=16 on q_proj, v_proj, lora_dropout 0.1"
    assert any(note.startswith("LoRA r=16 on q_proj, v_proj, lora_dropout 0.1 (peft from finetuning_type in ")
               and note.endswith("read from the trainer's files") for note in inputs.notes)


def test_llama_factory_trains_lora_by_default_on_all_linear_layers(project):
    # FinetuningArguments: finetuning_type "lora", lora_rank 8, lora_target "all", lora_dropout 0.0 (@ v0.9.3)
    inputs = _build(project, "stage: sft\ncutoff_len: 1024\n")
    # all-linear on Llama-2-7B: 32 layers x 8 x (q, k, v, o: 4096 + 4096; gate, up: 4096 + 11008; down 11008 + 4096)
    assert inputs.model.trainable_parameters == 32 * 8 * (4 * 8192 + 3 * 15104)
    note = next(n for n in inputs.notes if "read from the trainer's files" in n)
    assert ("LLaMA-Factory's defaults: finetuning_type lora, lora_rank 8, lora_target all, lora_dropout 0.0"
            in note)
    assert _build(project, "stage: sft\nfinetuning_type: full\n").model.trainable_parameters is None
    assert _build(project, "stage: sft\nfinetuning_type: freeze\n").model.trainable_parameters is None


def test_llama_factory_quantization_bit_makes_it_qlora(project):
    inputs = _build(project, "stage: sft\nquantization_bit: 4\nlora_target: q_proj,v_proj\nlora_rank: 16\n")
    assert inputs.model.peft == "QLoRA r=16 on q_proj, v_proj (4bit double-quant base)"  # double_quantization True
    assert inputs.model.quantized_parameters > 0


def test_a_flag_wins_over_the_files_whole_lora_setup(project):
    inputs = _build(project, "stage: sft\nlora_rank: 64\nlora_target: all\n", peft="lora", lora_r=16,
                    lora_target_modules=["q_proj", "v_proj"])
    assert inputs.model.trainable_parameters == R16_QV
    assert any("the LoRA inputs given are used instead" in note for note in inputs.notes)


def test_a_model_given_as_a_count_is_costed_in_full_and_said_so(project):
    (project / "lf.yaml").write_text("stage: sft\nfinetuning_type: lora\n")
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), training_args=str(project / "lf.yaml"),
                      params="7B", gpus=2, gpu_memory="80GiB", seq_len=1024)
    inputs = inputs_run.build(request)
    assert inputs.model.trainable_parameters is None
    assert any("not counted without a model layout" in note for note in inputs.notes)


def test_swift_reads_its_lora_flags_several_target_names_after_one_flag():
    launch = parse_launch("swift sft --model m --train_type lora --lora_rank 16 --target_modules q_proj v_proj "
                          "--lora_dropout 0.1 --quant_bits 4 --deepspeed zero2")
    peft = launch.training.peft
    assert peft is not None
    assert (peft.method, peft.r, peft.target_modules, peft.dropout, peft.quantization) == (
        "qlora", 16, ("q_proj", "v_proj"), 0.1, "4bit")
    assert dict(peft.origin)["lora_target_modules"] == "--target_modules"
    # the words after the names are still read: --deepspeed's value is ms-swift's own config name
    assert launch.swift_config == "zero2"


@pytest.mark.parametrize(("text", "words"), [
    ("lora_rank: 0\n", "lora_rank"), ("lora_rank: x\n", "lora_rank"), ("lora_dropout: 1.5\n", "lora_dropout"),
    ("quantization_bit: 3\n", "quantization_bit"), ("lora_target: []\n", "lora_target"),
])
def test_a_bad_lora_value_in_the_file_is_a_one_line_error(tmp_path, text, words):
    path = tmp_path / "lf.yaml"
    path.write_text("stage: sft\n" + text)
    with pytest.raises(TrainerInputError, match=words) as error:
        read_training_args(path)
    assert "\n" not in str(error.value)


def test_the_cli_reads_lora_from_the_training_arguments(cli, project):
    (project / "lf.yaml").write_text("stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\n")
    result = cli("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2",
                 "--training-args", project / "lf.yaml", "-f", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["model"]["trainable_parameters"] == R16_QV
    bad = project / "bad.yaml"
    bad.write_text("stage: sft\nlora_dropout: 2\n")
    result = cli("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2",
                 "--training-args", bad)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert "lora_dropout" in result.stderr


def test_a_model_descriptions_peft_block_wins_over_the_trainers_files(project):
    (project / "model.yaml").write_text("hf_config: config.json\npeft: {method: lora, r: 16, target_modules: "
                                        "[q_proj, v_proj]}\n")
    inputs = _build(project, "stage: sft\nlora_rank: 64\nlora_target: all\n", model=str(project / "model.yaml"))
    assert inputs.model.trainable_parameters == R16_QV
    assert any("the model description's peft block is used instead" in note for note in inputs.notes)
    # a description without one takes the file's
    (project / "plain.yaml").write_text("hf_config: config.json\n")
    inputs = _build(project, "stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\n",
                    model=str(project / "plain.yaml"))
    assert inputs.model.trainable_parameters == R16_QV


def test_trl_use_peft_is_lora_on_peft_s_default_modules_with_trl_s_defaults(project):
    # ModelConfig @ trl 1.9: lora_r 16, lora_dropout 0.05, lora_target_modules None -> peft's llama default q/v
    inputs = _build(project, "use_peft: true\nbeta: 0.1\nmax_length: 1024\n", trainer="dpo")
    assert inputs.model.trainable_parameters == R16_QV
    assert inputs.model.peft == "LoRA r=16 on q_proj, v_proj, lora_dropout 0.05"
    note = next(n for n in inputs.notes if "read from the trainer's files" in n)
    assert "peft from use_peft in " in note
    assert "TRL's defaults: lora_r 16, lora_target_modules None (peft's default), lora_dropout 0.05" in note
    assert any("peft's default target modules for llama" in n for n in inputs.model.notes)
    # without use_peft (or with it false) TRL trains in full
    assert _build(project, "beta: 0.1\n", trainer="dpo").model.trainable_parameters is None
    assert _build(project, "use_peft: false\n", trainer="dpo").model.trainable_parameters is None


def test_trl_script_flags_give_rank_several_targets_and_a_4_bit_base():
    launch = parse_launch("accelerate launch trl/scripts/dpo.py --model_name_or_path m --use_peft --lora_r 32 "
                          "--lora_target_modules q_proj k_proj --load_in_4bit --bf16")
    peft = launch.training.peft
    assert peft is not None
    assert (peft.method, peft.r, peft.target_modules, peft.dropout, peft.quantization) == (
        "qlora", 32, ("q_proj", "k_proj"), 0.05, "4bit")
    assert dict(peft.origin)["quantization"] == "--load_in_4bit"
    assert launch.training.get("bf16") is True  # the flag after the names is still read


def test_axolotl_adapter_is_read_with_target_linear_or_names_and_qlora_in_4_bits(project):
    inputs = _build(project, "base_model: x\nadapter: lora\nlora_r: 8\nlora_target_linear: true\n"
                             "sequence_len: 1024\n")
    assert inputs.model.trainable_parameters == 32 * 8 * (4 * 8192 + 3 * 15104)  # all-linear, r 8
    assert inputs.model.peft == "LoRA r=8 on all-linear"
    inputs = _build(project, "base_model: x\nadapter: qlora\nload_in_4bit: true\nlora_r: 16\nlora_dropout: 0.05\n"
                             "lora_target_modules: [q_proj, v_proj]\nsequence_len: 1024\n")
    assert inputs.model.trainable_parameters == R16_QV
    assert inputs.model.peft == "QLoRA r=16 on q_proj, v_proj (4bit double-quant base), lora_dropout 0.05"
    # lora with load_in_8bit: an 8-bit base (loaders/model.py); no adapter: a full fine-tune
    inputs = _build(project, "base_model: x\nadapter: lora\nload_in_8bit: true\nlora_r: 16\n"
                             "lora_target_modules: q_proj\nsequence_len: 1024\n")
    assert inputs.model.peft == "QLoRA r=16 on q_proj (8bit base)"
    assert _build(project, "base_model: x\nsequence_len: 1024\n").model.trainable_parameters is None


@pytest.mark.parametrize(("text", "words"), [
    ("base_model: x\nadapter: lora\nlora_target_linear: true\n", "needs lora_r"),
    ("base_model: x\nadapter: lora\nlora_r: 8\n", "needs lora_target_modules or lora_target_linear"),
    ("base_model: x\nadapter: qlora\nlora_r: 8\nlora_target_linear: true\n", "needs load_in_4bit"),
    ("base_model: x\nadapter: lora\nlora_r: 8\nlora_target_linear: maybe\n", "lora_target_linear"),
    ("use_peft: true\nload_in_4bit: true\nload_in_8bit: true\n", "at the same time"),
    ("use_peft: true\nlora_r: 0\n", "lora_r"),
    ("use_peft: perhaps\n", "use_peft"),
])
def test_a_bad_trl_or_axolotl_lora_setting_is_a_one_line_error(tmp_path, text, words):
    path = tmp_path / "args.yaml"
    path.write_text(text)
    with pytest.raises(TrainerInputError, match=words) as error:
        read_training_args(path)
    assert "\n" not in str(error.value)


def test_peft_s_default_modules_for_a_model_type_it_has_none_for_is_a_one_line_error(cli, project):
    config = dict(LLAMA_2_7B, model_type="phi3", architectures=["Phi3ForCausalLM"])
    (project / "config.json").write_text(json.dumps(config))
    (project / "trl.yaml").write_text("use_peft: true\n")
    result = cli("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2",
                 "--training-args", project / "trl.yaml")
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert "no default LoRA target modules for model type 'phi3'" in result.stderr


def test_double_quantization_is_read_with_each_trainers_default(project):
    # LLaMA-Factory double_quantization True by default; false turns it off: the 4-bit block constants then stay
    # fp32 (4 B per 64 weights) instead of 1 B per 64 plus fp32 per 256 blocks (model/peft.py quantized_bytes)
    on = _build(project, "stage: sft\nquantization_bit: 4\nlora_target: q_proj\n").model
    off = _build(project, "stage: sft\nquantization_bit: 4\ndouble_quantization: false\nlora_target: q_proj\n").model
    assert on.peft.endswith("(4bit double-quant base)") and off.peft.endswith("(4bit base)")
    assert on.quantized_parameters == off.quantized_parameters
    per_64 = off.quantized_parameters // 64
    assert off.quantized_bytes - on.quantized_bytes == pytest.approx(per_64 * 3 - per_64 // 256 * 4, rel=1e-3)
    # an 8-bit base has no double quantization
    assert _build(project, "stage: sft\nquantization_bit: 8\nlora_target: q_proj\n").model.peft.endswith(
        "(8bit base)")
    # TRL: use_bnb_nested_quant, False by default
    assert _build(project, "use_peft: true\nload_in_4bit: true\n").model.peft.endswith("(4bit base), lora_dropout 0.05")
    assert "double-quant" in _build(project, "use_peft: true\nload_in_4bit: true\nuse_bnb_nested_quant: true\n"
                                    ).model.peft
    # ms-swift: --bnb_4bit_use_double_quant, True by default
    launch = parse_launch("swift sft --model m --quant_bits 4 --bnb_4bit_use_double_quant false")
    assert launch.training.peft is not None and launch.training.peft.double_quant is False
    assert parse_launch("swift sft --model m --quant_bits 4").training.peft.double_quant is True
    # the flag (the Python API's keyword) over the file
    flagged = _build(project, "stage: sft\n", peft="qlora", lora_target_modules=["q_proj"], double_quant=True)
    assert flagged.model.peft.endswith("(4bit double-quant base)")


def test_openrlhf_lora_flags_in_both_spellings():
    """openrlhf/models/actor.py: a LoraConfig where --lora_rank > 0 (target_modules all-linear and dropout 0 by
    default; --load_in_4bit NF4 with double quantization); the 0.10+ dotted flags are the same keys."""
    launch = parse_launch("deepspeed --module openrlhf.cli.train_dpo --pretrain m --lora_rank 16 --target_modules "
                          "q_proj v_proj --load_in_4bit --bf16 --zero_stage 2")
    peft = launch.training.peft
    assert peft is not None
    assert (peft.method, peft.r, peft.target_modules, peft.dropout, peft.quantization, peft.double_quant) == (
        "qlora", 16, ("q_proj", "v_proj"), 0.0, "4bit", True)
    dotted = parse_launch("deepspeed --module openrlhf.cli.train_dpo --pretrain m --ds.lora.rank 8 "
                          "--ds.lora.dropout 0.1 --bf16").training.peft
    assert dotted is not None and (dotted.r, dotted.target_modules, dotted.dropout) == (8, "all-linear", 0.1)
    assert "OpenRLHF's defaults: --target_modules all-linear" in dotted.words()
    for off in ("--lora_rank 0", ""):
        launch = parse_launch(f"deepspeed --module openrlhf.cli.train_sft --pretrain m {off} --bf16")
        assert launch.training.peft is None
    with pytest.raises(TrainerInputError, match="lora_rank"):
        parse_launch("deepspeed --module openrlhf.cli.train_dpo --pretrain m --lora_rank -4")


# Llama-2-7B's embed_tokens and lm_head (untied): 32000 x 4096 each; peft's modules_to_save trains a copy of each
EMBED_COPY = 32_000 * 4_096


@pytest.mark.parametrize(("text", "trainer"), [
    # LLaMA-Factory: additional_target, comma-separated (hparams/finetuning_args.py; model/adapter.py)
    ("stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\nadditional_target: embed_tokens,lm_head\n", None),
    # TRL's ModelConfig: lora_modules_to_save (utils.py get_peft_config)
    ("use_peft: true\nlora_target_modules: [q_proj, v_proj]\nlora_modules_to_save: [embed_tokens, lm_head]\n",
     "dpo"),
    # axolotl: lora_modules_to_save (loaders/adapter.py)
    (("base_model: x\nadapter: lora\nlora_r: 16\nlora_target_modules: [q_proj, v_proj]\n"
      "lora_modules_to_save: [embed_tokens, lm_head]\n"), None),
])
def test_modules_to_save_from_each_trainers_file_train_a_copy_of_each(project, text, trainer):
    inputs = _build(project, text, **({"trainer": trainer} if trainer else {}))
    assert inputs.model.trainable_parameters == R16_QV + 2 * EMBED_COPY
    assert inputs.model.head_gets_gradient and inputs.model.peft_head_saved
    assert "modules_to_save embed_tokens, lm_head" in inputs.model.peft
    note = next(n for n in inputs.notes if "read from the trainer's files" in n)
    assert "lora_modules_to_save from " in note


def test_swift_modules_to_save_after_one_flag_and_its_empty_default():
    launch = parse_launch("swift sft --model m --train_type lora --lora_rank 16 --target_modules q_proj v_proj "
                          "--modules_to_save embed_tokens lm_head --deepspeed zero2")
    peft = launch.training.peft
    assert peft is not None and peft.modules_to_save == ("embed_tokens", "lm_head")
    assert peft.inputs()["lora_modules_to_save"] == ["embed_tokens", "lm_head"]
    plain = parse_launch("swift sft --model m --train_type lora --deepspeed zero2").training.peft
    assert plain is not None and plain.modules_to_save == () and plain.inputs()["lora_modules_to_save"] is None


def test_the_modules_to_save_flag_and_an_entry_that_matches_nothing(cli, project):
    args = ("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2", "--peft", "lora",
            "--lora-r", "16", "--lora-target-modules", "q_proj,v_proj")
    plain = cli(*args, "-f", "json")
    saved = cli(*args, "--lora-modules-to-save", "lm_head", "-f", "json")
    assert plain.returncode == saved.returncode == 0, saved.stderr
    assert json.loads(saved.stdout)["model"]["trainable_parameters"] == R16_QV + EMBED_COPY
    # the head's trainable copy at stage 0 (the config's): its 16-bit weights and gradient, fp32 master and Adam
    # moments join the adapters', 16 bytes per element on each GPU
    peak = {name: next(s for s in json.loads(run.stdout)["stages"] if s["configured"])["peak_gpu"]
            for name, run in (("plain", plain), ("saved", saved))}
    assert peak["saved"] - peak["plain"] >= 16 * EMBED_COPY
    bad = cli(*args, "--lora-modules-to-save", "no_such_module")
    assert bad.returncode == 2 and bad.stdout == "" and bad.stderr.count("\n") == 1
    assert "no_such_module" in bad.stderr


def test_a_saved_head_gets_its_weight_gradient_in_liger_s_fused_loss(cli, project):
    """Liger's fused linear cross-entropy makes the head's weight gradient in the forward when the head trains:
    under PEFT only when modules_to_save holds a trainable copy of it (memory/liger.py)."""
    args = ("estimate", project / "ds.json", "--model", project / "config.json", "--gpus", "2", "--peft", "lora",
            "--liger-kernel", "--seq-len", "1024", "-f", "json")
    frozen, saved = cli(*args), cli(*args, "--lora-modules-to-save", "lm_head")
    assert frozen.returncode == saved.returncode == 0, saved.stderr
    assert "frozen head: no weight gradient" in frozen.stdout and "the head's gradient" not in frozen.stdout
    assert f"the head's gradient {2 * EMBED_COPY:,} B made in the forward" in saved.stdout


def test_swift_s_words_all_embedding_and_all_norm_train_a_copy_of_every_embedding_and_norm(project):
    """ms-swift replaces all-embedding and all-norm with every nn.Embedding and every LayerNorm/RMSNorm it finds
    (swift/pipelines/train/tuner.py get_modules_to_save) before peft sees modules_to_save: on Llama-2-7B the
    token table and the 65 RMSNorms (2 per layer and the final one) of 4096 weights each."""
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), model=str(project / "config.json"),
                      launch=("swift sft --model m --train_type lora --lora_rank 16 --target_modules q_proj v_proj "
                              "--modules_to_save all-embedding all-norm --deepspeed zero2"),
                      gpus=2, gpu_memory="80GiB", seq_len=1024)
    model = inputs_run.build(request).model
    assert model.trainable_parameters == R16_QV + EMBED_COPY + 65 * 4096
    assert not model.peft_head_saved  # lm_head is a Linear, not an embedding: only its frozen original
    assert "modules_to_save all-embedding, all-norm" in model.peft


@pytest.mark.parametrize(("extra", "saved"), [
    ("resize_vocab: true\n", True),
    ("add_special_tokens: <think>,</think>\n", True),  # patch_tokenizer turns resize_vocab on for a new token
    ("resize_vocab: false\n", False),
    ("resize_vocab: 'false'\nadd_tokens: <x>\n", True),  # tokens to add turn it on whatever the key says
    ("resize_vocab: true\nadditional_target: lm_head\n", False),  # the file's own list wins
])
def test_llama_factory_resize_vocab_trains_the_input_and_output_embeddings(project, extra, saved):
    """LLaMA-Factory model/adapter.py init_adapter: with resize_vocab and no additional_target, the names of
    get_input_embeddings() and get_output_embeddings() become modules_to_save (Llama-2-7B: embed_tokens and
    lm_head, 32000 x 4096 each)."""
    inputs = _build(project, "stage: sft\nlora_rank: 16\nlora_target: q_proj,v_proj\n" + extra)
    if saved:
        assert inputs.model.trainable_parameters == R16_QV + 2 * EMBED_COPY
        assert inputs.model.peft_head_saved
        note = next(n for n in inputs.notes if "read from the trainer's files" in n)
        assert "lora_modules_to_save from " in note and "input-embeddings, output-embeddings" in note
        assert ("taken as new" in note) == ("add_" in extra)
    else:
        head_only = "additional_target" in extra
        assert inputs.model.trainable_parameters == R16_QV + (EMBED_COPY if head_only else 0)


@pytest.mark.parametrize(("targets", "adapters"), [
    ("all-embedding", 16 * (32_000 + 4_096)),
    ("all-linear all-embedding", 32 * (4 * 16 * (4096 + 4096) + 3 * 16 * (4096 + 11008)) + 16 * (32_000 + 4_096)),
])
def test_swift_s_target_word_all_embedding_puts_lora_on_the_embeddings(project, targets, adapters):
    """ms-swift's get_target_modules adds every nn.Embedding to target_modules (find_embedding): peft's LoRA
    Embedding holds lora_embedding_A (r x num_embeddings) and lora_embedding_B (embedding_dim x r)."""
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), model=str(project / "config.json"),
                      launch=f"swift sft --model m --train_type lora --lora_rank 16 --target_modules {targets} "
                             "--deepspeed zero2", gpus=2, gpu_memory="80GiB", seq_len=1024)
    model = inputs_run.build(request).model
    assert model.trainable_parameters == adapters
    assert "all-embedding" in model.peft

"""The transformers release an MoE model is counted as (model/transformers_release.py, families.py MoeV4).

transformers 4.x builds an MoE layer's routed experts as an nn.ModuleList of per-expert MLPs of nn.Linear
(modeling_mixtral.py / modeling_qwen2_moe.py at v4.41.2 and v4.57.1); 5.x as one fused *Experts module of 3-D
parameters. The expected numbers below are computed by hand from the module shapes of those files (the oracle
tests cannot build a 4.x model: the installed transformers is 5.24); each sum is written out. The same tiny
configs were checked once against transformers 4.57.1 built on the meta device with peft 0.21.2 (parameters,
largest module, Linear weights but lm_head, all-linear trainable count: equal for all five families).
"""

from __future__ import annotations

import json

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.model.description import load_model
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.peft import PeftSettings, apply
from zeroadvisor.model.transformers_release import MODELLED, ReleaseError, fused_experts, resolve

# A tiny Qwen2-MoE: h 64, 4 heads of 16 (q/o 64x64), 2 kv heads (k/v 64 -> 32), 4 routed experts of width 32,
# a shared expert of width 48 with its gate, 2 layers, vocab 128, untied head.
QWEN2_MOE = {"model_type": "qwen2_moe", "architectures": ["Qwen2MoeForCausalLM"], "hidden_size": 64,
             "intermediate_size": 96, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
             "num_experts": 4, "num_experts_per_tok": 2, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "vocab_size": 128, "tie_word_embeddings": False}
ATTENTION = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64  # q, k, v, o weights
SHARED = 3 * 64 * 48 + 64  # shared_expert gate/up/down + shared_expert_gate
ROUTER = 64 * 4  # gate: nn.Linear(h, E) under 4.x
EXPERTS = 4 * 3 * 64 * 32  # 4 experts x (gate_proj, up_proj, down_proj)


def test_resolve_a_release_a_line_and_a_range():
    assert resolve("4.41.2") == "4.41.2" and resolve("4.41") == "4.41"
    assert resolve(">=4.41.2,<=4.43.4") == "4.43.4"  # pip installs the newest the range admits
    assert resolve(">=4.41") == "5.24"  # a range open upwards admits transformers 5: the newest read
    assert resolve(">5.24") == "5.24" and resolve(">=6") == "5.24"  # newer than read: counted as the newest read
    assert not fused_experts("4.57.1") and fused_experts("5.0") and fused_experts(None)
    with pytest.raises(ReleaseError, match="not a transformers release"):
        resolve("four")
    with pytest.raises(ReleaseError, match="admits no transformers release"):
        resolve(">=4.50,<4.40")


@pytest.mark.parametrize("text", ["", "   ", ","])
def test_an_empty_request_names_no_release(text):
    # an empty specifier set admits every release: read as one it would count the modelled 5.24 as "given"
    with pytest.raises(ReleaseError, match="not a transformers release"):
        resolve(text)


def test_a_long_request_is_cut_in_the_message():
    with pytest.raises(ReleaseError) as caught:
        resolve("x" * 5000)
    assert len(str(caught.value)) < 200 and "5,000 characters" in str(caught.value)


def test_cli_empty_release_is_one_line(project, cli):
    bad = cli("estimate", "ds.json", "--model", "config.json", "--gpus", "1", "--transformers-version", " ")
    assert bad.returncode == 2 and "--transformers-version" in bad.stderr and "Traceback" not in bad.stderr


def test_qwen2_moe_qlora_quantizes_the_expert_linears_only_under_4x():
    qlora = PeftSettings(method="qlora")
    v5 = spec_from_hf_config(QWEN2_MOE)
    v4 = spec_from_hf_config(QWEN2_MOE, transformers="4.41.2")
    assert v4.parameters == v5.parameters  # the same tensors, laid out differently
    q5 = apply(v5, v5.layout or (), qlora)
    q4 = apply(v4, v4.layout or (), qlora)
    # 5.x: the fused experts and the router are no nn.Linear: attention and shared expert only, per layer
    assert q5.quantized_parameters == 2 * (ATTENTION + SHARED)
    # 4.x: the router and every expert's three Linears are quantized as well
    assert q4.quantized_parameters == 2 * (ATTENTION + SHARED + ROUTER + EXPERTS)


def test_qwen2_moe_lora_all_linear_adapts_every_expert_under_4x():
    r = 8

    def lora(fan_in: int, fan_out: int) -> int:
        return r * (fan_in + fan_out)

    attention = lora(64, 64) + 2 * lora(64, 32) + lora(64, 64)
    shared = 2 * lora(64, 48) + lora(48, 64) + lora(64, 1)
    experts = 4 * (2 * lora(64, 32) + lora(32, 64)) + lora(64, 4)  # + the router Linear
    v4 = spec_from_hf_config(QWEN2_MOE, transformers="4.45")
    assert apply(v4, v4.layout or (), PeftSettings(r=r)).trainable_parameters == 2 * (attention + shared + experts)
    # 5.x: qwen2_moe is not in peft's MoE conversion table: the fused experts take no LoRA
    v5 = spec_from_hf_config(QWEN2_MOE)
    assert apply(v5, v5.layout or (), PeftSettings(r=r)).trainable_parameters == 2 * (attention + shared)


def test_the_largest_module_is_one_expert_projection_under_4x():
    v5 = spec_from_hf_config(QWEN2_MOE)
    v4 = spec_from_hf_config(QWEN2_MOE, transformers="4.41.2")
    assert v5.largest_layer_parameters == EXPERTS  # one fused module: what ZeRO-3 gathers at once
    assert v4.largest_layer_parameters == 128 * 64  # the embedding (and lm_head); an expert Linear is 64*32
    assert v4.notes[0].startswith("counted Qwen2MoeForCausalLM as transformers 4.41.2 builds it")
    assert "transformers 4.x" in v4.notes[-1] and "transformers 5" in v5.notes[-1]


def test_mixtral_4x_names_w1_w3_w2_and_a_linear_router():
    config = {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 96, "num_local_experts": 4,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 128}
    v4 = spec_from_hf_config(config, transformers="4.40")
    names = {m.name.rpartition(".")[2] for m in v4.layout or () if m.linear is not None}
    assert {"w1", "w2", "w3", "gate"} <= names
    # target_modules by their 4.x names adapt the expert Linears (5.x converts them to the fused parameters)
    lora = apply(v4, v4.layout or (), PeftSettings(r=8, target_modules=("w1", "w2", "w3")))
    assert lora.trainable_parameters == 2 * 4 * 8 * (3 * (64 + 96))
    q = apply(v4, v4.layout or (), PeftSettings(method="qlora"))
    attention = 64 * 64 + 2 * 64 * 32 + 64 * 64
    assert q.quantized_parameters == 2 * (attention + 64 * 4 + 4 * 3 * 64 * 96)


def test_deepseek_v3_4x_router_is_no_linear():
    config = {"model_type": "deepseek_v3", "hidden_size": 64, "intermediate_size": 96, "moe_intermediate_size": 32,
              "n_routed_experts": 4, "num_hidden_layers": 2, "first_k_dense_replace": 1, "num_attention_heads": 4,
              "vocab_size": 128, "kv_lora_rank": 16, "q_lora_rank": 24, "qk_nope_head_dim": 8,
              "qk_rope_head_dim": 8, "v_head_dim": 8}
    v4 = spec_from_hf_config(config, transformers="4.57.1")
    gate = [m for m in v4.layout or () if m.name.endswith("mlp.gate")]
    assert gate and gate[0].linear is None and gate[0].own == 4 * 64  # DeepseekV3TopkRouter.weight (E, h)
    assert v4.parameters == spec_from_hf_config(config).parameters


def test_dense_models_do_not_depend_on_the_release():
    llama = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
             "num_attention_heads": 4, "vocab_size": 128}
    spec = spec_from_hf_config(llama, transformers="4.41.2")
    assert not spec.release_dependent
    assert spec.notes[0].startswith(f"counted LlamaForCausalLM as transformers {MODELLED} builds it (4.41.2 given")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()  # the repository root: the pin search stops here
    (tmp_path / "config.json").write_text(json.dumps(QWEN2_MOE))
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 2}}))
    return tmp_path


def _assumed(result: zeroadvisor.EstimateResult) -> list[str]:
    return [a.name for a in result.estimate.assumed]


def test_release_assumed_for_moe_then_given_by_keyword_field_and_pin(project):
    run = {"gpus": 1, "gpu_memory": "80GiB", "seq_len": 128, "peft": "qlora"}
    assumed = zeroadvisor.estimate("ds.json", model="config.json", **run)
    (line,) = [a for a in assumed.estimate.assumed if a.name == "transformers_version"]
    assert line.value == MODELLED and line.flag == "--transformers-version"
    assert line.brief() == f"--transformers-version {MODELLED}"
    given = zeroadvisor.estimate("ds.json", model="config.json", transformers_version="4.41.2", **run)
    assert "transformers_version" not in _assumed(given)
    assert given.estimate.model.quantized_parameters > assumed.estimate.model.quantized_parameters
    # the model description's field
    (project / "model.yaml").write_text("hf_config: config.json\ntransformers_version: '4.41'\n")
    described = zeroadvisor.estimate("ds.json", model="model.yaml", **run)
    assert described.estimate.model.quantized_parameters == given.estimate.model.quantized_parameters
    # the pin beside the config, read as DeepSpeed's is
    (project / "requirements.txt").write_text("deepspeed==0.14.0\ntransformers>=4.41.2,<=4.43.4\n")
    pinned = zeroadvisor.estimate("ds.json", model="config.json", **run)
    assert "transformers_version" not in _assumed(pinned)
    assert pinned.estimate.model.quantized_parameters == given.estimate.model.quantized_parameters
    assert pinned.estimate.model.notes[0].startswith("counted Qwen2MoeForCausalLM as transformers 4.43.4")


def test_cli_flag_and_bad_release(project, cli):
    out = cli("estimate", "ds.json", "--model", "config.json", "--gpus", "1", "--gpu-memory", "80GiB",
              "--seq-len", "128")
    assert f"--transformers-version {MODELLED}" in out.stdout
    out = cli("estimate", "ds.json", "--model", "config.json", "--gpus", "1", "--gpu-memory", "80GiB",
              "--seq-len", "128", "--transformers-version", "4.41.2")
    assert out.returncode == 0 and "--transformers-version" not in out.stdout
    bad = cli("estimate", "ds.json", "--model", "config.json", "--gpus", "1", "--transformers-version", "four")
    assert bad.returncode == 2 and "--transformers-version 'four' is not a transformers release" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_description_field_error_is_located(project):
    (project / "model.yaml").write_text("hf_config: config.json\ntransformers_version: '>=9,<8'\n")
    with pytest.raises(ModelError, match=r"model.yaml.*transformers_version"):
        load_model(str(project / "model.yaml"))


def test_project_configuration_key(project, cli):
    run = ("estimate", "ds.json", "--model", "config.json", "--gpus", "1", "--gpu-memory", "80GiB", "--seq-len", "128",
           "--peft", "qlora", "--format", "json")
    (project / ".zeroadvisor.toml").write_text('[training]\ntransformers-version = "4.41.2"\n')
    configured = json.loads(cli(*run).stdout)
    flagged = json.loads(cli(*run, "--transformers-version", "4.41.2").stdout)
    assert configured["model"]["notes"][0] == flagged["model"]["notes"][0]
    assert "transformers 4.41.2 builds it" in configured["model"]["notes"][0]
    (project / ".zeroadvisor.toml").write_text('[training]\ntransformers-version = "4.x"\n')
    bad = cli(*run)
    assert bad.returncode == 2 and ".zeroadvisor.toml" in bad.stderr and "transformers-version" in bad.stderr


def test_preflight_reads_the_jobs_installed_transformers(project, monkeypatch):
    from importlib import metadata

    from packaging.version import Version

    from zeroadvisor.inputs import environment

    installed = Version(metadata.version("transformers")).base_version
    assert environment.read_transformers_version() == installed
    monkeypatch.setenv("WORLD_SIZE", "1")
    run = {"gpu_memory": "80GiB", "seq_len": 128, "peft": "qlora", "warn_only": True}
    job = zeroadvisor.preflight("ds.json", "config.json", **run)
    assert job.readings.transformers_version == installed
    assert "transformers_version" not in [a.name for a in job.report.result.estimate.assumed]
    assert job.report.result.estimate.model.notes[0].startswith(
        f"counted Qwen2MoeForCausalLM as transformers {installed} builds it")
    # a job on transformers 4.x (the reader replaced, as the other readers are in tests/test_preflight.py)
    monkeypatch.setattr(environment, "read_transformers_version", lambda: "4.41.2")
    v4 = zeroadvisor.preflight("ds.json", "config.json", **run)
    assert v4.report.result.estimate.model.quantized_parameters == 2 * (ATTENTION + SHARED + ROUTER + EXPERTS)


def test_a_dense_gqa_model_reads_the_pin_for_its_attention_activations(project):
    # Llama-3-like GQA (32 query heads, 8 K/V heads): SDPA before transformers 4.54 repeats K/V to every query head,
    # so the pin beside the config is read for a dense model too (never assumed: the layout is the same)
    gqa = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 4, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 128256}
    (project / "dense.json").write_text(json.dumps(gqa))
    run = {"gpus": 1, "gpu_memory": "80GiB", "seq_len": 2048}
    unpinned = zeroadvisor.estimate("ds.json", model="dense.json", **run)
    assert "transformers_version" not in _assumed(unpinned)
    (project / "requirements.txt").write_text("transformers==4.46.3\n")
    pinned = zeroadvisor.estimate("ds.json", model="dense.json", **run)
    assert "transformers_version" not in _assumed(pinned)
    assert any("transformers 4.46.3's SDPA repeats K/V" in n for n in pinned.estimate.assumptions)
    # two 3072-wide K/V tensors more per token in the layers the activations keep
    assert pinned.estimate.stages[0].per_gpu["activations"] > unpinned.estimate.stages[0].per_gpu["activations"]

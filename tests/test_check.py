"""``check`` on realistic public models and clusters (issue #4's scenarios).

Model shapes are the published Hugging Face config.json values of each checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.config.source import parse
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.inputs.model import model_and_shape
from zeroadvisor.memory.cluster import Cluster

# meta-llama/Llama-2-{7b,13b,70b}-hf, facebook/opt-1.3b, mistralai/Mixtral-8x7B-v0.1 config.json
LLAMA2_7B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
             "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "vocab_size": 32000, "tie_word_embeddings": False}
LLAMA2_13B = {**LLAMA2_7B, "hidden_size": 5120, "intermediate_size": 13824, "num_hidden_layers": 40,
              "num_attention_heads": 40, "num_key_value_heads": 40}
LLAMA2_70B = {**LLAMA2_7B, "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
              "num_attention_heads": 64, "num_key_value_heads": 8}
OPT_1_3B = {"architectures": ["OPTForCausalLM"], "model_type": "opt", "hidden_size": 2048, "ffn_dim": 8192,
            "num_hidden_layers": 24, "num_attention_heads": 32, "vocab_size": 50272, "max_position_embeddings": 2048,
            "word_embed_proj_dim": 2048, "do_layer_norm_before": True, "enable_bias": True,
            "tie_word_embeddings": True}
MIXTRAL = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
           "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "vocab_size": 32000, "num_local_experts": 8, "num_experts_per_tok": 2, "tie_word_embeddings": False}

GB = 10**9


def model(tmp_path: Path, hf: dict, **shape) -> tuple:
    (tmp_path / "config.json").write_text(json.dumps(hf))
    (tmp_path / "model.json").write_text(json.dumps({"hf_config": "config.json", **shape}))
    return model_and_shape(str(tmp_path / "model.json"))


def check(config: dict, spec_shape, gpus=8, gpu="A100-SXM4-80GB", **kw):
    spec, shape = spec_shape
    kw.setdefault("gpu_memory", resolve_gpu(gpu).memory_bytes)
    options = CheckOptions(model=spec, shape=shape, cluster=Cluster(gpus=gpus, **kw))
    return check_document(parse(json.dumps(config, indent=2), "ds_config.json"), options)


def names(result) -> set[str]:
    return {f.name for f in result.findings}


def advice(result) -> list:
    return [f for f in result.findings if f.code.startswith("ZA8")]


BF16 = {"bf16": {"enabled": True}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}


def test_7b_at_stage3_on_8x80gb_a_lower_stage_fits(tmp_path):
    m = model(tmp_path, LLAMA2_7B, sequence_length=4096, activation_checkpointing="full")
    result = check({**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}, m)
    (finding,) = [f for f in result.findings if f.name == "lower-stage-fits"]
    assert finding.severity.value == "warning"
    assert finding.fix["zero_optimization"]["stage"] in (0, 1, 2)
    assert "1.5x" in finding.message and " GiB" in finding.message  # GiB by default, as nvidia-smi prints
    assert not [f for f in result.findings if f.severity.value == "error"]


def test_long_sequence_without_checkpointing_activations_dominate(tmp_path):
    m = model(tmp_path, LLAMA2_7B, sequence_length=16384, activation_checkpointing="none", flash_attention=True)
    result = check({**BF16, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                    "zero_optimization": {"stage": 3}}, m)
    (finding,) = [f for f in result.findings if f.name == "activations-dominate"]
    configured = result.estimate.configured
    assert configured.per_gpu["activations"] > configured.per_gpu["model_states"]
    assert "largest micro batch" in finding.message or "micro batch 1 does not fit" in finding.message
    assert "full checkpointing saves" in finding.message


def test_70b_at_stage2_fits_only_at_stage3_with_cpu_optimizer_offload(tmp_path):
    m = model(tmp_path, LLAMA2_70B, sequence_length=4096, activation_checkpointing="full")
    result = check({**BF16, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 8,
                    "zero_optimization": {"stage": 2}}, m, cpu_memory=2 * 10**12)
    (finding,) = [f for f in result.findings if f.name == "does-not-fit"]
    assert finding.severity.value == "error"
    assert finding.fix == {"zero_optimization": {"stage": 3,
                                                 "offload_optimizer": {"device": "cpu", "pin_memory": True}}}
    # and it really is the first option that fits: ZeRO-3 alone does not.
    assert result.estimate.stage(3).fits is False
    assert result.estimate.stage(3, "cpu").fits is True


def test_small_model_with_full_offload_needs_none(tmp_path):
    m = model(tmp_path, OPT_1_3B, sequence_length=2048, activation_checkpointing="full")
    result = check({**BF16, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}, m)
    (finding,) = [f for f in result.findings if f.name == "offload-not-needed"]
    zero = finding.fix["zero_optimization"]
    assert zero["offload_optimizer"] is None and zero["offload_param"] is None
    # every rule that applies is named (issue 10 item 5): ZeRO-0/1/2 fit too; one combined fix serves both
    (lower,) = [f for f in result.findings if f.name == "lower-stage-fits"]
    assert lower.code == "ZA802" and lower.fix == finding.fix
    assert finding.fix["zero_optimization"]["stage"] in (0, 1, 2)


def test_70b_offloaded_to_a_host_too_small(tmp_path):
    m = model(tmp_path, LLAMA2_70B, sequence_length=4096, activation_checkpointing="full")
    result = check({**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {
        "stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}}, m,
        cpu_memory=512 * 10**9)
    (finding,) = [f for f in result.findings if f.name == "host-memory-insufficient"]
    assert finding.severity.value == "error"
    # 70B params with fp32 master + Adam m, v on the host alone are 12 B/param = 827 GB > 512 GB.
    assert result.estimate.configured.per_node_cpu > 827 * GB


def test_correct_setup_gets_no_advice(tmp_path):
    # every input given (the load inputs too): nothing assumed, so no assumed-input finding either
    m = model(tmp_path, LLAMA2_13B, sequence_length=4096, activation_checkpointing="full", load_dtype="bf16",
              meta_load=False)
    config = {**BF16, "train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
              "gradient_clipping": 1.0, "zero_optimization": {"stage": 2, "reduce_bucket_size": 26214400,
                                                              "allgather_bucket_size": 26214400}}
    result = check(config, m, gpus=8, gpu="A100-SXM4-80GB")
    assert result.estimate.configured.fits
    assert result.findings == []


def test_mixtral_does_not_fit_on_a10g_and_nothing_fits(tmp_path):
    m = model(tmp_path, MIXTRAL, sequence_length=4096, activation_checkpointing="full")
    result = check({**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}, m,
                   gpus=2, gpu="A10G", cpu_memory=128 * 10**9)
    (finding,) = [f for f in result.findings if f.name == "does-not-fit"]
    # the closest option fits the GPU; what binds is the host RAM, and the message says so (not "0.00 GB more")
    assert "Nothing fits" in finding.message and "host RAM per node binds" in finding.message
    assert "GPU memory binds" not in finding.message and "0.00 GB more" not in finding.message
    # the smallest cluster change that fits: more host RAM per node (usable = given less the 10% headroom)
    [cluster] = [a.values for a in finding.actions if a.kind == "cluster"]
    assert cluster["cpu_memory"] > 128 * GB and finding.fix is not None
    grown = check({**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}, m, gpus=2,
                  gpu="A10G", cpu_memory=cluster["cpu_memory"])
    from zeroadvisor.config import merge_patch as mp
    fixed = check(mp.apply({**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}},
                           finding.fix), m, gpus=2, gpu="A10G", cpu_memory=cluster["cpu_memory"])
    assert "does-not-fit" in names(grown) and not {"does-not-fit", "host-memory-insufficient"} & names(fixed)


def test_headroom_changes_the_verdict(tmp_path):
    m = model(tmp_path, LLAMA2_7B, sequence_length=4096, activation_checkpointing="full")
    config = {**BF16, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
    configured = check(config, m).estimate.configured
    peak = configured.peak_gpu
    gpu = resolve_gpu("A100-SXM4-80GB").memory_bytes
    # headroom that leaves exactly the expected peak's bound: "fits" keeps the bound out of the headroom
    edge = (gpu - configured.peak_gpu_bound) / gpu
    # the headroom is the one margin: it turns "fits" into "tight", never into "does not fit"
    assert check(config, m, headroom=max(edge - 0.01, 0)).estimate.configured.verdict == "fits"
    tight = check(config, m, headroom=min(edge + 0.01, 0.99))
    assert tight.estimate.configured.verdict == "tight" and tight.estimate.configured.fits
    assert [f.name for f in tight.findings if f.name in ("tight-fit", "does-not-fit")] == ["tight-fit"]
    # a card smaller than the peak does not fit whatever the headroom
    small = check(config, m, gpu_memory=peak - 1, headroom=0)
    assert small.estimate.configured.verdict == "does-not-fit"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_7B))
    (tmp_path / "model.yaml").write_text("hf_config: config.json\nsequence_length: 4096\n"
                                         "activation_checkpointing: full\n")
    text = ('{\n  // stage 3 everywhere, to be safe\n  "train_micro_batch_size_per_gpu": 1,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "offload_optimizer": {"device": "cpu"},\n    "overlap_comm": true\n  }\n}\n')
    (tmp_path / "ds.json").write_text(text)
    return tmp_path


def test_cli_suggest_prints_a_diff_and_changes_nothing(cli, files):
    before = (files / "ds.json").read_text()
    result = cli("check", str(files / "ds.json"), "--model", str(files / "model.yaml"), "--gpus", "8",
                 "--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--suggest", cwd=files)
    assert result.returncode == 0, result.stderr  # warnings only
    # the optimizer offload is not needed (ZeRO-0/1/2 and ZeRO-3 fit without it): the diff drops it
    assert '-    "offload_optimizer": {"device": "cpu"},' in result.stdout
    assert (files / "ds.json").read_text() == before


def test_cli_fix_writes_atomically_and_keeps_comments(cli, files):
    result = cli("check", "ds.json", "--model", "model.yaml", "--gpus", "8", "--gpu", "A100-SXM4-80GB",
                 "--cpu-memory", "1TB", "--fix", cwd=files)
    assert result.returncode == 0, result.stderr
    after = (files / "ds.json").read_text()
    assert "// stage 3 everywhere, to be safe" in after and '"overlap_comm": true' in after
    assert "offload_optimizer" not in json.loads("\n".join(line for line in after.splitlines() if "//" not in line))[
        "zero_optimization"]
    assert not list(files.glob(".zeroadvisor-*"))  # no temporary left behind
    again = cli("check", "ds.json", "--model", "model.yaml", "--gpus", "8", "--gpu", "A100-SXM4-80GB",
                "--format", "json", cwd=files)
    assert not [f for f in json.loads(again.stdout)["findings"] if f["name"] == "offload-not-needed" or f.get("fix")]


def test_cli_json_contract_has_findings_and_estimate(cli, files):
    result = cli("check", "ds.json", "--model", "model.yaml", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--format", "json", cwd=files)
    data = json.loads(result.stdout)
    assert {"findings", "estimate"} <= set(data)
    stages = data["estimate"]["stages"]
    assert sum(s["configured"] for s in stages) == 1
    for s in stages:
        assert set(s["per_gpu"]) == {"parameters", "gradients", "optimizer_states", "model_states",
                                     "gathered_parameters", "buffers", "activations", "overhead", "total"}
        assert all(isinstance(v, int) for v in s["per_gpu"].values())
        # an offload option's host RAM is not judged without --cpu-memory: its verdict is unknown, fits null
        # "unknown" (fits null) where what is counted fits but something is not counted (the offload's host
        # RAM without --cpu-memory), never a plain fits
        assert (s["fits"] is None) == (s["verdict"] == "unknown")
        if s["uncounted"] and s["counted_verdict"] != "does-not-fit":
            assert s["verdict"] == "unknown"


def test_cli_markdown_has_table_advice_and_diff(cli, files):
    result = cli("check", "ds.json", "--model", "model.yaml", "--gpus", "8", "--gpu", "H100-SXM5-80GB",
                 "--format", "markdown", cwd=files)
    out = result.stdout
    assert out.startswith("### zeroadvisor: `ds.json`")
    assert "| Option | Peak per GPU (GiB) |" in out and "(configured)" in out
    assert "ZA802 lower-stage-fits" in out and "ZA804 offload-not-needed" in out and "```diff" in out


def test_cli_usage_errors_exit_2(cli, files):
    base = ["check", "ds.json", "--gpus", "8"]
    assert cli(*base, "--gpu", "A100-SXM4-80GB", cwd=files).returncode == 2  # no model
    assert cli(*base, "--model", "model.yaml", cwd=files).returncode == 2  # no GPU memory
    bad_gpu = cli(*base, "--model", "model.yaml", "--gpu", "Z9000", cwd=files)
    assert bad_gpu.returncode == 2 and "unknown GPU" in bad_gpu.stderr
    assert cli(*base, "--model", "model.yaml", "--gpu", "H100-SXM5-80GB", "--headroom", "150%",
               cwd=files).returncode == 2
    assert cli(*base, "--model", "model.yaml", "--gpu-memory", "80", cwd=files).returncode == 2
    missing = cli("check", "nope.json", "--params", "7B", "--gpus", "8", "--gpu", "H100-SXM5-80GB", cwd=files)
    assert missing.returncode == 2 and "nope.json" in missing.stderr
    for r in (bad_gpu, missing):
        assert "Traceback" not in r.stderr


def test_an_all_auto_trainer_config_gets_a_smaller_per_device_batch_in_the_trainer_arguments(tmp_path):
    """An HF Trainer config whose batch keys are all "auto", at micro batch 8 x 4096 tokens without checkpointing:
    the Hugging Face guide's first steps are a smaller per-device batch with more accumulation and checkpointing,
    not offload. The micro batch is the Trainer's argument, so the change is an action there (nothing to write
    to the config), the global batch kept: 8 x 1 = micro 1 x accumulation 8. Hand check of the fit: activations
    scale with the micro batch, 1/8 of the configured run's."""
    from zeroadvisor.advisor.advice import Recommendation
    from zeroadvisor.report import overview

    m = model(tmp_path, LLAMA2_7B, sequence_length=4096, activation_checkpointing="none", micro_batch_size=8)
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
              "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
    result = check(config, m)
    (does_not_fit,) = [f for f in result.findings if f.code == "ZA801"]
    rec = does_not_fit.recommends
    assert isinstance(rec, Recommendation)
    assert rec.option.offload_optimizer == rec.option.offload_param == "none" and rec.option.stage < 3
    assert (rec.change.micro_batch, rec.change.accumulation, rec.change.trainer_batch) == (1, 8, True)
    # the batch keys stay "auto": the file changes at most in its stage (the published order: ZeRO-1 before 2)
    assert rec.patch in (None, {"zero_optimization": {"stage": rec.option.stage}})
    [action] = [a for a in rec.actions if a.kind == "trainer-batch"]
    assert "per_device_train_batch_size=1 and gradient_accumulation_steps=8" in action.text
    configured_acts = result.estimate.configured.per_gpu["activations"]
    assert rec.stage.per_gpu["activations"] == pytest.approx(configured_acts / 8, rel=0.01)
    line = overview.verdict_sentence(result.estimate, result.recommendation, "GB")
    recommended = line.split("Recommended (ZA801 does-not-fit): ")[1]
    assert "micro batch 1 with gradient accumulation 8 (in the Trainer's arguments)" in recommended
    # the recommended run is a column of its own (no option of the table runs micro batch 1), marked recommended
    headline = result.recommendation
    shown = overview.shown_stages(result.estimate, headline, all_options=False)
    assert shown[-1] is rec.stage and overview.role(rec.stage, headline) == "recommended"
    assert overview.column_label(rec.stage, headline) == f"Z{rec.option.stage} +mb:1"


def test_check_json_carries_step_times_and_the_recommended_run(cli, tmp_path):
    """check --format json: each option with its throughput (a GPU is named) and "recommended"; the recommended
    run that also changes the micro batch is "recommended_run", labelled with what it changes."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_7B))
    (tmp_path / "model.json").write_text(json.dumps({"hf_config": "config.json", "sequence_length": 4096,
                                                      "activation_checkpointing": "none", "micro_batch_size": 8}))
    config = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
              "train_batch_size": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}
    (tmp_path / "ds.json").write_text(json.dumps(config))
    result = cli("check", tmp_path / "ds.json", "--model", tmp_path / "model.json", "--gpus", "8",
                 "--gpu", "A100-SXM4-80GB", "--format", "json")
    assert result.returncode == 1, result.stderr
    estimate = json.loads(result.stdout)["estimate"]
    assert all(stage["throughput"]["step_time_s"] > 0 for stage in estimate["stages"])
    assert not any(stage["recommended"] for stage in estimate["stages"])  # no option of the table is that run
    run = estimate["recommended_run"]
    assert run["recommended"] and run["label"].endswith("+mb:1") and run["fits"]
    assert run["throughput"]["step_time_s"] > 0

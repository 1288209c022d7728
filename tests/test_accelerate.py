"""Accelerate launcher configs: the DeepSpeed config Accelerate builds, lint, and check/estimate verdicts.

The expected DeepSpeed configs are written by hand from accelerate 1.15.0's code
(utils/dataclasses.py DeepSpeedPlugin.__post_init__ and set_mixed_precision, utils/launch.py
prepare_deepspeed_cmd_env); tests/oracle/test_accelerate_oracle.py compares the builder with the
package itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 (the fixture)
from zeroadvisor import api
from zeroadvisor.config.accelerate import is_accelerate_config
from zeroadvisor.config.reader import read_document
from zeroadvisor.config.yaml_source import parse_yaml
from zeroadvisor.deepspeed.accelerate_map import build, sequence_parallel
from zeroadvisor.hardware.gpus import resolve_gpu
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.request import Request
from zeroadvisor.inputs.run import build as build_inputs
from zeroadvisor.lint.findings import Severity
from zeroadvisor.rules import accelerate as accelerate_rules
from zeroadvisor.rules.linter import lint_file

DATA = Path(__file__).resolve().parent / "data" / "accelerate"


def _built(text: str, name: str = "accelerate.yaml", **kwargs):
    return build(parse_yaml(text, name), **kwargs)


# -- the DeepSpeed config Accelerate builds --------------------------------------------------------

def test_plugin_keys_stage3_cpu_offload_bf16():
    launch = _built("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\ndeepspeed_config:\n"
                    "  zero_stage: 3\n  offload_optimizer_device: cpu\n  offload_param_device: cpu\n"
                    "  gradient_accumulation_steps: 4\n  gradient_clipping: 1.0\n  zero3_save_16bit_model: true\n")
    # DeepSpeedPlugin.__post_init__ (no config file) + set_mixed_precision("bf16"); nvme_path None off nvme
    assert launch.ds_config == {
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4,
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "nvme_path": None},
                              "offload_param": {"device": "cpu", "nvme_path": None},
                              "stage3_gather_16bit_weights_on_model_save": True},
        "gradient_clipping": 1.0, "bf16": {"enabled": True}, "fp16": {"enabled": False},
    }
    assert (launch.world_size, launch.num_machines, launch.mixed_precision) == (8, 1, "bf16")


@pytest.mark.parametrize(("section", "size"), [
    ("parallelism_config:\n  parallelism_config_sp_size: 4\n  parallelism_config_sp_backend: deepspeed\n", 4),
    ("parallelism_config:\n  parallelism_config_sp_size: 2\n", 2),  # deepspeed: the backend's default
    ("parallelism_config:\n  parallelism_config_sp_size: 1\n", None),
    ("parallelism_config:\n  parallelism_config_sp_size: 4\n  parallelism_config_sp_backend: torch\n", None),
    ("parallelism_config: {}\n", None),
])
def test_the_yaml_s_sequence_parallel_size_is_deepspeed_s_ulysses(section, size):
    """parallelism_config_sp_size with the deepspeed backend: Accelerator.prepare registers UlyssesSPAttentionHF
    with that degree and divides the world by it (accelerate 1.15 accelerator.py): the run's sequence degree."""
    text = ("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\ndeepspeed_config:\n"
            "  zero_stage: 3\n" + section)
    assert sequence_parallel(parse_yaml(text, "a.yaml").data) == size
    launch = _built(text)  # the config Accelerate builds has no such key (the oracle compares it with accelerate's)
    assert launch.ds_config is not None and "sequence_parallel_size" not in launch.ds_config


def test_an_accelerate_yaml_with_ulysses_splits_the_activations(tmp_path):
    plain = "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 4\ndeepspeed_config:\n  zero_stage: 3\n"
    (tmp_path / "plain.yaml").write_text(plain)
    (tmp_path / "sp.yaml").write_text(plain + "parallelism_config:\n  parallelism_config_sp_size: 4\n")

    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "vocab_size": 32000}))

    def activations(name: str) -> int:
        given = {"config": str(tmp_path / name), "model": str(tmp_path / "llama"), "gpus": 4,
                 "gpu_memory": resolve_gpu("A100-SXM4-80GB").memory_bytes, "cpu_memory": "1TB", **SHAPE,
                 "seq_len": 32768, "sequence_parallel": None}  # taken: the files may fill it
        (run,) = api.run_check(build_inputs(Request.taking(Command.CHECK, **given)))
        configured = next(s for s in run.estimate.stages if s.configured)
        return configured.per_gpu["activations"]

    assert activations("sp.yaml") < activations("plain.yaml") / 3


def test_defaults_when_the_block_is_empty():
    """No ACCELERATE_DEEPSPEED_* variable: stage 2, no offload, accumulation "auto", no clipping key
    (gradient_clipping "auto" is truthy: `if self.gradient_clipping:` keeps it as "auto"), fp32."""
    launch = _built("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config: {}\n")
    assert launch.ds_config["zero_optimization"]["stage"] == 2
    assert launch.ds_config["gradient_accumulation_steps"] == "auto"
    assert launch.ds_config["gradient_clipping"] == "auto"
    assert launch.ds_config["fp16"] == {"enabled": False} and launch.ds_config["bf16"] == {"enabled": False}
    assert launch.ds_config["zero_optimization"]["offload_optimizer"] == {"device": "none", "nvme_path": None}


def test_fp16_block_and_zero_clipping():
    launch = _built("distributed_type: DEEPSPEED\nmixed_precision: fp16\nnum_processes: 2\ndeepspeed_config:\n"
                    "  zero_stage: 1\n  gradient_clipping: 0.0\n")
    assert launch.ds_config["fp16"] == {"enabled": True, "auto_cast": True}
    assert "gradient_clipping" not in launch.ds_config  # 0.0 is falsy: the plugin leaves the key out


def test_nvme_path_is_not_passed_on():
    launch = _built("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n"
                    "  offload_param_device: nvme\n  offload_param_nvme_path: /local_nvme\n")
    assert launch.ds_config["zero_optimization"]["offload_param"] == {"device": "nvme", "nvme_path": "none"}
    assert [p.kind for p in launch.problems] == ["nvme-path-dropped"]


def test_num_processes_is_the_total_across_machines():
    launch = _built("distributed_type: DEEPSPEED\nnum_machines: 4\nnum_processes: 32\n")
    assert (launch.world_size, launch.per_node) == (32, 8)
    launch = _built("distributed_type: DEEPSPEED\nnum_machines: 4\nnum_processes: 30\n")
    assert (launch.world_size, launch.per_node) == (28, 7)  # 30 // 4 per machine


def test_config_file_auto_values_are_filled_as_the_plugin_does():
    """fill_match(must_match=False) replaces only "auto": the stage default 2 would fill an "auto"
    stage, gradient_clipping stays "auto" (the plugin's own value), the 16-bit save flag False;
    set_mixed_precision("no") fills bf16 "auto" with False and adds fp16 disabled."""
    launch = _built(f"distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                    f"  deepspeed_config_file: {DATA / 'ds_zero3_auto.json'}\n")
    assert launch.ds_config == {
        "bf16": {"enabled": False}, "fp16": {"enabled": False},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
                              "stage3_gather_16bit_weights_on_model_save": False},
        "gradient_accumulation_steps": 4, "gradient_clipping": "auto", "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": "auto",
    }
    with_script = _built(f"distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                         f"  deepspeed_config_file: {DATA / 'ds_zero3_auto.json'}\n", script_precision="bf16")
    assert with_script.ds_config["bf16"] == {"enabled": True}


def test_relative_config_file_beside_the_yaml(tmp_path):
    (tmp_path / "ds.json").write_text(json.dumps({"zero_optimization": {"stage": 1}}))
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                         "  deepspeed_config_file: ds.json\n")
    launch = build(read_document(yaml_path), cwd="/")
    assert launch.config_file == str(tmp_path / "ds.json")
    assert launch.ds_config["zero_optimization"] == {"stage": 1}
    assert launch.ds_config["gradient_accumulation_steps"] == 1  # added when the file has none


# -- lint ----------------------------------------------------------------------------------------

def test_findings_from_the_built_config_land_on_the_yaml_key():
    text = ("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\ndeepspeed_config:\n"
            "  zero_stage: 2\n  offload_param_device: cpu\n")
    doc = parse_yaml(text, "accelerate.yaml")
    from zeroadvisor.rules.linter import lint_document

    findings = lint_document(doc)
    assert [(f.code, f.pointer, f.line, f.column) for f in findings] == \
        [("ZA601", "/deepspeed_config/offload_param_device", 6, 3)]
    assert "zero_optimization.offload_param" in findings[0].message
    assert findings[0].fix is None  # no fix on YAML


def test_deepspeed_config_file_findings_stay_in_that_file(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text('{\n  "zero_optimization": {"stage": 2, "overlap_com": true},\n'
                  '  "train_micro_batch_size_per_gpu": "auto"\n}\n')
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                         "  deepspeed_config_file: ds.json\n")
    findings = lint_file(yaml_path).findings
    assert [(Path(f.file).name, f.code, f.line, f.column) for f in findings] == [("ds.json", "ZA101", 2, 37)]


def test_corpus_accelerate_configs_are_recognised_and_only_accelerate_rules_err(corpus):
    files = sorted((corpus / "accelerate_yaml").glob("*.y*ml"))
    assert len(files) == 31
    for path in files:
        result = lint_file(path)
        assert is_accelerate_config(result.document.data), path.name
        stray = [f for f in result.findings if f.severity is Severity.ERROR
                 and f.code not in accelerate_rules.CODES]
        assert not stray, f"{path.name}: DeepSpeed-rule errors on the config Accelerate builds: {stray}"


def test_cli_lint_exit_codes(tmp_path, cli):
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 4\n")
    good = tmp_path / "good.yaml"
    good.write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n")
    result = cli("lint", str(bad))
    assert result.returncode == 1 and "ZA052" in result.stdout and "bad.yaml:4:3" in result.stdout
    assert cli("lint", str(good)).returncode == 0


# -- check and estimate: the same verdict as the equivalent ds_config ------------------------------

SHAPE = {"seq_len": 2048, "activation_checkpointing": "full", "flash_attention": True}


def _check(path: Path, gpus: int, gpu: str = "A100-SXM4-80GB", gpus_per_node: int | None = None, **overrides):
    given = {"config": str(path), "params": "7B", "gpus": gpus, "gpus_per_node": gpus_per_node,
             "gpu_memory": resolve_gpu(gpu).memory_bytes, "cpu_memory": "1TB"}
    (report,) = api.run_check(build_inputs(Request.taking(Command.CHECK, **{**given, **SHAPE, **overrides})))
    return report


def _estimate(path: Path, params: str = "7B", **given):
    request = Request.taking(Command.ESTIMATE, config=str(path), params=params, **given)
    return api.run_estimate(build_inputs(request)).estimate


EQUIVALENTS = [
    pytest.param(
        "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n"
        "  zero3_init_flag: true\n",
        {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
         "bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}, 8, None, id="zero3-bf16"),
    pytest.param(
        "distributed_type: DEEPSPEED\nmixed_precision: fp16\nnum_machines: 2\nnum_processes: 16\ndeepspeed_config:\n"
        "  zero_stage: 2\n  offload_optimizer_device: cpu\n  gradient_accumulation_steps: 4\n",
        {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4, "fp16": {"enabled": True},
         "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}, 16, 8, id="zero2-offload-2-nodes"),
    pytest.param(
        "distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n  zero_stage: 1\n",
        {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 1}}, 4, None,
        id="zero1-no-mixed-precision-is-fp32"),
    pytest.param(
        "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 2\ndeepspeed_config: {}\n",
        {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": True}, "zero_optimization": {"stage": 2}},
        2, None, id="defaults-are-stage-2"),
    pytest.param(
        f"distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n"
        f"  deepspeed_config_file: {DATA / 'ds_zero3_auto.json'}\n",
        {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4,
         "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}, 8, None,
        id="config-file-bf16-auto-without-precision-is-fp32"),
]


def _verdicts(run) -> list[dict]:
    """Every option's numbers and verdict (the notes differ where the YAML states zero3_init_flag, an input
    a ds_config cannot give)."""
    return [{k: v for k, v in stage.to_dict().items() if k != "notes"} for stage in run.result.estimate.stages]


@pytest.mark.parametrize("yaml_text,equivalent,gpus,per_node", EQUIVALENTS)
def test_same_verdict_as_the_equivalent_ds_config(tmp_path, yaml_text, equivalent, gpus, per_node):
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text(yaml_text)
    json_path = tmp_path / "ds_config.json"
    json_path.write_text(json.dumps(equivalent))
    from_yaml = _check(yaml_path, gpus, micro_batch=2)
    from_json = _check(json_path, gpus, gpus_per_node=per_node, micro_batch=2)
    assert from_yaml.result.estimate is not None
    assert _verdicts(from_yaml) == _verdicts(from_json)
    assert from_yaml.result.estimate.configured.option == from_json.result.estimate.configured.option
    # the advice, less assumed-input (ZA808): the YAML's zero3_init_flag is an input no ds_config states
    yaml_advice = sorted((f.code, f.severity) for f in from_yaml.result.findings if f.code.startswith("ZA8")
                         and f.code != "ZA808")
    json_advice = sorted((f.code, f.severity) for f in from_json.result.findings if f.code.startswith("ZA8")
                         and f.code != "ZA808")
    assert yaml_advice == json_advice


def test_estimate_of_a_yaml_matches_the_equivalent_ds_config(tmp_path):
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\n"
                         "deepspeed_config:\n  zero_stage: 3\n  offload_optimizer_device: cpu\n")
    json_path = tmp_path / "ds_config.json"
    json_path.write_text(json.dumps({"bf16": {"enabled": True}, "train_micro_batch_size_per_gpu": "auto",
                                     "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}}))
    given = {"seq_len": 4096, "activation_checkpointing": "full", "flash_attention": True, "gpus": 8,
             "gpu_memory": 80 * 2**30}
    from_yaml = _estimate(yaml_path, "13B", **given)
    from_json = _estimate(json_path, "13B", **given)
    assert from_yaml.to_dict() == from_json.to_dict()
    assert (from_yaml.configured.option.stage, from_yaml.settings.precision) == (3, "bf16")


def test_gpus_per_node_left_out_is_the_yamls(tmp_path):
    """num_machines 2 of 4 processes: --gpus-per-node not given is the YAML's 4, for estimate as for check."""
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_machines: 2\nnum_processes: 8\n"
                         "deepspeed_config:\n  zero_stage: 3\n")
    assert _estimate(yaml_path, gpus=8).cluster.gpus_per_node == 4
    assert _check(yaml_path, 8).estimate.cluster.gpus_per_node == 4
    with pytest.raises(api.UsageError, match="starts 4 processes per machine, but --gpus-per-node gives 8"):
        _check(yaml_path, 8, gpus_per_node=8)


def test_gpus_that_contradict_num_processes_are_a_usage_error(tmp_path, cli):
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n")
    with pytest.raises(api.UsageError, match=r"launches 8 processes.*--gpus gives 4"):
        _check(yaml_path, 4)
    result = cli("check", str(yaml_path), "--params", "7B", "--gpus", "4", "--gpu", "A100-SXM4-80GB")
    assert result.returncode == 2 and "give --gpus 8" in result.stderr


def test_not_deepspeed_cannot_be_estimated(tmp_path):
    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 3\n")
    with pytest.raises(api.UnusableConfig, match="does not start DeepSpeed"):
        _estimate(yaml_path, gpus=2)
    run = _check(yaml_path, 2)
    assert run.result.estimate is None and "does not start DeepSpeed" in run.result.no_estimate
    # no estimate is never a pass: the no-estimate error says why, beside the Accelerate warning
    assert [f.code for f in run.result.findings] == ["ZA812", "ZA056"]


def test_zero3_init_flag_decides_the_load(tmp_path):
    """zero3_init_flag false: from_pretrained runs without zero.Init, so the load holds the whole model."""
    texts = {flag: f"distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\ndeepspeed_config:\n"
                   f"  zero_stage: 3\n  zero3_init_flag: {flag}\n" for flag in ("true", "false")}
    peaks = {}
    for flag, text in texts.items():
        path = tmp_path / f"{flag}.yaml"
        path.write_text(text)
        estimate = _estimate(path, gpus=8, gpu_memory=80 * 2**30, **SHAPE)
        peaks[flag] = estimate.configured.phases["load"].gpu
    assert peaks["false"] > peaks["true"]


def test_the_sequence_degree_of_the_yaml_a_launch_command_names(cli, tmp_path):
    # accelerate launch --config_file acc.yaml train.py --deepspeed ds.json: the config checked is ds.json, the
    # Ulysses degree the launcher's YAML
    (tmp_path / "acc.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 4\ndeepspeed_config:\n"
                                       "  deepspeed_config_file: ds.json\nparallelism_config:\n"
                                       "  parallelism_config_sp_size: 2\n")
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 3}}))
    (tmp_path / "llama").mkdir()
    (tmp_path / "llama" / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
        "num_attention_heads": 32, "vocab_size": 32000}))
    launch = f"accelerate launch --config_file {tmp_path / 'acc.yaml'} train.py --deepspeed {tmp_path / 'ds.json'}"
    result = cli("check", "--model", str(tmp_path / "llama"), "--seq-len", "16384", "--gpu", "A100-SXM4-80GB",
                 "--launch", launch, "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    assert "sequence parallel 2 from parallelism_config_sp_size in" in result.stderr
    report = json.loads(result.stdout)
    assert report["estimate"]["cluster"]["parallel"]["sequence"] == 2


def test_a_yaml_whose_change_fits_says_it_is_made_by_hand_not_that_none_fits(tmp_path):
    """7B at ZeRO-2 on 24 GB cards does not fit and ZeRO-3 does: the Accelerate YAML gets no fix written, so the verdict
    line says a change fits and is made by hand (its finding words it). Before, it said "No config change fits"."""
    from zeroadvisor.report.formats import OutputFormat

    yaml_path = tmp_path / "accelerate.yaml"
    yaml_path.write_text("distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\n"
                         "deepspeed_config:\n  zero_stage: 2\n")
    report = _check(yaml_path, 8, gpu="A10G", micro_batch=1)
    (failing,) = [f for f in report.result.findings if f.code == "ZA801"]
    assert failing.fix is None and failing.recommends is not None  # a change that fits, not written into YAML
    assert report.result.recommendation is None and report.result.no_fix.by_hand
    text = " ".join(report.report(OutputFormat.TEXT).split())
    assert "A change fits (ZA801 does-not-fit), to make by hand" in text and "No config change fits" not in text

"""Inputs the memory model cannot use are one-line errors of one type; anything else is a bug.

- ``--gpu-memory 1e308GB`` and a 300-digit ``hidden_size`` used to end in OverflowError (float
  formatting of the byte counts); they are now refused at the bounds in memory/estimate.py and
  model/spec.py.
- ``check`` catches only ``memory.EstimateError``: an unusable config value gives findings, the
  no-estimate error (ZA812) and ``no_estimate``, while a TypeError/ValueError from a bug is not turned
  into a user error.
"""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.advisor.check import CheckOptions, check_document
from zeroadvisor.api import UsageError
from zeroadvisor.config.limits import MAX_DIMENSION
from zeroadvisor.config.source import parse
from zeroadvisor.inputs import values
from zeroadvisor.inputs.model import model_and_shape
from zeroadvisor.memory import EstimateError
from zeroadvisor.memory.estimate import MAX_MEMORY_BYTES, Cluster, estimate
from zeroadvisor.model.description import spec_from_params
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.spec import ModelSpec, TrainingShape

HUGE = "9" * 300
LLAMA = {"model_type": "llama", "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
         "vocab_size": 32000}


def _options(**cluster) -> CheckOptions:
    return CheckOptions(model=spec_from_params("7B"), shape=TrainingShape(2048),
                        cluster=Cluster(**{"gpus": 8, "gpu_memory": 80 * 10**9, **cluster}))


def test_gpu_memory_beyond_any_machine_is_one_line():
    with pytest.raises(UsageError) as usage:
        values.size("--gpu-memory", "1e308GB")
    assert "\n" not in str(usage.value) and "more than any machine" in str(usage.value)
    with pytest.raises(EstimateError) as err:
        _options(gpu_memory=10**308)
    assert "\n" not in str(err.value) and "more than any machine" in str(err.value)
    with pytest.raises(EstimateError):
        Cluster(gpus=8, cpu_memory=MAX_MEMORY_BYTES + 1)
    Cluster(gpus=8, gpu_memory=MAX_MEMORY_BYTES)  # the bound itself is accepted


def test_cli_refuses_gpu_memory_beyond_any_machine(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1}')
    result = cli("check", config, "--params", "7B", "--gpus", "8", "--gpu-memory", "1e308GB")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0] and "more than any machine" in lines[0]


@pytest.mark.parametrize("text", [f"hidden_size: {HUGE}\n", f"hidden_size: {MAX_DIMENSION + 1}\n"])
def test_model_description_size_beyond_any_model(tmp_path, text):
    (tmp_path / "model.yaml").write_text("parameters: 7B\n" + text)
    with pytest.raises(ModelError) as err:
        model_and_shape(str(tmp_path / "model.yaml"))
    message = str(err.value)
    assert "\n" not in message and "model.yaml:2:" in message and "larger than any model" in message


def test_hf_config_size_beyond_any_model(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "hidden_size": 32 * int(HUGE)}))
    with pytest.raises(ModelError) as err:
        model_and_shape(str(tmp_path / "config.json"))
    assert "\n" not in str(err.value) and "hidden_size" in str(err.value) and "larger than any model" in str(err.value)


def test_params_beyond_any_model():
    with pytest.raises(ModelError):
        model_and_shape(None, HUGE)


@pytest.mark.parametrize("zero,linted", [
    ({"stage": 2, "allgather_bucket_size": "lots"}, True),
    ({"stage": 2, "allgather_bucket_size": [1, 2]}, True),
    ({"stage": 2, "overlap_comm": "maybe"}, True),
    ({"stage": 2, "reduce_bucket_size": 10**30}, False),  # beyond torch's int64 sizes
    ({"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": "half"}}, True),
])
def test_unusable_config_values_are_estimate_errors(zero, linted):
    config = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}
    with pytest.raises(EstimateError):
        estimate(config, ModelSpec(parameters=7 * 10**9), TrainingShape(2048), Cluster(gpus=8))
    result = check_document(parse(json.dumps(config), "ds.json"), _options())
    assert result.estimate is None and result.no_estimate
    assert [f.code for f in result.findings if f.code == "ZA812"] == ["ZA812"]  # never a silent pass
    # the lint findings say what is wrong too, where the schema can
    assert any(f.code != "ZA812" for f in result.findings) is linted


def test_lax_values_deepspeed_accepts_are_estimated():
    # pydantic lax mode: "5e8"-free numeric strings, 1/0 and "yes" are accepted by DeepSpeed
    config = {"train_micro_batch_size_per_gpu": 1,
              "zero_optimization": {"stage": 2, "allgather_bucket_size": "200000000", "overlap_comm": "yes",
                                    "contiguous_gradients": 1}}
    result = estimate(config, ModelSpec(parameters=7 * 10**9), TrainingShape(2048), Cluster(gpus=8))
    assert result.settings.allgather_bucket_size == 200_000_000 and result.settings.overlap_comm is True


def test_a_huge_micro_batch_is_an_estimate_error_not_a_hang():
    config = {"train_batch_size": 10**12}  # micro batch 1.25e11 on 8 GPUs
    result = check_document(parse(json.dumps(config), "ds.json"), _options())
    assert "micro batch" in result.no_estimate


@pytest.mark.parametrize("text", [
    '{"train_micro_batch_size_per_gpu": 1' + "0" * 400 + '}',  # an int no float holds (found by benchmarks/fuzz.py)
    '{"train_batch_size": 1' + "0" * 400 + ', "gradient_accumulation_steps": 1}',  # the derived micro batch
])
def test_a_count_beyond_any_float_is_an_estimate_error_not_an_overflow(text):
    result = check_document(parse(text, "ds.json"), _options())
    assert "micro batch" in result.no_estimate

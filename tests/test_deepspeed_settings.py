"""The effective DeepSpeed settings (deepspeed/settings.py): one frozen reading per config, shared by the lint rules,
the memory model, the step-time model and the advisor; a document's kind decided once (deepspeed/kind.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from zeroadvisor.config.source import parse
from zeroadvisor.deepspeed import effective, kind, settings
from zeroadvisor.deepspeed.settings import GAS, MBS, TBS, read, read_batch, settings_of
from zeroadvisor.lint.context import Context
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.memory.settings import read_settings
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.rules.linter import lint_document

SPEC = ModelSpec(parameters=1_000_000_000, num_layers=24, hidden_size=2048, num_attention_heads=16,
                 vocab_size=32000, intermediate_size=8192)
CONFIG = {"train_batch_size": 64, "gradient_accumulation_steps": 2, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}


@pytest.fixture
def reads(monkeypatch):
    """Every config read into DeepSpeedSettings, as the repr of its data."""
    seen: list[str] = []
    real = settings.read

    def counting(data):
        seen.append(repr(data))
        return real(data)

    monkeypatch.setattr(settings, "read", counting)
    return seen


def test_the_settings_are_frozen_and_their_sections_read_only():
    s = read(CONFIG)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.configured = False  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.zero_config.offload_optimizer.pin_memory = False  # type: ignore[misc]
    assert (s.stage, s.precision, s.offload_optimizer.device, s.offload_optimizer.pin_memory) == \
        (3, "bf16", "cpu", True)


@pytest.mark.parametrize("config, written, counts, auto", [
    ({TBS: 64, GAS: 2}, (64, None, 2), (64, None, 2), set()),
    ({TBS: 64.0, MBS: True, GAS: 2.5}, (64, None, None), (64, None, None), set()),
    ({TBS: 0, MBS: -1, GAS: "auto"}, (0, -1, None), (None, None, None), {GAS}),
    ({MBS: "4"}, (None, None, None), (None, None, None), set()),
    ([1, 2], (None, None, None), (None, None, None), set()),
])
def test_batch_counts_are_read_as_deepspeed_computes_with_them(config, written, counts, auto):
    batch = read_batch(config)
    assert (batch.written, batch.counts, set(batch.auto)) == (written, counts, auto)


@pytest.mark.parametrize("config, world", [
    ({TBS: 64, GAS: 2}, 8), ({MBS: 4, GAS: 3}, 8), ({TBS: 48}, 16), ({MBS: 2}, 4), ({GAS: 2}, 8),
    ({TBS: 64, MBS: 4}, 4), ({TBS: 10, MBS: 4, GAS: 1}, 2),
])
def test_the_global_batch_is_deepspeeds_derivation_and_the_memory_model_has_it(config, world):
    resolved = effective.derive_batch(*(config.get(k) for k in (TBS, MBS, GAS)), world)
    batch = read_batch(config)
    assert batch.resolve(world) == resolved
    assert batch.global_batch(world) == (resolved[0] if resolved else None)
    assert read_settings(config, SPEC, world).global_batch == batch.global_batch(world)


def test_the_batch_world_divides_by_sequence_parallel_size():
    assert read({"sequence_parallel_size": 2}).batch_world(8) == 4
    assert read({"sequence_parallel_size": 3}).batch_world(8) == 8 / 3
    assert read({"sequence_parallel_size": 0}).batch_world(8) == 8


def test_a_document_is_read_once_and_a_copy_with_other_data_again(reads):
    doc = parse(json.dumps(CONFIG), "ds_config.json")
    first = settings_of(doc)
    assert settings_of(doc) is first and Context(doc).deepspeed is first
    other = dataclasses.replace(doc, data={"zero_optimization": {"stage": 1}})
    assert settings_of(other).stage == 1 and settings_of(doc).stage == 3
    assert len(reads) == 2


def test_lint_and_estimate_of_one_document_read_it_once(reads):
    doc = parse(json.dumps(CONFIG), "ds_config.json")
    lint_document(doc)
    result = estimate(settings_of(doc), SPEC, TrainingShape(2048), Cluster(gpus=8, gpu_memory=80 * 10**9))
    assert reads == [repr(CONFIG)]
    assert result.settings.deepspeed is settings_of(doc)
    assert result.settings.global_batch == 64


def test_the_estimate_of_the_settings_is_the_estimate_of_the_config():
    shape, cluster = TrainingShape(2048), Cluster(gpus=8, gpu_memory=80 * 10**9)
    assert estimate(read(CONFIG), SPEC, shape, cluster).to_dict() == estimate(CONFIG, SPEC, shape, cluster).to_dict()


def test_a_documents_kind_is_decided_once(monkeypatch):
    tests: list[object] = []
    real = kind.kind_of_data
    monkeypatch.setattr(kind, "kind_of_data", lambda data: tests.append(data) or real(data))
    accelerate = parse('{"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 2}}', "a.json")
    deepspeed = parse(json.dumps(CONFIG), "ds_config.json")
    lint_document(accelerate)
    lint_document(deepspeed)
    assert kind.kind_of(accelerate) == kind.ACCELERATE and kind.kind_of(deepspeed) == kind.DEEPSPEED
    # one test per document: the Accelerate config, the DeepSpeed config it makes Accelerate build, the ds_config
    assert len(tests) == len({id(data) for data in tests}) == 3


@pytest.mark.parametrize("text, expected", [
    ('{"distributed_type": "MULTI_GPU"}', kind.ACCELERATE),
    ('{"deepspeed_config": {"zero_stage": 3}}', kind.ACCELERATE),
    ('{"deepspeed_config": "ds.json"}', kind.DEEPSPEED),  # not an Accelerate config: the DeepSpeed rules say so
    ('{"train_batch_size": 8}', kind.DEEPSPEED),
    ("{}", kind.DEEPSPEED),
    ('{"_comment": "x"}', None),
    ('{"architectures": ["LlamaForCausalLM"]}', None),
    ("[1, 2]", None),
])
def test_the_kind_is_the_one_the_linter_reads_the_document_as(text, expected):
    assert kind.kind_of(parse(text, "x.json")) == expected


def test_an_integer_past_the_largest_float_is_an_estimate_error_not_a_crash():
    """offload_optimizer.ratio = 1 followed by 400 zeros: float() overflows, so the memory model says which value
    it cannot use (the lint reports it: ZA204) instead of an internal error."""
    from zeroadvisor.memory.errors import EstimateError
    from zeroadvisor.model.description import spec_from_params

    config = {"train_micro_batch_size_per_gpu": 1,
              "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 10**400}}}
    with pytest.raises(EstimateError, match=r"offload_optimizer\.ratio = .* too large for the float"):
        estimate(config, spec_from_params("1B"))


@pytest.mark.parametrize("config, filled", [
    ({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "train_batch_size": "auto"},
     True),
    ({"train_micro_batch_size_per_gpu": "auto"}, True),
    ({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": 4}, False),  # one key is written
    ({"train_batch_size": "auto", "gradient_accumulation_steps": "auto"}, False),  # no micro batch to fill
    ({"train_micro_batch_size_per_gpu": 2}, False),
])
def test_the_batch_is_the_integrations_only_when_every_batch_key_written_is_auto(config, filled):
    assert read_batch(config).filled_by_integration is filled


def test_the_estimate_command_reads_the_config_once(reads, tmp_path):
    """The refusals (a given value the config contradicts, a layout the GPUs do not divide), the estimate and the
    release it states share one reading of the config (flows._estimate)."""
    import zeroadvisor

    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps(CONFIG), encoding="utf-8")
    result = zeroadvisor.estimate(str(path), params="1B", gpus=8, seq_len=2048)
    assert reads == [repr(CONFIG)]
    assert result.estimate.settings.deepspeed.stage == 3


def test_each_release_reads_its_own_defaults_once(reads):
    """settings_of keeps one reading per document and release: offload pin_memory's default moved in 0.19.5."""
    from zeroadvisor.deepspeed import schema

    doc = parse(json.dumps({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}), "x.json")
    with schema.reading_as("0.19.4"):
        old = settings_of(doc)
        assert settings_of(doc) is old
    new = settings_of(doc)
    assert (old.offload_param.pin_memory, new.offload_param.pin_memory) == (False, True)
    assert len(reads) == 2

"""zeroadvisor.preflight: the check a training script runs before loading the model, with the job's
readings (world size, GPU memory, host RAM: zeroadvisor/inputs/environment.py) faked on this CPU machine."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

import zeroadvisor
from zeroadvisor.api import UsageError
from zeroadvisor.inputs import environment as pf

GIB = 1 << 30
KIB = 1024
STAGE2 = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 2},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}
STAGE3 = {**STAGE2, "zero_optimization": {"stage": 3}}


@pytest.fixture
def job(monkeypatch, tmp_path):
    """A fake 8-GPU job: launcher environment, a /proc/meminfo, and the GPU reading (free, total)."""
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       1056964608 kB\nMemFree:        1000 kB\nMemAvailable:   1048576000 kB\n")
    monkeypatch.setattr(pf, "MEMINFO", str(meminfo))
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")

    def gpu(free: int, total: int) -> None:
        monkeypatch.setattr(pf, "read_gpu_memory", lambda: (free, total))

    gpu(15 * GIB, 16 * GIB)
    return gpu


# -- readers ----------------------------------------------------------------------------------------

def test_meminfo_is_read_in_kibibytes(tmp_path):
    path = tmp_path / "meminfo"
    path.write_text("MemTotal:        2048 kB\nMemAvailable:    1024 kB\nSwapTotal: 0 kB\n")
    assert pf.read_host_memory(str(path)) == (2048 * KIB, 1024 * KIB)
    path.write_text("Active: 1 kB\n")
    assert pf.read_host_memory(str(path)) is None
    assert pf.read_host_memory(str(tmp_path / "absent")) is None


@pytest.mark.parametrize("value, expected", [("16", (16, "WORLD_SIZE")), (" 016 ", (16, "WORLD_SIZE")),
                                             (None, (None, None))])
def test_world_size_from_the_launcher_environment(value, expected):
    environ = {} if value is None else {"WORLD_SIZE": value}
    assert pf.read_world_size(environ) == expected


@pytest.mark.parametrize("name", ["WORLD_SIZE", "LOCAL_WORLD_SIZE"])
@pytest.mark.parametrize("value", ["abc", "0", "00", "\u00b2", "", "-8", "8.0", "\u0668", "8\n9"])
def test_a_world_size_that_is_not_a_count_is_a_usage_error(job, monkeypatch, name, value):
    # issue 32 (round 3): WORLD_SIZE=abc / 0 / "²" was read as unset, and the check answered for 1 GPU
    monkeypatch.setenv(name, value)
    with pytest.raises(UsageError) as raised:
        zeroadvisor.preflight(STAGE3, params="1B")
    message = str(raised.value)
    assert f"preflight: {name}=" in message and "\n" not in message


def fake_torch(cuda: bool = True, initialised: bool = True) -> types.ModuleType:
    torch = types.ModuleType("torch")
    torch.distributed = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: initialised,
                                              get_world_size=lambda: 32)
    torch.cuda = types.SimpleNamespace(is_available=lambda: cuda, current_device=lambda: 0,
                                       mem_get_info=lambda device: (70 * GIB, 80 * GIB))
    return torch


def test_an_initialised_process_group_wins_over_the_environment(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    assert pf.read_world_size({"WORLD_SIZE": "8"}) == (32, "torch.distributed")
    monkeypatch.setitem(sys.modules, "torch", fake_torch(initialised=False))
    assert pf.read_world_size({"WORLD_SIZE": "8"}) == (8, "WORLD_SIZE")


def test_gpu_memory_from_torch_cuda(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    assert pf.read_gpu_memory() == (70 * GIB, 80 * GIB)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda=False))
    assert pf.read_gpu_memory() is None
    monkeypatch.setitem(sys.modules, "torch", None)  # torch not importable
    assert pf.read_gpu_memory() is None


def test_the_real_torch_without_cuda_gives_no_reading():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        free, total = pf.read_gpu_memory()
        assert 0 < free <= total
    else:
        assert pf.read_gpu_memory() is None


# -- the check ----------------------------------------------------------------------------------------

def test_does_not_fit_raises_with_the_report(job):
    # stage 2, 7e9 parameters: bf16 weights 14 GB + bf16 gradients 14/8 + Adam 12 x 7e9 / 8 = 26.25 GB > 16 GiB
    with pytest.raises(zeroadvisor.PreflightError) as raised:
        zeroadvisor.preflight(STAGE2, params="7B")
    result = raised.value.result
    assert str(raised.value) == result.text() and "ZA801" in str(raised.value)
    for finding in result.report.findings:  # whole, never cut at a width (issue 32): a log says what is wrong
        assert f"{finding.code} [{finding.severity.value}] {finding.message}\n" in str(raised.value)
    cluster = result.report.result.options.cluster
    assert (cluster.gpus, cluster.gpus_per_node, cluster.gpu_memory) == (8, 8, 16 * GIB)
    assert cluster.cpu_memory == 1056964608 * KIB  # MemTotal
    assert result.readings.world_size_from == "WORLD_SIZE"


def test_warn_only_warns_and_returns(job):
    with pytest.warns(RuntimeWarning, match="ZA801"):
        result = zeroadvisor.preflight(STAGE2, params="7B", warn_only=True)
    assert result.verdict == "does-not-fit" and result.fits is False


LLAMA_7B = str(Path(__file__).resolve().parents[1] / "sample_configs" / "models" / "llama-2-7b" / "config.json")


def test_a_fitting_run_returns_quietly(job, recwarn):
    job(79 * GIB, 80 * GIB)
    # stage 3 over 8: (2 + 2 + 12) x 6.7e9 / 8 = 13.5 GB of states on an 80 GiB card, 2k tokens checkpointed
    result = zeroadvisor.preflight(STAGE3, LLAMA_7B, seq_len=2048, activation_checkpointing="full")
    assert result.fits and not recwarn.list and result.notes == []


def test_an_unknown_verdict_is_an_error_never_a_pass(job):
    job(79 * GIB, 80 * GIB)
    # a parameter count alone: the states fit, the activations are not counted, so preflight cannot vouch
    with pytest.raises(zeroadvisor.PreflightError, match=r"could not judge the run .verdict unknown") as raised:
        zeroadvisor.preflight(STAGE3, params="7B")
    assert raised.value.result.fits is None and raised.value.result.verdict == "unknown"
    with pytest.warns(RuntimeWarning, match=r"could not judge the run .verdict unknown"):
        result = zeroadvisor.preflight(STAGE3, params="7B", warn_only=True)
    assert result.fits is None


@pytest.mark.parametrize("change", [{"zero_optimization": {"stage": 2, "allgather_bucket_size": 1e20}},
                                    {"sequence_parallel_size": -1}, {"train_micro_batch_size_per_gpu": 2_000_000_000}])
def test_no_estimate_is_an_error_never_a_pass(job, change):
    """Issue 20, defect 5: a value the memory model cannot use returned normally with no verdict."""
    job(79 * GIB, 80 * GIB)
    with pytest.raises(zeroadvisor.PreflightError, match=r"(?s)could not judge the run .verdict none.*ZA812") as raised:
        zeroadvisor.preflight({**STAGE2, **change}, LLAMA_7B, seq_len=2048)
    assert raised.value.result.fits is None and raised.value.result.verdict is None


def test_given_values_win_over_readings(job):
    result = zeroadvisor.preflight(STAGE3, params="7B", gpus=64, gpu="A100-SXM4-80GB", warn_only=True)
    assert result.report.result.options.cluster.gpus == 64
    assert result.report.result.options.cluster.gpu_memory != 16 * GIB


def test_memory_held_by_another_process_is_a_note(job):
    job(1 * GIB, 80 * GIB)  # the card is 80 GiB, but 79 GiB are taken
    result = zeroadvisor.preflight(STAGE3, LLAMA_7B, seq_len=2048, activation_checkpointing="full")
    assert result.fits and any("another process holds GPU memory" in note for note in result.notes)


def test_no_cuda_and_no_gpu_given_is_a_usage_error(job, monkeypatch):
    monkeypatch.setattr(pf, "read_gpu_memory", lambda: None)
    with pytest.raises(UsageError, match="CUDA is not available"):
        zeroadvisor.preflight(STAGE3, params="7B")


def test_preflight_is_a_function_and_a_dict_takes_the_file_path(job, tmp_path):
    """``zeroadvisor.preflight`` is the function (no callable module); a dict is refused as its file is."""
    assert zeroadvisor.preflight.__module__ == "zeroadvisor.api"
    job(79 * GIB, 80 * GIB)
    config = {**STAGE3, "train_micro_batch_size_per_gpu": 4}
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config, indent=2))
    for given in (config, path):
        with pytest.raises(UsageError, match="micro batch per GPU 8, but the DeepSpeed config runs 4"):
            zeroadvisor.preflight(given, params="7B", micro_batch=8)

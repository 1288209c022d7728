"""Host RAM per rank (issue 34 item 2): every rank's process baseline (torch, DeepSpeed, transformers, the CUDA
runtime) and its data-loader workers times the ranks on a node, and which phase the host peak belongs to.

The measured figures come from benchmarks/host_baseline.json (benchmarks/host_baseline.py, CPU build)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from zeroadvisor.cli.app import app
from zeroadvisor.config.training_args import from_mapping
from zeroadvisor.memory import host
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.vocab import Phase

MIB = 1 << 20
GIB = 1 << 30
BENCH = json.loads((Path(__file__).parents[1] / "benchmarks" / "host_baseline.json").read_text())
CONFIG = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
          "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                "offload_param": {"device": "cpu", "pin_memory": True}}}
MODEL = ModelSpec(parameters=7_000_000_000)


def _configured(gpus: int, workers: int = 0):
    est = estimate(CONFIG, MODEL, cluster=Cluster(gpus=gpus, gpu_memory=80 * GIB, cpu_memory=1024 * GIB,
                                                   dataloader_workers=workers))
    st = est.configured
    assert st is not None
    return st


def _train_terms(st, key: str):
    return [t for t in st.terms if t.key == key and t.phase == Phase.TRAIN]


def test_transformers_import_is_measured_and_counted_per_rank_times_ranks_on_the_node():
    """The Trainer's process imports transformers: RSS growth measured here, counted for every rank."""
    imports = BENCH["imports"]
    grown = imports["torch+deepspeed+transformers"]["rss"] - imports["torch+deepspeed"]["rss"]
    assert abs(host.RUNTIME_TRANSFORMERS_BYTES - grown) < 2 * MIB
    one, eight = _configured(1), _configured(8)
    (term,) = _train_terms(eight, "runtime_transformers")
    assert term.nbytes == host.RUNTIME_TRANSFORMERS_BYTES
    per_rank = sum(t.nbytes for t in host.runtime_baseline_terms(Phase.TRAIN))
    assert per_rank == (host.RUNTIME_IMPORT_BYTES + host.RUNTIME_TRANSFORMERS_BYTES + host.RUNTIME_INIT_BYTES
                        + host.CUDA_HOST_BYTES)
    # the load phase holds every local rank's baseline: 8 ranks hold eight times one rank's
    load_runtime = sum(t.nbytes for t in eight.terms if t.phase == Phase.LOAD and t.key.startswith("runtime_"))
    assert load_runtime == 8 * per_rank
    assert sum(t.nbytes for t in one.terms if t.phase == Phase.LOAD and t.key.startswith("runtime_")) == per_rank


def test_dataloader_workers_from_the_trainer_arguments_are_host_ram_per_rank():
    """dataloader_num_workers forks that many workers in every rank: their private memory (measured USS) times
    the workers times the ranks on the node, in the training loop, not at load."""
    measured = BENCH["worker"]["max_worker_uss"]
    assert host.DATALOADER_WORKER_BYTES >= measured and host.DATALOADER_WORKER_BYTES - measured < MIB
    base, four = _configured(8), _configured(8, workers=4)
    (term,) = _train_terms(four, "dataloader_workers")
    assert term.nbytes == 4 * host.DATALOADER_WORKER_BYTES
    assert four.phases[Phase.TRAIN].host_per_node - base.phases[Phase.TRAIN].host_per_node \
        == 8 * 4 * host.DATALOADER_WORKER_BYTES
    assert four.phases[Phase.LOAD].host_per_node == base.phases[Phase.LOAD].host_per_node
    assert training_workers({"dataloader_num_workers": 6}) == 6
    assert training_workers({}) == 0  # TrainingArguments' default: batches loaded in the training process


def training_workers(fields: dict) -> int:
    return from_mapping(fields, "args.json").get("dataloader_num_workers")


@pytest.mark.parametrize("bad", [-1, 100_000, True])
def test_a_worker_count_no_machine_runs_is_refused(bad):
    with pytest.raises(EstimateError, match="dataloader_workers"):
        Cluster(gpus=8, dataloader_workers=bad)


def test_the_cli_reads_dataloader_num_workers_from_the_training_arguments(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps(CONFIG))
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"dataloader_num_workers": 3}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"parameters": 7_000_000_000}))
    common = ["estimate", "--config", str(config), "--model", str(model), "--gpus", "2", "--gpu-memory", "80GiB",
              "--format", "json"]
    runner = CliRunner()
    with_args = runner.invoke(app, [*common, "--training-args", str(args)])
    without = runner.invoke(app, common)
    assert with_args.exit_code == 0, with_args.output
    assert without.exit_code == 0, without.output

    def train_host(output: str) -> int:
        (st,) = [s for s in json.loads(output)["stages"] if s["configured"]]
        return st["phases"]["train"]["host_per_node"]

    assert train_host(with_args.output) - train_host(without.output) == 2 * 3 * host.DATALOADER_WORKER_BYTES


def test_the_host_peak_says_its_phase_and_the_training_loop_figure_is_given():
    """A host figure measured in the training loop compares with the train phase's, not with a peak set while
    loading: the JSON names the peak's phase and gives the train phase's figure; the text table shows both."""
    st = _configured(8)
    data = st.to_dict()
    peak_phase = max(st.phases.values(), key=lambda p: p.host_per_node).phase
    assert data["peak_host_phase"] == peak_phase
    assert data["train_host_per_node"] == st.phases[Phase.TRAIN].host_per_node
    assert data["peak_host_per_node"] == st.phases[peak_phase].host_per_node
    # without offload the host peak is the load phase's (the checkpoint read), far above the training loop's
    plain = estimate({**CONFIG, "zero_optimization": {"stage": 2}}, MODEL,
                     cluster=Cluster(gpus=8, gpu_memory=80 * GIB)).configured
    assert plain is not None
    plain_data = plain.to_dict()
    assert plain_data["peak_host_phase"] == Phase.LOAD
    assert plain_data["train_host_per_node"] < plain_data["peak_host_per_node"]


def test_the_text_table_names_the_host_peaks_phase_and_the_training_loops_host(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({**CONFIG, "zero_optimization": {"stage": 2}}))
    model = tmp_path / "model.json"
    model.write_text(json.dumps({"parameters": 7_000_000_000}))
    result = CliRunner().invoke(app, ["estimate", "--config", str(config), "--model", str(model), "--gpus", "8",
                                      "--gpu-memory", "80GiB"])
    assert result.exit_code == 0, result.output
    rows = {line.split("  ")[0]: line for line in result.output.splitlines()}
    assert rows["peak host phase"].split()[-1] == "load"
    assert "host / node, train" in rows


def test_a_negative_worker_count_in_the_training_arguments_is_one_line_naming_the_file(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text(json.dumps(CONFIG))
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"dataloader_num_workers": -2}))
    result = CliRunner().invoke(app, ["estimate", "--config", str(config), "--params", "7B", "--gpus", "2",
                                      "--gpu-memory", "80GiB", "--training-args", str(args)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"zeroadvisor: dataloader_num_workers in {args}: -2 data-loader workers; give 0 to 1024"]

"""The public entry point: ``estimate(config, model, shape, cluster, accounting)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from zeroadvisor import DEEPSPEED_TARGET
from zeroadvisor.memory.activations import activation_bytes
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.buffers import OVERHEAD_ASSUMPTION, buffer_terms, gathered_terms, overhead_bytes
from zeroadvisor.memory.options import Option, Skipped, configured_option, enumerate_options, refusal
from zeroadvisor.memory.settings import Settings, read_settings
from zeroadvisor.memory.states import deepspeed_terms, paper_terms
from zeroadvisor.memory.terms import ROWS, STATE_ROWS, Term, ceil_div
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.units import format_bytes

ACCOUNTINGS = ("deepspeed", "paper")

# Bounds on the cluster, far beyond any real one, so that a typo ("1e308GB", "--gpus 10**30") is a
# one-line error and not float overflow in a report. The largest GPU has 288 GB and the largest
# training clusters ~10**5 GPUs; an exabyte per GPU, host or NVMe and 2**24 GPUs are not plans.
MAX_MEMORY_BYTES = 10**18
MAX_GPUS = 2**24


@dataclass(frozen=True, slots=True)
class Cluster:
    """The hardware: GPU count and, when known, memory per GPU, host RAM and NVMe per node (bytes)."""

    gpus: int = 1
    gpus_per_node: int | None = None  # default min(gpus, 8)
    gpu_memory: int | None = None
    cpu_memory: int | None = None
    nvme: int | None = None

    def __post_init__(self) -> None:
        for name in ("gpus", "gpus_per_node"):
            value = getattr(self, name)
            if value is None and name == "gpus_per_node":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise EstimateError(f"{name} must be a positive integer, got {value!r}")
            if value > MAX_GPUS:
                raise EstimateError(f"{name} = {value:,} is more than any cluster has (at most {MAX_GPUS:,})")
        if self.gpus_per_node is None:
            object.__setattr__(self, "gpus_per_node", min(self.gpus, 8))
        for name in ("gpu_memory", "cpu_memory", "nvme"):
            check_memory(name, getattr(self, name))

    @property
    def nodes(self) -> int:
        return ceil_div(self.gpus, self.gpus_per_node)

    @property
    def gpus_on_a_node(self) -> int:
        return min(self.gpus, self.gpus_per_node)

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "gpus_per_node": self.gpus_per_node, "nodes": self.nodes,
                "gpu_memory": self.gpu_memory, "cpu_memory": self.cpu_memory, "nvme": self.nvme}


def check_memory(name: str, nbytes: int | None) -> None:
    """EstimateError unless ``nbytes`` is None or a byte count from 1 to MAX_MEMORY_BYTES."""
    if nbytes is None:
        return
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
        raise EstimateError(f"{name} must be a positive number of bytes, got {nbytes!r}")
    if nbytes > MAX_MEMORY_BYTES:
        raise EstimateError(f"{name} of about 10^{len(str(nbytes)) - 1} bytes is more than any machine has "
                            "(at most 1 EB)")


@dataclass(slots=True)
class StageEstimate:
    option: Option
    configured: bool
    per_gpu: dict[str, int]
    per_gpu_cpu: int  # host RAM one GPU's process needs
    per_gpu_nvme: int
    per_node_cpu: int
    per_node_nvme: int
    fits: bool | None
    terms: list[Term]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.option.stage,
            "offload_optimizer": self.option.offload_optimizer,
            "offload_param": self.option.offload_param,
            "configured": self.configured,
            "label": self.option.label,
            "per_gpu": {row: int(self.per_gpu[row]) for row in ROWS},
            "per_node_cpu": int(self.per_node_cpu),
            "per_node_nvme": int(self.per_node_nvme),
            "fits": self.fits,
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class Estimate:
    model: ModelSpec
    shape: TrainingShape
    accounting: str
    cluster: Cluster
    settings: Settings
    stages: list[StageEstimate]
    skipped: list[Skipped]
    assumptions: list[str]

    @property
    def configured(self) -> StageEstimate | None:
        return next((st for st in self.stages if st.configured), None)

    def stage(self, stage: int, offload_optimizer: str = "none", offload_param: str = "none") -> StageEstimate:
        wanted = Option(stage, offload_optimizer, offload_param)
        for st in self.stages:
            if st.option == wanted:
                return st
        raise KeyError(wanted.label)

    def to_dict(self) -> dict[str, Any]:
        m = self.model
        model = {
            "parameters": int(m.parameters),
            "model_type": m.model_type,
            "num_layers": m.num_layers,
            "hidden_size": m.hidden_size,
            "num_attention_heads": m.num_attention_heads,
            "num_key_value_heads": m.num_key_value_heads,
            "intermediate_size": m.intermediate_size,
            "vocab_size": m.vocab_size,
            "largest_layer_parameters": m.largest_layer_parameters,
            "source": m.source,
            "notes": list(m.notes),  # what the model description says about its own counts (ModelSpec.notes)
            "precision": self.settings.precision,
            "optimizer": self.settings.optimizer_label,
            "micro_batch_size": self.settings.micro_batch,
            "sequence_length": self.shape.sequence_length,
            "activation_checkpointing": self.shape.activation_checkpointing,
            "flash_attention": self.shape.flash_attention,
            "assumptions": list(self.assumptions),
        }
        return {
            "model": model,
            "accounting": self.accounting,
            "cluster": self.cluster.to_dict(),
            "stages": [st.to_dict() for st in self.stages],
            "skipped": [{"stage": k.option.stage, "offload_optimizer": k.option.offload_optimizer,
                         "offload_param": k.option.offload_param, "reason": k.reason} for k in self.skipped],
        }


def estimate(config: dict | None, model: ModelSpec, shape: TrainingShape | None = None,
             cluster: Cluster | None = None, accounting: str = "deepspeed") -> Estimate:
    """Memory per GPU, host RAM and NVMe per node for every stage/offload option of ``config``.

    ``accounting="deepspeed"``: what DeepSpeed 0.19.8 allocates, plus buffers, gathered
    parameters, activations and an overhead allowance. ``accounting="paper"``: the ZeRO
    paper's model states (2 + 2 + K bytes/param) only; the other rows are 0.
    """
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}, got {accounting!r}")
    if not isinstance(model.parameters, int) or model.parameters < 1:
        raise ValueError(f"model.parameters must be a positive integer, got {model.parameters!r}")
    shape = shape or TrainingShape()
    cluster = cluster or Cluster()
    s = read_settings(config, model, cluster.gpus)
    P, N = model.parameters, cluster.gpus
    assumptions = list(s.assumptions)
    configured, config_notes = configured_option(s)
    assumptions += config_notes
    options, skipped = enumerate_options(s)

    act = activation_bytes(model, shape, s.micro_batch, s.precision)
    if accounting == "deepspeed":
        assumptions += list(act.notes)
        assumptions.append(OVERHEAD_ASSUMPTION)
        assumptions.append("host RAM is steady state during training: the transient load of the model at "
                           "initialisation (DeepSpeed's estimator budgets 4·P·gpus_per_node·1.5) is not included")
    else:
        assumptions.append("paper accounting: model states only (ZeRO paper §5, Table 1); gathered parameters, "
                           "buffers, activations and overhead are 0")
    if N == 1:
        assumptions.append("1 GPU: ZeRO partitions over the data-parallel degree, so stages 1-3 partition nothing")

    stages: list[StageEstimate] = []
    seen_notes: set[str] = set(assumptions)
    for option in options:
        notes: list[str] = []
        ds = deepspeed_terms(s, option, P, N, model, notes)
        paper = paper_terms(s, option, P, N, model, notes)
        if accounting == "deepspeed":
            terms = ds + gathered_terms(s, option, P, N, model, notes) + buffer_terms(s, option, P, N, model, notes)
            if act.nbytes:
                terms.append(Term("activations", "gpu", act.nbytes, "activations", "activations", "Korthikanti",
                                  "memory/activations.py"))
        else:
            terms = paper
        per_gpu = {row: 0 for row in ROWS}
        host = nvme = 0
        for term in terms:
            if term.device == "gpu":
                per_gpu[term.row] += term.nbytes
            elif term.device == "cpu":
                host += term.nbytes
            else:
                nvme += term.nbytes
        per_gpu["model_states"] = sum(per_gpu[row] for row in STATE_ROWS)
        other = sum(per_gpu[row] for row in ("model_states", "gathered_parameters", "buffers", "activations"))
        if accounting == "deepspeed":
            per_gpu["overhead"] = overhead_bytes(other)
        per_gpu["total"] = other + per_gpu["overhead"]
        per_node_cpu = host * cluster.gpus_on_a_node
        per_node_nvme = nvme * cluster.gpus_on_a_node
        fits = None
        if cluster.gpu_memory is not None:
            fits = per_gpu["total"] <= cluster.gpu_memory
            if cluster.cpu_memory is not None:
                fits = fits and per_node_cpu <= cluster.cpu_memory
            if cluster.nvme is not None:
                fits = fits and per_node_nvme <= cluster.nvme
        refused = refusal(s, option)
        if refused:
            notes.insert(0, f"DeepSpeed {DEEPSPEED_TARGET} does not run this configuration: {refused}")
        option_notes = [n for n in dict.fromkeys(notes) if n not in seen_notes]
        stage_notes = option_notes + _differences(ds, paper, N)
        stages.append(StageEstimate(option, s.configured and option == configured, per_gpu, host, nvme,
                                    per_node_cpu, per_node_nvme, fits, terms, stage_notes))
    return Estimate(model, shape, accounting, cluster, s, stages, skipped, assumptions)


def _differences(ds: list[Term], paper: list[Term], N: int) -> list[str]:
    """Per model-state row: why DeepSpeed's GPU bytes differ from the paper's (empty when equal)."""
    notes: list[str] = []
    for row in STATE_ROWS:
        ds_row = [t for t in ds if t.row == row and t.device == "gpu"]
        pp_row = [t for t in paper if t.row == row and t.device == "gpu"]
        ds_total, pp_total = sum(t.nbytes for t in ds_row), sum(t.nbytes for t in pp_row)
        if ds_total == pp_total:
            continue
        paper_by_key = {t.key: t for t in pp_row}
        parts = []
        for t in ds_row:
            if t.nbytes == 0:
                continue
            match = paper_by_key.get(t.key)
            if match is None:
                parts.append(f"+ {t.what} ({t.formula}; {t.source})")
            elif match.nbytes != t.nbytes:
                if abs(match.nbytes - t.nbytes) <= 16 * N:
                    parts.append(f"{t.what}: partition rounding/alignment padding ({t.source})")
                else:
                    parts.append(f"{t.what} is {t.formula} where the paper counts {match.formula} ({t.source})")
        ds_keys = {t.key for t in ds_row if t.nbytes}
        for t in pp_row:
            if t.key not in ds_keys and t.nbytes:
                parts.append(f"- the paper's {t.what} ({t.formula}) is not part of DeepSpeed's peak for this row")
        reason = "; ".join(parts) or "different placement of the same bytes"
        notes.append(f"{row}: DeepSpeed {format_bytes(ds_total)} vs paper {format_bytes(pp_total)} per GPU: {reason}")
    return notes

"""The parallel layout: which group ZeRO partitions over, which tensors each degree splits, how
activations divide. Paths are relative to ``deepspeed/`` (DeepSpeed 0.19.8).

World size = data x tensor x pipeline. ``data`` is the group ZeRO partitions over, which holds
the sequence-parallel ranks too: DeepSpeed partitions over ``groups._get_sequence_data_parallel_group()``
(runtime/engine.py _configure_zero_optimizer: ``dp_process_group=self.seq_data_parallel_group``),
the data x sequence group that runtime/sequence_parallel/parallel_state_sp.py
initialize_sequence_parallel builds (``sequence_data_parallel_size = sequence_parallel_size *
data_parallel_size``). Samples are split over data / sequence ranks: DeepSpeedConfig's batch
arithmetic divides the world by ``sequence_parallel_size`` (runtime/config.py DeepSpeedConfig.__init__).

* tensor (AutoTP, ``tensor_parallel.autotp_size``): utils/groups.py _init_tp_mesh_device makes a
  (world / tp, tp) mesh; module_inject/auto_tp.py replaces the Linear layers of the transformer blocks
  by LinearLayer / LinearAllreduce shards (1/tp of each weight); embeddings and norms stay whole.
* pipeline (PipelineModule(num_stages=...), set in code): runtime/pipe/module.py puts the layers on
  stages; the embedding on the first, the head on the last (a tied embedding on both: TiedLayerSpec).
* expert (MoE ep_size, set in code; or AutoEP, ``expert_parallel.autoep_size`` with ``enabled``):
  utils/groups.py _create_expert_and_data_parallel splits the data group into expert-parallel groups
  of ep ranks; each holds num_experts / ep experts, whose states ZeRO partitions over the
  expert-data-parallel group (data / ep ranks). AutoEP does the same: module_inject/auto_ep_layer.py
  AutoEPMoELayer keeps num_local_experts = num_experts // ep_size and tags the expert parameters
  allreduce=False with ds_zero_partition_group_name ep_size_<ep>, the group auto_ep_folding.py
  build_folding_spec sizes edp = stage / (ep x etp) (exact for etp 1).
* ZeRO++ hpZ (``zero_hpz_partition_size``): runtime/zero/partition_parameters.py
  _partition_param_sec keeps a secondary 16-bit copy of 1/hpz of each parameter (stage 3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from zeroadvisor.deepspeed.config_model import Auto, Rejected
from zeroadvisor.deepspeed.settings import Config, DeepSpeedSettings, as_settings
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.activations import Activations, activation_bytes
from zeroadvisor.memory.errors import EstimateError, config_pointer
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.memory.vision import with_vision
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Device, Resource, TrainerFamily

# degree -> (the config key DeepSpeed reads it from, or None where it is set in code; TrainingShape field)
DEGREES: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "tensor": (("tensor_parallel", "autotp_size"), "tensor_parallel"),  # runtime/tensor_parallel/config.py
    "pipeline": (None, "pipeline_parallel"),  # PipelineModule(num_stages=...)
    "sequence": (("sequence_parallel_size",), "sequence_parallel"),  # runtime/config.py world_size division
    # deepspeed.moe.layer.MoE(ep_size=...) in code, or AutoEP (module_inject/auto_ep_config.py parse_autoep_config)
    "expert": (("expert_parallel", "autoep_size"), "expert_parallel"),
}


@dataclass(frozen=True, slots=True)
class Parallel:
    """Parallel degrees of one run. ``data`` = world / (tensor x pipeline): ZeRO's partition group."""

    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    sequence: int = 1
    expert: int = 1
    hpz: int = 1  # zero_optimization.zero_hpz_partition_size

    @property
    def world(self) -> int:
        return self.data * self.tensor * self.pipeline

    @property
    def trivial(self) -> bool:
        return self.tensor == self.pipeline == self.sequence == self.expert == 1

    @property
    def expert_data(self) -> int:
        """Ranks ZeRO partitions the expert parameters over (groups._create_expert_and_data_parallel)."""
        return self.data // self.expert

    def batch_world(self) -> int:
        """The world size DeepSpeed's batch arithmetic divides by (train_batch = micro x accumulation x this):
        a pipeline's data-parallel size (runtime/pipe/topology.py, the PipelineModule mpu), else the world over
        the sequence-parallel size (runtime/config.py DeepSpeedConfig.__init__: world / sequence_parallel_size,
        or the Ulysses mpu's world / sp); AutoTP leaves it the world (DeepSpeedConfig is built without an mpu)."""
        if self.pipeline > 1:
            return self.data
        return self.world // self.sequence

    def to_dict(self) -> dict[str, int]:
        return {"data": self.data, "tensor": self.tensor, "pipeline": self.pipeline, "sequence": self.sequence,
                "expert": self.expert}


def _config_degree(ds: DeepSpeedSettings, name: str) -> int | None:
    """The degree the config sets (None: not set there). AutoTP is off at autotp_size 0 or 1
    (runtime/tensor_parallel/config.py: autotp_size default 0; __init__.py initialize: > 0 enables)."""
    # None for the degrees set in code (pipeline; expert unless AutoEP is enabled)
    degree = ds.expert_parallel.degree if name == "expert" else ds.layout.set_degrees.get(name)
    if degree is None or isinstance(degree, Auto):
        return None
    if isinstance(degree, Rejected):
        raise EstimateError(f"{degree.where} = {degree.written!r} {degree.reason}", config_pointer(degree.where))
    return degree


def _given(shape: TrainingShape, name: str) -> int | None:
    given: int | None = getattr(shape, DEGREES[name][1])  # a TrainingShape degree field
    return given


def read_parallel(config: Config, gpus: int, shape: TrainingShape | None = None) -> Parallel:
    """The layout of ``gpus`` GPUs: degrees from the config where DeepSpeed reads them, else from the
    flag / model description, else 1. EstimateError where the degrees do not divide the world."""
    ds = as_settings(config)
    shape = shape or TrainingShape()
    degrees = {}
    for name in DEGREES:
        from_config = _config_degree(ds, name)
        degrees[name] = from_config if from_config is not None else (_given(shape, name) or 1)
    t, p, sp, ep = degrees["tensor"], degrees["pipeline"], degrees["sequence"], degrees["expert"]
    if gpus % (t * p):
        raise EstimateError(f"{gpus} GPUs do not split into tensor-parallel {t} x pipeline-parallel {p} "
                            "(groups._init_tp_mesh_device / PipelineModule need the product to divide the world)")
    data = gpus // (t * p)
    for name, degree in (("sequence", sp), ("expert", ep)):
        if data % degree:
            raise EstimateError(f"{name}-parallel degree {degree} does not divide the data-parallel degree {data} "
                                f"({gpus} GPUs / tensor {t} / pipeline {p})")
    # zero_hpz_partition_size: runtime/zero/config.py default 1 (the value rules report a bad one)
    return Parallel(data, t, p, sp, ep, ds.layout.hpz or 1)


def parallel_conflicts(config: Config, shape: TrainingShape) -> list[str]:
    """One line per degree a flag / model description gives that the config sets differently."""
    from zeroadvisor.memory.assumed import INPUTS

    ds = as_settings(config)
    out = []
    for name, (path, field) in DEGREES.items():
        wanted = getattr(shape, field)
        try:
            runs = _config_degree(ds, name)
        except EstimateError:
            continue  # the estimate reports the unusable value
        if wanted is None or runs is None or wanted == runs:
            continue
        source = INPUTS[field]
        out.append(f"{source.flag} / {source.field} gives {source.words} {wanted}, but the DeepSpeed config sets "
                   f"{'.'.join(path or ())} = {runs}: change the config or drop the value")
    return out


# ------------------------------------------------------------------ parameters per GPU


@dataclass(frozen=True, slots=True)
class LocalParameters:
    """Parameters one GPU holds before ZeRO: ``dense`` (partitioned over ``Parallel.data``) and
    ``experts`` (partitioned over ``Parallel.expert_data``), on the most loaded pipeline stage."""

    dense: int
    experts: int = 0
    notes: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.dense + self.experts


def layer_linears(spec: ModelSpec) -> tuple[int, int] | None:
    """(attention, MLP per expert) weight elements of one transformer block, biases left out; None if unknown."""
    L, h, heads, f = spec.num_layers, spec.hidden_size, spec.num_attention_heads, spec.intermediate_size
    if not (L and h and heads and f):
        return None
    hd = spec.head_dim or h // heads
    q, kv = heads * hd, (spec.num_key_value_heads or heads) * hd
    attention = h * q + 2 * h * kv + q * h  # q, k, v, o projections
    mlp = (3 if spec.gated_mlp else 2) * h * f  # gate/up/down or fc1/fc2
    return attention, mlp


def local_parameters(spec: ModelSpec, layout: Parallel) -> LocalParameters:
    P = spec.parameters
    if layout.trivial:
        return LocalParameters(P)
    t, p, ep = layout.tensor, layout.pipeline, layout.expert
    notes: list[str] = []
    linears = layer_linears(spec)
    if linears is None:
        split = ceil_div(P, t * p)
        notes.append(f"parallel layout: the architecture is unknown, so every parameter is costed as split by tensor "
                     f"{t} x pipeline {p} (a lower bound: embeddings, norms and the head stay whole on each GPU); "
                     "give num_layers/hidden_size/num_attention_heads/intermediate_size or an hf_config")
        if ep > 1:
            notes.append("expert parallel: the expert parameters are unknown without the architecture; not split")
        return LocalParameters(split, 0, tuple(notes))
    attention, mlp = linears
    L = spec.num_layers or 0  # known: layer_linears returns None without num_layers
    E = spec.num_experts or 0
    experts_total = L * E * mlp if E else 0
    in_blocks = L * (attention + (0 if E else mlp)) + experts_total
    if in_blocks > P:
        notes.append("parallel layout: the block linears the architecture gives exceed the parameter count; "
                     "costed as all parameters in the blocks")
        in_blocks = P
    rest = P - in_blocks  # embeddings, norms, head, routers, biases: whole on every tensor rank
    layers = ceil_div(L, p)  # the most loaded stage holds ceil(L / p) blocks (uniform split)
    dense_block = attention + (0 if E else mlp)
    if p == 1:
        rest_stage = rest
    else:
        embed = spec.embedding_parameters or (spec.vocab_size * spec.hidden_size if spec.vocab_size and
                                              spec.hidden_size else None)
        head = 0 if spec.tied_embeddings or not spec.vocab_size or not spec.hidden_size else \
            spec.vocab_size * spec.hidden_size
        rest_stage = min(rest, max(embed, head)) if embed is not None else rest
        notes.append(f"pipeline {p}: the most loaded stage holds ceil({L}/{p}) = {layers} blocks and the larger of the "
                     "embedding (first stage) and the head (last stage; a tied embedding sits on both, TiedLayerSpec); "
                     "DeepSpeed's default partition_method='parameters' balances stages by parameters "
                     "(runtime/pipe/module.py _partition_layers), so this is a bound; final norm and biases left out")
    dense = ceil_div(layers * dense_block, t) + rest_stage
    if spec.gated_mlp is None and (t > 1 or p > 1):
        notes.append("parallel layout: MLP gating unknown, so the blocks are costed with a two-matrix MLP and the "
                     "rest counted whole (a bound)")
    if t > 1:
        notes.append(f"tensor parallel {t} (AutoTP): the q/k/v/o and MLP Linear weights of each block are split by "
                     f"{t} (module_inject/auto_tp.py LinearLayer/LinearAllreduce; biases not counted); embeddings, "
                     "norms and the LM head are counted whole (AutoTP training may shard an lm_head column-parallel, "
                     "auto_tp.py training_column_lm_head: then this is a bound)")
    experts = ceil_div(layers * E * mlp, t * ep) if E else 0
    if ep > 1:
        if E:
            notes.append(f"expert parallel {ep}: each rank holds {E}/{ep} experts of every MoE layer "
                         "(moe/layer.py MoE num_local_experts); their ZeRO states are partitioned over the "
                         f"expert-data-parallel group of {layout.expert_data} ranks "
                         "(utils/groups.py _create_expert_and_data_parallel); every layer is costed as MoE")
        else:
            notes.append(f"expert parallel {ep} given but the model has no experts: nothing to split")
    return LocalParameters(dense, experts, tuple(notes))


def tensor_parallel_largest_layer(spec: ModelSpec, layout: Parallel) -> int | None:
    """The largest module ZeRO-3 gathers on one GPU under AutoTP (None: no tensor split, the architecture is
    unknown, or the largest module is not a block Linear and stays whole). AutoTP shards each block Linear to
    1/t (module_inject/auto_tp.py LinearLayer / LinearAllreduce): one MLP projection is h·f/t, one attention
    projection h·q/t; the embedding stays whole (V·h) and the LM head is counted whole too (a bound:
    auto_tp.py training_column_lm_head may shard it). A given largest module no larger than a block Linear
    (weight and bias) is one of them or smaller, so the sharded value (capped by it) replaces it."""
    t, h, heads = layout.tensor, spec.hidden_size, spec.num_attention_heads
    if t <= 1 or not h or not heads:
        return None
    f, v = spec.intermediate_size or 0, spec.vocab_size or 0
    q = heads * (spec.head_dim or h // heads)
    block = max(h * f, h * q)
    sharded = max(ceil_div(h * f, t), ceil_div(h * q, t), v * h)
    given = spec.largest_layer_parameters
    if not given:
        return sharded
    return min(given, sharded) if given <= block + max(f, q) else None


def hpz_terms(precision: str, stage: int, offload_param: str, P: int, N: int, hpz: int) -> list[Term]:
    """ZeRO++ hpZ's secondary partition (stage 3, hpz > 1): a 16-bit copy of 1/hpz of every parameter."""
    if stage != 3 or hpz <= 1:
        return []
    w = B.nbytes(precision)
    # partition_parameters.py _partition_param_sec: secondary_partition_size = aligned numel // hpz,
    # aligned to a multiple of the data-parallel size (_aligned_size); on the remote device (the host
    # under offload_param). Per-parameter alignment is left out: exact up to N elements per parameter.
    elements = ceil_div(ceil_div(P, N) * N, hpz)
    device = Resource.CPU if offload_param != Device.NONE else Resource.GPU
    return [Term("parameters", device, w * elements, "hpz_secondary",
                 f"ZeRO++ hpZ secondary partition ({precision}, 1/{hpz} of every parameter)", f"{w} B/param / {hpz}",
                 "zero/partition_parameters.py Init._partition_param_sec (ds_secondary_tensor)")]


def parallel_notes(config: Config, layout: Parallel) -> list[str]:
    """What the layout changes that the estimate does not model, in words."""
    notes = []
    if not layout.trivial:
        notes.append("load and save phases split by the layout: pipeline stages and experts are built where they "
                     "run, AutoTP shards a model loaded whole (engine.py _configure_tensor_parallel before "
                     "_configure_distributed_model); a PEFT model's frozen base is costed whole")
    if {"sequence_parallel_size", "data_parallel_size"} <= as_settings(config).keys:
        notes.append("data_parallel_size with sequence_parallel_size builds a (data, sequence) device mesh "
                     "(__init__.py initialize); ZeRO is costed over data x sequence ranks")
    return notes


# ------------------------------------------------------------------ activations


def parallel_activations(spec: ModelSpec, shape: TrainingShape, micro_batch: int, precision: str,
                         layout: Parallel) -> Activations:
    """Activations of the most loaded GPU under ``layout`` (memory/activations.py on a transformed shape).

    * tensor t without sequence-parallel activations (AutoTP has none): Korthikanti et al. 2022 eq. 2,
      sbh(10 + 24/t + 5as/(ht)): the projections' and MLP's activations and the scores split by t, the
      block inputs, norms and dropout masks whole. Done by costing one rank's heads/t, kv-heads/t and
      MLP width f/t: exact for the formula.
    * sequence sp (Ulysses): every token-wise activation holds s/sp tokens; inside attention each rank holds
      heads/sp over the whole sequence, so explicit scores are (a/sp)s²b = (a·sp)(s/sp)²b: costed as
      a·sp heads of head_dim/sp on s/sp tokens (the same q/kv widths). FlashAttention's log-sum-exp is
      (a/sp)·s·b = a·(s/sp)·b.
    * pipeline p, 1F1B: the first stage keeps p micro batches of L/p layers in flight = L layers' worth
      (Korthikanti et al. §4.2.3, eq. 5 with the pipeline factor); the last stage one micro batch of
      L/p layers plus the logits. The larger is costed.
    """
    t, sp, p = layout.tensor, layout.sequence, layout.pipeline
    changes: dict[str, Any] = {}
    heads, h = spec.num_attention_heads, spec.hidden_size
    hd = spec.head_dim or (h // heads if heads and h else None)
    kvh = spec.num_key_value_heads or heads
    if t > 1 and heads and hd:
        changes.update(num_attention_heads=max(heads // t, 1), num_key_value_heads=max((kvh or heads) // t, 1),
                       head_dim=hd)
        heads, kvh = changes["num_attention_heads"], changes["num_key_value_heads"]
    if t > 1 and spec.intermediate_size:
        changes["intermediate_size"] = ceil_div(spec.intermediate_size, t)
    seq_shape = shape
    if sp > 1 and shape.sequence_length:
        seq_shape = dataclasses.replace(shape, sequence_length=ceil_div(shape.sequence_length, sp))
        if not shape.flash_attention and heads and hd and hd % sp == 0:
            changes.update(num_attention_heads=heads * sp, num_key_value_heads=(kvh or heads) * sp, head_dim=hd // sp)
    sp_loss_note = None
    if sp > 1 and shape.method.trainer == TrainerFamily.MS_SWIFT and spec.layer_facts is not None \
            and spec.layer_facts.loss_in_fp32:
        # ms-swift's own sequence parallel replaces the Trainer's loss (swift/trainers/sequence_parallel/ulysses.py
        # prepare_trainer: compute_loss_func = loss_scale_sp_func; utils.py: CrossEntropyLoss(reduction='none') on
        # the model's logits, which come out of lm_head in the model dtype): no fp32 upcast, so log_softmax's
        # output and the two gradients are in the logits' dtype (CELOSS_PARALLEL_SIZE, when set, chunks it further:
        # not counted, a bound)
        changes["layer_facts"] = dataclasses.replace(spec.layer_facts, loss_in_fp32=False)
        sp_loss_note = ("activations: ms-swift sequence parallel: its loss (loss_scale_sp_func, nn.CrossEntropyLoss "
                        "on the logits as lm_head returns them) keeps the loss tensors in the model dtype, not "
                        "transformers' fp32 upcast")
    local = dataclasses.replace(spec, **changes) if changes else spec
    # the vision tower runs over every image of the micro batch on each rank: sequence parallelism splits the
    # decoder's input embeddings after it (ms-swift's pre_forward_split_hook on the language model,
    # swift/trainers/sequence_parallel/ulysses.py @ v3.12.0), and no tensor parallel plan covers it
    whole = with_vision(activation_bytes(local, seq_shape, micro_batch, precision), spec, shape, micro_batch,
                        precision)
    notes = list(whole.notes)
    if sp_loss_note and whole.nbytes:
        notes.append(sp_loss_note)
    if t > 1 and whole.nbytes:
        notes.append(f"activations: tensor parallel {t} without sequence-parallel activations (Korthikanti et al. "
                     "2022 eq. 2: 10 + 24/t per sbh)")
    if sp > 1 and whole.nbytes:
        notes.append(f"activations: Ulysses sequence parallel {sp}: tokens / {sp}, attention heads / {sp}")
    if p == 1 or not whole.nbytes:
        return dataclasses.replace(whole, notes=tuple(notes))
    first = whole.nbytes - whole.head_share  # p micro batches x L/p layers in flight = L layers; no head
    # known: activation_bytes counts no bytes without num_layers
    last_spec = dataclasses.replace(local, num_layers=ceil_div(spec.num_layers or 0, p))
    last_stage = activation_bytes(last_spec, seq_shape, micro_batch, precision)
    last = last_stage.nbytes
    notes.append(f"activations: pipeline {p} with 1F1B: the first stage keeps {p} micro batches of its layers in "
                 "flight (= all layers' worth, Korthikanti et al. 2022 §4.2.3), the last stage one micro batch and "
                 "the logits; the larger is costed")
    return Activations(max(first, last), whole.per_layer, whole.logits if last > first else 0, tuple(notes),
                       whole.parts, whole.head_share if last > first else 0,
                       # the stage with the LM head holds its own layers' tensors when the head's gradient is reduced
                       last_stage.backward_kept if last > first else 0,
                       last_stage.head_gradient if last > first else 0)

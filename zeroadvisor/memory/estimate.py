"""The public entry point: ``estimate(config, model, shape, cluster, accounting)``."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# The cluster type and its bounds (memory/cluster.py; the GPU count's in config/limits.py), here too for the
# estimate's callers (__all__ below).
from zeroadvisor.config.limits import MAX_GPUS
from zeroadvisor.deepspeed.settings import Config, DeepSpeedSettings, as_settings
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory import host as host_memory
from zeroadvisor.memory.activation_offload import offloads_uncounted
from zeroadvisor.memory.allocator import AllocatorConf, fragmentation_term
from zeroadvisor.memory.assumed import AssumedInput, activations_unknown, shape_assumptions
from zeroadvisor.memory.autocast import Autocast, autocast_notes, autocast_terms, read_autocast
from zeroadvisor.memory.buffers import (
    ALLREDUCE_COPY_KEY,
    CONTEXT_KEY,
    CUDA_CONTEXT_BYTES,
    OVERHEAD_ASSUMPTION,
    buffer_terms,
    gathered_terms,
    largest_layer,
)
from zeroadvisor.memory.cluster import MAX_MEMORY_BYTES, Cluster, check_memory
from zeroadvisor.memory.features2025 import Features2025, read_features, superoffload_terms, uncounted_features
from zeroadvisor.memory.generation import KEY as GENERATION_KEY
from zeroadvisor.memory.generation import (
    SYNC_KEY,
    asleep_between_steps,
    generation_terms,
    held_scores_terms,
    rollout_moment,
    sleeping_vllm_terms,
)
from zeroadvisor.memory.groups import GroupPeak, group_peaks
from zeroadvisor.memory.layout_buffers import layout_buffer_terms
from zeroadvisor.memory.method import (
    CRITIC_IN_POLICY_FORWARD,
    activation_spec,
    batch_factor,
    colocated_vllm_pool,
    completion_head_gradient,
    critic_activation_terms,
    critic_spec,
    dpo_reference_pass_terms,
    frozen_at_load,
    kto_kl_terms,
    method_assumptions,
    method_notes,
    method_shape,
    method_terms,
    trainer_refusal,
    value_head_logits_terms,
)
from zeroadvisor.memory.options import Option, Skipped, configured_option, enumerate_options, refusal
from zeroadvisor.memory.padding import PaddedFit, longest_fit
from zeroadvisor.memory.parallel import (
    LocalParameters,
    Parallel,
    hpz_terms,
    local_parameters,
    parallel_activations,
    parallel_notes,
    read_parallel,
    tensor_parallel_largest_layer,
)
from zeroadvisor.memory.phases import FrozenAtLoad, PhaseSplit, SaveInputs, largest_param, load_phase, save_phase
from zeroadvisor.memory.settings import Settings, read_settings
from zeroadvisor.memory.states import (
    STEP1_FREED_KEY,
    STEP12_GRAD_KEY,
    compact_grad_buffer,
    deepspeed_terms,
    largest_trainable,
    paper_terms,
    trainable,
)
from zeroadvisor.memory.step_temporaries import GRAD_KEY as STEP_FP32_GRAD
from zeroadvisor.memory.step_temporaries import KEYS as STEP_KEYS
from zeroadvisor.memory.step_temporaries import (
    boundary_norm_terms,
    client_optimizer_used,
    optim_assumption,
    step_terms,
)
from zeroadvisor.memory.terms import METHOD_ROWS, STATE_ROWS, Term, shown_rows
from zeroadvisor.memory.verdict import DOES_NOT_FIT, FITS, PhasePeak, judge, stated, vllm_share_judgement
from zeroadvisor.memory.vision import image_tokens
from zeroadvisor.model.spec import LoadInputs, ModelSpec, Padding, TrainingShape
from zeroadvisor.units import format_bytes
from zeroadvisor.version import DEEPSPEED_TARGET
from zeroadvisor.vocab import (
    ACCOUNTINGS,
    Accounting,
    Capacity,
    Device,
    Method,
    ModelRole,
    Phase,
    Resource,
    TermKind,
    Verdict,
    uncounted_words,
)

if TYPE_CHECKING:
    from zeroadvisor.memory.activations import Activations


@dataclass(frozen=True, slots=True)
class StageEstimate:
    """One stage/offload option: the train-phase rows per GPU, every phase's peaks, and the verdict. Built once
    (a changed verdict is a new value: dataclasses.replace)."""

    option: Option
    configured: bool
    per_gpu: dict[str, int]  # the train phase (the step's peak), by row
    per_gpu_cpu: int  # host RAM DeepSpeed keeps for one GPU's process while training (offloaded state, buffers)
    per_gpu_nvme: int
    per_node_cpu: int  # that, per node (the runtime allowance and pinned rounding are in the phase peaks)
    per_node_nvme: int
    verdict: Verdict | None  # fits | tight | does-not-fit | unknown (memory/verdict.py stated); None: no capacity
    terms: tuple[Term, ...]  # every phase's terms (Term.phase says which)
    notes: tuple[str, ...] = ()
    phases: dict[Phase, PhasePeak] = field(default_factory=dict)  # load / train / save
    binding_phase: Phase = Phase.TRAIN
    binding_resource: Capacity = Capacity.GPU
    # What the verdict does not cover (vocab.UNCOUNTED_WORDS: activations without a sequence length, host RAM
    # or NVMe not given where the option keeps states there): a "fits" with anything here is "unknown".
    uncounted: tuple[str, ...] = ()
    counted_verdict: Verdict | None = None  # the verdict on what is counted (equal to verdict unless unknown)
    # Dynamic padding (memory/padding.py): where the option does not fit at the maximum length, the longest padded
    # length at which it fits; with --padding longest the verdict is then unknown (the data decides).
    padded: PaddedFit | None = None
    # why "activations" is uncounted: the inputs missing (memory/assumed.py ACTIVATION_INPUTS), for the words
    activations_missing: tuple[str, ...] = ()
    # the train phase's rows with each term at its bound (Term.bound): per_gpu is the expected bytes
    per_gpu_bound: dict[str, int] = field(default_factory=dict)
    # one GPU of each model's own group (memory/groups.py: OpenRLHF's Ray actor groups), judged with this world;
    # binding_group: the group whose GPUs decide the verdict (None: the trained model's own GPUs)
    groups: tuple[GroupPeak, ...] = ()
    binding_group: ModelRole | None = None
    # a colocated vLLM below its floor (memory/verdict.py vllm_share_judgement): (its floor, its share of the card)
    # in bytes, the binding peak and capacity; None where vLLM starts (or the run has none on these GPUs)
    vllm_share: tuple[int, int] | None = None
    # why the trainer itself stops before training with this option whatever its memory (memory/method.py
    # trainer_refusal: a setting its code refuses at this stage, e.g. LLaMA-Factory's 8-bit quantization under
    # ZeRO-3, axolotl's Muon optimizer at every stage); None: it starts
    trainer_refusal: str | None = None

    def uncounted_words(self, short: bool = True) -> list[str]:
        """What the verdict leaves out, one phrase each, naming the inputs that would count it (vocab.py)."""
        return uncounted_words(self.uncounted, self.activations_missing, short)

    @property
    def fits(self) -> bool | None:
        """True unless the verdict is does-not-fit ("tight" fits, inside the headroom); None when unknown."""
        return None if self.verdict in (None, Verdict.UNKNOWN) else self.verdict != DOES_NOT_FIT

    @property
    def comfortable(self) -> bool:
        """Fits with the headroom left free on what is counted: what advice may recommend (its words then say
        what is not counted, report/overview.py recommendation_words)."""
        return self.counted_verdict == FITS

    @property
    def peak_gpu(self) -> int:
        return max(p.gpu for p in self.phases.values()) if self.phases else self.per_gpu["total"]

    @property
    def peak_gpu_bound(self) -> int:
        """The GPU peak's bound: the expected peak (``peak_gpu``) where no term leaves room above it."""
        if self.phases:
            return max(p.bound_of(Capacity.GPU) for p in self.phases.values())
        return max(self.per_gpu_bound.get("total", 0), self.per_gpu["total"])

    @property
    def binding_group_peak(self) -> GroupPeak | None:
        """The model's own group whose GPUs decide the verdict (memory/groups.py); None: the trained model's."""
        return next((g for g in self.groups if g.role == self.binding_group), None)

    @property
    def binding_peak_gpu(self) -> int:
        """The GPU peak that decides the verdict: one GPU of the binding group where one binds, else ``peak_gpu``."""
        group = self.binding_group_peak
        return group.gpu if group is not None else self.peak_gpu

    @property
    def peak_host_per_node(self) -> int:
        return max(p.host_per_node for p in self.phases.values()) if self.phases else self.per_node_cpu

    @property
    def peak_host_phase(self) -> Phase:
        """The phase whose host RAM per node is the peak (load, train or save; the first of equals): a host figure
        measured in the training loop compares with the train phase's, ``phases[TRAIN].host_per_node``."""
        if not self.phases:
            return Phase.TRAIN
        return max(self.phases.values(), key=lambda p: p.host_per_node).phase

    @property
    def train_host_per_node(self) -> int:
        """Host RAM per node while the training loop runs (the train phase's peak)."""
        train = self.phases.get(Phase.TRAIN)
        return train.host_per_node if train is not None else self.per_node_cpu

    @property
    def peak_nvme_per_node(self) -> int:
        return max(p.nvme_per_node for p in self.phases.values()) if self.phases else self.per_node_nvme

    @property
    def rows(self) -> tuple[str, ...]:
        """The rows of ``per_gpu`` in their order: ROWS, with a preference/RL run's model rows (terms.py)."""
        return shown_rows(set(self.per_gpu))

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.option.stage,
            "offload_optimizer": self.option.offload_optimizer,
            "offload_param": self.option.offload_param,
            "configured": self.configured,
            "label": self.option.label,
            "verdict": self.verdict,
            "fits": self.fits,
            "counted_verdict": self.counted_verdict,
            "uncounted": list(self.uncounted),
            "padded_fit": self.padded.to_dict() if self.padded is not None else None,
            "peak_gpu": int(self.peak_gpu),
            "peak_gpu_bound": int(self.peak_gpu_bound),
            "peak_host_per_node": int(self.peak_host_per_node),
            "peak_host_phase": self.peak_host_phase,
            "train_host_per_node": int(self.train_host_per_node),
            "peak_nvme_per_node": int(self.peak_nvme_per_node),
            "binding_phase": self.binding_phase,
            "binding_resource": self.binding_resource,
            "binding_group": self.binding_group,
            "vllm_share": None if self.vllm_share is None else {"floor": int(self.vllm_share[0]),
                                                                "share": int(self.vllm_share[1])},
            "trainer_refusal": self.trainer_refusal,
            "groups": [{"role": g.role, "gpus": g.gpus, "gpu": int(g.gpu), "gpu_bound": int(g.gpu_bound),
                        "shares": [str(role) for role in g.shares],
                        "terms": [term_dict(t) for t in g.terms]} for g in self.groups],
            "phases": {name: peak.to_dict() for name, peak in self.phases.items()},
            "per_gpu": {row: int(self.per_gpu[row]) for row in self.rows},
            "per_gpu_bound": {row: int(self.per_gpu_bound.get(row, self.per_gpu[row])) for row in self.rows},
            "per_node_cpu": int(self.per_node_cpu),
            "per_node_nvme": int(self.per_node_nvme),
            "terms": [term_dict(t) for t in self.terms],
            "notes": list(self.notes),
        }


def term_dict(t: Term) -> dict[str, Any]:
    """A term as JSON: phase, row, device, bytes (expected), bound (at least bytes), key, what, formula, source,
    kind."""
    return {"phase": t.phase, "row": t.row, "device": t.device, "bytes": int(t.nbytes), "bound": int(t.upper),
            "key": t.key, "what": t.what, "formula": t.formula, "source": t.source, "kind": t.kind}


@dataclass(frozen=True, slots=True)
class Estimate:
    """Every stage/offload option of one config, model, shape and cluster. Built once: what a caller adds (an
    assumption, an assumed input) makes a new value (dataclasses.replace)."""

    model: ModelSpec
    shape: TrainingShape
    accounting: Accounting
    cluster: Cluster
    settings: Settings
    stages: tuple[StageEstimate, ...]
    skipped: tuple[Skipped, ...]
    assumptions: tuple[str, ...]
    assumed: tuple[AssumedInput, ...] = ()  # inputs nobody gave (memory/assumed.py)
    parallel: Parallel = field(default_factory=Parallel)  # the layout (memory/parallel.py)

    @property
    def release(self) -> str:
        """The DeepSpeed release whose defaults and allocations were read (the schema's active release: flows.estimate
        reads a pinned range's newest), which the accounting line names: the settings' one reading of it."""
        return self.settings.release

    @property
    def configured(self) -> StageEstimate | None:
        return next((st for st in self.stages if st.configured), None)

    def stage(self, stage: int, offload_optimizer: str = Device.NONE,
              offload_param: str = Device.NONE) -> StageEstimate:
        """The option's estimate; the devices as a Device or its text ("cpu")."""
        wanted = Option(stage, Device(offload_optimizer), Device(offload_param))
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
            "trainable_parameters": trainable(m),
            "peft": m.peft,
            # a vision-language model's tower (memory/vision.py): its parameters, whether any of them trains (its
            # activations kept) and the image tokens it was costed at; null for a text model
            "vision_tower": None if m.vision is None else {
                "parameters": m.vision.parameters, "trains": m.vision_trains,
                "image_tokens": image_tokens(m, self.shape) if m.vision_trains else None},
            "source": m.source,
            "notes": list(m.notes),  # what the model description says about its own counts (ModelSpec.notes)
            "precision": self.settings.precision,
            "optimizer": self.settings.optimizer_label,
            "micro_batch_size": self.settings.micro_batch,
            "sequence_length": self.shape.sequence_length,
            "target_length": self.shape.target_length,
            "image_tokens": self.shape.image_tokens,
            "vision_checkpointing": self.shape.vision_checkpointing,
            "padding": self.shape.padding or Padding.MAX_LENGTH,  # as costed: not given is max_length
            "activation_checkpointing": self.shape.activation_checkpointing,
            "flash_attention": self.shape.flash_attention,
            "assumptions": list(self.assumptions),
        }
        return {
            "model": model,
            "accounting": self.accounting,
            "cluster": {**self.cluster.to_dict(), "parallel": self.parallel.to_dict()},
            "stages": [st.to_dict() for st in self.stages],
            "assumed": [a.to_dict() for a in self.assumed],
            "skipped": [{"stage": k.option.stage, "offload_optimizer": k.option.offload_optimizer,
                         "offload_param": k.option.offload_param, "reason": k.reason} for k in self.skipped],
        }


def estimate(config: Config, model: ModelSpec, shape: TrainingShape | None = None,
             cluster: Cluster | None = None, accounting: str = Accounting.DEEPSPEED) -> Estimate:
    """Memory per GPU, host RAM and NVMe per node for every stage/offload option of ``config`` (a parsed config,
    or what DeepSpeed reads of one: deepspeed/settings.py).

    ``accounting="deepspeed"``: what DeepSpeed 0.19.8 allocates, plus buffers, gathered
    parameters, activations and an overhead allowance. ``accounting="paper"``: the ZeRO
    paper's model states (2 + 2 + K bytes/param) only; the other rows are 0.
    """
    if accounting not in ACCOUNTINGS:
        raise ValueError(f"accounting must be one of {', '.join(ACCOUNTINGS)}, got {accounting!r}")
    accounting = Accounting(accounting)
    if not isinstance(model.parameters, int) or model.parameters < 1:
        raise ValueError(f"model.parameters must be a positive integer, got {model.parameters!r}")
    shape = method_shape(shape or TrainingShape())  # GRPO: prompt + completion where no length is given
    cluster = cluster or Cluster()
    ds = as_settings(config)  # what DeepSpeed reads of the config, once (deepspeed/settings.py)
    layout = read_parallel(ds, cluster.gpus, shape)
    s = read_settings(ds, model, layout.batch_world(), shape)
    # ZeRO partitions over the data (x sequence) group the parameters this GPU holds after the tensor,
    # pipeline and expert splits (memory/parallel.py); the stage-1/2 parameter layout no longer applies.
    local = local_parameters(model, layout)
    spec, tp_largest = _state_spec(model, layout)
    assumptions = list(s.assumptions) + list(local.notes) + parallel_notes(ds, layout)
    if tp_largest is not None:
        assumptions.append(f"largest layer under tensor parallel {layout.tensor}: max(V·h, h·ffn/{layout.tensor}, "
                           f"h·q/{layout.tensor}) = {tp_largest:,} parameters (AutoTP shards the block Linears; the "
                           "embedding and LM head counted whole)")
    configured, config_notes = configured_option(s)
    assumptions += config_notes
    assumed = list(s.assumed)
    if accounting == Accounting.DEEPSPEED:  # the paper's accounting counts model states alone
        assumed += shape_assumptions(model, shape, configured.stage if s.configured else None)
        assumed += method_assumptions(shape.method, model, shape.liger_kernel)  # guessed, defaulted settings
        if shape.optim is None and client_optimizer_used(s):
            assumed.append(optim_assumption())
    options, skipped = enumerate_options(s)

    # torch_autocast on an fp32 model: the activations in the autocast dtype (memory/autocast.py)
    ac = read_autocast(ds, s.precision) if accounting == Accounting.DEEPSPEED else None
    # a paired method (DPO, ORPO, CPO, reward) puts chosen and rejected through the policy: 2 sequences a sample
    act = parallel_activations(activation_spec(shape.method, model), shape, s.micro_batch * batch_factor(shape.method),
                               ac.dtype if ac else s.precision, layout)
    assumptions += method_notes(shape.method, ds.optimizer.type is not None, model, shape.liger_kernel)
    if ac:
        assumptions += autocast_notes(ac)
    # A verdict that leaves a row out says so (no unqualified "fits" while activations are unknown).
    activations_uncounted = accounting == Accounting.DEEPSPEED and activations_unknown(assumed)
    uncounted: tuple[str, ...] = ("activations",) if activations_uncounted else ()
    # expert parallel > 1 (AutoEP's autoep_size or --expert-parallel) on a model whose experts are unknown: which
    # parameters are split by ep, and their states over data / ep ranks, cannot be counted (memory/parallel.py)
    if layout.expert > 1 and not local.experts and model.num_experts != 0:
        uncounted += ("experts",)
    # AutoEP's expert tensor parallelism splits each expert further: not modelled, so no number is stated for it
    etp = ds.expert_parallel.expert_tensor_parallel_size if ds.expert_parallel.enabled else 1
    if etp != 1 and etp is not None:
        uncounted += ("expert_tensor_parallel",)
    # each input the activation term lacks, both where both are (the assumptions name the first alone)
    missing = (("sequence_length",) if not shape.sequence_length else ()) + (
        ("architecture",) if not (model.num_layers and model.hidden_size) else ()) if activations_uncounted else ()
    assumptions += _accounting_assumptions(accounting, act, layout.data, cluster.gpus)

    run = _Run(model, shape, cluster, accounting, s, layout, local, spec, act, configured, SaveInputs.of(ds),
               phase_split(model, layout, local, cluster), frozenset(assumptions), uncounted, missing,
               AllocatorConf(cluster.alloc_conf), ac, read_features(ds), ds.optimizer.type is not None,
               _accumulation(ds, layout))
    stages, padding = _dynamic_padding(run, [_stage_estimate(run, option) for option in options])
    return Estimate(model, shape, accounting, cluster, s, tuple(stages), tuple(skipped), tuple(assumptions),
                    (*assumed, *padding, *_allocator_assumed(run, stages)), layout)


def _accumulation(ds: DeepSpeedSettings, layout: Parallel) -> int:
    """The gradient accumulation steps DeepSpeed ends with (1 where the config leaves them open): GRPO's and TRL
    PPO's rollout batch per GPU is a multiple of it (memory/generation.py)."""
    resolved = ds.batch.resolve(layout.batch_world())
    if resolved is None:
        return 1
    try:
        return max(int(resolved[2]), 1)
    except (OverflowError, ValueError):
        return 1


def _allocator_assumed(run: _Run, stages: list[StageEstimate]) -> list[AssumedInput]:
    """PYTORCH_CUDA_ALLOC_CONF, where nobody said it and expandable segments would change the configured run's
    verdict (memory/allocator.py): the default allocator is costed, and the note says what setting it does."""
    configured = next((st for st in stages if st.configured), None)
    if run.alloc.given or configured is None or run.accounting != Accounting.DEEPSPEED \
            or run.cluster.gpu_memory is None:  # no GPU verdict for it to decide
        return []
    expandable = _stage_estimate(dataclasses.replace(run, alloc=AllocatorConf("expandable_segments:True")),
                                 configured.option)
    if expandable.counted_verdict == configured.counted_verdict:
        return []
    return [AssumedInput.of("alloc_conf", "unset", (
        f"costed with torch's default caching allocator ({configured.counted_verdict}); with "
        f"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in the run's environment the fragmentation allowance "
        f"is a 2 MiB page per re-allocated tensor kind and the run is {expandable.counted_verdict}"))]


def _dynamic_padding(run: _Run, stages: list[StageEstimate]) -> tuple[list[StageEstimate], list[AssumedInput]]:
    """Where the configured option does not fit at the maximum length but fits at a shorter padded one
    (memory/padding.py): with --padding longest its verdict becomes unknown, with that length (the stages with
    the configured one so judged); with the padding not given it is the assumed input that changes the verdict
    (costed as max_length). Only the configured run: the other options and the search's changes are judged at
    the maximum, where they fit whatever the data."""
    configured = next((st for st in stages if st.configured), None)
    if configured is None or configured.counted_verdict != DOES_NOT_FIT or run.shape.padding == Padding.MAX_LENGTH \
            or run.accounting != Accounting.DEEPSPEED or not run.shape.sequence_length or not run.act.nbytes:
        return stages, []
    option = configured.option

    def judge(shape: TrainingShape) -> tuple[Verdict | None, int]:
        shorter = dataclasses.replace(run, shape=shape, act=parallel_activations(
            activation_spec(shape.method, run.model), shape, run.s.micro_batch * batch_factor(shape.method),
            run.s.precision, run.layout))
        st = _stage_estimate(shorter, option)
        return st.counted_verdict, st.binding_peak_gpu  # a model's own group where one binds (memory/groups.py)

    fit = longest_fit(run.model, run.shape, judge)
    if fit is None:  # not even one token per sample fits: the length does not decide it
        return stages, []
    if run.shape.padding == Padding.LONGEST:
        judged = dataclasses.replace(configured, padded=fit, verdict=stated(configured.counted_verdict,
                                                                            configured.uncounted, shorter_fits=True))
        return [judged if st is configured else st for st in stages], []
    return stages, [AssumedInput.of("padding", Padding.MAX_LENGTH.value,
                            f"every batch is padded to the full length ({fit.maximum_tokens()}), where the run does "
                            f"not fit; padded dynamically to each batch's longest sample (--padding longest, the "
                            f"Hugging Face data collators' default) it {fit.words(short=True)}")]


def _state_spec(model: ModelSpec, layout: Parallel) -> tuple[ModelSpec, int | None]:
    """The model as the state terms cost it under ``layout``, and the largest layer under tensor parallel
    (None without it)."""
    spec = model if layout.trivial else dataclasses.replace(model, parameter_numels=None)
    tp_largest = tensor_parallel_largest_layer(model, layout)
    if tp_largest is not None:  # stage-3 gathers the tensor rank's shard of a block Linear, the embedding whole
        spec = dataclasses.replace(spec, largest_layer_parameters=tp_largest)
    return spec, tp_largest


def _accounting_assumptions(accounting: Accounting, act: Activations, data_parallel: int, gpus: int) -> list[str]:
    """What the accounting counts and assumes, for every option alike."""
    if accounting == Accounting.DEEPSPEED:
        assumptions = [*act.notes, OVERHEAD_ASSUMPTION,
                       ("host RAM includes a runtime allowance per GPU process (Python, torch, DeepSpeed, "
                        "transformers, the CUDA runtime and, while training, the Trainer's dataloader_num_workers "
                        "worker processes) and pinned buffers as torch's CachingHostAllocator sizes "
                        "them (a power of two)")]
    else:
        assumptions = [("paper accounting: model states only (ZeRO paper §5, Table 1); gathered parameters, "
                        "buffers, activations and overhead are 0")]
    if data_parallel == 1:
        assumptions.append(f"{'1 GPU' if gpus == 1 else 'data-parallel degree 1'}: ZeRO partitions over the "
                           "data-parallel degree, so stages 1-3 partition nothing")
    return assumptions


@dataclass(frozen=True, slots=True)
class _Run:
    """What every option's estimate shares: the inputs, the settings and the layout, read once."""

    model: ModelSpec
    shape: TrainingShape
    cluster: Cluster
    accounting: Accounting
    s: Settings
    layout: Parallel
    local: LocalParameters
    spec: ModelSpec  # the model as the state terms cost it (_state_spec)
    act: Activations
    configured: Option
    save: SaveInputs
    split: PhaseSplit | None
    seen_notes: frozenset[str]  # the estimate's assumptions: an option's notes leave them out
    uncounted: tuple[str, ...]
    activations_missing: tuple[str, ...]  # StageEstimate.activations_missing
    alloc: AllocatorConf = field(default_factory=AllocatorConf)  # PYTORCH_CUDA_ALLOC_CONF (memory/allocator.py)
    autocast: Autocast | None = None  # torch_autocast on an fp32 model (memory/autocast.py)
    features: Features2025 = field(default_factory=Features2025)  # SuperOffload, ZenFlow, ... (memory/features2025.py)
    # the config has an optimizer block: TRL <= 1.9.0 copies it to the reference engine (memory/method.py)
    optimizer_block: bool = False
    accumulation: int = 1  # gradient accumulation steps (_accumulation): the rollout batch's multiple


def _stage_estimate(run: _Run, option: Option) -> StageEstimate:
    """One option: its terms, rows per GPU and node, every phase's peak and the verdict."""
    notes: list[str] = []
    ds_terms, paper = _state_terms(run, option, notes)
    # stage 1/2: the step's gradient partition is the step's, counted beyond the activations (memory/states.py);
    # stage 1's gradients outside the partition stay a model state after backward and are freed before the step
    held12 = max((t.nbytes for t in ds_terms if t.key == STEP12_GRAD_KEY), default=0)
    freed1 = sum(t.nbytes for t in ds_terms if t.key == STEP1_FREED_KEY)
    ds_terms = [t for t in ds_terms if t.key != STEP12_GRAD_KEY]
    terms = _train_terms(run, option, ds_terms, paper, notes, held12, freed1)
    per_gpu, host, nvme, host_overhead = _rows(terms)
    per_gpu_bound = _gpu_rows(terms, bound=True)
    g = run.cluster.gpus_on_a_node
    per_node_cpu = host * g
    per_node_nvme = nvme * g
    train_host = (host + host_overhead) * g
    peaks = [PhasePeak(Phase.TRAIN, per_gpu["total"], train_host, per_node_nvme, per_gpu_bound["total"])]
    if run.accounting == Accounting.DEEPSPEED:
        # the step's and the rollout's transients (the vLLM weight sync's gather is one, in its own row)
        freed = (*STEP_KEYS, SYNC_KEY)
        transient = per_gpu["activations"] + sum(t.nbytes for t in terms if t.key in freed)
        transient_bound = per_gpu_bound["activations"] + sum(t.upper for t in terms if t.key in freed)
        asleep, asleep_bound = asleep_between_steps(run.shape.method, terms)  # vLLM asleep during the save
        transient, transient_bound = transient + asleep, transient_bound + asleep_bound
        beside = frozen_at_load(run.shape.method, run.model, dict(run.shape.auxiliary_specs), terms)
        phase_peaks, phase_terms = _around_training(run.model, run.s, option, run.cluster, run.shape.load, per_gpu,
                                                    train_host, per_node_nvme, run.save, notes, run.split,
                                                    transient, (per_gpu_bound["total"], transient_bound), beside)
        peaks = [phase_peaks[0], *peaks, phase_peaks[1]]
        terms = terms + phase_terms
    capacities = run.cluster.capacities()
    # the other models' own GPUs (OpenRLHF's Ray groups): a group that cannot hold its model fails the run
    groups = group_peaks(run.shape.method, run.model, dict(run.shape.auxiliary_specs), run.s, option, run.shape,
                         run.layout, notes) if run.accounting == Accounting.DEEPSPEED else []
    group_phases = [PhasePeak(Phase.TRAIN, g.gpu, 0, 0, g.gpu_bound, g.role) for g in groups]
    judgement = judge(peaks + group_phases, capacities, run.cluster.headroom)
    # a colocated vLLM below its floor stops the run when the trainer builds it, whatever the training memory does
    pool = colocated_vllm_pool(run.shape.method, run.model, run.shape.sequence_length, run.cluster.gpu_memory) \
        if run.accounting == Accounting.DEEPSPEED else None
    short = vllm_share_judgement(pool[0].nbytes, pool[1]) if pool is not None else None
    judgement = short or judgement  # a feature that lowers the training memory cannot lift vLLM's floor (below)
    # the 2025 features whose memory is not counted (memory/features2025.py): a "fits" is then unknown, and a
    # "does not fit" too where the feature can only lower what is counted
    features, lowers = uncounted_features(run.features, option, run.shape.activation_checkpointing,
                                          run.layout.tensor)
    if offloads_uncounted(run.shape.activation_offload, run.shape.activation_checkpointing):
        features, lowers = (*features, "activation_offload"), True  # costed as if the activations stayed: a bound
    uncounted = run.uncounted + features + _unchecked_storage(option, capacities)
    refused = refusal(run.s, option)
    if refused:
        notes.insert(0, f"DeepSpeed {DEEPSPEED_TARGET} does not run this configuration: {refused}")
    trainer_refused = trainer_refusal(run.shape.method, run.model, option, run.s.release,
                                      (run.s.micro_batch, run.accumulation, run.cluster.gpus), run.shape.liger_kernel)
    if trainer_refused:
        notes.insert(0, f"the trainer does not run this configuration: {trainer_refused}")
    option_notes = [n for n in dict.fromkeys(notes) if n not in run.seen_notes]
    # the step's fp32 gradient (stage 3) sits in the gradients row: its bytes are part of the difference
    step_grad = [t for t in terms if t.key == STEP_FP32_GRAD]
    stage_notes = option_notes + _differences(ds_terms + step_grad, paper, run.layout.data)
    verdict = stated(judgement.verdict, uncounted, lowers and short is None)
    return StageEstimate(option, run.s.configured and option == run.configured, per_gpu, host, nvme,
                         per_node_cpu, per_node_nvme, verdict, tuple(terms), tuple(stage_notes),
                         {p.phase: p for p in peaks}, judgement.phase, judgement.resource, uncounted,
                         judgement.verdict, activations_missing=run.activations_missing, per_gpu_bound=per_gpu_bound,
                         groups=tuple(groups), binding_group=judgement.group,
                         vllm_share=(judgement.peak, judgement.capacity or 0) if short is not None else None,
                         trainer_refusal=trainer_refused)


def _unchecked_storage(option: Option, capacities: dict[Capacity, int | None]) -> tuple[str, ...]:
    """Host RAM and NVMe the option keeps its offloaded states in, where that capacity was not given: then its
    verdict cannot be "fits" (memory/verdict.py stated). Host RAM a run needs anyway (loading, the runtime)
    is not asked for: it binds only where offload puts the states there."""
    devices = {option.offload_optimizer, option.offload_param}
    out: list[str] = []
    if Device.CPU in devices and capacities[Capacity.HOST] is None:
        out.append("host")
    if Device.NVME in devices and capacities[Capacity.NVME] is None:
        out.append("nvme")
    return tuple(out)


def _state_terms(run: _Run, option: Option, notes: list[str]) -> tuple[list[Term], list[Term]]:
    """The model states as DeepSpeed allocates them and as the ZeRO paper counts them."""
    s, local, spec, N = run.s, run.local, run.spec, run.layout.data
    # the optimizer's parameters on this GPU: the PEFT adapters (model/peft.py), else the dense share
    dense = trainable(run.model) if run.model.trainable_parameters is not None else local.dense
    ds_terms = deepspeed_terms(s, option, dense, N, spec, notes)
    paper = paper_terms(s, option, dense, N, spec, notes)
    if local.experts:  # a separate param group, partitioned over the expert-data-parallel group
        ds_terms += deepspeed_terms(s, option, local.experts, run.layout.expert_data, spec, notes)
        paper += paper_terms(s, option, local.experts, run.layout.expert_data, spec, notes)
    ds_terms += hpz_terms(s.precision, option.stage, option.offload_param, local.total, N, run.layout.hpz)
    return ds_terms, paper


def _train_terms(run: _Run, option: Option, ds_terms: list[Term], paper: list[Term], notes: list[str],
                 held12: int = 0, freed1: int = 0) -> list[Term]:
    """The train phase's terms: the paper's model states alone, or DeepSpeed's with what else it allocates.
    ``held12``: the stage-1/2 step's gradient partition, counted in the step (memory/step_temporaries.py);
    ``freed1``: stage 1's gradients outside the partition, freed before the step like the activations."""
    if run.accounting != Accounting.DEEPSPEED:
        return paper
    s, spec, P, N = run.s, run.spec, run.local.total, run.layout.data
    head_gradient = run.act.head_gradient or completion_head_gradient(run.shape.method, run.model, s,
                                                                      run.shape.liger_kernel)
    terms = (ds_terms + gathered_terms(s, option, P, N, spec, notes, run.autocast, head_gradient)
             + buffer_terms(s, option, P, N, spec, notes, run.cluster.gpus_on_a_node, run.autocast,
                            run.act.head_share)
             + layout_buffer_terms(run.model, run.shape, s.micro_batch, s.precision, run.layout)
             # the reference / reward / critic models and vLLM's share, as the trainer prepares them for this option
             + method_terms(run.shape.method, run.model, dict(run.shape.auxiliary_specs), s, option, N,
                            run.cluster.gpu_memory, run.optimizer_block, notes, run.shape.liger_kernel,
                            run.layout, run.shape.sequence_length))
    if run.act.nbytes:
        terms.append(Term("activations", Resource.GPU, run.act.nbytes, "activations", "activations", "Korthikanti",
                          "memory/activations.py"))
    # PPO's critic: its activations beside the policy's where its trainer runs both in one backward (memory/method.py)
    terms += critic_activation_terms(run.shape, run.model, s.micro_batch, run.autocast.dtype if run.autocast
                                     else s.precision, run.layout, run.act.nbytes)
    # a value-head reward model's discarded logits at the end of its forward (memory/method.py)
    terms += value_head_logits_terms(run.shape, run.model, s.micro_batch, run.layout, run.act.per_layer,
                                     run.act.head_share)
    # KTO's KL forward, where its trainer runs it beside the policy's graph (memory/method.py)
    terms += kto_kl_terms(run.shape, run.model, s.micro_batch, run.layout, run.act.backward_kept)
    # DPO's and KTO's loss side above the backward's (the reference pass, the held logits; memory/method.py)
    terms += dpo_reference_pass_terms(run.shape, run.model, s.micro_batch, run.layout, B.nbytes(s.precision),
                                      run.act.loss_headroom)
    if run.autocast:
        # zero.Init (stage 3, on by default; memory/phases.py) replaces F.linear for the process
        zero3_linear = option.stage == 3 and run.shape.load.zero_init is not False
        terms += autocast_terms(run.autocast, run.model, run.shape, s.micro_batch, run.layout, zero3_linear)
    # the optimizer's step runs after backward has freed the activations (memory/step_temporaries.py)
    stepped = trainable(run.model) if run.model.trainable_parameters is not None else run.local.dense
    largest = largest_trainable(run.model, largest_param(run.model) or 0)
    step = step_terms(s, option, stepped, N, run.act.nbytes, run.shape.optim, notes, largest, held12, freed1)
    step_extra = sum(t.nbytes for t in step)
    if option.stage in (1, 2):
        # backward's reduction copy (memory/buffers.py allreduce_bucket) and the step are moments apart: the copy
        # counts only by what it exceeds the step's own excess over the activations, so the train peak is the larger
        terms = _beyond_the_step(terms, step_extra)
    terms += step
    # stage 1/2 offload: the boundary's fp64 norm copy, in backward's reduce hooks (memory/step_temporaries.py);
    # an untied LM head (trained whole) is the first large gradient backward reduces, with the layers' tensors live.
    # It is a moment of its own too: beyond the activations, the step's excess and the reduction copy
    untied_head = (run.model.lm_head is not False and run.model.tied_embeddings is False
                   and (run.model.trainable_parameters is None or run.model.frozen is not None))
    moments = run.act.nbytes + step_extra + _reduce_copy(terms)
    terms += boundary_norm_terms(s, option, stepped, N, largest, moments,
                                 run.act.backward_kept if untied_head else 0, compact_grad_buffer(s))
    terms += superoffload_terms(run.features, s, option, P, N, spec,
                                largest_param(run.model) or largest_layer(spec, []))  # a module's bound its params
    rollout, synced = _rollout_terms(run, option, terms)
    terms += rollout
    # vLLM colocated in sleep mode: its share only while it generates, and through the weight sync, whose gather
    # replaces the step's transients, gathered layers included (memory/generation.py)
    terms = sleeping_vllm_terms(run.shape.method, terms, _step_transients(terms), run.model.parameters, synced)
    terms += _allowance_terms(terms, run.alloc)
    terms += host_memory.runtime_baseline_terms(Phase.TRAIN, dataloader_workers=run.cluster.dataloader_workers)
    terms += host_memory.pinned_rounding_terms(host_memory.run_pinned_buffers(  # PEFT: trainable parameters
        s, option, P, N, run.model, largest_param(run.model)))
    # the layer inputs an offloader moved out of the activations above (memory/activation_offload.py)
    terms += host_memory.offloaded_input_terms(run.shape.activation_offload, run.act.offloaded)
    return terms


def _beyond_the_step(terms: list[Term], step_extra: int) -> list[Term]:
    """``terms`` with stage 1/2's reduction copy expected only beyond ``step_extra`` (its bound kept)."""
    def beyond(t: Term) -> Term:
        if t.key != ALLREDUCE_COPY_KEY or t.device != Resource.GPU or not step_extra or not t.nbytes:
            return t
        return dataclasses.replace(t, nbytes=max(0, t.nbytes - step_extra), kind=TermKind.BOUND, bound=t.upper)

    return [beyond(t) for t in terms]


def _reduce_copy(terms: list[Term]) -> int:
    """The GPU bytes of backward's reduction copies (memory/buffers.py ALLREDUCE_COPY_KEY)."""
    return sum(t.nbytes for t in terms if t.key == ALLREDUCE_COPY_KEY and t.device == Resource.GPU)


def _rollout_terms(run: _Run, option: Option, terms: list[Term]) -> tuple[list[Term], tuple[int, int] | None]:
    """An online method's rollout (memory/generation.py): live instead of the training step's transients (its
    activations and the optimizer step's temporaries; with the policy gathered whole, its gathered layers too),
    so only what it holds beyond them is added: the train phase's peak is the larger moment. With it, where the
    moment is the vLLM weight sync, its gather and the step's transients it replaces (sleeping_vllm_terms)."""
    setup = run.shape.method
    critic = (critic_spec(setup, run.model, dict(run.shape.auxiliary_specs), []).parameters
              if setup.method == Method.PPO and setup.trainer in CRITIC_IN_POLICY_FORWARD else 0)
    moment = rollout_moment(setup, run.model, run.s, option, run.spec, run.local.total, run.layout.data,
                            run.shape.sequence_length, run.accumulation, run.layout.batch_world(), critic)
    held = held_scores_terms(setup, run.model, run.s, run.accumulation)  # TRL PPO's scores, through the update
    if moment is None:
        return held, None
    step_rows = ("activations", "gathered_parameters") if moment.whole_gather else ("activations",)
    step = _step_transients(terms, step_rows)
    synced = (moment.nbytes, step) if moment.key == SYNC_KEY else None
    return held + generation_terms(moment, step), synced


def _step_transients(terms: list[Term], rows: tuple[str, ...] = ("activations",)) -> int:
    """What the training step holds on the GPU that a rollout moment does not: its activations (``rows``) and the
    optimizer step's temporaries."""
    return sum(t.nbytes for t in terms if t.device == Resource.GPU
               and (t.row in rows or t.key in STEP_KEYS) and t.key not in (GENERATION_KEY, SYNC_KEY))


def _rows(terms: list[Term]) -> tuple[dict[str, int], int, int, int]:
    """The train phase's expected bytes per GPU by row, and per GPU process on the host (DeepSpeed's own, the
    runtime's overhead) and on NVMe."""
    host = nvme = host_overhead = 0  # host: what DeepSpeed keeps there; overhead: runtime, pinned rounding
    for term in terms:
        if term.device == Resource.CPU and term.row == "overhead":
            host_overhead += term.nbytes
        elif term.device == Resource.CPU:
            host += term.nbytes
        elif term.device != Resource.GPU:
            nvme += term.nbytes
    return _gpu_rows(terms), host, nvme, host_overhead


def _gpu_rows(terms: list[Term], bound: bool = False) -> dict[str, int]:
    """The GPU bytes by row (``bound``: each term at its bound), with the model states and the total."""
    # a method row (reference model, vLLM, ...) is a row wherever the run has its term, on any device
    per_gpu = dict.fromkeys(shown_rows({t.row for t in terms if t.row in METHOD_ROWS}), 0)
    for term in terms:
        if term.device == Resource.GPU:
            per_gpu[term.row] += term.upper if bound else term.nbytes
    per_gpu["model_states"] = sum(per_gpu[row] for row in STATE_ROWS)
    per_gpu["total"] = sum(per_gpu[row] for row in ("model_states", "gathered_parameters", "buffers",
                                                    "activations", "overhead", *METHOD_ROWS) if row in per_gpu)
    return per_gpu


def _allowance_terms(terms: list[Term], alloc: AllocatorConf) -> list[Term]:
    """The GPU memory no allocation in DeepSpeed's code accounts for: allowances, not measurements."""
    return [
        Term("overhead", Resource.GPU, CUDA_CONTEXT_BYTES, CONTEXT_KEY,
             "CUDA context, NCCL and cuBLAS workspaces", "1 GiB per process",
             "memory/buffers.py CUDA_CONTEXT_BYTES", kind=TermKind.ALLOWANCE),
        fragmentation_term(terms, alloc),
    ]


def phase_split(model: ModelSpec, layout: Parallel, local: LocalParameters, cluster: Cluster) -> PhaseSplit | None:
    """The rank's share around training (memory/phases.py PhaseSplit); None for the whole model on all GPUs.
    A PEFT model's frozen base is costed whole on every rank (states.py frozen_terms), so it is not split."""
    if layout.trivial or model.trainable_parameters is not None:
        return None
    built = local_parameters(model, dataclasses.replace(layout, tensor=1)).total  # AutoTP shards after loading
    return PhaseSplit(local.total, built, layout.data, min(layout.tensor, cluster.gpus_on_a_node))


def _around_training(model: ModelSpec, s: Settings, option: Option, cluster: Cluster, load: LoadInputs,
                     per_gpu: dict[str, int], train_host: int, per_node_nvme: int, save: SaveInputs,
                     notes: list[str], split: PhaseSplit | None = None, transient: int = 0,
                     train_bound: tuple[int, int] | None = None,
                     beside: FrozenAtLoad | None = None) -> tuple[tuple[PhasePeak, PhasePeak], list[Term]]:
    """The load and save phases' peaks and terms (memory/phases.py), with the same allowances as training.

    Load: the model handed to deepspeed.initialize, with the CUDA context and each process's runtime.
    Save: checkpointing between steps, on top of the training state less ``transient``: the activations and
    the optimizer step's temporaries (both freed by the end of the step), and vLLM's row where it sleeps between
    generations. ``train_bound``: the train phase's GPU
    total and those transients at their bounds (None: the expected ones).
    """
    loaded = load_phase(model, s, option, cluster, load, split, beside)
    saved = save_phase(model, s, option, cluster, save, split)
    notes += loaded.notes + saved.notes
    g = cluster.gpus_on_a_node
    runtime = host_memory.runtime_baseline_terms(Phase.LOAD)
    runtime_host = sum(t.nbytes for t in runtime) * g
    load_gpu = loaded.peak_gpu + CUDA_CONTEXT_BYTES
    load_peak = PhasePeak(Phase.LOAD, load_gpu, loaded.peak_host_per_node + runtime_host, loaded.peak_nvme_per_node,
                          loaded.peak_gpu_bound + CUDA_CONTEXT_BYTES)
    between_steps = per_gpu["total"] - transient
    total_bound, transient_bound = train_bound or (per_gpu["total"], transient)
    save_peak = PhasePeak(Phase.SAVE, between_steps + saved.peak_gpu, train_host + saved.peak_host_per_node,
                          per_node_nvme + saved.peak_nvme_per_node,
                          total_bound - transient_bound + saved.peak_gpu_bound)
    context = Term("overhead", Resource.GPU, CUDA_CONTEXT_BYTES, CONTEXT_KEY, "CUDA context, NCCL and cuBLAS "
                   "workspaces", "1 GiB per process", "memory/buffers.py CUDA_CONTEXT_BYTES", phase=Phase.LOAD,
                   kind=TermKind.ALLOWANCE)
    node_runtime = [Term(t.row, t.device, t.nbytes * g, t.key, f"{t.what} (× {g} local ranks)",
                         f"{t.formula} × {g}", t.source, phase=Phase.LOAD, kind=t.kind) for t in runtime]
    return (load_peak, save_peak), [*loaded.terms(), context, *node_runtime, *saved.terms()]


def _differences(ds: list[Term], paper: list[Term], N: int) -> list[str]:
    """Per model-state row: why DeepSpeed's GPU bytes differ from the paper's (empty when equal)."""
    notes: list[str] = []
    for row in STATE_ROWS:
        ds_row = [t for t in ds if t.row == row and t.device == Resource.GPU]
        pp_row = [t for t in paper if t.row == row and t.device == Resource.GPU]
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
        parts.extend(f"- the paper's {t.what} ({t.formula}) is not part of DeepSpeed's peak for this row"
                     for t in pp_row if t.key not in ds_keys and t.nbytes)
        reason = "; ".join(parts) or "different placement of the same bytes"
        notes.append(f"{row}: DeepSpeed {format_bytes(ds_total)} vs paper {format_bytes(pp_total)} per GPU: {reason}")
    return notes


__all__ = [
    "MAX_GPUS",
    "MAX_MEMORY_BYTES",
    "Cluster",
    "Estimate",
    "StageEstimate",
    "check_memory",
    "estimate",
    "phase_split",
    "term_dict",
]

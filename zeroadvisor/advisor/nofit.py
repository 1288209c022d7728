"""When nothing fits on the hardware given: the ways out in proportion, cheapest first, each priced with the
same estimate as the configured run.

No stage, offload, checkpointing, micro batch or parallel layout change fits (the search, advisor/search.py,
found none). What is left changes the training method or the hardware, and the answer lists each way that
fits, in this order (:data:`CHEAPEST_FIRST`; docs/check.md, "How the fix is chosen", gives the reasons):

0. a preference/RL run's own trainer switches that drop a model beside the policy or shrink vLLM's share, the
   policy still trained in full (TRL's "Reducing memory usage" guide; issue 35): precompute_ref_log_probs (DPO,
   KTO), a lower vllm_gpu_memory_utilization (GRPO with vLLM colocated: slower generation), beta 0 (GRPO), vLLM
   in server mode on GPUs of its own (GRPO), each only where the run holds that model, priced the same way;
0b. the layer inputs full recomputation keeps, offloaded to pinned host memory (transformers'
   ``gradient_checkpointing_kwargs={"offload": true}``, torch's save_on_cpu; ALST's activation checkpoint
   offloading): the same training, slower steps and host RAM per rank, where the run checkpoints every layer
   and holds activations;
1. the training method on the same hardware: LoRA, then QLoRA (model/peft.py prices the adapters exactly as
   peft counts them; the search then finds the best run of the adapter model on the cluster given). A change of
   training code, not of the ds_config: it is named with the flags that set it, never written as a fix;
2. more host RAM on the same card, for full CPU offload (the least host RAM at which a CPU offload fits);
3. an NVMe drive (with the host RAM NVMe offload still needs), ZeRO-Infinity's slower way;
4. a bigger card: the smallest card of the same maker in hardware/table.py on which the run fits, as many as
   given, with the host RAM given;
5. more GPUs (ZeRO-3 partitions over them): filling the node first, then whole nodes.

The finding's config fix is the first hardware way the config can be written for (2, 3 or 5: advisor/
cluster.py's cluster changes); 1 and 4 are named, priced, and set outside the config. A one-card run thus
never hears only "use a cluster" when an adapter run, more RAM or one bigger card would do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from zeroadvisor.advisor.cluster import peak, round_up_gb, usable
from zeroadvisor.advisor.patch import Outcome
from zeroadvisor.config.method import MethodSetup
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import MAX_MEMORY_BYTES, Cluster, StageEstimate, estimate
from zeroadvisor.model.errors import ModelError
from zeroadvisor.units import DEFAULT_UNIT, format_bytes
from zeroadvisor.vocab import Capacity, Device, Method, TrainerFamily, VllmMode

if TYPE_CHECKING:
    from zeroadvisor.advisor.change import Change
    from zeroadvisor.advisor.search import Searcher
    from zeroadvisor.hardware.table import GpuSpec
    from zeroadvisor.model.spec import ModelSpec, TrainingShape
    from zeroadvisor.throughput import Hardware


class WayOut(StrEnum):
    """A way out when nothing fits on the hardware given (the module docstring), in :data:`CHEAPEST_FIRST`
    order."""

    # the preference/RL trainer's own memory switches (issue 35 item 3; TRL's "Reducing memory usage" guide):
    # the same model trained in full, one trainer argument changed
    PRECOMPUTE_REF = "precompute-ref-log-probs"  # the reference model's log-probs computed once, before training
    # ms-swift's vLLM weight sync at ZeRO-3 gathered by groups of layers instead of whole (--move_model_batches): a
    # slower sync, the same result (memory/generation.py vllm_sync_moment)
    MOVE_MODEL_BATCHES = "move-model-batches"
    # GRPO's colocated vLLM given a smaller share of each card (its weights and a smaller KV cache): slower
    # generation, the same result
    VLLM_UTILIZATION = "vllm-gpu-memory-utilization"
    # a colocated vLLM given less than its floor (it never starts) given its floor: it starts; training gets less
    VLLM_FLOOR = "vllm-floor"
    BETA_ZERO = "beta-zero"  # GRPO without the KL term: no reference model (TRL's default from 0.19)
    VLLM_SERVER = "vllm-server"  # GRPO's vLLM on GPUs of its own instead of a share of each training card
    # the checkpointed layer inputs moved to pinned host memory (torch's save_on_cpu): the same training, slower
    ACTIVATION_OFFLOAD = "activation-offload"
    LORA = "lora"  # train LoRA adapters on the frozen base: a training-code change
    QLORA = "qlora"  # ... on a 4-bit quantized base
    HOST_RAM = "host-ram"  # more host RAM per node: full CPU offload on the same card
    NVME = "nvme"  # an NVMe drive per node (and the host RAM its offload still needs)
    BIGGER_GPU = "bigger-gpu"  # the smallest bigger card that fits, as many as given
    MORE_GPUS = "more-gpus"  # more cards: ZeRO-3 over them


# Cheapest first: a software change on the hardware given, then parts added to the same machine (RAM, then a
# drive: slower), then a card swapped, then more cards (a cluster). docs/check.md "How the fix is chosen".
CHEAPEST_FIRST: tuple[WayOut, ...] = tuple(WayOut)

# The LoRA shape priced: rank 16 on every Linear layer but the head (peft's "all-linear"; the QLoRA paper's
# finding that adapting every linear layer is what matches full fine-tuning, arXiv:2305.14314 §4). A larger
# rank moves the adapters' memory little: r x (fan_in + fan_out) per layer against the frozen base.
LORA_RANK = 16

# Where the training method is set in the trainers users run (none of it is a ds_config key).
_SETTINGS: dict[WayOut, tuple[str, ...]] = {
    WayOut.PRECOMPUTE_REF: ("TRL: precompute_ref_log_probs: true (DPOConfig, KTOConfig)",),
    WayOut.BETA_ZERO: ("TRL: beta: 0.0 (GRPOConfig)", "ms-swift: --beta 0", "axolotl: trl: {beta: 0.0}"),
    WayOut.VLLM_SERVER: ("TRL: use_vllm: true, vllm_mode: server, and `trl vllm-serve --model MODEL` on other GPUs",),
    # the offloader priced (memory/activation_offload.py SAVE_ON_CPU): transformers' own, and unsloth's through
    # LLaMA-Factory; TRL's and axolotl's stream-based offloaders keep one layer input more in flight
    WayOut.ACTIVATION_OFFLOAD: (("transformers >= 5.17: gradient_checkpointing_kwargs: {offload: true} (5.23+: "
                                "activation_checkpointing_kwargs)"), "LLaMA-Factory: use_unsloth_gc: true",
                                "zeroadvisor: --activation-offload save_on_cpu"),
    WayOut.LORA: (f"zeroadvisor: --peft lora --lora-r {LORA_RANK}",
                  f"LLaMA-Factory: finetuning_type: lora, lora_rank: {LORA_RANK}, lora_target: all",
                  f"TRL: --use_peft --lora_r {LORA_RANK} --lora_target_modules all-linear",
                  f"peft: LoraConfig(r={LORA_RANK}, target_modules=\"all-linear\")"),
    WayOut.QLORA: (f"zeroadvisor: --peft qlora --lora-r {LORA_RANK}",
                   (f"LLaMA-Factory: finetuning_type: lora, lora_rank: {LORA_RANK}, lora_target: all, "
                    "quantization_bit: 4"),
                   f"TRL: --use_peft --lora_r {LORA_RANK} --lora_target_modules all-linear --load_in_4bit",
                   "transformers: BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\")"),
}

_TRADE_OFFS: dict[WayOut, str] = {
    WayOut.MOVE_MODEL_BATCHES: ("a slower weight sync: the layers are gathered and handed to vLLM a group at a time "
                                "instead of at once; the result is unchanged; a trainer argument, not a ds_config "
                                "key"),
    WayOut.PRECOMPUTE_REF: ("none in the result: the reference log-probabilities are computed once over the "
                            "dataset before training (a pass of inference) instead of by a reference model held "
                            "beside the policy; a trainer argument, not a ds_config key"),
    WayOut.VLLM_UTILIZATION: ("slower generation: vLLM keeps a smaller KV cache in its smaller share of the card, so "
                              "fewer completions are generated at once (lower generation throughput, longer "
                              "rollouts); the result is unchanged; a trainer argument, not a ds_config key"),
    WayOut.VLLM_FLOOR: ("vLLM starts: its share raised to its floor (its weights and one request's KV cache), so it "
                        "generates few sequences at once, and training keeps what is left of the card; a trainer "
                        "argument, not a ds_config key"),
    WayOut.ACTIVATION_OFFLOAD: ("slower steps: each checkpointed layer's input is copied to pinned host memory in "
                                "the forward and back for its recompute (a blocking copy per layer), and each "
                                "rank holds them in host RAM; the result is unchanged; a training argument, not a "
                                "ds_config key"),
    WayOut.BETA_ZERO: ("a different objective: GRPO without the KL penalty to the reference model (TRL's default "
                       "from 0.19, following DAPO/Dr. GRPO); a trainer argument"),
    WayOut.VLLM_SERVER: ("hardware: vLLM generates on GPUs of its own (trl vllm-serve), which the training world "
                         "does not count; a trainer argument and a server to run"),
    WayOut.LORA: ("a different training method: only the adapters train, the base stays frozen, so quality may "
                  "differ from a full fine-tune; a change of training code, not of the ds_config"),
    WayOut.QLORA: ("as LoRA, on a base quantized to 4 bits (bitsandbytes NF4): less memory than LoRA, slower "
                   "matmuls (each weight dequantized per use) and a further quality trade-off"),
    WayOut.HOST_RAM: "hardware: host RAM added to the same machine; the offloaded optimizer step runs on the CPU",
    WayOut.NVME: ("hardware: an NVMe drive per node; the offloaded state streams from it every step, slower "
                  "than CPU offload (ZeRO-Infinity)"),
    WayOut.BIGGER_GPU: "hardware: the card swapped for a larger one, as many as given",
    WayOut.MORE_GPUS: "hardware: more cards, so ZeRO partitions the model over them",
}

# Cards the bigger-card search tries once the least GPU memory is known (the peaks hardly depend on the card).
_CARDS_TRIED = 4


@dataclass(frozen=True, slots=True)
class Way:
    """One way out: the best run there as it will be written (its change, estimate and patch against the
    config with its fixes), what it is in words, where it is set outside the ds_config, and its trade-off."""

    kind: WayOut
    outcome: Outcome
    what: str  # "LoRA r=16 on all-linear (39,976,960 trainable parameters)", "give 160 GB of host RAM per node"
    settings: tuple[str, ...] = ()  # the flags/keys that set it in a trainer (the training method only)
    configured: StageEstimate | None = None  # the training method: the configured rung with it (fitting or not)
    gpu: str | None = None  # a bigger card: its name
    # the finding's ds_config fix is this way (a hardware change the config can be written for)
    is_fix: bool = False

    @property
    def trade_off(self) -> str:
        return _TRADE_OFFS[self.kind]

    @property
    def change(self) -> Change:
        return self.outcome.change

    @property
    def peak_gpu(self) -> int:
        return int(self.outcome.stage.peak_gpu)

    def sentence(self, unit: str = DEFAULT_UNIT) -> str:
        """The way in one clause: what, the run there and its peaks, and where it is set."""
        stage = self.outcome.stage
        run = self.change.description if self.change.parts else f"the configured {stage.option.words}"
        # a cluster change's description names the hardware already ("..., give 135 GB of host RAM per node")
        text = run if self.change.cluster is not None else f"{self.what}: {run}"
        text += f", {format_bytes(stage.peak_gpu, unit)} per GPU at peak"
        if stage.per_node_cpu:
            text += f", {format_bytes(stage.peak_host_per_node, unit)} host RAM per node"
        configured = self.configured
        if configured is not None and self.change.parts:  # the adapter run changes more than the method
            fits = "fits" if configured.comfortable else _binds(configured)
            text += (f" (at the configured {configured.option.words}: {format_bytes(configured.peak_gpu, unit)}, "
                     f"{fits})")
        if self.settings:
            text += f"; set it with {'; '.join(self.settings)}"
        return text

    def short(self, unit: str = DEFAULT_UNIT) -> str:
        """The way in a few words, for a report's head: "LoRA r=16 (--peft lora): 15.73 GiB per GPU"."""
        label = {WayOut.LORA: f"LoRA r={LORA_RANK} (--peft lora)",
                 WayOut.QLORA: f"QLoRA r={LORA_RANK} (--peft qlora)",
                 # the share alone: its floor and trade-off are the full sentence's
                 WayOut.VLLM_UTILIZATION: self.what.split(" (", 1)[0],
                 WayOut.VLLM_FLOOR: self.what.split(" (", 1)[0]}.get(self.kind, self.what)
        return f"{label}: {format_bytes(self.outcome.stage.peak_gpu, unit)} per GPU"

    def to_dict(self) -> JSONObject:
        from zeroadvisor import vocab as labels

        stage = self.outcome.stage
        out: JSONObject = {"way": self.kind.value, "what": self.what, "change": self.change.description,
                               "option": labels.option_header(stage.option), "peak_gpu": int(stage.peak_gpu),
                               "peak_host_per_node": int(stage.peak_host_per_node), "trade_off": self.trade_off,
                               "settings": list(self.settings), "config_fix": self.is_fix}
        if self.configured is not None:
            out["configured_peak_gpu"] = int(self.configured.peak_gpu)
        if self.gpu is not None:
            out["gpu"] = self.gpu
        cluster = self.change.cluster
        if cluster is not None:
            out["cluster"] = {k: v for k, v in dataclasses.asdict(cluster).items() if v is not None}
        return out


@dataclass(frozen=True, slots=True)
class NothingFits:
    """The ways out, cheapest first (:data:`CHEAPEST_FIRST`), each priced; () when none fits either."""

    ways: tuple[Way, ...]
    # why no training-method way is listed where there is none ("" where one is, or where it would not apply)
    no_method: str = ""

    @property
    def fix(self) -> Way | None:
        """The way the finding's ds_config fix writes (the first hardware way the config can be written for)."""
        return next((way for way in self.ways if way.is_fix), None)

    def sentence(self, unit: str = DEFAULT_UNIT) -> str:
        """"(1) LoRA r=16 ...; (2) ..." """
        return "; ".join(f"({i}) {way.sentence(unit)}" for i, way in enumerate(self.ways, 1))

    def to_dict(self) -> JSONObject:
        return {"order": [w.value for w in CHEAPEST_FIRST], "ways": [way.to_dict() for way in self.ways],
                **({"no_training_method": self.no_method} if self.no_method else {})}


def ways_out(search: Searcher, cluster_changes: tuple[Outcome, ...], unit: str = DEFAULT_UNIT) -> NothingFits:
    """Every way out of a run nothing fits (the module docstring), cheapest first. ``cluster_changes``: the
    search's (advisor/cluster.py: host RAM / NVMe per node, more GPUs), reused as they are priced; ``unit``: the
    one the hardware is worded in."""
    ways: list[Way] = list(_method_switches(search, unit)) + _activation_offload(search)
    method, no_method = _training_method(search)
    ways += method
    # more host RAM alone: the least of the cluster search's (the RAM the binding phase needs) and the RAM full CPU
    # offload on the same cards needs (which that search does not try where NVMe needs less)
    host: list[Outcome] = [found for found in (_cpu_offload_ram(search),) if found is not None]
    for outcome in cluster_changes:
        grown = outcome.change.cluster
        if grown is None:
            continue
        if grown.gpus is not None:
            ways.append(Way(WayOut.MORE_GPUS, outcome, _grown_words(outcome, unit)))
        elif _uses_nvme(outcome.stage):
            ways.append(Way(WayOut.NVME, outcome, _nvme_words(outcome, unit)))
        elif grown.cpu_memory is not None:
            host.append(outcome)
    if host:
        ways.append(_host_way(min(host, key=_grown_ram), search.cluster, unit))
    bigger = _bigger_gpu(search, unit)
    if bigger is not None:
        ways.append(bigger)
    ways.sort(key=lambda way: CHEAPEST_FIRST.index(way.kind))
    fix = next((i for i, way in enumerate(ways) if way.kind in _FIXABLE), None)
    if fix is not None:
        ways[fix] = replace(ways[fix], is_fix=True)
    return NothingFits(tuple(ways), no_method)


# the ways a ds_config fix can be written for: a cluster change advisor/change.py words as actions
_FIXABLE = (WayOut.HOST_RAM, WayOut.NVME, WayOut.MORE_GPUS)


def _uses_nvme(stage: StageEstimate) -> bool:
    return Device.NVME in (stage.option.offload_optimizer, stage.option.offload_param)


def _grown_words(outcome: Outcome, unit: str) -> str:
    from zeroadvisor.advisor.change import cluster_words

    grown = outcome.change.cluster
    assert grown is not None
    return cluster_words(grown, unit)


def _nvme_words(outcome: Outcome, unit: str) -> str:
    """"an NVMe drive with 100.41 GiB free per node and 37.25 GiB of host RAM per node"."""
    space = outcome.change.nvme_space
    drive = f"an NVMe drive with {format_bytes(space, unit)} free per node" if space else "an NVMe drive"
    grown = outcome.change.cluster
    ram = f" and {format_bytes(grown.cpu_memory, unit)} of host RAM per node" \
        if grown is not None and grown.cpu_memory is not None else ""
    return drive + ram


def _binds(stage: StageEstimate) -> str:
    """"does not fit: host RAM per node binds"."""
    from zeroadvisor.memory.verdict import RESOURCE_WORDS

    return f"does not fit: {RESOURCE_WORDS[stage.binding_resource]} binds"


def _activation_offload(search: Searcher) -> list[Way]:
    """The checkpointed layer inputs offloaded to pinned host memory (torch's save_on_cpu, as transformers'
    ``offload`` runs it), priced as the other switches are, where the configured run checkpoints every layer, holds
    activations and offloads none yet."""
    from zeroadvisor.model.spec import Checkpointing
    from zeroadvisor.vocab import ActivationOffload

    shape = search.shape
    configured = search.as_written.base_estimate.configured
    if shape.activation_checkpointing != Checkpointing.FULL or shape.activation_offload != ActivationOffload.NONE \
            or configured is None or not configured.per_gpu.get("activations"):
        return []
    found = _search_with(search, search.model, search.cluster,
                         shape=replace(shape, activation_offload=ActivationOffload.SAVE_ON_CPU))
    if found is None:
        return []
    outcome, at_configured = found
    return [Way(WayOut.ACTIVATION_OFFLOAD, outcome, "the checkpointed layer inputs in pinned host memory",
                _SETTINGS[WayOut.ACTIVATION_OFFLOAD], at_configured)]


# -- the training method -------------------------------------------------------------------------------
def _training_method(search: Searcher) -> tuple[list[Way], str]:
    """LoRA and QLoRA (QLoRA alone where the run trains LoRA adapters already), each with the best run of the
    adapter model on the cluster given; "" or why none is priced."""
    from zeroadvisor.model.peft import PeftSettings
    from zeroadvisor.model.peft import apply as apply_peft

    spec = search.model
    if spec.peft is not None and spec.quantized_parameters:
        return [], ""  # QLoRA already: no smaller training method of this kind
    if spec.layout is None:
        return [], ("LoRA/QLoRA are not priced without the model's layout: give --model with its config.json "
                    "(a parameter count does not say which Linear layers LoRA adapts)")
    kinds = (WayOut.QLORA,) if spec.peft is not None else (WayOut.LORA, WayOut.QLORA)
    base = _base_of(spec)
    out: list[Way] = []
    for kind in kinds:
        settings = PeftSettings(method="qlora" if kind == WayOut.QLORA else "lora", r=LORA_RANK)
        try:
            adapted = apply_peft(base, spec.layout, settings)
        except ModelError:  # a layout peft cannot adapt (modelled families only): not priced
            continue
        found = _search_with(search, adapted, search.cluster)
        if found is None:
            continue
        outcome, configured = found
        trainable = adapted.trainable_parameters or 0
        what = f"{adapted.peft}, {trainable:,} trainable parameters of {spec.parameters:,}"
        out.append(Way(kind, outcome, what, _SETTINGS[kind], configured))
    return out, ""


def _method_switches(search: Searcher, unit: str) -> list[Way]:
    """The preference/RL trainer's own switches that drop a model beside the policy, each priced on the cluster
    given with the policy trained as configured: precompute_ref_log_probs (DPO, KTO: no reference model during
    training, TRL trainer/dpo_trainer.py __init__ ``elif self.is_peft_model or args.precompute_ref_log_probs:
    self.ref_model = None``), beta 0 (GRPO: grpo_trainer.py builds no reference model when beta == 0.0) and vLLM
    in server mode (GRPO: generation on GPUs of its own), and a lower vllm_gpu_memory_utilization (GRPO colocated:
    :func:`_vllm_utilization`). Only where the configured run holds that model (its
    row in the estimate), and never where the files already say the switch."""
    configured = search.as_written.base_estimate.configured
    rows = configured.per_gpu if configured is not None else {}
    setup = search.shape.method
    # TRL trainer families only: the switches are TRL's arguments (ms-swift and axolotl pass TRL's beta on)
    trl_like = setup.trainer in (None, TrainerFamily.TRL, TrainerFamily.MS_SWIFT, TrainerFamily.AXOLOTL)
    switches: list[tuple[WayOut, MethodSetup, str]] = []
    if rows.get("reference_model") and trl_like and setup.method in (Method.DPO, Method.KTO) \
            and not setup.precompute_ref_log_probs and setup.trainer != TrainerFamily.AXOLOTL:
        switches.append((WayOut.PRECOMPUTE_REF, replace(setup, precompute_ref_log_probs=True),
                         "precompute_ref_log_probs: true (no reference model held during training)"))
    if rows.get("reference_model") and trl_like and setup.method == Method.GRPO:
        switches.append((WayOut.BETA_ZERO, replace(setup, beta=0.0), "beta: 0.0 (no reference model)"))
    if rows.get("vllm") and setup.method == Method.GRPO:
        switches.append((WayOut.VLLM_SERVER, replace(setup, generation=replace(
            setup.generation, use_vllm=True, vllm_mode=VllmMode.SERVER)), "vLLM in server mode on GPUs of its own"))
    out: list[Way] = []
    for kind, changed, what in switches:
        found = _search_with(search, search.model, search.cluster, shape=replace(search.shape, method=changed))
        if found is not None:
            outcome, at_configured = found
            out.append(Way(kind, outcome, what, _SETTINGS[kind], at_configured))
    lower = _vllm_utilization(search, unit) if rows.get("vllm") else None
    batches = _move_model_batches(search) if configured is not None else None
    return ([batches] if batches is not None else []) + out + ([lower] if lower is not None else [])


# The move_model_batches values tried, fewest groups first (the fastest sync that fits): powers of two up to one
# layer per group (ms-swift's own examples give 5 to 40: examples/train/grpo/internal/*.sh @ v4.5.2).
_SYNC_GROUPS = (2, 4, 8, 16, 32, 64, 128)


def _move_model_batches(search: Searcher) -> Way | None:
    """ms-swift's --move_model_batches where the configured run's vLLM weight sync gathers more than the step (its
    term in the estimate) and ms-swift groups it (not 3.12.1 to 3.12.5, which gather it whole whatever the groups):
    the fewest groups at which the run fits, priced as the other switches are."""
    from zeroadvisor.memory.generation import SWIFT_WHOLE_SYNC, SYNC_KEY

    configured = search.as_written.base_estimate.configured
    setup = search.shape.method
    layers = search.model.num_layers or 0
    if configured is None or setup.trainer != TrainerFamily.MS_SWIFT or not layers:
        return None
    if not any(t.key == SYNC_KEY and t.nbytes for t in configured.terms):
        return None
    if setup.release is not None and setup.release in SWIFT_WHOLE_SYNC:
        return None
    given = setup.generation.move_model_batches or 1
    if given >= layers:  # one layer per group already
        return None
    for groups in [g for g in _SYNC_GROUPS if given < g < layers] + [layers]:
        changed = replace(setup, generation=replace(setup.generation, move_model_batches=groups))
        found = _search_with(search, search.model, search.cluster, shape=replace(search.shape, method=changed))
        if found is not None:
            outcome, at_configured = found
            return Way(WayOut.MOVE_MODEL_BATCHES, outcome, f"the vLLM weight sync in {groups} groups of layers",
                       (f"ms-swift: --move_model_batches {groups}",), at_configured)
    return None


# Where vllm_gpu_memory_utilization is set in each trainer's own file or command ({share}: the priced value).
_UTILIZATION_SETTINGS: dict[TrainerFamily | None, str] = {
    None: "TRL: vllm_gpu_memory_utilization: {share} (GRPOConfig)",
    TrainerFamily.TRL: "TRL: vllm_gpu_memory_utilization: {share} (GRPOConfig)",
    TrainerFamily.AXOLOTL: "axolotl: vllm: {{gpu_memory_utilization: {share}}} (a trl: block's "
                           "vllm_gpu_memory_utilization, where set, wins: change that one)",
    TrainerFamily.MS_SWIFT: "ms-swift: --vllm_gpu_memory_utilization {share}",
    TrainerFamily.OPENRLHF: "OpenRLHF: --vllm_gpu_memory_utilization {share}",
}


def utilization_setting(trainer: TrainerFamily | None, share: float) -> str:
    """Where ``trainer`` reads vLLM's share of the card, written with ``share``."""
    return _UTILIZATION_SETTINGS.get(trainer, _UTILIZATION_SETTINGS[None]).format(share=f"{share:g}")


def _vllm_utilization(search: Searcher, unit: str) -> Way | None:
    """A lower ``vllm_gpu_memory_utilization`` for a run with vLLM colocated: the largest share, in hundredths, below
    the configured one at which the run fits (the least generation throughput given up): the configured rung
    where it fits at the floor, else the search's best run; never below vLLM's
    floor (memory/method.py vllm_floor: its weights and one max_model_len request's KV cache inside its share).
    Priced as the other switches are: the search at that share, so the written way is exactly the run priced (the
    search's best run there, whose stage may differ from the configured one)."""
    from zeroadvisor.memory.method import vllm_floor, vllm_share

    setup, cluster = search.shape.method, search.cluster
    card = cluster.gpu_memory
    if setup.method != Method.GRPO or not card:
        return None
    configured = vllm_share(setup)
    floor = vllm_floor(setup, search.model, search.shape.sequence_length, card)
    if floor is None or floor.share == configured:
        return None

    def at(share: float) -> tuple[Outcome, StageEstimate | None] | None:
        changed = replace(setup, generation=replace(setup.generation, vllm_gpu_memory_utilization=share))
        return _search_with(search, search.model, cluster, shape=replace(search.shape, method=changed))

    found = at(floor.share)
    if found is None:
        return None  # not even at vLLM's floor
    if floor.share > configured:  # below the floor vLLM never starts (vllm-below-floor): raised to it, priced there
        outcome, at_configured = found
        what = (f"vllm_gpu_memory_utilization {floor.share:g} instead of {configured:g} (vLLM's floor on this card: "
                f"its 16-bit weights {format_bytes(floor.weights, unit)} and one {floor.tokens}-token request's KV "
                f"cache {format_bytes(floor.kv_cache, unit)})")
        return Way(WayOut.VLLM_FLOOR, outcome, what, (utilization_setting(setup.trainer, floor.share),),
                   at_configured)
    # One change before several (ranking.py): where the configured rung fits at the floor, the largest share at
    # which it still fits (the switch alone); else the largest at which any run fits. Both are monotone in the
    # share (the vLLM row grows with it): bisect the hundredths between the floor and just below the configured.
    alone = found[1] is not None and found[1].comfortable

    def holds(priced: tuple[Outcome, StageEstimate | None] | None) -> bool:
        return priced is not None and (not alone or (priced[1] is not None and priced[1].comfortable))

    low, high = int(floor.share * 100 + 0.5), int(configured * 100 + 0.5) - 1
    while low < high:
        mid = (low + high + 1) // 2
        higher = at(mid / 100)
        if holds(higher) and higher is not None:
            low, found = mid, higher
        else:
            high = mid - 1
    share = low / 100
    outcome, at_configured = found
    what = (f"vllm_gpu_memory_utilization {share:g} instead of {configured:g} (vLLM's floor on this card "
            f"{floor.share:g}: its 16-bit weights {format_bytes(floor.weights, unit)} and one {floor.tokens}-token "
            f"request's KV cache {format_bytes(floor.kv_cache, unit)}); generation slower: a smaller KV cache holds "
            "fewer sequences at once")
    settings = (utilization_setting(setup.trainer, share),)
    return Way(WayOut.VLLM_UTILIZATION, outcome, what, settings, at_configured)


def _base_of(spec: ModelSpec) -> ModelSpec:
    """``spec`` without the PEFT it trains with (model/peft.py apply sets these fields; every other is the base's)."""
    if spec.peft is None:
        return spec
    return replace(spec, trainable_parameters=None, largest_trainable_parameter=None, quantized_parameters=0,
                   quantized_bytes=0, largest_quantized_parameters=0, quantization=None, peft=None)


def _search_with(search: Searcher, model: ModelSpec, cluster: Cluster, hardware: Hardware | None = None,
                 shape: TrainingShape | None = None) -> tuple[Outcome, StageEstimate | None] | None:
    """The best run of the config with ``model`` (and ``shape``: the training method changed) on ``cluster`` (the
    same fixes written; NVMe only where given), and the configured rung there; None where nothing fits or the
    memory model cannot use it."""
    from zeroadvisor.advisor.search import Searcher

    w = search.as_written
    shape = shape if shape is not None else search.shape
    try:
        written = estimate(w.original, model, shape, cluster, search.accounting)
        other = Searcher(w.original, model, shape, cluster, search.accounting, written, w.lint_fixes,
                         w.tune, hardware if hardware is not None else search.hardware,
                         trainer_filled=w.trainer_filled, trainer_accumulation=w.accumulation)
        best = other.best()
    except EstimateError:
        return None
    if best is None:
        return None
    return best, written.configured


# -- host RAM for full offload on the same card ----------------------------------------------------------
def _cpu_offload_ram(search: Searcher) -> Outcome | None:
    """The best run at the least host RAM per node (whole GB, the headroom left free) at which a CPU offload fits
    on the cards given; None where the host RAM was not given, the GPU holds no CPU-offload candidate, or more
    than any machine has would be needed."""
    cluster = search.cluster
    if cluster.cpu_memory is None:
        return None
    gpu = usable(cluster)[Capacity.GPU]
    pool = [stage for _, stage in search.search.extremes()
            if Device.CPU in (stage.option.offload_optimizer, stage.option.offload_param) and not _uses_nvme(stage)
            and gpu is not None and peak(stage, Capacity.GPU) <= gpu]
    if not pool:
        return None
    need = min(peak(stage, Capacity.HOST) for stage in pool)
    grown = round_up_gb(need / (1 - cluster.headroom))
    if grown <= cluster.cpu_memory or grown > MAX_MEMORY_BYTES:
        return None
    from zeroadvisor.advisor.change import ClusterChange

    found = search.proposal.on_cluster(replace(cluster, cpu_memory=grown), ClusterChange(cpu_memory=grown))
    return None if found is None or _uses_nvme(found.stage) else found


def _grown_ram(outcome: Outcome) -> int:
    grown = outcome.change.cluster
    assert grown is not None and grown.cpu_memory is not None
    return grown.cpu_memory


def _host_way(outcome: Outcome, cluster: Cluster, unit: str) -> Way:
    """More host RAM per node: "give 149 GiB of host RAM per node (119 GiB more than the 29.80 GiB given)"."""
    given = cluster.cpu_memory
    added = f" ({format_bytes(_grown_ram(outcome) - given, unit)} more than the {format_bytes(given, unit)} given)" \
        if given is not None else ""
    return Way(WayOut.HOST_RAM, outcome, _grown_words(outcome, unit) + added)


# -- a bigger card ---------------------------------------------------------------------------------------
def maker(name: str) -> str:
    """The card's maker by its table name (hardware/table.py): AMD Instinct "MI...", Intel Gaudi, else NVIDIA.
    A bigger card is proposed from the same maker: the software stack (CUDA, ROCm, SynapseAI) stays."""
    upper = name.upper()
    return "amd" if upper.startswith("MI") else "intel" if upper.startswith("GAUDI") else "nvidia"


def _bigger_gpu(search: Searcher, unit: str) -> Way | None:
    """The smallest card of the table (same maker, more memory) on which the run fits with the host RAM and NVMe
    given, as many cards as given; None where none does."""
    from zeroadvisor.hardware.table import GPUS

    cluster = search.cluster
    current = cluster.gpu_memory or 0
    name = cluster.gpu.name if cluster.gpu is not None else None
    need = _gpu_need(search)
    if need is None:
        return None
    cards = sorted((card for card in GPUS.values()
                    if card.memory_bytes > current and (name is None or maker(card.name) == maker(name))
                    and card.memory_bytes * (1 - cluster.headroom) >= need),
                   key=lambda card: card.memory_bytes)
    tried: set[int] = set()
    for card in cards:
        if card.memory_bytes in tried:
            continue  # one card per memory size: the table lists each family's SXM form first
        if len(tried) == _CARDS_TRIED:
            break
        tried.add(card.memory_bytes)
        found = _search_with(search, search.model, replace(cluster, gpu=card, gpu_memory=card.memory_bytes),
                             _hardware_on(search, card))
        if found is not None:
            size = format_bytes(card.memory_bytes, unit)
            was = f" of the {name}" if name else ""
            what = (f"{cluster.gpus} x {card.name} ({size} per GPU) instead{was}" if cluster.gpus > 1
                    else f"one {card.name} ({size}) instead{was}")
            return Way(WayOut.BIGGER_GPU, found[0], what, gpu=card.name)
    return None


def _gpu_need(search: Searcher) -> int | None:
    """The least GPU memory (the expected peak's bound) of any candidate whose host RAM and NVMe fit as given:
    what a bigger card must hold (None: none fits the host either)."""
    caps = usable(search.cluster)
    pool = [stage for _, stage in search.search.extremes()
            if all(caps[r] is None or peak(stage, r) <= caps[r]  # type: ignore[operator]
                   for r in (Capacity.HOST, Capacity.NVME))]
    return min((peak(stage, Capacity.GPU) for stage in pool), default=None)


def _hardware_on(search: Searcher, card: GpuSpec) -> Hardware | None:
    """The step-time machine with ``card`` in place of the given one (None where there was none)."""
    hardware = search.hardware
    return None if hardware is None else replace(hardware, gpu=card)

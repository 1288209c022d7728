"""One margin, three verdicts: a phase's peak against what the hardware has.

The estimate is a best estimate: the allocations DeepSpeed, transformers and torch make, plus
itemized allowances for what cannot be computed (CUDA context and library workspaces, allocator
fragmentation, the runtime's host memory). Each term gives its expected bytes and, where the code
leaves room above them, its bound (memory/terms.py Term.bound); ``peak`` is the sum of the expected
bytes and ``bound`` the sum of the bounds. Both are compared with the capacity as the driver reports
it (``--gpu``/``--gpu-memory``) and with the host RAM and NVMe given, once:

    fits           bound <= capacity · (1 − headroom)        (so the expected peak is too)
    tight          peak <= capacity, and the peak or its bound > capacity · (1 − headroom): the span up
                   to the bound reaches into the headroom or past the card     (a warning: rule tight-fit)
    does-not-fit   peak > capacity                           (the expected peak: never the bound alone)
    unknown        fits or tight on what is counted, with something that adds memory not counted
                   (activations without a sequence length; host RAM or NVMe not given where the option uses it)
                   or does not fit at the maximum length while batches are padded dynamically and it fits
                   at a shorter padded length (memory/padding.py): the data decides

The headroom is the one margin (default 10%): it does not shrink the card, it only separates
"fits" from "tight". ``estimate`` and ``check`` share this function, so they cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zeroadvisor.vocab import Capacity, ModelRole, Phase, Verdict

FITS, TIGHT, DOES_NOT_FIT, UNKNOWN = Verdict.FITS, Verdict.TIGHT, Verdict.DOES_NOT_FIT, Verdict.UNKNOWN
VERDICTS = (FITS, TIGHT, DOES_NOT_FIT)  # best to worst: what a peak against a capacity can be
DEFAULT_HEADROOM = 0.10  # the share of each capacity a "fits" leaves free
# the capacities a phase's peak is judged against; vLLM's share is judged on its own (vllm_share_judgement)
RESOURCES = (Capacity.GPU, Capacity.HOST, Capacity.NVME)
RESOURCE_WORDS = {Capacity.GPU: "GPU memory", Capacity.HOST: "host RAM per node", Capacity.NVME: "NVMe per node",
                  Capacity.VLLM_SHARE: "vLLM's share of the card"}


@dataclass(frozen=True, slots=True)
class PhasePeak:
    """A phase's expected peak per resource (bytes): one GPU (the most loaded rank), host RAM and NVMe per node;
    ``gpu_bound``: the GPU peak's bound (None: the expected peak; host and NVMe terms carry no bound above their
    expected bytes yet). ``group``: a model's own GPUs (memory/groups.py: OpenRLHF's Ray actor groups), judged
    with the trained model's world; None: the trained model's GPUs."""

    phase: Phase
    gpu: int
    host_per_node: int
    nvme_per_node: int
    gpu_bound: int | None = None
    group: ModelRole | None = None

    def of(self, resource: Capacity) -> int:
        return {Capacity.GPU: self.gpu, Capacity.HOST: self.host_per_node, Capacity.NVME: self.nvme_per_node}[resource]

    def bound_of(self, resource: Capacity) -> int:
        """The peak's bound on ``resource``: at least the expected peak."""
        value = self.of(resource)
        return max(value, self.gpu_bound) if resource == Capacity.GPU and self.gpu_bound is not None else value

    def to_dict(self) -> dict[str, int]:
        return {"gpu": int(self.gpu), "host_per_node": int(self.host_per_node),
                "nvme_per_node": int(self.nvme_per_node), "gpu_bound": int(self.bound_of(Capacity.GPU))}


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict, and which phase, resource and group decide it (the largest share of its capacity)."""

    verdict: Verdict | None  # None: no capacity known for any resource
    phase: Phase  # the binding phase
    resource: Capacity  # the binding resource
    peak: int  # the binding peak (bytes)
    capacity: int | None
    group: ModelRole | None = None  # the binding model's own GPUs (PhasePeak.group); None: the trained model's


def judge_one(peak: int, capacity: int, headroom: float, bound: int | None = None) -> Verdict:
    """The verdict of one expected peak, and its ``bound`` (None: the peak), against one capacity (exact
    arithmetic: no float rounding at the edge). Only the expected peak can say "does not fit"; a bound that
    reaches into the headroom or past the card makes it "tight"."""
    if peak > capacity:
        return DOES_NOT_FIT
    top = peak if bound is None else max(peak, bound)
    # the share as the person wrote it (10% is 1/10, not the binary float nearest 0.1)
    if top > capacity * (1 - Fraction(headroom).limit_denominator(1_000_000)):
        return TIGHT
    return FITS


def judge(peaks: list[PhasePeak], capacities: dict[Capacity, int | None], headroom: float) -> Judgement:
    """The worst verdict over every phase and every resource whose capacity is known.

    The binding phase and resource are the pair with the largest peak-to-capacity share; with no
    capacity known, the phase with the largest GPU peak.
    """
    known = [(r, c) for r, c in capacities.items() if c is not None and r in RESOURCES]
    if not known:
        top = max(peaks, key=lambda p: p.gpu)
        return Judgement(None, top.phase, Capacity.GPU, top.gpu, None, top.group)
    worst = FITS
    binding: tuple[Fraction, PhasePeak, Capacity, int] | None = None
    for peak in peaks:
        for resource, capacity in known:
            value = peak.of(resource)
            verdict = judge_one(value, capacity, headroom, peak.bound_of(resource))
            if VERDICTS.index(verdict) > VERDICTS.index(worst):
                worst = verdict
            share = Fraction(value, capacity)
            if binding is None or share > binding[0]:
                binding = (share, peak, resource, capacity)
    assert binding is not None
    _, peak, resource, capacity = binding
    return Judgement(worst, peak.phase, resource, peak.of(resource), capacity, peak.group)


def stated(counted: Verdict | None, uncounted: tuple[str, ...], shorter_fits: bool = False) -> Verdict | None:
    """The verdict a report may state: what is counted fits (or is tight) but something that can only add
    memory is not counted, so the answer is unknown; a does-not-fit stays (more memory cannot make it fit),
    unless it is counted at an upper bound: the lengths are maxima (dynamic padding) and ``shorter_fits``, the
    run fits at a shorter padded length (memory/padding.py), so whether a step fits depends on the data."""
    if uncounted and counted in (FITS, TIGHT):
        return UNKNOWN
    if shorter_fits and counted == DOES_NOT_FIT:
        return UNKNOWN
    return counted


def vllm_share_judgement(need: int, share: int) -> Judgement | None:
    """A colocated vLLM's own pool: ``need`` (its 16-bit weights and one max_model_len request's KV cache, a lower
    bound: memory/method.py vllm_floor) against ``share`` (the card x vllm_gpu_memory_utilization, what vLLM's
    allocations may take). Below it vLLM raises while the trainer builds it, whatever the training memory does:
    does-not-fit, binding there (in the train phase: the trainer starts vLLM before its first step). None where it
    fits: the floor is a lower bound, so above it nothing is said (a tight KV cache is vLLM's own warning)."""
    if need <= share:
        return None
    return Judgement(DOES_NOT_FIT, Phase.TRAIN, Capacity.VLLM_SHARE, need, share)

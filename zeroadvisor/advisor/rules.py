"""Advice rules: memory findings for ``zeroadvisor check`` (they need a model and a cluster).

Each works from ``ctx.advice`` (advisor/advice.py :class:`Advice`, carried by :class:`AdviceRuleContext`): the
estimate of every stage/offload option of the config as written, the budget (GPU memory less the headroom), and
what the search (zeroadvisor/advisor/search.py) found on the config as the fixes will write it. Rules only word
the answers: a recommended change is a :class:`Recommendation` (its description, cost, actions, peaks and step
times), attached to the finding and worded from that one object; they build no candidates and no numbers of
their own. Numbers in messages are GiB (units.py DEFAULT_UNIT) unless --unit GB is given; the unit is always
printed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from zeroadvisor.deepspeed import schema
from zeroadvisor.lint.context import Context
from zeroadvisor.lint.findings import Action, Severity
from zeroadvisor.lint.rule import Example, Hit, Rule
from zeroadvisor.vocab import (
    BREAKDOWN_ROWS,
    METHOD_ROW_LABELS,
    PHASE_WORDS,
    ROW_LABELS,
    Capacity,
    Device,
    Phase,
    Resource,
    Verdict,
)

if TYPE_CHECKING:
    from zeroadvisor.advisor.advice import Advice, Reason, Recommendation
    from zeroadvisor.advisor.cluster import Shortfall
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.memory.estimate import StageEstimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime

# The advice, the memory model and the search are imported inside the checks: `lint` loads this module (the
# rule catalogue) but never runs an advice rule, and must not pay for the memory model at start-up.


@dataclass
class AdviceRuleContext(Context):
    """A lint context that also carries the memory estimate, the budget and the search: what advice rules read."""

    advice: Advice | None = None
    advised: ClassVar[bool] = True


_MODEL_7B = {"hf_config": {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008,
                           "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000},
             "sequence_length": 4096, "activation_checkpointing": "full"}


def _anchor(ctx: Context) -> str:
    for pointer in ("/zero_optimization/stage", "/zero_optimization"):
        if ctx.has(pointer):
            return pointer
    return ""


def _advice_of(ctx: Context) -> Advice:
    """The advice an advice rule reads: the engine runs advice rules only on a context that carries it."""
    assert isinstance(ctx, AdviceRuleContext) and ctx.advice is not None
    return ctx.advice


def _configured(ctx: Context) -> StageEstimate | None:
    return _advice_of(ctx).configured


def _label(option: Option) -> str:
    return option.words


def _breakdown(ctx: Context, stage: StageEstimate) -> str:
    fmt = _advice_of(ctx).fmt
    # a preference/RL run's other models by role (reference model, vLLM, ...) where it has them
    keys = [*BREAKDOWN_ROWS, *(row for row in METHOD_ROW_LABELS if stage.per_gpu.get(row))]
    parts = [f"{ROW_LABELS.get(key) or METHOD_ROW_LABELS[key]} {fmt(stage.per_gpu[key])}" for key in keys
             if stage.per_gpu[key]]
    return ", ".join(parts)


def _budget(ctx: Context) -> str:
    b = _advice_of(ctx).budget
    return f"{b.fmt(b.usable)} usable ({b.fmt(b.gpu_memory)} per GPU less {b.headroom:.0%} headroom)"


def _phase_words(stage: StageEstimate) -> str:
    """Where the peak is: "while training", "at load (model handed to deepspeed.initialize)", ..."""
    return PHASE_WORDS[stage.binding_phase]


def _hit(ctx: Context, message: str, rec: Recommendation | None) -> Hit:
    """A finding that recommends ``rec`` (None: none): its fix is the change's patch, its actions what the change
    needs outside the config (worded in GB, as the JSON contract has always had them), ``rec`` itself typed."""
    if rec is None:
        return Hit(_anchor(ctx), message)
    return Hit(_anchor(ctx), message, fix=rec.patch, actions=_json_actions(rec), recommends=rec)


def _json_actions(rec: Recommendation) -> tuple[Action, ...]:
    return tuple(rec.change.actions())


def _fit_sentence(ctx: Context, lead: str, rec: Recommendation, named: bool = True) -> str:
    """``lead``: the change, its peaks, its cost and what it needs outside the config, all from one Recommendation."""
    from zeroadvisor.advisor.change import actions_sentence

    a = _advice_of(ctx)
    actions = list(rec.actions)
    host = f", {a.fmt(rec.peak_host_per_node)} host RAM per node" if rec.stage.per_node_cpu else ""
    note = ""
    if rec.patch is None:
        note = " (no config change: it is all outside the config)" if actions else " (no further config change)"
    what = f"{lead}: {rec.description}: " if named else f"{lead}: "
    return (f"{what}{a.fmt(rec.peak_gpu)} per GPU at peak{host}{_speed(ctx, rec.step_time)}; "
            f"cost: {rec.cost}{note}{actions_sentence(actions)}{_why_not(rec)}")


def _speed(ctx: Context, step: StepTime) -> str:
    """", estimated 2.1x faster (estimated 1.23 s per step against 2.58 s configured)" where the step-time model
    applies, or ", about the configured run's step time (...)" inside its measured error (ranking.py)."""
    from zeroadvisor.advisor.ranking import step_time_words
    from zeroadvisor.throughput import seconds_of

    words = step_time_words(seconds_of(step), seconds_of(_advice_of(ctx).configured_step_time))
    return f", {words}" if words else ""


def _shortfall_words(ctx: Context, short: Shortfall) -> str:
    from zeroadvisor.memory.verdict import RESOURCE_WORDS

    a = _advice_of(ctx)
    return (f"{RESOURCE_WORDS[short.resource]} binds {PHASE_WORDS[short.phase]}: even {short.change.description} "
            f"needs {a.fmt(short.need)}, {a.fmt(short.missing)} more than the {a.fmt(short.usable)} usable")


def _advice(ctx: Context, reason: Reason) -> tuple[str, Recommendation | None]:
    """The best change that fits (its sentence and the Recommendation); when none does, which resource binds in
    which phase, by how much, and the smallest cluster change that fits (recommended), the others named."""
    from zeroadvisor.advisor.cluster import CLUSTER_SEARCH_LIMIT

    a = _advice_of(ctx)
    if a.best is not None:
        rec = a.recommend(a.best, reason)
        return ". " + _fit_sentence(ctx, "Cheapest change that fits", rec), rec
    text = (". Nothing fits: no stage, offload, checkpointing, micro batch or parallel layout change brings it "
            "under the budget")
    if a.shortfalls:
        text += "; " + "; ".join(_shortfall_words(ctx, short) for short in a.shortfalls)
    answer = a.nothing_fits
    assert answer is not None  # a.best is None
    if not answer.ways:
        missing = f" ({answer.no_method})" if answer.no_method else ""
        return (text + f". No way out fits either: no LoRA/QLoRA run{missing}, more host RAM, bigger card or "
                f"cluster of up to {CLUSTER_SEARCH_LIMIT} GPUs"), None
    text += f". The ways out, cheapest first: {answer.sentence(a.budget.unit)}"
    if answer.no_method:
        text += f" ({answer.no_method})"
    fix = answer.fix
    if fix is None:
        return text + ". None of them is a ds_config change: no fix is written", None
    rec = a.recommend(fix.outcome, reason)
    return text + ". " + _fit_sentence(ctx, f"The fix writes ({answer.ways.index(fix) + 1})", rec), rec


def _does_not_fit(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import Reason

    current = _configured(ctx)
    if current is None or current.verdict != Verdict.DOES_NOT_FIT:
        return
    a, budget = _advice_of(ctx), _advice_of(ctx).budget
    group = current.binding_group_peak
    if group is not None and group.gpu > budget.gpu_memory:
        # a model on GPUs of its own (memory/groups.py): no change to this config moves what its GPU holds
        parts = ", ".join(f"{ROW_LABELS.get(row) or METHOD_ROW_LABELS[row]} {a.fmt(n)}" for row, n in
                          group.rows.items() if n)
        yield Hit(_anchor(ctx), f"{_label(current.option)} (configured) needs {a.fmt(group.gpu)} while training "
                                f"{group.words} ({parts}), more than the {a.fmt(budget.gpu_memory)} the GPU has. "
                                "It runs on GPUs of its own (OpenRLHF's Ray trainer, not colocated with the actor), "
                                f"so its group's flags decide it, not this config: {group.flags}")
        return
    if current.peak_gpu <= budget.gpu_memory:
        return  # the GPU holds it; the host or NVMe does not: host-memory-insufficient reports that
    gpu_phase = max(current.phases.values(), key=lambda p: p.gpu).phase if current.phases else Phase.TRAIN
    if gpu_phase == Phase.TRAIN:
        needs = f"needs {a.fmt(current.peak_gpu)} per GPU while training ({_breakdown(ctx, current)})"
    else:
        needs = (f"needs {a.fmt(current.peak_gpu)} per GPU {PHASE_WORDS[gpu_phase]} "
                 f"({a.fmt(current.per_gpu['total'])} while training)")
    what = f"{_label(current.option)} (configured) {needs}, more than the {a.fmt(budget.gpu_memory)} the GPU has"
    advice, rec = _advice(ctx, Reason.DOES_NOT_FIT)
    yield _hit(ctx, what + advice, rec)


DOES_NOT_FIT = Rule(
    code="ZA801",
    name="does-not-fit",
    severity=Severity.ERROR,
    summary="The configured setup needs more GPU memory than the GPU has, in some phase.",
    explanation=(
        "The peak of the configured stage and offload over the load, train and save phases (model "
        "states, gathered parameters, buffers, activations and the allowances) exceeds the GPU's memory "
        "as the driver reports it. Every combination of stage, offload, activation checkpointing, micro "
        "batch (at the same global batch) and parallel layout is searched, and of those that fit in every phase "
        "the fix is the first in the published order (docs/check.md, how the fix is chosen): one change before "
        "several (a rung of the ladder, a checkpointing level, a smaller micro batch or a Ulysses degree alone "
        "before any combination, the fewest changes first); then the ladder, fastest first: ZeRO-0 > 1 > 2 > 1 "
        "with optimizer offload > 2 with optimizer offload > 3 > 3 with optimizer offload > 3 with parameter "
        "offload > 3 with both > NVMe; within a rung, no Ulysses before Ulysses, weaker checkpointing and the "
        "largest micro batch first; AutoTP only where nothing else fits and the cards have NVLink; "
        "NVMe only where its space is given. The step-time model overrules that order only where it puts "
        "another option faster by more than its measured error. The fix is a merge patch plus the actions outside the "
        "config it relies on (checkpointing in the training script, an NVMe mount, the attention wrapped for "
        "Ulysses). When nothing fits the message says which resource binds (GPU, host RAM, NVMe) in which phase "
        "and by how much, and lists the ways out, each priced with the same estimate, cheapest first: LoRA, then "
        "QLoRA (r=16 on every linear layer; a training-code change, named with the flags that set it), the host "
        "RAM for full CPU offload on the same cards, an NVMe drive, the smallest bigger card, more GPUs "
        "(advisor/nofit.py); the fix is the first of them the config can be written for."
    ),
    check=_does_not_fit,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A10G"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="ZeRO paper (arXiv:1910.02054) §5, §7; deepspeed/runtime/zero/",
)


def _lower_stage_fits(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import Reason

    current = _configured(ctx)
    # Stages 0-2 move the same volume per step (ZeRO paper §7), so only leaving ZeRO-3 saves
    # communication; moving among 0-2 is not advice worth a review comment.
    if current is None or current.option.stage != 3:
        return
    a = _advice_of(ctx)
    lower = a.lower_stage
    if lower is None:
        return
    # one combined fix serves this finding and offload-not-needed / does-not-fit
    best = a.recommend(a.best, Reason.LOWER_STAGE) if a.best is not None else None
    uses = ""
    if best is not None and best.option.stage == 3:
        # the step-time estimate overrules the published order (outside its measured error, ranking.py):
        # named, but no fix against the ranking
        lower_run = a.lower_stage_run
        if lower_run is not None:
            from zeroadvisor.throughput import seconds_of
            from zeroadvisor.throughput.validation import TIE_BAND

            first = best.description if best.change.parts else f"the configured {_label(best.change.option)}"
            mine, theirs = seconds_of(best.step_time), seconds_of(lower_run.step_time)
            figures = f" ({mine:.3g} s per step against {theirs:.3g} s)" if mine and theirs else ""
            uses = (f"; yet the step-time estimate puts {first} ahead of {_label(lower.option)}{figures}, by more "
                    f"than its measured error of {TIE_BAND - 1:.0%}, so no fix")
        best = None
    elif best is not None and best.change.option != lower.option:
        uses = f"; the fix: {best.description}" + _speed(ctx, best.step_time)
    elif best is not None:
        uses = _speed(ctx, best.step_time)
    # a lower stage keeping the configured optimizer offload (a rung adds none, candidates.py adds_offload)
    offload = ("; it keeps the optimizer offloaded as configured, which the published order puts ahead of any "
               "ZeRO-3 with offload (Hugging Face: \"Stage 2 + offload > Stage 3 > Stage 3 + offloads\")"
               if _offloads(lower.option) else "")
    yield _demoted(ctx, current, best, _hit(
        ctx, f"{_label(lower.option)} fits ({a.fmt(lower.per_gpu['total'])} per GPU of {_budget(ctx)}) where "
             f"the configured {_label(current.option)} uses {a.fmt(current.per_gpu['total'])}: it moves 1x instead "
             f"of 1.5x the data-parallel volume per step (no parameter all-gathers in forward and backward)"
             f"{offload}{uses}{_why_not(best)}", best))


def _why_not(rec: Recommendation | None) -> str:
    """"; not ZeRO-2, though it fits with more room: ..." where a later rung of the published order fits too."""
    words = rec.why_not_next() if rec is not None else ""
    return f"; {words}" if words else ""


def _demoted(ctx: Context, current: StageEstimate, rec: Recommendation | None, hit: Hit) -> Hit:
    """``hit`` as information, not a warning, where the configured run fits with the headroom and the
    recommendation's own step-time estimate is the slower one: the published order recommends it inside the
    model's error, and nothing in the run is wrong, so `--fail-on warning` does not fail a healthy run on it."""
    from zeroadvisor.advisor.ranking import estimated_slower

    if rec is None or not current.comfortable or not estimated_slower(rec.step_time_s, rec.configured_step_time_s):
        return hit
    return dataclasses.replace(hit, severity=Severity.INFO)


LOWER_STAGE_FITS = Rule(
    code="ZA802",
    name="lower-stage-fits",
    severity=Severity.WARNING,
    summary="ZeRO-3 is configured but a lower stage fits with the headroom.",
    explanation=(
        "ZeRO-3 shards parameters and gathers them again for every forward and backward pass, about "
        "1.5x the communication of data parallelism, ZeRO-1 or ZeRO-2 (ZeRO paper §7). It is also "
        "often larger than ZeRO-2 on small models because of its buffers (DS#3734, DS#4305). The finding names "
        "the fastest lower rung of the ladder that fits as configured otherwise (docs/check.md, how the fix is "
        "chosen): ZeRO-0, 1 or 2, else ZeRO-1 or 2 with the optimizer offloaded (from ZeRO-3 with both offloads, "
        "the lower stage that keeps the optimizer's offload). The fix is the best change that fits (shared "
        "with offload-not-needed when offload is configured too)."
    ),
    check=_lower_stage_fits,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="ZeRO paper §7; DS#3734, DS#4305",
    severity_varies=("info where the configured run fits with the headroom and the step-time model estimates the "
                     "lower stage slower (inside its measured error: the published order recommends it, and a "
                     "healthy run's CI does not fail on it)"),
)


ACTIVATION_SHARE = 0.10


def _activations_dominate(ctx: Context) -> Iterator[Hit]:
    current = _configured(ctx)
    if current is None:
        return
    a = _advice_of(ctx)
    acts, states = current.per_gpu["activations"], current.per_gpu["model_states"]
    # Only where activations are what binds: the configured run does not fit with the headroom and GPU memory
    # is its binding resource (a run that fits has nothing to act on; host RAM binding is another rule's).
    # Below a tenth of the budget activations are not the problem (with full offload model states are ~0,
    # so "activations exceed them" alone would always be true).
    # a model on GPUs of its own binds (memory/groups.py): the trained model's activations are not what to act on
    if current.comfortable or current.binding_resource != Capacity.GPU or current.binding_group is not None:
        return
    if not acts or acts <= states or acts < ACTIVATION_SHARE * a.budget.usable:
        return
    largest = a.largest_micro_batch
    micro = a.estimate.settings.micro_batch
    mb = (f"the largest micro batch that fits is {largest} (now {micro}){_refused_batch(a, largest)}"
          if largest is not None else f"even micro batch 1 does not fit (now {micro})")
    # a level that saves nothing here (selective under fused attention keeps no s x s scores) is not named
    savings = [f"{level} checkpointing saves {a.fmt(saved)}" for level, saved in a.checkpointing_savings if saved > 0]
    if a.flash_attention_saving is not None:
        savings.append(f"FlashAttention saves {a.fmt(a.flash_attention_saving)}")
    if largest is None:  # one sample's activations do not fit: Ulysses splits its tokens
        ulysses = a.ulysses
        if ulysses is not None:
            savings.append(f"Ulysses sequence parallel {ulysses.change.sequence_parallel} fits "
                           f"({a.fmt(ulysses.stage.peak_gpu)} per GPU at peak)")
    # No fix: when the micro batch must shrink, the configured run does not fit and does-not-fit
    # proposes the cheapest change, a smaller micro batch among them.
    yield Hit(_anchor(ctx),
              f"activations ({a.fmt(acts)} per GPU) exceed model states ({a.fmt(states)}): no ZeRO stage shrinks "
              f"activations, so a higher stage will not help; {mb}" + ("; " + ", ".join(savings) if savings else ""))


def _refused_batch(a: Advice, micro_batch: int) -> str:
    """", which the trainer refuses: ..." where TRL's GRPO refuses that micro batch (the global batch kept: the
    accumulation grows), so no fix names it; "" otherwise."""
    refused = a.search.as_written.batch_refusal(micro_batch)
    return f", which the trainer refuses: {refused}" if refused is not None else ""


ACTIVATIONS_DOMINATE = Rule(
    code="ZA803",
    name="activations-dominate",
    severity=Severity.WARNING,
    summary="Activations take more memory than model states: raising the stage will not help.",
    explanation=(
        "ZeRO partitions model states (parameters, gradients, optimizer states), not activations "
        "(DS#2302: 'ZeRO is designed to solve model states, not activations'). Long sequences without "
        "checkpointing are dominated by activations (Korthikanti et al. 2022). The message names the "
        "largest micro batch that fits, what checkpointing or FlashAttention would save and, when even one "
        "sample does not fit, the smallest Ulysses sequence-parallel degree that fits; the fix, when "
        "the run does not fit, is does-not-fit's."
    ),
    check=_activations_dominate,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 4, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B, "activation_checkpointing": "none"}, "gpus": 8,
                                     "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="Korthikanti et al. 2022 (arXiv:2205.05198); DS#2302, DS#2797",
)


def _offloads(option: Option) -> bool:
    return option.offload_optimizer != Device.NONE or option.offload_param != Device.NONE


def _offload_not_needed(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import Reason

    current = _configured(ctx)
    if current is None or not _offloads(current.option):
        return
    a = _advice_of(ctx)
    plain = a.without_offload  # the fastest rung with less offload that fits (candidates.py less_offload)
    if plain is None:
        return
    # one combined fix: lower-stage-fits names a lower stage that fits as well
    best = a.recommend(a.best, Reason.NO_OFFLOAD) if a.best is not None else None
    uses = ""
    if best is not None:
        speed = best.step_time_words  # the model's own estimate, said within its measured error
        if best.change.option != plain.option:
            uses = f"; the fix: {best.description}" + (f", {speed}" if speed else "")
        elif speed:
            uses = f"; without it: {speed}"
    why = "offloading moves the optimizer step to the CPU and tensors over PCIe every step"
    if _offloads(plain.option):  # a partial offload: the rung that keeps part of the configured offload
        what = f"{_label(current.option)} is configured but {_label(plain.option)}, with less offload, fits"
        if plain.option.offload_param == Device.NONE:  # the parameters' offload dropped, the optimizer's kept
            why = "offloaded parameters cross PCIe in every forward and backward"
    else:
        what = f"offload is configured but ZeRO-{plain.option.stage} without it fits"
    # a warning whatever the fix's step time: dropping an offload removes the PCIe traffic and the CPU step, and the
    # step-time model puts no such fix slower (its slower words would still say so: ranking.step_time_words)
    yield _hit(ctx, f"{what} ({a.fmt(plain.per_gpu['total'])} per GPU of {_budget(ctx)}): {why}{uses}"
                    f"{_why_not(best)}", best)


OFFLOAD_NOT_NEEDED = Rule(
    code="ZA804",
    name="offload-not-needed",
    severity=Severity.WARNING,
    summary="Offload is configured but a rung with less offload fits.",
    explanation=(
        "CPU and NVMe offload trade speed for capacity. When a faster rung of the ladder with less offload fits "
        "in GPU memory as configured otherwise (the same stage or a lower one without offload; from ZeRO-3 with "
        "both offloads, the parameter offload dropped while the optimizer's is kept, or ZeRO-2/1 keeping the "
        "optimizer's; docs/check.md, how the fix is chosen), the trade buys nothing: drop what is not needed. "
        "The fix is the best change that fits (shared with lower-stage-fits)."
    ),
    check=_offload_not_needed,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "1.3B", "sequence_length": 2048}, "gpus": 8,
                                     "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {"parameters": "1.3B", "sequence_length": 2048}, "gpus": 8,
                                      "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="DS#1635, DS#6834, DS#3717",
)


def _host_insufficient(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import Reason

    current = _configured(ctx)
    a = _advice_of(ctx)
    if current is None:
        return
    cpu_memory, nvme = a.budget.cpu_memory, a.budget.nvme
    problems = []
    if cpu_memory is not None and current.peak_host_per_node > cpu_memory:
        phase = max(current.phases.values(), key=lambda p: p.host_per_node).phase
        problems.append(f"{_label(current.option)} needs {a.fmt(current.peak_host_per_node)} of host RAM per node "
                        f"{PHASE_WORDS[phase]} ({a.estimate.cluster.gpus_on_a_node} GPU processes: their runtime, "
                        "offloaded state and pinned buffers, and any host copy of the model), more than the "
                        f"{a.fmt(cpu_memory)} given: the job is killed by the OOM killer or fails to pin memory")
    if nvme is not None and current.peak_nvme_per_node > nvme:
        problems.append(f"{_label(current.option)} needs {a.fmt(current.peak_nvme_per_node)} of NVMe per node, "
                        f"more than the {a.fmt(nvme)} given")
    if not problems:
        return
    advice, rec = _advice(ctx, Reason.HOST_MEMORY)
    yield _hit(ctx, "; ".join(problems) + advice, rec)


HOST_MEMORY_INSUFFICIENT = Rule(
    code="ZA805",
    name="host-memory-insufficient",
    severity=Severity.ERROR,
    summary="The offload needs more host RAM (or NVMe) per node than given.",
    explanation=(
        "With offload_optimizer/offload_param on the CPU, every GPU's process keeps its partition of "
        "the fp32 master weights, optimizer states (and parameters) in host RAM, pinned by default; "
        "all GPUs of a node share that RAM. Give --cpu-memory (and --nvme) to check it. The fix is the "
        "best change that fits every resource (an NVMe offload, less offload, more nodes), as does-not-fit's; "
        "when nothing fits, the ways out cheapest first, as does-not-fit lists them."
    ),
    check=_host_insufficient,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "70B"}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                     "cpu_memory": "256GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=False, options={"model": {"parameters": "70B"}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                      "cpu_memory": "2TB"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/stage3.py, stage_1_and_2.py (CPU offload); DS#3000",
)

def _large_buckets(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import KeyChange, Reason

    a = _advice_of(ctx)
    tuning = a.tuning  # decided on the configured stage's buffers (BUCKET_SHARE of the budget)
    if tuning is None:
        return
    fill = schema.auto_fill("zero_optimization", "reduce_bucket_size")
    assert fill is not None  # the committed schema has reduce_bucket_size's x-auto-fill
    yield Hit(_anchor(ctx),
              f"communication buffers take {a.fmt(tuning.buffers)} per GPU "
              f"({tuning.buffers / a.budget.usable:.0%} of usable memory): reduce/allgather buckets of up to 5e8 "
              f"elements are GBs by default; {tuning.target:,} elements ({fill.formula} of the hidden size, what the "
              "Hugging Face integration uses for \"auto\") cost far less with little speed loss", fix=tuning.patch,
              recommends=KeyChange(Reason.SMALLER_BUCKETS, tuning))


LARGE_BUCKETS = Rule(
    code="ZA806",
    name="large-buckets",
    severity=Severity.WARNING,
    summary="Reduce/allgather buckets cost a large share of GPU memory.",
    explanation=(
        "reduce_bucket_size and allgather_bucket_size default to 5e8 elements, doubled with "
        "overlap_comm (on by default at ZeRO-3), which is several GB per GPU in fp32. Users see ZeRO-2 "
        "or ZeRO-3 use more memory than a lower stage because of it (DS#1302, DS#3338, DS#3734)."
    ),
    check=_large_buckets,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {"parameters": "1.3B", "num_layers": 24, "hidden_size": 2048,
                                               "sequence_length": 2048}, "gpus": 8, "gpu": "A10G"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"reduce_bucket_size": 4194304, "allgather_bucket_size": 4194304, '
                '"stage3_prefetch_bucket_size": 3774873}}',
                fails=False, options={"model": {"parameters": "1.3B", "num_layers": 24, "hidden_size": 2048,
                                                "sequence_length": 2048}, "gpus": 8, "gpu": "A10G"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/config.py defaults; stage_1_and_2.py, stage3.py buffers; DS#1302, DS#3338",
)


def _pinned(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.memory.terms import STATE_ROWS

    current = _configured(ctx)
    a = _advice_of(ctx)
    if current is None:
        return
    s = a.estimate.settings
    pinning = [which for which, device, pin in (
        ("offload_optimizer", current.option.offload_optimizer, s.offload_optimizer_pin_memory),
        ("offload_param", current.option.offload_param, s.offload_param_pin_memory)) if device == Device.CPU and pin]
    # the offloaded model states (and their allocator rounding), not the runtime's own host memory
    offloaded = sum(t.nbytes for t in current.terms if t.phase == Phase.TRAIN and t.device == Resource.CPU
                    and (t.row in STATE_ROWS or t.key.startswith("pinned_rounding")))
    if not pinning or not offloaded:
        return
    per_node = offloaded * a.estimate.cluster.gpus_on_a_node
    cpu_memory = a.budget.cpu_memory
    share = f" ({per_node / cpu_memory:.0%} of the {a.fmt(cpu_memory)} given)" if cpu_memory else ""
    yield Hit(_anchor(ctx),
              f"offload keeps {a.fmt(per_node)} per node in host RAM{share}, pinned (page-locked) because "
              f"{' and '.join(pinning)} pin_memory is true (DeepSpeed's default): the OS cannot swap it and "
              "containers need a large enough locked-memory limit (ulimit -l); set pin_memory: false to trade "
              "speed for flexibility")


PINNED_MEMORY = Rule(
    code="ZA807",
    name="pinned-memory",
    severity=Severity.INFO,
    summary="How much host RAM the offload pins per node.",
    explanation=(
        "DeepSpeed allocates offloaded optimizer state and parameter buffers in page-locked memory when "
        "pin_memory is true (the default), for fast copies. Pinned memory cannot be swapped, counts "
        "against the locked-memory limit, and NVMe offload needs pinned swap buffers too (DS#3000)."
    ),
    check=_pinned,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {"parameters": "13B"}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=False, options={"model": {"parameters": "13B"}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="deepspeed/runtime/zero/offload_config.py pin_memory; runtime/swap_tensor/",
)

def _tight_fit(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.memory.verdict import RESOURCE_WORDS

    current = _configured(ctx)
    if current is None or current.verdict != Verdict.TIGHT:
        return
    a, b = _advice_of(ctx), _advice_of(ctx).budget
    resource, capacity = current.binding_resource, {Capacity.GPU: b.gpu_memory,
                                                          Capacity.HOST: b.cpu_memory, Capacity.NVME: b.nvme}
    peak = {Capacity.GPU: current.peak_gpu, Capacity.HOST: current.peak_host_per_node,
            Capacity.NVME: current.peak_nvme_per_node}
    given = capacity[resource]
    assert given is not None  # a tight verdict binds on a capacity that is given
    # the expected peak, and the span up to its bound where that is what reaches the headroom (memory/verdict.py)
    bound = current.peak_gpu_bound if resource == Capacity.GPU else peak[resource]
    span = f" expected, up to {a.fmt(bound)}," if bound > peak[resource] else ""
    where = (f"the bound is over the {a.fmt(given)} there is" if bound > given else
             f"within the {a.fmt(given)} there is, but inside the {b.headroom:.0%} headroom (--headroom)")
    yield Hit(_anchor(ctx), f"{_label(current.option)} peaks at {a.fmt(peak[resource])}{span} of "
                            f"{RESOURCE_WORDS[resource]} {_phase_words(current)}: {where}, where allocator "
                            "fragmentation and library workspaces decide; real runs that close to the limit OOM "
                            "intermittently")


TIGHT_FIT = Rule(
    code="ZA809",
    name="tight-fit",
    severity=Severity.WARNING,
    summary="The configured setup fits, but only inside the headroom.",
    explanation=(
        "The expected peak over the load, train and save phases is within the GPU's memory (or the host RAM / "
        "NVMe given) but it, or the bound of the terms that leave room above their expected bytes, is above it "
        "less --headroom (default 10%). The estimate already includes "
        "allowances for the CUDA context and fragmentation; the headroom is the one margin for what "
        "varies between runs. Lower the micro batch, checkpoint activations or pick a stage that "
        "leaves room (does-not-fit's search lists the options)."
    ),
    check=_tight_fit,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu_memory": "38GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="zeroadvisor/memory/verdict.py; PyTorch CUDA caching allocator (fragmentation)",
)





def _faster_option_fits(ctx: Context) -> Iterator[Hit]:
    from zeroadvisor.advisor.advice import Reason

    current = _configured(ctx)
    if current is None or not current.comfortable:
        return
    a = _advice_of(ctx)
    if a.best is None or not a.best.change.parts:
        return
    best = a.recommend(a.best, Reason.FASTER)
    from zeroadvisor.advisor.ranking import overrules

    before, seconds = best.configured_step_time_s, best.step_time_s
    if not overrules(seconds, before):  # "faster" only outside the step-time model's measured error
        return
    yield _hit(ctx, f"{best.description} fits and is faster than the configured {_label(current.option)} by "
                    "more than the step-time model's measured error" + _fit_sentence(ctx, "", best, named=False),
               best)


FASTER_OPTION_FITS = Rule(
    code="ZA810",
    name="faster-option-fits",
    severity=Severity.INFO,
    summary="The configured setup fits, but another that fits is estimated faster by more than the model's error.",
    explanation=(
        "Every fitting combination of stage, offload devices, checkpointing, micro batch (at the same global "
        "batch) and parallel layout is ranked in the published order (one change before several, then the ladder "
        "of stages and offloads, fastest first; a run that fits is given no offload it lacks; docs/check.md) and "
        "timed by the step-time model (compute at the GPU's dense peak and the stated "
        "efficiency, ZeRO communication over the GPU's links, offload traffic and the CPU optimizer step). It is "
        "advice only when the best is faster than the configured run by more "
        "than the model's measured error: the median error of its estimated ratios on public same-hardware pairs "
        "(zeroadvisor/throughput/validation.py TIE_BAND, from benchmarks/throughput/compare.py). "
        "Needs a named GPU (--gpu) and a sequence length."
    ),
    check=_faster_option_fits,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2, '
                '"offload_optimizer": {"device": "cpu"}}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="issue 10; zeroadvisor/throughput (step-time model)",
)


def _matters(ctx: Context, name: str) -> bool:
    """Whether an assumed input can change this check's verdict or its fix (memory/assumed.py reach): one that
    feeds every phase always; a load input where the load phase binds the configured run or the fix; a machine
    fact where the step time overruled the published order; the client optimizer where its step's temporaries
    are counted in the binding phase; a missing sequence length is unknown-verdict's."""
    from zeroadvisor.memory.assumed import Reach, reach
    from zeroadvisor.memory.step_temporaries import KEY as STEP_TEMPORARY

    a = _advice_of(ctx)
    kind = reach(name)
    if kind == Reach.VERDICT:
        return True
    best = a.best
    judged = [st for st in (a.configured, best.stage if best is not None else None) if st is not None]
    if kind == Reach.LOAD:
        return any(st.binding_phase == Phase.LOAD for st in judged) or _zero_init_decides(a, name)
    if kind == Reach.STEP:  # the optimizer step's temporaries: where counting them or not changes a verdict
        cluster = a.estimate.cluster
        return any(_verdict_moves(st, sum(t.nbytes for t in st.terms if t.key == STEP_TEMPORARY), cluster)
                   for st in judged)
    if kind == Reach.HOST:  # pinned or pageable offload buffers: only host RAM's rows move
        return a.estimate.cluster.cpu_memory is not None
    return kind == Reach.STEP_TIME and a.step_time_decided


def _zero_init_decides(a: Advice, name: str) -> bool:
    """Whether the assumed zero.Init decides the configured run's verdict: without it (a script that builds the
    model before the Trainer's arguments exist, or a custom loop) the whole model is loaded on every rank and
    moved to every GPU (engine.py _configure_distributed_model), which can bind where zero.Init does not."""
    current = a.configured
    if name != "zero_init" or current is None:
        return False
    shape = a.search.shape
    other = a.search.written_with(dataclasses.replace(shape, load=dataclasses.replace(shape.load, zero_init=False)))
    return other is not None and other.counted_verdict != current.counted_verdict


def _verdict_moves(st: StageEstimate, nbytes: int, cluster: Cluster) -> bool:
    """Whether the GPU verdict of ``st`` differs with and without ``nbytes`` of its train phase (memory/verdict.py
    judge_one, the one verdict of a peak against a capacity)."""
    from zeroadvisor.memory.verdict import judge_one

    capacity = cluster.gpu_memory
    train = st.phases.get(Phase.TRAIN)
    if not nbytes or capacity is None or train is None:
        return False
    others = max((p.gpu for name, p in st.phases.items() if name != Phase.TRAIN), default=0)
    others_bound = max((p.bound_of(Capacity.GPU) for name, p in st.phases.items() if name != Phase.TRAIN), default=0)
    train_bound = train.bound_of(Capacity.GPU)

    def verdict(less: int) -> Verdict:  # the expected peak and its bound, each less ``less`` in the train phase
        return judge_one(max(train.gpu - less, others), capacity, cluster.headroom,
                         max(train_bound - less, others_bound))

    return verdict(0) != verdict(nbytes)


def _assumed_inputs(ctx: Context) -> Iterator[Hit]:
    for assumed in _advice_of(ctx).estimate.assumed:
        if _matters(ctx, assumed.name):
            yield Hit(assumed.pointer, assumed.message(), at="file")


def _verdict_unknown(ctx: Context) -> Iterator[Hit]:
    current = _configured(ctx)
    if current is None or current.verdict != Verdict.UNKNOWN:
        return
    a = _advice_of(ctx)
    missing = "; ".join(current.uncounted_words(short=False))
    padded = current.padded
    if padded is not None:  # the lengths are maxima (memory/padding.py): the estimate there is an upper bound
        also = f"; and {missing}" if missing else ""
        group = current.binding_group_peak  # a model on GPUs of its own binds there (memory/groups.py)
        yield Hit("", f"no verdict: at the maximum length ({padded.maximum_tokens()}) it needs "
                      f"{a.fmt(current.binding_peak_gpu)} per GPU{' ' + group.words if group else ''}, more than "
                      f"the {_budget(ctx)}; {padded.words()} "
                      f"({a.fmt(padded.peak_gpu)} per GPU there); for a run that fits every batch, lower the maximum "
                      f"or check with --padding max_length for the change that fits{also}", at="file")
        return
    if current.counted_verdict == Verdict.TIGHT:  # over the usable memory, under the card: not "fits"
        b = a.budget
        counted = (f"what is counted is tight ({a.fmt(current.peak_gpu)} per GPU, over the {b.fmt(b.usable)} usable "
                   f"and inside the {b.headroom:.0%} headroom of {b.fmt(b.gpu_memory)})")
    elif current.counted_verdict == Verdict.DOES_NOT_FIT:  # a feature that can only lower it is not counted
        counted = (f"what is counted does not fit ({a.fmt(current.peak_gpu)} per GPU of {_budget(ctx)}), and it "
                   "may fit with what is not counted")
    else:
        counted = f"what is counted fits ({a.fmt(current.peak_gpu)} per GPU of {_budget(ctx)})"
    yield Hit("", f"no verdict: {counted}, but {missing}", at="file")


VERDICT_UNKNOWN = Rule(
    code="ZA811",
    name="verdict-unknown",
    severity=Severity.WARNING,
    summary=("What is counted fits (or is tight), but an input that can change the verdict is missing: "
             "no \"fits\" is said."),
    explanation=(
        "A verdict covers the memory it counts. Without a sequence length (or a model architecture) the "
        "activations are not counted; without --cpu-memory (--nvme) the host RAM (NVMe) that an offload keeps "
        "its states in is not checked. Each can only add to the peak, so a run that does not fit on what is "
        "counted does not fit (does-not-fit says so), but one that fits on what is counted may not: its verdict "
        "is unknown (JSON: verdict \"unknown\", fits null, counted_verdict the verdict on what is counted), "
        "and `check` exits 5 unless another finding fails it first. Where what is counted is over the usable "
        "memory but inside the headroom, the finding says tight, not fits. The finding names what to give. With "
        "dynamic padding (--padding longest: each batch padded to its own longest sample, the Hugging Face data "
        "collators' default) the sequence and target lengths are maxima and the estimate there an upper bound: "
        "a run that does not fit at the maximum but fits at a shorter padded length is unknown too, and the "
        "finding gives the longest padded length that fits (JSON padded_fit; source and target shortened "
        "together, in proportion to their maxima): whether the data's batches stay under it decides."
    ),
    check=_verdict_unknown,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {k: v for k, v in _MODEL_7B.items() if k != "sequence_length"},
                                     "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="zeroadvisor memory/verdict.py (stated); memory/assumed.py (what is not counted)",
)


def no_estimate_hit(reason: str, pointer: str, placed: bool) -> Hit:
    """The no-estimate finding of a config the memory model refused (advisor/check.py emits it where the
    estimate fails: no advice exists for an advice rule to read). ``placed``: the file has the key at ``pointer``."""
    return Hit(pointer if placed else "", f"no memory estimate, so no verdict: {reason}; nothing here says the run "
                                          "fits until that is fixed", at="value" if placed else "file")


def _no_hits(ctx: Context) -> Iterator[Hit]:
    return iter(())


NO_ESTIMATE = Rule(
    code="ZA812",
    name="no-estimate",
    severity=Severity.ERROR,
    summary="The memory model cannot use a value of the config or the run: no estimate, so no verdict.",
    explanation=(
        "The memory model refuses a value it cannot turn into bytes: a bucket size beyond torch's int64 sizes "
        "(allgather_bucket_size: 1e20), a parallel degree DeepSpeed does not accept (sequence_parallel_size: "
        "-1), a micro batch beyond any memory (2e9 samples per GPU), a boolean or number DeepSpeed's pydantic "
        "model rejects. Then no option is estimated and nothing is said to fit: a check that could not decide "
        "is never a pass. The finding names the value (at its key where the file has it) and why; `check` "
        "fails on it (an error), and with --ignore ZA812 still exits 5 (verdict unknown), never 0; `preflight` "
        "raises PreflightError. A config that does not parse or is not an object is invalid-syntax's and "
        "not-an-object's, not this rule's."
    ),
    check=_no_hits,  # emitted by advisor/check.py where the estimate fails (no_estimate_hit)
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": '
                '{"stage": 2, "allgather_bucket_size": 1e20}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": '
                '{"stage": 2, "allgather_bucket_size": 5e8}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB"}),
    ),
    needs_advice=True,
    source="zeroadvisor memory/settings.py (the values DeepSpeed's config models accept); memory/errors.py",
)


def _vllm_below_floor(ctx: Context) -> Iterator[Hit]:
    """vLLM colocated with a share of the card below its own floor (memory/method.py vllm_floor) never starts: the
    configured option's verdict binds there (StageEstimate.vllm_share), and this finding says how to give it more."""
    from zeroadvisor.advisor.nofit import utilization_setting
    from zeroadvisor.memory.method import colocated_vllm_pool, vllm_share

    a = _advice_of(ctx)
    est = a.estimate
    setup, card = est.shape.method, est.cluster.gpu_memory
    pool = colocated_vllm_pool(setup, est.model, est.shape.sequence_length, card)
    if pool is None or card is None or pool[0].nbytes <= pool[1]:
        return
    floor, share = pool[0], vllm_share(setup)
    given = setup.generation.vllm_gpu_memory_utilization is not None
    yield Hit("", f"vLLM colocated will not start: vllm_gpu_memory_utilization {share:g}"
                  f"{'' if given else ' (the trainer default)'} gives it {a.fmt(pool[1])} of the "
                  f"{a.fmt(card)} card, less than its 16-bit weights ({a.fmt(floor.weights)}) and one "
                  f"{floor.tokens}-token request's KV cache ({a.fmt(floor.kv_cache)}); vLLM raises \"No available "
                  "memory for the cache blocks\" (or \"To serve at least one request\") when the trainer builds it. "
                  f"Give it at least {floor.share:g} "
                  f"({utilization_setting(setup.trainer, floor.share)}), shorten the prompt and "
                  "completion lengths, or run vLLM in server mode on GPUs of its own; " + "; ".join(floor.notes),
              at="file", stops="vLLM will not start at its share of the card")


_GRPO_LAUNCH = ("swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --use_vllm true --vllm_mode colocate "
                "--max_completion_length 1024")

VLLM_BELOW_FLOOR = Rule(
    code="ZA813",
    name="vllm-below-floor",  # advisor/advice.py VLLM_BELOW_FLOOR: a failing finding
    severity=Severity.ERROR,
    summary="vLLM colocated on the training GPUs gets less of the card than its weights and one request need.",
    explanation=(
        "vllm_gpu_memory_utilization is the share of the whole card vLLM's own allocations may take, its weights "
        "included (vllm/v1/worker/gpu_worker.py determine_available_memory: total x utilization, less the "
        "weights and the profile run, is the KV cache). Below its weights it raises \"No available memory for "
        "the cache blocks\"; below the KV cache of one request of max_model_len (TRL: max_prompt_length + "
        "max_completion_length) check_enough_kv_cache_memory raises \"To serve at least one request\". Either "
        "way the trainer stops while it builds vLLM, after the model is loaded. The floor counted is the policy's "
        "16-bit weights plus that KV cache in whole 16-token blocks, each split over vllm_tensor_parallel_size: "
        "a lower bound (the profile run's activations and memory outside PyTorch are not counted), so a share "
        "below it never starts. The finding names the "
        "least share and where the trainer reads it. The configured option's verdict (and every other's: they "
        "keep the share) is then does-not-fit, binding on vLLM's share of the card (JSON: fits false, "
        "binding_resource vllm_share), so no stage change is recommended; the ways out price the share raised to "
        "the floor. A share above the floor that makes the training run not fit is does-not-fit's, whose fix "
        "lowers the share toward the floor (advisor/nofit.py)."
    ),
    check=_vllm_below_floor,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                     "launch": _GRPO_LAUNCH + " --vllm_gpu_memory_utilization 0.1"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                      "launch": _GRPO_LAUNCH + " --vllm_gpu_memory_utilization 0.4"}),
    ),
    needs_advice=True,
    source="issue 35; memory/method.py vllm_floor (vllm gpu_worker.py, kv_cache_utils.py)",
)


def _trainer_refuses(ctx: Context) -> Iterator[Hit]:
    """The trainer's own code stops the configured option before training (StageEstimate.trainer_refusal, memory/
    method.py trainer_refusal), whatever its memory: the finding says why and recommends the best change the
    trainer runs (the search leaves refused options out: candidates.py), where one fits."""
    from zeroadvisor.advisor.advice import Reason

    a = _advice_of(ctx)
    current = a.configured
    if current is None or current.trainer_refusal is None:
        return
    what = f"{current.trainer_refusal}; the run stops before training"
    if all(st.trainer_refusal is not None for st in a.estimate.stages):
        yield Hit("", f"{what}; the trainer runs no ZeRO stage with this setting: change it in the trainer's file",
                  at="file", stops="the trainer refuses this configuration")
        return
    if a.best is None:
        yield Hit("", f"{what}; no option the trainer runs fits on these GPUs", at="file",
                  stops="the trainer refuses this configuration")
        return
    rec = a.recommend(a.best, Reason.TRAINER_REFUSES)
    hit = _hit(ctx, f"{what}. " + _fit_sentence(ctx, "Cheapest change the trainer runs", rec), rec)
    yield dataclasses.replace(hit, stops="the trainer refuses this configuration")


_LF_QLORA8 = {"stage": "sft", "do_train": True, "finetuning_type": "lora", "lora_target": "all",
              "cutoff_len": 1024, "per_device_train_batch_size": 1, "bf16": True}
_AXOLOTL_SFT = {"base_model": "meta-llama/Llama-2-7b-hf", "micro_batch_size": 1, "sequence_len": 1024, "bf16": True}

TRAINER_REFUSES = Rule(
    code="ZA814",
    name="trainer-refuses",  # advisor/advice.py TRAINER_REFUSES: a failing finding
    severity=Severity.ERROR,
    summary="The trainer's own code refuses the configured DeepSpeed stage with the run's settings: it stops before "
            "training.",
    explanation=(
        "Some refusals are the trainer's, not DeepSpeed's, and come only at launch. LLaMA-Factory loads every "
        "model it quantizes through configure_quantization, the DPO/KTO reference of ref_model_quantization_bit "
        "too (create_ref_model), and under ZeRO-3 raises \"Only 4-bit quantized model can use fsdp+qlora or auto "
        "device map.\" for 8-bit bitsandbytes (llamafactory/model/model_utils/quantization.py @ v0.8.0 to "
        "v0.9.3), and its argument parser raises under ZeRO-3 for use_unsloth, pure_bf16, predict_with_generate, "
        "pissa_init and use_kt set true (hparams/parser.py get_train_args), under ZeRO-1/2 for layer-wise BAdam, "
        "and at every stage for GaLore, APOLLO and ratio-wise BAdam; from 0.9.4 its PPO raises \"Incompatible TRL "
        "version detected\" with any TRL outside 0.8.6-0.9.6 (its own pin installs 0.18-0.24; train/ppo/trainer.py "
        "CustomPPOTrainer.__init__), the TRL read from the pins. axolotl's config validation refuses "
        "DeepSpeed at every stage with the Muon, flash_* and q_galore_adamw8bit optimizers, ReLoRA, and fsdp "
        "(utils/schemas/validation.py); ms-swift --fsdp beside --deepspeed, and a LLaMA-Pro model in GRPO under "
        "ZeRO-3; OpenRLHF --deepspeed_enable_sleep below ZeRO-3 without --adam_offload (from 0.8.10 only with "
        "DeepSpeed 0.17.5 or lower: the DeepSpeed release the config is read as). TRL refuses "
        "precompute_ref_log_probs under ZeRO-3 (DPO 0.7.5 to 0.28, KTO 0.8.0 to 1.2). Each check applies from"
        " the trainer release that makes it, read from "
        "the pins (the newest release read where none is pinned). The memory of such an option is "
        "still counted and shown, but its verdict is followed by \"it stops before training\", the finding "
        "fails the check, and the advisor recommends no option the trainer refuses (a lower stage, a fix, a "
        "cluster size). The finding recommends the best change that fits and that the trainer runs (its fix), "
        "and says the other way out the trainer gives where there is one (4-bit quantization, which "
        "LLaMA-Factory runs under ZeRO-3); where the trainer refuses every stage, the setting itself is the change."
    ),
    check=_trainer_refuses,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                     "training_args": {**_LF_QLORA8, "quantization_bit": 8}}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 3}}',
                fails=False, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                      "training_args": {**_LF_QLORA8, "quantization_bit": 4}}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {**_MODEL_7B}, "gpus": 8, "gpu": "A100-SXM4-80GB",
                                     "training_args": {**_AXOLOTL_SFT, "optimizer": "muon"}}),
    ),
    needs_advice=True,
    source="issue 35; memory/method.py trainer_refusal (LLaMA-Factory model_utils/quantization.py, hparams/parser.py; "
           "config/trainer_refusals.py; OpenRLHF utils/deepspeed/deepspeed_utils.py offload_deepspeed_states)",
)


ASSUMED_INPUT = Rule(
    code="ZA808",
    name="assumed-input",
    severity=Severity.WARNING,
    summary="An input that can change the verdict or the fix was not given: the estimate assumed it.",
    explanation=(
        "The verdict depends on inputs the DeepSpeed config may leave open: the micro batch and precision when "
        "the config says \"auto\" (the Hugging Face integration fills them from its own arguments), the stage "
        "when it is \"auto\" (DeepSpeed runs stage 0; Accelerate fills it), the optimizer when the config has "
        "none, the target length of encoder-decoder models, and how the model is loaded (load dtype, zero.Init, "
        "meta-device loading: the Hugging Face Trainer's behaviour by default); the fix's ranking depends on the "
        "step time's machine facts (GPU efficiency, CPU cores and launcher with CPU offload, the network "
        "between nodes, NVMe bandwidth). Every assumption is listed once, one line each, under \"Assumptions\"; "
        "this finding reports those that can change this check's answer: the shape and config inputs always, "
        "the load inputs where the load phase binds the configured run or the fix, the machine facts where the "
        "step time overruled the published order (docs/check.md). A machine fact no run judged uses (the "
        "network on one node) is not mentioned. A missing sequence length is verdict-unknown's. Each names the "
        "value assumed and the flag or model-description field that sets it; a given value fills only what "
        "the config leaves open, and one the config contradicts is a usage error."
    ),
    check=_assumed_inputs,
    examples=(
        Example('{"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": true}, "optimizer": {"type": '
                '"AdamW"}, "zero_optimization": {"stage": 2}}',
                fails=True, options={"model": {**_MODEL_7B, "load_dtype": "bf16", "meta_load": False},
                                     "gpus": 8, "gpu": "A100-SXM4-80GB"}),
        Example('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, "optimizer": {"type": '
                '"AdamW"}, "zero_optimization": {"stage": 2}}',
                fails=False, options={"model": {**_MODEL_7B, "load_dtype": "bf16", "meta_load": False},
                                      "gpus": 8, "gpu": "A100-SXM4-80GB", "efficiency": 0.4,
                                      "inter_node_bandwidth": 25, "cpu_cores": 48, "nvme_bandwidth": 3,
                                      "launcher": "torchrun"}),
    ),
    needs_advice=True,
    source="transformers integrations/deepspeed.py (\"auto\" filling), modeling_utils.py (from_pretrained dtype, "
           "zero.Init); deepspeed/runtime/zero/config.py (stage)",
)


RULES = (DOES_NOT_FIT, TIGHT_FIT, LOWER_STAGE_FITS, ACTIVATIONS_DOMINATE, OFFLOAD_NOT_NEEDED,
         HOST_MEMORY_INSUFFICIENT, LARGE_BUCKETS, PINNED_MEMORY, ASSUMED_INPUT, FASTER_OPTION_FITS, VERDICT_UNKNOWN,
         NO_ESTIMATE, VLLM_BELOW_FLOOR, TRAINER_REFUSES)

"""What every human-readable report shows first: the configured option's verdict, the recommended change and its
cost, which options a short report shows, and each option's memory by row for the bar charts (text bars, the HTML
report's SVG). Words and labels only: nothing here chooses.

The recommendation is the one the advisor decided for the check (``CheckResult.recommendation``, an
advisor/lead.py Lead: the finding that carries it, its words, its option's column or its own). A column of the
options table is the recommended one when it is the Lead's column, by identity. Per-option step times (the
estimate command) are throughput.per_option's StepTime values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from zeroadvisor import vocab as labels
from zeroadvisor.vocab import Capacity, Device, Verdict

if TYPE_CHECKING:
    from zeroadvisor.advisor.lead import Lead, NoFix
    from zeroadvisor.advisor.nofit import NothingFits
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime, Throughput

    Steps = Mapping[Option, StepTime]

# The rows a bar stacks, bottom to top: the parts of "total per GPU" (model_states is their subtotal).
BAR_ROWS = ("parameters", "gradients", "optimizer_states", "gathered_parameters", "buffers", "activations",
            "overhead")
# One letter per row in the text bars (readable without colour and in ASCII).
BAR_LETTERS = {"parameters": "P", "gradients": "G", "optimizer_states": "O", "gathered_parameters": "W",
               "buffers": "B", "activations": "A", "overhead": "X"}
# a preference/RL run's other models (memory/terms.py METHOD_ROWS), drawn before the overhead where a run has them
METHOD_BAR_LETTERS = {"reference_model": "R", "reward_model": "M", "critic": "C", "teacher_model": "T", "vllm": "V"}


def bar_rows_of(stages: Sequence[StageEstimate]) -> tuple[str, ...]:
    """BAR_ROWS with the method rows any of ``stages`` has, before the overhead (an SFT run: BAR_ROWS)."""
    present = {row for st in stages for row in st.per_gpu if row in METHOD_BAR_LETTERS}
    extra = tuple(row for row in METHOD_BAR_LETTERS if row in present)
    return BAR_ROWS[:-1] + extra + BAR_ROWS[-1:]


def bar_letter(row: str) -> str:
    return BAR_LETTERS[row] if row in BAR_LETTERS else METHOD_BAR_LETTERS[row]


def no_fix_sentence(no_fix: NoFix | None) -> str | None:
    """Where the run fails and no change to the config makes it run: one line saying so, pointing at the failing
    finding (which says what binds and what would fit), instead of a lesser change (issue 20, defect 9)."""
    if no_fix is None:
        return None
    if no_fix.stops:  # not memory: the run stops whatever it fits in
        return (f"No config change makes it run ({no_fix.code} {no_fix.name}: {no_fix.stops}): its finding says "
                "what to change")
    if no_fix.by_hand:  # an Accelerate YAML: the change fits, and no fix writes it there
        return (f"A change fits ({no_fix.code} {no_fix.name}), to make by hand: no fix is written into this file; "
                "its finding says the change")
    return f"No config change fits ({no_fix.code} {no_fix.name}): its finding says what is missing"


def nothing_fits_sentence(nothing: NothingFits | None, unit: str) -> str | None:
    """Where nothing fits on the hardware given: the ways out, cheapest first, each priced (advisor/nofit.py),
    the one the config fix writes marked; None otherwise."""
    if nothing is None or not nothing.ways:
        return None
    ways = "; ".join(f"({i}) {way.short(unit)}{' (the config fix)' if way.is_fix else ''}"
                     for i, way in enumerate(nothing.ways, 1))
    return f"Nothing fits on the hardware given; the ways out, cheapest first: {ways}"


def throughput(st: StageEstimate | None, steps: Steps | None) -> Throughput | None:
    """The option's step-time estimate, or None where there is none (no table, or no step time for it)."""
    from zeroadvisor.throughput import Throughput

    if st is None or not steps:
        return None
    result = steps.get(st.option)
    return result if isinstance(result, Throughput) and result.step_time_s else None


def relative_step_time(st: StageEstimate, configured: StageEstimate | None,
                       steps: Steps | None) -> float | None:
    """The option's step time over the configured option's, when both are estimated."""
    mine, theirs = throughput(st, steps), throughput(configured, steps)
    if mine is None or theirs is None:
        return None
    return mine.step_time_s / theirs.step_time_s


def verdict_sentence(estimate: Estimate | None, rec: Lead | None, unit: str,
                     findings: Sequence[Finding] = (), short: bool = False) -> str:
    """The configured option in one sentence: verdict, peak against capacity, binding phase and
    resource, then the recommended change and its cost."""
    from zeroadvisor.memory import verdict as verdicts
    from zeroadvisor.units import format_bytes

    st = estimate.configured if estimate is not None else None
    if estimate is None or st is None:
        text = "Verdict: per option, in the table below (no config given)." if estimate is not None else \
            "Verdict: no memory estimate (the config could not be estimated; see the findings)."
    else:
        if st.vllm_share is not None:  # vLLM's own pool binds: its floor against its share (memory/verdict.py)
            floor, share = st.vllm_share
            text = (f"Verdict ({labels.option_plain(st.option)}): {verdict_words(st)}; vLLM needs at least "
                    f"{format_bytes(floor, unit)} when the trainer starts it, more than "
                    f"{verdicts.RESOURCE_WORDS[Capacity.VLLM_SHARE]} ({format_bytes(share, unit)}); training "
                    f"peak {format_bytes(st.peak_gpu, unit)} per GPU")
        else:
            text = _memory_sentence(estimate, st, unit)
        for words in qualifiers(st, short):
            text += f"; {words}"
        # the training memory fits, but the run stops before it trains (a finding says why: Finding.stops)
        stops = sorted({f"{f.stops} ({f.code})" for f in findings if f.stops})
        if stops and st.verdict != Verdict.DOES_NOT_FIT:
            text += "; but it stops before training: " + "; ".join(stops)
    if rec is not None:
        text += ". " + recommendation_words(rec, unit)
    return text


def _memory_sentence(estimate: Estimate, st: StageEstimate, unit: str) -> str:
    """The verdict on the memory a phase peaks at: the binding resource's peak (and the span up to its bound)
    against its capacity, with the model's own group where one binds."""
    from zeroadvisor.memory import verdict as verdicts
    from zeroadvisor.units import format_bytes

    capacity = estimate.cluster.capacities()[st.binding_resource]
    peak = {Capacity.GPU: st.peak_gpu, Capacity.HOST: st.peak_host_per_node,
            Capacity.NVME: st.peak_nvme_per_node}[st.binding_resource]
    where = f"{verdicts.RESOURCE_WORDS[st.binding_resource]} {labels.PHASE_WORDS[st.binding_phase]}"
    against = f" of {format_bytes(capacity, unit)}" if capacity is not None else ""
    # the expected peak, and the span up to its bound where a term leaves room (memory/verdict.py)
    bound = st.peak_gpu_bound if st.binding_resource == Capacity.GPU else peak
    group = st.binding_group_peak  # a model on GPUs of its own binds (memory/groups.py): its GPU's peak
    if group is not None:
        peak, bound, where = group.gpu, group.gpu_bound, f"{where} {group.words}"
    span = f" expected, up to {format_bytes(bound, unit)}," if bound > peak else ""
    return (f"Verdict ({labels.option_plain(st.option)}): {verdict_words(st)}; peak "
            f"{format_bytes(peak, unit)}{span}{against} {where}")


def binding_words(st: StageEstimate) -> str:
    """The binding phase for a table cell, with the model's own group where one binds ("train (reference)")."""
    return f"{st.binding_phase} ({st.binding_group})" if st.binding_group is not None else str(st.binding_phase)


def verdict_words(st: StageEstimate) -> str:
    """The option's verdict in words: "unknown" said for why (what is counted fits, or the run fits only while
    batches are padded shorter than the maximum: memory/padding.py)."""
    if st.padded is not None and st.verdict == Verdict.UNKNOWN:
        return f"unknown (does not fit at the maximum length, {st.padded.maximum_tokens()})"
    if st.verdict == Verdict.UNKNOWN and st.counted_verdict == Verdict.TIGHT:
        return labels.UNKNOWN_TIGHT_WORDS
    if st.verdict == Verdict.UNKNOWN and st.counted_verdict == Verdict.DOES_NOT_FIT:
        return labels.UNKNOWN_OVER_WORDS
    return labels.VERDICT_WORDS[st.verdict]


def qualifiers(st: StageEstimate, short: bool = True) -> list[str]:
    """What the verdict does not cover, one phrase each: the rows not counted, and the padded length that fits
    where the lengths are maxima (short: the one-screen report's words)."""
    out = st.uncounted_words(short)
    if st.padded is not None and st.verdict == Verdict.UNKNOWN:
        out.append(st.padded.words(short))
    return out


def recommendation_words(rec: Lead, unit: str) -> str:
    """"Recommended (ZA801 does-not-fit): <the change> (<its option>), peak <GB> per GPU; cost: <its cost>"."""
    from zeroadvisor.units import format_bytes

    code = f"{rec.code} {rec.name}"
    if rec.change is None or rec.peak_gpu is None:  # config keys alone (smaller buckets): no estimate of its own
        return f"Recommended ({code}): change {', '.join(rec.keys)}"
    text = f"Recommended ({code}): {rec.change}, peak {format_bytes(rec.peak_gpu, unit)} per GPU"
    if rec.uncounted:  # fits on what is counted: never said plain (memory/verdict.py stated)
        text += " (" + "; ".join(rec.uncounted) + ")"
    cost = f"{rec.speed}; {rec.cost}" if rec.speed else rec.cost
    text = f"{text}; cost: {cost}" if cost else text
    return f"{text}; {rec.why_not}" if rec.why_not else text


def shown_stages(estimate: Estimate, rec: Lead | None, all_options: bool) -> list[StageEstimate]:
    """The options a report shows: every one with ``all_options``; by default the configured, the
    recommended and the stages without offload, in the estimate's order."""
    if all_options:
        return list(estimate.stages)
    wanted = {id(st) for st in estimate.stages
              if st.configured
              or (st.option.offload_optimizer == Device.NONE and st.option.offload_param == Device.NONE)}
    if rec is not None and rec.option is not None:
        wanted.add(id(rec.option))
    return [st for st in estimate.stages if id(st) in wanted] + extra_column(estimate, rec)


def extra_column(estimate: Estimate, rec: Lead | None) -> list[StageEstimate]:
    """The recommended run's own estimate where no option of ``estimate`` is that run (shown last)."""
    own = rec.own if rec is not None else None
    if own is None or any(own is st for st in estimate.stages):
        return []
    return [own]


def column_suffix(st: StageEstimate, rec: Lead | None) -> str:
    """What the recommended run's own column changes besides its option ("+mb:1 +ckpt:full"); "" for the others."""
    if rec is not None and rec.own is not None and rec.own is st:
        return rec.suffix
    return ""


# Beside an option's fits mark where the trainer's own code refuses it (StageEstimate.trainer_refusal): the memory
# fits, the run does not start (the trainer-refuses finding says why)
TRAINER_REFUSES_WORDS = "the trainer refuses it"


def fits_words(st: StageEstimate, mark: str) -> str:
    """The fits cell: the verdict's mark, and where the trainer refuses the option, that too."""
    return f"{mark} {TRAINER_REFUSES_WORDS}" if st.trainer_refusal else mark


def column_label(st: StageEstimate, rec: Lead | None) -> str:
    """A column's header: its option ("Z3 +opt:cpu"), and for the recommended run's own column what else it
    changes ("Z2 +mb:1 +ckpt:full")."""
    suffix = column_suffix(st, rec)
    label = labels.option_header(st.option)
    return f"{label} {suffix}" if suffix else label


def is_recommended(st: StageEstimate, rec: Lead | None) -> bool:
    return rec is not None and rec.column is st


def role(st: StageEstimate, rec: Lead | None) -> str:
    """"configured", "recommended" or "" for a column (the marks, classes and words of every report)."""
    return "recommended" if is_recommended(st, rec) else "configured" if st.configured else ""


def is_configured(st: StageEstimate, rec: Lead | None) -> bool:
    """The configured option's column (the recommended run's own column is not, though its option is)."""
    return st.configured and not is_recommended(st, rec)


def bar_rows(st: StageEstimate) -> list[tuple[str, int]]:
    """(row, bytes) per GPU while training, bottom to top: the parts of the option's total."""
    return [(row, int(st.per_gpu[row])) for row in bar_rows_of([st]) if st.per_gpu.get(row)]


def gpu_name(estimate: Estimate) -> str | None:
    """The GPU ``--gpu`` resolved to (hardware/gpus.py GpuSpec.name), when the cluster names one."""
    spec = estimate.cluster.gpu
    return spec.name if spec is not None else None


def gpu_words(estimate: Estimate, unit: str) -> str | None:
    """The resolved GPU and its capacity ("A100-SXM4-80GB, 85.90 GB per GPU"), or the capacity alone."""
    from zeroadvisor.units import format_bytes

    cluster = estimate.cluster
    name = gpu_name(estimate)
    if cluster.gpu_memory is None:
        return None
    capacity = format_bytes(cluster.gpu_memory, unit)
    return f"{name}, {capacity} per GPU" if name else f"{capacity} per GPU"


def assumption_lines(estimate: Estimate, with_assumed: bool = True) -> list[str]:
    """Everything the verdict rests on that nobody measured: uncounted rows, assumed inputs, the
    estimate's assumptions."""
    out: list[str] = []
    st = estimate.configured
    if st is not None:
        out += qualifiers(st, short=False)
    if with_assumed:
        out += [item.brief() for item in estimate.assumed]
    out += list(estimate.assumptions)
    return out

"""What every human-readable report shows first, worked out once: the configured option's verdict,
the recommended change and its cost, which options a short report shows, and each option's memory
by row for the bar charts (text bars, the HTML report's SVG).

The recommendation is read from the advice findings (ZA8xx): the first one, by priority, that
carries a fix; its merge patch says which stage/offload the fix runs. Its cost is the estimated
step time against the configured option when there is one (zeroadvisor.throughput, per option),
else the cost clause the advice rule wrote.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from zeroadvisor import vocab as labels

if TYPE_CHECKING:
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.memory.estimate import Estimate, StageEstimate

# Advice that carries the change a reader should make first: the configured setup failing comes
# before a cheaper option that also fits.
ADVICE_PRIORITY = ("ZA801", "ZA805", "ZA802", "ZA804", "ZA803", "ZA809", "ZA806")
# The advice rules write "...; cost: <what the change costs>" (advisor/rules.py, advisor/search.py COSTS).
COST_MARK = "; cost: "

# The rows a bar stacks, bottom to top: the parts of "total per GPU" (model_states is their subtotal).
BAR_ROWS = ("parameters", "gradients", "optimizer_states", "gathered_parameters", "buffers", "activations",
            "overhead")
# One letter per row in the text bars (readable without colour and in ASCII).
BAR_LETTERS = {"parameters": "P", "gradients": "G", "optimizer_states": "O", "gathered_parameters": "W",
               "buffers": "B", "activations": "A", "overhead": "X"}


@dataclass(frozen=True)
class Recommendation:
    finding: "Finding"
    stage: "StageEstimate | None"  # the option the fix runs, when the fix changes stage or offload
    cost: str | None

    @property
    def changes_option(self) -> bool:
        return self.stage is not None and not self.stage.configured


def recommendation(findings: Iterable["Finding"], estimate: "Estimate | None",
                   steps: Mapping[Any, Any] | None = None) -> Recommendation | None:
    """The change the advice recommends first, or None when no advice carries one. ``steps``: the
    step-time estimate per option (zeroadvisor.throughput.per_option), when there is one."""
    advice = [f for f in findings if f.code in ADVICE_PRIORITY and f.fix is not None]
    if not advice:
        return None
    finding = min(advice, key=lambda f: ADVICE_PRIORITY.index(f.code))
    stage = None
    if estimate is not None and estimate.configured is not None:
        stage = _stage_of(estimate, _patched_option(estimate.configured.option, finding.fix))
    numbers = finding.recommends
    if numbers is not None and stage is not None and stage.peak_gpu != numbers["peak_gpu"]:
        stage = None  # the change also moves the micro batch, layout or buckets: no column of the table is it
    return Recommendation(finding, stage, _cost(finding, estimate, stage, steps))


def _patched_option(option: Any, patch: dict[str, Any]) -> tuple[int, str, str]:
    """(stage, optimizer device, parameter device) after the RFC 7396 merge patch ``patch``, normalised as
    DeepSpeed runs it (memory/options.py configured_option: no offload at stage 0, no parameter offload
    below stage 3)."""
    zero = patch.get("zero_optimization")
    stage, devices = option.stage, {"offload_optimizer": option.offload_optimizer,
                                    "offload_param": option.offload_param}
    if isinstance(zero, dict):
        if isinstance(zero.get("stage"), int):
            stage = zero["stage"]
        for which in devices:
            if which in zero:
                block = zero[which]
                if block is None:
                    devices[which] = "none"
                elif isinstance(block, dict) and isinstance(block.get("device"), str):
                    devices[which] = block["device"]
    if stage == 0:
        devices = dict.fromkeys(devices, "none")
    elif stage < 3:
        devices["offload_param"] = "none"
    return stage, devices["offload_optimizer"], devices["offload_param"]


def _stage_of(estimate: "Estimate", key: tuple[int, str, str]) -> "StageEstimate | None":
    for st in estimate.stages:
        if (st.option.stage, st.option.offload_optimizer, st.option.offload_param) == key:
            return st
    return None


def throughput(st: "StageEstimate | None", steps: Mapping[Any, Any] | None) -> Any:
    """The option's step-time estimate (a Throughput with ``step_time_s``), or None where there is none
    (no table, or the model could not time this option)."""
    if st is None or not steps:
        return None
    result = steps.get(st.option)
    return result if getattr(result, "step_time_s", None) else None


def relative_step_time(st: "StageEstimate", configured: "StageEstimate | None",
                       steps: Mapping[Any, Any] | None) -> float | None:
    """The option's step time over the configured option's, when both are estimated."""
    mine, theirs = throughput(st, steps), throughput(configured, steps)
    if mine is None or theirs is None:
        return None
    return mine.step_time_s / theirs.step_time_s


def _cost(finding: "Finding", estimate: "Estimate | None", stage: "StageEstimate | None",
          steps: Mapping[Any, Any] | None) -> str | None:
    numbers = finding.recommends
    if numbers is not None:  # the search's own numbers for the whole change
        before, after = numbers.get("configured_step_time_s"), numbers.get("step_time_s")
        if before and after:
            return f"estimated step time {after / before:.2f}x the configured run's; {numbers['cost']}"
        return numbers["cost"]
    if stage is not None and estimate is not None and not stage.configured:
        ratio = relative_step_time(stage, estimate.configured, steps)
        if ratio is not None:
            return f"estimated step time {ratio:.2f}x the configured option's"
    if COST_MARK in finding.message:
        return finding.message.split(COST_MARK, 1)[1].strip()
    if stage is not None and estimate is not None and estimate.configured is not None and not stage.configured:
        return _option_cost(estimate.configured.option, stage.option)
    return None


def _option_cost(configured, option) -> str | None:
    """The cost sentence of a move between options, from the advice's own table (advisor/search.py COSTS)."""
    from zeroadvisor.advisor import search

    costs = getattr(search, "COSTS", {})
    if option.offload_optimizer == "nvme" or option.offload_param == "nvme":
        kind = "nvme"
    elif option.offload_param != "none" and configured.offload_param == "none":
        kind = "offload-param"
    elif option.offload_optimizer != "none" and configured.offload_optimizer == "none":
        kind = "offload-optimizer"
    elif option.stage == configured.stage:
        kind = "no-offload"
    elif option.stage == 3:
        kind = "higher-stage"
    else:
        kind = "lower-stage" if configured.stage == 3 else "other-stage"
    return costs.get(kind)


def verdict_sentence(estimate: "Estimate | None", rec: Recommendation | None, unit: str,
                     findings: Sequence["Finding"] = ()) -> str:
    """The configured option in one sentence: verdict, peak against capacity, binding phase and
    resource, then the recommended change and its cost."""
    from zeroadvisor.memory import verdict as verdict_words
    from zeroadvisor.units import format_bytes

    st = estimate.configured if estimate is not None else None
    if st is None:
        text = "Verdict: per option, in the table below (no config given)." if estimate is not None else \
            "Verdict: no memory estimate (the config could not be estimated; see the findings)."
    else:
        capacity = estimate.cluster.capacities()[st.binding_resource]
        peak = {"gpu": st.peak_gpu, "host": st.peak_host_per_node, "nvme": st.peak_nvme_per_node}[st.binding_resource]
        where = f"{verdict_words.RESOURCE_WORDS[st.binding_resource]} {labels.PHASE_WORDS[st.binding_phase]}"
        against = f" of {format_bytes(capacity, unit)}" if capacity is not None else ""
        text = (f"Verdict ({labels.option_header(st.option)}): {labels.VERDICT_WORDS[st.verdict]}; peak "
                f"{format_bytes(peak, unit)}{against} {where}")
        for row in st.uncounted:
            text += f"; {labels.UNCOUNTED_WORDS[row]}"
    if rec is not None:
        text += ". " + recommendation_words(rec, unit)
    return text


def recommendation_words(rec: Recommendation, unit: str) -> str:
    from zeroadvisor.units import format_bytes

    code = f"{rec.finding.code} {rec.finding.name}"
    numbers = rec.finding.recommends
    if numbers is not None:
        text = (f"Recommended ({code}): {numbers['change']} ({numbers['option']}), peak "
                f"{format_bytes(numbers['peak_gpu'], unit)} per GPU")
    elif rec.changes_option:
        st = rec.stage
        text = (f"Recommended ({code}): {labels.option_words(st.option)} ({labels.option_header(st.option)}), "
                f"peak {format_bytes(st.peak_gpu, unit)} per GPU")
    else:
        keys = sorted(_leaf_keys(rec.finding.fix or {}))
        text = f"Recommended ({code}): change {', '.join(keys)}" if keys else f"Recommended: {code}"
    if rec.cost:
        text += f"; cost: {rec.cost}"
    return text


def _leaf_keys(patch: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in patch.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        out += _leaf_keys(value, path) if isinstance(value, dict) and value else [path]
    return out


def shown_stages(estimate: "Estimate", rec: Recommendation | None, all_options: bool) -> list["StageEstimate"]:
    """The options a report shows: every one with ``all_options``; by default the configured, the
    recommended and the stages without offload, in the estimate's order."""
    if all_options:
        return list(estimate.stages)
    wanted = {id(st) for st in estimate.stages
              if st.configured or (st.option.offload_optimizer == "none" and st.option.offload_param == "none")}
    if rec is not None and rec.stage is not None:
        wanted.add(id(rec.stage))
    return [st for st in estimate.stages if id(st) in wanted]


def is_recommended(st: "StageEstimate", rec: Recommendation | None) -> bool:
    return rec is not None and rec.changes_option and rec.stage is st


def bar_rows(st: "StageEstimate") -> list[tuple[str, int]]:
    """(row, bytes) per GPU while training, bottom to top: the parts of the option's total."""
    return [(row, int(st.per_gpu[row])) for row in BAR_ROWS if st.per_gpu.get(row)]


def gpu_name(estimate: "Estimate") -> str | None:
    """The GPU ``--gpu`` resolved to (hardware/gpus.py GpuSpec.name), when the cluster names one."""
    spec = getattr(estimate.cluster, "gpu", None)
    return getattr(spec, "name", spec if isinstance(spec, str) else None)


def gpu_words(estimate: "Estimate", unit: str) -> str | None:
    """The resolved GPU and its capacity ("A100-SXM4-80GB, 85.90 GB per GPU"), or the capacity alone."""
    from zeroadvisor.units import format_bytes

    cluster = estimate.cluster
    name = gpu_name(estimate)
    if cluster.gpu_memory is None:
        return None
    capacity = format_bytes(cluster.gpu_memory, unit)
    return f"{name}, {capacity} per GPU" if name else f"{capacity} per GPU"


ASSUMED_INPUT = "ZA808"  # check reports each assumed input as this finding


def assumed_in(findings: Iterable["Finding"]) -> bool:
    """Whether the findings already list the assumed inputs (check), so a report need not repeat them."""
    return any(f.code == ASSUMED_INPUT for f in findings)


def assumption_lines(estimate: "Estimate", with_assumed: bool = True) -> list[str]:
    """Everything the verdict rests on that nobody measured: uncounted rows, assumed inputs, the
    estimate's assumptions."""
    out: list[str] = []
    st = estimate.configured
    if st is not None:
        out += [labels.UNCOUNTED_WORDS[row] for row in st.uncounted]
    if with_assumed:
        out += [item.message() for item in estimate.assumed]
    out += list(estimate.assumptions)
    return out

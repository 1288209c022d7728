"""Plain-text rendering of a memory estimate: one column per stage/offload option.

The optimizer name and the notes can hold text from the config: they go through
``escape.terminal``, and the whole table through ``escape.output`` (CI logs, ASCII streams).
"""

from __future__ import annotations

import textwrap

from zeroadvisor import DEEPSPEED_TARGET
from zeroadvisor.memory import verdict as verdict_words
from zeroadvisor.memory.estimate import Estimate, StageEstimate
from zeroadvisor.memory.terms import ROWS
from zeroadvisor.report import escape, labels
from zeroadvisor.units import format_bytes, scale

COLUMNS_PER_BLOCK = 6
WIDTH = 100
ROW_LABELS = {row: labels.table_label(row) for row in ROWS}
MARKS = labels.VERDICT_MARKS


def render(estimate: Estimate, unit: str = "GB", ascii_only: bool = False, explain: bool = False,
           assumed: bool = True) -> str:
    """The verdict line, a table a person reads at a glance, the assumptions; with ``explain`` the
    configured option's terms and the DeepSpeed-vs-paper notes.

    ``assumed``: list the assumed inputs above the table (``check`` reports them as findings instead).
    """
    scale(1, unit)  # validates the unit
    cluster = estimate.cluster
    s = estimate.settings
    m = estimate.model
    lines: list[str] = []
    nodes = f"{cluster.nodes} node{'s' if cluster.nodes > 1 else ''} × {cluster.gpus_on_a_node}"
    plural = "s" if cluster.gpus > 1 else ""
    peft = f" ({m.trainable_parameters:,} trainable: {escape.terminal(m.peft)})" if m.peft else ""
    lines.append(f"ZeRO memory estimate: {m.parameters:,} parameters{peft}, {cluster.gpus} GPU{plural}"
                 f" ({nodes}), {s.precision}, {escape.terminal(s.optimizer_label)}, micro batch {s.micro_batch}"
                 f"{', sequence ' + str(estimate.shape.sequence_length) if estimate.shape.sequence_length else ''}")
    layout = estimate.parallel
    if not layout.trivial:
        lines.append(f"Parallel layout: data {layout.data} × tensor {layout.tensor} × pipeline {layout.pipeline} "
                     f"(sequence {layout.sequence}, expert {layout.expert}); ZeRO partitions over the "
                     f"{layout.data} data-parallel ranks")
    lines.append(f"Accounting: {estimate.accounting}"
                 + (f" (what DeepSpeed {DEEPSPEED_TARGET} allocates)" if estimate.accounting == "deepspeed"
                    else " (ZeRO paper: model states only)"))
    unit_words = "10^9 bytes" if unit == "GB" else "2^30 bytes"
    lines.append(f"Unit: {unit} ({unit_words}); rows are per GPU, host RAM and NVMe per node.")
    limits = []
    if cluster.gpu_memory is not None:
        card = f" ({cluster.gpu.name})" if cluster.gpu is not None else ""
        limits.append(f"GPU {format_bytes(cluster.gpu_memory, unit)}{card}")
    if cluster.cpu_memory is not None:
        limits.append(f"host RAM {format_bytes(cluster.cpu_memory, unit)}/node")
    if cluster.nvme is not None:
        limits.append(f"NVMe {format_bytes(cluster.nvme, unit)}/node")
    i = 1 if ascii_only else 0
    if limits:
        lines += textwrap.wrap(f"Verdict against {', '.join(limits)}, each less {cluster.headroom:.0%} headroom: "
                               f"{MARKS['fits'][i]} fits, {MARKS['tight'][i]} tight (inside the headroom), "
                               f"{MARKS['does-not-fit'][i]} does not fit; peaks are over the load, train and "
                               "save phases.", width=WIDTH, subsequent_indent="  ")
    else:
        lines.append("Fit: not judged (no GPU memory given).")
    if any(st.configured for st in estimate.stages):
        lines.append("* = the configured option.")
    lines[0:0] = textwrap.wrap(verdict_line(estimate, unit), width=WIDTH, subsequent_indent="  ")
    lines.append("")
    if assumed and estimate.assumed:
        lines.append("Assumed inputs (not given; read the table with them):")
        for item in estimate.assumed:
            lines += _wrap(item.message())
        lines.append("")

    stages = estimate.stages
    for start in range(0, len(stages), COLUMNS_PER_BLOCK):
        lines += _block(stages[start:start + COLUMNS_PER_BLOCK], unit, i)
        lines.append("")

    if estimate.skipped:
        lines.append("Not run by DeepSpeed with this config:")
        for k in estimate.skipped:
            lines += _wrap(f"{labels.option_header(k.option)}: {k.reason}")
        lines.append("")
    if m.notes:  # from the model description (e.g. a config.json): data, escaped by _wrap
        lines.append("Model notes:")
        for note in m.notes:
            lines += _wrap(note)
        lines.append("")
    if estimate.assumptions:
        lines.append("Assumptions:")
        for note in estimate.assumptions:
            lines += _wrap(note)
        lines.append("")
    noted = [st for st in stages if st.notes]
    if explain and estimate.configured is not None:
        lines += explain_lines(estimate.configured, unit)
    if noted and explain:
        lines.append("DeepSpeed vs the ZeRO paper, and option notes:")
        grouped: dict[str, list[str]] = {}
        for st in noted:
            for note in st.notes:
                grouped.setdefault(note, []).append(_header(st))
        for note, columns in grouped.items():
            lines += _wrap(f"{', '.join(columns)}: {note}")
        lines.append("")
    return escape.output("\n".join(lines).rstrip() + "\n", ascii_only)


def _header(st: StageEstimate) -> str:
    return ("*" if st.configured else "") + labels.option_header(st.option)


def _header_lines(st: StageEstimate) -> tuple[str, str]:
    """Two header lines: "Z3 +opt:cpu" over "+par:nvme" (compact columns); * marks the configured."""
    first, second = labels.option_header_lines(st.option)
    return ("*" if st.configured else "") + first, second


def _block(stages: list[StageEstimate], unit: str, mark_index: int) -> list[str]:
    headers = [_header_lines(st) for st in stages]
    width = max([9] + [len(part) for pair in headers for part in pair]) + 2
    label_width = max(len(v) for v in ROW_LABELS.values()) + 2
    out = ["".ljust(label_width) + "".join(h[0].rjust(width) for h in headers)]
    if any(h[1] for h in headers):
        out.append("".ljust(label_width) + "".join(h[1].rjust(width) for h in headers))
    rule = "-" * (label_width + width * len(stages))
    out.append(rule)
    for row in ROWS:
        if row == "total":
            out.append(rule)
        cells = [_number(scale(st.per_gpu[row], unit)) for st in stages]
        out.append(ROW_LABELS[row].ljust(label_width) + "".join(c.rjust(width) for c in cells))
    out.append(labels.HOST_RAM_PER_NODE.ljust(label_width)
               + "".join(_number(scale(st.per_node_cpu, unit)).rjust(width) for st in stages))
    out.append(labels.NVME_PER_NODE.ljust(label_width)
               + "".join(_number(scale(st.per_node_nvme, unit)).rjust(width) for st in stages))
    if any(st.phases for st in stages):
        out.append(labels.PEAK_GPU.ljust(label_width)
                   + "".join(_number(scale(st.peak_gpu, unit)).rjust(width) for st in stages))
        out.append(labels.PEAK_HOST.ljust(label_width)
                   + "".join(_number(scale(st.peak_host_per_node, unit)).rjust(width) for st in stages))
        out.append(labels.BINDING_PHASE.ljust(label_width) + "".join(st.binding_phase.rjust(width) for st in stages))
    out.append(labels.FITS.ljust(label_width) + "".join(MARKS[st.verdict][mark_index].rjust(width) for st in stages))
    return out


def verdict_line(estimate: Estimate, unit: str) -> str:
    """The configured option's verdict in one line: verdict, peak against capacity, binding phase and resource."""
    st = estimate.configured
    if st is None:
        return "Verdict: per option, in the table below (no config given)."
    cluster = estimate.cluster
    capacity = cluster.capacities()[st.binding_resource]
    peak = {"gpu": st.peak_gpu, "host": st.peak_host_per_node, "nvme": st.peak_nvme_per_node}[st.binding_resource]
    where = f"{verdict_words.RESOURCE_WORDS[st.binding_resource]} {labels.PHASE_WORDS[st.binding_phase]}"
    against = f" of {format_bytes(capacity, unit)}" if capacity is not None else ""
    text = (f"Verdict ({labels.option_header(st.option)}): {labels.VERDICT_WORDS[st.verdict]}; peak "
            f"{format_bytes(peak, unit)}{against} {where}")
    for row in st.uncounted:
        text += f"; {labels.UNCOUNTED_WORDS[row]}"
    return text


def explain_lines(st: StageEstimate, unit: str) -> list[str]:
    """Every term of the configured option, by phase: bytes, what, formula, kind and source."""
    out = [f"Terms of the configured option ({labels.option_header(st.option)}), per GPU process unless they say "
           "per node; kind: exact (DeepSpeed/transformers/torch allocate it), bound, allowance:"]
    for phase in ("load", "train", "save"):
        terms = [t for t in st.terms if t.phase == phase and t.nbytes]
        if not terms:
            continue
        out.append(f"  {phase}:")
        for t in terms:
            out += textwrap.wrap(escape.terminal(f"{t.device:4} {format_bytes(t.nbytes, unit):>12}  {t.what} "
                                                 f"[{t.kind}; {t.formula}; {t.source}]"),
                                 width=WIDTH, initial_indent="    ", subsequent_indent="      ")
    out.append("")
    return out


def _number(value: float) -> str:
    """Two decimals, or three when that is the exact value (the paper's 28.125 GB stays 28.125)."""
    if round(value, 2) != value and abs(round(value, 3) - value) < 1e-9:
        return f"{value:.3f}"
    return f"{value:.2f}"


def _wrap(text: str) -> list[str]:
    """A note as a bullet; notes can quote the config, so they are escaped before wrapping."""
    return textwrap.wrap(escape.terminal(text), width=WIDTH, initial_indent="  - ", subsequent_indent="    ") or ["  -"]

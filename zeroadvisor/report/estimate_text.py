"""Plain-text rendering of a memory estimate for a terminal of a given width.

The verdict first, then a table with one column per stage/offload option that fits the width (one-line
headers when there is room, else compact three-line headers and as many blocks as needed), a bar per
option (its memory by row against the card), and the assumptions; the terms and the source notes only
with ``explain``. Colour (ANSI) only when asked, and added after the padding, so it never changes widths.

The optimizer name and the notes can hold text from the config: they go through ``escape.terminal``,
and the whole text through ``escape.output`` (CI logs, ASCII streams).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zeroadvisor import vocab as labels
from zeroadvisor.memory.estimate import Estimate, StageEstimate
from zeroadvisor.memory.terms import METHOD_ROWS, ROWS, shown_rows
from zeroadvisor.report import escape, overview
from zeroadvisor.units import format_bytes, scale, unit_for
from zeroadvisor.vocab import Accounting, Device, Phase, Verdict

if TYPE_CHECKING:
    from zeroadvisor.advisor.lead import Lead
    from zeroadvisor.lint.findings import Finding
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime

DEFAULT_WIDTH = 80
MIN_WIDTH = 60  # narrower terminals wrap; below this no table is readable anyway
ROW_LABELS = {row: labels.table_label(row) for row in ROWS}
# a preference/RL run's model rows (memory/terms.py METHOD_ROWS), shown where any column has them
METHOD_ROW_TABLE_LABELS = {row: labels.table_label(row) for row in METHOD_ROWS}
MARKS = labels.VERDICT_MARKS
CONFIGURED_MARK = "*"
RECOMMENDED_MARK = ">"
NUMBER_WIDTH = 7  # "1234.56"

# ANSI SGR codes: verdicts, the marked columns, and one background per bar row.
SGR = {Verdict.FITS: "32", Verdict.TIGHT: "33", Verdict.DOES_NOT_FIT: "31;1", Verdict.UNKNOWN: "33", "configured": "1",
        "recommended": "32;1", "dim": "2"}
_BAR_SGR = {"parameters": "44", "gradients": "46", "optimizer_states": "45", "gathered_parameters": "104",
            "buffers": "43", "activations": "42", "overhead": "100",
            "reference_model": "41", "reward_model": "101", "critic": "105", "teacher_model": "106",
            "vllm": "47"}


@dataclass(frozen=True)
class Style:
    """How to draw: the width, colour on or off, ASCII symbols only."""

    width: int = DEFAULT_WIDTH
    colour: bool = False
    ascii_only: bool = False

    @property
    def mark_index(self) -> int:
        return 1 if self.ascii_only else 0

    def paint(self, text: str, sgr: str | None) -> str:
        return f"\033[{sgr}m{text}\033[0m" if self.colour and sgr else text

    def wrap(self, text: str, first: str = "", rest: str = "  ") -> list[str]:
        """``text`` (already escaped) wrapped to the width; long words (file names) are broken, not
        left to overflow."""
        return textwrap.wrap(text, width=self.width, initial_indent=first, subsequent_indent=rest,
                             break_on_hyphens=False) or [first.rstrip()]

    def items(self, items: list[str], indent: str) -> list[str]:
        """Short items side by side, two spaces apart, none split across lines."""
        lines = [indent]
        for item in items:
            if lines[-1].strip() and len(lines[-1]) + 2 + len(item) > self.width:
                lines.append(indent)
            lines[-1] += ("  " if lines[-1].strip() else "") + item
        return lines

    def bullet(self, text: str) -> list[str]:
        """A note as a bullet; notes can quote the config, so they are escaped before wrapping."""
        return self.wrap(escape.terminal(text), "  - ", "    ")


def render(estimate: Estimate, unit: str | None = None, ascii_only: bool = False, explain: bool = False,
           assumed: bool = True, width: int | None = None, colour: bool = False, all_options: bool = False,
           rec: Lead | None = None, steps: Mapping[Option, StepTime] | None = None) -> str:
    """The estimate command's report: the verdict line, then ``body``. ``steps``: the step-time
    estimate per option (zeroadvisor.throughput.per_option), shown as a row relative to the configured."""
    unit = unit or unit_for(estimate.accounting)  # GiB; the paper's accounting in its GB
    style = Style(max(width or DEFAULT_WIDTH, MIN_WIDTH), colour, ascii_only)
    lines = verdict_lines(estimate, rec, unit, style) + body(estimate, unit, style, explain, assumed, all_options, rec,
                                                            steps)
    return escape.output("\n".join(lines).rstrip() + "\n", ascii_only)


def verdict_lines(estimate: Estimate | None, rec: Lead | None, unit: str,
                  style: Style, findings: Sequence[Finding] = ()) -> list[str]:
    """The verdict sentence, wrapped; coloured by the verdict; the resolved GPU under it."""
    st = estimate.configured if estimate is not None else None
    text = escape.terminal(overview.verdict_sentence(estimate, rec, unit, findings))
    sgr = SGR.get(st.verdict) if st is not None and st.verdict else None
    out = [style.paint(line, sgr) for line in style.wrap(text)]
    gpu = overview.gpu_words(estimate, unit) if estimate is not None and overview.gpu_name(estimate) else None
    if gpu:  # the card --gpu resolved to (the capacity alone is in the verdict)
        out += style.wrap(escape.terminal(f"GPU: {gpu}"))
    return out


def body(estimate: Estimate, unit: str, style: Style, explain: bool = False, assumed: bool = True,
         all_options: bool = False, rec: Lead | None = None,
         steps: Mapping[Option, StepTime] | None = None) -> list[str]:
    """Everything after the verdict: the inputs, the table, the bars, the assumptions (and with
    ``explain`` the configured option's terms and the source notes).

    ``assumed``: list the assumed inputs (``check`` reports them as findings instead).
    """
    scale(1, unit)  # validates the unit
    stages = overview.shown_stages(estimate, rec, all_options)
    lines: list[str] = ["", *_inputs_lines(estimate, unit, style), *_limits_lines(estimate, unit, style)]
    lines += _legend_lines(estimate, stages, rec, style)
    lines.append("")
    if assumed and estimate.assumed:  # one line each; the findings say which can change the answer (ZA808)
        lines += _section("Assumed (not given; the flag sets it):", [item.brief() for item in estimate.assumed],
                          style)

    lines += table(stages, estimate, unit, style, rec, steps)
    lines.append("")
    lines += bars(stages, estimate, unit, style, rec)
    lines.append("")

    lines += _section("Not run by DeepSpeed with this config:",
                      [f"{labels.option_header(k.option)}: {k.reason}" for k in estimate.skipped], style)
    # from the model description (e.g. a config.json): data, escaped by bullet
    lines += _section("Model notes:", list(estimate.model.notes), style)
    lines += _section("Assumptions:", overview.assumption_lines(estimate, with_assumed=False), style)
    if explain:
        lines += _explained_lines(estimate, unit, style)
    return lines


def _section(title: str, items: list[str], style: Style) -> list[str]:
    """A titled bulleted list and a blank line; nothing when there are no items."""
    if not items:
        return []
    lines = [title]
    for item in items:
        lines += style.bullet(item)
    lines.append("")
    return lines


def _inputs_lines(estimate: Estimate, unit: str, style: Style) -> list[str]:
    """What was estimated: the model, the cluster, the precision and batch, the layout, the accounting, the unit."""
    cluster, s, m = estimate.cluster, estimate.settings, estimate.model
    nodes = f"{cluster.nodes} node{'s' if cluster.nodes > 1 else ''} × {cluster.gpus_on_a_node}"
    plural = "s" if cluster.gpus > 1 else ""
    peft = f" ({m.trainable_parameters:,} trainable: {escape.terminal(m.peft)})" if m.peft else ""
    sequence = f", sequence {estimate.shape.sequence_length}" if estimate.shape.sequence_length else ""
    lines = style.wrap(f"ZeRO memory estimate: {m.parameters:,} parameters{peft}, {cluster.gpus} GPU{plural}"
                       f" ({nodes}), {s.precision}, {escape.terminal(s.optimizer_label)}, micro batch "
                       f"{s.micro_batch}{sequence}")
    layout = estimate.parallel
    if not layout.trivial:
        lines += style.wrap(f"Parallel layout: data {layout.data} × tensor {layout.tensor} × pipeline "
                            f"{layout.pipeline} (sequence {layout.sequence}, expert {layout.expert}); ZeRO "
                            f"partitions over the {layout.data} data-parallel ranks")
    lines += style.wrap(f"Accounting: {estimate.accounting}"
                        + (f" (what DeepSpeed {estimate.release} allocates)"
                           if estimate.accounting == Accounting.DEEPSPEED
                           else " (ZeRO paper: model states only)"))
    unit_words = "10^9 bytes" if unit == "GB" else "2^30 bytes"
    lines += style.wrap(f"Unit: {unit} ({unit_words}); rows are per GPU, host RAM and NVMe per node.")
    return lines


def _limits_lines(estimate: Estimate, unit: str, style: Style) -> list[str]:
    """What the verdict is judged against (the GPU, host RAM and NVMe given) and what its marks mean."""
    cluster = estimate.cluster
    limits = []
    if cluster.gpu_memory is not None:
        card = overview.gpu_name(estimate)
        limits.append(f"GPU {format_bytes(cluster.gpu_memory, unit)}" + (f" ({escape.terminal(card)})" if card else ""))
    if cluster.cpu_memory is not None:
        limits.append(f"host RAM {format_bytes(cluster.cpu_memory, unit)}/node")
    if cluster.nvme is not None:
        limits.append(f"NVMe {format_bytes(cluster.nvme, unit)}/node")
    if not limits:
        return ["Fit: not judged (no GPU memory given)."]
    i = style.mark_index
    return style.wrap(f"Verdict against {', '.join(limits)}, each less {cluster.headroom:.0%} headroom: "
                      f"{MARKS[Verdict.FITS][i]} fits, {MARKS[Verdict.TIGHT][i]} tight (inside the headroom), "
                      f"{MARKS[Verdict.DOES_NOT_FIT][i]} does not fit; peaks are over the load, train and "
                      "save phases.")


def _legend_lines(estimate: Estimate, stages: list[StageEstimate], rec: Lead | None,
                  style: Style) -> list[str]:
    """The marks for the configured and recommended options, and how many options are not shown."""
    legend = []
    if any(st.configured for st in stages):
        legend.append(f"{CONFIGURED_MARK} = the configured option")
    if any(overview.is_recommended(st, rec) for st in stages):
        legend.append(f"{RECOMMENDED_MARK} = the recommended option")
    hidden = len(estimate.stages) - len(stages)
    if hidden:
        legend.append(f"{hidden} option{'s' if hidden != 1 else ''} with offload not shown (--all shows them)")
    return style.wrap("; ".join(legend) + ".") if legend else []


def _explained_lines(estimate: Estimate, unit: str, style: Style) -> list[str]:
    """--explain: the configured option's terms, then the option notes, each note once with its options."""
    lines = explain_lines(estimate.configured, unit, style.width) if estimate.configured is not None else []
    noted = [st for st in estimate.stages if st.notes]
    if noted:
        lines.append("DeepSpeed vs the ZeRO paper, and option notes:")
        grouped: dict[str, list[str]] = {}
        for st in noted:
            for note in st.notes:
                grouped.setdefault(note, []).append(_header(st, None))
        for note, columns in grouped.items():
            lines += style.bullet(f"{', '.join(columns)}: {note}")
        lines.append("")
    return lines


# --- the table ---------------------------------------------------------------------------------

def _marker(st: StageEstimate, rec: Lead | None) -> str:
    if overview.is_configured(st, rec):
        return CONFIGURED_MARK
    return RECOMMENDED_MARK if overview.is_recommended(st, rec) else ""


def _header(st: StageEstimate, rec: Lead | None) -> str:
    return _marker(st, rec) + overview.column_label(st, rec)


def _compact_header(st: StageEstimate, rec: Lead | None) -> list[str]:
    """Short lines, "*Z3" over "+opt:cpu" over "+par:nvme" (then what the recommended run's own column changes
    besides, "+mb:1"), for narrow terminals."""
    o = st.option
    parts = [f"{_marker(st, rec)}Z{o.stage}"]
    parts.append(f"+opt:{o.offload_optimizer}" if o.offload_optimizer != Device.NONE else "")
    parts.append(f"+par:{o.offload_param}" if o.offload_param != Device.NONE else "")
    extra = overview.column_label(st, rec)[len(labels.option_header(o)):].split()
    return parts + extra


def _cells(st: StageEstimate, estimate: Estimate, unit: str, style: Style,
           with_phases: bool, steps: Mapping[Option, StepTime] | None) -> list[tuple[str, str | None]]:
    """The column of one option, top to bottom, each cell with its colour."""
    cells: list[tuple[str, str | None]] = [(_number(scale(st.per_gpu.get(row, 0), unit)), None)
                                           for row in _table_rows(estimate.stages)]
    cells.append((_number(scale(st.per_node_cpu, unit)), None))
    cells.append((_number(scale(st.per_node_nvme, unit)), None))
    if with_phases:
        cells.append((_number(scale(st.peak_gpu, unit)), None))
        cells.append((_number(scale(st.peak_host_per_node, unit)), None))
        cells.append((st.peak_host_phase, None))
        cells.append((_number(scale(st.train_host_per_node, unit)), None))
        cells.append((overview.binding_words(st), None))
    if steps:
        ratio = overview.relative_step_time(st, estimate.configured, steps)
        cells.append((f"{ratio:.2f}x" if ratio is not None else "-", None))
    cells.append((MARKS[st.verdict][style.mark_index], SGR.get(st.verdict or "")))
    return cells


def _table_rows(stages: Sequence[StageEstimate]) -> tuple[str, ...]:
    """ROWS, with the method rows any option has (an SFT table is ROWS alone)."""
    return shown_rows({row for st in stages for row in st.per_gpu})


def _row_labels(with_phases: bool, with_steps: bool, rows: tuple[str, ...] = ROWS) -> list[str]:
    names = [ROW_LABELS.get(row) or METHOD_ROW_TABLE_LABELS[row] for row in rows]
    names += [labels.HOST_RAM_PER_NODE, labels.NVME_PER_NODE]
    if with_phases:
        names += [labels.PEAK_GPU, labels.PEAK_HOST, labels.PEAK_HOST_PHASE, labels.TRAIN_HOST,
                  labels.BINDING_PHASE]
    if with_steps:
        names.append(labels.STEP_TIME)
    return [*names, labels.FITS]


def table(stages: list[StageEstimate], estimate: Estimate, unit: str, style: Style,
          rec: Lead | None = None, steps: Mapping[Option, StepTime] | None = None) -> list[str]:
    """One column per option, in as few blocks as the width allows."""
    if not stages:
        return []
    with_phases = any(st.phases for st in stages)
    with_steps = overview.throughput(estimate.configured, steps) is not None  # the row is relative to it
    steps = steps if with_steps else None
    names = _row_labels(with_phases, with_steps, _table_rows(estimate.stages))
    label_width = max(len(n) for n in names) + 1
    wide = [[_header(st, rec)] for st in stages]
    width = max(NUMBER_WIDTH, *(len(h[0]) for h in wide)) + 2
    if label_width + width * len(stages) <= style.width:
        headers, per_block = wide, len(stages)
    else:
        headers = [_compact_header(st, rec) for st in stages]
        depth = max(len(h) for h in headers)  # the recommended run's own column may carry more parts
        headers = [h + [""] * (depth - len(h)) for h in headers]
        width = max(NUMBER_WIDTH, *(len(p) for h in headers for p in h)) + 2
        per_block = max(1, (style.width - label_width) // width)
    out: list[str] = []
    for start in range(0, len(stages), per_block):
        block = stages[start:start + per_block]
        block_headers = headers[start:start + per_block]
        if out:
            out.append("")
        for level in range(max(len(h) for h in block_headers)):
            parts = [h[level] for h in block_headers]
            if level and not any(parts):
                continue
            out.append("".ljust(label_width) + "".join(
                style.paint(p.rjust(width), _column_sgr(st, rec)) for p, st in zip(parts, block, strict=True)))
        rule = "-" * (label_width + width * len(block))
        out.append(rule)
        columns = [_cells(st, estimate, unit, style, with_phases, steps) for st in block]
        for r, name in enumerate(names):
            if name == ROW_LABELS["total"]:
                out.append(rule)
            out.append(name.ljust(label_width) + "".join(
                style.paint(col[r][0].rjust(width), col[r][1]) for col in columns))
    return out


def _column_sgr(st: StageEstimate, rec: Lead | None) -> str | None:
    if overview.is_configured(st, rec):
        return SGR["configured"]
    return SGR["recommended"] if overview.is_recommended(st, rec) else None


# --- the bars ----------------------------------------------------------------------------------

def bars(stages: list[StageEstimate], estimate: Estimate, unit: str, style: Style,
         rec: Lead | None = None) -> list[str]:
    """A bar per option: its memory per GPU while training, one letter per row, against the card
    ("|"); dots up to a higher peak at load or save."""
    if not stages:
        return []
    capacity = estimate.cluster.gpu_memory
    label_width = max(len(_header(st, rec)) for st in stages) + 1
    peaks = [_number(scale(st.peak_gpu, unit)) for st in stages]
    marks = [MARKS[st.verdict][style.mark_index] for st in stages]
    peak_width, mark_width = max(len(p) for p in peaks), max(len(m) for m in marks)
    bar_width = max(10, style.width - label_width - peak_width - mark_width - 2)
    top = max([capacity or 0] + [st.peak_gpu for st in stages]) or 1
    legend = [f"{overview.bar_letter(row)} {labels.row_label(row)}" for row in overview.bar_rows_of(stages)]
    against = f", | = the card's {format_bytes(capacity, unit)}" if capacity is not None else ""
    out = style.wrap(f"Memory per GPU by row while training (. = a higher peak at load or save{against}); "
                     f"right: the peak per GPU ({unit}):")
    out += style.items(legend, "  ")
    for st, peak, mark in zip(stages, peaks, marks, strict=True):
        cells = _bar_cells(st, top, bar_width, capacity)
        drawn = "".join(style.paint(ch, _BAR_SGR.get(row) if row else None) for ch, row in cells)
        out.append(style.paint(_header(st, rec).ljust(label_width), _column_sgr(st, rec)) + drawn + " "
                   + peak.rjust(peak_width) + " " + style.paint(mark.ljust(mark_width), SGR.get(st.verdict or "")))
    return out


def _bar_cells(st: StageEstimate, top: int, width: int, capacity: int | None) -> list[tuple[str, str | None]]:
    """``width`` cells, each (character, row): the row at the cell's middle, "." between the train
    total and a higher peak, "|" at the capacity."""
    bounds: list[tuple[int, str]] = []
    total = 0
    for row, nbytes in overview.bar_rows(st):
        total += nbytes
        bounds.append((total, row))
    cap_at = min(width - 1, int(capacity / top * width)) if capacity is not None else None
    cells: list[tuple[str, str | None]] = []
    for i in range(width):
        middle = (i + 0.5) * top / width
        covering = next((r for bound, r in bounds if middle < bound), None)
        if i == cap_at:
            cells.append(("|", None))
        elif covering is not None:
            cells.append((overview.bar_letter(covering), covering))
        elif middle < st.peak_gpu:
            cells.append((".", None))
        else:
            cells.append((" ", None))
    return cells


# --- explain -----------------------------------------------------------------------------------

def verdict_line(estimate: Estimate, unit: str) -> str:
    """The configured option's verdict in one line (without a recommendation)."""
    return overview.verdict_sentence(estimate, None, unit)


def explain_lines(st: StageEstimate, unit: str, width: int = DEFAULT_WIDTH) -> list[str]:
    """Every term of the configured option, by phase: bytes, what, formula, kind and source."""
    out = textwrap.wrap(f"Terms of the configured option ({labels.option_header(st.option)}), per GPU process unless "
                        "they say per node; kind: exact (DeepSpeed/transformers/torch allocate it), bound, allowance; "
                        "bytes expected, \"up to\" the bound where the code leaves room above them:",
                        width=width, subsequent_indent="  ")
    for phase in Phase:  # in the order they happen
        terms = [t for t in st.terms if t.phase == phase and t.nbytes]
        if not terms:
            continue
        out.append(f"  {phase}:")
        for t in terms:
            upto = f" (up to {format_bytes(t.upper, unit)})" if t.upper > t.nbytes else ""
            out += textwrap.wrap(escape.terminal(f"{t.device:4} {format_bytes(t.nbytes, unit):>12}  {t.what}{upto} "
                                                 f"[{t.kind}; {t.formula}; {t.source}]"),
                                 width=width, initial_indent="    ", subsequent_indent="      ",
                                 break_on_hyphens=False)
    out.append("")
    return out


def _number(value: float) -> str:
    """Two decimals, or three when that is the exact value (the paper's 28.125 GB stays 28.125)."""
    if round(value, 2) != value and abs(round(value, 3) - value) < 1e-9:
        return f"{value:.3f}"
    return f"{value:.2f}"

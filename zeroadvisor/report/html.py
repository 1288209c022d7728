"""``--format html``: one self-contained HTML file (no script, no external style, font or image: it
opens offline and in a mail attachment) with the verdict, an inline SVG chart of each option's memory
per GPU by row (stacked bars) against the card's capacity line, the options table, the findings, the
assumptions and the suggested diff.

Every piece of text goes through ``html.escape`` (the config, its file name and the messages are
data); control and invisible characters are made visible first (``escape.terminal``).
"""

from __future__ import annotations

import html as _html
from typing import TYPE_CHECKING

from zeroadvisor import vocab as labels
from zeroadvisor.lint.findings import Finding
from zeroadvisor.report import escape, overview
from zeroadvisor.units import DEFAULT_UNIT, format_bytes, scale
from zeroadvisor.vocab import Verdict

if TYPE_CHECKING:
    from zeroadvisor.advisor.lead import Lead, NoFix
    from zeroadvisor.advisor.nofit import NothingFits
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.report import Report

# One colour per row (the chart's legend says which).
ROW_COLOURS = {"parameters": "#4e79a7", "gradients": "#76b7b2", "optimizer_states": "#b07aa1",
               "gathered_parameters": "#9c755f", "buffers": "#edc948", "activations": "#59a14f",
               "overhead": "#bab0ac", "reference_model": "#e15759", "reward_model": "#f28e2b", "critic": "#ff9da7",
               "teacher_model": "#79706e", "vllm": "#499894"}
VERDICT_COLOURS = {Verdict.FITS: "#1a7f37", Verdict.TIGHT: "#9a6700", Verdict.DOES_NOT_FIT: "#cf222e",
                   Verdict.UNKNOWN: "#57606a", None: "#57606a"}
CHART_WIDTH = 960
LABEL_WIDTH = 250
VALUE_WIDTH = 110
ROW_HEIGHT = 26
BAR_HEIGHT = 18
TOP = 30
LEGEND_HEIGHT = 44

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #1f2328;
       max-width: 1000px; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 24px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { background: #f6f8fa; padding: 12px; overflow-x: auto; font-size: 12px; }
.verdict { font-size: 16px; font-weight: 600; padding: 10px 12px; border-left: 6px solid; background: #f6f8fa; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; } td.num { text-align: right; }
tr.configured td { font-weight: 600; } tr.recommended td { background: #dafbe1; }
li { margin: 4px 0; } .sev-error { color: #cf222e; } .sev-warning { color: #9a6700; } .sev-info { color: #0969da; }
svg text { font-size: 12px; fill: #1f2328; }
"""


def _e(text: object) -> str:
    """Text from anywhere, safe in HTML element content and quoted attributes."""
    return _html.escape(escape.terminal(str(text)), quote=True)


def chart(stages: list[StageEstimate], estimate: Estimate, unit: str, rec: Lead | None) -> str:
    """Horizontal stacked bars, one per option: its memory per GPU while training by row, a thin
    bar for a higher peak at load or save, and the card's capacity as a vertical line."""
    capacity = estimate.cluster.gpu_memory
    top = max([capacity or 0] + [st.peak_gpu for st in stages]) * 1.05 or 1
    plot = CHART_WIDTH - LABEL_WIDTH - VALUE_WIDTH
    height = TOP + ROW_HEIGHT * len(stages) + LEGEND_HEIGHT

    def x(nbytes: float) -> float:
        return LABEL_WIDTH + plot * nbytes / top

    parts = [(f'<svg id="chart" width="{CHART_WIDTH}" height="{height}" '
              f'viewBox="0 0 {CHART_WIDTH} {height}" role="img" aria-label="Memory per GPU by option and row">')]
    for i, st in enumerate(stages):
        y = TOP + i * ROW_HEIGHT
        label = overview.column_label(st, rec)
        role = overview.role(st, rec)
        mark = f" ({role})" if role else ""
        weight = ' font-weight="bold"' if mark else ""
        parts.append(f'<g class="option" data-option="{_e(label)}" data-verdict="{_e(st.verdict or "")}">')
        parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + BAR_HEIGHT - 4}" text-anchor="end"{weight}>'
                     f'{_e(label + mark)}</text>')
        if st.peak_gpu > st.per_gpu["total"]:  # the peak is at load or save: its extent, behind the rows
            parts.append(f'<rect class="peak" x="{x(0):.1f}" y="{y + BAR_HEIGHT / 2 - 2:.1f}" '
                         f'width="{x(st.peak_gpu) - x(0):.1f}" height="4" fill="#8c959f">'
                         f'<title>peak {_e(format_bytes(st.peak_gpu, unit))} {_e(labels.PHASE_WORDS[st.binding_phase])}'
                         f'</title></rect>')
        start = 0
        for row, nbytes in overview.bar_rows(st):
            parts.append(f'<rect class="bar" data-row="{row}" x="{x(start):.1f}" y="{y}" '
                         f'width="{max(x(start + nbytes) - x(start), 0.5):.1f}" height="{BAR_HEIGHT}" '
                         f'fill="{ROW_COLOURS[row]}"><title>{_e(labels.row_label(row))}: '
                         f'{_e(format_bytes(nbytes, unit))}</title></rect>')
            start += nbytes
        verdict = labels.VERDICT_MARKS[st.verdict][0]
        parts.append(f'<text x="{x(max(st.peak_gpu, start)) + 6:.1f}" y="{y + BAR_HEIGHT - 4}" '
                     f'fill="{VERDICT_COLOURS[st.verdict]}">{_e(f"{scale(st.peak_gpu, unit):.2f} {unit} {verdict}")}'
                     f'</text>')
        parts.append("</g>")
    if capacity is not None:
        cx = x(capacity)
        bottom = TOP + ROW_HEIGHT * len(stages)
        parts.append(f'<line id="capacity" x1="{cx:.1f}" y1="{TOP - 14}" x2="{cx:.1f}" y2="{bottom}" '
                     'stroke="#cf222e" stroke-width="2" stroke-dasharray="6 3"/>')
        parts.append(f'<text x="{cx:.1f}" y="{TOP - 18}" text-anchor="middle" fill="#cf222e">'
                     f'{_e("GPU " + format_bytes(capacity, unit))}</text>')
    legend_y = TOP + ROW_HEIGHT * len(stages) + 16
    lx = 10
    for row in overview.bar_rows_of(stages):
        name = labels.row_label(row)
        parts.append(f'<rect x="{lx}" y="{legend_y}" width="12" height="12" fill="{ROW_COLOURS[row]}"/>'
                     f'<text x="{lx + 16}" y="{legend_y + 11}">{_e(name)}</text>')
        lx += 30 + 7 * len(name)
    parts.append("</svg>")
    return "\n".join(parts)


def _options_table(stages: list[StageEstimate], unit: str, rec: Lead | None) -> str:
    rows = [('<table id="options"><tr><th>Option</th>'
             f'<th>Total per GPU ({unit})</th><th>Peak per GPU ({unit})</th><th>Host RAM / node ({unit})</th>'
             f'<th>NVMe / node ({unit})</th><th>Binding phase</th><th>Fits</th></tr>')]
    for st in stages:
        cls = overview.role(st, rec)
        rows.append(f'<tr class="{cls}"><td>{_e(overview.column_label(st, rec))}</td>'
                    f'<td class="num">{scale(st.per_gpu["total"], unit):.2f}</td>'
                    f'<td class="num">{scale(st.peak_gpu, unit):.2f}</td>'
                    f'<td class="num">{scale(st.peak_host_per_node, unit):.2f}</td>'
                    f'<td class="num">{scale(st.peak_nvme_per_node, unit):.2f}</td>'
                    f'<td>{_e(overview.binding_words(st))}</td><td>{_e(overview.verdict_words(st))}</td></tr>')
    rows.append("</table>")
    return "\n".join(rows)


def render(path: str, findings: list[Finding], estimate: Estimate | None, diff: str = "",
           unit: str = DEFAULT_UNIT, rec: Lead | None = None, no_fix: NoFix | None = None,
           nothing: NothingFits | None = None) -> str:
    """``rec``, ``no_fix``: the check's decided recommendation, or the failing finding no change fixes
    (CheckResult.recommendation, .no_fix; None for an estimate alone)."""
    configured = estimate.configured if estimate is not None else None
    colour = VERDICT_COLOURS[configured.verdict if configured is not None else None]
    title = f"zeroadvisor: {path}" if path else "zeroadvisor"
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           f"<title>{_e(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
           f"<h1>zeroadvisor: <code>{_e(path)}</code></h1>" if path else "<h1>zeroadvisor</h1>",
           (f'<p id="verdict" class="verdict" style="border-color: {colour}">'
            f"{_e(overview.verdict_sentence(estimate, rec, unit, findings))}</p>")]
    ways = overview.nothing_fits_sentence(nothing, unit)
    if ways is not None:
        out.append(f'<p id="ways-out">{_e(ways)}</p>')
    no_fix_line = overview.no_fix_sentence(no_fix)
    if no_fix_line is not None:
        out.append(f'<p id="no-fix">{_e(no_fix_line)}</p>')
    if estimate is not None:
        m, s, c = estimate.model, estimate.settings, estimate.cluster
        gpu = overview.gpu_words(estimate, unit)
        out.append(f"<p>{_e(f'{m.parameters:,} parameters, {c.gpus} GPUs ({c.nodes} × {c.gpus_on_a_node})')}"
                   + (f", {_e(gpu)}" if gpu else "")
                   + f"; {_e(s.precision)}, {_e(s.optimizer_label)}, micro batch {s.micro_batch}"
                   + (f", sequence {estimate.shape.sequence_length}" if estimate.shape.sequence_length else "")
                   + f"; accounting: {_e(estimate.accounting)}.</p>")
        stages = [*estimate.stages, *overview.extra_column(estimate, rec)]
        out += ["<h2>Memory per GPU by option</h2>", chart(stages, estimate, unit, rec),
                "<h2>Options</h2>", _options_table(stages, unit, rec)]
    out.append("<h2>Findings</h2>")
    if findings:
        out.append('<ul id="findings">')
        for f in findings:
            where = f" (line {f.line})" if f.line else ""
            out.append(f'<li><span class="sev-{f.severity.value}">{_e(f.severity.value)}</span> '
                       f"<strong>{_e(f.code)} {_e(f.name)}</strong>{_e(where)}: {_e(f.message)}</li>")
        out.append("</ul>")
    else:
        out.append("<p>No findings.</p>")
    if estimate is not None:
        notes = overview.assumption_lines(estimate)
        notes += [f"model: {note}" for note in estimate.model.notes]
        if notes:
            out += ["<h2>Assumptions</h2>", '<ul id="assumptions">'] + [f"<li>{_e(n)}</li>" for n in notes] + ["</ul>"]
    if diff:
        out += ["<h2>Suggested change</h2>",
                f'<pre id="diff">{_html.escape(escape.terminal_block(diff), quote=True)}</pre>']
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


def render_report(report: Report) -> str:
    check = report.check
    estimate = report.estimate if check is None else check.estimate
    out = render(report.path, report.findings, estimate, report.diff, report.unit,
                 rec=check.recommendation if check is not None else None,
                 no_fix=check.no_fix if check is not None else None,
                 nothing=check.nothing_fits if check is not None else None)
    # a stream that takes ASCII only gets character references: the same page
    return out.encode("ascii", "xmlcharrefreplace").decode("ascii") if report.ascii_only else out

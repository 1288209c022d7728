"""A compact Markdown report to paste as a pull-request comment: verdict, options table,
advice and the suggested diff.

Everything from the config or its name is escaped for GitHub-flavoured markdown: the path is an
inline code span, messages and the optimizer name are ``escape.markdown_inline`` (no HTML, links,
emphasis, @mentions), and the diff sits in a fence longer than any backtick run inside it.
"""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.report import escape, labels
from zeroadvisor.units import scale

_ICON = {Severity.ERROR: "🔴", Severity.WARNING: "🟡", Severity.INFO: "🔵"}
_VERDICT = {"fits": "✅", "tight": "⚠️", "does-not-fit": "❌", None: "–"}


def _row_label(row: str) -> str:
    label = labels.ROW_LABELS[row]
    return f"**{label}**" if row == labels.TOTAL_ROW else label


def render(path: str, findings: list[Finding], estimate, usable: int | None, gpu_memory: int | None,
           headroom: float, diff: str, unit: str = "GB", ascii_only: bool = False) -> str:
    out: list[str] = []
    inline = escape.markdown_inline
    configured = estimate.configured if estimate is not None else None
    # Config errors, as opposed to the memory verdict (advice rules, ZA8xx, carry that).
    config_errors = sum(1 for f in findings if f.severity is Severity.ERROR and not f.code.startswith("ZA8"))
    verdict = f"{config_errors} config error(s)" if config_errors else "looks good"
    if configured is not None and configured.verdict is not None:
        verdict = f"{_VERDICT[configured.verdict]} {labels.VERDICT_WORDS[configured.verdict]}"
        if configured.uncounted:  # never a plain "fits" while a row is missing
            verdict += " (" + "; ".join(labels.UNCOUNTED_SHORT[row] for row in configured.uncounted) + ")"
        verdict += f", {config_errors} config error(s)" if config_errors else ""
    out.append(f"### zeroadvisor: {escape.markdown_code(path)} — {verdict}")
    out.append("")
    if estimate is not None:
        m, s, c = estimate.model, estimate.settings, estimate.cluster
        budget = ""
        if usable is not None and gpu_memory is not None:
            budget = (f", {scale(usable, unit):.1f} of {scale(gpu_memory, unit):.1f} {unit} per GPU usable "
                      f"({headroom:.0%} headroom)")
        out.append(f"{m.parameters / 1e9:.2f}B parameters, {c.gpus} GPUs ({c.nodes}×{c.gpus_on_a_node}){budget}; "
                   f"{s.precision}, {inline(s.optimizer_label)}, micro batch {s.micro_batch}"
                   + (f", sequence {estimate.shape.sequence_length}" if estimate.shape.sequence_length else ""))
        out.append("")
        stages = estimate.stages
        headers = [inline(labels.option_header(st.option)) for st in stages]
        out.append(f"| {unit} per GPU | " + " | ".join(f"**{h}** (configured)" if st.configured else h
                                                        for h, st in zip(headers, stages)) + " |")
        out.append("|---|" + "---:|" * len(stages))
        for row in (*labels.BREAKDOWN_ROWS, labels.TOTAL_ROW):
            cells = [f"{scale(st.per_gpu[row], unit):.1f}" for st in stages]
            out.append(f"| {_row_label(row)} | " + " | ".join(cells) + " |")
        out.append(f"| {labels.HOST_RAM_PER_NODE} | "
                   + " | ".join(f"{scale(st.per_node_cpu, unit):.0f}" for st in stages) + " |")
        out.append(f"| {labels.PEAK_GPU} | " + " | ".join(f"{scale(st.peak_gpu, unit):.1f}" for st in stages) + " |")
        out.append(f"| {labels.PEAK_HOST} | "
                   + " | ".join(f"{scale(st.peak_host_per_node, unit):.0f}" for st in stages) + " |")
        out.append(f"| {labels.FITS} | " + " | ".join(_VERDICT[st.verdict] for st in stages) + " |")
        out.append("")
        if m.notes:  # from the model description (a config.json can put any text here): escaped
            out.append("**Model notes**")
            out.append("")
            out += [f"- {inline(note)}" for note in m.notes]
            out.append("")
    if findings:
        out.append("**Findings**")
        out.append("")
        for f in findings:
            where = f" (line {f.line})" if f.line else ""
            out.append(f"- {_ICON[f.severity]} **{inline(f.code)} {inline(f.name)}**{where}: {inline(f.message)}")
        out.append("")
    else:
        out.append("No findings.")
        out.append("")
    if diff:
        out.append("<details><summary>Suggested change</summary>")
        out.append("")
        out.append(escape.markdown_fence(diff, "diff"))
        out.append("")
        out.append("</details>")
        out.append("")
    return escape.output("\n".join(out), ascii_only)


def render_report(report) -> str:
    check = report.check
    o = check.options
    return render(report.path, report.findings, check.estimate, o.usable, o.gpu_memory, o.headroom, report.diff,
                  report.unit, ascii_only=report.ascii_only)

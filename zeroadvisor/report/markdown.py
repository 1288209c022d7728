"""A compact Markdown report to paste as a pull-request comment: verdict, options table,
advice and the suggested diff."""

from __future__ import annotations

from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.units import scale

_ICON = {Severity.ERROR: "🔴", Severity.WARNING: "🟡", Severity.INFO: "🔵"}
_ROWS = (("model states", "model_states"), ("gathered params", "gathered_parameters"), ("buffers", "buffers"),
         ("activations", "activations"), ("overhead", "overhead"), ("**total per GPU**", "total"))


def render(path: str, findings: list[Finding], estimate, usable: int | None, gpu_memory: int | None,
           headroom: float, diff: str, unit: str = "GB") -> str:
    out: list[str] = []
    configured = estimate.configured if estimate is not None else None
    # Config errors, as opposed to the memory verdict (advice rules, ZA8xx, carry that).
    config_errors = sum(1 for f in findings if f.severity is Severity.ERROR and not f.code.startswith("ZA8"))
    verdict = f"{config_errors} config error(s)" if config_errors else "looks good"
    if configured is not None and configured.fits is not None:
        verdict = ("✅ fits" if configured.fits else "❌ does not fit") + \
            (f", {config_errors} config error(s)" if config_errors else "")
    out.append(f"### zeroadvisor: `{path}` — {verdict}")
    out.append("")
    if estimate is not None:
        m, s, c = estimate.model, estimate.settings, estimate.cluster
        budget = ""
        if usable is not None and gpu_memory is not None:
            budget = (f", {scale(usable, unit):.1f} of {scale(gpu_memory, unit):.1f} {unit} per GPU usable "
                      f"({headroom:.0%} headroom)")
        out.append(f"{m.parameters / 1e9:.2f}B parameters, {c.gpus} GPUs ({c.nodes}×{c.gpus_on_a_node}){budget}; "
                   f"{s.precision}, {s.optimizer_label}, micro batch {s.micro_batch}"
                   + (f", sequence {estimate.shape.sequence_length}" if estimate.shape.sequence_length else ""))
        out.append("")
        stages = estimate.stages
        out.append(f"| {unit} per GPU | " + " | ".join(("**" + st.option.label + "** (configured)") if st.configured
                                                        else st.option.label for st in stages) + " |")
        out.append("|---|" + "---:|" * len(stages))
        for label, key in _ROWS:
            cells = [f"{scale(st.per_gpu[key], unit):.1f}" for st in stages]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("| host RAM / node | " + " | ".join(f"{scale(st.per_node_cpu, unit):.0f}" for st in stages) + " |")
        out.append("| fits | " + " | ".join({True: "✅", False: "❌", None: "–"}[st.fits] for st in stages) + " |")
        out.append("")
    if findings:
        out.append("**Findings**")
        out.append("")
        for f in findings:
            where = f" (line {f.line})" if f.line else ""
            out.append(f"- {_ICON[f.severity]} **{f.code} {f.name}**{where}: {f.message}")
        out.append("")
    else:
        out.append("No findings.")
        out.append("")
    if diff:
        out.append("<details><summary>Suggested change</summary>")
        out.append("")
        out.append("```diff")
        out.append(diff.rstrip("\n"))
        out.append("```")
        out.append("")
        out.append("</details>")
        out.append("")
    return "\n".join(out)


def render_report(report) -> str:
    check = report.check
    o = check.options
    return render(report.path, report.findings, check.estimate, o.usable, o.gpu_memory, o.headroom, report.diff,
                  report.unit)

"""The check's default text report: one screen (issue 18).

The verdict and the recommended change first, each finding on one line (its location whole; the message cut
at the width only on a terminal, where ``--verbose`` shows it whole: a CI log, a pipe or a file gets every
message in full, on its line), the options that matter one row each, the assumptions in one block, then the
diff. The memory rows, the bars and the notes are the ``--verbose`` report (text.py render_report).

Text from files is escaped (``escape.terminal``) before it is measured, so a cut never splits an escape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from zeroadvisor import vocab as labels
from zeroadvisor.lint.findings import Finding
from zeroadvisor.report import escape, overview
from zeroadvisor.report.estimate_text import CONFIGURED_MARK, MARKS, RECOMMENDED_MARK, Style
from zeroadvisor.report.finding_parts import COLOURS, RESET, location
from zeroadvisor.units import format_bytes, scale

if TYPE_CHECKING:
    from zeroadvisor.advisor.lead import Lead, NoFix
    from zeroadvisor.advisor.nofit import NothingFits
    from zeroadvisor.memory.estimate import Estimate, StageEstimate
    from zeroadvisor.memory.groups import GroupPeak

ELLIPSIS = ("…", "...")  # Unicode, ASCII
MORE = "--verbose: in full"


MIN_MESSAGE = 24  # columns a finding's message keeps on its location's line; fewer: the message goes below


def one_line(finding: Finding, style: Style, cut: bool = False) -> list[str]:
    """``file:line:col: CODE [severity] message``; with ``cut`` (a terminal) the message cut at the width, else
    whole: a log that does not say what is wrong is no use. The location is never broken (a terminal or CI log
    links it whole): where it leaves too little room for a cut message, the message goes on the next line."""
    head = f"{location(finding)}: {escape.terminal(finding.code)} [{finding.severity.value}]"
    message = escape.terminal(finding.message)
    if not cut:
        return [f"{head} {message}"]
    if style.width - len(head) - 1 >= MIN_MESSAGE:
        return [_cut(f"{head} {message}", style)]
    return [head, _cut(f"    {message}", style)]


def _cut(text: str, style: Style) -> str:
    if len(text) <= style.width:
        return text
    mark = ELLIPSIS[style.mark_index]
    return text[:style.width - len(mark)].rstrip() + mark


def recommendation_sentence(rec: Lead, unit: str) -> str:
    """"Recommended (ZA802 lower-stage-fits): ZeRO-1, peak 46.18 GB per GPU; <its step time>"."""
    code = f"{rec.code} {rec.name}"
    if rec.change is None or rec.peak_gpu is None:
        return f"Recommended ({code}): change {', '.join(rec.keys)}"
    text = f"Recommended ({code}): {rec.change}, peak {format_bytes(rec.peak_gpu, unit)} per GPU"
    if rec.uncounted:
        text += " (" + "; ".join(rec.uncounted) + ")"
    # why not the next rung is the finding's and the full report's (overview.recommendation_words): one screen
    # has no line for it, and the options table below shows that rung's peak
    return f"{text}; {rec.speed_short}" if rec.speed_short else text


def head_lines(estimate: Estimate | None, rec: Lead | None, unit: str, style: Style,
               no_fix: NoFix | None = None, nothing: NothingFits | None = None,
               findings: Sequence[Finding] = ()) -> list[str]:
    """The verdict, the recommendation and the card, each wrapped (coloured by the verdict)."""
    from zeroadvisor.report.estimate_text import SGR

    st = estimate.configured if estimate is not None else None
    sgr = SGR.get(st.verdict) if st is not None and st.verdict else None
    verdict = escape.terminal(overview.verdict_sentence(estimate, None, unit, findings, short=True))
    out = [style.paint(line, sgr) for line in style.wrap(verdict)]
    ways = overview.nothing_fits_sentence(nothing, unit)  # before the config fix: cheaper ways come first
    if ways is not None:
        out += style.wrap(escape.terminal(ways))
    if rec is not None:
        out += style.wrap(escape.terminal(recommendation_sentence(rec, unit)))
    no_fix_line = overview.no_fix_sentence(no_fix)
    if no_fix_line is not None:
        out += style.wrap(escape.terminal(no_fix_line))
    return out


def options_lines(estimate: Estimate, rec: Lead | None, unit: str, style: Style) -> list[str]:
    """The options that matter (overview.shown_stages), one row each: peak per GPU, host RAM per node, fits."""
    stages = overview.shown_stages(estimate, rec, all_options=False)
    names = [_name(st, rec) for st in stages]
    cluster = estimate.cluster
    card = overview.gpu_words(estimate, unit) or "option"  # "A100-SXM4-80GB, 85.90 GB per GPU"
    title = escape.terminal(f"{cluster.gpus} x {card}" if card != "option" else card)
    width = max(len(title), *(len(n) for n in names))
    header = f"  {title.ljust(width)}  {'peak/GPU':>9}  {'host/node':>9}  fits ({unit})"
    rows = [header]
    for st, name in zip(stages, names, strict=True):
        mark = RECOMMENDED_MARK if overview.is_recommended(st, rec) else \
            CONFIGURED_MARK if overview.is_configured(st, rec) else " "
        rows.append(f"{mark} {name.ljust(width)}  {scale(st.peak_gpu, unit):>9.2f}  "
                    f"{scale(st.peak_host_per_node, unit):>9.2f}  "
                    f"{overview.fits_words(st, MARKS[st.verdict][style.mark_index])}")
    return rows + _difference_line(estimate, rec, unit, style)


def _name(st: StageEstimate, rec: Lead | None) -> str:
    suffix = overview.column_suffix(st, rec)
    return f"{labels.option_plain(st.option)} {suffix}" if suffix else labels.option_plain(st.option)


def _difference_line(estimate: Estimate, rec: Lead | None, unit: str, style: Style) -> list[str]:
    """What the peak adds to the model states alone (what DeepSpeed's own estimator counts), for the run the
    report is about: the recommended one, else the configured."""
    st = rec.column if rec is not None and rec.column is not None else estimate.configured
    if st is None:
        return []
    # with a preference/RL run's other models (reference model, vLLM, ...) by role where it has them
    rows = [(row, st.per_gpu.get(row, 0)) for row in ("gathered_parameters", "buffers", "activations", "overhead",
                                                      *labels.METHOD_ROW_LABELS)]
    parts = [f"{labels.ROW_LABELS.get(row) or labels.METHOD_ROW_LABELS[row]} {scale(n, unit):.2f}"
             for row, n in rows if n]
    if not parts:
        return []
    text = (f"{labels.option_plain(st.option)}: model states {scale(st.per_gpu['model_states'], unit):.2f} {unit} "
            f"(all DeepSpeed's estimator counts) + {' + '.join(parts)} {unit}")
    return style.wrap(escape.terminal(text)) + [line for g in st.groups for line in _group_line(g, unit, style)]


def _group_line(group: GroupPeak, unit: str, style: Style) -> list[str]:
    """One GPU of a model's own group (memory/groups.py), by row: "reference model's own GPU: 20.3 GiB: ..."."""
    parts = [f"{labels.ROW_LABELS.get(row) or labels.METHOD_ROW_LABELS[row]} {scale(n, unit):.2f}"
             for row, n in group.rows.items() if n]
    words = group.words[0].upper() + group.words[1:]
    text = f"{words}: {scale(group.gpu, unit):.2f} {unit} = {' + '.join(parts)} {unit}"
    return style.wrap(escape.terminal(text))


def assumption_lines(estimate: Estimate, style: Style) -> list[str]:
    """Every assumed input, one block (ZA808 among the findings names those that can change the answer)."""
    if not estimate.assumed:
        return []
    return style.wrap(escape.terminal("Assumed: " + "; ".join(a.brief() for a in estimate.assumed) + "."))


def render(findings: Sequence[Finding], estimate: Estimate | None, unit: str, style: Style, summary: str,
           rec: Lead | None, cut: bool = False, no_fix: NoFix | None = None,
           nothing: NothingFits | None = None) -> list[str]:
    """The one-screen check (module docstring), without the diff; ``cut``: the findings cut at the width."""
    lines = head_lines(estimate, rec, unit, style, no_fix, nothing, findings)
    lines.append("")
    lines += [_paint_severity(line, f, style) for f in findings for line in one_line(f, style, cut)]
    lines += style.wrap(f"{summary} ({MORE})")
    if estimate is not None:
        lines.append("")
        lines += options_lines(estimate, rec, unit, style)
        lines += assumption_lines(estimate, style)
    return lines


def narrow_diff(diff: str, context: int = 1) -> str:
    """A unified diff with ``context`` lines around each change instead of difflib's 3 (hunks split where the
    changes are further apart), its @@ headers recounted: the same change, fewer lines on the screen."""
    out: list[str] = []
    # lines as the diff counts them, ended by LF only: str.splitlines also splits at CR, U+2028, ... inside a
    # config's line, and the recounted hunk would not apply
    pieces = diff.split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("@@"):
            out.append(line)
            i += 1
            continue
        old_start, new_start = _hunk_starts(line)
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("@@") and not lines[i].startswith("--- "):
            body.append(lines[i])
            i += 1
        out += _rehunk(body, old_start, new_start, context)
    return "".join(out)


def _hunk_starts(header: str) -> tuple[int, int]:
    """The old and new start lines of ``@@ -a,b +c,d @@``."""
    old, new = header.split()[1:3]
    return int(old[1:].split(",")[0]), int(new[1:].split(",")[0])


def _rehunk(body: list[str], old_start: int, new_start: int, context: int) -> list[str]:
    """One hunk's lines as hunks with ``context`` lines of context (``\\ No newline`` stays with its line)."""
    changed = [k for k, text in enumerate(body) if text[:1] in "+-"]
    if not changed:
        return []
    keep: set[int] = set()
    for k in changed:
        keep.update(range(max(0, k - context), min(len(body), k + context + 1)))
    keep.update(k for k, text in enumerate(body) if text.startswith("\\") and k - 1 in keep)
    out: list[str] = []
    old, new = old_start, new_start
    group: list[str] = []
    group_old = group_new = 0
    for k, text in enumerate(body):
        if k in keep:
            if not group:
                group_old, group_new = old, new
            group.append(text)
        elif group:
            out += _hunk(group, group_old, group_new)
            group = []
        if text[:1] in " -":
            old += 1
        if text[:1] in " +":
            new += 1
    if group:
        out += _hunk(group, group_old, group_new)
    return out


def _hunk(group: list[str], old: int, new: int) -> list[str]:
    olds = sum(1 for text in group if text[:1] in " -")
    news = sum(1 for text in group if text[:1] in " +")
    return [f"@@ -{old if olds else old - 1},{olds} +{new if news else new - 1},{news} @@\n", *group]


def _paint_severity(line: str, finding: Finding, style: Style) -> str:
    if not style.colour:
        return line
    severity = f"[{finding.severity.value}]"
    return line.replace(severity, f"{COLOURS[finding.severity]}{severity}{RESET}", 1)

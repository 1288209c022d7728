"""Lint the real-config corpus and summarise the findings per rule (a table for the README).

    python tools/corpus_report.py                    # plain-text table
    python tools/corpus_report.py --markdown         # Markdown, for the README
    python tools/corpus_report.py --corpus DIR       # another corpus folder

Only the library is used (no DeepSpeed). The corpus is every DeepSpeed config at the top of the
folder (``.json``, ``.conf``, ``.hjson``, ``.yml``, ``.yaml``; MANIFEST.tsv kinds ``ds_json`` and
``other`` when a manifest is there); the ``accelerate_yaml/`` launcher files are not DeepSpeed
configs and are skipped.

The table is about what DeepSpeed lets through silently: a rule's findings are split into those
on files DeepSpeed's loader reads (the linter's parser is a port of it) and those on files it
cannot read at all. Warnings and infos are things DeepSpeed accepts without a word; errors on a
file that loads are problems DeepSpeed only reports later (or never, for a launcher that injects
values). Output is deterministic: rules by code, examples from the first file by name.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from zeroadvisor.advisor import registry
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.lint.findings import Finding, Severity
from zeroadvisor.rules.linter import lint_file

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = Path(os.environ.get("ZEROADVISOR_CORPUS", REPO.parent / "shared" / "corpus" / "real"))
SUFFIXES = (".json", ".conf", ".hjson", ".yml", ".yaml")
MESSAGE_WIDTH = 110


@dataclass
class RuleTally:
    code: str
    name: str
    severity: str
    findings: int = 0
    files: set[str] = field(default_factory=set)
    findings_on_unloadable: int = 0
    example: tuple[str, str] | None = None  # (file, message)


def corpus_files(root: Path) -> list[Path]:
    """The DeepSpeed configs of the corpus, sorted by name."""
    manifest = root / "MANIFEST.tsv"
    if manifest.is_file():
        lines = manifest.read_text("utf-8").splitlines()
        header = lines[0].split("\t")
        names = []
        for line in lines[1:]:
            row = dict(zip(header, line.split("\t"), strict=False))
            name = row.get("file", "")
            if row.get("kind") in ("ds_json", "other") and "/" not in name and (root / name).is_file():
                names.append(name)
        return [root / name for name in sorted(names)]
    return sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)


def lint_corpus(files: list[Path]) -> tuple[dict[str, RuleTally], dict[str, object]]:
    rules = {rule.code: rule for rule in registry.ALL}
    tallies: dict[str, RuleTally] = {}
    totals: dict[str, object] = {"files": len(files), "loaded": 0, "clean": 0, "with_error": 0, "with_warning": 0}
    options = LintOptions(integration="any", gpus=None)
    for path in files:
        result = lint_file(path, options, display=path.name)
        findings: list[Finding] = sorted(result.findings, key=Finding.sort_key)
        loaded = result.document is not None
        totals["loaded"] += loaded
        severities = {f.severity for f in findings}
        totals["clean"] += not findings
        totals["with_error"] += Severity.ERROR in severities
        totals["with_warning"] += Severity.WARNING in severities
        for finding in findings:
            rule = rules.get(finding.code)
            tally = tallies.get(finding.code)
            if tally is None:
                tally = tallies[finding.code] = RuleTally(
                    finding.code, finding.name, (rule.severity if rule else finding.severity).value)
            tally.findings += 1
            tally.files.add(path.name)
            if not loaded:
                tally.findings_on_unloadable += 1
            if tally.example is None:
                tally.example = (path.name, finding.message)
    return dict(sorted(tallies.items())), totals


def _clip(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _md(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|")


_GROUPS = (
    ("Accepted silently by DeepSpeed (warnings and infos)", lambda t: t.severity != "error"),
    ("Errors on files DeepSpeed's loader reads",
     lambda t: t.severity == "error" and t.findings > t.findings_on_unloadable),
    ("Files DeepSpeed cannot load at all", lambda t: t.severity == "error" and t.findings == t.findings_on_unloadable),
)


def render_markdown(tallies: dict[str, RuleTally], totals: dict[str, object], root: Path) -> str:
    out = [
        (f"Linting {totals['files']} DeepSpeed configs from the real-config corpus "
         f"({totals['loaded']} readable by DeepSpeed's loader): {totals['clean']} clean, "
         f"{totals['with_warning']} with a warning, {totals['with_error']} with an error."),
    ]
    for title, keep in _GROUPS:
        rows = [t for t in tallies.values() if keep(t)]
        if not rows:
            continue
        out += ["", f"**{title}**", "",
                "| Rule | Name | Severity | Findings | Files | Example file | Example message |",
                "|---|---|---|---:|---:|---|---|"]
        for t in rows:
            file, message = t.example or ("", "")
            count = str(t.findings)
            if t.findings_on_unloadable and t.findings != t.findings_on_unloadable:
                count += f" ({t.findings - t.findings_on_unloadable} on loadable files)"
            out.append(f"| {t.code} | `{t.name}` | {t.severity} | {count} | {len(t.files)} | "
                       f"`{_md(file)}` | {_md(_clip(message))} |")
    return "\n".join(out) + "\n"


def render_text(tallies: dict[str, RuleTally], totals: dict[str, object], root: Path) -> str:
    out = [f"corpus: {root}",
           (f"files: {totals['files']}  loadable: {totals['loaded']}  clean: {totals['clean']}  "
            f"with warning: {totals['with_warning']}  with error: {totals['with_error']}")]
    for title, keep in _GROUPS:
        rows = [t for t in tallies.values() if keep(t)]
        if not rows:
            continue
        out += ["", title]
        for t in rows:
            file, message = t.example or ("", "")
            out.append(f"  {t.code} {t.name:<30} {t.severity:<8} {t.findings:>5} findings {len(t.files):>4} files")
            out.append(f"        e.g. {file}: {_clip(message, 100)}")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help=f"corpus folder (default {DEFAULT_CORPUS})")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (for the README)")
    args = parser.parse_args(argv)
    root: Path = args.corpus
    if not root.is_dir():
        print(f"corpus folder not found: {root}", file=sys.stderr)
        return 2
    files = corpus_files(root)
    if not files:
        print(f"no DeepSpeed configs in {root}", file=sys.stderr)
        return 2
    tallies, totals = lint_corpus(files)
    render = render_markdown if args.markdown else render_text
    sys.stdout.write(render(tallies, totals, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())

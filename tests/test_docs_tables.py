"""The manual's generated tables are their generators' output (paste the new output when one changes).

- docs/benchmarks.md: the step-time comparisons, ``benchmarks/throughput/compare.py --markdown``
  (tests/test_throughput_benchmarks.py holds README.md and benchmarks/throughput/README.md to it);
- docs/lint.md: what the linter finds in the real-config corpus, ``tools/corpus_report.py --markdown``.

The field suite's table (docs/benchmarks.md) takes ``benchmarks/field/run.py --markdown`` about a
minute, so it is a benchmark, not a test.
"""

from __future__ import annotations

import importlib.util
import sys

from conftest import REPO


def _load(name: str, path: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_step_time_table_is_compare_py_output():
    compare = _load("throughput_compare", "benchmarks/throughput/compare.py")
    table = compare.markdown(compare.evaluate())
    assert table in (REPO / "docs" / "benchmarks.md").read_text("utf-8"), (
        "docs/benchmarks.md: run PYTHONPATH=. python benchmarks/throughput/compare.py --markdown and paste the table")


def test_the_corpus_table_is_corpus_report_output(corpus):
    report = _load("corpus_report", "tools/corpus_report.py")
    tallies, totals = report.lint_corpus(report.corpus_files(corpus))
    table = report.render_markdown(tallies, totals, corpus).strip()
    assert table in (REPO / "docs" / "lint.md").read_text("utf-8"), (
        "docs/lint.md: run python tools/corpus_report.py --markdown and paste its output")

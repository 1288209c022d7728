"""The step-time model against public same-hardware measurements (benchmarks/throughput/comparisons.yaml)."""

from __future__ import annotations

import pytest

from conftest import REPO, load_script

compare = load_script("benchmarks/throughput/compare.py", "throughput_compare")


def test_every_comparison_is_cited_and_estimated():
    rows = compare.evaluate()
    assert rows
    for row in rows:
        assert row.source.startswith("https://")
        assert row.measured_ratio > 0 and row.estimated_ratio > 0


def test_the_markdown_table_lists_every_pair():
    rows = compare.evaluate()
    table = compare.markdown(rows)
    assert all(f"[{r.id}]" in table for r in rows)


def test_at_least_14_comparisons_each_saying_what_it_assumed():
    entries = compare.load()
    assert len(entries) >= 14
    for entry in entries:
        assert entry["assumed"].strip(), entry["id"]
        assert {"a", "b", "measured", "hardware"} <= entry.keys(), entry["id"]


def test_published_tables_are_compare_py_output():
    table = compare.markdown(compare.evaluate())
    for readme in (REPO / "docs" / "benchmarks.md", REPO / "benchmarks" / "throughput" / "README.md"):
        assert table in readme.read_text("utf-8"), f"{readme}: run compare.py --markdown and paste the table"


@pytest.mark.xfail(strict=True, reason="targets not met: offload and single-node ZeRO-3 costs underestimated "
                                       "(benchmarks/throughput/README.md Status)")
def test_issue_targets():
    rows = compare.evaluate()
    order, within = compare.summary(rows)
    assert len(rows) >= 14
    assert order >= 80 and within >= 70

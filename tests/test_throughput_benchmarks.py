"""The step-time model against public same-hardware measurements (benchmarks/throughput/comparisons.yaml)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import REPO

_SPEC = importlib.util.spec_from_file_location("throughput_compare", REPO / "benchmarks" / "throughput" / "compare.py")
compare = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = compare  # dataclasses look their module up
_SPEC.loader.exec_module(compare)


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


@pytest.mark.xfail(strict=True, reason="12 comparisons not collected yet and ZeRO-3's losses not modelled "
                                       "(benchmarks/throughput/README.md Status)")
def test_issue_targets():
    rows = compare.evaluate()
    order, within = compare.summary(rows)
    assert len(rows) >= 12
    assert order >= 80 and within >= 70

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


def test_the_recorded_error_band_is_the_pairs_own():
    """zeroadvisor/throughput/validation.py (the tie band the advice uses) is what compare.py computes from the
    committed pairs today: a changed model or a new pair regenerates it (compare.py --write-validation)."""
    recorded = (REPO / "zeroadvisor" / "throughput" / "validation.py").read_text("utf-8")
    assert recorded == compare.validation_module(compare.evaluate()), "run compare.py --write-validation"


def test_the_band_is_the_median_error_by_hand():
    rows = [compare.Row(str(i), f"g{i}", "https://x", "h", "A", "B", measured, estimated)
            for i, (measured, estimated) in enumerate([(1.0, 1.1), (2.0, 1.0), (1.5, 1.5)])]
    # |ln(est/meas)|: ln 1.1, ln 2, 0 -> median ln 1.1
    assert compare.error_band(rows) == pytest.approx(1.1)
    # claims beyond 1.1: pair 2 (1.5x); pair 0 (1.1x) is not beyond, pair 1 (1.0x) neither
    assert [r.id for r in compare.claims(rows, 1.1)] == ["2"]
    # held out: each group's band from the other two (medians of two values: the geometric mean of their errors)
    right, made = compare.held_out_claims(rows)
    assert (right, made) == (1, 1)


def test_the_manual_quotes_the_recorded_band():
    """docs/check.md states the band and its held-out check as validation.py records them."""
    from zeroadvisor.throughput import validation as v

    page = (REPO / "docs" / "check.md").read_text("utf-8")
    assert f"today {v.TIE_BAND - 1:.0%} on {v.PAIRS} pairs from {v.SOURCE_GROUPS} sources" in page
    assert f"hold in {v.HELD_OUT_CLAIMS_RIGHT} of {v.HELD_OUT_CLAIMS} pairs" in page
    readme = " ".join((REPO / "README.md").read_text("utf-8").split())
    assert (f"{v.PAIRS} public same-hardware pairs from {v.SOURCE_GROUPS} sources (`benchmarks/throughput/compare.py`: "
            f"{v.ORDERED_PERCENT:.0f}% ordered as measured, {v.WITHIN_2X_PERCENT:.0f}% within 2x)") in readme
    assert f"beyond its median error of {v.TIE_BAND - 1:.0%}" in readme
    assert f"hold in {v.HELD_OUT_CLAIMS_RIGHT} of {v.HELD_OUT_CLAIMS} pairs" in readme

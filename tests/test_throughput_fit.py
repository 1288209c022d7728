"""The step-time model's one fitted constant (benchmarks/throughput/fit.py): the committed value and fit.md are
what the fit computes from the committed pairs, and the fit is what its docstring says."""

from __future__ import annotations

import pytest

from conftest import REPO, load_script
from zeroadvisor.throughput import host

fit = load_script("benchmarks/throughput/fit.py", "throughput_fit")


@pytest.fixture(scope="module")
def result():
    return fit.fit()


def test_the_committed_wait_is_the_training_halfs_fit(result):
    assert host.ZERO3_FETCH_WAIT_S == result.value, "run fit.py --write and copy the value into host.py"


def test_fit_md_is_fit_py_output(result):
    assert (REPO / "benchmarks" / "throughput" / "fit.md").read_text("utf-8") == fit.markdown(result)


def test_the_halves_split_the_groups(result):
    assert set(result.training_groups).isdisjoint(result.test_groups)
    assert len(result.training_groups) - len(result.test_groups) in (0, 1)


def test_the_probe_is_exact_the_ratio_is_linear_in_the_wait():
    """A pair's ratio at any wait follows from the two probes: the model rerun at that wait agrees."""
    pair = next(p for p in fit.pairs() if p.row.id == "autotune-gpt2-xl-z2-vs-z3")
    entry = next(e for e in fit.compare.load() if e["id"] == pair.row.id)
    with fit.fetch_wait(3e-4):
        rerun = fit.compare.seconds_per_sample(entry, entry["b"]) / fit.compare.seconds_per_sample(entry, entry["a"])
    assert pair.at(3e-4).estimated_ratio == pytest.approx(rerun, rel=1e-9)
    assert pair.b_slope > 0 and pair.a_slope == 0  # ZeRO-3 waits per fetch, ZeRO-2 does not


def test_held_out_ordering_beats_the_model_without_the_wait(result):
    """The acceptance the wait was added under (issue 17 item 2): leave-one-source-out ordering better than
    without it, within 2x not below 85%."""
    assert result.loso_held_out[0] > result.loso_before[0]
    assert result.loso_held_out[1] >= 85

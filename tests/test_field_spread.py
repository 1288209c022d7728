"""The field suite's distribution of predicted/measured GPU peaks (benchmarks/field/run.py): the arithmetic of the
median, percentiles and median error, and which runs enter it. No case is run here (the suite takes minutes)."""

from __future__ import annotations

import pytest

from conftest import load_script

run = load_script("benchmarks/field/run.py", "field_run")


def _result(case_id: str, outcome: str = "fits", peak: float | None = 10e9, measured: str | None = "10GB",
            documented: bool = False, bound: bool = False):
    return run.Result(id=case_id, outcome=outcome, well_documented=documented, stage="Z3",
                      peak_gpu=None if peak is None else int(peak), measured_gpu=measured, length_is_bound=bound)


def test_quantile_interpolates_between_ranks():
    values = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert run.quantile(values, 0.0) == 1.0
    assert run.quantile(values, 1.0) == 4.0
    assert run.quantile(values, 0.5) == pytest.approx(2.5)
    assert run.quantile(values, 0.1) == pytest.approx(1.3)  # position 0.3 between 1 and 2
    assert run.quantile(values, 0.9) == pytest.approx(3.7)
    assert run.quantile([7.0], 0.9) == 7.0


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_quantile_rejects_a_q_outside_the_unit_interval(bad):
    with pytest.raises(ValueError, match="outside"):
        run.quantile([1.0, 2.0], bad)


def test_quantile_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no values"):
        run.quantile([], 0.5)


def test_spread_of_known_ratios():
    s = run.spread([0.8, 1.0, 1.1, 1.2, 2.0])
    assert s.count == 5
    assert s.median == pytest.approx(1.1)
    assert s.p10 == pytest.approx(0.88)  # position 0.4 between 0.8 and 1.0
    assert s.p90 == pytest.approx(1.68)  # position 3.6 between 1.2 and 2.0
    # |ratio - 1| = 0.2, 0, 0.1, 0.2, 1.0 -> median 0.2: a centred median can hide a wide spread
    assert s.median_abs_error == pytest.approx(0.2)


def test_spread_of_no_ratios_is_none():
    assert run.spread([]) is None
    assert "no measured peaks" in run.spread_line("all", [])


def test_only_runs_that_trained_with_one_measured_figure_and_a_real_length_enter():
    results = [
        _result("kept", peak=12e9, measured="10GB"),
        _result("oom", outcome="does-not-fit", peak=12e9, measured="10GB"),  # a reading at an OOM: a lower bound
        _result("range", measured="750-800GB"),  # no single value
        _result("unmeasured", measured=None),
        _result("no-peak", peak=None),
        _result("padded", bound=True),  # dynamic padding: the peak is at a bound length
        _result("binary", peak=2**30 * 9, measured="10GiB"),
    ]
    ratios = dict(run.gpu_ratios(results))
    assert set(ratios) == {"kept", "binary"}
    assert ratios["kept"] == pytest.approx(1.2)
    assert ratios["binary"] == pytest.approx(0.9)


def test_totals_state_the_spread_overall_and_for_well_documented_cases_and_name_what_is_left_out():
    results = [
        _result("a", peak=11e9, documented=True),
        _result("b", peak=13e9),
        _result("c", peak=9e9, documented=True),
        _result("padded", bound=True),
    ]
    lines = run.totals(results)
    overall = ("predicted/measured GPU peak, all: 3 runs, median 1.10, 10th-90th percentile 0.94-1.26, "
               "median |ratio - 1| 10.0%")
    documented = ("predicted/measured GPU peak, well documented (*): 2 runs, median 1.00, "
                  "10th-90th percentile 0.92-1.08, median |ratio - 1| 10.0%")
    assert overall in lines
    assert documented in lines
    assert "left out of the ratios, length a bound (dynamic padding): padded" in lines


def test_the_spread_by_configuration_groups_stage_3_and_offload_apart():
    def at(case_id: str, stage: str, peak: float):
        return run.Result(id=case_id, outcome="fits", well_documented=False, stage=stage, peak_gpu=int(peak),
                          measured_gpu="10GB")
    results = [at("z3", "Z3", 10e9), at("z3-dpo", "Z3 dpo", 12e9), at("z3off", "Z3+opt:cpu+par:cpu", 7e9),
               at("z2", "Z2", 11e9), at("z2off", "Z2+opt:cpu", 9e9), at("z3par", "Z3+par:cpu", 5e9)]
    assert [run.configuration_class(r.stage) for r in results] == [
        "ZeRO-3", "ZeRO-3", "ZeRO-3 with offload", "ZeRO-0/1/2", "ZeRO-0/1/2 with offload", "ZeRO-3 with offload"]
    line = run.by_configuration_line(results)
    # largest class first; ZeRO-3: ratios 1.0 and 1.2 -> median 1.10; with offload: 0.7 and 0.5 -> median 0.60
    assert line.startswith("predicted/measured GPU peak by configuration: ZeRO-3 2 (median 1.10, ")
    assert "ZeRO-3 with offload 2 (median 0.60, 10th-90th 0.52-0.68, |ratio - 1| 40%)" in line
    assert "ZeRO-0/1/2 1 (median 1.10" in line and "ZeRO-0/1/2 with offload 1 (median 0.90" in line
    assert "by configuration" in "\n".join(run.totals(results))


def _option(peak: int, context: int, fragmentation: int, phase: str = "train") -> dict:
    def term(key: str, value: int, at: str) -> dict:
        return {"key": key, "device": "gpu", "phase": at, "bytes": value}
    # the load phase's context is not the peak's: only the binding phase's terms are taken off
    return {"peak_gpu": peak, "binding_phase": phase,
            "terms": [term("cuda_context", context, phase), term("fragmentation", fragmentation, phase),
                      term("cuda_context", 7 * context, "load"), term("activations", 5 * context, phase)]}


@pytest.mark.parametrize(("of", "expected"), [("device", 20_000), ("reserved", 19_000), ("allocated", 18_700)])
def test_a_figure_is_set_against_the_prediction_of_what_it_measures(of, expected):
    # 20000 peak = ... + 1000 context + 300 fragmentation: nvidia-smi sees all, torch's reserved peak no context,
    # its allocated peak neither the context nor the freed blocks the fragmentation allowance stands for
    assert run.predicted_as(_option(20_000, 1_000, 300), of) == expected


def test_an_unknown_measured_quantity_is_an_error_in_the_case():
    assert run.measured_of(None) == "device"
    with pytest.raises(ValueError, match="must be one of"):
        run.measured_of("nvidia")


def test_the_ratio_uses_the_prediction_of_the_measured_quantity():
    r = run.Result(id="r", outcome="fits", well_documented=False, stage="Z3", peak_gpu=int(12e9),
                   predicted_gpu=int(11e9), measured_of="reserved", measured_gpu="10GB")
    assert dict(run.gpu_ratios([r]))["r"] == pytest.approx(1.1)

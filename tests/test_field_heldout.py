"""The field suite held out by source (benchmarks/field/heldout.py and run.py's held-out lines): sources grouped by
repository or host, cases of a source a constant was fitted on left out, per-source and leave-one-source-out
distributions; and the registry of constants names real attributes, none fitted on a field case's source. No case
is run here (the suite takes minutes)."""

from __future__ import annotations

import pytest

from conftest import load_script

run = load_script("benchmarks/field/run.py", "field_run")
heldout = load_script("benchmarks/field/heldout.py", "heldout")


def _result(case_id: str, source: str, peak: float, measured: str = "10GB"):
    return run.Result(id=case_id, outcome="fits", well_documented=False, stage="Z3", source=source,
                      peak_gpu=int(peak), measured_gpu=measured)


@pytest.mark.parametrize(("url", "key"), [
    ("https://github.com/modelscope/ms-swift/issues/123", "github.com/modelscope/ms-swift"),
    ("https://github.com/modelscope/ms-swift/blob/main/docs/x.md", "github.com/modelscope/ms-swift"),
    ("https://github.com/hiyouga/LLaMA-Factory/issues/4447", "github.com/hiyouga/llama-factory"),
    ("https://www.philschmid.de/fine-tune-flan-t5-deepspeed", "philschmid.de"),
    ("https://huggingface.co/blog/zero-deepspeed-fairscale", "huggingface.co"),
    ("https://huggingface.co/docs/peft/accelerate/deepspeed", "huggingface.co"),
])
def test_a_source_is_a_repository_on_a_repository_host_else_the_web_host(url, key):
    assert heldout.source_key(url) == key


def test_a_source_that_is_not_a_url_is_an_error():
    with pytest.raises(ValueError, match="not a URL"):
        heldout.source_key("LLaMA-Factory issue 4447")


def test_cases_of_a_source_a_constant_was_fitted_on_are_left_out():
    rows = [heldout.Row("a", "s1", 1.1), heldout.Row("b", "s2", 0.9), heldout.Row("c", "s1", 1.3)]
    fitted = [heldout.Constant("m:X", "fitted on s1's runs", frozenset({"s1"})), heldout.Constant("m:Y", "code")]
    kept, left = heldout.held_out(rows, fitted)
    assert [r.case for r in kept] == ["b"]
    assert [r.case for r in left] == ["a", "c"]
    kept, left = heldout.held_out(rows, [heldout.Constant("m:Y", "measured on CPU")])
    assert len(kept) == 3 and not left


def test_leave_one_source_out_drops_exactly_that_source():
    rows = [heldout.Row("a", "s1", 1.1), heldout.Row("b", "s2", 0.9), heldout.Row("c", "s1", 1.3),
            heldout.Row("d", "s3", 2.0)]
    assert heldout.by_source(rows) == {"s1": [1.1, 1.3], "s2": [0.9], "s3": [2.0]}
    assert heldout.leave_one_source_out(rows) == {"s1": [0.9, 2.0], "s2": [1.1, 1.3, 2.0], "s3": [1.1, 0.9, 1.3]}


def test_held_out_lines_leave_out_a_fitted_source_and_say_how_far_one_source_moves_the_median():
    results = [_result("a1", "s1", 20e9), _result("a2", "s1", 22e9), _result("a3", "s1", 18e9),
               _result("b", "s2", 10e9), _result("c", "s3", 8e9)]
    fitted = (heldout.Constant("m:X", "fitted on s1", frozenset({"s1"})),)
    lines = run.held_out_lines(results, fitted)
    assert lines[0].endswith("fitted on field cases: X on s1")
    # s1's three runs (ratio 1.8-2.2) are not held out: the held-out median is that of s2 and s3 alone
    assert ("predicted/measured GPU peak, held out by source (2 sources): 2 runs, median 0.90, "
            "10th-90th percentile 0.82-0.98, median |ratio - 1| 10.0%") in lines
    assert "not held out (a constant was fitted on their source): a1, a2, a3" in lines
    assert ("leaving one source out: median 0.80 (without s2) to 1.00 (without s3), "
            "median |ratio - 1| 0% (without s3) to 20% (without s2)") in lines


def test_with_nothing_fitted_on_field_cases_every_case_is_held_out_and_sources_weigh_alike():
    results = [_result("a1", "s1", 20e9), _result("a2", "s1", 22e9), _result("a3", "s1", 18e9),
               _result("b", "s2", 10e9), _result("c", "s3", 8e9)]
    lines = run.held_out_lines(results, (heldout.Constant("m:Y", "measured on CPU"),))
    assert "none" in lines[0] and "every case is held out" in lines[0]
    assert any(line.startswith("predicted/measured GPU peak, held out by source (3 sources): 5 runs, median 1.80")
               for line in lines)
    # the many-run source carries the pooled median (1.80); each source's median weighted alike gives 1.00
    assert "median of the 3 source medians: 1.00" in lines


def test_the_registry_names_the_constants_the_model_uses_and_none_is_fitted_on_a_field_source():
    sources = {heldout.source_key(run.load_case(p)["source"]) for p in run.CASES.glob("*.yaml")}
    assert len(sources) > 5
    for constant in heldout.CONSTANTS:
        assert constant.value() is not None  # a renamed or removed constant fails here
        assert not constant.field_sources & sources, constant.name
    assert heldout.fitted_sources(heldout.CONSTANTS) == frozenset()

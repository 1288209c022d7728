"""The allocator allowances' fit on public measurements (benchmarks/fit_allocator.py): what each row says, the
median over sources, the held-out error, the field suite's sources kept out, and the committed fit reproduced."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, load_script
from zeroadvisor.memory.buffers import CUDA_CONTEXT_BYTES

fit = load_script("benchmarks/fit_allocator.py", "fit_allocator")

FIELDS = ("url", "repo", "format", "gpu", "total_gib", "free_gib", "allocated_gib", "reserved_gib", "in_use_gib",
          "reserved_unallocated_gib", "tried_gib", "multi_gpu", "deepspeed", "notes", "quote")


def _message(url: str = "https://github.com/o/r/issues/1", **values: str) -> dict[str, str]:
    row = dict.fromkeys(FIELDS, "")
    row.update(url=url, multi_gpu="no", **values)
    return row


def test_a_v1_message_gives_the_memory_outside_the_allocator_and_the_fragmentation():
    # "(GPU 0; 79.35 GiB total capacity; 75.12 GiB already allocated; 1.05 GiB free; 77.50 GiB reserved ...)"
    row = _message(format="v1", total_gib="79.35", allocated_gib="75.12", free_gib="1.05", reserved_gib="77.50")
    assert fit.non_torch_gib(row) == pytest.approx(79.35 - 1.05 - 77.50)
    assert fit.at_limit_fragmentation(row) == pytest.approx((77.50 - 75.12) / 75.12)


def test_a_v2_message_sums_allocated_and_reserved_but_unallocated():
    # "total capacity of 79.15 GiB of which 1.20 GiB is free. ... 75.31 GiB is allocated by PyTorch, and 1.75 GiB
    # is reserved by PyTorch but unallocated"
    row = _message(format="v2", total_gib="79.15", free_gib="1.20", allocated_gib="75.31",
                   reserved_unallocated_gib="1.75", in_use_gib="77.94")
    assert fit.non_torch_gib(row) == pytest.approx(79.15 - 1.20 - (75.31 + 1.75))
    assert fit.at_limit_fragmentation(row) == pytest.approx(1.75 / 75.31)


def test_a_message_without_its_figures_or_flagged_is_left_out():
    assert fit.non_torch_gib(_message(total_gib="24", allocated_gib="20")) is None  # no free figure
    flagged = _message(total_gib="8", free_gib="0.1", reserved_gib="1", notes="ANOMALY: shared card")
    kept, left = fit.samples([flagged], fit.non_torch_gib)
    assert kept == [] and left == 1


def test_a_log_counts_only_after_a_training_step():
    line = {"training_step": "yes", "max_allocated_gib": "10", "max_reserved_gib": "12"}
    assert fit.cache_excess(line) == pytest.approx(0.2)
    assert fit.cache_excess({**line, "training_step": "no"}) is None
    assert fit.cache_excess({**line, "max_reserved_gib": "9"}) is None  # reserved below allocated: a misread


def _sample(source: str, value: float) -> object:
    return fit.Sample(source=source, value=value, multi_gpu="no")


def test_a_source_that_posts_many_rows_counts_once():
    data = [_sample("a", 5.0)] * 9 + [_sample("b", 1.0), _sample("c", 2.0)]
    # per-source medians 5, 1, 2 -> 2 (a pooled median of the 11 rows would be 5)
    assert fit.median_of_source_medians(data) == 2.0


def test_the_held_out_error_predicts_each_source_from_the_others():
    data = [_sample("a", 1.0), _sample("b", 2.0), _sample("c", 4.0)]
    result = fit.fit("x", "GiB", data, left_out=0, previous=2.0)
    # without a: median(2, 4) = 3 -> |3 - 1| = 2; without b: 2.5 -> 0.5; without c: 1.5 -> 2.5: median 2
    assert result.held_out_abs_error == pytest.approx(2.0)
    assert result.value == 2.0 and result.previous_abs_error == pytest.approx(1.0)


def test_rows_from_a_field_source_are_kept_out_of_the_fit():
    sources = fit.field_sources()
    assert "github.com/modelscope/ms-swift" in sources
    row = _message(url="https://github.com/modelscope/ms-swift/issues/9", total_gib="24", free_gib="1",
                   reserved_gib="22")
    kept, left = fit.samples([row], fit.non_torch_gib, sources)
    assert kept == [] and left == 1


def test_the_committed_fit_is_what_the_committed_data_gives():
    messages = fit.read_rows(REPO / "benchmarks/allocator_oom/messages.tsv")
    logs = fit.read_rows(REPO / "benchmarks/allocator_oom/cache_logs.tsv")
    fresh = [json.loads(json.dumps(fit.asdict(f)))
             for f in fit.fits(messages, logs, fit.field_sources())]
    committed = json.loads((REPO / "benchmarks/allocator_fit.json").read_text())
    assert fresh == committed


def test_the_context_allowance_is_within_the_fits_held_out_error():
    committed = {f["name"]: f for f in json.loads((REPO / "benchmarks/allocator_fit.json").read_text())}
    context = committed["CUDA_CONTEXT_BYTES"]
    assert context["sources"] >= 30
    assert context["previous"] == CUDA_CONTEXT_BYTES / 2**30
    assert abs(context["value"] - CUDA_CONTEXT_BYTES / 2**30) < context["held_out_abs_error"]
    assert context["previous_abs_error"] <= context["held_out_abs_error"]

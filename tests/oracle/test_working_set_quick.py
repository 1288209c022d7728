"""Oracle: ZeRO-3's gathered working set measured on real DeepSpeed steps on CPU (benchmarks/calibrate_working_set.py
--quick) against the estimate's bound (memory/buffers.py gathered_terms) and the coordinator replay
(memory/working_set.py).

Two configs of the 8-layer Llama at 2 ranks: a prefetch bucket below one MLP projection with max_live between one
layer and the model (the lead-growth case), and a bucket larger than the model held back by max_live alone, with
activation checkpointing. About a minute (two ZeRO-3 runs of 2 processes each).
"""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = [pytest.mark.oracle, pytest.mark.slow]  # real ZeRO-3 steps on CPU: about a minute

# The bound min(P, max_live + L_p) over the measured peak: 1.08 and 1.06 in the full run (benchmarks/working_set.md);
# the slack is one largest module (L_p, the 1,048,576-element embedding) that the peak only partly reaches.
LOOSENESS = 1.25
# copies + flat buffer over the resident peak: at most 2.19 in the full run (a prefetch's flat buffer is bounded by
# the bucket + one whole parameter, which a small model's peak reaches only in part)
RESIDENT_LOOSENESS = 2.5


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    script = load_script("benchmarks/calibrate_working_set.py", "zeroadvisor_calibrate_working_set")
    prefix = tmp_path_factory.mktemp("ws") / "working_set"
    script.main(["--quick", "--out", str(prefix), "--timeout", "400"])
    data = json.loads(prefix.with_suffix(".json").read_text())
    assert not data["failures"], [f["case"]["name"] + ": " + f["error"] for f in data["failures"]]
    assert len(data["cases"]) == len(script.quick_cases())
    return data


def test_gathered_parameters_stay_under_the_bound_and_near_it(report):
    for row in report["cases"]:
        assert all(row["trace_complete"][1:]), row["name"]  # steps 1-2 prefetched from a valid trace
        # the coordinator's counter is the gathered non-persistent numel (nothing gathered behind its back)
        assert row["counter_peak"] == row["measured"], row["name"]
        assert row["measured"] > row["case"]["max_live"], row["name"]  # the prefetch lead reached max_live
        assert row["measured"] <= row["bound"] <= LOOSENESS * row["measured"], (row["name"], row["measured"],
                                                                                row["bound"])


def test_the_replay_of_the_recorded_trace_is_exact(report):
    # working_set.peak on the coordinator's own module trace: gathered copies + flat all-gather buffers held by
    # the in-flight handles, element for element
    for row in report["cases"]:
        assert row["replay_trace"] * 4 == row["resident_bytes"], (row["name"], row["replay_trace"],
                                                                  row["resident_bytes"] // 4)


def test_resident_gathered_memory_stays_under_the_bound(report):
    for row in report["cases"]:
        # the copies and the flat buffer a coalesced prefetch holds beside them (gathered + gathered_flat terms)
        assert row["resident_bytes"] <= 4 * row["bound_resident"] <= 4 * RESIDENT_LOOSENESS * row["resident_bytes"], (
            row["name"], row["resident_bytes"] // 4, row["bound_resident"])

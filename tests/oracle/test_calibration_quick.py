"""Oracle: the memory model against real DeepSpeed ZeRO steps on CPU (benchmarks/calibrate.py --quick).

Runs stages 0-3 at 1 and 2 ranks and one ZeRO-2 CPU-offload case, all with a client torch AdamW
(the offload case sets zero_force_ds_cpu_optimizer: false), so no optimizer is JIT-compiled; only
DeepSpeed's shm comm op is built on first use (about a minute). Each model-state row must agree
with the estimate within 2 %.
"""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # real ZeRO steps on CPU: minutes


@pytest.mark.oracle
def test_quick_calibration_within_two_percent(tmp_path):
    calibrate = load_script("benchmarks/calibrate.py", "zeroadvisor_calibrate")
    prefix = tmp_path / "calibration"
    calibrate.main(["--quick", "--out", str(prefix), "--timeout", "400"])
    report = json.loads(prefix.with_suffix(".json").read_text())
    assert not report["failures"], [f["case"]["name"] + ": " + f["error"] for f in report["failures"]]
    assert len(report["cases"]) == len(calibrate.quick_cases())
    for case in report["cases"]:
        for row in ("parameters", "gradients", "optimizer_states", "model_states"):
            entry = case["rows"][row]
            # estimate (the most loaded GPU; stage 1/2 with the live model's parameter layout) vs the most
            # loaded rank, and where the layout gives per-rank bytes, every rank against its own
            gap = entry["gap"]
            assert gap is not None and abs(gap) <= calibrate.MODEL_STATE_BOUND, (case["name"], case["ranks"], row, gap)
            for rank, g in enumerate(entry.get("gap_per_rank", ())):
                assert abs(g) <= calibrate.MODEL_STATE_BOUND, (case["name"], case["ranks"], row, rank, g)
        if case["case"]["stage"] in (1, 2) and "layout_matches_deepspeed" in case["rows"]["gradients"]:
            assert case["rows"]["gradients"]["layout_matches_deepspeed"], case["name"]
    assert prefix.with_suffix(".md").read_text().startswith("# Calibration")

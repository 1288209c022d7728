"""Oracle: the load-phase model against real DeepSpeed 0.19.8 ``deepspeed.initialize`` on CPU.

Runs benchmarks/calibrate_load.py --quick: ZeRO-2 bf16 on 1 rank
(fp32 model cast to bf16, flat copy) and ZeRO-3 bf16 under zero.Init on 2 ranks, with a client torch
AdamW (nothing is JIT-compiled). Every measured moment's live tensor bytes per rank must agree with the
prediction within 10 %.
"""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # real deepspeed.initialize on CPU, 1 and 2 ranks


@pytest.mark.oracle
def test_quick_load_calibration_within_ten_percent(tmp_path):
    calibrate = load_script("benchmarks/calibrate_load.py", "zeroadvisor_calibrate_load")
    prefix = tmp_path / "load_calibration"
    calibrate.main(["--quick", "--out", str(prefix), "--timeout", "200"])
    report = json.loads(prefix.with_suffix(".json").read_text())
    assert not report["failures"], [f["case"]["name"] + ": " + f["error"] for f in report["failures"]]
    assert len(report["cases"]) == len(calibrate.quick_cases())
    for case in report["cases"]:
        assert {"built", "moved", "initialized"} <= set(case["moments"]), case["name"]
        for name, moment in case["moments"].items():
            assert moment["gap"] is not None and abs(moment["gap"]) <= calibrate.BOUND, (case["name"], name, moment)
        assert abs(case["peak"]["gap"]) <= calibrate.BOUND, (case["name"], case["peak"])
        for rank in case["rss"]:  # RSS is reported, not bounded (allocator retention; load_calibration.md)
            assert rank["after_init"] > rank["baseline"]
    assert prefix.with_suffix(".md").read_text().startswith("# Load-phase calibration")

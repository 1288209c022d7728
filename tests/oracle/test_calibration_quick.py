"""Oracle: the memory model against real DeepSpeed ZeRO steps on CPU (benchmarks/calibrate.py --quick).

Stages 0-3 at 1 and 2 ranks and one ZeRO-2 CPU-offload case, all with a client torch AdamW (the offload
case sets zero_force_ds_cpu_optimizer: false), so no optimizer is JIT-compiled; only DeepSpeed's shm comm
op is built on first use (about a minute, paid by the first case). Each model-state row must agree with
the estimate within 2 %.

One test per case: the whole subset ran about 95 s on an idle 2-core machine and passed the per-test
timeout on a loaded one; a case is 10-70 s, far from the timeout however busy the machine is.
"""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytestmark = pytest.mark.slow  # real ZeRO steps on CPU: tens of seconds each

calibrate = load_script("benchmarks/calibrate.py", "zeroadvisor_calibrate")
CASE_TIMEOUT = 240  # seconds for one case's ranks, below the per-test timeout (pyproject.toml)


@pytest.mark.oracle
@pytest.mark.parametrize("case", calibrate.quick_cases(), ids=lambda c: f"{c['name']} x{c['ranks']}")
def test_quick_case_within_two_percent(case, tmp_path):
    result = calibrate.run_case(case, CASE_TIMEOUT)
    assert "error" not in result, (result.get("error"), result.get("log", "")[-1500:])
    comparison = calibrate.compare(result)
    for row in ("parameters", "gradients", "optimizer_states", "model_states"):
        entry = comparison["rows"][row]
        # estimate (the most loaded GPU; stage 1/2 with the live model's parameter layout) vs the most
        # loaded rank, and where the layout gives per-rank bytes, every rank against its own
        gap = entry["gap"]
        assert gap is not None and abs(gap) <= calibrate.MODEL_STATE_BOUND, (row, gap)
        for rank, g in enumerate(entry.get("gap_per_rank", ())):
            assert abs(g) <= calibrate.MODEL_STATE_BOUND, (row, rank, g)
    if case["stage"] in (1, 2) and "layout_matches_deepspeed" in comparison["rows"]["gradients"]:
        assert comparison["rows"]["gradients"]["layout_matches_deepspeed"]
    # the report the benchmark writes from the same comparison
    prefix = tmp_path / "calibration"
    calibrate.write_reports([comparison], [], prefix, True)
    assert prefix.with_suffix(".md").read_text().startswith("# Calibration")
    assert calibrate.max_state_gap([comparison], per_rank=True) <= calibrate.MODEL_STATE_BOUND

"""Oracle: the optimizer step's temporaries (memory/step_temporaries.py) against torch 2.13 itself on CPU.

benchmarks/calibrate_step_temporaries.py profiles one ``optimizer.step()`` over a flat fp32 parameter of N
elements (what ZeRO hands the optimizer per group) and takes the peak of the profiler's allocation events beyond
the steady state. zeroadvisor's count for the same optimizer (estimate(), stage 0 fp32: 4 B × N per temporary)
must agree within 1 % of 4 B × N. The real DeepSpeed ZeRO-2 check (one flat partition per step call, peak extra
= 4 B × that partition) runs 2 ranks and is slow.
"""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("torch")

pytestmark = pytest.mark.oracle


def calibrate():
    return load_script("benchmarks/calibrate_step_temporaries.py", "zeroadvisor_calibrate_step_temporaries")


@pytest.mark.parametrize("name", ["AdamW foreach", "AdamW single-tensor", "AdamW fused"])
def test_the_flat_step_allocates_what_zeroadvisor_counts(name):
    cal = calibrate()
    m = cal.compare(cal.measure(name, "flat", cal.N_QUICK))
    assert m["supported"], m.get("error")
    assert abs(m["peak_extra"] - m["zeroadvisor"]) <= cal.BOUND * 4 * m["N"], m


@pytest.mark.parametrize("name", ["Adam L2 foreach", "Adam L2 single-tensor"])
def test_the_flat_adam_l2_step_allocates_what_zeroadvisor_counts(name):
    # foreach frees the L2 sum (grads + wd·params) before _foreach_sqrt: 1 x 4 B x N; single-tensor keeps it: 3

    cal = calibrate()
    m = cal.compare(cal.measure(name, "flat", cal.N_QUICK))
    assert abs(m["peak_extra"] - m["zeroadvisor"]) <= cal.BOUND * 4 * m["N"], m


@pytest.mark.slow  # real deepspeed.initialize and three ZeRO-2 steps, 2 ranks
def test_zero2_steps_one_flat_partition_per_group():
    pytest.importorskip("deepspeed")
    cal = calibrate()
    run = cal.run_deepspeed(2, timeout=300)
    assert "error" not in run, run
    assert len(run["calls"]) == 2 * 2  # two ranks, two parameter groups, one step call per group
    for call in run["calls"]:
        assert call["param_group_shapes"] == [[[call["partition"]]]], call  # one group, one flat tensor
        assert abs(call["peak_extra"] - 4 * call["partition"]) <= cal.BOUND * 4 * call["partition"], call
    assert run["largest_partition"] == run["group_numels"][0] // 2  # the weights group, halved
    assert abs(run["peak_extra"] - run["count_largest_group"]) <= cal.BOUND * run["count_largest_group"]

"""Oracle: TRL's own PPO step (the oracle extra's TRL: forward, PolicyAndValueWrapper, selective_log_softmax and
PPOTrainer.train's loss lines) on CPU against memory/activations.py PPO_SLICE_COPIES (benchmarks/
calibrate_trl_ppo_loss.py, one of its cases): the whole sequence's logits three times (kept, the slice's zero-filled
gradient, CopySlices' clone after the in-place temperature division) and the response's twice. A few seconds."""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("trl")
pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.oracle]

calibrate = load_script("benchmarks/calibrate_trl_ppo_loss.py", "zeroadvisor_calibrate_trl_ppo_loss")


@pytest.mark.parametrize("whole", [False, True])
def test_the_ppo_step_is_counted_within_two_percent(whole):
    case = next(c for c in calibrate.CASES if c["response"] == c["query"])  # the response half the sequence
    release = next(r for w, r in calibrate.SCORINGS.values() if w == whole)
    peak = calibrate.measure(**case, whole_log_softmax=whole)["peak"]
    one = case["rows"] * (case["query"] + case["response"]) * calibrate.VOCAB * 2
    # 3 copies of the whole logits and 2 (selective) or 3 (log_softmax + gather) of the response's half
    assert abs(peak / one - (4.0 if not whole else 4.5)) < 0.05, peak / one
    assert 0.98 <= calibrate.predict(**case, release=release) / peak <= 1.01

"""Oracle: TRL's own GKDTrainer.compute_loss (the oracle extra's TRL: the student with its graph, the teacher under
no_grad, generalized_jsd_loss) and its backward on CPU against memory/method.py gkd_copies (benchmarks/
calibrate_gkd_loss.py, one of its cases): 2 copies of the whole logits and the JSD's 15 at beta 0.5, 7 at beta 0.
A few seconds."""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("trl")
pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.oracle]

calibrate = load_script("benchmarks/calibrate_gkd_loss.py", "zeroadvisor_calibrate_gkd_loss")


@pytest.mark.parametrize(("beta", "copies"), [(0.5, 17), (0.0, 9)])
def test_the_gkd_loss_is_counted_within_one_percent(beta, copies):
    import trl
    from packaging.version import Version

    if Version(trl.__version__) < Version("1.7.0"):
        pytest.fail(f"the oracle extra pins a TRL that scores every position (1.7+), got {trl.__version__}")
    case = calibrate.CASES[1]
    peak = calibrate.measure(case["rows"], case["tokens"], beta)["peak"]
    one = case["rows"] * case["tokens"] * calibrate.VOCAB * 2
    assert abs(peak / one - copies) < 0.05, peak / one
    assert calibrate.predict(trl.__version__, beta) == copies

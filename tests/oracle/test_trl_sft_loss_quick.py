"""Oracle: TRL's own chunked cross-entropy (trl/trainer/sft_trainer.py _patch_chunked_ce_lm_head, the oracle
extra's TRL 1.9.0) on CPU against memory/trl_sft_loss.py through activation_bytes, and the full logits beside it
(benchmarks/calibrate_trl_sft_loss.py, two of its bf16 cases: a narrow model, where one chunk's logits decide the
peak, and a wide one, where the head weight's fp32 copy and gradients do). A few seconds each."""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("trl")
pytest.importorskip("torch")
pytestmark = [pytest.mark.slow, pytest.mark.oracle]

calibrate = load_script("benchmarks/calibrate_trl_sft_loss.py", "zeroadvisor_calibrate_trl_sft_loss")
# the first bf16 case of each width
BF16 = [next(c for c in calibrate.CASES if c["precision"] == "bf16" and c["hidden"] == h) for h in (64, 1024)]


@pytest.mark.parametrize("case", BF16, ids=lambda c: f"h{c['hidden']}-v{c['vocab']}-t{c['tokens']}")
def test_chunked_loss_within_five_percent_and_far_below_the_full_logits(case):
    row = calibrate.row(case)
    assert 0.95 <= row["chunked_ratio"] <= 1.05, row
    assert 0.97 <= row["full_ratio"] <= 1.03, row
    assert row["chunked_measured"] < row["full_measured"], row  # what the change is about

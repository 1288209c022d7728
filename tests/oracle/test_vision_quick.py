"""Oracle: memory/vision.py against what a real Qwen2.5-VL vision tower saves for backward (CPU, transformers)."""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.oracle
def test_vision_tower_activations_match_saved_tensors(tmp_path):
    cal = load_script("benchmarks/calibrate_vision.py", "zeroadvisor_calibrate_vision")
    assert cal.main(["--quick", "--out", str(tmp_path / "vision")]) == 0
    rows = json.loads((tmp_path / "vision.json").read_text())
    assert [r["name"] for r in rows] == list(cal.QUICK)
    for row in rows:
        assert abs(row["gap"]) <= 0.02, row
        assert row["measured"]["merger"] > 0 and row["last_block"] == "block 3", row

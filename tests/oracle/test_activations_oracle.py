"""Oracle: memory/activations.py against what real transformers saves for backward (CPU).

benchmarks/calibrate_activations.py runs one training forward of small BERT (eager), T5 and BART (eager,
encoder-decoders with a shorter target) and Llama (SDPA) configs under saved_tensors_hooks and compares the
bytes autograd keeps, layer by layer, with the estimate for the same config.json. Layers and the total
must agree within 1 %; what is outside the layers within 5 % (rotary cos/sin, position-id buffers and
the loss scalar are not modelled; benchmarks/activations.md).
"""

from __future__ import annotations

import pytest

from conftest import load_script

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.oracle
@pytest.mark.slow  # a calibration run (benchmarks/calibrate_activations.py --quick)
def test_activations_match_saved_tensors(tmp_path):
    cal = load_script("benchmarks/calibrate_activations.py", "zeroadvisor_calibrate_activations")
    assert cal.main(["--quick", "--out", str(tmp_path / "act")]) == 0
    import json

    results = json.loads((tmp_path / "act.json").read_text())
    assert [r["name"] for r in results] == list(cal.QUICK)
    for res in results:
        for row in res["rows"]:
            bound = 0.05 if row["part"].startswith("outside") else 0.01
            assert abs(row["gap"]) <= bound, (res["name"], row)
    # the encoder-decoder case has both stacks, over different lengths
    for family in ("t5", "bart"):  # the encoder-decoder cases have both stacks, over different lengths
        seq2seq = next(r for r in results if r["name"].startswith(family))
        parts = {row["part"].split(" (")[0] for row in seq2seq["rows"]}
        assert {"encoder layer", "decoder layer"} <= parts, family

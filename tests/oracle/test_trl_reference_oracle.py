"""Oracle: the reference model as TRL's own ``prepare_deepspeed`` builds it, measured on real DeepSpeed on CPU
(benchmarks/calibrate_trl_reference.py: a tiny bf16 Llama, one rank, the policy at ZeRO-2 and ZeRO-3, with and
without an ``optimizer`` block), against memory/method.py's "reference model" row for the installed TRL release.
About 20 s (one process, four engines).

Tolerance: 1% of the measured bytes. The estimate counts the engine's parameters and what DeepSpeed builds for a
copied optimizer block; the measurement also sees the module's buffers (the rotary inv_freq, 1e-5 B/param here)."""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytestmark = [pytest.mark.oracle, pytest.mark.slow]
TOLERANCE = 0.01


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    pytest.importorskip("trl")
    script = load_script("benchmarks/calibrate_trl_reference.py", "zeroadvisor_calibrate_trl_reference")
    prefix = tmp_path_factory.mktemp("trl_reference") / "trl_reference"
    script.main(["--out", str(prefix)])
    return json.loads(prefix.with_suffix(".json").read_text())


def _case(measured, stage: int, optimizer: bool) -> dict:
    return next(c for c in measured["cases"] if c["stage"] == stage and c["optimizer"] == optimizer)


def test_every_reference_engine_holds_what_the_estimate_counts(measured):
    assert len(measured["cases"]) == 4
    for case in measured["cases"]:
        assert case["estimate_bytes"] == pytest.approx(case["held_bytes"], rel=TOLERANCE), case


def test_without_an_optimizer_block_the_reference_is_its_bf16_parameters(measured):
    for stage in (2, 3):  # stage 2 becomes stage 0 (a whole copy); stage 3 is kept (one rank: the whole model)
        case = _case(measured, stage, False)
        assert case["measured_per_param"] == pytest.approx(2.0, rel=TOLERANCE)
        assert case["engine_optimizer"] in ("BF16_Optimizer", "DeepSpeedZeRoOffload")


def test_the_optimizer_block_follows_the_trl_release(measured):
    from packaging.version import Version

    stage0, stage3 = _case(measured, 2, True), _case(measured, 3, True)
    if Version(measured["trl"]) < Version("1.9.1"):  # the block is copied: DeepSpeed builds an optimizer
        assert stage0["measured_per_param"] == pytest.approx(14.0, rel=TOLERANCE)  # bf16 + fp32 master + Adam
        assert stage3["measured_per_param"] > 8.0  # 2 + 4 + 2 partitions, and the IPG bucket
        # TRL's dotted "zero_optimization.reduce_bucket_size" (hidden² = 65,536) is not read: the config's applies
        assert stage3["ipg_elements"] == 1_000_000
    else:  # dropped since TRL 1.9.1
        assert stage0["measured_per_param"] == pytest.approx(2.0, rel=TOLERANCE)
        assert stage3["measured_per_param"] == pytest.approx(2.0, rel=TOLERANCE)

"""Oracle: ZeRO-3's gradient buffers with frozen parameters, measured on real DeepSpeed steps on CPU
(benchmarks/calibrate_frozen.py: a frozen embedding and head, and LoRA) against the estimate's terms
(memory/buffers.py gathered_terms, reduce_scatter_term; memory/states.py). About a minute (two 1-rank runs)."""

from __future__ import annotations

import json

import pytest

from conftest import load_script

pytest.importorskip("deepspeed")
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytestmark = [pytest.mark.oracle, pytest.mark.slow]


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    pytest.importorskip("peft")
    script = load_script("benchmarks/calibrate_frozen.py", "zeroadvisor_calibrate_frozen")
    prefix = tmp_path_factory.mktemp("frozen") / "frozen"
    script.main(["--out", str(prefix)])
    return {c["name"]: c for c in json.loads(prefix.with_suffix(".json").read_text())["cases"]}


def test_largest_gradient_is_the_largest_trainable_parameter(cases):
    for case in cases.values():
        term = case["terms_elements"]["gathered_grad"]
        assert term["estimate"] == term["measured"] == case["measured"]["largest_trainable"]
        assert term["measured"] < case["measured"]["largest_layer"]  # the frozen embedding made none


def test_reduce_scatter_copy_bounded_by_the_trainable_gradients(cases):
    for case in cases.values():
        term = case["terms_elements"]["reduce_scatter_copy"]
        assert term["measured"] <= term["estimate"] <= case["measured"]["trainable"]
    lora = cases["lora"]["terms_elements"]["reduce_scatter_copy"]
    assert lora["estimate"] == lora["measured"]  # every adapter gradient fits one bucket


def test_ipg_buffer_and_gradient_partition_exact(cases):
    for case in cases.values():
        for key in ("ipg_bucket", "grad_partition"):
            term = case["terms_elements"][key]
            assert term["estimate"] == term["measured"], key

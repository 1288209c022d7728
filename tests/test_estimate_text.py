from __future__ import annotations

import re

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.report.estimate_text import render

def first_block(text: str, row_label: str) -> dict[str, str]:
    """Cells of ``row_label`` in the first table block, keyed by column header (columns are right-aligned)."""
    lines = text.splitlines()
    header = next(line for line in lines if "Z0" in line)
    row = next(line for line in lines if line.startswith(row_label))
    ends = {m.end(): m.group() for m in re.finditer(r"\*?Z\d(?: \+\S+)*", header)}
    return {ends[m.end()]: m.group() for m in re.finditer(r"\S+", row) if m.end() in ends}


SPEC = ModelSpec(parameters=7_500_000_000, largest_layer_parameters=200_000_000)


def test_render_seed_paper_table():
    text = render(estimate(None, SPEC, cluster=Cluster(gpus=8), accounting="paper"))
    assert "Unit: GB (10^9 bytes)" in text and "Accounting: paper" in text
    cells = first_block(text, "= model states")
    # ZeRO paper, Ψ = 7.5B on 8 GPUs: 120, 41.25, 28.125 (shown exactly, not rounded to 28.12), 15
    assert (cells["Z0"], cells["Z1"], cells["Z2"], cells["Z3"]) == ("120.00", "41.25", "28.125", "15.00")
    assert "Fit: not judged (no GPU memory given)." in text
    assert "configured option" not in text  # no config: no column is marked
    assert "Assumptions:" in text and "paper accounting" in text


def test_render_marks_configured_and_fit():
    config = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    result = estimate(config, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9, cpu_memory=512 * 2**30))
    text = render(result)
    header = [line for line in text.splitlines() if "Z0" in line][0]
    assert "*Z2 +opt:cpu" in header and header.count("*") == 1
    fits = [line for line in text.splitlines() if line.startswith("fits")]
    assert "✓" in fits[0] and "✗" in fits[0]  # Z0 does not fit 40 GB, Z2 +opt:cpu does
    assert "✓ fits, ~ tight (inside the headroom), ✗ does not fit" in " ".join(text.split())
    assert "GPU 40.00 GB" in text and "host RAM 549.76 GB/node" in text
    assert text.startswith("Verdict (Z2 +opt:cpu): fits; peak ")  # the verdict first
    # the source notes and the terms only under --explain
    assert "DeepSpeed vs the ZeRO paper" not in text and "stage_1_and_2.py" not in text
    explained = render(result, explain=True)
    assert "DeepSpeed vs the ZeRO paper" in explained and "stage_1_and_2.py" in explained
    terms = explained.split("Terms of the configured option", 1)[1]
    for phase in ("load:", "train:", "save:"):
        assert phase in terms
    assert "[allowance;" in terms and "[exact;" in terms
    assert "TOTAL per GPU" in text and "host RAM / node" in text and "NVMe / node" in text
    for line in text.splitlines():
        assert len(line) <= 120, line


def test_render_gib_and_ascii():
    result = estimate(None, SPEC, cluster=Cluster(gpus=8, gpu_memory=80 * 2**30))
    text = render(result, unit="GiB", ascii_only=True)
    assert "Unit: GiB (2^30 bytes)" in text
    assert "✓" not in text and "✗" not in text and ("yes" in text or "NO" in text)
    # the deepspeed ZeRO-2 model states, 31875000000 B = 29.69 GiB (DeepSpeed's estimator prints 29.69GB)
    row = next(line for line in text.splitlines() if line.startswith("= model states"))
    assert "29.69" in row


def test_render_lists_skipped_options():
    config = {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 1}}
    text = render(estimate(config, SPEC, cluster=Cluster(gpus=8)))
    assert "Not run by DeepSpeed with this config:" in text and "NotImplementedError" in text

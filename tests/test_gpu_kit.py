"""The GPU calibration kit's dry run (benchmarks/gpu/run.sh --dry-run): the whole harness through real DeepSpeed
on the CPU (DS_ACCELERATOR=cpu, a tiny Llama), then compare.py on the JSON it wrote.

Every row of the matrix must run or say why not (QLoRA: no bitsandbytes, or no CUDA); the CUDA readings are
null with their reason; the model-state rows of the plain ZeRO rows must match the estimate (compare.py asked it
for the same config and model). About 40 s on 2 cores once DeepSpeed's shm comm op is built (the first DeepSpeed
run on CPU builds it, about a minute).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, load_script

RUN_SH = REPO / "benchmarks" / "gpu" / "run.sh"
COMPARE = REPO / "benchmarks" / "gpu" / "compare.py"


def test_compare_refuses_what_is_not_a_calibration(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    done = subprocess.run([sys.executable, str(COMPARE), str(bad)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 2
    assert "is not a calibration JSON" in done.stderr and "Traceback" not in done.stderr
    missing = subprocess.run([sys.executable, str(COMPARE), str(tmp_path / "none.json")], capture_output=True,
                             text=True, timeout=60, check=False)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


@pytest.mark.slow
@pytest.mark.oracle
def test_dry_run_measures_every_row_and_compares(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("deepspeed")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    matrix = load_script("benchmarks/gpu/matrix.py", "zeroadvisor_gpu_matrix")
    out = tmp_path / "kit"
    env = dict(os.environ, PYTHON=sys.executable)
    done = subprocess.run(["bash", str(RUN_SH), "--dry-run", "--out", str(out), "--timeout", "240"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=280, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    data = json.loads((out / "calibration.json").read_text())
    assert data["format"] == "zeroadvisor-gpu-calibration/1" and data["dry_run"] is True
    by_name = {r["case"]["name"]: r for r in data["rows"]}
    assert list(by_name) == [c["name"] for c in matrix.MATRIX]
    for case in matrix.MATRIX:
        r = by_name[case["name"]]
        assert "error" not in r, (case["name"], r.get("error"), r.get("traceback"))
        if case["peft"] == "qlora":  # no CUDA here: recorded as skipped, with the reason
            assert r["skipped"] and ("bitsandbytes" in r["skipped"] or "CUDA" in r["skipped"])
            continue
        assert r["skipped"] is None and r["device"] == "cpu"
        for phase in ("load", "step", "save"):
            m = r[phase]
            if phase == "save" and not case["save"]:
                assert m is None
                continue
            assert m["max_memory_allocated"] is None and m["max_memory_reserved"] is None
            assert "no CUDA device" in m["gpu_reason"] and m["seconds"] > 0
        assert len(r["step"]["step_times_s"]) == case["steps"] and r["step"]["step_time_s"] > 0
        assert r["model"]["trainable_parameters"] < r["model"]["parameters"] if case["peft"] != "none" else \
            r["model"]["trainable_parameters"] == r["model"]["parameters"]
        assert r["optimizer"]["base"] == "AdamW"  # the client torch AdamW, also with optimizer offload
        assert r["rows"]["cpu"]["parameters"] > 0 and r["saved_for_backward"]["cpu"] > 0
        if case["save"]:
            assert r["save"]["checkpoint_bytes"] > 0

    report = json.loads((out / "compare.json").read_text())
    assert report["dry_run"] is True and report["note"]
    compared = {row["name"]: row for row in report["rows"]}
    assert set(compared) == {c["name"] for c in matrix.MATRIX if c["peft"] != "qlora"}
    assert [n["name"] for n in report["not_compared"]] == ["z2 qlora"]
    for row in compared.values():
        terms = {(t["phase"], t["term"], t["device"]): t for t in row["terms"]}
        peak = terms[("train", "GPU peak", "gpu")]
        assert peak["estimate"] > 0 and peak["measured"] is None and "no CUDA device" in peak["reason"]
        assert terms[("train", "step time (s)", "gpu")]["measured"] > 0
    # the plain ZeRO rows: the estimate of the same config and model agrees with DeepSpeed's live tensors
    # (benchmarks/calibrate.py bounds these rows at 2 % on CPU)
    for name in ("z1", "z2", "z3", "z2 +opt:cpu"):
        terms = {(t["phase"], t["term"]): t for t in compared[name]["terms"]}
        for row in ("parameters", "gradients", "optimizer_states"):
            ratio = terms[("train", row)]["ratio"]
            assert ratio is not None and abs(ratio - 1) <= 0.02, (name, row, ratio)
    assert "## Overall" in (out / "compare.md").read_text()

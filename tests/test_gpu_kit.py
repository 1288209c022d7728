"""The GPU calibration kit's dry run (benchmarks/gpu/run.sh --dry-run): the whole harness through real DeepSpeed
on the CPU (DS_ACCELERATOR=cpu, a tiny Llama), then compare.py on the JSON it wrote.

Every row of the matrix must run or say why not (QLoRA: no bitsandbytes, or no CUDA); the CUDA readings are
null with their reason; the model-state rows of the plain ZeRO rows must match the estimate (compare.py asked it
for the same config and model). About a minute on 2 cores once DeepSpeed's shm comm op is built (the first
DeepSpeed run on CPU builds it, about a minute); two worker processes (run.py alloc_groups).

The issue-34 tests below need no DeepSpeed run: the rows' shape, the worker's allocator environment, and
compare.py on the committed format example (example_calibration.json: invented numbers, labelled so).
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


def _check_issue34_readings(case, r):
    assert r["allocator"] == {"env": case["alloc_conf"], "cuda_initialized": False}
    if case["stage"] == 3:  # the gradient side the issue-34 rows decide, measured through DeepSpeed's hooks
        side = r["gradient_side"]
        assert side["ipg_bucket_bytes"] > 0 and side["full_grads_seen"] > 0
        assert side["largest_full_grad_bytes"] == r["model"]["largest_trainable_parameter"] * \
            (4 if case["precision"] == "autocast" else 2)
    else:
        assert r["gradient_side"] is None


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.timeout(600)  # every row of the kit on the CPU, two worker processes: about 2 min on a busy 2-core box
def test_dry_run_measures_every_row_and_compares(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("deepspeed")
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    matrix = load_script("benchmarks/gpu/matrix.py", "zeroadvisor_gpu_matrix")
    out = tmp_path / "kit"
    env = dict(os.environ, PYTHON=sys.executable)
    # two worker processes: the rows without PYTORCH_CUDA_ALLOC_CONF, then the expandable-segments row
    done = subprocess.run(["bash", str(RUN_SH), "--dry-run", "--out", str(out), "--timeout", "240"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=560, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    data = json.loads((out / "calibration.json").read_text())
    assert data["format"] == "zeroadvisor-gpu-calibration/1" and data["dry_run"] is True
    by_name = {r["case"]["name"]: r for r in data["rows"]}
    assert list(by_name) == [c["name"] for c in matrix.MATRIX]
    run = load_script("benchmarks/gpu/run.py", "zeroadvisor_gpu_run")
    assert len(run.alloc_groups(matrix.MATRIX)) == 2
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
        frozen = case["peft"] != "none" or case["freeze_embeddings"]
        assert r["model"]["trainable_parameters"] < r["model"]["parameters"] if frozen else \
            r["model"]["trainable_parameters"] == r["model"]["parameters"]
        _check_issue34_readings(case, r)
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


# ---- issue 34: the rows that decide the gradient-side, allocator and autocast terms (no GPU needed) ----

EXAMPLE = REPO / "benchmarks" / "gpu" / "example_calibration.json"


def _kit():
    return (load_script("benchmarks/gpu/matrix.py", "zeroadvisor_gpu_matrix"),
            load_script("benchmarks/gpu/run.py", "zeroadvisor_gpu_run"))


def test_issue34_rows_are_well_formed_and_fit_the_budget():
    matrix, run = _kit()
    by_name = {c["name"]: c for c in matrix.MATRIX}
    assert len(by_name) == len(matrix.MATRIX)  # names are unique: --only and the reports key on them
    small = [c for c in matrix.MATRIX if c["model_size"] == "small"]
    for case in small:
        assert case["decides"] and set(case["decides"]) <= set(matrix.DECIDABLE), case["name"]
        assert case["stage"] == 3 and case["expected_s"] == matrix.SMALL_EXPECTED_S
        assert matrix.for_run(case, dry=False)["model"] is matrix.SMALL_MODEL
        assert matrix.for_run(case, dry=True)["model"] is matrix.DRY_MODEL
    decided = {name for c in small for name in c["decides"]}
    assert decided == set(matrix.DECIDABLE)  # every decidable term has a row
    # (a) ZeRO-3 with frozen parameters: LoRA r 8 and 16, and a frozen embedding without PEFT
    assert sorted(c["lora_r"] for c in small if c["peft"] == "lora") == [8, 16]
    frozen = [c for c in small if c["freeze_embeddings"]]
    assert len(frozen) == 1 and frozen[0]["peft"] == "none"
    for case in small:
        if case["peft"] == "lora" or case["freeze_embeddings"]:
            assert set(matrix.GRADIENT_SIDE) <= set(case["decides"])
    # (b) the allocator off and on, otherwise the same run
    on = by_name["small z3 alloc:expandable"]
    off = by_name["small z3 alloc:default"]
    assert on["alloc_conf"] == "expandable_segments:True" and off["alloc_conf"] is None
    assert {k: v for k, v in on.items() if k not in ("name", "alloc_conf", "decides")} == \
        {k: v for k, v in off.items() if k not in ("name", "alloc_conf", "decides")}
    # (c) autocast: an fp32 model under torch_autocast bf16 against the same run in bf16
    auto = by_name["small z3 autocast"]
    config = matrix.ds_config(auto)
    assert config["torch_autocast"] == {"enabled": True, "dtype": "bfloat16"} and "bf16" not in config
    assert matrix.ds_config(off)["bf16"] == {"enabled": True} and "torch_autocast" not in matrix.ds_config(off)
    same = ("name", "precision", "decides")
    assert auto["precision"] == "autocast" and off["precision"] == "bf16"
    assert {k: v for k, v in auto.items() if k not in same} == {k: v for k, v in off.items() if k not in same}
    # the whole kit stays one run inside run.py's default budget (README.md "Time budget")
    planned = sum(c["expected_s"] for c in matrix.MATRIX)
    assert planned <= run.BUDGET_S, planned


def test_worker_env_sets_the_allocator_before_torch_starts(tmp_path):
    pytest.importorskip("torch")
    matrix, run = _kit()
    by_name = {c["name"]: c for c in matrix.MATRIX}
    inherited = {"PATH": os.environ.get("PATH", ""), "PYTORCH_CUDA_ALLOC_CONF": "garbage_collection_threshold:0.6",
                 "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    on = run.worker_env([by_name["small z3 alloc:expandable"]], dry=False, base=inherited)
    off = run.worker_env([by_name["small z3 alloc:default"]], dry=False, base=inherited)
    assert on["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert "PYTORCH_CUDA_ALLOC_CONF" not in off  # "off" is torch's default, not whatever the shell had
    with pytest.raises(ValueError, match="PYTORCH_CUDA_ALLOC_CONF"):
        run.worker_env([by_name["small z3 alloc:expandable"], by_name["small z3 alloc:default"]], dry=True)
    assert [len(g) for g in run.alloc_groups([by_name[n] for n in ("small z3 alloc:default",
            "small z3 alloc:expandable", "small z3 autocast", "small z3 lora r8")])] == [1, 1, 2]
    # the worker process started with that environment has the variable when torch is imported, and CUDA has
    # not been initialised yet, so the caching allocator will read it
    worker = REPO / "benchmarks" / "gpu" / "worker.py"
    for env, want in ((on, "expandable_segments:True"), (off, None)):
        done = subprocess.run([sys.executable, str(worker), "--allocator"], env=env, capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        state = json.loads(done.stdout.strip().splitlines()[-1])
        assert state == {"env": want, "cuda_initialized": False}


def test_compare_reads_the_format_example(tmp_path):
    """compare.py on the committed format example (invented numbers, labelled so): every decided term of every
    issue-34 row is printed as estimate against measured, and the label travels into both outputs."""
    matrix, _ = _kit()
    data = json.loads(EXAMPLE.read_text())
    assert "NOT A MEASUREMENT" in data["example"]
    assert {r["case"]["name"] for r in data["rows"]} == {c["name"] for c in matrix.MATRIX if c["model_size"] == "small"}
    out = tmp_path / "cmp"
    done = subprocess.run([sys.executable, str(COMPARE), str(EXAMPLE), "--out", str(out)], capture_output=True,
                          text=True, timeout=240, check=False, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.with_suffix(".json").read_text())
    assert report["example"] == data["example"]
    md = out.with_suffix(".md").read_text()
    assert "NOT A MEASUREMENT" in md and "## Decided terms (issue 34)" in md
    rows = {row["name"]: row for row in report["rows"]}
    for r in data["rows"]:
        row = rows[r["case"]["name"]]
        got = [(t["term"][len("decides: "):], t) for t in row["terms"] if t["term"].startswith("decides: ")]
        assert {name for name, _ in got} == set(r["case"]["decides"])
        for name, t in got:
            assert t["estimate"] is not None, (row["name"], name)
            if t["phase"] == "save" and r["save"] is None:  # the row saves nothing: null, with the reason
                assert t["measured"] is None and "save=False" in t["reason"]
                continue
            assert t["measured"] > 0 and t["ratio"] == pytest.approx(t["estimate"] / t["measured"])
            assert f"| {row['name']} | {t['phase']} | {name} |" in md
        terms = {(t["phase"], t["term"]): t for t in row["terms"]}
        if "gathered_grad" in r["case"]["decides"]:
            assert terms[("train", "decides: gathered_grad")]["measured"] == \
                r["gradient_side"]["largest_full_grad_bytes"]
            assert terms[("train", "decides: ipg_bucket")]["measured"] == r["gradient_side"]["ipg_bucket_bytes"]
        if "fragmentation" in r["case"]["decides"]:
            frag = terms[("train", "decides: fragmentation")]
            assert frag["measured"] == r["step"]["max_memory_reserved"] - r["step"]["max_memory_allocated"]
    # the estimate read each row's allocator: expandable segments shrink the fragmentation allowance
    frag = {n: {(t["phase"], t["term"]): t for t in rows[n]["terms"]}[("train", "decides: fragmentation")]["estimate"]
            for n in ("small z3 alloc:default", "small z3 alloc:expandable")}
    assert frag["small z3 alloc:expandable"] < frag["small z3 alloc:default"]
    assert rows["small z3 frozen-embed"]["notes"] and not rows["small z3 lora r8"]["notes"]
    # LoRA: the gradient-side terms are sized by the adapters, far below the frozen-embedding row's
    lora = {(t["phase"], t["term"]): t for t in rows["small z3 lora r8"]["terms"]}
    full = {(t["phase"], t["term"]): t for t in rows["small z3 frozen-embed"]["terms"]}
    assert lora[("train", "decides: gathered_grad")]["estimate"] < full[("train", "decides: gathered_grad")]["estimate"]

"""One margin, three verdicts (memory/verdict.py), shared by estimate and check; no plain "fits"
while activations are not counted."""

from __future__ import annotations

import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.memory.verdict import DOES_NOT_FIT, FITS, TIGHT, PhasePeak, judge, judge_one

GB = 10**9


def test_judge_one_edges():
    # 100 GB card, 10% headroom: fits up to 90 GB, tight up to 100 GB, then does not fit
    assert judge_one(90 * GB, 100 * GB, 0.10) == FITS
    assert judge_one(90 * GB + 1, 100 * GB, 0.10) == TIGHT
    assert judge_one(100 * GB, 100 * GB, 0.10) == TIGHT
    assert judge_one(100 * GB + 1, 100 * GB, 0.10) == DOES_NOT_FIT
    assert judge_one(100 * GB, 100 * GB, 0.0) == FITS


def test_judge_takes_the_worst_phase_and_names_the_binding_one():
    peaks = [PhasePeak("load", 50 * GB, 950 * GB, 0), PhasePeak("train", 70 * GB, 100 * GB, 0),
             PhasePeak("save", 70 * GB, 120 * GB, 0)]
    # the host (1 TB) holds 950 GB only inside its 10% headroom at load: tight, bound by the host at load
    j = judge(peaks, {"gpu": 80 * GB, "host": 1000 * GB, "nvme": None}, 0.10)
    assert (j.verdict, j.phase, j.resource, j.peak) == (TIGHT, "load", "host", 950 * GB)
    j = judge(peaks, {"gpu": 80 * GB, "host": 800 * GB, "nvme": None}, 0.10)
    assert (j.verdict, j.phase, j.resource) == (DOES_NOT_FIT, "load", "host")
    j = judge(peaks, {"gpu": None, "host": None, "nvme": None}, 0.10)
    assert j.verdict is None and j.phase == "train"


def _verdicts(data: dict) -> dict[str, tuple]:
    return {st["label"]: (st["verdict"], st["fits"], st["peak_gpu"], st["binding_phase"]) for st in data["stages"]}


@pytest.mark.parametrize("gpu,headroom", [("A100-SXM4-80GB", "10%"), ("A10G", "10%"), ("A100-SXM4-40GB", "30%")])
def test_estimate_and_check_give_the_same_verdict(cli, tmp_path, gpu, headroom):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true}, '
                      '"zero_optimization": {"stage": 2}}')
    common = ["--model", "sample_configs/models/llama-2-7b.yaml", "--gpus", "8", "--gpu", gpu,
              "--cpu-memory", "512GB", "--headroom", headroom, "--format", "json"]
    estimate = cli("estimate", str(config), *common)
    check = cli("check", str(config), *common)
    assert estimate.returncode == 0 and check.returncode in (0, 1), (estimate.stderr, check.stderr)
    from_estimate = _verdicts(json.loads(estimate.stdout))
    from_check = _verdicts(json.loads(check.stdout)["estimate"])
    assert from_estimate == from_check
    configured = next(st for st in json.loads(check.stdout)["estimate"]["stages"] if st["configured"])
    names = {f["name"] for f in json.loads(check.stdout)["findings"]}
    # the check's findings follow the shared verdict
    assert ("does-not-fit" in names) == (configured["verdict"] == DOES_NOT_FIT
                                         and configured["binding_resource"] == "gpu")
    assert ("tight-fit" in names) == (configured["verdict"] == TIGHT)


PARAMS_ONLY = ["--params", "7B", "--gpus", "8", "--gpu", "A100-SXM4-80GB"]


@pytest.mark.parametrize("model", [PARAMS_ONLY, ["--model", "sample_configs/models/llama-2-7b/config.json",
                                                 "--gpus", "8", "--gpu", "A100-SXM4-80GB"]])
def test_no_plain_fits_while_activations_are_unknown(cli, tmp_path, model):
    """Without a sequence length (or an architecture) activations are not counted: no format says "fits" (the
    verdict is unknown) and verdict-unknown says which flag sets it; check exits 5."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                      '"zero_optimization": {"stage": 3}}')
    checked = cli("check", str(config), *model, "--format", "json")
    assert checked.returncode == 5, checked.stderr
    data = json.loads(checked.stdout)
    for st in data["estimate"]["stages"]:
        assert "activations" in st["uncounted"] and st["per_gpu"]["activations"] == 0
        assert st["verdict"] in ("unknown", "does-not-fit") and st["fits"] is not True
    configured = next(st for st in data["estimate"]["stages"] if st["configured"])
    assert (configured["verdict"], configured["fits"], configured["counted_verdict"]) == ("unknown", None, "fits")
    assert any(f["name"] == "verdict-unknown" and "--seq-len" in f["message"] for f in data["findings"])
    text = cli("check", str(config), *model).stdout
    verdict_line = next(line for line in text.splitlines() if line.startswith("Verdict ("))
    assert "unknown" in verdict_line and ": fits" not in verdict_line
    assert "activations not counted" in " ".join(text.split())
    markdown = cli("check", str(config), *model, "--format", "markdown").stdout
    heading = markdown.splitlines()[0]
    assert "unknown" in heading and "activations not counted" in heading
    sarif = json.loads(cli("check", str(config), *model, "--format", "sarif").stdout)
    assert "ZA811" in {r["ruleId"] for r in sarif["runs"][0]["results"]}
    estimate = cli("estimate", str(config), *model).stdout
    assert "activations not counted" in " ".join(estimate.split())


@pytest.mark.parametrize("given, says, not_said", [
    (["--seq-len", "4096"], "activations not counted: give --model (no layer count or hidden size)", "--seq-len"),
    ([], "activations not counted: give --seq-len and --model (no layer count or hidden size)", None),
])
def test_the_qualifier_names_what_is_missing_never_what_was_given(cli, tmp_path, given, says, not_said):
    # issue 32 (round 3): with --params and --seq-len the verdict said "give --seq-len" though it was given
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                      '"zero_optimization": {"stage": 3}}')
    checked = cli("check", str(config), *PARAMS_ONLY, *given)
    text = " ".join(checked.stdout.split())
    verdict = text[text.index("Verdict ("):text.index("ZA808")]
    assert says in verdict, text
    (finding,) = [f for f in json.loads(cli("check", str(config), *PARAMS_ONLY, *given, "--format", "json").stdout)[
        "findings"] if f["code"] == "ZA811"]
    assert "no layer count or hidden size: --model with an hf_config" in finding["message"]
    verbose = " ".join(cli("check", str(config), *PARAMS_ONLY, *given, "--verbose").stdout.split())
    assert "--model unknown" not in verbose  # the assumptions block: --model was not what is missing
    if not_said:
        assert not_said not in verdict and not_said not in finding["message"]
        assert "layer count and hidden size unknown (--model)" in verbose


def test_with_a_sequence_length_the_verdict_is_plain(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": true}, '
                      '"zero_optimization": {"stage": 3}}')
    data = json.loads(cli("check", str(config), "--model", "sample_configs/models/llama-2-7b.yaml", "--gpus", "8",
                          "--gpu", "A100-SXM4-80GB", "--format", "json").stdout)
    configured = next(st for st in data["estimate"]["stages"] if st["configured"])
    assert configured["uncounted"] == [] and configured["per_gpu"]["activations"] > 0
    assert configured["verdict"] == FITS
    assert set(configured["phases"]) == {"load", "train", "save"}
    assert configured["peak_gpu"] == max(p["gpu"] for p in configured["phases"].values())
    kinds = {t["kind"] for t in configured["terms"]}
    assert {"exact", "allowance"} <= kinds and {t["phase"] for t in configured["terms"]} == {"load", "train", "save"}

"""Every rule's documented examples are executed: the failing one fires, the passing one does not.

This makes "each rule has a failing and a passing test" hold by construction, and keeps the
docs (docs/rules.md is generated from the same examples) true.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from conftest import load_script
from zeroadvisor.advisor import registry
from zeroadvisor.advisor.check import check_document
from zeroadvisor.config.source import parse
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.rules.linter import lint_text

# the fixture tool builds CheckOptions the way the CLI does (tools/update_rule_fixtures.py check_options)
fixtures = load_script("tools/update_rule_fixtures.py", "update_rule_fixtures")

CASES = [(rule, i, ex) for rule in registry.ALL for i, ex in enumerate(rule.examples)]


def run_check_example(config: str, options: dict, folder: Path):
    """Advice examples carry a model description (an inline hf_config becomes a config.json)."""
    description = dict(options["model"])
    if isinstance(description.get("hf_config"), dict):
        (folder / "config.json").write_text(json.dumps(description["hf_config"]))
        description["hf_config"] = "config.json"
    (folder / "model.json").write_text(json.dumps(description))
    check_options = fixtures.check_options(options, folder / "model.json")
    return check_document(parse(config, "example.json"), check_options).findings


@pytest.mark.parametrize("rule,index,example", CASES, ids=[f"{r.code}-{r.name}-{i}" for r, i, _ in CASES])
def test_example(rule, index, example, tmp_path):
    if rule.needs_advice:
        findings = run_check_example(example.config, example.options, tmp_path)
    else:
        findings = lint_text(example.config, example.name, LintOptions(**example.lint_keywords()))
    fired = [f for f in findings if f.code == rule.code]
    if example.fails:
        assert fired, f"{rule.name} should fire on {example.config}; got {findings}"
        if not rule.severity_varies:  # a rule whose severity varies has it pinned per finding by its fixtures
            assert all(f.severity is rule.severity for f in fired)
    else:
        assert not fired, f"{rule.name} should not fire on {example.config}; got {fired}"


@pytest.mark.parametrize("rule", registry.ALL, ids=lambda r: r.code)
def test_rule_contract(rule):
    assert rule.code.startswith("ZA") and len(rule.code) == 5
    assert rule.name == rule.name.lower() and " " not in rule.name
    assert any(e.fails for e in rule.examples) and any(not e.fails for e in rule.examples)
    assert rule.summary and rule.explanation and rule.source


def test_docs_are_generated_from_the_registry():
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, str(root / "tools" / "gen_rules_doc.py"), "--check"],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    doc = (root / "docs" / "rules.md").read_text("utf-8")
    for rule in registry.ALL:
        assert f"## {rule.code} {rule.name}" in doc


def test_a_run_whose_vllm_never_starts_does_not_fit_at_any_stage(cli, tmp_path):
    """ZA813: the training memory fits, but vLLM's share of the card is below its floor, so vLLM never starts. The
    verdict binds on vLLM's share (JSON fits false: a CI gate never launches it), no stage change is recommended
    (each keeps the share), and the ways out price the share raised to the floor."""
    (tmp_path / "config.json").write_text(json.dumps(_LLAMA_7B))
    (tmp_path / "model.json").write_text(json.dumps({"hf_config": "config.json", "sequence_length": 4096,
                                                     "activation_checkpointing": "full"}))
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "auto"}, '
                                      '"zero_optimization": {"stage": 3}}')
    launch = ("swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --use_vllm true --vllm_mode colocate "
              "--max_completion_length 1024 --vllm_gpu_memory_utilization {share}")
    args = ("check", str(tmp_path / "ds.json"), "--model", str(tmp_path / "model.json"), "--gpus", "8", "--gpu",
            "A100-SXM4-80GB")
    low = cli(*args, "--launch", launch.format(share=0.1))
    assert low.returncode == 1, low.stderr  # an error finding fails the check
    head = " ".join(low.stdout.split("\n\n")[0].split())
    # 7B weights 2 x 6.74e9 B = 12.55 GiB and one 4096-token request's KV cache 2 x 32 x 4096 x 2 x 4096 B = 2 GiB,
    # against 0.1 x 80 GiB = 8 GiB
    assert head.startswith("Verdict (ZeRO-3): does not fit; vLLM needs at least 14.55 GiB when the trainer starts "
                           "it, more than vLLM's share of the card (8.00 GiB)"), head
    assert "stops before training" not in head  # the verdict says it: no "but" after a does-not-fit
    assert "ZA802" not in low.stdout and "ZA813" in head  # no lower stage recommended; the finding is pointed at
    for fmt in ("markdown", "sarif"):
        out = cli(*args, "--format", fmt, "--launch", launch.format(share=0.1)).stdout
        assert "vLLM needs at least 14.55 GiB" in out
    report = json.loads(cli(*args, "--format", "json", "--launch", launch.format(share=0.1)).stdout)
    (stop,) = [f for f in report["findings"] if f["code"] == "ZA813"]
    assert stop["stops_before_training"] == "vLLM will not start at its share of the card"
    assert not any(f["code"] == "ZA802" for f in report["findings"])
    for stage in report["estimate"]["stages"]:  # the share is the same at every stage: none fits
        assert (stage["fits"], stage["binding_resource"]) == (False, "vllm_share"), stage["label"]
        assert stage["vllm_share"] == {"floor": 2 * 6_738_415_616 + 2 * 32 * 4096 * 2 * 4096,
                                       "share": 8 * 2**30}
    (first, *_) = report["nothing_fits"]["ways"]
    assert first["way"] == "vllm-floor" and first["settings"] == ["ms-swift: --vllm_gpu_memory_utilization 0.19"]
    high = cli(*args, "--launch", launch.format(share=0.4))
    assert "ZA813" not in high.stdout and "vLLM needs at least" not in high.stdout
    # the paper's accounting counts model states alone, not vLLM: its verdict may say "fits", and the sentence then
    # adds that the run stops before training (Finding.stops), never a plain fit
    paper = cli(*args, "--accounting", "paper", "--launch", launch.format(share=0.1))
    paper_head = " ".join(paper.stdout.split("\n\n")[0].split())
    assert paper_head.startswith("Verdict (ZeRO-3): fits;"), paper_head
    assert "but it stops before training: vLLM will not start at its share of the card (ZA813)" in paper_head


_LLAMA_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "vocab_size": 32000}

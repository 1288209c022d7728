"""SARIF output against the OASIS SARIF 2.1.0 schema (tests/data, draft-07), on the real corpus too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from sarif_validate import validate_sarif
from zeroadvisor.advisor import registry
from zeroadvisor.report import Report, render, sarif
from zeroadvisor.rules.linter import lint_file


def test_every_rule_entry_is_schema_valid_without_invented_urls():
    doc = validate_sarif(sarif.render([], registry.ALL))
    driver = doc["runs"][0]["tool"]["driver"]
    assert "informationalUri" not in driver and "informationUri" not in driver  # no project URL exists
    assert [r["id"] for r in driver["rules"]] == [r.code for r in registry.ALL]
    for entry in driver["rules"]:
        assert "helpUri" not in entry and entry["help"]["text"]
    assert doc["runs"][0]["columnKind"] == "unicodeCodePoints"


@pytest.mark.parametrize("name, text, key", [
    ("wide.json", '{"🙂é": 1, "zero_optimisation": {"stage": 3}}\n', '"zero_optimisation"'),
    ("wide.yaml", 'train_batch_size: 8\nzero_optimization: {"🙂é": 1, stagee: 1}\n', "stagee"),
])
def test_columns_are_unicode_code_points(tmp_path, name, text, key):
    # 🙂 is one code point, two UTF-16 code units and four UTF-8 bytes: only code points give this column
    (tmp_path / name).write_text(text, "utf-8")
    findings = [f for f in lint_file(tmp_path / name).findings if f.pointer.endswith(key.strip('"'))]
    assert len(findings) == 1, "one finding at the key after the wide characters"
    line = text.splitlines()[findings[0].line - 1]
    assert findings[0].column == line.index(key) + 1
    doc = validate_sarif(render("sarif", Report(findings=findings, rules=registry.LINT)))
    region = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": findings[0].line, "startColumn": line.index(key) + 1}


@pytest.mark.corpus
def test_sarif_over_the_whole_corpus_is_valid(corpus: Path):
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and p.name != "MANIFEST.tsv")
    findings = [f for path in files for f in lint_file(path).findings]
    assert len(files) > 250 and findings
    doc = validate_sarif(render("sarif", Report(findings=findings, files=len(files), rules=registry.LINT)))
    assert len(doc["runs"][0]["results"]) == len(findings)


def test_rule_help_points_to_the_rule_docs_in_this_repository():
    import re

    from conftest import REPO

    doc = validate_sarif(sarif.render([], registry.ALL))
    headings = (REPO / "docs" / "rules.md").read_text("utf-8")
    # GitHub's anchor of a heading: lower case, spaces to "-", punctuation other than "-" and "_" dropped
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^## (.+)$", headings, re.M)}
    for entry in doc["runs"][0]["tool"]["driver"]["rules"]:
        target = re.search(r"\]\((docs/rules\.md)#([^)]+)\)", entry["help"]["markdown"])
        assert target and (REPO / target.group(1)).is_file() and target.group(2) in anchors, entry["id"]
        assert f"docs/rules.md#{target.group(2)}" in entry["help"]["text"]
    without_schema = {k: v for k, v in doc.items() if k != "$schema"}
    assert not re.search(r"https?://", json.dumps(without_schema))  # no invented URL anywhere


def test_a_checks_sarif_and_github_output_carry_its_verdict_and_gpu(cli):
    """check --format sarif|github on one config: the run's property bag holds the verdict sentence and the
    cluster with the resolved card (schema-valid: a run may carry properties, SARIF §3.14.27), and the GitHub
    log opens with the verdict as a notice naming the card."""
    repo = Path(__file__).resolve().parent.parent
    args = ["check", "sample_configs/zero2_bf16.json", "--model", "sample_configs/models/llama-2-7b.yaml", "--gpus",
            "8", "--gpu", "H100-SXM5-80GB", "--format"]
    out = cli(*args, "sarif", cwd=repo)
    doc = json.loads(out.stdout)
    validate_sarif(doc)
    run = doc["runs"][0]["properties"]
    assert run["cluster"]["gpu"]["name"] == "H100-SXM5-80GB"
    assert run["verdict"].startswith("Verdict (ZeRO-2): ")
    log = cli(*args, "github", cwd=repo).stdout
    first = log.splitlines()[0]
    assert first.startswith("::notice file=sample_configs/zero2_bf16.json,title=zeroadvisor verdict on "
                            "H100-SXM5-80GB::Verdict (ZeRO-2): ")

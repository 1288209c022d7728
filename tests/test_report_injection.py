"""Text from configs and file names cannot inject into terminals, CI logs, JSON, SARIF or a PR comment.

The defects of issue 7 (an unknown optimizer.type printed raw in check's estimate header; file
names printed raw; a markdown comment whose diff fence a config comment closes; keys that render as
HTML, links or mentions) through every renderer, and once per medium through the CLI (in this process: the
captured stdout encodes strict UTF-8, so text that is not UTF-8, a lone surrogate from a file name, fails).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from ci_runner import assert_inert, runner_command, runner_lines
from cli_run import cli  # noqa: F401 - the fixture
from sarif_validate import validate_sarif
from zeroadvisor.advisor import registry
from zeroadvisor.advisor.check import CheckOptions, check_document, combined_patch
from zeroadvisor.config.source import parse
from zeroadvisor.fix.apply import unified_diff
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.report import REPORTERS, Report, escape, render
from zeroadvisor.rules.linter import lint_file

REPO = Path(__file__).resolve().parent.parent
EVIL_OPTIMIZER = "Evil\n::add-mask::secret\x1b[31mRED\x1b]0;pwned\x07 ##[error]v1 \u202egnp\x9b2J"
# An hjson config: a comment that would close a ``` fence, keys that markdown would render.
HOSTILE_CONFIG = f"""{{
  "train_micro_batch_size_per_gpu": 1,
  "optimizer": {{"type": {json.dumps(EVIL_OPTIMIZER)}}},
  "<img src=x onerror=alert(1)>": 1,
  "[click](https://evil.example)": 1,
  "@team **bold** #1": 1,
  // ``` closes the diff fence? </details> <script>alert(1)</script>
  "zero_optimisation": {{"stage": 2}}
}}
"""
TYPO = '{\n  "train_batch_size": 8,\n  "zero_optimisation": {"stage": 3}\n}\n'
HOSTILE_NAMES = [
    b"bad\xff name.json",  # not UTF-8: reaches Python through surrogateescape
    b"nl\n::error file=a.json,line=1::pwned.json",
    b"::warning::starts-a-line.json",
    b"esc\x1b]0;title\x07\x1b[2J.json",
    "bidi\u202egnp.json".encode(),
    b"##[add-mask]x.json",
    b"pct%41 #?[x](y).json",
]
OPTIONS = CheckOptions(model=ModelSpec(parameters=1_000_000_000), shape=TrainingShape(),
                       cluster=Cluster(gpus=8, gpu_memory=80 * 10**9))


def check_report(fmt: str, name: str = "ds.hjson", ascii_only: bool = False, verbose: bool = True) -> str:
    document = parse(HOSTILE_CONFIG, name)
    result = check_document(document, OPTIONS)
    assert result.estimate is not None and result.estimate.settings.optimizer_label == EVIL_OPTIMIZER
    patch = combined_patch(result.findings)
    diff = unified_diff(document, patch, name)
    assert "```" in diff  # the comment is in the diff's context
    report = Report(findings=result.findings, rules=registry.ALL, check=result, path=name, diff=diff,
                    ascii_only=ascii_only, verbose=verbose)
    return render(fmt, report)


# --- markdown: what GitHub would render -----------------------------------------------------

MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
OUR_HTML = {"<details><summary>Suggested change</summary>\n", "</details>\n", "<!-- zeroadvisor -->\n"}


def assert_markdown_shows_data_as_text(out: str) -> None:
    tokens = MD.parse(out)
    html = [t.content for t in tokens if t.type == "html_block"]
    assert set(html) <= OUR_HTML, html
    fences = [t for t in tokens if t.type == "fence"]
    assert len(fences) <= 1 and all(t.info == "diff" for t in fences)
    inline = [c for t in tokens for c in (t.children or [])]
    assert not [t for t in inline if t.type in ("html_inline", "link_open", "image")]
    text = "".join(t.content for t in inline if t.type in ("text", "code_inline"))
    assert "@team" not in text and "#1" not in text  # mentions and references broken (ZWSP)
    assert "\x1b" not in out and "\u202e" not in out
    if fences:  # the whole diff is inside the one fence, and everything after it is outside
        assert fences[0].content.rstrip("\n").endswith("}")
        assert [t.content for t in tokens[-2:]] == ["</details>\n", "<!-- zeroadvisor -->\n"]
    for line in runner_lines(out):
        assert runner_command(line) is None, line


def test_markdown_hostile_config():
    out = check_report("markdown")
    assert_markdown_shows_data_as_text(out)
    assert "Evil\\\\n::add-mask::secret\\\\x1b\\[31mRED" in out  # the optimizer shown, escaped
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in out
    fence = next(t for t in MD.parse(out) if t.type == "fence")
    assert "// ``` closes the diff fence? </details>" in fence.content
    assert fence.markup == "````"


def test_markdown_path_is_a_code_span():
    out = check_report("markdown", name="a`b <img> @x.hjson")
    heading = MD.parse(out)[1]
    assert [c.type for c in heading.children][:3] == ["text", "code_inline", "text"]
    assert heading.children[1].content == "a`b <img> @x.hjson"


# --- text, github, json, sarif in-process ----------------------------------------------------

def test_text_hostile_config():
    assert_inert(check_report("text", verbose=False))  # the one-screen report too
    out = check_report("text")
    assert_inert(out)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("ZeRO memory estimate"))
    end = next(i for i in range(at + 1, len(lines)) if not lines[i].startswith("  "))
    header = " ".join(line.strip() for line in lines[at:end])  # one paragraph, wrapped to the width
    assert escape.terminal(EVIL_OPTIMIZER) in header  # the name visible
    assert "```" in out  # the diff itself is kept


def test_github_hostile_config():
    out = check_report("github")
    lines = out.splitlines()
    assert len(lines) == len(runner_lines(out.rstrip("\n")))
    for line in lines:
        command, props, data = runner_command(line)
        assert command in ("error", "warning", "notice") and props["file"] == "ds.hjson"
        assert "\n" not in data and "\x1b" not in data


def test_json_and_sarif_hostile_config():
    out = check_report("json")
    assert_inert(out)
    data = json.loads(out.encode("utf-8"))
    assert data["estimate"]["model"]["optimizer"] == EVIL_OPTIMIZER  # JSON escapes keep the value
    validate_sarif(check_report("sarif"))


@pytest.mark.parametrize("fmt", sorted(REPORTERS))
def test_ascii_only_output_encodes_as_ascii(fmt):
    out = check_report(fmt, name="zéro 🙂.hjson", ascii_only=True)
    out.encode("ascii")
    if fmt in ("json", "sarif"):  # the same document, \\u-escaped
        assert json.loads(out) == json.loads(check_report(fmt, name="zéro 🙂.hjson"))
    if fmt == "sarif":
        validate_sarif(out)
    if fmt == "text":
        assert "zéro" not in out and "z\\xe9ro \\U0001f642.hjson" in out


def _hostile_files(folder: Path) -> list[str]:
    folder.mkdir()
    for name in HOSTILE_NAMES:
        with open(os.path.join(os.fsencode(folder), name), "w") as f:
            f.write(TYPO)
    return [os.fsdecode(name) for name in HOSTILE_NAMES]


def test_file_names_in_process(tmp_path):
    names = _hostile_files(tmp_path / "cfg")
    os.chdir(tmp_path / "cfg")
    try:
        findings = [f for name in names for f in lint_file(name).findings]
    finally:
        os.chdir(REPO)
    report = Report(findings=findings, files=len(names), rules=registry.LINT)
    text = render("text", report)
    assert_inert(text)
    assert text.splitlines()[0].startswith("bad\\xff name.json:3:3: ZA102")
    assert "\\x3a:warning::starts-a-line.json:3:3:" in text  # would start a line with "::"
    data = json.loads(render("json", report).encode("utf-8"))
    assert [f["file"] for f in data["findings"]][:2] == ["bad\\xff name.json", names[1]]
    validate_sarif(render("sarif", report))
    for line in render("github", report).splitlines():
        assert runner_command(line)[0] == "error"


# --- the CLI, once per medium ----------------------------------------------------------------

@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hostile")
    (root / "ds.hjson").write_text(HOSTILE_CONFIG)
    _hostile_files(root / "cfg")
    return root


CHECK = ("check", "ds.hjson", "--params", "1B", "--gpus", "8", "--gpu", "H100-SXM5-80GB")


def test_cli_check_text(cli, hostile):
    assert_inert(cli(*CHECK, cwd=hostile).stdout)  # the one-screen report
    result = cli(*CHECK, "--verbose", cwd=hostile)  # 250 columns: the escaped name on one line
    out = result.stdout
    assert result.returncode in (0, 1, 5) and "ZeRO memory estimate" in out, result.stderr
    assert_inert(out)
    assert escape.terminal(EVIL_OPTIMIZER) in out


def test_cli_check_markdown(cli, hostile):
    result = cli(*CHECK, "--format", "markdown", cwd=hostile)
    out = result.stdout
    assert out.startswith("### zeroadvisor: `ds.hjson`"), result.stderr
    assert_markdown_shows_data_as_text(out)


def test_cli_lint_text_file_names(cli, hostile):
    result = cli("lint", *HOSTILE_NAMES, cwd=hostile / "cfg")
    out = result.stdout
    assert result.returncode == 1 and out.count("ZA102") == len(HOSTILE_NAMES), result.stderr
    assert_inert(out)


def test_cli_lint_json_file_names(cli, hostile):
    result = cli("lint", "--format", "json", "cfg", cwd=hostile)
    data = json.loads(result.stdout)
    files = {f["file"] for f in data["findings"]}
    assert "cfg/bad\\xff name.json" in files and "cfg/nl\n::error file=a.json,line=1::pwned.json" in files
    assert_inert(result.stdout)


def test_cli_lint_sarif_file_names(cli, hostile):
    result = cli("lint", "--format", "sarif", "cfg", cwd=hostile)
    assert result.returncode == 1, result.stderr
    doc = validate_sarif(result.stdout)
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]}
    assert "cfg/bad%FF%20name.json" in uris and "cfg/pct%2541%20%23%3F%5Bx%5D%28y%29.json" in uris


def test_cli_lint_github_file_names(cli, hostile):
    result = cli("lint", "--format", "github", "cfg", cwd=hostile)
    lines = result.stdout.splitlines()
    assert len(lines) == len(HOSTILE_NAMES), result.stderr
    files = set()
    for line in lines:
        command, props, _ = runner_command(line)
        assert command == "error"
        files.add(props["file"])
    assert "cfg/nl\\n::error file=a.json,line=1::pwned.json" in files  # one annotation, name shown
    assert "cfg/::warning::starts-a-line.json" in files

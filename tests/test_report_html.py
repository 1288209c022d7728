"""--format html: one self-contained file, rendered by a real browser (headless Chromium): the DOM it
builds has the chart's bars per option and the verdict, and the screenshot is a PNG.

Skipped where Chromium is not installed; CI installs it (.ci/run) and turns skips into failures.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from test_report_injection import HOSTILE_CONFIG
from zeroadvisor import vocab as labels

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "sample_configs" / "models" / "llama-2-7b.yaml"
ARGS = ["--model", MODEL, "--gpus", "8", "--gpu-memory", "24GB", "--cpu-memory", "512GB"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (.ci/run installs it)")


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", *args], capture_output=True, timeout=120, check=False)


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def elements(text: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(text)
    return parser.tags


def report(cli, tmp_path: Path, config: Path | None = None, *extra: str) -> tuple[Path, str]:
    config = config or REPO / "sample_configs" / "zero2_bf16.json"
    result = cli("check", config, *ARGS, *extra, "--format", "html")
    assert result.returncode in (0, 1), result.stderr
    page = tmp_path / "report.html"
    page.write_text(result.stdout, "utf-8")
    return page, result.stdout


def test_the_page_is_self_contained(cli, tmp_path):
    _, text = report(cli, tmp_path)
    tags = elements(text)
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe", "object", "embed")]
    assert not [a for _, attrs in tags for a in attrs if a in ("src", "href") or a.startswith("on")]
    assert not re.search(r"https?:|url\(|@import", text)  # nothing to fetch, not even a namespace URL


def test_text_from_the_config_is_escaped(cli, tmp_path):
    config = tmp_path / "ds.hjson"
    config.write_text(HOSTILE_CONFIG, "utf-8")
    _, text = report(cli, tmp_path, config, "--suggest")
    assert {t for t, _ in elements(text)} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "code",
                                              "p", "svg", "g", "text", "rect", "line", "table", "tr", "th",
                                              "td", "ul", "li", "span", "strong", "pre"}
    assert "&lt;img src=x onerror=alert(1)&gt;" in text and "\x1b" not in text


@needs_chromium
@pytest.mark.slow  # a headless browser
def test_chromium_renders_the_chart_and_the_verdict(cli, tmp_path):
    page, _ = report(cli, tmp_path, None, "--suggest")
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr.decode()[-2000:]
    tags = elements(dom.stdout.decode("utf-8"))
    options = [attrs for tag, attrs in tags if tag == "g" and attrs.get("class") == "option"]
    # every stage/offload option of a ZeRO-2 bf16 config, and the recommended run's own bar where it also changes
    # what no option shows (its label says what: "+mb:1", "+ckpt:full", ...)
    own = [attrs for attrs in options
           if any(part in attrs["data-option"] for part in ("+mb:", "+ckpt:", "+sp:", "+tp:", "+buckets"))]
    assert len(options) - len(own) == 14 and len(own) <= 1
    bars_per_option = []
    for tag, attrs in tags:
        if tag == "g" and attrs.get("class") == "option":
            bars_per_option.append(0)
        elif tag == "rect" and attrs.get("class") == "bar":
            bars_per_option[-1] += 1
    assert all(n >= 3 for n in bars_per_option), bars_per_option  # stacked: several rows per option
    assert any(tag == "line" and attrs.get("id") == "capacity" for tag, attrs in tags)
    verdicts = [attrs.get("data-verdict") for attrs in options]
    assert "does-not-fit" in verdicts and "fits" in verdicts
    body = dom.stdout.decode("utf-8")
    verdict = re.search(r'<p id="verdict"[^>]*>(.*?)</p>', body, re.S).group(1)
    assert verdict.startswith("Verdict (ZeRO-2): does not fit; peak ") and " of 22.35 GiB GPU memory" in verdict
    assert labels.ROW_LABELS["optimizer_states"] in body and 'id="diff"' in body

    shot = tmp_path / "shot.png"
    result = chromium(f"--screenshot={shot}", "--window-size=1100,1300", page.as_uri(), profile=tmp_path / "profile")
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1100, 1300)

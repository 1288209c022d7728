"""The pull-request comment, rendered as GitHub would (markdown-it-py, CommonMark + tables)."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.report import markdown

REPO = Path(__file__).resolve().parent.parent
MODEL = REPO / "sample_configs" / "models" / "llama-2-7b.yaml"
MD = MarkdownIt("commonmark").enable(["table", "strikethrough"])
CASES = [
    ("zero3_offload.json", ["--gpus", "8", "--gpu-memory", "80GiB", "--cpu-memory", "1TB", "--nvme", "4TB"]),
    ("zero2_bf16.json", ["--gpus", "8", "--gpu-memory", "24GB", "--cpu-memory", "512GB"]),
]


def tables(tokens) -> list[list[list[str]]]:
    """Each table as rows of cell texts."""
    out, rows, cells, inside = [], None, None, None
    for i, t in enumerate(tokens):
        if t.type == "table_open":
            rows = []
        elif t.type == "tr_open":
            cells = []
        elif t.type in ("th_open", "td_open"):
            inside = tokens[i + 1]
        elif t.type in ("th_close", "td_close"):
            cells.append("".join(c.content for c in inside.children if c.type in ("text", "code_inline")))
        elif t.type == "tr_close":
            rows.append(cells)
        elif t.type == "table_close":
            out.append(rows)
    return out


@pytest.mark.parametrize("name, args", CASES)
def test_comment_is_narrow_and_complete(cli, name, args):
    out = cli("check", REPO / "sample_configs" / name, "--model", MODEL, *args, "--format", "markdown").stdout
    tokens = MD.parse(out)
    found = tables(tokens)
    assert len(found) == 2  # the options as rows; the configured (and recommended) option by memory row
    for table in found:
        assert all(len(row) <= markdown.MAX_COLUMNS for row in table), [len(r) for r in table]
    options, rows = found
    # every option is a row, however many there are; the recommended run has a row of its own where it also
    # changes what no option row shows (the micro batch, checkpointing, layout or buckets: "+mb:1", ...)
    own = [row for row in options[1:] if "+mb:" in row[0] or "+ckpt:" in row[0] or "+sp:" in row[0]
           or "+tp:" in row[0] or "+buckets" in row[0]]
    assert len(options) - 1 - len(own) == 14 and len(own) <= 1
    assert all("(recommended)" in row[0] for row in own)
    assert options[0][0] == "Option" and any("(configured)" in row[0] for row in options[1:])
    names = [row[0] for row in rows]
    assert "host RAM / node" in names and "NVMe / node" in names
    text = "".join(c.content for t in tokens for c in (t.children or []) if c.type == "text")
    assert "Assumptions" in text and "activations:" in text  # the verdict comes with its caveats
    assert out.rstrip().endswith(markdown.MARKER)
    assert [t.content for t in tokens if t.type == "html_block"][-1].strip() == markdown.MARKER
    heading = tokens[1].children
    assert heading[0].content == "zeroadvisor: " and heading[1].type == "code_inline"


def test_key_names_render_literally(cli, tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "**bold**": 1, "x _y_ [l](u) `c` <b>h</b> @me #2": 2,\n'
                      ' "zero_optimization": {"stage": 2}}\n')
    out = cli("check", config, "--params", "1B", "--gpus", "8", "--gpu-memory", "80GB", "--format", "markdown").stdout
    tokens = MD.parse(out)
    items = [t for t in tokens if t.type == "inline" and "ignored" in t.content]
    assert items, out
    rendered = "".join(c.content for t in items for c in t.children if c.type in ("text", "code_inline"))
    assert "'**bold**'" in rendered and "x _y_ [l](u) `c` <b>h</b> @\u200bme #\u200b2" in rendered
    inline = [c.type for t in items for c in t.children]
    # the only emphasis is our own "**ZA103 ignored-key**"; no link, html, image or code from the config
    assert inline.count("strong_open") == len(items)
    assert not {"em_open", "link_open", "html_inline", "image", "code_inline"} & set(inline)

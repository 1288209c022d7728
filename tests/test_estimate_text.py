from __future__ import annotations

import re

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.report import overview
from zeroadvisor.report.estimate_text import Style, bars, render
from zeroadvisor.vocab import Verdict

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def first_block(text: str, row_label: str) -> dict[str, str]:
    """Cells of ``row_label`` in the first table block, keyed by column header (one-line headers, as a wide
    terminal shows them; columns are right-aligned)."""
    lines = text.splitlines()
    header = next(line for line in lines if re.search(r"\bZ0\b", line) and not line.startswith("Z0"))
    row = next(line for line in lines if line.startswith(row_label))
    ends = {m.end(): m.group() for m in re.finditer(r"[*>]?Z\d(?: \+\S+)*", header)}
    return {ends[m.end()]: m.group() for m in re.finditer(r"\S+", row) if m.end() in ends}


SPEC = ModelSpec(parameters=7_500_000_000, largest_layer_parameters=200_000_000)
OFFLOAD = {"fp16": {"enabled": True}, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}


def test_render_seed_paper_table():
    text = render(estimate(None, SPEC, cluster=Cluster(gpus=8), accounting="paper"), width=200)
    assert "Unit: GB (10^9 bytes)" in text and "Accounting: paper" in text
    cells = first_block(text, "= model states")
    # ZeRO paper, Ψ = 7.5B on 8 GPUs: 120, 41.25, 28.125 (shown exactly, not rounded to 28.12), 15
    assert (cells["Z0"], cells["Z1"], cells["Z2"], cells["Z3"]) == ("120.00", "41.25", "28.125", "15.00")
    assert "Fit: not judged (no GPU memory given)." in text
    assert "configured option" not in text  # no config: no column is marked
    assert "Assumptions:" in text and "paper accounting" in text


def test_render_marks_configured_and_fit():
    result = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9, cpu_memory=512 * 2**30))
    text = render(result, width=200)
    header = next(line for line in text.splitlines() if re.search(r"\bZ0\b", line))
    assert "*Z2 +opt:cpu" in header and header.count("*") == 1
    fits = [line for line in text.splitlines() if line.startswith("fits")]
    # Z0 does not fit 40 GB on model states alone; Z2 +opt:cpu fits on what is counted, but without a sequence
    # length its activations are not: "?" (unknown), never "✓"
    assert "?" in fits[0] and "✗" in fits[0] and "✓" not in fits[0]
    assert "✓ fits, ~ tight (inside the headroom), ✗ does not fit" in " ".join(text.split())
    assert f"GPU {40 * 10**9 / 2**30:.2f} GiB" in text and "host RAM 512.00 GiB/node" in text  # 40 GB in GiB
    # the verdict first
    assert text.startswith("Verdict (ZeRO-2 + CPU optimizer offload): unknown (what is counted fits); peak ")
    # the source notes and the terms only under --explain
    assert "DeepSpeed vs the ZeRO paper" not in text and "stage_1_and_2.py" not in text
    explained = render(result, explain=True, width=200)
    assert "DeepSpeed vs the ZeRO paper" in explained and "stage_1_and_2.py" in explained
    terms = explained.split("Terms of the configured option", 1)[1]
    for phase in ("load:", "train:", "save:"):
        assert phase in terms
    assert "[allowance;" in terms and "[exact;" in terms
    assert "TOTAL per GPU" in text and "host RAM / node" in text and "NVMe / node" in text
    for line in text.splitlines():
        assert len(line) <= 200, line


def test_render_unknown_says_tight_where_what_is_counted_is_tight():
    """Unknown (no sequence length) over what is counted: a peak over the usable memory but under the card is
    tight, and the verdict says so, never "what is counted fits"."""
    result = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9, cpu_memory=512 * 2**30))
    peak = next(st for st in result.stages if st.configured).peak_gpu
    # a card the counted peak fills to 95%: over the 90% usable, inside the headroom
    tight = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=int(peak / 0.95),
                                                             cpu_memory=512 * 2**30))
    configured = next(st for st in tight.stages if st.configured)
    assert configured.verdict == Verdict.UNKNOWN and configured.counted_verdict == Verdict.TIGHT
    text = render(tight, width=200)
    assert text.startswith("Verdict (ZeRO-2 + CPU optimizer offload): unknown (what is counted is tight: inside the "
                           "headroom); peak ")


def test_render_gib_and_ascii():
    result = estimate(None, SPEC, cluster=Cluster(gpus=8, gpu_memory=80 * 2**30))
    text = render(result, unit="GiB", ascii_only=True)
    assert "Unit: GiB (2^30 bytes)" in text
    assert text.isascii() and "✓" not in text and "✗" not in text and ("yes" in text or "NO" in text)
    # the deepspeed ZeRO-2 model states 2Ψ + 18Ψ/8 = 31875000000 B = 29.69 GiB (DeepSpeed's estimator prints 29.69GB),
    # + the fp16 cat copy step() casts the fp32 gradient partition from (2Ψ/8; tests/test_memory_zero2_step.py)
    row = next(line for line in text.splitlines() if line.startswith("= model states"))
    assert f"{(2 * 7.5e9 + (18 + 2) * 7.5e9 / 8) / 2**30:.2f}" in row


def test_render_lists_skipped_options():
    config = {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}, "zero_optimization": {"stage": 1}}
    text = render(estimate(config, SPEC, cluster=Cluster(gpus=8)))
    assert "Not run by DeepSpeed with this config:" in text and "NotImplementedError" in text


def test_default_shows_the_configured_and_the_stages_without_offload():
    result = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9))
    short, everything = render(result, width=200), render(result, width=200, all_options=True)
    header = next(line for line in short.splitlines() if re.search(r"\bZ0\b", line))
    assert re.findall(r"[*>]?Z\d(?: \+\S+)*", header) == ["Z0", "Z1", "Z2", "*Z2 +opt:cpu", "Z3"]
    hidden = len(result.stages) - 5
    assert f"{hidden} options with offload not shown (--all shows them)" in " ".join(short.split())
    assert "not shown" not in everything
    assert "Z3 +opt:nvme +par:nvme" in everything and "Z3 +opt:nvme +par:nvme" not in short


@pytest.mark.parametrize("width", [60, 80, 100, 132])
def test_every_line_fits_the_width(width):
    for config in (None, OFFLOAD, {"bf16": {"enabled": True}, "zero_optimization": {"stage": 3}}):
        result = estimate(config, SPEC, TrainingShape(), Cluster(gpus=16, gpu_memory=24 * 10**9, cpu_memory=10**12,
                                                                  nvme=4 * 10**12))
        for all_options in (False, True):
            for line in render(result, width=width, all_options=all_options).splitlines():
                assert len(line) <= width, line


def test_a_wide_terminal_gets_one_line_headers_and_one_block():
    result = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9))
    narrow, wide = render(result, width=80, all_options=True), render(result, width=200, all_options=True)
    assert max(map(len, wide.splitlines())) > 120  # the room is used
    assert len([line for line in wide.splitlines() if line.startswith("TOTAL per GPU")]) == 1
    assert len([line for line in narrow.splitlines() if line.startswith("TOTAL per GPU")]) > 1
    assert "+opt:cpu" in narrow and "*Z2 +opt:cpu" not in narrow.split("Memory per GPU by row")[0]


def test_colour_changes_no_width():
    result = estimate(OFFLOAD, SPEC, TrainingShape(), Cluster(gpus=8, gpu_memory=40 * 10**9))
    plain, coloured = render(result), render(result, colour=True)
    assert "\x1b[" not in plain and "\x1b[" in coloured
    assert ANSI.sub("", coloured) == plain


def test_bars_are_proportional_to_the_rows_and_mark_the_card():
    capacity = 80 * 10**9
    result = estimate(None, SPEC, cluster=Cluster(gpus=8, gpu_memory=capacity), accounting="paper")
    stages = overview.shown_stages(result, None, all_options=False)
    drawn = [line for line in bars(stages, result, "GB", Style(100)) if re.match(r"Z\d", line)]
    assert len(drawn) == len(stages) and len({len(line) for line in drawn}) == 1
    # label column, the bar, " peak", " mark": the bar's cells are what lies between
    label_width = max(len(st.option.label) for st in stages) + 1
    peak_width = max(len(f"{st.peak_gpu / 1e9:.2f}") for st in stages)
    mark_width = max(len(line.rsplit(" ", 1)[1]) for line in drawn)
    width = len(drawn[0]) - label_width - peak_width - mark_width - 2
    top = max([capacity] + [st.peak_gpu for st in stages])
    for st, line in zip(stages, drawn, strict=False):
        cells = line[label_width:label_width + width]
        assert cells.count("|") == 1 and cells.index("|") == int(capacity / top * width)  # the card, once
        for row, letter in overview.BAR_LETTERS.items():  # each row's share of the width, within rounding
            share = st.per_gpu.get(row, 0) / top * width
            assert abs(cells.count(letter) - share) <= 1.5, (st.option, row, cells)
        total = st.per_gpu["total"] / top * width
        drawn_cells = len(cells.replace("|", " ").rstrip())  # the card's line may stand inside the bar
        assert abs(drawn_cells - max(total, st.peak_gpu / top * width)) <= 1.5


@pytest.mark.parametrize("args, release", [
    (("--deepspeed-version", "0.16.9"), "0.16.9"),
    (("--deepspeed-version", "0.19.8"), "0.19.8"),
    (("--deepspeed-version", ">=0.16,<0.17"), "0.16.9"),  # a range: the newest of it, whose defaults are read
    (("ds.json",), "0.16.9"),  # the pin beside the config (requirements.txt)
])
def test_the_accounting_line_names_the_release_whose_defaults_were_read(cli, tmp_path, args, release):
    # issue 32 follow-up: it named the latest release (0.19.8) whatever release the estimate read
    (tmp_path / "requirements.txt").write_text("deepspeed>=0.16,<0.17\n")
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}\n')
    result = cli("estimate", "--params", "7B", "--gpus", "8", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("Accounting:")]
    assert line == f"Accounting: deepspeed (what DeepSpeed {release} allocates)"

"""vocab.py: one word for each memory row and option, used by every report."""

from __future__ import annotations

from zeroadvisor import vocab as labels
from zeroadvisor.memory.options import DEVICES, Option
from zeroadvisor.memory.terms import ROWS
from zeroadvisor.report import estimate_text

ALL_OPTIONS = [Option(0), Option(1), Option(1, "cpu"), Option(2, "nvme")] + \
    [Option(3, oo, op) for oo in DEVICES for op in DEVICES]


def test_every_memory_row_has_one_label():
    assert set(labels.ROW_LABELS) == set(ROWS)
    assert set(labels.BREAKDOWN_ROWS) < set(ROWS) and labels.TOTAL_ROW in ROWS and labels.SUBTOTAL_ROW in ROWS
    assert len(set(labels.ROW_LABELS.values())) == len(ROWS)


def test_text_table_marks_the_subtotal_and_the_total():
    assert labels.table_label("model_states") == "= model states"
    assert labels.table_label("total") == "TOTAL per GPU"
    assert labels.table_label("gathered_parameters") == "gathered parameters"
    assert estimate_text.ROW_LABELS == {row: labels.table_label(row) for row in ROWS}


def test_option_header_is_the_json_label():
    # Option.label is the "label" of the JSON contract: the compact header must stay that string
    for option in ALL_OPTIONS:
        assert labels.option_header(option) == option.label
        first, second = labels.option_header_lines(option)
        assert " ".join(p for p in (first, second) if p) == option.label


def test_option_words():
    assert labels.option_words(Option(2)) == "ZeRO-2"
    assert labels.option_words(Option(2, "cpu")) == "ZeRO-2 with optimizer offload to CPU"
    assert labels.option_words(Option(3, "nvme", "cpu")) == \
        "ZeRO-3 with optimizer offload to NVMe and parameter offload to CPU"
    assert labels.option_words(Option(3, "none", "nvme")) == "ZeRO-3 with parameter offload to NVMe"

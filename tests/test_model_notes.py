"""The model description's notes (ModelSpec.notes) reach every format: JSON model.notes, the text
estimate and the markdown report, escaped for each medium."""

from __future__ import annotations

import json

from zeroadvisor.memory.estimate import Cluster, estimate
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import ModelSpec
from zeroadvisor.report import escape, markdown
from zeroadvisor.report.estimate_text import render

# t5-small's config.json with tie_word_embeddings false (as Flan-T5 / T5 v1.1 ship) and a
# quantization_config: both produce notes (families.py _t5_notes, hf.py).
T5 = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 512, "d_ff": 2048,
      "d_kv": 64, "num_heads": 8, "num_layers": 6, "vocab_size": 32128, "tie_word_embeddings": False,
      "quantization_config": {"load_in_8bit": True}}


def t5_estimate():
    spec = spec_from_hf_config(T5, source="config.json")
    return spec, estimate({"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}}, spec, cluster=Cluster(gpus=2))


def test_json_carries_the_model_notes():
    spec, est = t5_estimate()
    notes = est.to_dict()["model"]["notes"]
    assert notes == list(spec.notes)
    assert any("ties lm_head" in n for n in notes)
    assert any(n.startswith("quantization_config ignored") for n in notes)
    json.dumps(est.to_dict())  # plain JSON


def test_text_lists_the_model_notes():
    _, est = t5_estimate()
    text = render(est)
    assert "Model notes:" in text
    section = text.split("Model notes:")[1].split("Assumptions:")[0]
    assert "quantization_config ignored" in section and "ties lm_head" in " ".join(section.split())


def test_markdown_lists_the_model_notes():
    _, est = t5_estimate()
    out = markdown.render("ds.json", [], est, None, None, 0.1, "")
    assert "**Model notes**" in out
    assert "- quantization\\_config ignored" in out or "- quantization_config ignored" in out


def test_no_notes_no_section():
    est = estimate(None, ModelSpec(parameters=10**9), cluster=Cluster(gpus=1))
    assert est.to_dict()["model"]["notes"] == []
    assert "Model notes" not in render(est)
    assert "Model notes" not in markdown.render("ds.json", [], est, None, None, 0.1, "")


HOSTILE = "see [here](https://evil.example) @team \x1b[31mred\x1b[0m <b>x</b> \u202eevil"


def test_notes_are_escaped_in_every_format():
    est = estimate(None, ModelSpec(parameters=10**9, notes=(HOSTILE,)), cluster=Cluster(gpus=1))
    text = render(est)
    assert "\x1b" not in text and "\u202e" not in text
    assert escape.terminal(HOSTILE) in " ".join(text.split("Model notes:")[1].split())
    md = markdown.render("ds.json", [], est, None, None, 0.1, "")
    assert escape.markdown_inline(HOSTILE) in md
    assert "](https://evil.example)" not in md and "\x1b" not in md and "<b>" not in md
    data = json.loads(escape.json_dumps(est.to_dict()))
    assert data["model"]["notes"] == [HOSTILE]

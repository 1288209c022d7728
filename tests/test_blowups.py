"""Size-driven work stays proportional to what the user's model has, not to a number in a file (issue 20,
defect 8): LoRA counting keeps one entry per distinct tensor size, the text width is capped whatever
COLUMNS says, and a config.json is read by a JSON decoder (transformers reads it with json.loads), not
by the pure-Python YAML parser. Timings live in benchmarks/blowups.py; these tests measure work that does
not depend on the machine: allocated memory and Python function calls."""

from __future__ import annotations

import json
import re
import sys
import tracemalloc
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.cli.commands import MAX_TEXT_WIDTH
from zeroadvisor.model.description import load_description, load_hf_config
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config
from zeroadvisor.model.peft import PeftSettings, count

REPO = Path(__file__).resolve().parent.parent
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 64,
         "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4}


def _lora(layers: int):
    config = {**LLAMA, "num_hidden_layers": layers}
    return count(layout_from_hf_config(config)[2], PeftSettings(r=16, target_modules=("q_proj", "v_proj")),
                 spec_from_hf_config(config))


def test_lora_counting_memory_does_not_grow_with_the_layer_count():
    tracemalloc.start()
    try:
        c = _lora(2**22)  # the old per-layer list: 268 MB here
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000
    # q_proj (64 -> 64) and v_proj (64 -> 64 // 4 heads x 4 kv heads = 64): A is 16 x 64, B is 64 x 16
    assert c.trainable == 2**22 * 2 * (16 * 64 + 64 * 16)
    assert c.trainable_tensors == ((1024, 2**22 * 4),)
    assert _lora(2**30).trainable == 2**30 * 2 * 2048  # the old code: MemoryError


@pytest.mark.parametrize("columns", ["1000000", "10000000"])
def test_the_text_width_is_capped_whatever_columns_says(cli, columns):
    result = cli("check", REPO / "sample_configs" / "zero2_bf16.json", "--params", "7B", "--gpus", "8",
                 "--gpu-memory", "24GB", "--all", "--verbose", env={"COLUMNS": columns})
    assert result.returncode in (0, 1), result.stderr
    # a finding is one whole line outside a terminal, as long as its message (issue 32), whatever COLUMNS says
    finding = re.compile(r": ZA\d{3} \[(error|warning|info)\] ")
    report = [line for line in result.stdout.splitlines() if not finding.search(line)]
    assert max(map(len, report)) <= MAX_TEXT_WIDTH
    assert len(result.stdout) < 100_000


def _python_calls(function, *args) -> int:
    calls = 0

    def profile(frame, event, arg):
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        function(*args)
    finally:
        sys.setprofile(None)
    return calls


def test_a_large_config_json_is_decoded_in_c_not_token_by_token(tmp_path):
    """A 40,000-label config.json (1.1 MB): the YAML parser made millions of Python calls (24 s);
    the JSON reader makes a number proportional to the top-level keys."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "num_hidden_layers": 2,
                                "id2label": {str(i): f"LABEL_{i}" for i in range(40_000)}}, indent=2))
    load_hf_config(path)  # imports done before counting
    assert _python_calls(load_hf_config, path) < 20_000


@pytest.mark.parametrize("text, message", [
    ('{"model_type": "llama", "a": }', ":1:30: invalid JSON: Expecting value"),
    ('{"model_type": "llama",}', ":1:24: invalid JSON: Expecting property name enclosed in double quotes"),
    ('{"model_type": "llama"} x', ":1:25: invalid JSON: Extra data"),
    ('{"model_type": "llama", "model_type": "gpt2"}', ":1:25: duplicate key model_type (first given on line 1)"),
    ('{"model_type": "llama", "x": {"a": 1, "a": 2}}', ": duplicate key a in a nested object"),
    ('{"model_type": "llama", "x": ' + "9" * 5000 + "}", ": invalid JSON: an integer with more than 4300 digits"),
    ('{"model_type": "llama", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", ": nested too deeply to read"),
    ("[1, 2]", ":1:1: must be a mapping of keys (hf_config: or parameters: ...), got a list"),
])
def test_config_json_errors_are_one_line_and_placed(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ModelError) as caught:
        load_description(path)
    assert str(caught.value) == f"{path}{message}"


def test_config_json_non_finite_sizes_are_refused_where_they_are(tmp_path):
    path = tmp_path / "config.json"
    fields = {k: v for k, v in LLAMA.items() if k != "hidden_size"}
    path.write_text(json.dumps({**fields, "num_hidden_layers": 2})[:-1] + ', "hidden_size": NaN}')
    with pytest.raises(ModelError, match=r"hidden_size must be an integer > 0, got NaN"):
        load_description(path)

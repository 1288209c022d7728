"""Size-driven work stays proportional to what the user's model has, not to a number in a file (issue 20,
defect 8): LoRA counting keeps one entry per distinct tensor size, the text width is capped whatever
COLUMNS says, and a config.json is read by a JSON decoder (transformers reads it with json.loads), not
by the pure-Python YAML parser. Timings live in benchmarks/blowups.py; these tests measure work that does
not depend on the machine: allocated memory and Python function calls."""

from __future__ import annotations

import json
import re
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.cli.commands import MAX_TEXT_WIDTH
from zeroadvisor.config.pins import clear_cache, find_pin
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


def _pin_repository(tmp_path: Path, name: str, text: str) -> str:
    clear_cache()
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    config = tmp_path / "ds_config.json"
    config.write_text("{}")
    return str(config)


def test_a_large_environment_yml_is_scanned_not_parsed_token_by_token(tmp_path):
    """1.4 MB of conda dependencies: PyYAML's pure-Python loader made millions of Python calls (13-15 s on a
    loaded runner); the line scan looks at the lines that mention pip or deepspeed only."""
    text = ("dependencies:\n" + "".join(f"  - pkg{i}=1.{i}\n" for i in range(70_000))
            + "  - pip:\n    - deepspeed==0.14.5\n")
    config = _pin_repository(tmp_path, "environment.yml", text)
    find_pin(config)  # imports done before counting
    clear_cache()
    assert _python_calls(find_pin, config) < 5_000
    clear_cache()
    assert find_pin(config).pin.line == 70_003


def test_a_5_mb_setup_py_is_read_not_parsed(tmp_path):
    """The syntax tree of a 4.8 MB setup.py took 1.8 GB; above 256 KB it is a note, after a bounded read."""
    text = "X = [" + ",".join(map(str, range(700_000))) + "]\nsetup(install_requires=['deepspeed==0.14.5'])\n"
    config = _pin_repository(tmp_path, "setup.py", text)
    tracemalloc.start()
    try:
        found = find_pin(config)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.pin is None and "larger than 256 KB" in found.notes[0]
    assert peak < 4 * len(text)  # the bytes read and their text, nothing proportional to a tree


@pytest.mark.parametrize(("text", "line", "said"), [
    ("x\n" * 2_000_000 + "deepspeed==0.14.5\n", 2_000_001, None),  # 4 MB of short lines: millions, one by one
    ("-r a.txt\n" * 400_000 + "deepspeed==0.14.5\n", None, "more than 1000 lines"),  # 16 includes followed
    ("x \\\n" * 1_000_000 + "deepspeed==0.14.5\n", None, "lines joined by backslashes into more than 64 KB"),
])
def test_a_large_requirements_file_is_looked_at_where_it_names_deepspeed(tmp_path, text, line, said):
    config = _pin_repository(tmp_path, "requirements.txt", text)
    find_pin(config)
    clear_cache()
    assert _python_calls(find_pin, config) < 60_000
    clear_cache()
    found = find_pin(config)
    assert (found.pin.line if found.pin else None) == line
    assert said is None or said in found.notes[0]


@pytest.mark.parametrize(("name", "text", "most_calls"), [
    ("environment.yml", "dependencies:\n" + "  - deepspeed=0.14.5\n" * 200_000, 60_000),
    ("environment.yml", "dependencies:\n  - pip:\n" + "    - deepspeed==0.14.5\n" * 200_000, 60_000),
    ("uv.lock", '[[package]]\nname = "deepspeed"\nversion = "0.14.5"\n' * 100_000, 60_000),  # was quadratic
    ("requirements.txt", "deepspeed==0.14.5\n" * 250_000, 60_000),
    # tomllib is pure Python (about a million calls per MB): the file is parsed, up to 256 KB, its requirements not
    ("pyproject.toml", "[project]\ndependencies = [" + '"deepspeed==0.14.5",' * 12_000 + "]\n", 250_000),
])
def test_a_file_of_many_deepspeed_requirements_is_read_up_to_a_bound(tmp_path, name, text, most_calls):
    """A real file names deepspeed one to three times; 64 requirements are read, the rest is a note."""
    config = _pin_repository(tmp_path, name, text)
    find_pin(config)
    clear_cache()
    assert _python_calls(find_pin, config) < most_calls
    clear_cache()
    found = find_pin(config)
    assert found.pin.specifier == "==0.14.5"
    assert any("the rest of the file is not" in note or "the rest not read" in note for note in found.notes)


def test_lock_name_lines_without_package_headers_are_found_in_one_pass(tmp_path):
    """Each deepspeed name line looked back for its [[package]] header: with none, the whole text before it
    each time (quadratic in C: minutes for 5 MB, no Python call to count). Bisecting the headers is linear."""
    config = _pin_repository(tmp_path, "uv.lock", 'name = "deepspeed"\n' * 250_000)
    start = time.monotonic()
    found = find_pin(config)
    assert time.monotonic() - start < 2 and (found.pin, found.notes) == (None, ())

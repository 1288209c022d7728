"""Model descriptions: YAML/JSON files, hf_config, parameter counts, schema, CLI overrides."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from conftest import load_script
from zeroadvisor.model.description import (
    FIELDS,
    apply_overrides,
    json_schema,
    load_description,
    load_hf_config,
    parse_count,
    spec_from_params,
)
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import TrainingShape

REPO = Path(__file__).resolve().parent.parent

LLAMA_CONFIG = """{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": 32000,
  "hidden_size": 4096,
  "intermediate_size": 11008,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 32
}
"""
LLAMA_2_7B = 6_738_415_616  # see tests/test_model_counts.py for the hand calculation


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Work in tmp_path so that error messages carry the short relative file names."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, text: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, "utf-8")
    return path.name if path.parent == Path.cwd() else str(path)


def error_of(path: str) -> str:
    with pytest.raises(ModelError) as info:
        load_description(path)
    message = str(info.value)
    assert "\n" not in message, message
    return message


# --------------------------------------------------------------------------- loading


def test_parameters_only_yaml(here):
    name = write(here / "model.yaml", "parameters: 7.5B\nsequence_length: 4096\n")
    spec, shape = load_description(name)
    assert spec.parameters == 7_500_000_000
    assert spec.num_layers is None and spec.hidden_size is None and spec.model_type is None
    assert shape == TrainingShape(sequence_length=4096, activation_checkpointing="none", flash_attention=True)
    assert spec.source == "model.yaml"


def test_parameters_with_architecture_fields(here):
    name = write(
        here / "model.yaml",
        "parameters: 70b\nnum_layers: 80\nhidden_size: 8192\nnum_attention_heads: 64\n"
        "num_key_value_heads: 8\nintermediate_size: 28672\nvocab_size: 128256\n"
        "activation_checkpointing: full\nflash_attention: false\n",
    )
    spec, shape = load_description(name)
    assert spec.parameters == 70_000_000_000
    assert (spec.num_layers, spec.hidden_size, spec.num_attention_heads) == (80, 8192, 64)
    assert (spec.num_key_value_heads, spec.intermediate_size, spec.vocab_size) == (8, 28672, 128256)
    assert spec.head_dim is None  # only what was given: nothing derived
    assert shape.activation_checkpointing == "full" and shape.flash_attention is False


def test_encoder_decoder_and_head_fields(here):
    # BlenderBot-400M-distill's config.json: 2 encoder + 12 decoder layers; a classifier has no LM head
    name = write(here / "model.yaml", "parameters: 400M\nencoder_layers: 2\ndecoder_layers: 12\nhidden_size: 1280\n"
                 "lm_head: true\n")
    spec, _ = load_description(name)
    assert (spec.encoder_layers, spec.decoder_layers, spec.num_layers, spec.lm_head) == (2, 12, 14, True)
    name = write(here / "cls.yaml", "parameters: 900M\nnum_layers: 24\nlm_head: false\n")
    assert load_description(name)[0].lm_head is False
    message = error_of(write(here / "bad.yaml", "parameters: 400M\nnum_layers: 13\nencoder_layers: 2\n"
                          "decoder_layers: 12\n"))
    assert "num_layers 13 is not encoder_layers + decoder_layers (14)" in message
    assert message.startswith("bad.yaml:2:13:")
    assert "lm_head must be true or false" in error_of(write(here / "h.yaml", "parameters: 1B\nlm_head: maybe\n"))


def test_json_description_reads_by_the_same_path(here):
    name = write(here / "model.json", json.dumps({"parameters": "1.3e9", "sequence_length": 2048}))
    spec, shape = load_description(name)
    assert spec.parameters == 1_300_000_000 and shape.sequence_length == 2048
    name = write(here / "float.json", '{"parameters": 1.3e9}')
    assert load_description(name)[0].parameters == 1_300_000_000


def test_hf_config_relative_to_the_description(here):
    write(here / "models" / "llama" / "config.json", LLAMA_CONFIG)
    write(here / "models" / "desc.yaml", "hf_config: llama/config.json\nsequence_length: 4096\n")
    spec, shape = load_description(here / "models" / "desc.yaml")  # not relative to the cwd
    assert spec.parameters == LLAMA_2_7B and spec.model_type == "llama"
    assert spec.num_layers == 32 and spec.largest_layer_parameters == 32000 * 4096
    assert "llama/config.json" in spec.source and "desc.yaml" in spec.source
    assert shape.sequence_length == 4096


def test_config_json_given_directly(here):
    name = write(here / "config.json", LLAMA_CONFIG)
    spec, shape = load_description(name)
    assert spec == spec_from_hf_config(json.loads(LLAMA_CONFIG), source="config.json")
    assert shape == TrainingShape()
    assert load_hf_config(name)[1] == spec


# --------------------------------------------------------------------------- errors


def test_schema_error_names_file_line_and_column(here):
    name = write(here / "model.yaml", "# a model\nparameters: 7.5B\nsequence_length: 4k\n")
    assert error_of(name) == 'model.yaml:3:18: sequence_length must be an integer > 0, got "4k"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("parameters: 7B\nactivation_checkpointing: partial\n",
         'model.yaml:2:27: activation_checkpointing must be one of none, selective, full, got "partial"'),
        ("parameters: 7B\nflash_attention: maybe\n",
         'model.yaml:2:18: flash_attention must be true or false, got "maybe"'),
        ("parameters: 7B\nnum_layers: 0\n", "model.yaml:2:13: num_layers must be an integer > 0, got 0"),
        ("parameters: -7B\n",
         'model.yaml:1:13: parameters must be an integer > 0 or a count like 7.5B, 70b, 1.3e9, 125M, 1T, got "-7B"'),
        ("parameters: 1.5\n", "model.yaml:1:13: parameters 1.5 is not a whole number of parameters"),
        ("parameters: 0\n", ("model.yaml:1:13: parameters must be an integer > 0 or a count like 7.5B, "
         "70b, 1.3e9, 125M, 1T, got 0")),
        ("parameters: 7B\nsequence_length: [1, 2]\n",
         "model.yaml:2:18: sequence_length must be an integer > 0, got a list of 2 items"),
    ],
)
def test_value_errors(here, text, expected):
    assert error_of(write(here / "model.yaml", text)) == expected


def test_unknown_key_with_did_you_mean(here):
    message = error_of(write(here / "model.yaml", "parameters: 7B\nseq_length: 4096\n"))
    assert message.startswith("model.yaml:2:1: unknown key seq_length (did you mean sequence_length?)")


def test_architecture_field_with_hf_config_is_an_error_naming_it(here):
    write(here / "config.json", LLAMA_CONFIG)
    name = write(here / "model.yaml", "hf_config: config.json\nhidden_size: 4096\n")
    assert error_of(name).startswith("model.yaml:2:1: hidden_size cannot be given with hf_config")


def test_both_or_neither_source(here):
    both = write(here / "both.yaml", "hf_config: config.json\nparameters: 7B\n")
    assert error_of(both).startswith("both.yaml:2:1: give either hf_config or parameters, not both")
    neither = write(here / "neither.yaml", "sequence_length: 4096\n")
    assert error_of(neither) == "neither.yaml: needs hf_config (a config.json) or parameters (a count like 7.5B)"


def test_hf_config_missing(here):
    name = write(here / "model.yaml", "hf_config: nowhere/config.json\n")
    message = error_of(name)
    assert message.startswith("model.yaml:1:12: hf_config ") and message.endswith("does not exist")


def test_error_inside_the_hf_config_is_located_there(here):
    write(here / "cfg" / "config.json", LLAMA_CONFIG.replace('"hidden_size": 4096', '"hidden_size": "4096"'))
    name = write(here / "model.yaml", "hf_config: cfg/config.json\n")
    assert error_of(name) == 'cfg/config.json:5:18: hidden_size must be an integer > 0, got "4096"'


def test_unsupported_model_type_in_a_config(here):
    name = write(here / "config.json", '{"model_type": "rwkv", "hidden_size": 2048}')
    message = error_of(name)
    assert message.startswith("config.json:1:16: model_type 'rwkv' is not supported")
    assert message.endswith("give `parameters:` in a model description instead")


def test_missing_config_key_is_named(here):
    name = write(here / "config.json", '{"model_type": "llama", "vocab_size": 10}')
    assert "missing required key hidden_size for model_type llama" in error_of(name)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "model.yaml: is empty: expected hf_config or parameters"),
        ("  \n# only a comment\n", "model.yaml: is empty: expected hf_config or parameters"),
        ("~\n", "model.yaml: is empty: expected hf_config or parameters"),
        ("- 7B\n", "model.yaml:1:1: must be a mapping of keys (hf_config: or parameters: ...), got a list"),
        ("7B\n", "model.yaml:1:1: must be a mapping of keys (hf_config: or parameters: ...), got a str"),
        (b"parameters: \xe97B\n", "model.yaml:1: not UTF-8 (byte 0xe9 at offset 12)"),
        ("parameters: 7B\nparameters: 8B\n", "model.yaml:2:1: duplicate key parameters (first given on line 1)"),
        ("parameters: [7B\n", "model.yaml:2:1: invalid YAML/JSON: expected ',' or ']', but got '<stream end>'"),
        ('{"parameters": "7B",}', None),  # YAML flow mappings allow a trailing comma
    ],
)
def test_file_level_errors(here, content, expected):
    name = write(here / "model.yaml", content)
    if expected is None:
        assert load_description(name)[0].parameters == 7_000_000_000
    else:
        assert error_of(name) == expected


def test_unreadable_paths(here):
    assert error_of("missing.yaml") == "missing.yaml: no such file"
    (here / "adir").mkdir()
    assert error_of("adir") == "adir: is a directory, not a model description"
    name = write(here / "u16.yaml", "parameters: 7B\n".encode("utf-16"))
    assert error_of(name).startswith("u16.yaml: is UTF-16")


def test_unsafe_yaml_tags_are_refused(here):
    name = write(here / "model.yaml", "parameters: !!python/object/apply:os.getcwd []\n")
    assert error_of(name).startswith("model.yaml:1:13: invalid YAML/JSON")


def test_alias_bomb_is_reported_not_expanded(here):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
        for i in range(20)
    )
    name = write(here / "model.yaml", "parameters: 7B\n" + bomb)
    # Refused while reading (config/yaml_source.py), at the key whose aliases pass the bound:
    # a..f hold 9, 36, 144, 576, 2304, 9216 repeated values; f (line 7) passes 10,000.
    assert error_of(name) == ("model.yaml:7:1: YAML aliases here expand to more than 10000 values "
                              "(an alias bomb?): write the values out")


def test_alias_bomb_in_a_config_json_is_refused(here):
    # The 553-byte shape from issue 7 (nine levels of nine aliases: 387 million values) under
    # a key a Hugging Face config may carry: refused while reading, before any code walks it.
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    hf = ("model_type: llama\nhidden_size: 4096\nintermediate_size: 11008\nnum_hidden_layers: 32\n"
          "num_attention_heads: 32\nvocab_size: 32000\nbomb:\n")
    name = write(here / "model.yaml", hf + "".join(f"  {line}\n" for line in lines))
    assert error_of(name) == ("model.yaml:12:3: YAML aliases here expand to more than 10000 values "
                              "(an alias bomb?): write the values out")


# --------------------------------------------------------------------------- counts


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("7.5B", 7_500_000_000),
        ("70b", 70_000_000_000),
        ("1.3e9", 1_300_000_000),
        ("125M", 125_000_000),
        ("1T", 1_000_000_000_000),
        ("6,738,415,616", 6_738_415_616),
        ("7_000_000", 7_000_000),
        (" 2.5 k ", 2_500),
        ("1.75e3K", 1_750_000),
        (7, 7),
        (1.3e9, 1_300_000_000),
    ],
)
def test_parse_count(text, count):
    assert parse_count(text) == count


def test_parse_count_is_exact_where_float_is_not():
    # Binary floating point gets these wrong: 2.01 * 1e9 == 2009999999.9999998, and
    # int() of it would be off by one parameter.
    assert 2.01 * 1e9 != 2_010_000_000
    assert parse_count("2.01B") == 2_010_000_000
    assert parse_count("1.07B") == 1_070_000_000
    assert parse_count("0.1B") == 100_000_000
    assert parse_count("1.1T") == 1_100_000_000_000
    assert parse_count("123456789.123456789B") == 123_456_789_123_456_789


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-7B", "must be > 0"),
        ("0", "must be > 0"),
        ("0.0B", "must be > 0"),
        ("1.5", "is not a whole number"),
        ("1.2345K", "is not a whole number"),
        (0.5, "is not a whole number"),
        ("1,5B", "must be a count like"),  # a decimal comma is not read as 15B
        ("7.5X", "must be a count like"),
        ("", "must be a count like"),
        (True, "must be a count like"),
        (None, "must be a count like"),
        (float("nan"), "not an exact count"),
        (1e300, "not an exact count"),
        ("1e40", "out of range"),
    ],
)
def test_parse_count_rejects(value, words):
    with pytest.raises(ModelError, match=words):
        parse_count(value)


def test_spec_from_params():
    spec = spec_from_params("7B")
    assert spec.parameters == 7_000_000_000 and spec.num_layers is None and spec.source == "--params"
    assert spec_from_params(125_000_000).parameters == 125_000_000
    with pytest.raises(ModelError, match="--params must be > 0"):
        spec_from_params("0")


# --------------------------------------------------------------------------- overrides


def test_apply_overrides():
    shape = TrainingShape(sequence_length=2048, activation_checkpointing="none", flash_attention=True)
    assert apply_overrides(shape) is shape
    assert apply_overrides(shape, seq_len=8192) == TrainingShape(8192, "none", True)
    assert apply_overrides(shape, checkpointing="selective").activation_checkpointing == "selective"
    assert apply_overrides(shape, flash=False).flash_attention is False
    both = apply_overrides(shape, seq_len=4096, checkpointing="full", flash=False)
    assert both == TrainingShape(4096, "full", False)
    assert shape == TrainingShape(2048, "none", True)  # frozen: the original is untouched


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"seq_len": 0}, "--seq-len must be an integer > 0, got 0"),
        ({"seq_len": True}, "--seq-len must be an integer > 0"),
        ({"checkpointing": "some"}, '--activation-checkpointing must be one of none, selective, full, got "some"'),
        ({"flash": "yes"}, "--flash-attention must be true or false"),
    ],
)
def test_apply_overrides_rejects(kwargs, words):
    with pytest.raises(ModelError) as info:
        apply_overrides(TrainingShape(), **kwargs)
    assert words in str(info.value)


def test_overrides_on_a_loaded_description(here):
    name = write(here / "model.yaml", "parameters: 7B\nsequence_length: 2048\nactivation_checkpointing: full\n")
    _, shape = load_description(name)
    assert apply_overrides(shape, seq_len=4096) == TrainingShape(4096, "full", True)


# --------------------------------------------------------------------------- schema


def _generator():
    return load_script("tools/gen_model_schema.py", "gen_model_schema")


@pytest.mark.parametrize("folder", ["zeroadvisor/schemas", "schemas"])
def test_committed_schema_matches_the_generator(folder):
    committed = (REPO / folder / "model.schema.json").read_text("utf-8")
    assert committed == _generator().render(), "run python tools/gen_model_schema.py"


def test_generator_check_mode(tmp_path):
    script = REPO / "tools" / "gen_model_schema.py"
    ok = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    stale = tmp_path / "model.schema.json"
    stale.write_text('{"title": "old"}\n', "utf-8")
    drift = subprocess.run(
        [sys.executable, str(script), "--check", "--output", str(stale)], capture_output=True, text=True, check=False
    )
    assert drift.returncode == 1 and "is stale" in drift.stderr


def test_schema_is_valid_2020_12_and_covers_every_field():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert list(schema["properties"]) == [f.name for f in FIELDS]


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        ({"parameters": "7.5B"}, True),
        ({"parameters": 7, "num_layers": 2, "flash_attention": False}, True),
        ({"hf_config": "config.json", "sequence_length": 4096}, True),
        ({"hf_config": "config.json", "num_layers": 2}, False),
        ({"hf_config": "config.json", "parameters": "7B"}, False),
        ({"sequence_length": 4096}, False),
        ({"parameters": "7B", "extra": 1}, False),
        ({"parameters": "7.5X"}, False),
        ({"parameters": "7B", "activation_checkpointing": "partial"}, False),
    ],
)
def test_schema_agrees_with_the_loader(here, document, valid):
    write(here / "config.json", LLAMA_CONFIG)
    schema_ok = jsonschema.Draft202012Validator(json_schema()).is_valid(document)
    assert schema_ok is valid
    name = write(here / "doc.json", json.dumps(document))
    if valid:
        load_description(name)
    else:
        error_of(name)

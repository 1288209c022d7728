"""``--model ORG/NAME`` offline (model/hub.py): a model directory, the Hugging Face cache, the
shipped catalog, in that order; a miss in one line; the catalog in sync with its generator and
every entry's count equal to the published one.

The fake caches are laid out as huggingface_hub 2.x lays them out (file_download.py:
``models--ORG--NAME/refs/main`` holds the commit hash without a newline,
``snapshots/<commit>/config.json`` is a relative symlink into ``blobs/``). tests/oracle/
test_model_hub_oracle.py checks the layout and the cache folder with huggingface_hub itself.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.model import hub
from zeroadvisor.model.description import load_model
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config

REPO = Path(__file__).resolve().parent.parent
INDEX = json.loads((REPO / "zeroadvisor" / "model" / "catalog" / "index.json").read_text(encoding="utf-8"))

LLAMA2_7B = 6_738_415_616  # meta-llama/Llama-2-7b-hf, keras-hub llama2_7b_en "params"


def llama(vocab: int = 32000) -> dict:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 32, "vocab_size": vocab, "tie_word_embeddings": False}


def llama_count(vocab: int) -> int:
    # Llama-2-7b with another vocabulary: embed_tokens and the untied lm_head are vocab x 4096 each.
    return LLAMA2_7B + 2 * (vocab - 32000) * 4096


def cache_repo(cache: Path, repo_id: str, snapshots: dict[str, dict], main: str | None) -> Path:
    """A model repo in a hub cache as huggingface_hub writes it; ``main``: the commit refs/main names."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    for i, (commit, config) in enumerate(snapshots.items()):
        blob = f"{i:040x}"  # the blob's etag in the real cache; any unique name here
        (repo / "blobs" / blob).write_text(json.dumps(config), encoding="utf-8")
        snap = repo / "snapshots" / commit
        snap.mkdir(parents=True)
        (snap / "config.json").symlink_to(Path("..", "..", "blobs", blob))
    if main is not None:
        (repo / "refs").mkdir()
        # no newline, as _cache_commit_hash_for_specific_revision
        (repo / "refs" / "main").write_text(main, encoding="utf-8")
    return repo


C1, C2 = "a" * 40, "b" * 40


@pytest.fixture
def env(tmp_path, monkeypatch):
    """No cache anywhere unless the test makes one; cwd is an empty folder."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return tmp_path


# --------------------------------------------------------------------------- the cache


def test_cache_folder_follows_huggingface_hub_env_order(env, monkeypatch):
    assert hub.hub_cache_dir() == env / "home" / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(env / "xdg"))
    assert hub.hub_cache_dir() == env / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(env / "hfhome"))
    assert hub.hub_cache_dir() == env / "hfhome" / "hub"
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(env / "legacy"))
    assert hub.hub_cache_dir() == env / "legacy"
    monkeypatch.setenv("HF_HUB_CACHE", "~/hubcache")
    assert hub.hub_cache_dir() == env / "home" / "hubcache"


def test_hub_id_from_hf_hub_cache_follows_refs_main(env, monkeypatch):
    cache = env / "cache"
    cache_repo(cache, "acme/llama-like", {C1: llama(32001), C2: llama(32002)}, main=C1)
    os.utime(cache / "models--acme--llama-like" / "snapshots" / C2, (2e9, 2e9))  # newer, but not main
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = hub.resolve("acme/llama-like")
    assert (found.origin, found.path.parent.name, found.note) == ("hf-cache", C1, None)
    spec, _ = load_model("acme/llama-like")
    assert spec.parameters == llama_count(32001)
    assert "Hugging Face cache" in spec.source


def test_hub_id_from_hf_home(env, monkeypatch):
    cache_repo(env / "hfhome" / "hub", "acme/llama-like", {C1: llama(32003)}, main=C1)
    monkeypatch.setenv("HF_HOME", str(env / "hfhome"))
    spec, _ = load_model("acme/llama-like")
    assert spec.parameters == llama_count(32003)


def test_hub_id_from_the_default_cache(env):
    cache_repo(env / "home" / ".cache" / "huggingface" / "hub", "gpt2", {C1: llama(32004)}, main=C1)
    spec, _ = load_model("gpt2")  # the user's cached gpt2 wins over the catalog's
    assert spec.parameters == llama_count(32004)


def test_without_refs_main_the_newest_snapshot_is_used_and_said(env, monkeypatch):
    cache = env / "cache"
    repo = cache_repo(cache, "acme/llama-like", {C1: llama(32001), C2: llama(32002)}, main=None)
    os.utime(repo / "snapshots" / C1 / "config.json", (2e9, 2e9), follow_symlinks=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    spec, _ = load_model("acme/llama-like")
    assert spec.parameters == llama_count(32001)
    assert f"no refs/main: used the newest of 2 snapshots, {C1}" in spec.notes[0]


def test_refs_main_naming_a_missing_snapshot_is_a_miss_that_says_so(env, monkeypatch):
    cache = env / "cache"
    cache_repo(cache, "acme/llama-like", {C1: llama()}, main=C2)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    with pytest.raises(ModelError, match=f"refs/main of .* names snapshot '{C2}', which has no config.json"):
        hub.resolve("acme/llama-like")


# --------------------------------------------------------------------------- precedence


def test_directory_then_cache_then_catalog(env, monkeypatch):
    name = "meta-llama/Llama-2-7b-hf"
    cache = env / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    local = Path(name)
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(llama(32010)), encoding="utf-8")
    cache_repo(cache, name, {C1: llama(32020)}, main=C1)

    assert load_model(name)[0].parameters == llama_count(32010)  # the directory
    (local / "config.json").unlink()
    local.rmdir()
    assert load_model(name)[0].parameters == llama_count(32020)  # the cache
    (cache / "models--meta-llama--Llama-2-7b-hf" / "refs" / "main").unlink()
    for snap in (cache / "models--meta-llama--Llama-2-7b-hf" / "snapshots").iterdir():
        (snap / "config.json").unlink()
    spec, _ = load_model(name)  # the catalog
    assert spec.parameters == LLAMA2_7B
    assert spec.source.startswith("zeroadvisor catalog: meta-llama/Llama-2-7b-hf")


def test_a_hub_id_in_hf_config_resolves_as_model_does(env, monkeypatch):
    # issue 32: `hf_config: meta-llama/Llama-3.1-8B` looked for a local folder where --model takes the Hub id
    from zeroadvisor.model.description import load_description

    name = "meta-llama/Llama-2-7b-hf"
    described = env / "described"
    described.mkdir()
    description = described / "model.yaml"
    description.write_text(f"hf_config: {name}\nsequence_length: 4096\n", encoding="utf-8")
    spec, shape = load_description(description)  # the catalog (no cache here)
    assert spec.parameters == LLAMA2_7B == load_model(name)[0].parameters and shape.sequence_length == 4096
    assert spec.source == (f"{description} -> zeroadvisor catalog: {name} "
                           f"(config.json of {INDEX['models'][name]['source']})")
    cache = env / "cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    cache_repo(cache, name, {C1: llama(32020)}, main=None)
    spec, _ = load_description(description)  # the cache before the catalog, and its note
    assert spec.parameters == llama_count(32020) and "no refs/main: used the only snapshot" in spec.notes[0]
    local = described / name  # a folder of that name beside the description wins, as for --model
    local.mkdir(parents=True)
    (local / "config.json").write_text(json.dumps(llama(32010)), encoding="utf-8")
    assert load_description(description)[0].parameters == llama_count(32010)
    Path(name).mkdir(parents=True)  # the current folder is not the description's: --model's folder is
    (Path(name) / "config.json").write_text(json.dumps(llama(32030)), encoding="utf-8")
    assert load_description(description)[0].parameters == llama_count(32010)


def test_a_model_description_naming_a_hub_id_runs_from_the_command_line(env, cli):
    # the Action's `model:` input: a description beside the configs, the model by its Hub id
    Path("model.yaml").write_text("hf_config: meta-llama/Llama-3.1-8B\nsequence_length: 4096\n", encoding="utf-8")
    result = cli("estimate", "--model", "model.yaml", "--gpus", "8", "--gpu-memory", "80GiB", "--format", "json")
    assert result.returncode == 0, result.stderr
    model = json.loads(result.stdout)["model"]
    assert model["parameters"] == 8_030_261_248 and "zeroadvisor catalog: meta-llama/Llama-3.1-8B" in model["source"]


def test_a_hub_id_in_hf_config_found_nowhere_is_one_line_at_the_key(env):
    from zeroadvisor.model.description import load_description

    Path("model.yaml").write_text("sequence_length: 4096\nhf_config: acme/nope-7b\n", encoding="utf-8")
    with pytest.raises(ModelError) as raised:
        load_description("model.yaml")
    message = str(raised.value)
    assert message.startswith("model.yaml:2:12: hf_config model acme/nope-7b not found offline: ")
    assert "Give hf_config the path of a config.json" in message and "\n" not in message


def test_an_existing_file_is_read_as_before(env):
    Path("model.json").write_text(json.dumps(llama(32030)), encoding="utf-8")
    assert load_model("model.json")[0].parameters == llama_count(32030)


def test_a_directory_without_config_json(env, cli):
    Path("empty").mkdir()
    result = cli("estimate", "--model", "empty", "--gpus", "8", "--gpu-memory", "80GiB")
    assert result.returncode == 2
    assert result.stderr.strip().endswith("empty: is a directory without config.json: give the model directory "
                                          "that save_pretrained wrote, or the path of a config.json or model "
                                          "description")


# --------------------------------------------------------------------------- catalog


@pytest.mark.parametrize("name", ["meta-llama/Llama-2-7b-hf", "META-LLAMA/llama-2-7B-HF"])
def test_catalog_hit_is_case_insensitive(env, name):
    found = hub.resolve(name)
    assert found.origin == "catalog"
    assert load_model(name)[0].parameters == LLAMA2_7B


def test_former_ids_resolve_to_the_renamed_model(env):
    # openai-community/gpt2: 124,439,808 (keras-hub gpt2_base_en)
    spec, _ = load_model("gpt2")
    assert spec.parameters == 124_439_808
    assert "openai-community/gpt2" in spec.source and "catalog's name for gpt2" in spec.source


def test_miss_names_every_place_searched(env, monkeypatch, cli):
    monkeypatch.setenv("HF_HUB_CACHE", str(env / "cache"))
    result = cli("estimate", "--model", "meta-llama/Llama-2-7b", "--gpus", "8", "--gpu-memory", "80GiB")
    assert result.returncode == 2
    assert result.stdout == ""
    line = result.stderr.strip()
    assert "\n" not in line
    assert "no file or directory meta-llama/Llama-2-7b" in line
    assert f"no {env / 'cache' / 'models--meta-llama--Llama-2-7b'}" in line
    assert (f"not in zeroadvisor's catalog of {len(INDEX['models'])} models "
            "(did you mean meta-llama/Llama-2-7b-hf") in line
    assert line.endswith("Give --model PATH (a config.json, a model directory or a model description), or fetch "
                         "the config: hf download meta-llama/Llama-2-7b config.json")


def test_model_name_under_another_organisation_is_suggested(env):
    assert hub.suggestions("someone/Qwen3-8B")[0] == "Qwen/Qwen3-8B"


def test_not_a_hub_id_is_a_missing_file(env, cli):
    result = cli("estimate", "--model", "configs/../x.json", "--gpus", "1", "--gpu-memory", "80GiB")
    assert (result.returncode, result.stderr.strip()) == (2, "zeroadvisor: configs/../x.json: no such file")


def test_peft_flags_apply_to_a_catalog_model(env):
    full, _ = load_model("meta-llama/Llama-2-7b-hf")
    lora, _ = load_model("meta-llama/Llama-2-7b-hf", {"method": "lora", "r": 8, "target_modules": ["q_proj", "v_proj"],
                                                           "quantization": None})
    # LoRA r=8 on q_proj and v_proj: 32 layers x 2 x 8 x (4096 + 4096) = 4,194,304
    # (the figure peft's print_trainable_parameters gives for Llama-2-7b at r=8).
    assert (full.trainable_parameters, lora.parameters, lora.trainable_parameters) == (None, LLAMA2_7B, 4_194_304)


def test_catalog_is_in_sync_with_its_generator():
    run = subprocess.run([sys.executable, str(REPO / "tools" / "gen_model_catalog.py"), "--check"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr


# The models issue 11 names (at least 40 in all).
REQUIRED = ["meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-70b-hf",
            "meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-70B", "meta-llama/Llama-3.1-8B",
            "meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B", "meta-llama/Llama-3.2-1B",
            "meta-llama/Llama-3.2-3B", "meta-llama/Llama-3.3-70B-Instruct", "mistralai/Mistral-7B-v0.1",
            "mistralai/Mixtral-8x7B-v0.1", "mistralai/Mixtral-8x22B-v0.1", "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B",
            "Qwen/Qwen2.5-3B", "Qwen/Qwen2.5-7B", "Qwen/Qwen2.5-14B", "Qwen/Qwen2.5-32B", "Qwen/Qwen2.5-72B",
            "Qwen/Qwen3-8B", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-235B-A22B", "google/gemma-2-2b", "google/gemma-2-9b",
            "google/gemma-2-27b", "google/gemma-3-1b-pt", "microsoft/Phi-3-mini-4k-instruct", "microsoft/phi-4",
            "deepseek-ai/DeepSeek-V2", "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b", "openai/gpt-oss-120b",
            "tiiuae/falcon-7b", "tiiuae/falcon-40b", "facebook/opt-1.3b", "facebook/opt-66b", "bigscience/bloom-560m",
            "bigscience/bloom", "google-t5/t5-base", "google/flan-t5-xxl", "openai-community/gpt2",
            "openai-community/gpt2-xl"]


def test_catalog_holds_the_most_used_open_models():
    assert len(INDEX["models"]) >= 40
    assert [m for m in REQUIRED if m not in INDEX["models"]] == []


def _within_published(count: int, published: int | str) -> bool:
    """Exact; rounded or truncated to the printed digits ("7.61B": one unit of the last digit);
    or a nominal size ("~40B": within 10 %), as the source table's header defines."""
    if isinstance(published, int):
        return count == published
    match = re.fullmatch(r"(~?)([0-9]+(?:\.([0-9]+))?)([MB])", published)
    assert match, published
    unit = {"M": 10**6, "B": 10**9}[match.group(4)]
    value = float(match.group(2)) * unit
    if match.group(1):
        return abs(count - value) <= 0.10 * value
    return abs(count - value) <= unit * 10 ** -len(match.group(3) or "")


@pytest.mark.parametrize("model_id", sorted(INDEX["models"]))
def test_catalog_count_matches_the_published_count(model_id):
    row = INDEX["models"][model_id]
    config = json.loads((REPO / "zeroadvisor" / "model" / "catalog" / row["file"]).read_text(encoding="utf-8"))
    count = spec_from_hf_config(config).parameters
    if row.get("checkpoint_lm_head") == "untied":
        # The checkpoint's own lm_head, which transformers 5.24 ties when building T5 (families.py).
        count += config["vocab_size"] * config["d_model"]
    assert _within_published(count, row["published_parameters"]), (count, row)
    assert row["source"] == f"https://huggingface.co/{model_id}/blob/{row['revision']}/config.json"
    assert row["published_source"]

"""The Hugging Face configs the advisor tests use, read from the catalog shipped with zeroadvisor
(zeroadvisor/model/catalog, each with its source): one copy of each config.json in the repository."""

from __future__ import annotations

import json

from zeroadvisor.model.hub import catalog_config_path, catalog_entry


def hf_config(repo_id: str) -> dict:
    entry = catalog_entry(repo_id)
    assert entry is not None, f"{repo_id} is not in the catalog"
    return json.loads(catalog_config_path(entry).read_text("utf-8"))


LLAMA2_7B = hf_config("meta-llama/Llama-2-7b-hf")
LLAMA2_70B = hf_config("meta-llama/Llama-2-70b-hf")
OPT_1_3B = hf_config("facebook/opt-1.3b")

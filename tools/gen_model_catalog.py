#!/usr/bin/env python
"""Write zeroadvisor/model/catalog/ (the models ``--model ORG/NAME`` knows offline) from
tools/model_catalog_source.yaml.

    python tools/gen_model_catalog.py           rewrite the catalog
    python tools/gen_model_catalog.py --check   exit 1, naming the files that differ, if it is out of date

Per model, ``<org>--<name>.json`` holds the keys of its config.json that the model reader uses
(a valid config.json: transformers' AutoConfig reads it), and ``index.json`` maps each Hub id
to that file, the URL the config was taken from, former ids, and the published parameter
count with its source. Every config is counted here with zeroadvisor's exact counter
(model/hf.py): a config the reader cannot count never reaches the catalog. tests/
test_model_hub.py runs ``--check`` and compares each count with the published one.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "model_catalog_source.yaml"
CATALOG = ROOT / "zeroadvisor" / "model" / "catalog"
HUB = "https://huggingface.co"

sys.path.insert(0, str(ROOT))
from zeroadvisor.model.hf import spec_from_hf_config  # noqa: E402
from zeroadvisor.model.hub import CATALOG_INDEX, is_repo_id  # noqa: E402


def file_name(model_id: str) -> str:
    return model_id.replace("/", "--") + ".json"


def dump(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def build(source: dict[str, Any]) -> dict[str, str]:
    """File name -> text of every file the catalog holds."""
    default_revision = source.get("defaults", {}).get("revision", "main")
    files: dict[str, str] = {}
    index: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for row in source["models"]:
        model_id = row["id"]
        names = [model_id, *row.get("aliases", [])]
        for name in names:
            if not is_repo_id(name):
                raise SystemExit(f"{SOURCE.name}: {name!r} is not a Hub model id")
            if name.lower() in seen:
                raise SystemExit(f"{SOURCE.name}: {name} is listed twice ({seen[name.lower()]})")
            seen[name.lower()] = model_id
        config = row["config"]
        try:
            spec_from_hf_config(config)
        except ValueError as err:
            raise SystemExit(f"{SOURCE.name}: {model_id}: the reader cannot count its config: {err}") from None
        revision = row.get("revision", default_revision)
        name = file_name(model_id)
        files[name] = dump(config)
        entry: dict[str, Any] = {
            "file": name,
            "source": f"{HUB}/{model_id}/blob/{revision}/config.json",
            "revision": revision,
        }
        if row.get("aliases"):
            entry["aliases"] = list(row["aliases"])
        entry["published_parameters"] = row["parameters"]
        entry["published_source"] = row["published"]
        if row.get("checkpoint_lm_head"):
            entry["checkpoint_lm_head"] = row["checkpoint_lm_head"]
        index[model_id] = entry
    files[CATALOG_INDEX] = dump(
        {
            "generated_by": "tools/gen_model_catalog.py from tools/model_catalog_source.yaml; do not edit",
            "models": dict(sorted(index.items(), key=lambda kv: kv[0].lower())),
        }
    )
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    wanted = build(yaml.safe_load(SOURCE.read_text(encoding="utf-8")))
    present = {p.name: p.read_text(encoding="utf-8") for p in CATALOG.glob("*.json")} if CATALOG.is_dir() else {}
    stale = sorted(set(present) - set(wanted))
    changed = sorted(n for n, text in wanted.items() if present.get(n) != text)
    if args.check:
        if stale or changed:
            print(f"model catalog out of date: changed {changed or 'none'}, stale {stale or 'none'}; "
                  f"run python tools/gen_model_catalog.py", file=sys.stderr)
            return 1
        return 0
    CATALOG.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (CATALOG / name).unlink()
    for name in changed:
        (CATALOG / name).write_text(wanted[name], encoding="utf-8")
    print(f"{len(wanted) - 1} models; {len(changed)} files written, {len(stale)} removed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Agreement of ``lint --deepspeed-version V`` with release V's own parser, for every installed release.

    python tools/install_deepspeed_release.py 0.9.5 0.10.3 ... 0.19.7   (see docs/deepspeed-releases.md)
    python benchmarks/releases.py [--releases-dir DIR ...] [--corpus] [--write]

The cases are benchmarks/release_cases.py (real configs, one release-sensitive change each) and, with
``--corpus``, every JSON config of ../shared/corpus/real as the Hugging Face Trainer hands it to DeepSpeed
("auto" filled; ``corpus_files``), linted at world size 1 as the oracle reads it. Each release's verdict comes
from its own ``DeepSpeedConfig`` (tools/ds_release_oracle.py, in a subprocess with the release on PYTHONPATH); ours is
whether lint, read as that release, reports an error other than the launch-time checks no parser makes
(LAUNCH_TIME and CONSTRUCTED below). ``--write`` stores the table in benchmarks/releases.json
and benchmarks/releases.md.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
from typing import Any

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import release_cases  # noqa: E402  (needs HERE on sys.path)

# Rules whose errors the engine, an optimizer or a scheduler raises after the config is parsed (or that need the
# world size), so no DeepSpeedConfig call shows them; every release in 0.9-0.19 makes these checks.
LAUNCH_TIME = frozenset({
    "ZA301", "ZA310",  # "auto" no integration fills, Trainer mismatches: what the integrations check
    "ZA701", "ZA702", "ZA703", "ZA704", "ZA705", "ZA706", "ZA707", "ZA708", "ZA709",  # optimizer, scheduler, ZeRO
    "ZA901", "ZA903",  # parallel layouts built at engine init
    "ZA404",  # managed_gradient_accumulation: the engine's sanity check
    "ZA050", "ZA052", "ZA053", "ZA054",  # Accelerate launcher inputs
})
# Sections DeepSpeedConfig stores without building: the optimizer and the scheduler are constructed in
# deepspeed.initialize (runtime/engine.py _configure_optimizer, _scheduler_from_config), so what their
# constructors refuse (warmup_num_steps <= 0 from 0.19, an unknown keyword) is launch-time whatever the rule.
CONSTRUCTED = ("/optimizer/", "/scheduler/")
DEFAULT_DIR = ROOT / ".venv" / "deepspeed-releases"


def oracle(release_dir: pathlib.Path | None, files: list[pathlib.Path]) -> dict[str, dict[str, Any]]:
    """Release verdicts; ``release_dir`` None: the venv's own DeepSpeed (the latest)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if release_dir is not None:
        env["PYTHONPATH"] = str(release_dir)
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "ds_release_oracle.py"), *map(str, files)],
                          env=env, capture_output=True, text=True, check=True)
    return {row["file"]: row for row in map(json.loads, done.stdout.splitlines())}


def ours(version: str, files: list[pathlib.Path], gpus: int | None = None) -> dict[str, list[str]]:
    import zeroadvisor

    result = zeroadvisor.lint(*map(str, files), deepspeed_version=version, gpus=gpus)
    errors: dict[str, list[str]] = {str(f): [] for f in files}
    for finding in result.findings:
        launch_time = finding.code in LAUNCH_TIME or finding.pointer.startswith(CONSTRUCTED)
        if finding.severity == "error" and not launch_time:
            errors.setdefault(finding.file, []).append(f"{finding.code} {finding.message}")
    return errors


def compare(release_dir: pathlib.Path | None, files: list[pathlib.Path], gpus: int | None = None,
            verdicts: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """``gpus`` 1 lints with the oracle's world size (the batch checked exactly); None as a user without --gpus.
    ``verdicts``: the release's, where already read (``oracle``)."""
    verdicts = verdicts if verdicts is not None else oracle(release_dir, files)
    version = next(iter(verdicts.values()))["release"]
    lint = ours(version, files, gpus)
    disagree = []
    for name, row in verdicts.items():
        rejected, flagged = not row["accepted"], bool(lint.get(name))
        if rejected != flagged:
            disagree.append({"file": pathlib.Path(name).name, "release_error": row["error"],
                             "lint_errors": lint.get(name, [])[:3]})
    return {"release": version, "files": len(files), "agree": len(files) - len(disagree), "disagree": disagree}


def corpus_files(into: pathlib.Path) -> list[pathlib.Path]:
    """Every JSON config of the corpus as DeepSpeed gets it under the Hugging Face Trainer (its defaults, world
    size 1): "auto" filled as transformers' HfTrainerDeepSpeedConfig fills it (zeroadvisor/deepspeed/hf_fill.py),
    since plain DeepSpeedConfig refuses "auto" batch sizes in every release, which says nothing about the
    release. A config that is no JSON object is left out."""
    from zeroadvisor.config.training_args import TrainingArgs
    from zeroadvisor.deepspeed import hf_fill

    manifest = release_cases.CORPUS / "MANIFEST.tsv"
    rows = [line.split("\t") for line in manifest.read_text(encoding="utf-8").splitlines()[1:]]
    into.mkdir(parents=True, exist_ok=True)
    files = []
    for row in rows:
        if len(row) <= 5 or row[5] != "yes" or not row[0].endswith(".json"):
            continue
        try:
            data = json.loads((release_cases.CORPUS / row[0]).read_text(encoding="utf-8"))
        except ValueError:
            continue  # hjson or comments: DeepSpeed's json.load refuses it in every release
        if not isinstance(data, dict):
            continue
        filled = hf_fill.accelerate_precision(hf_fill.fill(data, TrainingArgs(), 1, 4096).config, TrainingArgs())
        path = into / f"corpus--{pathlib.Path(row[0]).name}"
        path.write_text(json.dumps(filled, indent=2) + "\n", encoding="utf-8")
        files.append(path)
    return files


def _cell(text: str) -> str:
    """Text as one markdown table cell: pipes escaped, no line breaks."""
    return " ".join(text.split()).replace("|", "\\|")


def installed_releases(folders: list[pathlib.Path]) -> list[pathlib.Path]:
    """The release folders under ``folders``, oldest first (the first folder holding a release wins)."""
    found: dict[str, pathlib.Path] = {}
    for folder in folders:
        for path in folder.iterdir():
            if (path / "deepspeed").is_dir():
                found.setdefault(path.name, path)
    return [found[name] for name in sorted(found, key=lambda name: tuple(int(x) for x in name.split(".")))]


def _sharing(release: str) -> str:
    """The other releases that share ``release``'s entry, as runs ("0.16.6-0.16.8")."""
    from zeroadvisor.deepspeed import releases

    others = [v for v in releases.known() if v != release and releases.reads_as(v) == releases.reads_as(release)]
    return releases.span(others) if others else ""


def _standing_for(versions: list[str]) -> str:
    """The releases the rows of ``versions`` stand for (each with those sharing its entry), as runs."""
    from zeroadvisor.deepspeed import releases

    shared = {releases.reads_as(v) for v in versions}
    return releases.span(v for v in releases.known() if releases.reads_as(v) in shared)


def markdown(rows: list[dict[str, Any]]) -> str:
    """benchmarks/releases.md from the rows (benchmarks/releases.json)."""
    lines = ["# lint --deepspeed-version V against release V's own parser", "",
             ("Written by `python benchmarks/releases.py --corpus --write`; cases: benchmarks/release_cases.py "
              "(real configs with one release-sensitive change each) and every JSON config of the corpus, \"auto\" "
              "filled as the Hugging Face Trainer fills it, linted at the oracle's world size (--gpus 1)."), "",
             ("A release stands for the releases that share its entry (the same configuration code: "
              "docs/deepspeed-releases.md), named in the second column."), "",
             "| release | and | configs | agree | disagree |", "|---|---|---:|---:|---:|"]
    lines += [f"| {r['release']} | {_sharing(r['release'])} | {r['files']} | {r['agree']} | {len(r['disagree'])} |"
              for r in rows]
    missed: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        for miss in r["disagree"]:
            said = "; ".join(miss["lint_errors"]) or "no error"
            missed.setdefault((miss["file"], str(miss["release_error"]), said), []).append(r["release"])
    if missed:
        lines += ["", "## Disagreements", "", "| config | releases | release says | lint says |",
                  "|---|---|---|---|"]
        lines += [f"| {_cell(name)} | {_cell(_standing_for(versions))} | {_cell(error)} | {_cell(said)} |"
                  for (name, error, said), versions in sorted(missed.items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases-dir", type=pathlib.Path, action="append",
                        help=f"a folder of installed releases (repeatable; default {DEFAULT_DIR})")
    parser.add_argument("--corpus", action="store_true", help="also every JSON config of the corpus as it is")
    parser.add_argument("--only", nargs="*", help="these releases only")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    installed = installed_releases(args.releases_dir or [DEFAULT_DIR])
    releases: list[pathlib.Path | None] = [*installed, None]  # None: the venv's DeepSpeed, the latest
    if args.only:
        releases = [p for p in releases if (p.name if p else "latest") in args.only]
    with tempfile.TemporaryDirectory() as tmp:
        files = release_cases.write(pathlib.Path(tmp))
        corpus = corpus_files(pathlib.Path(tmp) / "corpus") if args.corpus else []
        rows = []
        for path in releases:
            row = compare(path, files)
            if corpus:  # at the oracle's world size, 1: the corpus's batch sizes are checked exactly
                extra = compare(path, corpus, gpus=1)
                row = {**row, "files": row["files"] + extra["files"], "agree": row["agree"] + extra["agree"],
                       "disagree": row["disagree"] + extra["disagree"]}
            rows.append(row)
    for row in rows:
        print(f"{row['release']:>7}  {row['agree']:>4}/{row['files']} agree")
        for miss in row["disagree"]:
            print(f"         {miss['file']}: release says {miss['release_error']}; lint: {miss['lint_errors']}")
    if args.write:
        (HERE / "releases.json").write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
        (HERE / "releases.md").write_text(markdown(rows), encoding="utf-8")
    return 0 if all(not row["disagree"] for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

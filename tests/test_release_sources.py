"""Release entries shared by source (tools/ds_release_sources.py) and the offline check of those claims
(tools/gen_releases.py --check): what CI can verify without installing more than its three releases."""

from __future__ import annotations

import importlib.util
import io
import json
import pathlib
import tarfile

import pytest

from conftest import load_script
from zeroadvisor.deepspeed import releases

sources = load_script("tools/ds_release_sources.py", "ds_release_sources")
generator = load_script("tools/gen_releases.py", "gen_releases")
DATA = pathlib.Path(releases.__file__).resolve().parent.parent / "schemas" / "ds_releases.json"


def test_a_key_named_as_an_attribute_or_in_a_docstring_is_not_read():
    """0.14.5's runtime/compiler.py says hasattr(torch.nn.Module, "compile"): no config key (the data once said
    0.14.5 reads 'compile'); a docstring naming a key does not read it either."""
    source = ('"""Set "compile" in ds_config."""\n'
              'ok = hasattr(torch.nn.Module, "compile") and getattr(x, "bf16", None)\n'
              'FP16 = "fp16"\nvalue = param_dict.get("amp", {})\n')
    assert sources.string_literals(source) == {"fp16", "amp"}


def test_same_as_joins_releases_of_one_recorded_fingerprint_in_runs():
    data = json.loads(DATA.read_text(encoding="utf-8"))
    order = list(data["releases"])
    for version, entry in data["releases"].items():
        holder = entry.get("same_as", version)
        assert data["releases"][holder]["source"] == entry["source"], version
        assert "same_as" not in data["releases"][holder] and "patch" in data["releases"][holder]
        between = order[min(order.index(version), order.index(holder)):max(order.index(version), order.index(holder))]
        assert all(data["releases"][v]["source"] == entry["source"] for v in between), version
    assert len({e["source"] for e in data["releases"].values()}) == sum("patch" in e for e in data["releases"].values())


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs the oracle extra (DeepSpeed)")
def test_the_installed_deepspeed_has_its_recorded_fingerprint():
    root = sources.venv_root()
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert data["latest"] == releases.latest()
    assert sources.fingerprint(root) == data["releases"][releases.latest()]["source"]


def _sdist(folder: pathlib.Path, release: str, files: dict[str, str]) -> None:
    with tarfile.open(folder / f"deepspeed-{release}.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(f"deepspeed-{release}/{name}")
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))


def test_check_reports_a_wrong_sharing_claim_and_a_changed_sdist(tmp_path):
    data = json.loads(DATA.read_text(encoding="utf-8"))
    assert generator.check([], None, DATA) == []
    data["releases"]["0.17.2"] = {"source": data["releases"]["0.17.2"]["source"], "same_as": "0.17.4"}
    tampered = tmp_path / "ds_releases.json"
    tampered.write_text(json.dumps(data), encoding="utf-8")
    problems = generator.check([], None, tampered)
    assert problems == ["0.17.2: same_as 0.17.4, whose source fingerprint differs or that has no entry"]
    # an sdist whose configuration code is not what was recorded (a republished or edited file)
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    _sdist(sdists, "0.16.7", {"deepspeed/__init__.py": "", "deepspeed/runtime/config.py": "X = 'fp16'\n"})
    problems = generator.check([], sdists, DATA)
    assert len(problems) == 1 and problems[0].startswith("0.16.7: its sdist's source fingerprint is ")

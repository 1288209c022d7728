"""lint --deepspeed-version V against release V's own parser, for the releases CI installs (the oracle).

.ci/run installs CI_RELEASES (tools/install_deepspeed_release.py --ci) into .venv/deepspeed-releases; each is
read in a subprocess with its folder first on PYTHONPATH (tools/ds_release_oracle.py), the venv's own DeepSpeed
being the latest. The cases are benchmarks/release_cases.py: real corpus configs with one release-sensitive
change each. benchmarks/releases.py runs the same comparison over every release line and the whole corpus.

Also the drift check: the entries of zeroadvisor/schemas/ds_releases.json for the installed releases are what
tools/gen_releases.py generates from them now.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from conftest import REPO, load_script

pytestmark = [pytest.mark.oracle, pytest.mark.corpus, pytest.mark.slow]
pytest.importorskip("deepspeed")

installer = load_script("tools/install_deepspeed_release.py", "install_deepspeed_release")
benchmark = load_script("benchmarks/releases.py", "releases_benchmark")
RELEASES_DIR = pathlib.Path(os.environ.get("ZEROADVISOR_RELEASES_DIR", installer.DEFAULT_INTO))


def _installed(version: str) -> pathlib.Path:
    path = RELEASES_DIR / version
    if not (path / "deepspeed" / "__init__.py").is_file():
        pytest.skip(f"DeepSpeed {version} not installed in {RELEASES_DIR}: "
                    "python tools/install_deepspeed_release.py --ci")
    return path


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> list[pathlib.Path]:
    files = benchmark.release_cases.write(tmp_path_factory.mktemp("release-cases"))
    if not files:
        pytest.skip(f"corpus absent: {benchmark.release_cases.CORPUS}")
    return files


@pytest.fixture(scope="module")
def verdicts(cases) -> Callable[[str], dict[str, dict[str, Any]]]:
    """Each release's verdicts on the cases, read once (a subprocess importing the release: seconds)."""
    read: dict[str, dict[str, dict[str, Any]]] = {}

    def of(version: str) -> dict[str, dict[str, Any]]:
        if version not in read:
            read[version] = benchmark.oracle(None if version == "latest" else _installed(version), cases)
        return read[version]
    return of


@pytest.mark.parametrize("version", [*installer.CI_RELEASES, "latest"])
def test_lint_agrees_with_the_release_parser(version, cases, verdicts):
    """An error exactly where the release's DeepSpeedConfig raises (launch-time checks aside, which no parser
    makes and every release shares: benchmarks/releases.py LAUNCH_TIME and CONSTRUCTED)."""
    row = benchmark.compare(None, cases, verdicts=verdicts(version))
    if version != "latest":
        assert row["release"] == version
    count = len(row["disagree"])
    assert row["disagree"] == [], f"{count} of {row['files']} cases disagree with DeepSpeed {row['release']}"
    assert row["files"] == len(cases) > 50


def test_the_cases_tell_the_releases_apart(verdicts):
    """The cases would not test release knowledge if every release gave them the same verdicts."""
    first, *others = installer.CI_RELEASES
    for other in others:
        differing = [name for name in verdicts(first)
                     if verdicts(first)[name]["accepted"] != verdicts(other)[name]["accepted"]]
        assert len(differing) >= 5, (first, other, differing)


def test_committed_release_knowledge_is_up_to_date():
    for version in installer.CI_RELEASES:
        _installed(version)
    done = subprocess.run([sys.executable, str(REPO / "tools" / "gen_releases.py"), "--check", "--releases-dir",
                           str(RELEASES_DIR)], capture_output=True, text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]

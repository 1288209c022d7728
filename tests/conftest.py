"""Shared test helpers. The real-config corpus is read from ../shared/corpus/real (never copied)."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, settings

# The oracle tests import DeepSpeed on machines without a GPU: its CPU accelerator, silently.
os.environ.setdefault("DS_ACCELERATOR", "cpu")

# Property tests that cannot hang or flake CI: in CI (CI=true, as GitHub Actions sets it) a
# fixed seed per test (derandomize), no example database, a deadline per example and a bounded
# number of examples, with the reproduction blob printed on failure. Elsewhere ("dev") random
# seeds with the same deadline, so local runs keep finding new inputs. Tests that set their own
# max_examples keep it; HYPOTHESIS_PROFILE overrides the choice (e.g. "dev" in CI to explore).
_DEADLINE_MS = 2000
settings.register_profile("ci", derandomize=True, database=None, deadline=_DEADLINE_MS, max_examples=100,
                          print_blob=True, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=_DEADLINE_MS, max_examples=100, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev"))

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("ZEROADVISOR_CORPUS", REPO.parent / "shared" / "corpus" / "real"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus folder; tests that need it skip cleanly where it is absent (CI makes skips fail)."""
    if not (CORPUS / "MANIFEST.tsv").is_file():
        pytest.skip(f"real-config corpus not found at {CORPUS}")
    return CORPUS


def load_script(relative: str, name: str) -> ModuleType:
    """A script of this repository (benchmarks/, tools/) as the module ``name``, executed once: registered in
    sys.modules (dataclasses look their module up there), so every test file that loads it shares one copy."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, REPO / relative)
        assert spec is not None and spec.loader is not None, relative
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def corpus_manifest(root: Path) -> list[dict[str, str]]:
    lines = (root / "MANIFEST.tsv").read_text("utf-8").splitlines()
    header = lines[0].split("\t")
    return [dict(zip(header, line.split("\t"), strict=False)) for line in lines[1:] if line.strip()]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under CI (ZEROADVISOR_NO_SKIPS=1) a skipped test is a failure: a green CI means the
    oracle and corpus tests really ran."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("ZEROADVISOR_NO_SKIPS") == "1" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.longrepr = f"skipped under ZEROADVISOR_NO_SKIPS=1 (CI requires oracle and corpus tests): {reason}"


@contextmanager
def must_finish(seconds: int, why: str = "a hang"):
    """Fail instead of hanging CI: a guard against a hang, not a speed target (those live in benchmarks/)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGALRM"):
        yield  # no alarm available: the test still checks the result
        return

    def expire(signum, frame):
        raise TimeoutError(f"did not finish within {seconds} s: {why}?")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)

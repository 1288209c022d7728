"""A test that runs past its budget fails alone; the run goes on and prints its summary.

Runs pytest on two throwaway tests under this project's own [tool.pytest.ini_options] (only the budget
shortened), so a change back to a timeout method that ends the whole run fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_a_timeout_fails_one_test_and_the_run_goes_on(tmp_path):
    (tmp_path / "test_budget.py").write_text(
        "import time\n\n"
        "def test_too_slow():\n    time.sleep(30)\n\n"
        "def test_after_it():\n    assert True\n",
        "utf-8",
    )
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(REPO / "pyproject.toml"),
         "--rootdir", str(tmp_path), "-o", "timeout=2", str(tmp_path / "test_budget.py")],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert "1 failed, 1 passed" in run.stdout, run.stdout + run.stderr
    assert "Timeout" in run.stdout

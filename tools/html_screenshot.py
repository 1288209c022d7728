#!/usr/bin/env python3
"""Write docs/html-report.png: the HTML report of a sample config as headless Chromium renders it
(the README shows it). Needs Debian's ``chromium``; run from anywhere."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "docs" / "html-report.png"
COMMAND = ["check", "sample_configs/zero2_bf16.json", "--model", "sample_configs/models/llama-2-7b.yaml",
           "--gpus", "8", "--gpu-memory", "24GB", "--cpu-memory", "512GB", "--suggest", "--format", "html"]


def main() -> int:
    sys.path.insert(0, str(REPO))
    from zeroadvisor import cli

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    os.chdir(REPO)
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    with contextlib.redirect_stdout(stdout):
        cli.run(COMMAND)
    stdout.flush()
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        page.write_bytes(stdout.buffer.getvalue())
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        f"--user-data-dir={tmp}/profile", f"--screenshot={OUT}", "--window-size=1040,1500",
                        page.as_uri()], check=True, capture_output=True, timeout=120)
    print(f"wrote {OUT.relative_to(REPO)} ({OUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

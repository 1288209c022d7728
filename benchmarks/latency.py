"""Whole-process latency of `zeroadvisor lint`, against a bare interpreter start.

Targets (issue #2): linting one file takes at most 12x `python -c pass` of the same
interpreter; the whole corpus in one call takes at most 3x one file.

    python benchmarks/latency.py [--corpus DIR] [--runs 15] [--check]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT.parent / "shared" / "corpus" / "real"
ONE_FILE_LIMIT, CORPUS_LIMIT = 12.0, 3.0


def median_seconds(command: list[str], runs: int) -> float:
    samples = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples[1:])  # the first run warms the page cache


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--check", action="store_true", help="exit 1 if a target is missed")
    args = parser.parse_args()

    script = shutil.which("zeroadvisor")
    lint = [script] if script else [sys.executable, "-m", "zeroadvisor"]
    one = ROOT / "sample_configs" / "zero3_offload.json"
    bare = median_seconds([sys.executable, "-c", "pass"], args.runs)
    single = median_seconds([*lint, "lint", "--fail-on", "never", str(one)], args.runs)
    rows = [("python -c pass", bare, 1.0), ("lint one file", single, single / bare)]
    ok = single <= ONE_FILE_LIMIT * bare
    if args.corpus.is_dir():
        files = sum(1 for p in args.corpus.rglob("*") if p.suffix in (".json", ".hjson"))
        whole = median_seconds([*lint, "lint", "--fail-on", "never", str(args.corpus)], max(3, args.runs // 3))
        rows.append((f"lint corpus ({files} files)", whole, whole / bare))
        ok = ok and whole <= CORPUS_LIMIT * single
        corpus_ratio = f"{whole / single:.2f}x one file (target <= {CORPUS_LIMIT:g}x)"
    else:
        corpus_ratio = "corpus not found: skipped"
    print(f"{'case':<28} {'median ms':>10} {'x bare':>8}")
    for name, seconds, ratio in rows:
        print(f"{name:<28} {seconds * 1000:>10.1f} {ratio:>8.2f}")
    print(f"one file: {single / bare:.2f}x bare (target <= {ONE_FILE_LIMIT:g}x); corpus: {corpus_ratio}")
    return 0 if ok or not args.check else 1


if __name__ == "__main__":
    sys.exit(main())

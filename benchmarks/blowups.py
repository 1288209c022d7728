"""Time and peak memory of the size-driven paths that blew up before (issue 20, defect 8; issue 32, item 1).

    python benchmarks/blowups.py

Each case runs in a fresh interpreter (its own peak RSS): LoRA counting on a model of 2^30 layers
(before: MemoryError; 2^24 layers took 3.7 GB and 7 s), ``check`` with ``COLUMNS=10000000`` (before:
72 s and 1 GB of output), and a 14.8 MB ``config.json`` read as a model description (before: 42 s and
1.3 GB through the YAML parser). Targets: each under 5 s and 300 MB peak RSS on a 2-core machine.

Then ``lint`` of a config in a repository whose pin file is hostile (the pin search reads it; before: a 1 MB
``environment.yml`` 13-15 s, a 4.8 MB ``setup.py`` 1.8 GB, a 7 KB nested ``setup.py`` an uncaught MemoryError,
a ``requirements.txt`` linked to ``/dev/zero`` read until MemoryError, a FIFO one blocking forever). Targets:
each under 2 s and 200 MB, the whole ``lint`` process. Exits 1 if a case misses its target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS, TARGET_RSS_MB = 5.0, 300.0
PIN_SECONDS, PIN_RSS_MB = 2.0, 200.0  # a pin file only decides the release: it must cost next to nothing
LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32000, "hidden_size": 4096,
         "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32}

LORA = f"""
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config
from zeroadvisor.model.peft import PeftSettings, count
config = {{**{LLAMA!r}, "num_hidden_layers": 2**30}}
print(count(layout_from_hf_config(config)[2], PeftSettings(r=16, target_modules=("q_proj", "v_proj")),
            spec_from_hf_config(config)).trainable)
"""

CONFIG_JSON = """
import sys
from zeroadvisor.model.description import load_hf_config
print(load_hf_config(sys.argv[1])[1].parameters)
"""

RSS = "import resource, sys; print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, file=sys.stderr)"


def _run(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """(seconds, peak RSS in MB) of ``argv`` run by a wrapper interpreter that reports its child's peak (the
    seconds include the wrapper's start, about 30 ms). A child that runs 30 s, or exits with a usage error or a
    crash (2, 3, a signal), counts as infinitely large: a miss."""
    wrapper = ("import subprocess, sys; code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
               f"stderr=subprocess.DEVNULL, timeout=30).returncode; {RSS}; sys.exit(code)")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **(env or {})}, check=False)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        return seconds, float("inf")
    return seconds, float(done.stderr.strip().splitlines()[-1])


def _pin_repositories(tmp: Path) -> dict[str, Path]:
    """One repository per hostile pin file, each with a config beside it: name -> the config."""
    files = {
        "environment.yml": "name: big\ndependencies:\n" + "".join(f"  - pkg{i}=1.{i}\n" for i in range(70_000))
                           + "  - pip:\n    - deepspeed==0.14.5\n",
        "setup.py": "from setuptools import setup\nX = [" + ",".join(map(str, range(700_000))) + "]\n"
                    "setup(install_requires=['deepspeed==0.14.5'])\n",
        "setup.py, nested": "from setuptools import setup  # deepspeed\nx = " + "-" * 7000 + "1\n"
                            "setup(install_requires=['deepspeed==0.14.5'])\n",
    }
    configs = {}
    for label, text in files.items():
        folder = tmp / label.replace(" ", "").replace(",", "_")
        (folder / ".git").mkdir(parents=True)
        (folder / label.split(",")[0]).write_text(text)
        configs[f"lint, {len(text.encode()) / 1e6:.2f} MB {label}"] = folder
    if hasattr(os, "mkfifo"):
        zero, fifo = tmp / "zero", tmp / "fifo"
        for folder in (zero, fifo):
            (folder / ".git").mkdir(parents=True)
        (zero / "requirements.txt").symlink_to("/dev/zero")
        os.mkfifo(fifo / "requirements.txt")
        configs["lint, requirements.txt -> /dev/zero"] = zero
        configs["lint, requirements.txt a FIFO"] = fifo
    for folder in configs.values():
        (folder / "ds_config.json").write_text('{"train_batch_size": 8}\n')
    return {label: folder / "ds_config.json" for label, folder in configs.items()}


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "config.json"
        labels = {str(i): f"LABEL_{i}" for i in range(500_000)}
        big.write_text(json.dumps({**LLAMA, "id2label": labels}, indent=2))
        limits = (TARGET_SECONDS, TARGET_RSS_MB)
        cases = {
            "LoRA count, 2^30 layers": ([sys.executable, "-c", LORA], None, limits),
            "check, COLUMNS=10000000": ([sys.executable, "-m", "zeroadvisor", "check",
                                         "sample_configs/zero2_bf16.json", "--params", "7B", "--gpus", "8",
                                         "--gpu-memory", "24GB", "--all", "--verbose"], {"COLUMNS": "10000000"},
                                        limits),
            f"config.json of {big.stat().st_size / 1e6:.1f} MB": ([sys.executable, "-c", CONFIG_JSON, str(big)], None,
                                                                  limits),
        }
        for name, config in _pin_repositories(Path(tmp)).items():
            cases[name] = ([sys.executable, "-m", "zeroadvisor", "lint", str(config)], None, (PIN_SECONDS, PIN_RSS_MB))
        missed = 0
        for name, (argv, env, (most_seconds, most_mb)) in cases.items():
            seconds, rss = _run(argv, env)
            ok = seconds < most_seconds and rss < most_mb
            missed += not ok
            print(f"{name:44} {seconds:6.2f} s {rss:8.1f} MB  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

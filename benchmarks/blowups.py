"""Time and peak memory of the size-driven paths that blew up before (issue 20, defect 8).

    python benchmarks/blowups.py

Each case runs in a fresh interpreter (its own peak RSS): LoRA counting on a model of 2^30 layers
(before: MemoryError; 2^24 layers took 3.7 GB and 7 s), ``check`` with ``COLUMNS=10000000`` (before:
72 s and 1 GB of output), and a 14.8 MB ``config.json`` read as a model description (before: 42 s and
1.3 GB through the YAML parser). Targets: each under 5 s and 300 MB peak RSS on a 2-core machine;
exits 1 if one misses.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET_SECONDS, TARGET_RSS_MB = 5.0, 300.0
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
    """(seconds, peak RSS in MB) of ``argv`` run by a wrapper interpreter that reports its child's peak."""
    wrapper = f"import subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); {RSS}"
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), **(env or {})}, check=True)
    return time.perf_counter() - start, float(done.stderr.strip().splitlines()[-1])


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "config.json"
        labels = {str(i): f"LABEL_{i}" for i in range(500_000)}
        big.write_text(json.dumps({**LLAMA, "id2label": labels}, indent=2))
        cases = {
            "LoRA count, 2^30 layers": ([sys.executable, "-c", LORA], None),
            "check, COLUMNS=10000000": ([sys.executable, "-m", "zeroadvisor", "check",
                                         "sample_configs/zero2_bf16.json", "--params", "7B", "--gpus", "8",
                                         "--gpu-memory", "24GB", "--all", "--verbose"], {"COLUMNS": "10000000"}),
            f"config.json of {big.stat().st_size / 1e6:.1f} MB": ([sys.executable, "-c", CONFIG_JSON, str(big)], None),
        }
        missed = 0
        for name, (argv, env) in cases.items():
            seconds, rss = _run(argv, env)
            ok = seconds < TARGET_SECONDS and rss < TARGET_RSS_MB
            missed += not ok
            print(f"{name:32} {seconds:6.2f} s {rss:8.1f} MB  {'ok' if ok else 'MISSED'}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

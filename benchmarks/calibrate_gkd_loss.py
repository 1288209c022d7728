"""Measure TRL's GKD loss on CPU against memory/method.py gkd_copies.

TRL's GKDTrainer.compute_loss (without Liger) runs the student with its graph and the teacher under no_grad over the
same sequences, and generalized_jsd_loss divides both logits by the temperature, takes both log_softmax and, for
0 < beta < 1, the logsumexp of the two stacked, shifted log-probabilities and two kl_div over it
(trl/experimental/gkd/gkd_trainer.py @ v1.9.0; trl/trainer/gkd_trainer.py @ v0.21.0, which slices both logits from the
batch's prompt width first). This script runs that very method, from the TRL importable here (the oracle extra's
pin, or an older one first on PYTHONPATH: ``pip install --no-deps --target DIR trl==0.21.0``), with a randomly
initialised transformers LlamaForCausalLM in bf16 with gradient checkpointing as the student and a frozen deep copy
as the teacher (benchmarks/calibrate_dpo_loss.py's), and its backward, and measures the peak of live CPU bytes
beyond the start (torch.profiler's memory events) after a warm-up step, in copies of the batch's bf16 logits
(rows x sequence x V x 2 B). The prompt is the first quarter of each row (its labels -100).

    PYTHONPATH=. python benchmarks/calibrate_gkd_loss.py
    PYTHONPATH=DIR:. python benchmarks/calibrate_gkd_loss.py --merge      # another release, merged in
writes benchmarks/gkd_loss.json (rows by release; tests/test_method_gkd.py reads them) and benchmarks/gkd_loss.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_dpo_loss import HIDDEN, LAYERS, VOCAB, _models, config, kept_rows, step_peaks  # noqa: E402

CASES = [{"rows": 1, "tokens": 512}, {"rows": 2, "tokens": 512}, {"rows": 4, "tokens": 256}]
BETAS = (0.5, 0.0, 1.0)
PROMPT_SHARE = 4  # the prompt is the first quarter of each row
OUT = REPO / "benchmarks" / "gkd_loss.json"


def _trainer_class() -> Any:
    try:
        from trl.experimental.gkd import GKDTrainer
    except ImportError:  # before 0.26: trl/trainer/gkd_trainer.py
        from trl.trainer.gkd_trainer import GKDTrainer
    return GKDTrainer


def measure(rows: int, tokens: int, beta: float) -> dict[str, int]:
    """Peak live bytes of compute_loss and its backward (the module docstring)."""
    import torch

    model, teacher = _models()
    trainer = object.__new__(_trainer_class())
    # what compute_loss reads (args: 0.2x's @profiling_decorator reads report_to)
    trainer.__dict__.update(teacher_model=teacher, beta=beta, temperature=0.9, use_liger_gkd_loss=False,
                            args=types.SimpleNamespace(report_to=[]))
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (rows, tokens), generator=generator)
    prompt = tokens // PROMPT_SHARE
    labels = ids.clone()
    labels[:, :prompt] = -100
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels, "prompts": ids[:, :prompt]}
    kept: list[Any] = []

    def forward() -> None:
        kept.append(trainer.compute_loss(model, inputs))

    def backward() -> None:
        kept.pop().backward()

    return step_peaks(model, forward, backward)


def predict(release: str, beta: float) -> int:
    """The estimate's copies of the whole logits at the loss for TRL ``release`` and ``beta``."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.method import gkd_copies
    from zeroadvisor.vocab import Method, TrainerFamily

    return gkd_copies(MethodSetup(method=Method.GKD, trainer=TrainerFamily.TRL, trainer_version=release, beta=beta))


def rows_for() -> list[dict[str, Any]]:
    import trl

    out = []
    for beta in BETAS:
        for case in CASES:
            one = case["rows"] * case["tokens"] * VOCAB * 2  # one bf16 copy of the batch's logits
            measured = measure(case["rows"], case["tokens"], beta)
            copies = predict(trl.__version__, beta)
            out.append({"trl": trl.__version__, "beta": beta, **case, "copy_bytes": one, **measured,
                        "measured_copies": round(measured["peak"] / one, 3),
                        "forward_copies": round(measured["forward_peak"] / one, 3),
                        "backward_copies": round(measured["backward_peak"] / one, 3),
                        "predicted_copies": copies, "ratio": round(copies * one / measured["peak"], 3)})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# TRL's GKD loss: measured vs estimate (benchmarks/calibrate_gkd_loss.py)", "",
             ("TRL's own GKDTrainer.compute_loss (student with its graph, teacher under no_grad, generalized_jsd_loss) "
              f"and its backward on CPU: a transformers Llama (hidden {HIDDEN}, {LAYERS} layers, vocabulary "
              f"{VOCAB:,}) in bf16 with gradient checkpointing, the prompt the first quarter of each row. Peaks in "
              "copies of the batch's bf16 logits (rows x sequence x V x 2 B); the estimate is memory/method.py "
              "gkd_copies at the same release and beta. Up to TRL 1.6 the loss scores from the batch's prompt width "
              "on and the estimate counts every position (a bound: the prompt's share is the data's)."),
             "", ("| TRL | beta | rows | sequence | measured peak (copies) | forward | backward | estimate | "
                  "estimate/measured |"), "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['trl']} | {r['beta']} | {r['rows']} | {r['tokens']} | {r['measured_copies']:.2f} | "
              f"{r['forward_copies']:.2f} | {r['backward_copies']:.2f} | {r['predicted_copies']} | "
              f"{r['ratio']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", action="store_true", help="keep the other releases' rows in gkd_loss.json")
    options = parser.parse_args(argv)
    rows = rows_for()
    for row in rows:
        print(json.dumps(row))
    kept = kept_rows(OUT, rows, lambda r: r["trl"], options.merge, "rows")
    everything = sorted(kept + rows, key=lambda r: ([int(p) for p in r["trl"].split(".")], r["beta"], r["rows"]))
    OUT.write_text(json.dumps({"model": config(), "prompt_share": 1 / PROMPT_SHARE, "rows": everything}, indent=1)
                   + "\n")
    OUT.with_suffix(".md").write_text(markdown(everything))


if __name__ == "__main__":
    main()

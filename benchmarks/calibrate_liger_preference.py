"""Measure Liger's fused preference losses on CPU against memory/liger.py (preference_peak).

TRL's DPOTrainer and KTOTrainer run ``_compute_loss_liger`` where Liger's loss is on (memory/liger.py
preference_loss_runs): the backbone's last hidden states and the LM head weight go to
``LigerFusedLinearDPOLoss`` / ``LigerFusedLinearKTOLoss`` (liger_kernel.chunked_loss), which computes the logits one
chunk at a time (a chosen/rejected pair for DPO, one row for KTO: ``chunk_size=1``, TRL's default) and their gradient
in the forward, under ``torch.compile`` by default (``compiled=True``). Those losses are plain torch, so they run on
CPU: this script runs them (Liger importable here: ``pip install --no-deps --target DIR liger-kernel==0.8.5``, then
``PYTHONPATH=DIR:.``; its Triton kernels are not imported by ``liger_kernel.chunked_loss``) on bf16 hidden states that
need a gradient, a trainable head and a frozen reference's hidden states and head, and measures the peak of live CPU
bytes over the loss and its backward beyond the start (torch.profiler's memory events,
benchmarks/calibrate_step_temporaries.py profiled_peak), after two warm-up steps (compilation). The head is narrow
(hidden 64) and the vocabulary wide, so the chunk's logits are nearly all of it; the result is stated in copies of
one chunk's bf16 logits, beside the estimate's count (its chunk, input gradient and head gradient: the hidden states
are the caller's here).

    PYTHONPATH=/tmp/liger:. python benchmarks/calibrate_liger_preference.py
writes benchmarks/liger_preference.json and benchmarks/liger_preference.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_step_temporaries import profiled_peak  # noqa: E402
from zeroadvisor.memory import liger  # noqa: E402
from zeroadvisor.vocab import Method  # noqa: E402

HIDDEN, VOCAB, E = 64, 32768, 2  # bf16
CASES = [{"tokens": 512, "rows": 2}, {"tokens": 512, "rows": 4}, {"tokens": 1024, "rows": 2},
         {"tokens": 256, "rows": 8}]
OUT = REPO / "benchmarks" / "liger_preference.json"


def measure(method: Method, tokens: int, rows: int, compiled: bool) -> int:
    """Peak live bytes of the loss's forward and backward beyond the start."""
    import torch
    from liger_kernel.chunked_loss import LigerFusedLinearDPOLoss, LigerFusedLinearKTOLoss

    torch.manual_seed(0)
    hidden = torch.randn(rows, tokens, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    ref_hidden = torch.randn(rows, tokens, HIDDEN, dtype=torch.bfloat16)
    ref_weight = weight.detach().clone()
    target = torch.randint(0, VOCAB, (rows, tokens))
    target[:, : tokens - tokens // 4] = -100  # the prompt: the first three quarters
    if method == Method.DPO:
        dpo = LigerFusedLinearDPOLoss(beta=0.1, compiled=compiled)  # TRL: use_ref_model True, chunk_size 1

        def loss() -> Any:
            return dpo(weight, hidden, target, None, ref_hidden, ref_weight, None)[0]
    else:
        kto = LigerFusedLinearKTOLoss(beta=0.1, compiled=compiled, use_ref_model=True)
        labels = torch.tensor([True, False] * (rows // 2))
        kl = torch.zeros(())

        def loss() -> Any:
            return kto(hidden, weight, target, None, labels, ref_hidden, ref_weight, None, kl)[0]

    def step() -> None:
        loss().backward()

    step()
    step()  # compiled: the second call runs the compiled chunk; every gradient exists
    peak, _ = profiled_peak(step)
    return peak


def predicted(method: Method, tokens: int, rows: int) -> liger.PreferencePeak:
    return liger.preference_peak(method, E, rows, tokens, VOCAB, HIDDEN, head_trainable=True)


def rows_measured() -> list[dict[str, Any]]:
    out = []
    for method in (Method.DPO, Method.KTO):
        for case in CASES:
            tokens, rows = case["tokens"], case["rows"]
            est = predicted(method, tokens, rows)
            one = E * liger.CHUNK_ROWS[method] * tokens * VOCAB
            row: dict[str, Any] = {"method": str(method), "tokens": tokens, "rows": rows, "chunk_logits": one}
            for compiled in (True, False):
                peak = measure(method, tokens, rows, compiled)
                key = "compiled" if compiled else "eager"
                # the estimate for what this script holds: the chunk (its compiled or eager copies) and the gradients
                estimate = (est.chunk if compiled else est.chunk_bound) + est.grad_input + est.grad_weight
                row[key] = {"peak": peak, "copies": round((peak - est.grad_input - est.grad_weight) / one, 3),
                            "estimate": estimate, "ratio": round(estimate / peak, 3)}
            out.append(row)
            print(json.dumps(row), flush=True)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Liger's fused preference losses on CPU (benchmarks/calibrate_liger_preference.py)", "",
             (f"Liger 0.8.5, bf16, hidden {HIDDEN}, vocabulary {VOCAB:,}, a trainable head; copies of one chunk's "
             "logits (DPO: a chosen/rejected pair, KTO: one row) beyond the input and head gradients; estimate: "
             "memory/liger.py preference_peak (its chunk, input gradient and head gradient)."), "",
             "| loss | tokens | rows | compiled: copies | estimate / measured | eager: copies | estimate / measured |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        c, e = r["compiled"], r["eager"]
        lines.append(f"| {r['method']} | {r['tokens']} | {r['rows']} | {c['copies']:.2f} | {c['ratio']:.3f} | "
                     f"{e['copies']:.2f} | {e['ratio']:.3f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    rows = rows_measured()
    OUT.write_text(json.dumps({"liger_kernel": _liger_version(), "rows": rows}, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(markdown(rows))


def _liger_version() -> str:
    from importlib.metadata import version

    return version("liger-kernel")


if __name__ == "__main__":
    main()

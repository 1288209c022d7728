"""Measure Liger's fused DPO, KTO and GRPO losses on CPU against memory/liger.py (preference_peak, grpo_peak).

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

GRPO (GRPOTrainer._compute_liger_loss, LigerFusedLinearGRPOLoss over the completions, one per chunk) is measured the
same way against grpo_peak: Liger 0.8+ streams tiles of the vocabulary (the expected count), older releases hold a
completion's logits (the bound), so it is run at both (``--merge`` keeps the other release's rows).

    PYTHONPATH=/tmp/liger085:. python benchmarks/calibrate_liger_preference.py
    PYTHONPATH=/tmp/liger070:. python benchmarks/calibrate_liger_preference.py --merge
writes benchmarks/liger_preference.json (rows by Liger release) and benchmarks/liger_preference.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_step_temporaries import profiled_peak  # noqa: E402
from zeroadvisor.memory import liger  # noqa: E402
from zeroadvisor.vocab import Method  # noqa: E402

HIDDEN, VOCAB, E = 64, 32768, 2  # bf16
# a head as wide as a 7-8B model's (hidden 4,096) over short chunks: the head gradient's moment, not the chunk's
# logits, is the peak there
WIDE_HIDDEN, WIDE_CASES = 4096, [{"tokens": 64, "rows": 2}, {"tokens": 64, "rows": 4}, {"tokens": 256, "rows": 2}]
CASES = [{"tokens": 512, "rows": 2}, {"tokens": 512, "rows": 4}, {"tokens": 1024, "rows": 2},
         {"tokens": 256, "rows": 8}]
OUT = REPO / "benchmarks" / "liger_preference.json"


def measure(method: Method, tokens: int, rows: int, compiled: bool, width: int = HIDDEN) -> int:
    """Peak live bytes of the loss's forward and backward beyond the start."""
    import torch
    from liger_kernel.chunked_loss import LigerFusedLinearDPOLoss, LigerFusedLinearKTOLoss

    torch.manual_seed(0)
    hidden = torch.randn(rows, tokens, width, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, width, dtype=torch.bfloat16, requires_grad=True)
    ref_hidden = torch.randn(rows, tokens, width, dtype=torch.bfloat16)
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


def predicted(method: Method, tokens: int, rows: int, width: int = HIDDEN) -> liger.PreferencePeak:
    return liger.preference_peak(method, E, rows, tokens, VOCAB, width, head_trainable=True)


def measure_grpo(tokens: int, rows: int, compiled: bool) -> int:
    """Peak live bytes of LigerFusedLinearGRPOLoss's forward and backward over ``rows`` completions (beta 0.04, a
    reference's per-token log-probs given, as TRL passes them), each case in a process of its own: torch.compile's
    guards do not survive a second completion length in one process at some releases."""
    import torch
    from liger_kernel.chunked_loss import LigerFusedLinearGRPOLoss

    torch.manual_seed(0)
    hidden = torch.randn(rows, tokens, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    weight = torch.randn(VOCAB, HIDDEN, dtype=torch.bfloat16, requires_grad=True)
    ids = torch.randint(0, VOCAB, (rows, tokens))
    mask = torch.ones(rows, tokens, dtype=torch.long)
    advantages, ref = torch.randn(rows), torch.randn(rows, tokens)
    grpo = LigerFusedLinearGRPOLoss(beta=0.04, compiled=compiled, use_ref_model=True)

    def step() -> None:
        out = grpo(hidden, weight, ids, mask, advantages, ref_per_token_logps=ref)
        (out[0] if isinstance(out, tuple) else out).backward()

    step()
    step()
    peak, _ = profiled_peak(step)
    return peak


def _in_child(*args: Any) -> int:
    """measure_grpo in a fresh interpreter (the same PYTHONPATH)."""
    import subprocess

    code = (f"import sys; sys.path[:0] = {[str(REPO / 'benchmarks'), str(REPO)]!r}; "
            f"from calibrate_liger_preference import measure_grpo; print(measure_grpo(*{args!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(done.stdout.strip().splitlines()[-1])


def rows_measured() -> list[dict[str, Any]]:
    version = _liger_version()
    out = []
    for method in (Method.DPO, Method.KTO):
        for case in CASES:
            tokens, rows = case["tokens"], case["rows"]
            est = predicted(method, tokens, rows)
            one = E * liger.CHUNK_ROWS[method] * tokens * VOCAB
            row: dict[str, Any] = {"liger": version, "method": str(method), "tokens": tokens, "rows": rows,
                                   "chunk_logits": one}
            for compiled in (True, False):
                peak = measure(method, tokens, rows, compiled)
                key = "compiled" if compiled else "eager"
                # the estimate for what this script holds: the chunk (its compiled or eager copies) and the gradients
                estimate = (est.chunk if compiled else est.chunk_bound) + est.grad_input + est.grad_weight
                row[key] = {"peak": peak, "copies": round((peak - est.grad_input - est.grad_weight) / one, 3),
                            "estimate": estimate, "ratio": round(estimate / peak, 3)}
            out.append(row)
            print(json.dumps(row), flush=True)
    for case in WIDE_CASES:  # DPO with a wide head over short chunks (compiled, as TRL runs it)
        tokens, rows = case["tokens"], case["rows"]
        est = predicted(Method.DPO, tokens, rows, WIDE_HIDDEN)
        head = E * VOCAB * WIDE_HIDDEN
        peak = measure(Method.DPO, tokens, rows, True, WIDE_HIDDEN)
        estimate = est.chunk + est.grad_input + est.grad_weight
        row = {"liger": version, "method": "dpo", "hidden": WIDE_HIDDEN, "tokens": tokens, "rows": rows,
               "chunk_logits": E * 2 * tokens * VOCAB,
               "compiled": {"peak": peak, "head_copies": round(peak / head, 3), "estimate": estimate,
                            "ratio": round(estimate / peak, 3)}}
        out.append(row)
        print(json.dumps(row), flush=True)
    for case in CASES:
        tokens, rows = case["tokens"], case["rows"]
        grpo = liger.grpo_peak(E, rows, tokens, VOCAB, HIDDEN, head_trainable=True)
        one = E * tokens * VOCAB  # one completion's logits
        row = {"liger": version, "method": str(Method.GRPO), "tokens": tokens, "rows": rows, "chunk_logits": one}
        for compiled in (True, False):
            peak = _in_child(tokens, rows, compiled)
            row["compiled" if compiled else "eager"] = {
                "peak": peak, "copies": round((peak - grpo.grad_weight - grpo.grad_input) / one, 3),
                "estimate": grpo.nbytes, "bound": grpo.bound, "ratio": round(grpo.nbytes / peak, 3),
                "bound_ratio": round(grpo.bound / peak, 3)}
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Liger's fused DPO, KTO and GRPO losses on CPU (benchmarks/calibrate_liger_preference.py)", "",
             (f"bf16, hidden {HIDDEN}, vocabulary {VOCAB:,}, a trainable head. DPO/KTO: copies of one chunk's "
              "logits (a chosen/rejected pair, one row) beyond the input and head gradients; estimate: "
              "memory/liger.py preference_peak (its chunk, input gradient and head gradient). GRPO: copies of one "
              "completion's logits beyond the head's and input gradients; estimate: grpo_peak (Liger 0.8+'s "
              "tiles), its bound one completion's logits x 7 (before 0.8, eager)."), "",
             ("| Liger | loss | tokens | rows | compiled: copies | estimate / measured | eager: copies | "
             "estimate / measured |"),
             "|---|---|---|---|---|---|---|---|"]
    wide = [r for r in rows if "hidden" in r]
    for r in rows:
        if "hidden" in r:
            continue
        c, e = r["compiled"], r["eager"]
        if r["method"] == "grpo":
            cell = (f"{c['ratio']:.3f} (bound {c['bound_ratio']:.2f})",
                    f"{e['ratio']:.3f} (bound {e['bound_ratio']:.2f})")
        else:
            cell = f"{c['ratio']:.3f}", f"{e['ratio']:.3f}"
        lines.append(f"| {r['liger']} | {r['method']} | {r['tokens']} | {r['rows']} | {c['copies']:.2f} | {cell[0]} | "
                     f"{e['copies']:.2f} | {cell[1]} |")
    if wide:
        lines += ["", (f"DPO with a head as wide as a 7-8B model's (hidden {WIDE_HIDDEN:,}) over short chunks, "
                       "compiled: the peak in copies of the head (V x H in bf16), where each chunk's head gradient, "
                       "the accumulator and the chunk's logits gradient meet; estimate: preference_peak's chunk term "
                       "(the larger of the chunk's 4 copies and that moment), input and head gradients."), "",
                  "| Liger | tokens | rows | peak (head copies) | estimate / measured |", "|---|---|---|---|---|"]
        lines += [f"| {r['liger']} | {r['tokens']} | {r['rows']} | {r['compiled']['head_copies']:.2f} | "
                  f"{r['compiled']['ratio']:.3f} |" for r in wide]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", action="store_true", help="keep the rows of other Liger releases in the JSON")
    args = parser.parse_args(argv)
    rows = rows_measured()
    version = _liger_version()
    if args.merge and OUT.exists():
        kept = [r for r in json.loads(OUT.read_text())["rows"] if r["liger"] != version]
        rows = kept + rows
    rows.sort(key=lambda r: (Version(r["liger"]), r["method"], r.get("hidden", HIDDEN), r["tokens"], r["rows"]))
    OUT.write_text(json.dumps({"rows": rows}, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(markdown(rows))


def _liger_version() -> str:
    from importlib.metadata import version

    return version("liger-kernel")


if __name__ == "__main__":
    main()

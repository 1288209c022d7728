"""Measure TRL's GRPO scoring of the completion on CPU against memory/method.py completion_logits_terms.

TRL's GRPOTrainer (up to 1.14, without Liger's loss) computes the completion's logits only (``logits_to_keep``) in
``_get_per_token_logps_and_entropies``, divides them by the sampling temperature, scores them row by row
(``selective_log_softmax`` on bf16) and takes their entropy under no_grad. From 1.0 the division is in place on the
sliced view of the model's output (``logits.div_(self.temperature)``; ``logits = logits / self.temperature`` before,
trl/trainer/grpo_trainer.py @ v0.29.0, v1.0.0, v1.9.0). This script runs that very method from the TRL importable
here (the oracle extra's pin, or an older one first on PYTHONPATH: ``pip install --no-deps --target DIR
trl==0.29.0``; GRPOTrainer imports ``requests``) on a randomly initialised transformers LlamaForCausalLM in bf16 with
gradient checkpointing (benchmarks/calibrate_dpo_loss.py's), then a GRPO loss over the log-probabilities (the
clipped ratio times the advantages, whose tensors are rows x completion) and its backward, and measures the peak of
live CPU bytes beyond the start (torch.profiler's memory events, benchmarks/calibrate_step_temporaries.py
profiled_peak) after a warm-up step, in copies of the completion's bf16 logits (rows x completion x V x 2 B).

    PYTHONPATH=DIR:. python benchmarks/calibrate_grpo_logits.py --merge [--ms-swift RELEASE]

With ``--ms-swift RELEASE`` the rows are ms-swift's GRPO at that release, whose TRL pin admits the TRL importable: up
to 4.3 ms-swift scores a text model with TRL's own method, called with ``compute_entropy=self.compute_entropy``
(False without --log_entropy or --top_entropy_quantile; swift/trainers/rlhf_trainer/grpo_trainer.py
_get_per_token_logps_and_entropies_single @ v3.12.0 ``can_use_super``), so the method runs here without the
entropy and the estimate is memory/method.py's for ms-swift at RELEASE.
(TRL 0.19 to 0.24 import beside transformers 5 once their import_utils reads transformers' _is_package_available
tuple as a bool and stub modules stand for mergekit and llm_blender; before 0.20 the method is _get_per_token_logps,
without the entropy.)
writes benchmarks/grpo_logits.json (rows by TRL release; tests/test_trl_grpo_batch.py reads them) and
benchmarks/grpo_logits.md.
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

# (rows, prompt, completion): GRPO's per_device_train_batch_size counts completions
CASES = [{"rows": 1, "prompt": 128, "completion": 512}, {"rows": 2, "prompt": 128, "completion": 512},
         {"rows": 3, "prompt": 128, "completion": 256}, {"rows": 4, "prompt": 256, "completion": 256},
         {"rows": 8, "prompt": 64, "completion": 128}]
OUT = REPO / "benchmarks" / "grpo_logits.json"


def measure(rows: int, prompt: int, completion: int, entropy: bool = True) -> dict[str, int]:
    """Peak live bytes of _get_per_token_logps_and_entropies (entropy under no_grad, as without an entropy bonus),
    the clipped-ratio loss and its backward; and what the forward leaves held for the backward."""
    import torch
    from trl.trainer.grpo_trainer import GRPOTrainer

    model, _ = _models()
    trainer = object.__new__(GRPOTrainer)
    # args: what 0.2x's @profiling_decorator reads (report_to); the method itself reads none of it
    trainer.__dict__.update(model_kwarg_keys={"input_ids", "attention_mask", "logits_to_keep"}, temperature=1.0,
                            _entropy_bonus_enabled=False, args=types.SimpleNamespace(report_to=[]))
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (rows, prompt + completion), generator=generator)
    mask = torch.ones_like(ids)
    advantages = torch.randn(rows, 1, generator=generator)
    kept: list[Any] = []

    def forward() -> None:
        if not hasattr(trainer, "_get_per_token_logps_and_entropies"):  # before 0.20: no entropy in the step
            logps = trainer._get_per_token_logps(model, ids, mask, completion)
        else:
            logps = trainer._get_per_token_logps_and_entropies(model, ids, mask, completion,
                                                               compute_entropy=entropy)[0]
        ratio = torch.exp(logps - logps.detach())
        kept.append(-torch.min(ratio * advantages, torch.clamp(ratio, 0.8, 1.2) * advantages).mean())

    def backward() -> None:
        kept.pop().backward()

    return step_peaks(model, forward, backward)


def predict(release: str, rows: int, completion: int, swift: str | None = None) -> int:
    """The estimate's completion-logits term for the same model and shape at TRL ``release`` (ms-swift's GRPO at
    ``swift`` beside it, where given)."""
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.memory.method import completion_logits_terms
    from zeroadvisor.memory.settings import read_settings
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.vocab import Method, TrainerFamily

    generation = Generation(max_completion_length=completion, max_prompt_length=1)
    setup = MethodSetup(method=Method.GRPO, trainer=TrainerFamily.TRL, trainer_version=release, generation=generation) \
        if swift is None else MethodSetup(method=Method.GRPO, trainer=TrainerFamily.MS_SWIFT, trainer_version=swift,
                                          trl_version=release, generation=generation)
    spec = spec_from_hf_config(config())
    s = read_settings({"train_micro_batch_size_per_gpu": rows, "bf16": {"enabled": True}}, spec, 1)
    return sum(t.nbytes for t in completion_logits_terms(setup, spec, s))


def rows_for(swift: str | None = None) -> list[dict[str, Any]]:
    import trl

    out = []
    for case in CASES:
        rows, completion = case["rows"], case["completion"]
        one = rows * completion * VOCAB * 2  # one bf16 copy of the completion's logits
        measured = measure(rows, case["prompt"], completion, entropy=swift is None)
        predicted = predict(trl.__version__, rows, completion, swift)
        out.append({"trl": trl.__version__, **({"ms_swift": swift} if swift else {}), **case, "copy_bytes": one,
                    **measured,
                    "measured_copies": round(measured["peak"] / one, 3),
                    "forward_copies": round(measured["forward_peak"] / one, 3),
                    "backward_copies": round(measured["backward_peak"] / one, 3),
                    "predicted": predicted, "ratio": round(predicted / measured["peak"], 3)})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# TRL's GRPO completion logits: measured vs estimate (benchmarks/calibrate_grpo_logits.py)", "",
             ("TRL's own GRPOTrainer._get_per_token_logps_and_entropies (entropy under no_grad; "
              "_get_per_token_logps before 0.20; as ms-swift calls it, a TRL row under an ms-swift release: "
              "compute_entropy False), a clipped-ratio "
              f"loss and its backward on CPU: a transformers Llama (hidden {HIDDEN}, {LAYERS} layers, vocabulary "
              f"{VOCAB:,}) in bf16 with gradient checkpointing. Peaks in copies of the completion's bf16 logits "
              "(rows x completion x V x 2 B); the estimate is memory/method.py completion_logits_terms at the same "
              "release."),
             "", ("| TRL | rows | prompt | completion | measured peak (copies) | forward | backward | "
                  "predicted/measured |"), "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['trl']}{' (ms-swift ' + r['ms_swift'] + ')' if r.get('ms_swift') else ''} | {r['rows']} | "
              f"{r['prompt']} | {r['completion']} | {r['measured_copies']:.2f} | "
              f"{r['forward_copies']:.2f} | {r['backward_copies']:.2f} | {r['ratio']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", action="store_true", help="keep the other releases' rows in grpo_logits.json")
    parser.add_argument("--ms-swift", metavar="RELEASE", help="ms-swift's GRPO at RELEASE (module docstring)")
    options = parser.parse_args(argv)
    rows = rows_for(options.ms_swift)
    for row in rows:
        print(json.dumps(row))

    kept = kept_rows(OUT, rows, lambda r: (r["trl"], r.get("ms_swift", "")), options.merge, "rows")
    everything = sorted(kept + rows, key=lambda r: (r.get("ms_swift", ""), [int(p) for p in r["trl"].split(".")],
                                                   r["rows"]))
    OUT.write_text(json.dumps({"model": config(), "rows": everything}, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(markdown(everything))


if __name__ == "__main__":
    main()

"""Measure LLaMA-Factory's PPO training step on CPU against memory/activations.py (ENTROPY_LOSS_COPIES).

LLaMA-Factory's PPO runs with TRL 0.8.6 to 0.9.6 only (llamafactory/train/ppo/trainer.py CustomPPOTrainer.__init__
refuses any other @ v0.9.5). Each PPO mini batch goes through its batched_forward_pass (the value-head model's
forward, whose logits TRL's AutoModelForCausalLMWithValueHead upcasts to fp32; their log-probs by trl.core
logprobs_from_logits; the logits kept and concatenated for the loss) and TRL 0.9.6's PPOTrainer.loss (the clipped
policy and value losses, and entropy_from_logits over the kept logits, inside their graph), then the backward.

This script runs TRL 0.9.6's own value head, logprobs_from_logits and PPOTrainer.loss (``pip install --no-deps
--target DIR trl==0.9.6`` and tyro for its PPOConfig; put DIR first on PYTHONPATH: TRL 0.9.6's trl.core and trainer
import beside transformers 5, LLaMA-Factory 0.9.3 does not, so its batched_forward_pass is copied here line for line
where memory is made) on a randomly initialised transformers LlamaForCausalLM in bf16 with gradient checkpointing,
under torch.autocast as LLaMA-Factory's amp_context, and measures the peak of live CPU bytes over the step beyond its
start (torch.profiler's memory events, benchmarks/calibrate_step_temporaries.py profiled_peak), after a warm-up step
that made every gradient. The model is narrow (hidden 64) and the vocabulary wide, so the logits are nearly all of
it; the result is stated in copies of the mini batch's fp32 logits (rows x tokens x V x 4 B).

Compared with the estimate's activations for the same model and shape with the method setup LLaMA-Factory PPO.

    PYTHONPATH=/tmp/trl096:. python benchmarks/calibrate_ppo_loss.py
writes benchmarks/ppo_loss.json (the model's config and the rows: tests/test_method_memory.py reads them) and
benchmarks/ppo_loss.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_dpo_loss import HIDDEN, LAYERS, VOCAB, _models, method_activations, write_rows  # noqa: E402
from calibrate_step_temporaries import profiled_peak  # noqa: E402

# (rows, query tokens, response tokens): LLaMA-Factory's mini batch is per_device_train_batch_size
CASES = [{"rows": 1, "query": 384, "response": 128}, {"rows": 2, "query": 384, "response": 128},
         {"rows": 4, "query": 256, "response": 256}]
OUT = REPO / "benchmarks" / "ppo_loss.json"


def _value_head_model() -> Any:
    import torch
    from trl.models.modeling_value_head import AutoModelForCausalLMWithValueHead

    base, _ = _models()
    model = AutoModelForCausalLMWithValueHead(base).to(torch.bfloat16)
    model.is_peft_model = False  # set by from_pretrained, which builds it from a path
    return model.train()


def _trainer(rows: int) -> Any:
    """A PPOTrainer carrying what PPOTrainer.loss reads (its config), without the datasets its __init__ prepares."""
    from trl import PPOConfig
    from trl.trainer.ppo_trainer import PPOTrainer

    trainer = object.__new__(PPOTrainer)
    trainer.config = PPOConfig(mini_batch_size=rows, batch_size=rows)
    return trainer


def measure(rows: int, query: int, response: int) -> dict[str, int]:
    """Peak live bytes of one PPO mini batch: batched_forward_pass, PPOTrainer.loss and the backward."""
    import torch
    from trl.core import logprobs_from_logits
    from trl.trainer.ppo_trainer import PPOTrainer

    model = _value_head_model()
    trainer = _trainer(rows)
    tokens = query + response
    input_ids = torch.randint(1, VOCAB, (rows, tokens))
    attention_mask = torch.ones_like(input_ids)

    def batched_forward_pass() -> tuple[Any, Any, Any, Any]:
        # llamafactory/train/ppo/trainer.py CustomPPOTrainer.batched_forward_pass @ v0.9.3, one mini batch
        # (fbs = mini_batch_size), return_logits=True as TRL 0.9.6's step asks for the minibatch it trains
        all_logprobs, all_logits, all_masks, all_values = [], [], [], []
        with torch.autocast("cpu"):  # self.amp_context
            logits, _, values = model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True,
                                      use_cache=False)
        logprobs = logprobs_from_logits(logits[:, :-1, :], input_ids[:, 1:])
        masks = torch.zeros_like(attention_mask)
        masks[:, :-1] = attention_mask[:, 1:]
        masks[:, :query - 1] = 0  # the query's positions (start = len(query) - 1)
        all_logits.append(logits)
        all_values.append(values)
        all_logprobs.append(logprobs)
        all_masks.append(masks)
        return (torch.cat(all_logprobs), torch.cat(all_logits)[:, :-1], torch.cat(all_values)[:, :-1],
                torch.cat(all_masks)[:, :-1])

    generator = torch.Generator().manual_seed(0)
    old_logprobs, old_values, advantages, returns = (torch.randn(rows, tokens - 1, generator=generator)
                                                     for _ in range(4))

    def step() -> None:
        # trl/trainer/ppo_trainer.py PPOTrainer.step -> train_minibatch @ v0.9.6 (the optimizer step apart)
        logprobs, logits, vpreds, mask = batched_forward_pass()
        loss_p, loss_v, _ = PPOTrainer.loss(trainer, old_logprobs, old_values, logits, vpreds, logprobs, mask,
                                            advantages, returns)
        (loss_p + loss_v).backward()

    step()  # every parameter's .grad now exists
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return {"peak": peak}


def predict(rows: int, tokens: int) -> int:
    """The estimate's activations for the same model and shape with the LLaMA-Factory PPO setup."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.LLAMA_FACTORY, trainer_version="0.9.3")
    return method_activations(setup, tokens, rows)


def rows_for() -> list[dict[str, Any]]:
    import trl

    out = []
    for case in CASES:
        rows, tokens = case["rows"], case["query"] + case["response"]
        one = rows * tokens * VOCAB * 4  # one fp32 copy of the mini batch's logits
        measured = measure(rows, case["query"], case["response"])
        predicted = predict(rows, tokens)
        out.append({"trl": trl.__version__, **case, "copy_bytes": one, **measured,
                    "measured_copies": round(measured["peak"] / one, 3), "predicted": predicted,
                    "ratio": round(predicted / measured["peak"], 3)})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# LLaMA-Factory's PPO step: measured vs estimate (benchmarks/calibrate_ppo_loss.py)", "",
             (f"TRL {rows[0]['trl']}'s own AutoModelForCausalLMWithValueHead, logprobs_from_logits and "
              "PPOTrainer.loss with LLaMA-Factory 0.9.3's batched_forward_pass (copied where memory is made), one "
              f"mini batch and its backward on CPU: a transformers Llama (hidden {HIDDEN}, {LAYERS} layers, "
              f"vocabulary {VOCAB:,}) in bf16 with gradient checkpointing, under autocast. Peaks in copies of the "
              "mini batch's fp32 logits (rows x (query + response) x V x 4 B); the estimate is "
              "memory/activations.py for the LLaMA-Factory PPO view of the policy (memory/method.py "
              "activation_spec: ENTROPY_LOSS_COPIES)."),
             ""]
    return "\n".join(lines + step_table(rows, "trl", "TRL", "fp32")) + "\n"


def step_table(rows: list[dict[str, Any]], label: str, header: str, dtype: str) -> list[str]:
    """The rows of a PPO step measurement as a markdown table, first column ``rows[i][label]`` under ``header``."""
    lines = [f"| {header} | rows | query | response | measured peak ({dtype} copies) | predicted/measured |",
             "|---|---|---|---|---|---|"]
    return lines + [f"| {r[label]} | {r['rows']} | {r['query']} | {r['response']} | {r['measured_copies']:.2f} | "
                    f"{r['ratio']:.3f} |" for r in rows]


def main() -> None:
    rows = rows_for()
    write_rows(OUT, rows, markdown(rows))


if __name__ == "__main__":
    main()

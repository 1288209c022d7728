"""Measure TRL's PPO training step (0.11+, trl/experimental/ppo from 1.0) on CPU against memory/activations.py.

TRL's PPOTrainer.train runs the policy and the critic through PolicyAndValueWrapper over the whole query + response,
slices the response's logits (``output.logits[:, context_length - 1 : -1]``), divides that view by the temperature in
place, scores it with selective_log_softmax, adds the clipped value loss and calls backward once; the output is kept
to the end of the micro batch (trl/experimental/ppo/ppo_trainer.py PPOTrainer.train @ v1.9.0; trl/trainer/
ppo_trainer.py @ v0.11.0 to v0.29.0 the same lines). The entropy it logs is taken after the optimizer step, under
no_grad.

This script runs TRL's own ``forward``, ``PolicyAndValueWrapper`` and ``selective_log_softmax`` (the TRL importable
here: the oracle extra's pin) and the loss lines of PPOTrainer.train copied where memory is made, on a randomly
initialised transformers LlamaForCausalLM in bf16 with gradient checkpointing and a LlamaForSequenceClassification
critic of the same narrow shape, and measures the peak of live CPU bytes over the step beyond its start
(torch.profiler's memory events, benchmarks/calibrate_step_temporaries.py profiled_peak), after a warm-up step that
made every gradient. The model is narrow (hidden 64) and the vocabulary wide, so the logits are nearly all of it
(the critic's activations are under 1% of one copy); the result is stated in copies of the micro batch's bf16 logits
over the whole query + response (rows x tokens x V x 2 B).

Compared with the estimate's activations for the same model and shape with the method setup TRL PPO (the response
length as PPOConfig.response_length).

    PYTHONPATH=. python benchmarks/calibrate_trl_ppo_loss.py
writes benchmarks/trl_ppo_loss.json (tests/test_method_memory.py reads it) and benchmarks/trl_ppo_loss.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_dpo_loss import HIDDEN, LAYERS, VOCAB, _models, config, method_activations, write_rows  # noqa: E402
from calibrate_ppo_loss import step_table  # noqa: E402
from calibrate_step_temporaries import profiled_peak  # noqa: E402

# (rows, query tokens, response tokens): rows is per_device_train_batch_size
CASES = [{"rows": 1, "query": 448, "response": 64}, {"rows": 2, "query": 384, "response": 128},
         {"rows": 4, "query": 256, "response": 256}, {"rows": 2, "query": 64, "response": 448}]
OUT = REPO / "benchmarks" / "trl_ppo_loss.json"
PAD = 0  # the pad token; the inputs below hold none


def _wrapper() -> Any:
    """TRL's PolicyAndValueWrapper around this script's policy and a critic of its shape (a one-label
    LlamaForSequenceClassification, as TRL's ppo.py loads the value model)."""
    import torch
    from transformers import LlamaConfig, LlamaForSequenceClassification
    from trl.experimental.ppo.ppo_trainer import PolicyAndValueWrapper

    policy, _ = _models()
    cfg = LlamaConfig(**{k: v for k, v in config().items() if k not in ("architectures", "model_type", "torch_dtype")},
                      num_labels=1, pad_token_id=PAD)
    cfg._attn_implementation = "sdpa"
    critic = LlamaForSequenceClassification(cfg).to(torch.bfloat16).train()
    critic.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return PolicyAndValueWrapper(policy, critic).train()


def measure(rows: int, query: int, response: int, whole_log_softmax: bool = False) -> dict[str, int]:
    """Peak live bytes of one PPO micro batch: forward, loss and backward (PPOTrainer.train's inner loop);
    ``whole_log_softmax``: the response scored as TRL 0.9 to 0.14 do it, one log_softmax over the whole slice kept in
    ``new_all_logprobs`` and a gather (trl/trainer/ppo_trainer.py @ v0.12.0, ppov2_trainer.py @ v0.9.6)."""
    import torch
    from trl.experimental.ppo.ppo_trainer import forward
    from trl.trainer.utils import selective_log_softmax

    model = _wrapper()
    generator = torch.Generator().manual_seed(0)
    query_responses = torch.randint(1, VOCAB, (rows, query + response), generator=generator)
    responses = query_responses[:, query:]
    old_logprobs, old_values, advantages, returns = (torch.randn(rows, response, generator=generator)
                                                     for _ in range(4))
    temperature, cliprange, cliprange_value, vf_coef = 0.7, 0.2, 0.2, 0.1  # PPOConfig's defaults

    def step() -> None:
        # trl/experimental/ppo/ppo_trainer.py PPOTrainer.train @ v1.9.0, one micro batch, no padding (masked_mean
        # over every position); the output is kept to the end as the loop's ``del`` does
        output, vpred_temp = forward(model, query_responses, PAD)
        logits = output.logits[:, query - 1: -1]
        logits /= temperature + 1e-7
        if whole_log_softmax:
            new_all_logprobs = torch.nn.functional.log_softmax(logits, dim=-1)
            new_logprobs = torch.gather(new_all_logprobs, 2, responses.unsqueeze(-1)).squeeze(-1)
        else:
            new_all_logprobs = None
            new_logprobs = selective_log_softmax(logits, responses)
        vpred = vpred_temp[:, query - 1: -1].squeeze(-1)
        vpredclipped = torch.clamp(vpred, old_values - cliprange_value, old_values + cliprange_value)
        vf_loss = 0.5 * torch.max(torch.square(vpred - returns), torch.square(vpredclipped - returns)).mean()
        ratio = torch.exp(new_logprobs - old_logprobs)
        pg_loss = torch.max(-advantages * ratio, -advantages * torch.clamp(ratio, 1.0 - cliprange,
                                                                           1.0 + cliprange)).mean()
        (pg_loss + vf_coef * vf_loss).backward()
        with torch.no_grad():  # after the optimizer step
            prob_dist = torch.nn.functional.softmax(logits, dim=-1)
            entropy = torch.logsumexp(logits, dim=-1) - torch.sum(prob_dist * logits, dim=-1)
        del output, vpred_temp, logits, new_all_logprobs, prob_dist, entropy

    step()  # every parameter's .grad now exists
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return {"peak": peak}


# the scoring of each TRL release range, and a release of it for the estimate: selective_log_softmax from 0.15
SCORINGS = {"selective_log_softmax (0.15+)": (False, None), "log_softmax + gather (0.9 to 0.14)": (True, "0.14.0")}


def predict(rows: int, query: int, response: int, release: str | None = None) -> int:
    """The estimate's activations for the same model and shape with the TRL PPO setup (``release``: TRL's; None
    the newest)."""
    from zeroadvisor.config.method import Generation, MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    setup = MethodSetup(method=Method.PPO, trainer=TrainerFamily.TRL, trainer_version=release,
                        generation=Generation(max_completion_length=response))
    return method_activations(setup, query + response, rows)


def rows_for() -> list[dict[str, Any]]:
    import trl

    out = []
    for scoring, (whole, release) in SCORINGS.items():
        for case in CASES:
            rows, query, response = case["rows"], case["query"], case["response"]
            one = rows * (query + response) * VOCAB * 2  # one bf16 copy of the micro batch's logits
            measured = measure(rows, query, response, whole)
            predicted = predict(rows, query, response, release)
            out.append({"trl": trl.__version__, "scoring": scoring, "predicted_release": release, **case,
                        "copy_bytes": one, **measured, "measured_copies": round(measured["peak"] / one, 3),
                        "predicted": predicted, "ratio": round(predicted / measured["peak"], 3)})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# TRL's PPO step: measured vs estimate (benchmarks/calibrate_trl_ppo_loss.py)", "",
             (f"TRL {rows[0]['trl']}'s own forward, PolicyAndValueWrapper and selective_log_softmax with "
              "PPOTrainer.train's loss lines, one micro batch and its backward on CPU: a transformers Llama (hidden "
              f"{HIDDEN}, {LAYERS} layers, vocabulary {VOCAB:,}) in bf16 with gradient checkpointing and a critic of "
              "its shape. Peaks in copies of the micro batch's bf16 logits over the whole query + response (rows x "
              "tokens x V x 2 B); the estimate is memory/activations.py for the TRL PPO view of the policy "
              "(memory/method.py activation_spec)."),
             "", ("The response's scoring of TRL 0.9 to 0.14 (a log_softmax over the whole slice kept in "
                  "new_all_logprobs, then a gather: trl/trainer/ppo_trainer.py @ v0.12.0) is run with the same model "
                  "and loss, its two lines in place of selective_log_softmax, and predicted at TRL 0.14.0."),
             ""]
    return "\n".join(lines + step_table(rows, "scoring", "scoring", "bf16")) + "\n"


def main() -> None:
    rows = rows_for()
    write_rows(OUT, rows, markdown(rows))


if __name__ == "__main__":
    main()

"""Measure OpenRLHF's SFT, DPO and PPO actor steps on CPU against memory/activations.py (FUSED_CE_LOSS_BYTES).

From 0.7.0 every OpenRLHF trainer scores tokens through ``Actor.forward``: the model's logits upcast to fp32
(``output["logits"].to(torch.float32)``) and ``log_probs_from_logits``, which calls flash-attn's Triton
``cross_entropy_loss`` on them (openrlhf/models/actor.py, models/utils.py @ v0.7.0, v0.8.5, v0.11.0; flash-attn is
a requirement of every release). That kernel keeps the fp32 logits it is given (``ctx.save_for_backward(logits,
lse, labels)``) and writes the gradient into one new tensor (``dlogits = torch.empty_like(logits)``), computing the
softmax in registers (flash_attn/ops/triton/cross_entropy.py CrossEntropyLoss @ v2.8.0). Triton does not run on
CPU, so this script puts in its place a replica that makes those very allocations (the same saved tensors, one
``empty_like`` for the gradient, written a few rows at a time) and runs OpenRLHF's own Actor.forward,
log_probs_from_logits, SFTLoss and DPOTrainer.concatenated_forward and DPOLoss (``pip install --no-deps --target DIR
openrlhf==0.8.5`` and put DIR on PYTHONPATH; flash-attn's other modules OpenRLHF imports at load time are stubbed,
as its packed-sample and ring-attention paths are not run) on a randomly initialised transformers LlamaForCausalLM
in bf16 with gradient checkpointing (benchmarks/calibrate_dpo_loss.py's), a frozen copy as the DPO reference. It
measures the peak of live CPU bytes over one step beyond its start (torch.profiler's memory events,
benchmarks/calibrate_step_temporaries.py profiled_peak) after a warm-up step, in copies of the batch's fp32 logits
(rows x tokens x V x 4 B): the fp32 logits held, the kernel's gradient and its cast to bf16 are 2.5.

Compared with the estimate's activations for the same model and shape with the method setup OpenRLHF SFT / DPO.

    PYTHONPATH=DIR:. python benchmarks/calibrate_openrlhf_loss.py
writes benchmarks/openrlhf_loss.json (the model's config and the rows: tests/test_memory_activations.py reads them)
and benchmarks/openrlhf_loss.md.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_dpo_loss import HIDDEN, LAYERS, VOCAB, _models, config, method_activations, write_rows  # noqa: E402
from calibrate_step_temporaries import profiled_peak  # noqa: E402

CASES = [{"method": "sft", "rows": 1, "tokens": 512}, {"method": "sft", "rows": 4, "tokens": 512},
         {"method": "dpo", "rows": 2, "tokens": 512}, {"method": "dpo", "rows": 4, "tokens": 256},
         # the PPO actor's step, --entropy_loss_coef unset, 0 (the entropy logged) and 0.01 (in the loss)
         {"method": "ppo", "rows": 2, "tokens": 512}, {"method": "ppo", "rows": 2, "tokens": 512, "entropy_coef": 0.0},
         {"method": "ppo", "rows": 2, "tokens": 512, "entropy_coef": 0.01},
         {"method": "ppo", "rows": 4, "tokens": 256, "entropy_coef": 0.01},
         # KTO (to 0.9.5): rows is the micro batch, the matched half; the collate adds as many unmatched KL rows
         {"method": "kto", "rows": 2, "tokens": 512}, {"method": "kto", "rows": 4, "tokens": 256}]
RESPONSE_SHARE = 2  # the PPO rows' response is their second half (action_mask)
ROWS_AT_ONCE = 8  # the replica's rows per block (a Triton program handles one row; 8 keeps the loop short)
OUT = REPO / "benchmarks" / "openrlhf_loss.json"


def _cross_entropy_module() -> types.ModuleType:
    """flash_attn.ops.triton.cross_entropy as a CPU replica of its allocations (the module docstring)."""
    import torch

    class CrossEntropyLoss(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, logits: Any, labels: Any) -> tuple[Any, Any]:
            n_rows = logits.shape[0]
            losses = torch.empty(n_rows, dtype=torch.float)
            lse = torch.empty(n_rows, dtype=torch.float)
            z_losses = torch.empty(n_rows, dtype=torch.float)
            for i in range(0, n_rows, ROWS_AT_ONCE):
                block = logits[i:i + ROWS_AT_ONCE]
                lse[i:i + ROWS_AT_ONCE] = torch.logsumexp(block, dim=-1)
                picked = block.gather(1, labels[i:i + ROWS_AT_ONCE].clamp(min=0).unsqueeze(1)).squeeze(1)
                losses[i:i + ROWS_AT_ONCE] = lse[i:i + ROWS_AT_ONCE] - picked
            losses.masked_fill_(labels == -100, 0.0)
            ctx.save_for_backward(logits, lse, labels)
            ctx.mark_non_differentiable(z_losses)
            return losses, z_losses

        @staticmethod
        def backward(ctx: Any, grad_losses: Any, grad_z_losses: Any) -> tuple[Any, None]:
            logits, lse, labels = ctx.saved_tensors
            dlogits = torch.empty_like(logits)
            for i in range(0, logits.shape[0], ROWS_AT_ONCE):
                probs = torch.exp(logits[i:i + ROWS_AT_ONCE] - lse[i:i + ROWS_AT_ONCE, None])
                rows = torch.arange(probs.shape[0])
                label = labels[i:i + ROWS_AT_ONCE]
                probs[rows, label.clamp(min=0)] -= (label != -100).float()
                dlogits[i:i + ROWS_AT_ONCE] = probs * grad_losses[i:i + ROWS_AT_ONCE, None]
            return dlogits, None

    module = types.ModuleType("flash_attn.ops.triton.cross_entropy")

    def cross_entropy_loss(logits: Any, labels: Any, **_: Any) -> tuple[Any, Any]:
        return CrossEntropyLoss.apply(logits, labels)

    module.cross_entropy_loss = cross_entropy_loss  # type: ignore[attr-defined]
    return module


def _install_flash_attn() -> None:
    """The replica, and stubs for the flash-attn modules OpenRLHF imports at load time but these paths never call."""
    def unused(*args: Any, **kwargs: Any) -> None:
        raise NotImplementedError("flash-attn stub: packed samples and ring attention are not measured")

    modules = {name: types.ModuleType(name) for name in (
        "flash_attn", "flash_attn.ops", "flash_attn.ops.triton", "flash_attn.bert_padding", "flash_attn.utils",
        "flash_attn.utils.distributed")}
    for name in ("index_first_axis", "pad_input", "rearrange", "unpad_input"):
        setattr(modules["flash_attn.bert_padding"], name, unused)
    modules["flash_attn.utils.distributed"].all_gather = unused  # type: ignore[attr-defined]
    modules["flash_attn.ops.triton.cross_entropy"] = _cross_entropy_module()
    for name, module in modules.items():  # transformers asks importlib whether flash_attn is installed
        module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules.update(modules)


def _actors() -> tuple[Any, Any]:
    from openrlhf.models.actor import Actor

    model, ref = _models()
    actors = Actor(model), Actor(ref)
    for actor in actors:  # set by the from-path branch of Actor.__init__ only (actor.py @ v0.8.5)
        actor.packing_samples = False
    return actors


def measure(method: str, rows: int, tokens: int, entropy_coef: float | None = None) -> dict[str, int]:
    """Peak live bytes of one step: openrlhf/trainer/sft_trainer.py fit, or dpo_trainer.py fit (the policy's
    concatenated_forward, the reference's under no_grad, DPOLoss, backward), or the PPO actor's
    trainer/ray/ppo_actor.py training_step (Actor.forward with return_entropy, PolicyLoss, the entropy term)
    @ v0.8.5."""
    import torch
    from openrlhf.models.loss import DPOLoss, PolicyLoss, SFTLoss

    actor, ref = _actors()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, VOCAB, (rows, tokens), generator=generator)
    mask = torch.ones_like(ids)
    if method == "sft":
        loss_fn = SFTLoss()
        loss_mask = mask.clone()
        loss_mask[:, : tokens // 4] = 0  # the prompt's quarter

        def step() -> None:
            per_token_log_probs, _output = actor(ids, attention_mask=mask, return_output=True, return_logprobs=True)
            loss = loss_fn(per_token_log_probs, loss_mask[:, :-1])
            loss.backward()  # the output (its fp32 logits) held to here, as fit does
    elif method == "kto":
        step = _kto_step(actor, ref, ids, mask, rows, tokens)
    elif method == "ppo":
        response = tokens // RESPONSE_SHARE
        action_mask = torch.ones(rows, response, dtype=torch.bool)
        old_log_probs, advantages = (torch.randn(rows, response, generator=generator) for _ in range(2))
        policy_loss = PolicyLoss(0.2)

        def step() -> None:
            # ppo_actor.py training_step @ v0.8.5, one micro batch without packing
            action_log_probs, output = actor(ids, action_mask, attention_mask=mask, return_output=True,
                                             return_entropy=entropy_coef is not None)
            loss, _clip_ratio = policy_loss(action_log_probs, old_log_probs, advantages, action_mask=action_mask)
            if entropy_coef is not None:
                entropy = (output.entropy[:, -response:] * action_mask).sum() / action_mask.sum()
                if entropy_coef != 0:
                    loss = loss - entropy * entropy_coef
            loss.backward()
    else:
        from openrlhf.trainer.dpo_trainer import DPOTrainer

        trainer = object.__new__(DPOTrainer)
        trainer.strategy = types.SimpleNamespace(ring_attn_group=None)
        trainer.tokenizer = types.SimpleNamespace(pad_token_id=0)
        trainer.packing_samples = False
        dpo = DPOLoss(0.1)
        pairs = rows // 2
        chosen, rejected = ids[:pairs], ids[pairs:]
        prompt = [tokens // 4] * pairs

        def step() -> None:
            chosen_logps, rejected_logps, _, _ = trainer.concatenated_forward(
                actor, chosen, mask[:pairs], rejected, mask[pairs:], prompt)
            with torch.no_grad():
                ref_chosen, ref_rejected, _, _ = trainer.concatenated_forward(
                    ref, chosen, mask[:pairs], rejected, mask[pairs:], prompt)
            loss, _, _ = dpo(chosen_logps, rejected_logps, ref_chosen, ref_rejected)
            loss.backward()

    step()  # every parameter's .grad now exists
    actor.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return {"peak": peak}


def _kto_step(actor: Any, ref: Any, ids: Any, mask: Any, rows: int, tokens: int) -> Any:
    """openrlhf/trainer/kto_trainer.py fit @ v0.8.5, one micro batch: the policy's compute_model_logps_with_KL (the
    matched half, then the unmatched KL half, both with their graphs), the reference's under no_grad, KTOLoss
    (its all_reduce over a one-process gloo group) and the backward. ``ids`` holds the matched rows; the KL rows
    are the same tokens (the collate pairs each prompt with another sample's completion)."""
    import os

    import torch
    import torch.distributed as dist
    from openrlhf.models.loss import KTOLoss
    from openrlhf.trainer.kto_trainer import KTOTrainer

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29533")
        dist.init_process_group("gloo", rank=0, world_size=1)
    trainer = object.__new__(KTOTrainer)
    trainer.strategy = types.SimpleNamespace(ring_attn_group=None)
    loss_fn = KTOLoss(0.1, 1.0, 1.0, 1, torch.device("cpu"))
    both, both_mask = torch.cat([ids, ids.roll(1, 0)]), torch.cat([mask, mask])
    labels = torch.tensor([i % 2 for i in range(rows)] + [-1] * rows)
    prompts = [tokens // 4] * (2 * rows)

    def step() -> None:
        policy = trainer.compute_model_logps_with_KL(actor, both, both_mask, labels, prompts)
        with torch.no_grad():
            reference = trainer.compute_model_logps_with_KL(ref, both, both_mask, labels, prompts)
        loss, *_ = loss_fn(*policy[:3], *reference[:3])
        loss.backward()  # policy[2], the KL half's log-probs, holds its graph to here
    return step


def predict(method: str, rows: int, tokens: int, entropy_coef: float | None = None) -> int:
    """The estimate's activations for the same model and shape with the OpenRLHF setup (rows: the sequences through
    the policy, DPO's chosen and rejected together)."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.vocab import Method, TrainerFamily

    setup = MethodSetup(method=Method(method), trainer=TrainerFamily.OPENRLHF, trainer_version="0.8.5",
                        entropy_coef=entropy_coef)
    if setup.method == Method.KTO:  # the activations and the KL half the estimate adds (memory/method.py)
        return kto_prediction(setup, rows, tokens)
    return method_activations(setup, tokens, rows)


def kto_prediction(setup: Any, rows: int, tokens: int) -> int:
    """activation_bytes of the KTO view of the policy plus kto_kl_terms with its backward_kept."""
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.memory.method import activation_spec, kto_kl_terms
    from zeroadvisor.memory.parallel import Parallel
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape

    spec = spec_from_hf_config(config())
    shape = TrainingShape(sequence_length=tokens, flash_attention=True, activation_checkpointing=Checkpointing.FULL,
                          method=setup)
    act = activation_bytes(activation_spec(setup, spec), shape, rows, "bf16")
    return act.nbytes + sum(t.nbytes for t in kto_kl_terms(shape, spec, rows, Parallel(), act.backward_kept))


def rows_for() -> list[dict[str, Any]]:
    import openrlhf

    out = []
    for case in CASES:
        method, rows, tokens, coef = case["method"], case["rows"], case["tokens"], case.get("entropy_coef")
        one = rows * tokens * VOCAB * 4  # one fp32 copy of the batch's logits
        measured = measure(method, rows, tokens, coef)
        predicted = predict(method, rows, tokens, coef)
        out.append({"openrlhf": openrlhf.__version__ if hasattr(openrlhf, "__version__") else "0.8.5",
                    "entropy_coef": coef, **case,
                    "copy_bytes": one, **measured, "measured_copies": round(measured["peak"] / one, 3),
                    "predicted": predicted, "ratio": round(predicted / measured["peak"], 3)})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [("# OpenRLHF's SFT, DPO and PPO actor steps: measured vs estimate "
              "(benchmarks/calibrate_openrlhf_loss.py)"), "",
             ("OpenRLHF 0.8.5's own Actor.forward, log_probs_from_logits, SFTLoss, DPOTrainer.concatenated_forward and "
              "DPOLoss, with a CPU replica of flash-attn's Triton cross_entropy_loss that makes its allocations (the "
              "fp32 logits saved, one empty_like for their gradient), one step and its backward on CPU: a "
              f"transformers Llama (hidden {HIDDEN}, {LAYERS} layers, vocabulary {VOCAB:,}) in bf16 with gradient "
              "checkpointing; DPO's reference a frozen copy, its pass under no_grad after the policy's. Peaks in "
              "copies of the batch's fp32 logits (rows x tokens x V x 4 B; DPO's rows are chosen and rejected "
              "together); the estimate is memory/activations.py for the OpenRLHF view of the policy "
              "(memory/method.py activation_spec: FUSED_CE_LOSS_BYTES)."),
             "", ("The PPO actor's step is ppo_actor.py training_step's: Actor.forward over the whole sequence (the "
                  "response its second half), PolicyLoss, and with --entropy_loss_coef set the entropy of "
                  "compute_entropy (compiled by inductor, as OpenRLHF's @torch.compile asks), in the loss where the "
                  "coefficient is not 0 (FUSED_CE_ENTROPY_BYTES)."),
             "", ("| OpenRLHF | method | entropy coef | rows | tokens | measured peak (fp32 copies) | "
                  "predicted/measured |"),
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['openrlhf']} | {r['method']} | {'' if r['entropy_coef'] is None else r['entropy_coef']} | "
              f"{r['rows']} | {r['tokens']} | {r['measured_copies']:.2f} | {r['ratio']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


def main() -> None:
    _install_flash_attn()
    rows = rows_for()
    write_rows(OUT, rows, markdown(rows))


if __name__ == "__main__":
    main()

"""Measure TRL's DPO loss side on CPU against memory/method.py (dpo_reference_pass_terms) and memory/activations.py.

TRL's DPOTrainer._compute_loss (0.29 to 1.14) runs the policy, the reference (under no_grad) and the metrics in one
function that keeps the policy's output to its end, so its loss side can hold more copies of the vocabulary-wide
logits than the backward does. This script runs that very method, from the TRL importable here (the oracle extra's
pin, or an older one put first on PYTHONPATH: ``pip install --no-deps --target DIR trl==1.5.1``), on a randomly
initialised transformers LlamaForCausalLM in bf16 with gradient checkpointing and a frozen deep copy as the reference
model, for one paired batch (chosen and rejected rows), and measures the peak of live CPU bytes over the loss and its
backward beyond the start (torch.profiler's memory events, benchmarks/calibrate_step_temporaries.py profiled_peak),
after a warm-up step that made every gradient. The model is narrow (hidden 64) and the vocabulary wide, so the logits
are nearly all of it; the result is stated in copies of the paired batch's bf16 logits.

One difference between the CPU and a GPU is measured and removed: on the CPU ``Tensor.mean`` of a bf16 tensor first
copies it to fp32 (aten::mean -> sum -> to); a CUDA reduction reads the bf16 input. The chosen rows' masked copy
whose mean the metrics take is small here (the completion is a quarter of each row), so the entropy's moment is the
peak either way.

Compared with the estimate for the same model and shape with the method setup TRL DPO at the measured release:
the activations (the backward's three copies) plus the dpo_reference_pass term (its expected bytes and its bound).

    PYTHONPATH=. python benchmarks/calibrate_dpo_loss.py                  # the installed TRL
    PYTHONPATH=/tmp/trl151:. python benchmarks/calibrate_dpo_loss.py --merge   # another release, merged in
writes benchmarks/dpo_loss.json (rows by release) and benchmarks/dpo_loss.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import json
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_step_temporaries import profiled_peak  # noqa: E402

HIDDEN, LAYERS, VOCAB = 64, 2, 32768
CASES = [{"tokens": 512, "pairs": 1}, {"tokens": 512, "pairs": 4}, {"tokens": 1024, "pairs": 2}]
COMPLETION_SHARE = 4  # the completion is the last quarter of each row (the prompt the first three)
OUT = REPO / "benchmarks" / "dpo_loss.json"


def config() -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": HIDDEN,
            "intermediate_size": 172, "num_hidden_layers": LAYERS, "num_attention_heads": 4, "num_key_value_heads": 2,
            "vocab_size": VOCAB, "max_position_embeddings": 32768, "tie_word_embeddings": False,
            "torch_dtype": "bfloat16", "attention_dropout": 0.0, "rms_norm_eps": 1e-6}


def _models() -> tuple[Any, Any]:
    """The policy (bf16, gradient checkpointing, training) and a frozen deep copy as the reference model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**{k: v for k, v in config().items() if k not in ("architectures", "model_type", "torch_dtype")})
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return model, ref


def _trainer(model: Any, ref: Any, weighting: bool = False) -> Any:
    """A DPOTrainer carrying what _compute_loss reads, without the datasets and tokenizer its __init__ prepares
    (``weighting``: WPO's use_weighting)."""
    from accelerate import Accelerator
    from trl.trainer.dpo_trainer import DPOTrainer

    trainer = object.__new__(DPOTrainer)
    args = types.SimpleNamespace(gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False},
                                 max_length=None, discopop_tau=0.05, rpo_alpha=None, use_weighting=weighting)
    trainer.__dict__.update(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), aux_loss_enabled=False,
        precompute_ref_logps=False, args=args, ld_alpha=None, f_divergence_type="reverse_kl",
        loss_types=["sigmoid"], loss_weights=[1.0], beta=0.1, use_weighting=weighting, label_smoothing=0.0,
        _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)},
        _total_train_tokens=0, use_liger_kernel=False)
    return trainer


def _kto_trainer(model: Any, ref: Any) -> Any:
    """A KTOTrainer carrying what _compute_loss (1.8+) reads, the KL term on (loss_type kto, the default)."""
    from accelerate import Accelerator
    from trl.trainer.kto_trainer import KTOTrainer

    trainer = object.__new__(KTOTrainer)
    args = types.SimpleNamespace(gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": False})
    trainer.__dict__.update(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), aux_loss_enabled=False,
        precompute_ref_logps=False, args=args, calculate_KL=True, loss_type="kto", beta=0.1, desirable_weight=1.0,
        undesirable_weight=1.0, use_liger_kernel=False,
        _metrics={"train": collections.defaultdict(list), "eval": collections.defaultdict(list)},
        _total_train_tokens=0)
    return trainer


def _kto_forward_trainer(model: Any, ref: Any) -> Any:
    """A KTOTrainer of the older forward (before 1.8) carrying what get_batch_loss_metrics reads."""
    import contextlib

    from accelerate import Accelerator
    from trl.trainer.kto_trainer import KTOTrainer

    trainer = object.__new__(KTOTrainer)
    args = types.SimpleNamespace(use_liger_loss=False, use_liger_kernel=False, precompute_ref_log_probs=False)
    trainer.__dict__.update(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), aux_loss_enabled=False, is_encoder_decoder=False,
        label_pad_token_id=-100, calculate_KL=True, loss_type="kto", beta=0.1, desirable_weight=1.0,
        undesirable_weight=1.0, args=args, precompute_ref_log_probs=False, aux_loss_coef=0.0, use_liger_loss=False,
        _stored_metrics=collections.defaultdict(lambda: collections.defaultdict(list)))
    trainer.null_ref_context = contextlib.nullcontext
    return trainer


WPO = "dpo wpo"  # the rows of DPO with WPO weighting (DPOConfig.use_weighting)


def _orpo_trainer() -> Any:
    """An ORPOTrainer carrying what get_batch_loss_metrics reads (trl.experimental.orpo from 0.26, trl.trainer
    before): no reference model; the chosen rows' NLL and the log-odds over per-row log-probs."""
    from accelerate import Accelerator

    try:
        from trl.experimental.orpo.orpo_trainer import ORPOTrainer
    except ImportError:  # before 0.26
        from trl.trainer.orpo_trainer import ORPOTrainer  # type: ignore[no-redef]

    trainer = object.__new__(ORPOTrainer)
    trainer.__dict__.update(
        accelerator=Accelerator(cpu=True), aux_loss_enabled=False, is_encoder_decoder=False, padding_value=0,
        label_pad_token_id=-100, beta=0.1, aux_loss_coef=0.0, args=types.SimpleNamespace(),
        _stored_metrics=collections.defaultdict(lambda: collections.defaultdict(list)))
    return trainer


def step_peaks(model: Any, forward: Callable[[], None], backward: Callable[[], None]) -> dict[str, int]:
    """Peak live bytes of a whole step (``forward`` then ``backward``) after a warm-up step that made every gradient,
    of the forward alone, what it leaves held for the backward, and of the backward on top of that."""
    def step() -> None:
        forward()
        backward()

    step()  # every parameter's .grad now exists
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    forward_peak, held = profiled_peak(forward)
    backward_peak, _ = profiled_peak(backward)
    return {"peak": peak, "forward_peak": forward_peak, "held": held, "backward_peak": held + backward_peak}


@contextlib.contextmanager
def _gpu_like_mean() -> Iterator[None]:
    """``Tensor.mean`` of a large bf16 tensor reduced one slice at a time, as a CUDA reduction reads bf16 without the
    whole fp32 copy the CPU kernel makes first (aten::mean -> sum -> to): ORPO's metrics take the mean of the chosen
    and the rejected half of the logits, whose CPU copy (1 copy of the batch's logits) would be the peak."""
    import torch

    plain = torch.Tensor.mean

    def mean(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self.dtype != torch.bfloat16 or args or kwargs or self.numel() < 1_000_000 or self.dim() < 2:
            return plain(self, *args, **kwargs)
        slices = [self[i, j:j + 64] for i in range(self.shape[0]) for j in range(0, self.shape[1], 64)]
        total = sum(plain(part.float()) * part.numel() for part in slices)  # 64 positions' fp32 copy at a time
        return (total / self.numel()).to(self.dtype)

    torch.Tensor.mean = mean  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.mean = plain  # type: ignore[method-assign]


def measure_orpo(tokens: int, pairs: int) -> dict[str, float]:
    """Peak live bytes of ORPOTrainer.get_batch_loss_metrics + backward (one paired batch, the GPU's bf16 mean)."""
    import torch

    model, _ = _models()
    trainer = _orpo_trainer()
    prompt = tokens - tokens // COMPLETION_SHARE

    def side(ids: Any) -> dict[str, Any]:
        labels = ids.clone()
        labels[:, :prompt] = -100
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}

    batch = {f"{name}_{key}": value for name in ("chosen", "rejected")
             for key, value in side(torch.randint(1, VOCAB, (pairs, tokens))).items()}
    kept: list[Any] = []

    def forward() -> None:
        kept.append(trainer.get_batch_loss_metrics(model, batch, train_eval="train")[0])

    def backward() -> None:
        kept.pop().backward()

    with _gpu_like_mean():
        return step_peaks(model, forward, backward)


def measure(tokens: int, pairs: int, method: str = "dpo") -> dict[str, float]:
    """Peak live bytes of _compute_loss + backward, and of the forward side and the backward apart. KTO runs the
    same 2 x pairs rows unpaired, desirable and undesirable alternating, with a batch of mismatched completions
    for its KL term."""
    import torch

    if method == "orpo":
        return measure_orpo(tokens, pairs)
    # DPO with WPO weighting (use_weighting) runs DPO's own path
    model, ref = _models()
    rows = 2 * pairs
    ids = torch.randint(0, VOCAB, (rows, tokens))
    prompt = tokens - tokens // COMPLETION_SHARE
    completion = torch.cat([torch.zeros(rows, prompt, dtype=torch.long),
                            torch.ones(rows, tokens - prompt, dtype=torch.long)], dim=1)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": completion}
    import trl
    from packaging.version import Version

    older_kto = method == "kto" and Version(trl.__version__) < Version("1.8")  # KTOTrainer.forward
    if older_kto:
        labels = ids.clone()
        labels[:, :prompt] = -100
        kl_ids = torch.randint(1, VOCAB, (rows, tokens))
        kl_labels = kl_ids.clone()
        kl_labels[:, :prompt] = -100
        inputs = {"completion_input_ids": ids, "completion_attention_mask": torch.ones_like(ids),
                  "completion_labels": labels, "KL_completion_input_ids": kl_ids,
                  "KL_completion_attention_mask": torch.ones_like(ids), "KL_completion_labels": kl_labels,
                  "label": [True, False] * pairs}
    elif method == "kto":
        inputs.update(label=torch.tensor([True, False] * pairs), KL_input_ids=torch.randint(0, VOCAB, (rows, tokens)),
                      KL_attention_mask=torch.ones_like(ids), KL_completion_mask=completion)
    trainer = (_kto_forward_trainer(model, ref) if older_kto else _kto_trainer(model, ref) if method == "kto"
               else _trainer(model, ref, weighting=method == WPO))
    kept: list[Any] = []

    def forward() -> None:
        kept.append(trainer.get_batch_loss_metrics(model, inputs)[0] if older_kto
                    else trainer._compute_loss(model, inputs, False))

    def backward() -> None:
        kept.pop().backward()

    return step_peaks(model, forward, backward)


# The reference pass before TRL 0.15 and in LLaMA-Factory (get_batch_loss_metrics -> concatenated_forward ->
# get_batch_logps), neither importable beside transformers 5 (TRL 0.9.6 imports MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES,
# LLaMA-Factory 0.9.3 AutoModelForVision2Seq): a replica of llamafactory/train/dpo/trainer.py concatenated_forward and
# train/trainer_utils.py get_batch_logps @ v0.9.3, line for line where memory is made (trl/trainer/dpo_trainer.py @
# v0.9.6 is the same with the logits in the model's dtype, no .to(torch.float32)).
REPLICAS = {"llama-factory-0.9.3": True, "trl-0.9.6": False}  # name -> the logits upcast to fp32


def _get_batch_logps(logits: Any, labels: Any) -> tuple[Any, Any]:
    """llamafactory/train/trainer_utils.py get_batch_logps @ v0.9.3 (trl 0.9.6 DPOTrainer.get_batch_logps)."""
    import torch

    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    loss_mask = labels != -100
    labels[labels == -100] = 0
    per_token_logps = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    return (per_token_logps * loss_mask).sum(-1), loss_mask.sum(-1)


def _whole_step(step: Any, model: Any) -> dict[str, float]:
    """The peak of a replica's whole ``step`` after a warm-up step that made every gradient (not split: the
    replica's forward and backward are one function)."""
    step()
    model.zero_grad(set_to_none=False)
    peak, _ = profiled_peak(step)
    return {"peak": peak, "forward_peak": peak, "backward_peak": 0}


def measure_replica(tokens: int, pairs: int, upcast: bool) -> dict[str, float]:
    """The peak of the replica's DPO step (policy, reference pass under no_grad, the metrics' means, backward)."""
    import torch
    import torch.nn.functional as F

    model, ref = _models()
    ids = torch.randint(0, VOCAB, (2 * pairs, tokens))
    labels = ids.clone()
    labels[:, : tokens - tokens // COMPLETION_SHARE] = -100

    def forward(m: Any) -> tuple[Any, ...]:
        logits = m(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
        logits = logits.to(torch.float32) if upcast else logits
        logps, _ = _get_batch_logps(logits, labels)
        chosen, rejected = logps.split(pairs, 0)
        chosen_logits, rejected_logits = logits.split(pairs, 0)
        return chosen, rejected, chosen_logits, rejected_logits

    def step() -> None:
        chosen, rejected, chosen_logits, rejected_logits = forward(model)
        with torch.no_grad():
            ref_chosen, ref_rejected, *_ = forward(ref)
        loss = -F.logsigmoid(0.1 * ((chosen - rejected) - (ref_chosen - ref_rejected))).mean()
        _ = chosen_logits.mean().item(), rejected_logits.mean().item()
        loss.backward()

    return _whole_step(step, model)


def measure_kto_replica(tokens: int, pairs: int) -> dict[str, float]:
    """LLaMA-Factory 0.9.3's KTO step (llamafactory/train/kto/trainer.py forward, concatenated_forward,
    compute_reference_log_probs, get_batch_loss_metrics), line for line where memory is made: the policy's fp32
    forward and its KL forward (no_grad), the boolean-indexed chosen/rejected logits held for the metrics, the
    reference's two forwards, the loss and its backward; 2 x pairs rows, desirable and undesirable alternating."""
    import torch
    import torch.nn.functional as F

    model, ref = _models()
    rows = 2 * pairs

    def sample() -> tuple[Any, Any]:
        ids = torch.randint(0, VOCAB, (rows, tokens))
        labels = ids.clone()
        labels[:, : tokens - tokens // COMPLETION_SHARE] = -100
        return ids, labels

    (ids, labels), (kl_ids, kl_labels) = sample(), sample()
    tags = torch.tensor([True, False] * pairs)

    def forward(m: Any, kl: bool) -> tuple[Any, Any]:
        x, y = (kl_ids, kl_labels) if kl else (ids, labels)
        logits = m(input_ids=x, attention_mask=torch.ones_like(x), use_cache=False).logits.to(torch.float32)
        logps, _ = _get_batch_logps(logits, y)
        return logits, logps

    def concatenated(m: Any) -> tuple[Any, ...]:
        target_logits, target_logps = forward(m, False)
        with torch.no_grad():
            _, kl_logps = forward(m, True)
        return (target_logps[tags], target_logps[~tags], target_logits[tags], target_logits[~tags], kl_logps)

    def step() -> None:
        chosen, rejected, chosen_logits, rejected_logits, kl_logps = concatenated(model)
        with torch.no_grad():
            ref_chosen, ref_rejected, _, _, ref_kl = concatenated(ref)
        kl = (kl_logps - ref_kl).mean().clamp(min=0).detach()
        losses = torch.cat((1 - F.sigmoid(0.1 * (chosen - ref_chosen - kl)),
                            1 - F.sigmoid(0.1 * (kl - (rejected - ref_rejected))))).nanmean()
        _ = chosen_logits.nansum().item(), rejected_logits.nansum().item()
        losses.backward()

    return _whole_step(step, model)


def write_rows(out: Path, rows: list[dict[str, Any]], table: str) -> None:
    """Print each row, write them with this script's model config to ``out`` (JSON) and ``table`` beside it (.md)."""
    for row in rows:
        print(json.dumps(row))
    out.write_text(json.dumps({"model": config(), "rows": rows}, indent=1) + "\n")
    out.with_suffix(".md").write_text(table)


def method_activations(setup: Any, tokens: int, rows: int) -> int:
    """The estimate's activations for this script's model at ``tokens`` x ``rows`` under ``setup`` (a MethodSetup):
    activation_bytes of the method's view of the policy (memory/method.py activation_spec), bf16, full
    recomputation, fused attention."""
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.memory.method import activation_spec
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape

    shape = TrainingShape(sequence_length=tokens, flash_attention=True, activation_checkpointing=Checkpointing.FULL,
                          method=setup)
    return activation_bytes(activation_spec(setup, spec_from_hf_config(config())), shape, rows, "bf16").nbytes


def predict(tokens: int, pairs: int, release: str, method: str = "dpo",
            trainer: str = "trl") -> tuple[int, int]:
    """The estimate's activations for the same model and shape (expected, bound): activation_bytes plus the
    dpo_reference_pass term at ``release``."""
    from zeroadvisor.config.method import MethodSetup
    from zeroadvisor.memory.activations import activation_bytes
    from zeroadvisor.memory.method import activation_spec, batch_factor, dpo_reference_pass_terms, kto_kl_terms
    from zeroadvisor.memory.parallel import Parallel
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import Checkpointing, TrainingShape
    from zeroadvisor.vocab import Method, TrainerFamily

    setup = MethodSetup(method=Method.DPO if method == WPO else Method(method), trainer=TrainerFamily(trainer),
                        trainer_version=release, use_reference=method != "orpo", use_weighting=method == WPO)
    samples = 2 * pairs if method == "kto" else pairs  # KTO's rows are its samples
    shape = TrainingShape(sequence_length=tokens, flash_attention=True, activation_checkpointing=Checkpointing.FULL,
                          method=setup)
    spec = spec_from_hf_config(config())
    # as memory/estimate.py: the method's view of the policy (its logits' dtype) and its rows per sample
    act = activation_bytes(activation_spec(setup, spec), shape, samples * batch_factor(setup), "bf16")
    extra = dpo_reference_pass_terms(shape, spec, samples, Parallel(), 2, act.loss_headroom)
    extra += kto_kl_terms(shape, spec, samples, Parallel())
    return act.nbytes + sum(t.nbytes for t in extra), act.nbytes + sum(t.upper for t in extra)


def rows_for(release: str, cases: list[dict[str, int]] | None = None, method: str = "dpo") -> list[dict[str, Any]]:
    out = []
    for case in CASES if cases is None else cases:
        tokens, pairs = case["tokens"], case["pairs"]
        one = 2 * pairs * tokens * VOCAB * 2  # one bf16 copy of the batch's logits (2 x pairs rows)
        measured = measure(tokens, pairs, method)
        expected, bound = predict(tokens, pairs, release, method)
        out.append({"trl": release, "method": method, **case, "copy_bytes": one,
                    **dict(measured.items()),
                    "measured_copies": round(measured["peak"] / one, 3),
                    "forward_copies": round(measured["forward_peak"] / one, 3),
                    "backward_copies": round(measured["backward_peak"] / one, 3),
                    "predicted": expected, "predicted_bound": bound,
                    "ratio": round(expected / measured["peak"], 3),
                    "bound_ratio": round(bound / measured["peak"], 3)})
    return out


def replica_rows() -> list[dict[str, Any]]:
    """The replicas' rows, each against the estimate at the release it copies (LLaMA-Factory 0.9.3's DPO and KTO,
    TRL 0.9.6's DPO)."""
    out = []
    runs = [(name, "dpo", upcast) for name, upcast in REPLICAS.items()] + [(next(iter(REPLICAS)), "kto", True)]
    for name, method, upcast in runs:
        trainer, release = name.rsplit("-", 1)
        for case in CASES:
            tokens, pairs = case["tokens"], case["pairs"]
            one = 2 * pairs * tokens * VOCAB * 2  # bf16 copies, as every row
            measured = (measure_kto_replica(tokens, pairs) if method == "kto"
                        else measure_replica(tokens, pairs, upcast))
            expected, bound = predict(tokens, pairs, release, method, trainer)
            out.append({"trl": f"replica {name}", "method": method, **case, "copy_bytes": one, **measured,
                        "measured_copies": round(measured["peak"] / one, 3), "forward_copies": None,
                        "backward_copies": None, "predicted": expected, "predicted_bound": bound,
                        "ratio": round(expected / measured["peak"], 3),
                        "bound_ratio": round(bound / measured["peak"], 3)})
    return out


def _copies(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# TRL's DPO, KTO and ORPO loss side: measured vs estimate (benchmarks/calibrate_dpo_loss.py)", "",
             (f"TRL's own DPOTrainer._compute_loss and its backward on CPU: a transformers Llama (hidden {HIDDEN}, "
             f"{LAYERS} layers, vocabulary {VOCAB:,}) in bf16 with gradient checkpointing, a frozen copy as the "
             "reference, the completion the last quarter of each row. Peaks in copies of the paired batch's bf16 "
             "logits (2 x pairs rows x tokens x V x 2 B); the estimate is memory/activations.py plus "
             "memory/method.py dpo_reference_pass_terms at the same release (expected, and the bound where the "
             "chosen rows' masked copy may add to it). The CPU's fp32 copy for a bf16 mean is in these peaks (a GPU "
             "reads bf16 directly): about 0.25 copies at the metrics' moment, under the entropy's from 1.6. The "
             "replica rows run a line-for-line copy of LLaMA-Factory 0.9.3's and TRL 0.9.6's DPO loss (neither "
             "imports beside transformers 5), whose whole step is measured (its peak is the reference pass: the "
             "policy's held logits and log-softmax, the pass's logits, their contiguous shifted copy and its "
             "log-softmax; LLaMA-Factory's in fp32, 5 fp32 copies = 10 bf16), and LLaMA-Factory 0.9.3's KTO (its "
             "KL forward after the policy's: 6 fp32 copies = 12 bf16). The ORPO rows run TRL's own "
             "ORPOTrainer.get_batch_loss_metrics (no reference model) with the bf16 means of its metrics reduced a "
             "slice at a time, as a GPU reads them (on the CPU their fp32 copy, a whole copy of the logits, would be "
             "the peak). The \"dpo wpo\" rows are DPO with WPO weighting (use_weighting)."),
             "", ("| TRL | method | tokens | pairs (KTO: rows / 2) | measured peak (copies) | forward side | "
                  "backward | predicted/measured | bound/measured |"), "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['trl']} | {r.get('method', 'dpo')} | {r['tokens']} | {r['pairs']} | {r['measured_copies']:.2f} | "
              f"{_copies(r['forward_copies'])} | {_copies(r['backward_copies'])} | {r['ratio']:.3f} | "
              f"{r['bound_ratio']:.3f} |" for r in rows]
    return "\n".join(lines) + "\n"


def _installed_rows(release: str) -> list[dict[str, Any]]:
    """The rows of the TRL importable here: its DPO, its KTO where measure() drives it, and its ORPO."""
    wpo = rows_for(release, method=WPO) if Version(release) >= Version("0.29") else []
    return rows_for(release) + wpo + (rows_for(release, method="kto") if _kto_measurable(release) else []) + \
        rows_for(release, method="orpo")


def _kto_measurable(release: str) -> bool:
    """Whether this TRL's KTOTrainer is one measure() drives: _compute_loss from 1.8, the older forward's
    get_batch_loss_metrics before (1.5 to 1.7 keep it in trl.experimental under another interface: not measured)."""
    from trl.trainer.kto_trainer import KTOTrainer

    return Version(release) >= Version("1.8") or hasattr(KTOTrainer, "get_batch_loss_metrics")


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    """Replicas first (the oldest code), then by TRL release, method, shape."""
    replica = row["trl"].startswith("replica")
    return (not replica, Version("0") if replica else Version(row["trl"]), row["trl"], row.get("method", "dpo"),
            row["tokens"], row["pairs"])


def kept_rows(out: Path, rows: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], merge: bool,
              field: str | None = None) -> list[dict[str, Any]]:
    """The rows of a calibration's JSON ``out`` (a list, or an object holding it under ``field``) that ``rows`` do
    not replace (the same ``key``: another release's), kept where --merge asks; none otherwise (also used by
    calibrate_gkd_loss.py and calibrate_grpo_logits.py)."""
    if not merge or not out.exists():
        return []
    data = json.loads(out.read_text())
    new = {key(r) for r in rows}
    return [r for r in (data[field] if field else data) if key(r) not in new]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--merge", action="store_true", help="keep the other releases' rows in dpo_loss.json")
    parser.add_argument("--replicas", action="store_true",
                        help="measure the replicas (LLaMA-Factory's DPO and KTO, TRL 0.9.6's DPO)")
    options = parser.parse_args(argv)
    import trl

    rows = replica_rows() if options.replicas else _installed_rows(trl.__version__)
    for row in rows:
        print(json.dumps(row))
    everything = sorted(kept_rows(OUT, rows, lambda r: r["trl"], options.merge) + rows, key=_order)
    OUT.write_text(json.dumps(everything, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(markdown(everything))


if __name__ == "__main__":
    main()

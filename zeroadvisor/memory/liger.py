"""Liger Kernel (linkedin/Liger-Kernel): what its kernels keep where a run enables it.

A run enables it with the Trainer's ``use_liger_kernel`` (transformers >= 4.45: Trainer.__init__ calls
liger_kernel.transformers ``_apply_liger_kernel_to_instance``), LLaMA-Factory's ``enable_liger_kernel``,
ms-swift's ``--use_liger_kernel`` or axolotl's liger plugin. ``apply_liger_kernel_to_<model>``
(transformers/monkey_patch.py) enables by default rope, rms_norm, swiglu (geglu for Gemma) and
fused_linear_cross_entropy, for the model types of ``MODEL_TYPE_TO_APPLY_LIGER_FN``; for any other type
``_apply_liger_kernel_to_instance`` logs that there are no kernels and patches nothing.

Per kernel, against what transformers keeps (memory/activations.py), e bytes per activation element:

* fused linear cross-entropy (ops/fused_linear_cross_entropy.py fused_linear_cross_entropy_forward): the
  LM head and the loss in one autograd Function that computes the gradients in its forward, over chunks
  of ``chunk_size = next_power_of_2(cdiv(BT, cdiv(V, H)))`` tokens (BT tokens, V vocabulary, H hidden), so
  no tokens x V logits exist. At its peak, with every activation of the body alive: ``grad_input``
  (zeros_like(_input): e·BT·H, saved for backward), ``loss_1d`` (fp32 BT), ``target_mask`` (bool BT),
  the int64 labels (model/loss_utils.py LigerForCausalLMLoss: labels padded by one, then the shifted
  contiguous copy), and the chunk logits (chunk x V in the input dtype; the cross-entropy kernel writes
  their gradient in place; ``grad_logits_chunk @ weight`` adds chunk x H before its copy into grad_input).
  Up to 0.8.3 the loop binds the next chunk's ``_input_chunk @ weight.t()`` while ``grad_logits_chunk``
  still holds the previous one, so two chunks coexist (0.8.4+ reuse one ``logits_storage`` buffer). A
  trainable head adds ``grad_weight`` (zeros_like(weight): e·V·H), which backward returns as the weight's
  gradient: it is the head's gradient, made in the forward (ZeRO-3's "gathered_grad" term stands for the
  same tensor where the head is the largest module: counted once, here; memory/buffers.py gathered_terms).
  0.5.x to 0.6.1 accumulate it in place (torch.addmm out=grad_weight); 0.6.2 to 0.8.3 (and 0.8.4+ below
  compute capability 8) write ``grad_weight += torch.mm(grad_logits_chunk.t(), _input_chunk).float()``, a
  V x H product in e bytes
  and its fp32 copy per chunk: (e + 4)·V·H more. Up to 0.5.5 the model's forward passes
  ``hidden_states[..., :-1, :].contiguous()`` (model/qwen2.py lce_forward): a copy of the head input,
  e·B(T-1)·H. The peak counted takes each term at its largest over these versions (two
  chunks, the larger of the two copies): a bound on every version, by a chunk and one of the copies at most.
* RMSNorm (ops/rms_norm.py LigerRMSNormFunction.forward: ctx.save_for_backward(X, W, RSTD)): its input
  and the fp32 rstd per token, e·h + 4, where LlamaRMSNorm keeps the fp32 copy, the normalised tensor and
  rstd (4h + e·h + 4) and GemmaRMSNorm 8h + 4.
* SwiGLU / GEGLU (ops/swiglu.py LigerSiLUMulFunction, ops/geglu.py LigerGELUMulFunction:
  ctx.save_for_backward(a, b)): the gate and up projections' outputs; the product is the down
  projection's input: 3·e·f, where transformers' MLP also keeps the activation's input or output (4·e·f).
* RoPE (ops/rope.py LigerRopeFunction: rotates the contiguous q and k in place and saves the shared
  cos/sin): the rotated q and k are the tensors attention keeps, as with transformers: nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import Version

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.config.pinned_trl import trl_release
from zeroadvisor.memory import bytes as B
from zeroadvisor.model.spec import LayerFacts
from zeroadvisor.vocab import Method, TrainerFamily

FP32 = B.DTYPE_BYTES["fp32"]
IDS = 8  # int64 labels
MASK = 1  # bool target_mask

# transformers/monkey_patch.py MODEL_TYPE_TO_APPLY_LIGER_FN (Liger 0.8.5): the model types Liger patches.
MODEL_TYPES = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v4", "gemma", "gemma2", "gemma3_text", "gemma3", "gemma4_text",
    "gemma4", "glm4", "glm4v", "glm4v_moe", "gpt_oss", "internvl", "llama", "llama4_text", "llama4", "llava",
    "granite", "mllama", "mllama_text_model", "ministral", "mistral", "mixtral", "muse_glimmer", "nemotron",
    "olmo2", "pixtral", "olmo3", "qwen2", "qwen3", "qwen3_moe", "qwen2_vl", "qwen2_vl_text", "qwen2_5_vl",
    "qwen2_5_vl_text", "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "qwen3_vl",
    "qwen3_vl_text", "qwen3_vl_moe", "qwen3_vl_moe_text", "smollm3", "phi3", "paligemma", "falcon_h1", "smolvlm",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "exaone4"})
# The dense families whose norms and MLP are costed as Liger's modules (apply_liger_kernel_to_llama, _mistral,
# _qwen2, _qwen3: LigerRMSNorm + LigerSwiGLUMLP; _gemma, _gemma2: LigerRMSNorm(offset 1, casting "gemma") +
# LigerGEGLUMLP): each keeps separate gate/up/down projections, as the MLP term assumes. Elsewhere only the
# fused linear cross-entropy is counted and the layers stay transformers' (a bound: Liger's keep less).
LAYER_FAMILIES = frozenset({"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2"})
NORM = "liger_rmsnorm"  # LayerFacts.norm of Liger's RMSNorm
GLU = "liger_glu"  # LayerFacts.activation of Liger's SwiGLU/GEGLU


def norm_bytes(e: int, h: int, rows: int = 1) -> int:
    """Per token, one LigerRMSNorm over ``rows`` vectors (a q/k norm: one per head): the input X (e·h) and one
    RSTD per row (fp32; _CASTING_MODE_LLAMA and _GEMMA)."""
    return e * h + FP32 * rows


def mlp_wide(e: int, f: int) -> int:
    """Per token, the f-wide tensors of LigerSwiGLUMLP/LigerGEGLUMLP: a, b (saved), the product (down_proj's input)."""
    return 3 * e * f


def layer_facts(facts: LayerFacts) -> LayerFacts:
    """``facts`` with Liger's RMSNorm and gated MLP in place of transformers' modules; Qwen3's q_norm / k_norm are
    LigerRMSNorms too (monkey_patch.py apply_liger_kernel_to_qwen3 @ v0.8.5 patches self_attn.q_norm, k_norm)."""
    return replace(facts, norm=NORM, activation=GLU, qk_norm=NORM if facts.qk_norm else None)


def _next_power_of_2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def chunk_size(tokens: int, vocab: int, hidden: int) -> int:
    """fused_linear_cross_entropy_forward: inc_factor = cdiv(V, H); chunk_size = next_power_of_2(cdiv(BT,
    inc_factor)) (0.8.4+: min(chunk_size, BT); a slice of BT rows is never longer anyway)."""
    return min(_next_power_of_2(_cdiv(tokens, _cdiv(vocab, hidden))), tokens)


@dataclass(frozen=True, slots=True)
class LossPeak:
    """The fused linear cross-entropy's peak, by term (bytes)."""

    grad_input: int
    loss: int  # loss_1d + target_mask
    labels: int
    logits: int  # the chunk logits that coexist
    grad_weight: int  # the trainable head's gradient (0 for a frozen head)
    extra: int  # the larger of the version-dependent copies (shifted hidden states, the fp32 grad_weight temporary)
    chunk: int  # chunk_size, for the note

    @property
    def nbytes(self) -> int:
        return self.grad_input + self.loss + self.labels + self.logits + self.grad_weight + self.extra


def loss_peak(e: int, samples: int, length: int, vocab: int, hidden: int, head_trainable: bool) -> LossPeak:
    """The peak of LigerFusedLinearCrossEntropyFunction.forward over ``samples`` x ``length`` tokens."""
    bt = samples * length
    chunk = chunk_size(bt, vocab, hidden)
    # <= 0.8.3: the next chunk's logits are made while grad_logits_chunk still holds the previous chunk's; one chunk
    # alone coexists with its grad_input product (grad_logits_chunk @ weight: chunk x H) before it is copied in
    logits = e * max(vocab * (chunk + min(chunk, bt - chunk)), chunk * (vocab + hidden))
    grad_input = e * bt * hidden  # torch.zeros_like(_input), saved for backward
    loss = FP32 * bt + MASK * bt  # loss_1d = torch.zeros(BT, dtype=torch.float32); target_mask = target != ignore
    # LigerForCausalLMLoss: pad(labels, (0, 1)), then its [..., 1:].contiguous()
    labels = IDS * samples * (length + 1) + IDS * bt
    grad_weight = e * vocab * hidden if head_trainable else 0  # torch.zeros_like(weight) if weight.requires_grad
    shifted = e * samples * max(length - 1, 0) * hidden  # <= 0.5.5: hidden_states[..., :-1, :].contiguous()
    temporary = (e + FP32) * vocab * hidden if head_trainable else 0  # 0.6.2-0.8.3: torch.mm(...).float()
    return LossPeak(grad_input, loss, labels, logits, grad_weight, max(shifted, temporary), chunk)


# The trainers that turn Liger's fused linear cross-entropy off for their preference/RL stages, keeping its other
# kernels: their losses need the full logits. LLaMA-Factory: model/loader.py calls apply_liger_kernel with
# ``require_logits=(finetuning_args.stage not in ["pt", "sft"])``, and model/model_utils/liger_kernel.py then passes
# ``fused_linear_cross_entropy=False, cross_entropy=True`` (@ v0.9.1 to v0.9.4; before 0.9.1 its DPO read
# ``.logits`` from a forward whose fused loss returns none).
FULL_LOGITS_OUTSIDE_SFT: dict[TrainerFamily, str] = {
    TrainerFamily.LLAMA_FACTORY: "LLaMA-Factory keeps Liger's fused linear cross-entropy off outside pt/sft "
                                 "(model/model_utils/liger_kernel.py require_logits @ v0.9.4): the full logits counted",
}
# Liger's patched forward (liger_kernel/transformers/model/*.py lce_forward) fuses the head and the loss only where
# it is given labels; a preference loss calls the model without them and reads ``outputs.logits``, which it then
# computes whole. ms-swift's DPO/CPO/ORPO pop the labels before the forward (swift/rlhf_trainers/dpo_trainer.py
# concatenated_forward @ v4.5.2); TRL's ORPO and CPO have no Liger loss; TRL's DPO and KTO call the model without
# labels too (dpo_trainer.py concatenated_forward @ v0.24.0, _compute_loss @ v1.9.0) unless their own Liger
# preference loss runs (trl_loss_runs). axolotl's trainers are TRL's at the TRL it pins.
UNLABELLED_FORWARD: dict[TrainerFamily | None, frozenset[Method]] = {
    TrainerFamily.MS_SWIFT: frozenset({Method.DPO, Method.CPO, Method.ORPO}),
    **dict.fromkeys((None, TrainerFamily.TRL, TrainerFamily.AXOLOTL),
                    frozenset({Method.CPO, Method.ORPO, Method.DPO, Method.KTO})),
}
# TRL's GKD runs Liger's fused linear JSD loss (LigerFusedLinearJSDLoss over the student's and the teacher's hidden
# states, no logits) for use_liger_kernel from 0.22 (trl/trainer/gkd_trainer.py @ v0.22.0; trl/experimental/gkd @
# v1.9.0: ``use_liger_gkd_loss``); before, the model is patched but called without labels, so its logits are whole.
TRL_GKD_LIGER = Version("0.22.0")
LOGITS_WHOLE = ("{method} calls the model without labels and reads its logits ({why}): Liger's fused linear "
                "cross-entropy never runs there, the full logits counted")

# TRL's own Liger losses (liger_kernel.chunked_loss LigerFusedLinearDPOLoss, LigerFusedLinearKTOLoss,
# LigerFusedLinearGRPOLoss), run by DPOTrainer/KTOTrainer._compute_loss_liger and GRPOTrainer._compute_liger_loss in
# place of the logits: the backbone's last hidden states and the LM head weight go to the loss, which computes the
# logits one chunk at a time. The switch, by TRL release (trl/trainer/dpo_trainer.py, kto_trainer.py,
# grpo_trainer.py, trl/experimental/kto/kto_trainer.py at each tag):
# * ``use_liger_loss`` from 0.19 (DPO) and 0.17 (KTO, GRPO) to 0.24; from 0.25 a deprecated alias that sets
#   ``use_liger_kernel`` (dpo_config.py, grpo_config.py __post_init__ @ v0.25.0), gone from 0.28;
# * ``use_liger_kernel`` from 0.25 (``if self.args.use_liger_kernel`` @ v0.25.0) to 1.13 (DPO, KTO) and 1.12
#   (GRPO); then TRL's own chunked log-probabilities under the same switch (TRL_CHUNKED_LOGPROB); from 1.15 the
#   trainers score through TRL's fused LM head and turn Liger's fused loss off (dpo_trainer.py, grpo_trainer.py
#   __init__ @ v1.16.0).
# axolotl passes ``dpo_use_liger_kernel`` as DPO's use_liger_kernel from 0.14 (core/trainers/dpo/__init__.py @
# v0.14.0, v0.18.0; its liger plugin patches the model only) and its ``trl: use_liger_loss`` to GRPO
# (core/trainers/grpo/__init__.py @ v0.10.0 as use_liger_loss, @ v0.18.0 as use_liger_kernel).
LIGER_LOSS_FLAG_SINCE: dict[Method, Version] = {Method.DPO: Version("0.19"), Method.KTO: Version("0.17"),
                                                Method.GRPO: Version("0.17")}
TRL_LIGER_KERNEL_SWITCH = Version("0.25")
TRL_LIGER_LOSS_FLAG_GONE = Version("0.28")
TRL_FUSED_HEAD = Version("1.15")
# From these releases the same switch runs TRL's own chunked log-probabilities (trl/trainer/utils.py
# _ChunkedLogProbFunction: tiles of the vocabulary, as 1.15's fused LM head) instead of Liger's loss:
# dpo_trainer.py, kto_trainer.py _get_per_token_logps_and_entropies @ v1.14.0, grpo_trainer.py @ v1.13.0 (Liger's
# losses last in 1.13.0 and 1.12.0)
TRL_CHUNKED_LOGPROB: dict[Method, Version] = {Method.DPO: Version("1.14"), Method.KTO: Version("1.14"),
                                              Method.GRPO: Version("1.13")}
AXOLOTL_DPO_LIGER = Version("0.14")
# ms-swift's GRPO runs Liger's GRPO loss for --use_liger_kernel from 3.5.0 (``self.use_liger_loss =
# self.args.use_liger_kernel``, swift/trainers/rlhf_trainer/grpo_trainer.py @ v3.5.0 to v3.11.0,
# swift/rlhf_trainers/grpo_trainer.py @ v4.0.0 to v4.5.2)
SWIFT_GRPO_LIGER = Version("3.5")
# Rows per chunk (chunk_size=1, the default TRL keeps): a chosen/rejected pair for DPO
# (fused_linear_preference.py: ``chunks = _input.shape[0] // (2 * CHUNK_SIZE)``), one row for KTO
# (fused_linear_unpaired_preference.py: ``_input.shape[0] // CHUNK_SIZE``); GRPO's, one completion, is grpo_peak's.
CHUNK_ROWS: dict[Method, int] = {Method.DPO: 2, Method.KTO: 1}
# One chunk's peak in copies of its logits in the model's dtype, measured on CPU with Liger 0.8.5's
# LigerFusedLinearDPOLoss and KTOLoss (benchmarks/calibrate_liger_preference.py, benchmarks/liger_preference.md):
# the chunk's logits, their fp32 log-softmax and its gradient, and the reference's chunk logits. TRL keeps Liger's
# default ``compiled=True`` (the chunk's forward and backward under torch.compile): 4 copies, expected; eager
# (where torch.compile falls back) 8, the bound.
CHUNK_COPIES_COMPILED = 4
CHUNK_COPIES_EAGER = 8
# GRPO's loss (fused_linear_ppo.py): from Liger 0.8.0 each completion's log-probabilities stream over tiles of at most
# 2,048 tokens x 4,096 vocabulary entries in fp32 (_selective_logprob_forward/_backward), the backward recomputing
# them: 5 tiles live at its peak (measured), beside the head's fp32 gradient and its cast. Before 0.8 one
# completion's whole logits per chunk: 3 copies compiled, 7 eager (measured with Liger 0.7.0): the bound, the
# Liger release being read from no file here.
GRPO_SEQ_TILE, GRPO_VOCAB_TILE, GRPO_TILES = 2048, 4096, 5
GRPO_ROW_COPIES_BEFORE_08 = 7
PREFERENCE_SOURCE = ("liger_kernel/chunked_loss/fused_linear_preference.py, fused_linear_unpaired_preference.py @ "
                     "0.8.5; trl/trainer/dpo_trainer.py _compute_loss_liger @ v0.24.0, v1.9.0; measured on CPU: "
                     "benchmarks/liger_preference.md")
GRPO_SOURCE = ("liger_kernel/chunked_loss/fused_linear_ppo.py @ 0.7.0, 0.8.5; trl/trainer/grpo_trainer.py "
               "_compute_liger_loss @ v0.24.0, v1.9.0; measured on CPU: benchmarks/liger_preference.md")


def _switched_on(setup: MethodSetup, liger_kernel: bool, trl: Version) -> bool:
    """Whether the files turn the trainer's Liger switch on at ``trl`` (the module's table above)."""
    if setup.trainer == TrainerFamily.AXOLOTL:  # dpo_use_liger_kernel (DPO), trl: use_liger_loss (GRPO)
        if setup.method == Method.GRPO:
            return bool(setup.liger_loss)
        release = setup.release
        return bool(setup.liger_loss) and setup.method == Method.DPO and trl >= TRL_LIGER_KERNEL_SWITCH and \
            release is not None and release >= AXOLOTL_DPO_LIGER
    by_loss = bool(setup.liger_loss) and trl < TRL_LIGER_LOSS_FLAG_GONE
    return by_loss or (liger_kernel and trl >= TRL_LIGER_KERNEL_SWITCH)


def trl_loss_runs(setup: MethodSetup, liger_kernel: bool) -> bool:
    """Whether TRL's DPO, KTO or GRPO (or ms-swift's GRPO) runs Liger's own loss for ``setup`` (``liger_kernel``:
    the Trainer's use_liger_kernel as the files say it), by the TRL release that runs it (its own, or axolotl's
    pin). An unknown TRL release is the newest read, whose fused LM head runs instead; an unknown ms-swift release
    the newest read, which runs Liger's loss."""
    if setup.trainer == TrainerFamily.MS_SWIFT:
        release = setup.release
        return setup.method == Method.GRPO and liger_kernel and (release is None or release >= SWIFT_GRPO_LIGER)
    if setup.rloo:  # RLOOTrainer has no Liger loss (trl/trainer/rloo_trainer.py @ v1.9.0, v1.13.0)
        return False
    since = LIGER_LOSS_FLAG_SINCE.get(setup.method)
    trl = trl_release(setup)
    if since is None or trl is None or not since <= trl < TRL_CHUNKED_LOGPROB[setup.method]:
        return False
    return _switched_on(setup, liger_kernel, trl)


def chunked_logprob_runs(setup: MethodSetup, liger_kernel: bool) -> bool:
    """Whether the same switch runs TRL's own chunked log-probabilities instead (DPO and KTO at 1.14, GRPO at 1.13
    and 1.14: TRL_CHUNKED_LOGPROB): tiles of the vocabulary as TRL 1.15's fused LM head has them for every run."""
    since = TRL_CHUNKED_LOGPROB.get(setup.method)
    trl = trl_release(setup)
    if since is None or setup.trainer == TrainerFamily.MS_SWIFT or setup.rloo or trl is None \
            or not since <= trl < TRL_FUSED_HEAD:
        return False
    return _switched_on(setup, liger_kernel, trl)


def scores_without_logits(setup: MethodSetup, liger_kernel: bool) -> bool:
    """Whether the trainer's Liger switch scores the method's tokens without the vocabulary-wide logits (Liger's own
    loss or TRL's chunked log-probabilities): the loss side's held logits do not exist there."""
    return trl_loss_runs(setup, liger_kernel) or chunked_logprob_runs(setup, liger_kernel)


@dataclass(frozen=True, slots=True)
class GrpoPeak:
    """Liger's GRPO loss at its peak (bytes): Liger 0.8+'s tiles (expected) or one completion's logits (before 0.8,
    eager: the bound), the head's gradient and the input gradient."""

    tiles: int
    row_bound: int
    grad_weight: int
    grad_input: int

    @property
    def nbytes(self) -> int:
        return self.tiles + self.grad_weight + self.grad_input

    @property
    def bound(self) -> int:
        return max(self.tiles, self.row_bound) + self.grad_weight + self.grad_input


def grpo_peak(e: int, rows: int, completion: int, vocab: int, hidden: int, head_trainable: bool) -> GrpoPeak:
    """The peak of LigerFusedLinearGRPOLoss over ``rows`` completions of ``completion`` tokens."""
    tiles = GRPO_TILES * min(completion, GRPO_SEQ_TILE) * min(vocab, GRPO_VOCAB_TILE) * FP32
    # grad_weight in fp32 (0.8+: torch.zeros(weight.shape, dtype=float32)) and its cast to the weight's dtype
    head = (FP32 + e) * vocab * hidden if head_trainable else 0
    return GrpoPeak(tiles=tiles, row_bound=GRPO_ROW_COPIES_BEFORE_08 * e * completion * vocab, grad_weight=head,
                    grad_input=FP32 * rows * completion * hidden)  # grad_hidden in fp32


@dataclass(frozen=True, slots=True)
class PreferencePeak:
    """Liger's fused preference loss at its peak beside the backbone's activations (bytes): the last chunk's
    working set, ``chunk`` expected and ``chunk_bound`` eager, and what the loss holds over the whole batch."""

    chunk: int
    chunk_bound: int
    hidden: int  # the policy's shifted .contiguous() hidden states and the reference's, both held by the loss
    grad_input: int  # the chunks' input gradients, kept in a list until torch.cat joins them
    grad_weight: int  # torch.zeros_like(weight): the head's gradient, accumulated over the chunks
    labels: int

    @property
    def nbytes(self) -> int:
        return self.chunk + self.hidden + self.grad_input + self.grad_weight + self.labels

    @property
    def bound(self) -> int:
        return self.nbytes - self.chunk + self.chunk_bound


def preference_peak(method: Method, e: int, rows: int, length: int, vocab: int, hidden: int,
                    head_trainable: bool) -> PreferencePeak:
    """The peak of LigerFusedLinear{DPO,KTO}Loss over ``rows`` sequences of ``length`` tokens (DPO: chosen and
    rejected rows together), in ``e``-byte activations."""
    chunk_rows = min(CHUNK_ROWS[method], rows)
    one = e * chunk_rows * length * vocab  # one chunk's logits: input_chunk @ weight.t()
    tokens = rows * length
    # a trainable head: each chunk's head gradient (grad_and_value's, V x H in the weight's dtype) beside the
    # accumulator and the chunk's logits gradient, before grad_weight.add_(): the peak where the head outweighs
    # the chunk's copies (short sequences, a wide head; measured with hidden 4,096: 2.04 to 2.18 V x H)
    adding = e * vocab * hidden + one if head_trainable else 0
    return PreferencePeak(chunk=max(CHUNK_COPIES_COMPILED * one, adding),
                          chunk_bound=max(CHUNK_COPIES_EAGER * one, adding),
                          hidden=2 * e * tokens * hidden, grad_input=e * tokens * hidden,
                          grad_weight=e * vocab * hidden if head_trainable else 0,
                          labels=IDS * tokens)  # labels = input_ids[:, 1:].clone()


def fused_loss_off(setup: MethodSetup) -> str | None:
    """Why the method's trainer runs Liger's kernels without its fused linear cross-entropy (None: it runs it).
    Where TRL's own Liger preference loss runs (trl_loss_runs), memory/activations.py counts that first."""
    if setup.method == Method.SFT:
        return None
    if setup.trainer in FULL_LOGITS_OUTSIDE_SFT:
        return FULL_LOGITS_OUTSIDE_SFT[setup.trainer]
    if setup.method == Method.GKD:
        trl = trl_release(setup)
        if trl is not None and trl < TRL_GKD_LIGER:
            return LOGITS_WHOLE.format(method="GKD", why="its Liger JSD loss runs from TRL 0.22")
        return None
    if setup.method in UNLABELLED_FORWARD.get(setup.trainer, frozenset()):
        why = (f"{setup.trainer or 'TRL'} has no Liger loss for it" if setup.method in (Method.CPO, Method.ORPO)
               or setup.trainer == TrainerFamily.MS_SWIFT else
               "its Liger preference loss runs only for TRL's use_liger_loss (0.19-0.27) or use_liger_kernel "
               "(0.25-1.13), axolotl's dpo_use_liger_kernel")
        return LOGITS_WHOLE.format(method=setup.method, why=why)
    return None


def applies(model_type: str | None) -> bool:
    """Whether _apply_liger_kernel_to_instance patches a model of this type (unknown: taken as patched)."""
    return model_type is None or model_type in MODEL_TYPES

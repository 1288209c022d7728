"""The two byte tables of the memory model: dtype sizes and optimizer-state sizes.

Single source of truth: every other module asks here how many bytes an element of a dtype
takes and how many parameter-sized state tensors an optimizer keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.deepspeed import config_model
from zeroadvisor.deepspeed.config_model import OptimizerParams

# Bytes per element of each canonical dtype name (deepspeed/config_model.py DTYPE_ALIASES maps the spellings).
DTYPE_BYTES: dict[str, int] = {
    "fp32": 4,
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    "uint8": 1,  # dropout masks (1 byte per element, Korthikanti et al. 2022)
    "int64": 8,
}

def dtype_name(name: str) -> str:
    """Canonical dtype name ("fp32", "fp16", "bf16", ...) for a DeepSpeed/torch spelling (deepspeed/config_model.py
    DTYPE_ALIASES, the one table); KeyError for another."""
    canonical = config_model.dtype_name(name)
    if canonical is None:
        raise KeyError(name)
    return canonical


def nbytes(dtype: str) -> int:
    """Bytes per element of ``dtype`` (any spelling ``dtype_name`` accepts)."""
    return DTYPE_BYTES[dtype_name(dtype)]


@dataclass(frozen=True, slots=True)
class OptimizerStates:
    """How many parameter-sized state tensors an optimizer keeps (excluding master weights).

    ``elements`` counts tensors of the parameter's size; their dtype is the master-weights
    dtype on the GPU (torch/DeepSpeed optimizers create them as ``zeros_like(param)``) and
    fp32 in DeepSpeedCPUAdam unless ``bf16_optimizer_states``.
    """

    name: str
    elements: int
    states: str  # what the tensors are
    source: str


# Keys are lower-case; DeepSpeed lower-cases its own names (adam, adamw, lamb, lion, adagrad,
# muadam, muadamw, musgd, muon) and looks anything else up in torch.optim
# (runtime/engine.py _configure_basic_optimizer). Reference memory-model.md §3.
OPTIMIZERS: dict[str, OptimizerStates] = {
    "adam": OptimizerStates("Adam", 2, "exp_avg, exp_avg_sq", "ops/adam/fused_adam.py; torch.optim.Adam"),
    "adamw": OptimizerStates("AdamW", 2, "exp_avg, exp_avg_sq", "ops/adam/fused_adam.py; torch.optim.AdamW"),
    "lamb": OptimizerStates("LAMB", 2, "exp_avg, exp_avg_sq", "ops/lamb/fused_lamb.py"),
    "lion": OptimizerStates("Lion", 1, "exp_avg", "ops/lion/fused_lion.py"),
    "adagrad": OptimizerStates("Adagrad", 1, "sum of squares", "ops/adagrad/cpu_adagrad.py; torch.optim.Adagrad"),
    "sgd": OptimizerStates("SGD", 0, "none (momentum adds momentum_buffer)", "torch.optim.SGD"),
    "muadam": OptimizerStates("MuAdam", 2, "exp_avg, exp_avg_sq", "runtime/engine.py (mup.MuAdam)"),
    "muadamw": OptimizerStates("MuAdamW", 2, "exp_avg, exp_avg_sq", "runtime/engine.py (mup.MuAdamW)"),
    "musgd": OptimizerStates("MuSGD", 0, "none (momentum adds momentum_buffer)", "runtime/engine.py (mup.MuSGD)"),
    # Muon keeps one momentum buffer for hidden matrices; the rest (embeddings, head, 1-D
    # params) use the auxiliary Adam (2). The split is applied in states.py.
    "muon": OptimizerStates("Muon", 1, "momentum_buffer (matrices); Adam exp_avg, exp_avg_sq (others)",
                            "runtime/zero/muon/muon_optimizer.py MuonWithAuxAdam"),
    "rmsprop": OptimizerStates("RMSprop", 1, "square_avg (+momentum_buffer, +grad_avg if centered)",
                               "torch.optim.RMSprop"),
    "adamax": OptimizerStates("Adamax", 2, "exp_avg, exp_inf", "torch.optim.Adamax"),
    "nadam": OptimizerStates("NAdam", 2, "exp_avg, exp_avg_sq", "torch.optim.NAdam"),
    "radam": OptimizerStates("RAdam", 2, "exp_avg, exp_avg_sq", "torch.optim.RAdam"),
    "adadelta": OptimizerStates("Adadelta", 2, "square_avg, acc_delta", "torch.optim.Adadelta"),
    "rprop": OptimizerStates("Rprop", 2, "prev, step_size", "torch.optim.Rprop"),
    "asgd": OptimizerStates("ASGD", 1, "ax", "torch.optim.ASGD"),
    # Adafactor without beta1 (transformers' and torch.optim's default) keeps no first moment, and its second moment
    # factored into a row and a column vector per matrix: no parameter-sized state
    "adafactor": OptimizerStates("Adafactor", 0, "factored second moment (a row and a column per matrix)",
                                 "transformers optimization.py Adafactor; torch.optim.Adafactor"),
    "ademamix": OptimizerStates("AdEMAMix", 3, "exp_avg (fast), exp_avg (slow), exp_avg_sq",
                                "bitsandbytes optim/ademamix.py AdEMAMix (32-bit states)"),
    # AdamW's two moments and an EMA of the gradient (the grok signal): three, more than AdamW
    "grokadamw": OptimizerStates("GrokAdamW", 3, "exp_avg, exp_avg_sq, grok_ema", "grokadamw GrokAdamW"),
}

# The Hugging Face Trainer's ``optim`` where the DeepSpeed config has no optimizer block: DeepSpeed steps the
# client optimizer the Trainer builds (transformers integrations/deepspeed.py deepspeed_optim_sched:
# trainer.create_optimizer()), its states fp32 tensors on the master partition. Each name's class and defaults:
# transformers 5.24 trainer_optimizer.py (_get_adamw_torch, _get_sgd, _get_adagrad, _get_rmsprop, _get_adafactor,
# _get_bitsandbytes_optimizer with optim_bits 32). ``optim_args`` that add momentum (SGD, RMSprop) are not read.
# The names not here keep fewer state bytes than AdamW's two fp32 tensors (8-bit and 4-bit states, GaLore and
# APOLLO's projected ones, LOMO's none): costed as AdamW, an upper bound, and said.
CLIENT_OPTIMIZER_STATES: dict[str, str] = {
    **dict.fromkeys(("adamw_torch", "adamw_torch_fused", "adamw_apex_fused", "adamw_hf", "adamw_torch_xla",
                     "adamw_torch_npu_fused", "adamw_anyprecision", "paged_adamw_32bit", "stable_adamw",
                     "schedule_free_adamw", "schedule_free_radam"), "adamw"),
    "sgd": "sgd",  # torch.optim.SGD, momentum 0
    "adagrad": "adagrad",
    **dict.fromkeys(("rmsprop", "rmsprop_bnb", "rmsprop_bnb_32bit"), "rmsprop"),  # momentum 0, not centered
    **dict.fromkeys(("lion_32bit", "paged_lion_32bit"), "lion"),
    **dict.fromkeys(("ademamix", "paged_ademamix_32bit"), "ademamix"),
    "adafactor": "adafactor",
    "grokadamw": "grokadamw",
}

DEFAULT_OPTIMIZER = "adamw"  # costed when the type is missing or unknown (stated as an assumption)


def optimizer_state_elements(kind: str, params: OptimizerParams | None = None) -> int:
    """Parameter-sized state tensors for optimizer ``kind`` with its ``params`` (variants)."""
    params = params or OptimizerParams()
    entry = OPTIMIZERS[kind]
    elements = entry.elements
    momentum = params.momentum is not None and params.momentum > 0
    if kind in ("sgd", "musgd") and momentum:
        elements += 1  # momentum_buffer
    if kind in ("adam", "adamw", "muadam", "muadamw") and params.amsgrad:
        elements += 1  # max_exp_avg_sq
    if kind == "rmsprop":
        elements += int(momentum) + int(params.centered)
    return elements


# runtime/zero/partition_parameters.py CUDAQuantizer.target_group_size: elements per ZeRO++ int8 quantization
# group, each with one fp32 scale
ZEROPP_QUANT_GROUP = 8000

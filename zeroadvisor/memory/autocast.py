"""``torch_autocast`` (DeepSpeed 0.17+): fp32 model states with the forward run under torch.autocast.

Paths are relative to ``deepspeed/`` (DeepSpeed 0.19.8). With fp16/bf16 off the model stays fp32
(engine.py get_data_types: model_dtype fp32), so the ZeRO model states are those of fp32 training
(memory/states.py: fp32 parameters and gradients, the fp32 master clone, the optimizer states). What
autocast changes:

* the ops: engine.forward runs the module under torch.autocast(dtype=torch_autocast.dtype)
  (runtime/torch_autocast.py autocast_if_enabled). dtype not written: runtime/config.py
  get_torch_autocast_dtype returns None and torch.autocast takes the device's default, float16 on CUDA.
  Linear/matmul/SDPA compute in that dtype; the residual stream stays fp32 (the fp32 embedding output plus
  the 16-bit block outputs promotes to fp32), so every norm keeps an fp32 input.
* the weight copies: torch's autocast casts each fp32 weight a Linear uses to the 16-bit dtype
  (aten/src/ATen/autocast_mode.cpp cached_cast) and plain F.linear saves that copy for its backward: every
  Linear weight of the forward is alive in 16 bits when the forward ends, whole on each GPU, e x (block
  Linears + LM head) bytes. Not under zero.Init at stage 3: partition_parameters.py
  _enable_mem_efficient_linear replaces F.linear by zero/linear.py zero3_linear_wrap for the whole process,
  whose LinearFunctionForZeroStage3 saves the fp32 parameter and its fp32 input (measured on CPU: 8 fp32
  4096² weights keep +256 MiB of copies through F.linear under autocast, +9 MiB through the ZeRO-3 linear).
* the gradient buckets: torch_autocast.init_autocast_params tags the parameters of the lower-precision-safe
  modules (Linear, Conv) with comm_dtype; ZeRO builds one IPG bucket per distinct comm dtype
  (stage_1_and_2.py / stage3.py ``ipg_buckets = {dtype: ...}`` from get_all_comm_dtypes): the tagged
  dtype and fp32 for the rest (norms, embeddings). Stage 3 allocates each bucket in its dtype
  (stage3.py ``bucket.buffer = torch.empty(reduce_bucket_size, dtype=dtype)``; dtype None when the config
  gives none: torch.empty's default, fp32); stage 1/2 in the gradient reduction dtype, fp32 here
  (stage_1_and_2.py setup_buckets).
* the stage-3 all-gather: partition_parameters.py _all_gather_dtype gathers a tagged parameter into a
  flat buffer of its comm dtype (get_allgather_dtype), then AllGatherCoalescedHandle.wait casts the
  gathered copy back to the partition's dtype (``.to(param.ds_tensor.dtype)``): gathered parameters are
  fp32, the flat buffer 16-bit.

The activations are counted in the autocast dtype (memory/activations.py) plus the fp32 that autocast
leaves, measured on CPU with transformers 5.24 Llama under torch.autocast("cpu", bfloat16)
(``torch.autograd.graph.saved_tensors_hooks``, three shapes: benchmarks/autocast_activations.py): per token
and layer, beyond a bf16 model's, 4·(4 − e)·h (the two norms' inputs and outputs are fp32: the residual
stream is) and, through plain F.linear, one more e·h cast copy; a checkpointed layer keeps its fp32 input,
(4 − e)·h. Exact for the Llama layer measured; other families' norms may differ.
"""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.deepspeed.config_model import Rejected
from zeroadvisor.deepspeed.settings import DeepSpeedSettings
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.parallel import Parallel, layer_linears
from zeroadvisor.memory.terms import Term, ceil_div
from zeroadvisor.model.spec import Checkpointing, ModelSpec, TrainingShape
from zeroadvisor.vocab import Precision, Resource, TermKind

FP32 = B.DTYPE_BYTES["fp32"]
SOURCE = "runtime/torch_autocast.py autocast_if_enabled; torch aten/src/ATen/autocast_mode.cpp cached_cast"


@dataclass(frozen=True, slots=True)
class Autocast:
    """torch_autocast as it runs on an fp32 model: the dtype the autocast ops compute in, and the dtype of the
    Linear weights' gradient bucket and all-gather (None where the config gives no dtype: fp32 buffers)."""

    dtype: Precision  # fp16 or bf16
    comm_dtype: Precision | None

    @property
    def compute_bytes(self) -> int:
        return B.nbytes(self.dtype)

    @property
    def comm_bytes(self) -> int:
        """Bytes per element of the tagged parameters' bucket and all-gather: torch.empty(dtype=None) is fp32."""
        return B.nbytes(self.comm_dtype) if self.comm_dtype is not None else FP32


def read_autocast(ds: DeepSpeedSettings, precision: Precision) -> Autocast | None:
    """The autocast that changes memory: enabled, on an fp32 model (a 16-bit model has 16-bit weights, which
    autocast does not cast), in a 16-bit dtype. A dtype DeepSpeed refuses (ValueError at init) is the lint's."""
    config = ds.torch_autocast
    if not config.enabled or precision != Precision.FP32 or isinstance(config.dtype, Rejected):
        return None
    if config.dtype is None:
        return Autocast(Precision.FP16, None)  # torch.autocast(dtype=None): CUDA's default float16
    if config.dtype not in (Precision.FP16.value, Precision.BF16.value):
        return None  # fp32 (or int8, which torch.autocast refuses): nothing runs in 16 bits
    return Autocast(Precision(config.dtype), Precision(config.dtype))


def linear_weights(spec: ModelSpec, layout: Parallel) -> tuple[int, bool]:
    """(elements of the Linear weights one GPU's forward casts, exact?): the block Linears of its
    ceil(L / pipeline) layers (1/tensor of each under AutoTP; every local expert of an MoE layer, a bound:
    only the experts that receive tokens run) and the LM head (V·h, also when tied: F.linear casts the
    embedding weight). Without the architecture: every parameter, a bound."""
    linears = layer_linears(spec)
    if linears is None or not spec.num_layers:
        return spec.parameters, False
    attention, mlp = linears
    experts = ceil_div(spec.num_experts, layout.expert) if spec.num_experts else 0
    layers = ceil_div(spec.num_layers, layout.pipeline)
    block = attention + (experts * mlp if experts else mlp)
    head = (spec.vocab_size or 0) * (spec.hidden_size or 0)
    return ceil_div(layers * block, layout.tensor) + head, not experts


def autocast_terms(ac: Autocast, spec: ModelSpec, shape: TrainingShape, micro_batch: int, layout: Parallel,
                   zero3_linear: bool) -> list[Term]:
    """What autocast keeps beyond the activations counted in its dtype: the 16-bit weight copies (not through
    ZeRO-3's linear, ``zero3_linear``: stage 3 under zero.Init) and the fp32 the residual stream leaves in each
    layer (activations row: backward frees them)."""
    e = ac.compute_bytes
    terms = []
    if not zero3_linear:
        weights, exact_weights = linear_weights(spec, layout)
        terms.append(Term("activations", Resource.GPU, e * weights, "autocast_weight_copies",
                          f"{ac.dtype} copies of the Linear weights the forward casts ({weights:,} elements, whole "
                          "on every GPU)", f"{e} B × Linear weights", SOURCE + " (saved by F.linear for backward)",
                          kind=TermKind.EXACT if exact_weights else TermKind.BOUND))
    h, L = spec.hidden_size, spec.num_layers
    if h and L and shape.sequence_length:
        tokens = ceil_div(shape.sequence_length, layout.sequence) * micro_batch
        layers = ceil_div(L, layout.pipeline)
        if shape.activation_checkpointing != Checkpointing.FULL:  # selective recompute keeps the norms
            # two norms' fp32 inputs and outputs; F.linear saves one more 16-bit cast (measured)
            copy = 0 if zero3_linear else e
            per_token = (4 * (FP32 - e) + copy) * h
            formula = f"(4·(4 − {e}){f' + {e}' if copy else ''}) B × h × tokens × layers"
        else:  # a checkpointed layer keeps its input: the fp32 residual stream
            per_token = (FP32 - e) * h
            formula = f"(4 − {e}) B × h × tokens × layers"
        terms.append(Term("activations", Resource.GPU, per_token * tokens * layers, "autocast_fp32_residual",
                          "fp32 residual stream under autocast (norm inputs and outputs; checkpointed layer inputs)",
                          formula, "transformers residual add (fp32 + 16-bit is fp32); measured on CPU, Llama "
                          "(benchmarks/autocast_activations.py)"))
    return terms


def autocast_notes(ac: Autocast) -> list[str]:
    comm = (f"the Linear weights' gradient bucket and ZeRO-3 all-gather in {ac.comm_dtype}" if ac.comm_dtype else
            "torch_autocast.dtype not given: autocast runs CUDA's default float16, and the Linear weights' "
            "gradient bucket and ZeRO-3 all-gather are fp32 (comm_dtype None: torch.empty's default dtype)")
    return [(f"torch_autocast: fp32 model states (parameters, gradients, master, optimizer states) and ZeRO-3 "
             f"gathered parameters, the forward in {ac.dtype}: activations in {ac.dtype} with an fp32 residual "
             f"stream, and {ac.dtype} copies of every Linear weight saved for backward unless ZeRO-3's linear "
             f"(zero.Init) runs; {comm}")]

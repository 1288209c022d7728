"""The step-time model: seconds for one optimizer step of the global batch, per stage/offload option.

A step is ``accumulation`` micro steps (forward + backward) and the optimizer step. Each pass runs
its compute (flops.py) beside the transfers that DeepSpeed overlaps with it (comm.py, offload.py):
with ``overlap_comm`` the pass takes as long as the slowest of compute, network, PCIe and NVMe
(they are separate hardware and run concurrently); without it they add up. ZeRO-3's host-side work per
module fetch (host.py) runs beside the compute too: the host is one more resource of the pass. What cannot overlap
(ZeRO-0's all-reduce after backward, ZeRO-1/2's all-gather after the step, the CPU optimizer step
and the upload of its result) adds to the step. ``bound`` names the component with the most
seconds in the step (compute, communication, offload = PCIe + CPU optimizer, nvme, host = ZeRO-3 hooks).

The optimizer step on the GPU (without optimizer offload) is its passes' bytes over the GPU's memory
bandwidth (gpu_step.py), after the last backward. Not modelled (stated, not hidden): tensor- and
pipeline-parallel communication and the pipeline bubble, kernel launch latency, data loading,
and the efficiency loss of small micro batches (efficiency is one number per run), DeepSpeed's host-side
work per offloaded parameter (benchmarks/throughput/README.md Status).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from zeroadvisor.hardware.machine import Hardware, cpu_threads_per_rank
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.assumed import hardware_notes
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel, local_parameters
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import master_bytes, state_bytes_gpu, trainable
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.throughput.comm import ZeroPlusPlus, collectives, ring_seconds
from zeroadvisor.throughput.flops import token_flops
from zeroadvisor.throughput.gpu_step import gpu_step_bytes, gpu_step_seconds
from zeroadvisor.throughput.host import ZERO3_FETCH_HOST_S, fetches_per_micro_step, modules_with_parameters
from zeroadvisor.throughput.offload import (
    HOST_PASS_S_PER_PARAM_THREAD,
    OPTIMIZER_STATE_BYTES,
    cpu_adam_seconds,
    host_passes,
    host_passes_seconds,
    nvme_seconds,
    pcie_seconds,
)

COMPONENTS = ("compute", "communication", "offload", "nvme", "host")
# fp32 training runs on TF32 tensor cores at half the 16-bit dense rate (A100/H100 datasheets).
FP32_PEAK_SHARE = 0.5


class NoThroughput(ValueError):
    """The step time cannot be estimated; the message says which input is missing."""


@dataclass(frozen=True, slots=True)
class StepTerm:
    """Seconds one component spends in a step (before overlap), with the formula and its source."""

    component: str  # one of COMPONENTS
    what: str
    seconds: float
    formula: str
    source: str


@dataclass(frozen=True, slots=True)
class Throughput:
    step_time_s: float
    tokens_per_s: float
    bound: str  # compute | communication | offload | nvme | host
    terms: tuple[StepTerm, ...]
    accumulation: int  # micro steps per step
    tokens_per_step: int
    notes: tuple[str, ...] = ()

    def seconds(self, component: str) -> float:
        return sum(t.seconds for t in self.terms if t.component == component)

    def to_dict(self) -> dict[str, Any]:
        return {"step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s, "bound": self.bound}


@dataclass(slots=True)
class _Pass:
    """One pass's compute and what each other resource moves during it (seconds)."""

    compute: float
    loads: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in COMPONENTS if c != "compute"})
    exposed: float = 0.0  # transfers that do not overlap (overlap_comm off)

    def add(self, component: str, seconds: float, overlapped: bool) -> None:
        if overlapped:
            self.loads[component] += seconds
        else:
            self.exposed += seconds

    @property
    def seconds(self) -> float:
        return max(self.compute, *self.loads.values()) + self.exposed


def step_time(model: ModelSpec, shape: TrainingShape, cluster: Cluster, option: Option, settings: Settings,
              hw: Hardware, *, layout: Parallel | None = None, global_batch: int | None = None,
              zeropp: ZeroPlusPlus | None = None) -> Throughput:
    """Seconds of one step of ``global_batch`` samples (None: one micro step per GPU, no accumulation; the
    config's own is ``settings.global_batch``, as DeepSpeed resolves it).

    ``settings.micro_batch`` is the micro batch; the accumulation is the global batch over the micro
    batch times the data-parallel world. NoThroughput when the GPU or the sequence length is unknown.
    """
    gpu = hw.gpu or cluster.gpu
    if gpu is None:
        raise NoThroughput("no GPU named (--gpu): --gpu-memory gives its memory but not its peak TFLOPS and link "
                           "bandwidths, so there is no step time")
    if hw.gpu is None:
        hw = replace(hw, gpu=gpu)
    if not shape.sequence_length:
        raise NoThroughput("no sequence length (--seq-len): the tokens per step are unknown")
    layout = layout or Parallel(data=cluster.gpus)
    zeropp = zeropp or ZeroPlusPlus.of(settings, layout.hpz)
    notes: list[str] = []
    terms: list[StepTerm] = []

    # -- the batch ------------------------------------------------------------------------------
    micro = settings.micro_batch
    batch_world = layout.batch_world()
    per_micro_step = micro * batch_world
    k = max(1, math.ceil(global_batch / per_micro_step)) if global_batch else 1
    seq = shape.sequence_length
    tokens_per_sample = seq + ((shape.target_length or seq) if model.encoder_decoder else 0)
    tokens_per_step = per_micro_step * k * tokens_per_sample

    # -- compute (flops.py) ----------------------------------------------------------------------
    flops = token_flops(model, seq, shape.activation_checkpointing)
    notes += flops.notes
    peak = hw.gpu.dense_tflops * 1e12 * hw.efficiency * (FP32_PEAK_SHARE if settings.precision == "fp32" else 1)
    gpu_tokens = per_micro_step * tokens_per_sample / layout.world  # tensor/pipeline/sequence ranks share a sample
    forward = _Pass(gpu_tokens * flops.forward / peak)
    backward = _Pass(gpu_tokens * (flops.backward + flops.recompute) / peak)
    recompute = {"full": ", + one forward recomputed", "selective": ", + attention core recomputed"}.get(
        shape.activation_checkpointing, "")
    terms.append(StepTerm("compute", "forward and backward" + (" with recomputation" if flops.recompute else ""),
                          k * (forward.compute + backward.compute),
                          f"{k} x {gpu_tokens:,.0f} tokens x {flops.executed:.4g} FLOPs/token (6N + 12·L·q·s"
                          f"{recompute}) / ({hw.gpu.dense_tflops} TFLOPS x {hw.efficiency})",
                          "PaLM appendix B; Narayanan et al. 2021 eq. 3; flops.py"))

    # -- data-parallel communication (comm.py) -----------------------------------------------------
    local = local_parameters(model, layout)
    psi_params = local.total
    psi_grads = trainable(model) if model.trainable_parameters is not None else local.total
    n = layout.data
    ranks_per_node = max(1, cluster.gpus_on_a_node // (layout.tensor * layout.pipeline))
    overlap = settings.overlap_comm_at(option.stage)
    boundary = _Pass(0.0)  # what the last micro step's backward adds (stage 1 reduces only there)
    after_backward = after_step = 0.0
    for c in collectives(option.stage, psi_params, psi_grads, settings.communication_dtype, settings.precision,
                         overlap, zeropp):
        if c.intra_node:
            ranks = min(zeropp.hpz, n)
            seconds = ring_seconds(c.nbytes, ranks, ranks, hw.gpu.intra_node_gb_s, hw.gpu.intra_node_gb_s)
        else:
            seconds = ring_seconds(c.nbytes, n, ranks_per_node, hw.gpu.intra_node_gb_s, hw.inter_node_gb_s)
        count = {"forward": k, "backward": k}.get(c.when, 1)
        {"forward": forward, "backward": backward, "boundary_backward": boundary}.get(c.when, _Pass(0)).add(
            "communication", seconds, c.overlapped)
        if c.when == "after_backward":
            after_backward += seconds
        elif c.when == "after_step":
            after_step += seconds
        terms.append(StepTerm("communication", f"{c.name}" + (f" x {count} micro steps" if count > 1 else ""),
                              count * seconds, f"{c.elements:,.0f} elements x {c.element_bytes:g} B x (n-1)/n over "
                              f"{_link(c.intra_node or n <= ranks_per_node, hw)}, n = {n}",
                              "ZeRO paper §7; ZeRO++ §3; DeepSpeed stage_1_and_2.py / stage3.py; comm.py"))

    # -- ZeRO-3 host work per module fetch (host.py) -------------------------------------------------
    if option.stage == 3:
        modules, counted = modules_with_parameters(model)
        if modules is None:
            notes.append(f"ZeRO-3 host work per module fetch not counted: {counted}")
        else:
            modules = math.ceil(modules / layout.pipeline)  # a pipeline stage holds its share of the layers
            fetches = fetches_per_micro_step(shape.activation_checkpointing)
            per_pass = modules * ZERO3_FETCH_HOST_S
            forward.add("host", per_pass, True)
            backward.add("host", per_pass * (fetches - 1), True)  # backward (+ the recomputed forward)
            terms.append(StepTerm("host", f"ZeRO-3 module fetches x {fetches * k}", k * fetches * per_pass,
                                  f"{modules} modules ({counted}) x {fetches} passes x {ZERO3_FETCH_HOST_S * 1e6:.0f} "
                                  f"us per fetch, beside the compute", "benchmarks/zero3_fetch_overhead.py; host.py"))

    # -- offload (offload.py) ------------------------------------------------------------------------
    g = cluster.gpus_on_a_node
    opt_device = option.offload_optimizer if option.stage == 3 or option.offload_optimizer == "none" else "cpu"
    grad_bytes = B.DTYPE_BYTES[settings.precision]
    part = psi_grads / n
    param_part = psi_params / n
    # A copy into pageable host memory returns only when it is done (CUDA Runtime API, "API synchronization
    # behavior"): with pin_memory off (the default before DeepSpeed PR 8207) the host waits, launching nothing, so
    # the copies add to the pass instead of running beside it.
    grads_overlap = overlap and settings.offload_optimizer_pin_memory
    if opt_device != "none":
        reducing = k if option.stage >= 2 else 1
        down = pcie_seconds(part * grad_bytes, hw)
        (backward if option.stage >= 2 else boundary).add("offload", down, grads_overlap)
        accumulate = pcie_seconds(part * grad_bytes, hw) if option.stage >= 2 and k > 1 else 0.0
        backward.add("offload", accumulate * (k - 1) / k, grads_overlap)  # not in the first micro step
        terms.append(StepTerm("offload", f"gradients to the host x {reducing}", reducing * down + (k - 1) * accumulate,
                              f"{part:,.0f} x {grad_bytes} B over PCIe {hw.gpu.host_link_gb_s} GB/s"
                              + (" (+ accumulated partition back per micro step)" if accumulate else ""),
                              "ZeRO-Offload §4.1; stage_1_and_2.py copy_grads_in_partition; offload.py"))
        adam = cpu_adam_seconds(part, g, hw)
        after_step += adam
        terms.append(StepTerm("offload", "CPU Adam step", adam,
                              f"{part:,.0f} params / ({hw.cpu_adam_params_per_core_s:.2g}/s/core x "
                              f"{cpu_threads_per_rank(hw.launcher, hw.cpu_cores, g):g} threads ({hw.launcher}, "
                              f"{hw.cpu_cores} cores, {g} processes)), at most {hw.host_memory_gb_s} GB/s host memory",
                              "benchmarks/cpu_adam.py; hardware.cpu_threads_per_rank"))
        passes = host_passes(option.stage, settings.precision, settings.gradient_clipping)
        rest = host_passes_seconds(part, passes, g, hw)
        after_step += rest
        terms.append(StepTerm("offload", "the offloaded step's other host passes", rest,
                              f"{part:,.0f} params x ({' + '.join(f'{p} {HOST_PASS_S_PER_PARAM_THREAD[p] * 1e9:.2f}' for p in passes)}"
                              f" ns per thread) / {cpu_threads_per_rank(hw.launcher, hw.cpu_cores, g):g} threads",
                              "stage_1_and_2.py / stage3.py step; benchmarks/offload_step.py; offload.py"))
        if option.offload_param == "none":
            up = pcie_seconds(part * grad_bytes, hw)
            after_step += up
            terms.append(StepTerm("offload", "updated parameters to the GPU", up,
                                  f"{part:,.0f} x {grad_bytes} B over PCIe", "ZeRO-Offload §4.1; offload.py"))
        if opt_device == "nvme":
            swap = nvme_seconds(2 * part * OPTIMIZER_STATE_BYTES, g, hw)
            after_step += swap
            terms.append(StepTerm("nvme", "optimizer states read and written", swap,
                                  f"2 x {part:,.0f} x {OPTIMIZER_STATE_BYTES} B x {g} processes / {hw.nvme_gb_s} GB/s",
                                  "ZeRO-Infinity §5; partitioned_optimizer_swapper.py; offload.py"))
    if option.stage == 3 and option.offload_param != "none":
        fetch = pcie_seconds(param_part * grad_bytes, hw)
        params_overlap = overlap and settings.offload_param_pin_memory  # pageable: see grads_overlap
        forward.add("offload", fetch, params_overlap)
        backward.add("offload", fetch, params_overlap)
        terms.append(StepTerm("offload", f"parameters to the GPU x {2 * k}", 2 * k * fetch,
                              f"{param_part:,.0f} x {grad_bytes} B over PCIe, before each forward and backward",
                              "ZeRO-Infinity §5; offload.py"))
        if option.offload_param == "nvme":
            read = nvme_seconds(param_part * grad_bytes, g, hw)
            forward.add("nvme", read, overlap)
            backward.add("nvme", read, overlap)
            write = nvme_seconds(param_part * grad_bytes, g, hw)
            after_step += write
            terms.append(StepTerm("nvme", f"parameters read x {2 * k} and written", 2 * k * read + write,
                                  f"{param_part:,.0f} x {grad_bytes} B x {g} processes / {hw.nvme_gb_s} GB/s",
                                  "ZeRO-Infinity §5; offload.py"))

    # -- the optimizer step on the GPU (gpu_step.py) ----------------------------------------------------
    if opt_device == "none":
        stepped = psi_grads if option.stage == 0 else part  # ZeRO-0 steps all its parameters, ZeRO-1/2/3 1/N
        per_param = gpu_step_bytes(settings.precision, settings.optimizer_elements, settings.gradient_clipping,
                                   master_bytes=master_bytes(settings), state_bytes=state_bytes_gpu(settings))
        if hw.gpu.memory_gb_s is None:
            notes.append(f"the optimizer step on the GPU not counted: no memory bandwidth for {hw.gpu.name}")
        else:
            gpu_opt = gpu_step_seconds(stepped, per_param, hw.gpu.memory_gb_s)
            after_step += gpu_opt
            terms.append(StepTerm("compute", "optimizer step on the GPU", gpu_opt,
                                  f"{stepped:,.0f} params x {per_param.total} B (master {per_param.to_master} + "
                                  f"{settings.optimizer_label} {per_param.optimizer} + 16-bit copy {per_param.to_model}"
                                  f" + overflow/clip {per_param.overflow_and_clip}) / {hw.gpu.memory_gb_s:g} GB/s",
                                  "stage_1_and_2.py / stage3.py step; multi_tensor_adam.cu; gpu_step.py"))

    # -- the step ------------------------------------------------------------------------------------
    last_backward = _Pass(backward.compute, {c: backward.loads[c] + boundary.loads[c] for c in backward.loads},
                          backward.exposed + boundary.exposed)
    micro_step = forward.seconds + backward.seconds
    step = (k - 1) * micro_step + forward.seconds + last_backward.seconds + after_backward + after_step
    totals = {c: sum(t.seconds for t in terms if t.component == c) for c in COMPONENTS}
    bound = max(COMPONENTS, key=lambda c: totals[c])
    notes += hardware_notes(hw)
    return Throughput(step, tokens_per_step / step, bound, tuple(terms), k, tokens_per_step, tuple(notes))


def _link(intra: bool, hw: Hardware) -> str:
    if intra:
        return f"the intra-node link {hw.gpu.intra_node_gb_s} GB/s"
    return f"the node network {min(hw.inter_node_gb_s, hw.gpu.intra_node_gb_s)} GB/s"

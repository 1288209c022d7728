"""The step-time model: seconds for one optimizer step of the global batch, per stage/offload option.

A step is ``accumulation`` micro steps (forward + backward) and the optimizer step. Each pass runs
its compute (flops.py) beside the transfers that DeepSpeed overlaps with it (comm.py, offload.py):
with ``overlap_comm`` the pass takes as long as the slowest of compute, network, PCIe and NVMe
(they are separate hardware and run concurrently); without it they add up. ZeRO-3's host-side work per
module fetch (host.py) runs beside the compute too: the host is one more resource of the pass; the compute
stream's wait for each fetch's all-gather (host.py ZERO3_FETCH_WAIT_S, more than one rank) adds to it.
What cannot overlap
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
from typing import TYPE_CHECKING, Any

from zeroadvisor.hardware.machine import Hardware, cpu_threads_per_rank
from zeroadvisor.memory import bytes as B
from zeroadvisor.memory.assumed import hardware_notes
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.options import Option
from zeroadvisor.memory.parallel import Parallel, local_parameters
from zeroadvisor.memory.settings import Settings
from zeroadvisor.memory.states import master_bytes, state_bytes_gpu, trainable
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.throughput import host
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
from zeroadvisor.vocab import Device, Precision

if TYPE_CHECKING:
    from zeroadvisor.hardware.gpus import GpuSpec

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


@dataclass(slots=True)
class _Step:
    """What one step gathers, pass by pass: the passes of a micro step, what the last backward adds, the
    seconds that add after the passes, the terms and the notes."""

    k: int  # micro steps per step
    forward: _Pass
    backward: _Pass
    boundary: _Pass = field(default_factory=lambda: _Pass(0.0))  # stage 1 reduces only in the last backward
    after_backward: float = 0.0
    after_step: float = 0.0
    terms: list[StepTerm] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def after(self, term: StepTerm) -> None:
        """A term that adds after the passes (the host's step, copies back, swaps): counted and listed."""
        self.after_step += term.seconds
        self.terms.append(term)

    @property
    def seconds(self) -> float:
        """k - 1 micro steps, the last one with the boundary's work, and what adds after the passes."""
        last_backward = _Pass(self.backward.compute,
                              {c: self.backward.loads[c] + self.boundary.loads[c] for c in self.backward.loads},
                              self.backward.exposed + self.boundary.exposed)
        micro_step = self.forward.seconds + self.backward.seconds
        return ((self.k - 1) * micro_step + self.forward.seconds + last_backward.seconds + self.after_backward
                + self.after_step)


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

    # -- the batch ------------------------------------------------------------------------------
    per_micro_step = settings.micro_batch * layout.batch_world()
    k = max(1, math.ceil(global_batch / per_micro_step)) if global_batch else 1
    seq = shape.sequence_length
    tokens_per_sample = seq + ((shape.target_length or seq) if model.encoder_decoder else 0)
    tokens_per_step = per_micro_step * k * tokens_per_sample

    gpu_tokens = per_micro_step * tokens_per_sample / layout.world  # tensor/pipeline/sequence ranks share a sample
    step = _compute(model, shape, settings, hw, gpu, seq, k, gpu_tokens)
    local = local_parameters(model, layout)
    psi_params = local.total
    psi_grads = trainable(model) if model.trainable_parameters is not None else local.total
    overlap = settings.overlap_comm_at(option.stage)
    _communication(step, cluster, option, settings, hw, gpu, layout, zeropp, psi_params, psi_grads, overlap)
    if option.stage == 3:
        _zero3_host(step, model, shape, layout)

    # -- offload (offload.py) ------------------------------------------------------------------------
    n = layout.data
    g = cluster.gpus_on_a_node
    # stage_1_and_2.py: any offload device runs as the CPU one (nvme too)
    opt_device = option.offload_optimizer if option.stage == 3 or option.offload_optimizer == Device.NONE \
        else Device.CPU
    grad_bytes = B.DTYPE_BYTES[settings.precision]
    part = psi_grads / n
    if opt_device != Device.NONE:
        # A copy into pageable host memory returns only when it is done (CUDA Runtime API, "API synchronization
        # behavior"): with pin_memory off (the default before DeepSpeed PR 8207) the host waits, launching nothing,
        # so the copies add to the pass instead of running beside it.
        grads_overlap = overlap and settings.offload_optimizer_pin_memory
        _gradients_to_host(step, option, hw, gpu, part, grad_bytes, grads_overlap)
        _cpu_optimizer_step(step, option, settings, hw, part, g)
        _after_cpu_step(step, option, opt_device, hw, part, grad_bytes, g)
    if option.stage == 3 and option.offload_param != Device.NONE:
        params_overlap = overlap and settings.offload_param_pin_memory  # pageable: see grads_overlap
        _parameter_offload(step, option, hw, psi_params / n, grad_bytes, g, overlap, params_overlap)
    if opt_device == Device.NONE:
        _gpu_optimizer_step(step, option, settings, gpu, psi_grads, part)

    # -- the step ------------------------------------------------------------------------------------
    seconds = step.seconds
    totals = {c: sum(t.seconds for t in step.terms if t.component == c) for c in COMPONENTS}
    bound = max(COMPONENTS, key=lambda c: totals[c])
    step.notes += hardware_notes(hw)
    return Throughput(seconds, tokens_per_step / seconds, bound, tuple(step.terms), k, tokens_per_step,
                      tuple(step.notes))


def _compute(model: ModelSpec, shape: TrainingShape, settings: Settings, hw: Hardware, gpu: GpuSpec, seq: int,
             k: int, gpu_tokens: float) -> _Step:
    """The passes' compute (flops.py): the step's forward and backward, and the first term."""
    flops = token_flops(model, seq, shape.activation_checkpointing)
    peak = gpu.dense_tflops * 1e12 * hw.efficiency * (FP32_PEAK_SHARE if settings.precision == Precision.FP32 else 1)
    step = _Step(k, _Pass(gpu_tokens * flops.forward / peak),
                 _Pass(gpu_tokens * (flops.backward + flops.recompute) / peak), notes=list(flops.notes))
    recompute = {"full": ", + one forward recomputed", "selective": ", + attention core recomputed"}.get(
        shape.activation_checkpointing, "")
    step.terms.append(StepTerm("compute", "forward and backward" + (" with recomputation" if flops.recompute else ""),
                               k * (step.forward.compute + step.backward.compute),
                               f"{k} x {gpu_tokens:,.0f} tokens x {flops.executed:.4g} FLOPs/token (6N + 12·L·q·s"
                               f"{recompute}) / ({gpu.dense_tflops} TFLOPS x {hw.efficiency})",
                               "PaLM appendix B; Narayanan et al. 2021 eq. 3; flops.py"))
    return step


def _communication(step: _Step, cluster: Cluster, option: Option, settings: Settings, hw: Hardware, gpu: GpuSpec,
                   layout: Parallel, zeropp: ZeroPlusPlus, psi_params: int, psi_grads: int, overlap: bool) -> None:
    """The data-parallel collectives (comm.py), each in the pass it runs in or after the passes."""
    n = layout.data
    ranks_per_node = max(1, cluster.gpus_on_a_node // (layout.tensor * layout.pipeline))
    for c in collectives(option.stage, psi_params, psi_grads, settings.communication_dtype, settings.precision,
                         overlap, zeropp):
        if c.intra_node:
            ranks = min(zeropp.hpz, n)
            seconds = ring_seconds(c.nbytes, ranks, ranks, gpu.intra_node_gb_s, gpu.intra_node_gb_s)
        else:
            seconds = ring_seconds(c.nbytes, n, ranks_per_node, gpu.intra_node_gb_s, hw.inter_node_gb_s)
        count = {"forward": step.k, "backward": step.k}.get(c.when, 1)
        {"forward": step.forward, "backward": step.backward, "boundary_backward": step.boundary}.get(
            c.when, _Pass(0)).add("communication", seconds, c.overlapped)
        if c.when == "after_backward":
            step.after_backward += seconds
        elif c.when == "after_step":
            step.after_step += seconds
        step.terms.append(StepTerm("communication", f"{c.name}" + (f" x {count} micro steps" if count > 1 else ""),
                                   count * seconds, f"{c.elements:,.0f} elements x {c.element_bytes:g} B x (n-1)/n "
                                   f"over {_link(c.intra_node or n <= ranks_per_node, hw, gpu)}, n = {n}",
                                   "ZeRO paper §7; ZeRO++ §3; DeepSpeed stage_1_and_2.py / stage3.py; comm.py"))


def _zero3_host(step: _Step, model: ModelSpec, shape: TrainingShape, layout: Parallel) -> None:
    """ZeRO-3's host work per module fetch (host.py), beside the compute of each pass."""
    modules, counted = modules_with_parameters(model)
    if modules is None:
        step.notes.append(f"ZeRO-3 host work per module fetch not counted: {counted}")
        return
    modules = math.ceil(modules / layout.pipeline)  # a pipeline stage holds its share of the layers
    fetches = fetches_per_micro_step(shape.activation_checkpointing)
    per_pass = modules * ZERO3_FETCH_HOST_S
    step.forward.add("host", per_pass, True)
    step.backward.add("host", per_pass * (fetches - 1), True)  # backward (+ the recomputed forward)
    step.terms.append(StepTerm("host", f"ZeRO-3 module fetches x {fetches * step.k}", step.k * fetches * per_pass,
                               f"{modules} modules ({counted}) x {fetches} passes x {ZERO3_FETCH_HOST_S * 1e6:.0f} "
                               f"us per fetch, beside the compute", "benchmarks/zero3_fetch_overhead.py; host.py"))
    if layout.data <= 1:
        return  # one rank gathers nothing (partition_parameters.py _no_gather_coalesced)
    wait = host.ZERO3_FETCH_WAIT_S  # read at call time: benchmarks/throughput/fit.py sets it while fitting
    step.forward.add("communication", modules * wait, False)
    step.backward.add("communication", modules * wait * (fetches - 1), False)
    step.terms.append(StepTerm("communication", f"ZeRO-3 fetch waits x {fetches * step.k}",
                               step.k * fetches * modules * wait,
                               f"{modules} modules x {fetches} passes x {wait * 1e6:.0f} us per fetch (all-gather "
                               f"launch and wait on the compute stream), not overlapped",
                               "partitioned_param_coordinator.py fetch_sub_module (wait_stream); allowance fitted "
                               "by benchmarks/throughput/fit.py; host.py"))


def _gradients_to_host(step: _Step, option: Option, hw: Hardware, gpu: GpuSpec, part: float, grad_bytes: int,
                       overlapped: bool) -> None:
    """With the optimizer offloaded: each rank's gradient partition over PCIe to the host (offload.py)."""
    k = step.k
    reducing = k if option.stage >= 2 else 1
    down = pcie_seconds(part * grad_bytes, hw)
    (step.backward if option.stage >= 2 else step.boundary).add("offload", down, overlapped)
    accumulate = pcie_seconds(part * grad_bytes, hw) if option.stage >= 2 and k > 1 else 0.0
    step.backward.add("offload", accumulate * (k - 1) / k, overlapped)  # not in the first micro step
    step.terms.append(StepTerm("offload", f"gradients to the host x {reducing}", reducing * down + (k - 1) * accumulate,
                               f"{part:,.0f} x {grad_bytes} B over PCIe {gpu.host_link_gb_s} GB/s"
                               + (" (+ accumulated partition back per micro step)" if accumulate else ""),
                               "ZeRO-Offload §4.1; stage_1_and_2.py copy_grads_in_partition; offload.py"))


def _cpu_optimizer_step(step: _Step, option: Option, settings: Settings, hw: Hardware, part: float, g: int) -> None:
    """The offloaded optimizer step on the host: CPU Adam and the step's other host passes (offload.py)."""
    threads = cpu_threads_per_rank(hw.launcher, hw.cpu_cores, g)
    adam = cpu_adam_seconds(part, g, hw)
    step.after(StepTerm("offload", "CPU Adam step", adam,
                        f"{part:,.0f} params / ({hw.cpu_adam_params_per_core_s:.2g}/s/core x "
                        f"{threads:g} threads ({hw.launcher}, "
                        f"{hw.cpu_cores} cores, {g} processes)), at most {hw.host_memory_gb_s} GB/s host memory",
                        "benchmarks/cpu_adam.py; hardware.cpu_threads_per_rank"))
    passes = host_passes(option.stage, settings.precision, settings.gradient_clipping)
    rest = host_passes_seconds(part, passes, g, hw)
    per_pass = " + ".join(f"{p} {HOST_PASS_S_PER_PARAM_THREAD[p] * 1e9:.2f}" for p in passes)
    step.after(StepTerm("offload", "the offloaded step's other host passes", rest,
                        f"{part:,.0f} params x ({per_pass} ns per thread) / {threads:g} threads",
                        "stage_1_and_2.py / stage3.py step; benchmarks/offload_step.py; offload.py"))


def _after_cpu_step(step: _Step, option: Option, opt_device: Device, hw: Hardware, part: float, grad_bytes: int,
                    g: int) -> None:
    """After the host's step: the updated parameters back to the GPU (unless they live on the host) and,
    with the optimizer on NVMe, its states read and written (offload.py)."""
    if option.offload_param == Device.NONE:
        up = pcie_seconds(part * grad_bytes, hw)
        step.after(StepTerm("offload", "updated parameters to the GPU", up,
                            f"{part:,.0f} x {grad_bytes} B over PCIe", "ZeRO-Offload §4.1; offload.py"))
    if opt_device == Device.NVME:
        swap = nvme_seconds(2 * part * OPTIMIZER_STATE_BYTES, g, hw)
        step.after(StepTerm("nvme", "optimizer states read and written", swap,
                            f"2 x {part:,.0f} x {OPTIMIZER_STATE_BYTES} B x {g} processes / {hw.nvme_gb_s} GB/s",
                            "ZeRO-Infinity §5; partitioned_optimizer_swapper.py; offload.py"))


def _parameter_offload(step: _Step, option: Option, hw: Hardware, param_part: float, grad_bytes: int, g: int,
                       overlap: bool, params_overlap: bool) -> None:
    """ZeRO-3 parameter offload: the partition to the GPU before each pass, and from NVMe (offload.py)."""
    k = step.k
    fetch = pcie_seconds(param_part * grad_bytes, hw)
    step.forward.add("offload", fetch, params_overlap)
    step.backward.add("offload", fetch, params_overlap)
    step.terms.append(StepTerm("offload", f"parameters to the GPU x {2 * k}", 2 * k * fetch,
                               f"{param_part:,.0f} x {grad_bytes} B over PCIe, before each forward and backward",
                               "ZeRO-Infinity §5; offload.py"))
    if option.offload_param == Device.NVME:
        read = nvme_seconds(param_part * grad_bytes, g, hw)
        step.forward.add("nvme", read, overlap)
        step.backward.add("nvme", read, overlap)
        write = nvme_seconds(param_part * grad_bytes, g, hw)
        step.after_step += write
        step.terms.append(StepTerm("nvme", f"parameters read x {2 * k} and written", 2 * k * read + write,
                                   f"{param_part:,.0f} x {grad_bytes} B x {g} processes / {hw.nvme_gb_s} GB/s",
                                   "ZeRO-Infinity §5; offload.py"))


def _gpu_optimizer_step(step: _Step, option: Option, settings: Settings, gpu: GpuSpec, psi_grads: int,
                        part: float) -> None:
    """The optimizer step on the GPU (gpu_step.py): its passes' bytes over the memory bandwidth, after the last
    backward."""
    stepped = psi_grads if option.stage == 0 else part  # ZeRO-0 steps all its parameters, ZeRO-1/2/3 1/N
    per_param = gpu_step_bytes(settings.precision, settings.optimizer_elements, settings.gradient_clipping,
                               master_bytes=master_bytes(settings), state_bytes=state_bytes_gpu(settings))
    if gpu.memory_gb_s is None:
        step.notes.append(f"the optimizer step on the GPU not counted: no memory bandwidth for {gpu.name}")
        return
    gpu_opt = gpu_step_seconds(stepped, per_param, gpu.memory_gb_s)
    step.after(StepTerm("compute", "optimizer step on the GPU", gpu_opt,
                        f"{stepped:,.0f} params x {per_param.total} B (master {per_param.to_master} + "
                        f"{settings.optimizer_label} {per_param.optimizer} + 16-bit copy {per_param.to_model}"
                        f" + overflow/clip {per_param.overflow_and_clip}) / {gpu.memory_gb_s:g} GB/s",
                        "stage_1_and_2.py / stage3.py step; multi_tensor_adam.cu; gpu_step.py"))


def _link(intra: bool, hw: Hardware, gpu: GpuSpec) -> str:
    if intra:
        return f"the intra-node link {gpu.intra_node_gb_s} GB/s"
    return f"the node network {min(hw.inter_node_gb_s, gpu.intra_node_gb_s)} GB/s"

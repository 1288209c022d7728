"""torch's CUDA caching allocator: what fragments, by how much, as ``PYTORCH_CUDA_ALLOC_CONF`` sets it.

Fragmentation is memory the allocator holds in freed blocks that a new request cannot use. It arises
where tensors are freed and allocated again in a different order or size every step: the activations
(autograd frees them through backward), the stage-3 gathered parameters (fetched and released module by
module), and the temporaries of communication and of the optimizer step. Buffers allocated once at
``deepspeed.initialize`` and kept (parameters, the flat gradient and optimizer partitions, the reduce
bucket, the offload staging buffers, pipeline receive buffers) are placed before any of that churn and
never freed, so they leave no gaps: the allowance applies to the re-allocated bytes alone.

With ``expandable_segments:True`` (c10/cuda/CUDACachingAllocator.cpp ExpandableSegment) each stream's pool
is one virtual range whose physical pages (2 MiB, the granularity ``cuMemCreate`` maps) are mapped on
demand; freed blocks coalesce with their neighbours, and when a request does not fit the allocator unmaps
the free pages and maps them where the request lands (release_cached_blocks, then map at the segment's
end). What stays stranded is the part of a page a free range does not cover: under one page at each end
of the live re-allocated blocks, counted here as one page per re-allocated term (each term is one kind of
tensor live at the peak).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zeroadvisor.memory.buffers import ALLREDUCE_COPY_KEY
from zeroadvisor.memory.step_temporaries import BOUNDARY_NORM_KEY as BOUNDARY_NORM
from zeroadvisor.memory.step_temporaries import GRAD_KEY as STEP_FP32_GRAD
from zeroadvisor.memory.step_temporaries import KEY as STEP_TEMPORARY
from zeroadvisor.memory.step_temporaries import OFFLOAD_STEP_COPY_KEY
from zeroadvisor.memory.terms import Term, exact
from zeroadvisor.vocab import ALLOC_CONF_ENV as ENV
from zeroadvisor.vocab import Resource, TermKind

# The allowance without expandable segments: a named parameter, not fitted to any measurement (the ZeRO paper
# saw OOM with > 30 % free; Megatron adds 5 %; memory-model.md §10 budgets 5-10 %). It now applies to the
# re-allocated bytes only (module docstring); the former 10 % of every GPU row is kept as the term's bound.
FRAGMENTATION = Fraction(1, 10)
# The physical page an expandable segment maps (CUDACachingAllocator.cpp: segment_size_ = kLargeBuffer, 2 MiB,
# the granularity cuMemGetAllocationGranularity reports for device memory).
PAGE_BYTES = 2 * 2**20
FRAGMENTATION_KEY = "fragmentation"

# Rows freed and allocated again every step.
REALLOCATED_ROWS = frozenset({
    "activations",  # autograd's saved tensors, freed through backward
    "gathered_parameters",  # stage 3: fetched per module and released (partitioned_param_coordinator.py)
})
# Buffers (by Term.key) allocated and freed inside every step; the other buffers are allocated once.
REALLOCATED_KEYS = frozenset({
    STEP_TEMPORARY,  # the optimizer step's temporaries (memory/step_temporaries.py)
    STEP_FP32_GRAD,  # stage 3: the stepped sub-group's fp32 gradient, built and freed in every step
    BOUNDARY_NORM,  # stage 1/2 offload: the boundary's fp64 norm copy, per parameter in backward
    OFFLOAD_STEP_COPY_KEY,  # stage 1/2 offload, DeepSpeed 0.14.1-0.16.9: the fp32 partition on the GPU, per step
    ALLREDUCE_COPY_KEY,  # engine.py / stage_1_and_2.py allreduce_bucket: flatten() builds a new bucket per reduction
    "reduce_scatter_copy",  # coalesced_collectives.py reduce_scatter_coalesced: torch.cat per bucket
    "qgz_all_to_all",  # coalesced_collectives.py all_to_all_quant_reduce: per gradient tensor
    "qwz_allgather",  # partition_parameters.py _all_gather_coalesced: per quantized fetch
    "qwz_scales",
    "ulysses_all_to_all",  # sequence/layer.py single_all_to_all: per attention call
    "dequantized_weight",  # bitsandbytes matmul_4bit: per matmul
})


@dataclass(frozen=True, slots=True)
class AllocatorConf:
    """What the run's ``PYTORCH_CUDA_ALLOC_CONF`` says that moves memory. ``text``: the value as the run's
    environment gives it (None: nobody said; "" set empty, torch's defaults)."""

    text: str | None = None

    @property
    def given(self) -> bool:
        return self.text is not None

    @property
    def expandable_segments(self) -> bool:
        """``expandable_segments:True`` among the comma-separated options (CUDAAllocatorConfig.cpp parseArgs
        accepts exactly "True" or "False"; the last one given wins)."""
        on = False
        for option in (self.text or "").split(","):
            key, _, value = option.strip().partition(":")
            if key.strip() == "expandable_segments":
                on = value.strip() == "True"
        return on

    def words(self) -> str:
        if self.text is None:
            return f"{ENV} not given: torch's default allocator assumed (no expandable segments)"
        return f"{ENV}={self.text}" + (" (expandable segments)" if self.expandable_segments else "")


def reallocated(term: Term) -> bool:
    """Whether ``term``'s bytes are freed and allocated again every step (module docstring)."""
    return term.device == Resource.GPU and (term.row in REALLOCATED_ROWS or term.key in REALLOCATED_KEYS)


def fragmentation_term(terms: list[Term], conf: AllocatorConf) -> Term:
    """The allocator's fragmentation on the GPU over ``terms`` (the train phase's), expected and bound."""
    churn = [t for t in terms if t.nbytes and reallocated(t)]
    churned = sum(t.nbytes for t in churn)
    counted = sum(t.nbytes for t in terms if t.device == Resource.GPU)
    if conf.expandable_segments:
        pages = PAGE_BYTES * len(churn)
        return Term("overhead", Resource.GPU, pages, FRAGMENTATION_KEY,
                    f"caching-allocator fragmentation with expandable segments ({len(churn)} re-allocated terms)",
                    "2 MiB page × re-allocated terms", "memory/allocator.py PAGE_BYTES; c10/cuda/"
                    "CUDACachingAllocator.cpp ExpandableSegment (pages unmapped and re-mapped on demand)",
                    kind=TermKind.ALLOWANCE)
    expected = exact(FRAGMENTATION * churned)
    bound = exact(FRAGMENTATION * counted)
    return Term("overhead", Resource.GPU, expected, FRAGMENTATION_KEY,
                "caching-allocator fragmentation of the memory freed and re-allocated every step",
                "10% of activations, gathered parameters and per-step temporaries (up to 10% of every GPU row)",
                "memory/allocator.py FRAGMENTATION; c10/cuda/CUDACachingAllocator.cpp (blocks split and cached per "
                "size class)", kind=TermKind.ALLOWANCE, bound=bound if bound > expected else None)

"""Allocations that changed between DeepSpeed releases: the first release that runs the newer code, read from each
release's source (pip serves every one; `pip download deepspeed==X --no-binary :all:`).

The memory model follows DeepSpeed 0.19.8; a run on an older release (pinned beside the config, installed, or
given with --deepspeed-version) is costed with the allocation its release makes, where the two differ. One row per
change: a table, not a chain of version checks in the terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from zeroadvisor.deepspeed.releases import known, version_key


class Change(StrEnum):
    """One allocation that differs by release."""

    # runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.__init__: up to 0.18.9 every bit16 parameter is moved to
    # the host (param.cpu_data = param.data.cpu()), flattened there and the flat buffer moved back ("create flat
    # buffer in CPU"); from 0.19.0 the flat buffer is built on the accelerator next to the parameters when
    # accelerator.available_memory() >= its bytes (flatten_on_accelerator), else on the host as before
    FLATTEN_ON_ACCELERATOR = "flatten_on_accelerator"


@dataclass(frozen=True, slots=True)
class ReleaseChange:
    since: str  # the first release that runs the newer code
    source: str  # where it is, in the newer release


CHANGES: dict[Change, ReleaseChange] = {
    Change.FLATTEN_ON_ACCELERATOR: ReleaseChange(
        "0.19.0", "runtime/zero/stage_1_and_2.py DeepSpeedZeroOptimizer.__init__ (flatten_on_accelerator)"),
}


def runs(change: Change, release: str) -> bool:
    """Whether DeepSpeed ``release`` (a known release, "0.14.5") runs the newer code of ``change``."""
    return version_key(release) >= version_key(CHANGES[change].since)


@dataclass(frozen=True, slots=True)
class Era:
    """From ``since`` (the first release running it) until the next era's: a size per element and the code."""

    since: str
    bytes_per_element: int
    source: str
    # where the tensor is fp32 already and a .float() copy of it is the tensor itself (None: the same bytes)
    fp32_bytes_per_element: int | None = None

    def bytes_for(self, element_bytes: int) -> int:
        """Bytes per element of a tensor whose elements take ``element_bytes``."""
        fp32 = self.fp32_bytes_per_element
        return fp32 if element_bytes == 4 and fp32 is not None else self.bytes_per_element


# runtime/zero/stage_1_and_2.py _has_inf_or_nan: with the optimizer offloaded, at the accumulation boundary,
# copy_grads_in_partition -> update_overflow_tracker_for_param_grad runs it on each partition parameter's whole 16-bit
# gradient, in backward (for bf16 too); in fp16 without the offload step() runs it on each gradient piece of the
# partition (check_overflow -> has_overflow_partitioned_grads_serial). Read from every release's source (pip download
# deepspeed==X --no-binary :all:).
OVERFLOW_CHECK: tuple[Era, ...] = (
    Era("0.0", 4, "_has_inf_or_nan: float(x.float().sum()), an fp32 copy", fp32_bytes_per_element=0),
    # 0.13.3: float_x = x.float(); isnan; isinf; logical_or; .float().max(): 4 + 1 + 1 + 1 + 4 bytes live together,
    # 7 where x is fp32 (.float() returns x) (measured on CPU with 0.16.9: benchmarks/zero2_reduce.md)
    Era("0.13.3", 11, "_has_inf_or_nan: x.float(), isnan, isinf, logical_or and .float() of it, then max",
        fp32_bytes_per_element=7),
    # 0.19.6: runtime/utils.py has_inf_or_nan reduces (amax/amin) before testing: nothing proportional to x
    Era("0.19.6", 0, "runtime/utils.py has_inf_or_nan: amax and amin, no copy"),
)
# runtime/zero/stage_1_and_2.py step() with the optimizer offloaded: how the stepped fp32 partition (pinned host)
# reaches the 16-bit parameters on the GPU.
OFFLOAD_STEP_COPY: tuple[Era, ...] = (
    Era("0.0", 0, "bit16_partitions[partition_id].data.copy_(fp32_partition.data): converted on the host"),
    Era("0.14.1", 4, "bit16_partitions[partition_id].data.copy_(fp32_partition.to(accelerator).data): the fp32 "
                     "partition on the GPU first"),
    Era("0.17.0", 0, "bit16_partition_buffer (pinned host, 16-bit) .copy_(fp32_partition), then to the GPU"),
)


def era(eras: tuple[Era, ...], release: str) -> Era:
    """The era of ``eras`` (oldest first) that DeepSpeed ``release`` runs."""
    key = version_key(release)
    return [e for e in eras if version_key(e.since) <= key][-1]


def releases_of(eras: tuple[Era, ...], chosen: Era) -> str:
    """The releases ``chosen`` spans, both ends included ("0.14.1 to 0.16.9", "0.19.6 on"): it ends at the last
    known release before the next era's first."""
    later = [e.since for e in eras if version_key(e.since) > version_key(chosen.since)]
    start = "the first releases" if chosen.since == "0.0" else chosen.since
    if not later:
        return f"{start} on"
    last = [r for r in known() if version_key(r) < version_key(later[0])][-1]
    return f"{start} to {last}"

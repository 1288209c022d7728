"""Held out by source: which model constants are fitted, on what data, and which field cases stay out of them.

The field suite's predicted/measured distribution means something only for cases no constant of the model was
fitted on. This module says, for every constant of the memory model that a measurement or an outside figure
(rather than DeepSpeed's, torch's or transformers' code, or a datasheet) sets, where its value comes from
(:data:`CONSTANTS`), and which field sources (:func:`source_key`: a GitHub repository, else the web host) it was
fitted on. A case whose source a constant was fitted on is not held out: it is left out of the held-out
distribution (:func:`held_out`) and named, rather than re-fitted without it, because a constant here is a module
attribute the CLI reads, not a function of the cases.

Beside the held-out distribution, :func:`by_source` groups the ratios per source (is one source, many cases from
one recipe, carrying the median?) and :func:`leave_one_source_out` gives the ratios with each source's cases
dropped, so the report can state how far the median and the error move when any one source is left out.

Pure functions over ``(case id, source, ratio)`` rows; run.py computes the spreads and prints them.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

# Hosts whose first two path components name a repository: cases from two repositories there are two sources.
REPOSITORY_HOSTS = frozenset({"github.com", "gitlab.com", "gitee.com"})


@dataclass(frozen=True, slots=True)
class Constant:
    """A constant of the memory model that no code or datasheet gives: ``name`` is ``module:ATTRIBUTE`` in
    zeroadvisor, ``data`` what sets its value, ``field_sources`` the field-suite sources (:func:`source_key`)
    it was fitted on (empty: none)."""

    name: str
    data: str
    field_sources: frozenset[str] = frozenset()

    def value(self) -> object:
        """The value the model uses now (imported, so that a renamed or removed constant fails loudly)."""
        module, _, attribute = self.name.partition(":")
        return getattr(importlib.import_module(module), attribute)


# Every constant of zeroadvisor/memory that a measurement or an outside figure sets. The terms DeepSpeed, torch or
# transformers allocate by their code (buffers, partitions, activations term by term) have no fitted constant:
# their CPU calibrations (benchmarks/calibration.md, activations.md, working_set.md, zero3_step.md,
# step_temporaries.md, frozen.md, recompute_loss.json) check the formulas against real DeepSpeed, they set no number.
CONSTANTS: tuple[Constant, ...] = (
    Constant("zeroadvisor.memory.allocator:FRAGMENTATION",
             "a named allowance from the literature (the ZeRO paper saw OOM with > 30 % free; Megatron adds 5 %; "
             "memory-model.md §10 budgets 5-10 %), checked, not fitted, on 87 public CUDA OOM messages "
             "(benchmarks/fit_allocator.py: reserved but unallocated at the failure, median 1.8 % of allocated)"),
    Constant("zeroadvisor.memory.buffers:CUDA_CONTEXT_BYTES",
             "fitted on 87 public CUDA OOM messages from 70 sources, none a field source "
             "(benchmarks/fit_allocator.py, allocator_oom/messages.tsv: total - free - reserved, 1.015 GiB)"),
    Constant("zeroadvisor.memory.host:RUNTIME_IMPORT_BYTES",
             "RSS after import torch, deepspeed, measured here on CPU (benchmarks/load_calibration.json)"),
    Constant("zeroadvisor.memory.host:RUNTIME_INIT_BYTES",
             "RSS growth of deepspeed.initialize on a tiny model, measured here on CPU "
             "(benchmarks/load_calibration.json)"),
    Constant("zeroadvisor.memory.host:RUNTIME_TRANSFORMERS_BYTES",
             "RSS growth of import transformers and its Trainer, measured here on CPU "
             "(benchmarks/host_baseline.json)"),
    Constant("zeroadvisor.memory.host:CUDA_HOST_BYTES",
             "the CUDA runtime's host RSS at the first CUDA tensor, from pytorch/pytorch#113326 and #106511 "
             "(not field cases)"),
    Constant("zeroadvisor.memory.host:DATALOADER_WORKER_BYTES",
             "a forked data-loader worker's USS, measured here on CPU (benchmarks/host_baseline.json)"),
)


# Repositories that were renamed or moved: one project, one source, whichever name a link uses (GitHub redirects
# the old name to the new one).
RENAMED = {
    "github.com/hiyouga/llamafactory": "github.com/hiyouga/llama-factory",
    "github.com/microsoft/deepspeed": "github.com/deepspeedai/deepspeed",
    "github.com/microsoft/megatron-deepspeed": "github.com/deepspeedai/megatron-deepspeed",
    "github.com/microsoft/deepspeedexamples": "github.com/deepspeedai/deepspeedexamples",
    "github.com/openaccess-ai-collective/axolotl": "github.com/axolotl-ai-cloud/axolotl",
    "github.com/modelscope/swift": "github.com/modelscope/ms-swift",
}


def source_key(url: str) -> str:
    """The source a case's report belongs to: ``host/owner/repo`` on a repository host (each issue tracker or
    docs folder of one project is one source, under its current name: RENAMED), else the host without ``www.``
    (one site, one author's posts)."""
    parsed = urlparse(url.strip())
    host = parsed.netloc.lower().removeprefix("www.")
    if not host:
        raise ValueError(f"source {url!r} is not a URL")
    parts = [p for p in parsed.path.split("/") if p]
    if host in REPOSITORY_HOSTS and len(parts) >= 2:
        key = f"{host}/{parts[0]}/{parts[1]}".lower()
        return RENAMED.get(key, key)
    return host


@dataclass(frozen=True, slots=True)
class Row:
    """One run that trained with a measured GPU peak: its case, the case's source key, predicted/measured."""

    case: str
    source: str
    ratio: float


def fitted_sources(constants: Iterable[Constant]) -> frozenset[str]:
    """The field sources any constant was fitted on."""
    return frozenset(s for c in constants for s in c.field_sources)


def held_out(rows: Sequence[Row], constants: Iterable[Constant]) -> tuple[list[Row], list[Row]]:
    """(held out, left out): the rows whose source no constant was fitted on, and the others."""
    seen = fitted_sources(constants)
    return [r for r in rows if r.source not in seen], [r for r in rows if r.source in seen]


def by_source(rows: Sequence[Row]) -> dict[str, list[float]]:
    """The ratios of each source, sources in first-seen order."""
    groups: dict[str, list[float]] = {}
    for r in rows:
        groups.setdefault(r.source, []).append(r.ratio)
    return groups


def leave_one_source_out(rows: Sequence[Row]) -> dict[str, list[float]]:
    """For each source, the ratios of every other source (the distribution with that source's cases dropped)."""
    return {s: [r.ratio for r in rows if r.source != s] for s in by_source(rows)}

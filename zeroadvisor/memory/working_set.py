"""ZeRO-3's gathered-parameter working set: DeepSpeed 0.19.8's parameter coordinator replayed on a trace.

Paths are relative to ``deepspeed/runtime/zero/``. From the second step on the coordinator has a complete
trace (``partitioned_param_coordinator.py PartitionedParameterCoordinator``) and, for every module the
hooks enter (forward, the recompute of a checkpointed layer, backward):

* ``fetch_sub_module``: all-gathers the module's own parameters that are not available (whatever
  ``stage3_max_live_parameters`` says), pops them off the parameter queue, then prefetches from the queue
  while ``numel_prefetching < min(max_live - n_available, prefetch_bucket_size)``: whole parameters, so
  the last one can overshoot the bucket (a bucket smaller than the next parameter still prefetches it);
* ``release_sub_module`` -> ``__params_to_release``: frees the module's parameters unless persistent
  (``ds_persist``), already prefetched for a later use (``__most_recent_step_id_param_fetched_for >
  step_id``), or used again by a module within the next ``stage3_max_reuse_distance`` elements of the
  trace (the scan stops once the elements traversed reach the distance);
* ``partition_parameters.py all_gather_coalesced``: several parameters in one call go through a flat
  buffer of their gathered size; ``AllGatherCoalescedHandle.wait`` copies each parameter out of it
  (``torch.cat``), and the flat buffer lives as long as the handle, i.e. until the last of its parameters
  is waited for. One parameter takes ``_all_gather_sequential``: ``param.data`` is its buffer (no copy).

:func:`peak` replays these rules and returns the largest gathered numel at any moment of one step. The
trace comes from :func:`layered_trace`: the parameters in ``model.parameters()`` order, each its own
module (a Linear's bias, fetched with its weight by DeepSpeed, is under the persistence threshold in the
models this is used for, so it stays resident either way), layers found as repeated blocks of sizes; in
backward each layer is recomputed (forward order) before its backward (reverse order) under full
activation checkpointing (torch.utils.checkpoint reruns the layer's forward, hooks and all).
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from zeroadvisor.memory.persistence import persistent_indices

SOURCE = ("zero/partitioned_param_coordinator.py fetch_sub_module (prefetch loop, __n_available_params), "
          "release_sub_module (__params_to_release); zero/partition_parameters.py all_gather_coalesced")

MAX_EDGE = 4  # parameters before the first layer (embeddings) and after the last (final norm, LM head) tried


@dataclass(frozen=True, slots=True)
class Trace:
    numels: tuple[int, ...]  # per parameter
    modules: tuple[tuple[int, ...], ...]  # per module entered, in order over forward + backward: parameter ids
    persistent: frozenset[int]  # ds_persist: never gathered or released by the coordinator


@dataclass(frozen=True, slots=True)
class Peak:
    elements: int  # gathered numel at the worst moment (persistent parameters excluded)
    step: int  # index of the module entered at that moment
    transient: int  # of which: flat all-gather buffers alongside their copies


def split_layers(numels: Sequence[int], layers: int) -> tuple[int, int, int] | None:
    """(parameters before the layers, per layer, after them) when ``numels`` is ``layers`` identical blocks
    between at most MAX_EDGE parameters on each side; None otherwise."""
    n = len(numels)
    if layers < 1:
        return None
    for before in range(MAX_EDGE + 1):
        for after in range(MAX_EDGE + 1):
            body = n - before - after
            if body < layers or body % layers:
                continue
            per = body // layers
            first = tuple(numels[before:before + per])
            if all(tuple(numels[before + k * per:before + (k + 1) * per]) == first for k in range(1, layers)):
                return before, per, after
    return None


def layered_trace(numels: Sequence[int], layers: int, recompute: bool, tied_head: bool,
                  persistent: frozenset[int]) -> Trace | None:
    """Forward then backward of a stack of identical layers; None when the sizes show no such stack.

    ``tied_head``: the LM head uses the input embedding (parameter 0) after the last parameter."""
    split = split_layers(numels, layers)
    if split is None:
        return None
    before, per, _ = split
    head = [(i,) for i in range(before)]
    blocks = [[(before + k * per + j,) for j in range(per)] for k in range(layers)]
    tail = [(i,) for i in range(before + layers * per, len(numels))]
    if tied_head:
        tail.append((0,))
    forward = head + [m for block in blocks for m in block] + tail
    backward = list(reversed(tail))
    for block in reversed(blocks):
        backward += (block if recompute else []) + list(reversed(block))
    backward += list(reversed(head))
    return Trace(tuple(numels), tuple(forward + backward), persistent)


class _Coordinator:
    """PartitionedParameterCoordinator's state over one step (only what decides the gathered numel)."""

    def __init__(self, trace: Trace, prefetch_bucket: int, max_live: int, max_reuse: int) -> None:
        self.trace, self.bucket, self.max_live, self.max_reuse = trace, prefetch_bucket, max_live, max_reuse
        # record_parameters: each module's parameters (sorted by id) with the step that uses them
        self.queue = deque((p, step) for step, module in enumerate(trace.modules) for p in sorted(set(module)))
        self.recent: dict[int, int] = defaultdict(lambda: -10**10)  # __most_recent_step_id_param_fetched_for
        self.available: set[int] = set(trace.persistent)
        self.inflight: dict[int, int] = {}  # parameter -> its coalesced all-gather
        self.groups: dict[int, list[int]] = {}  # all-gather -> [flat numel, parameters not yet waited, waited]
        self.n_available = 0
        self.gids = iter(range(len(trace.modules) + 1))

    def gather(self, params: list[int]) -> None:
        todo = [p for p in params if p not in self.available]
        if not todo:
            return
        self.n_available += sum(self.trace.numels[p] for p in todo)
        self.available.update(todo)
        if len(todo) > 1:  # _all_gather_coalesced: one flat buffer for the call
            gid = next(self.gids)
            self.groups[gid] = [sum(self.trace.numels[p] for p in todo), len(todo), 0]
            self.inflight.update(dict.fromkeys(todo, gid))

    def wait(self, params: list[int]) -> None:
        for p in params:  # AllGatherCoalescedHandle.wait copies every parameter of the call at the first wait
            gid = self.inflight.pop(p, None)
            if gid is not None:
                self.groups[gid][2] = 1
                self.groups[gid][1] -= 1

    def transient(self) -> int:
        return sum(flat for flat, _, waited in self.groups.values() if waited)

    def drop_done(self) -> None:
        for gid in [g for g, (_, left, _) in self.groups.items() if left == 0]:
            del self.groups[gid]  # the handle goes with its last parameter, and the flat buffer with it

    def pop_own(self, params: list[int], step: int) -> None:
        wanted = {p for p in params if self.recent[p] < step}
        popped: set[int] = set()
        while self.queue and len(popped) < len(wanted):
            p, used_at = self.queue.popleft()
            self.recent[p] = used_at
            popped.add(p)

    def prefetch(self) -> None:
        budget = min(self.max_live - self.n_available, self.bucket)
        chosen: list[int] = []
        numel_prefetching = 0
        while self.queue and numel_prefetching < budget:
            p, used_at = self.queue.popleft()
            if p not in self.available and p not in chosen:
                chosen.append(p)
                numel_prefetching += self.trace.numels[p]
            self.recent[p] = max(self.recent[p], used_at)
        self.gather(chosen)

    def release(self, params: list[int], after: int) -> None:
        """__params_to_release at the module's post hook (the step counter is already past it)."""
        release = {p for p in params if p not in self.trace.persistent and self.recent[p] <= after}
        traversed = 0
        for later in islice(self.trace.modules, after, None):
            if traversed >= self.max_reuse or not release:
                break
            for p in later:
                release.discard(p)
                traversed += self.trace.numels[p]
        for p in release:
            if p in self.available and p not in self.inflight:
                self.available.discard(p)
                self.n_available -= self.trace.numels[p]


def peak(trace: Trace, prefetch_bucket: int, max_live: int, max_reuse: int) -> Peak:
    """The largest gathered numel over one step with a complete trace (see the module docstring)."""
    c = _Coordinator(trace, prefetch_bucket, max_live, max_reuse)
    best = Peak(0, 0, 0)
    for step, module in enumerate(trace.modules):
        params = sorted(set(module))
        c.gather(params)
        c.wait(params)
        moments = [c.transient()]
        c.drop_done()
        c.pop_own(params, step)
        if prefetch_bucket > 0:
            c.prefetch()
            moments.append(c.transient())
        extra = max(moments)
        if c.n_available + extra > best.elements:
            best = Peak(c.n_available + extra, step, extra)
        c.release(params, step + 1)
    return best


def stage3_peak(numels: Sequence[int], layers: int | None, recompute: bool, tied_head: bool, threshold: int,
                model_threshold: int, prefetch_bucket: int, max_live: int, max_reuse: int) -> Peak | None:
    """The working-set peak of a layered model, or None when its parameters show no stack of layers."""
    if not layers or not numels:
        return None
    keep = frozenset(persistent_indices(numels, threshold, model_threshold))
    trace = layered_trace(numels, layers, recompute, tied_head, keep)
    return None if trace is None else peak(trace, prefetch_bucket, max_live, max_reuse)

"""ZeRO-3 persistent parameters: which parameters DeepSpeed 0.19.8 keeps whole on every rank.

Paths are relative to ``deepspeed/runtime/zero/``.

* Selection, ``parameter_offload.py DeepSpeedZeRoOffload.mark_persistent_parameters``: in
  ``module.named_parameters()`` order (tied tensors once), a parameter is skipped when its numel
  would take the running total above ``model_persistence_threshold`` (default ``sys.maxsize``),
  else it persists when ``numel <= param_persistence_threshold`` (default 1e5).
* Bytes: a persistent parameter is partitioned like any other (its ``ds_tensor`` is in the flat
  16-bit partition; gradients and optimizer states are partitioned as usual: stage3.py has no
  ``ds_persist`` branch), and *in addition* its full ``param.data`` is never released
  (``partitioned_param_coordinator.py __params_to_release`` skips ``ds_persist``). ``step()``
  partitions every parameter (``_partition_all_parameters``) and ``_post_step`` gathers the
  persistent ones again with ``partition_parameters.py _allgather_params_coalesced``, which
  allocates ``ds_tensor.ds_numel * world_size`` = ceil(numel / N)·N elements per parameter on the
  GPU. With one rank ``_allgather_params_coalesced`` takes ``_no_gather_coalesced``: ``param.data``
  is the partition itself (no copy) unless the partition lives on the host (offload_param), when
  ``NoGatherHandle`` moves it to the GPU (``ds_tensor.data.to(device)``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from zeroadvisor.model.spec import ModelSpec

SOURCE = "zero/parameter_offload.py mark_persistent_parameters; zero/stage3.py _post_step (all_gather)"


@dataclass(frozen=True, slots=True)
class Persistent:
    count: int  # parameters kept whole
    elements: int  # their numel, summed
    gathered: int  # elements of their full copies: sum of ceil(numel / N)·N
    kind: str  # "exact" | "bound" | "estimate"
    how: str  # for the term's description


def _gathered(numel: int, N: int) -> int:
    return -(-numel // N) * N


def persistent_indices(numels: Iterable[int], threshold: int, model_threshold: int) -> list[int]:
    """Positions of the persistent parameters, mark_persistent_parameters' loop over ``numels`` in order."""
    chosen: list[int] = []
    total = 0
    for i, n in enumerate(numels):
        if n + total > model_threshold:
            continue
        if n <= threshold:
            chosen.append(i)
            total += n
    return chosen


def select(numels: Iterable[int], threshold: int, model_threshold: int) -> list[int]:
    """The persistent parameters' sizes, mark_persistent_parameters' loop over ``numels`` in order."""
    numels = list(numels)
    return [numels[i] for i in persistent_indices(numels, threshold, model_threshold)]


def persistent(spec: ModelSpec, threshold: int, model_threshold: int, N: int, notes: list[str]) -> Persistent:
    """Which parameters stay whole at stage 3, from the most exact parameter list ``spec`` has."""
    if spec.parameter_numels is not None:
        # the ordered list of model.parameters(): mark_persistent_parameters' loop, exactly
        chosen = select(spec.parameter_numels, threshold, model_threshold)
        return Persistent(len(chosen), sum(chosen), sum(_gathered(n, N) for n in chosen), "exact",
                          "from the parameter list")
    if spec.parameter_sizes is not None:
        small = sorted((n, c) for n, c in spec.parameter_sizes if n <= threshold)
        count = sum(c for _, c in small)
        elements = sum(n * c for n, c in small)
        gathered = sum(_gathered(n, N) * c for n, c in small)
        if elements <= model_threshold:
            return Persistent(count, elements, gathered, "exact", "from the parameter sizes")
        # model_persistence_threshold binds and the parameter order is unknown: at most the cap
        notes.append(f"stage 3: model_persistence_threshold {model_threshold:,} caps the {elements:,} elements of "
                     f"parameters under the persistence threshold; which of them DeepSpeed keeps depends on the "
                     f"parameter order (unknown): costed as the cap")
        return Persistent(count, model_threshold, model_threshold + count * (N - 1), "bound",
                          "capped by model_persistence_threshold (order unknown)")
    h, L = spec.hidden_size, spec.num_layers
    if not h or not L:
        notes.append("stage-3 persistent parameters not estimated (parameter list, number of layers and hidden size "
                     "unknown)")
        return Persistent(0, 0, 0, "estimate", "unknown")
    if h > threshold:
        return Persistent(0, 0, 0, "estimate", "none: hidden size above the threshold")
    # Without the parameter list: a transformer's norm weights (two per layer + the final norm). Other small
    # tensors (biases, narrow projections) are not known: an estimate that can be low.
    count = min(2 * L + 1, spec.parameters // h)  # never more than the model has
    if count * h > model_threshold:
        count = model_threshold // h  # the loop takes whole norms until the cap
    elements = count * h
    notes.append("stage 3: parameter list unknown (give an hf_config): persistent parameters estimated as the "
                 f"{count} norm weights of {h:,} elements; biases and projections under "
                 f"stage3_param_persistence_threshold {threshold:,} are not counted")
    return Persistent(count, elements, count * _gathered(h, N), "estimate",
                      "estimated as the norm weights")


def full_copy_elements(p: Persistent, N: int, params_offloaded: bool) -> int:
    """Elements of the persistent parameters' full copies beyond the partition, on the GPU."""
    if N > 1:
        return p.gathered
    return p.elements if params_offloaded else 0  # one rank: param.data is the partition, unless on the host

"""Dynamic padding: the longest padded length at which a run that does not fit at its maximum length fits.

With ``padding: longest`` (model/spec.py Padding) every batch is padded to its own longest sample
(transformers 5.24 data/data_collator.py: DataCollatorWithPadding and DataCollatorForSeq2Seq default
``padding=True``, "longest"; the seq2seq example scripts pad to the maximum only with ``--pad_to_max_length``),
so the sequence length (and an encoder-decoder's target length) is a maximum: the tokenizer truncates to it
and no batch is longer. The memory at the maximum is then an upper bound of every step's: a run that fits
there fits every batch, and one that does not fits every batch padded short enough, which the data decides,
not the config. So instead of "does not fit" the verdict is unknown, with the longest padded length that fits.

Encoder-decoder models: the source and the target are shortened together, in proportion to their maxima (one
share of both), because the two lengths of a translation or summarization pair grow together, and a single
bound is one a person can check against the data (``src, tgt <= N, M``). Each length is rounded up, so the
bound never claims a length it did not estimate.

The search relies on the peak being non-decreasing in the padded length: only the activations
(memory/activations.py) and the sequence-parallel buffers (memory/layout_buffers.py) depend on it, each a sum of
terms linear or quadratic in it with non-negative coefficients; ``tests/test_padding.py`` checks it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.vocab import Verdict


@dataclass(frozen=True, slots=True)
class PaddedFit:
    """The longest padded length at which the option fits, where it does not fit at the maximum.

    ``sequence_length`` (the encoder's for an encoder-decoder) and ``target_length`` (None for a
    decoder-only or encoder-only model) are that length; ``maximum`` and ``target_maximum`` the lengths
    the estimate is made at; ``verdict`` (fits or tight) and ``peak_gpu`` the option's at the bound."""

    sequence_length: int
    target_length: int | None
    maximum: int
    target_maximum: int | None
    verdict: Verdict
    peak_gpu: int

    def tokens(self) -> str:
        """"96 tokens", or "96 source and 96 target tokens" for an encoder-decoder."""
        if self.target_length is None:
            return f"{self.sequence_length:,} tokens"
        return f"{self.sequence_length:,} source and {self.target_length:,} target tokens"

    def maximum_tokens(self) -> str:
        if self.target_maximum is None:
            return f"{self.maximum:,} tokens"
        return f"{self.maximum:,} source and {self.target_maximum:,} target tokens"

    def words(self, short: bool = False) -> str:
        """The bound, and that the data decides it (the verdict at the maximum is said by the caller)."""
        fits = "fits" if self.verdict == Verdict.FITS else "fits, inside the headroom,"
        if short:
            return f"{fits} while no batch is padded beyond {self.tokens()} (dynamic padding: the data decides)"
        return (f"with dynamic padding (--padding longest: each batch padded to its longest sample) it {fits} while "
                f"no batch is padded beyond {self.tokens()}: the data decides")

    def to_dict(self) -> JSONObject:
        return {"sequence_length": self.sequence_length, "target_length": self.target_length,
                "maximum": self.maximum, "target_maximum": self.target_maximum, "verdict": self.verdict,
                "peak_gpu": int(self.peak_gpu)}


def shortened(model: ModelSpec, shape: TrainingShape, step: int) -> TrainingShape:
    """``shape`` with its lengths at ``step`` of ``steps(model, shape)``: both lengths the same share of their
    maxima, each rounded up (the last step is the shape itself)."""
    source, target = _maxima(model, shape)
    top = max(source, target or 0)
    length = math.ceil(step * source / top)
    changes: dict[str, Any] = {"sequence_length": length}
    if target is not None:
        changes["target_length"] = math.ceil(step * target / top)
    return dataclasses.replace(shape, **changes)


def steps(model: ModelSpec, shape: TrainingShape) -> int:
    """How many lengths the search can take: the longer maximum (one token apart on it)."""
    source, target = _maxima(model, shape)
    return max(source, target or 0)


def _maxima(model: ModelSpec, shape: TrainingShape) -> tuple[int, int | None]:
    assert shape.sequence_length, "dynamic padding needs a sequence length"
    target = (shape.target_length or shape.sequence_length) if model.encoder_decoder else None
    return shape.sequence_length, target


def longest_fit(model: ModelSpec, shape: TrainingShape,
                judge: Callable[[TrainingShape], tuple[Verdict | None, int]]) -> PaddedFit | None:
    """The longest padded length shorter than the maximum at which ``judge(shape)`` (the option's verdict on what
    is counted, and its GPU peak) is fits, with the headroom left free; where no length does, the longest at which
    it is tight; None where even one token per sample does not fit (the binding peak does not depend on the
    length: the load phase, host RAM). Bisection over ``steps``: the verdict only worsens as the length grows
    (module docstring)."""
    top = steps(model, shape)
    if top < 2:
        return None
    for accepted in ((Verdict.FITS,), (Verdict.FITS, Verdict.TIGHT)):

        def fits(step: int, ok: tuple[Verdict, ...] = accepted) -> bool:
            return judge(shortened(model, shape, step))[0] in ok

        step = _longest(top, fits)
        if step is not None:
            bound = shortened(model, shape, step)
            verdict, peak = judge(bound)
            assert verdict is not None and bound.sequence_length is not None
            source, target = _maxima(model, shape)
            return PaddedFit(bound.sequence_length, bound.target_length if target is not None else None, source,
                             target, verdict, peak)
    return None


def _longest(top: int, fits: Callable[[int], bool]) -> int | None:
    """The largest step below ``top`` where ``fits`` holds (it holds up to some step and not above), or None."""
    if not fits(1):
        return None
    low, high = 1, top  # fits at low; not at high (the maximum: the caller's verdict)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low

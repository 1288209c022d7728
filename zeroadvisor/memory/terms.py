"""One allocation of the memory model: which row, which device, how many bytes, and why."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from zeroadvisor.vocab import Phase, Resource, TermKind

ROWS = ("parameters", "gradients", "optimizer_states", "model_states", "gathered_parameters", "buffers",
        "activations", "overhead", "total")
STATE_ROWS = ("parameters", "gradients", "optimizer_states")
# The models and shares a preference/RL method adds beside the policy (memory/method.py): rows of their own, in
# per_gpu only where the run has them (an SFT estimate's rows are ROWS alone).
METHOD_ROWS = ("reference_model", "reward_model", "critic", "teacher_model", "vllm")


def shown_rows(present: set[str] | frozenset[str]) -> tuple[str, ...]:
    """ROWS with the method rows in ``present`` before "overhead": the order the table and JSON show them."""
    extra = tuple(row for row in METHOD_ROWS if row in present)
    at = ROWS.index("overhead")
    return ROWS[:at] + extra + ROWS[at:]
DEVICES = tuple(Resource)  # cpu = host RAM of the process that drives one GPU
PHASES = tuple(Phase)
KINDS = tuple(TermKind)  # computed from the code / an upper bound / a stated allowance


@dataclass(frozen=True, slots=True)
class Term:
    """``nbytes`` on ``device`` counted in ``row``.

    ``key`` names the allocation so the DeepSpeed and paper accountings can be compared term
    by term; ``formula`` is the bytes in words (B/param, /N); ``source`` is where DeepSpeed
    allocates it (file + function) or the paper section. ``phase`` is the phase the bytes belong
    to; ``kind`` says whether they are exact, a bound or an allowance (the defaults describe the
    train-phase terms written before phases existed). A ``bound`` term whose code gives no usual
    case below the bound is expected at the bound (``nbytes``; ``bound`` None).
    """

    row: str
    device: Resource
    nbytes: int
    key: str
    what: str
    formula: str
    source: str
    phase: Phase = Phase.TRAIN
    kind: TermKind = TermKind.EXACT
    # ``nbytes`` is the expected bytes (what DeepSpeed/torch allocate in the usual case); ``bound`` the most they
    # can be where the code leaves room above that (None: the expected bytes are also the most). The verdict
    # compares the expected peak with the card and the span up to the bound decides "tight" (memory/verdict.py).
    bound: int | None = None

    @property
    def upper(self) -> int:
        """The term's bound: its expected bytes where the code leaves no room above them."""
        return self.nbytes if self.bound is None else max(self.bound, self.nbytes)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def exact(value: Fraction | int) -> int:
    """Round an exact byte count (Fraction) half-up to an integer."""
    value = Fraction(value)
    return int(value + Fraction(1, 2)) if value >= 0 else -int(-value + Fraction(1, 2))

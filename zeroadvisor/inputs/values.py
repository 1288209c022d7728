"""One parser per kind of value a run takes: sizes, GPU counts, the headroom, GPU names, bandwidths, shares,
choices. Each takes the value as given (text from a flag or a TOML file, or a Python value) and the label
that names where it came from (``--gpu-memory``, ``gpu_memory``, ``pyproject.toml:9: 'tool.zeroadvisor.
cluster.gpu-memory'``), and raises a one-line UsageError that starts with that label.

The bounds are the memory model's (memory/cluster.py), applied here to what a user gave.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from zeroadvisor.inputs.errors import UsageError

if TYPE_CHECKING:
    from zeroadvisor.hardware.table import GpuSpec
    from zeroadvisor.inputs.settings import FailOn
    from zeroadvisor.lint.context import Integration
    from zeroadvisor.report.formats import OutputFormat
    from zeroadvisor.vocab import TrainerChoice


@dataclass(frozen=True)
class Spelling:
    """How messages name an input: its flag on the command line (``flags``: field name -> flag), else its
    keyword in Python."""

    flags: Mapping[str, str] = field(default_factory=dict)

    def label(self, name: str) -> str:
        """The input's name at the start of a message about its value: ``--gpu-memory`` or ``gpu_memory``."""
        return self.flags.get(name, name)

    def ask(self, name: str, example: str = "") -> str:
        """The input in "give ..." advice: ``--gpu-memory 80GiB`` on the command line, ``gpu_memory=`` in Python."""
        if name in self.flags:
            return f"{self.flags[name]} {example}".rstrip()
        return f"{name}="


KEYWORDS = Spelling()  # the Python API's


def _memory_rule(check: Callable[[str, int | None], None], label: str, value: int | None) -> None:
    from zeroadvisor.memory.errors import EstimateError

    try:
        check(label, value)
    except EstimateError as err:
        raise UsageError(str(err)) from None


def size(label: str, value: object) -> int | None:
    """Bytes: a size with a unit ("80GiB", "1.5TB") or, from Python, a byte count."""
    from zeroadvisor.memory.cluster import check_memory
    from zeroadvisor.units import parse_size

    if value is None:
        return None
    if not isinstance(value, str):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{label}: expected a byte count or a size such as '80GiB', got {value!r}")
        nbytes: int | None = value
    else:
        try:
            nbytes = parse_size(value)
        except ValueError as err:
            raise UsageError(f"{label}: {err}") from None
        except ArithmeticError:  # an exponent past what Decimal holds
            nbytes = 10**400
    _memory_rule(check_memory, label, nbytes)  # one bound (memory/cluster.py MAX_MEMORY_BYTES)
    return nbytes


def gpu_memory(label: str, value: object) -> int | None:
    """A GPU's memory: a size (``size``) of at least 1 MiB (memory/cluster.py MIN_GPU_MEMORY)."""
    from zeroadvisor.memory.cluster import check_gpu_memory

    nbytes = size(label, value)
    _memory_rule(check_gpu_memory, label, nbytes)
    return nbytes


def count(label: str, value: object) -> int | None:
    """A whole number of at least 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{label}: expected a whole number of at least 1, got {value!r}")
    return value


def gpus(label: str, value: object) -> int | None:
    """A GPU count: a whole number from 1 to the cluster bound (memory/cluster.py MAX_GPUS)."""
    from zeroadvisor.memory.cluster import check_gpus

    number = count(label, value)
    _memory_rule(check_gpus, label, number)
    return number


def _fraction(value: object) -> Fraction:
    """``10%``, ``0.1`` or a Python number as a Fraction (ValueError if it is none of them)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(value)
    if isinstance(value, str):
        raw = value.strip()
        return Fraction(raw[:-1]) / 100 if raw.endswith("%") else Fraction(raw)
    return Fraction(value)


def _share(label: str, value: object, example: str) -> Fraction:
    """A share given as ``10%`` or ``0.1``, exactly; anything else is a usage error naming ``example``."""
    try:
        return _fraction(value)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise UsageError(f"{label}: expected a share like {example}, got {value!r}") from None


def headroom(label: str, value: object) -> float:
    """``10%`` or ``0.1``: the share of each capacity a "fits" leaves free."""
    from zeroadvisor.memory.cluster import headroom_allowed

    share = _share(label, value, "10% or 0.1")
    if not headroom_allowed(share):
        raise UsageError(f"{label}: must be at least 0% and below 100%, got {value!r}")
    return float(share)


def efficiency(label: str, value: object) -> float:
    """The share of the GPU's dense peak the kernels reach: above 0, at most 1."""
    share = _share(label, value, "0.4 or 40%")
    if not 0 < share <= 1:
        raise UsageError(f"{label}: must be above 0 and at most 1 (100%), got {value!r}")
    return float(share)


def bandwidth(label: str, value: object) -> float:
    """``25``, ``25GB/s`` or ``200Gb/s`` (bits) as GB/s."""
    raw, scale = (value.strip() if isinstance(value, str) else value), 1.0
    if isinstance(raw, str):
        for suffix, factor in (("GB/s", 1.0), ("Gb/s", 1 / 8), ("Gbps", 1 / 8)):
            if raw.endswith(suffix):
                raw, scale = raw[: -len(suffix)].strip(), factor
                break
    try:
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
            raise ValueError(raw)
        speed = float(Fraction(raw)) * scale
    except (ValueError, ZeroDivisionError, OverflowError):
        raise UsageError(f"{label}: expected a bandwidth like 25GB/s or 200Gb/s, got {value!r}") from None
    if not 0 < speed <= 1e6:
        raise UsageError(f"{label}: must be above 0 and at most 1,000,000 GB/s, got {value!r}")
    return speed


def gpu(label: str, name: object, cards: Sequence[GpuSpec] = ()) -> GpuSpec | None:
    """The card (hardware/gpus.py GpuSpec) for a GPU name: one of ``cards`` (those the project configuration
    declares, inputs/project.py) or of the table; None when none is given. An unknown or ambiguous name is a
    usage error listing the cards it could mean."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise UsageError(f"{label}: expected a GPU name such as \"H100-SXM5-80GB\", got {name!r}")
    from zeroadvisor.hardware.gpus import resolve_gpu

    try:
        return resolve_gpu(name, cards)
    except ValueError as err:
        raise UsageError(f"{label}: {err}") from None


def tflops(label: str, value: object) -> float:
    """A compute rate in TFLOPS: a number above 0 and at most 1,000,000."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1e6:
        raise UsageError(f"{label}: expected TFLOPS, a number above 0 and at most 1,000,000, got {value!r}")
    return float(value)


def choice(label: str, value: object, choices: Sequence[str]) -> str:
    if value not in choices:
        raise UsageError(f"{label}: expected one of {', '.join(choices)}, got {value!r}")
    return str(value)


def output_format(label: str, value: object, choices: Sequence[OutputFormat]) -> OutputFormat:
    """One of ``choices`` (a command's formats), as the member the commands and renderers take."""
    from zeroadvisor.report.formats import OutputFormat

    return OutputFormat(choice(label, value, choices))


def _fail_on(label: str, value: object) -> FailOn:
    from zeroadvisor.inputs.settings import FAIL_ON, FailOn

    return FailOn(choice(label, value, FAIL_ON))


def _integration(label: str, value: object) -> Integration:
    from zeroadvisor.lint.context import INTEGRATIONS, Integration

    return Integration(choice(label, value, INTEGRATIONS))


def deepspeed_version(label: str, value: object) -> str:
    """A DeepSpeed release, release line or PEP 440 range zeroadvisor has knowledge of (inputs/release.py)."""
    from zeroadvisor.inputs.release import parse_request

    if not isinstance(value, str):
        raise UsageError(f"{label}: give a DeepSpeed version as text, e.g. 0.14.5, 0.14 or >=0.10,<0.17")
    parse_request(value, label)  # refused here, once, with the words it was given by
    return value


def transformers_version(label: str, value: object) -> str:
    """A transformers release, release line or PEP 440 range (model/transformers_release.py)."""
    from zeroadvisor.model.transformers_release import ReleaseError, resolve

    if not isinstance(value, str):
        raise UsageError(f"{label}: give a transformers release as text, e.g. 4.41.2, 4.41 or >=4.41,<4.46")
    try:
        resolve(value)
    except ReleaseError as err:
        raise UsageError(f"{label} {err}") from None
    return value


def trainer(label: str, value: object) -> TrainerChoice:
    """The training method (--trainer, trainer=, the project configuration's trainer): one of vocab.TrainerChoice."""
    from zeroadvisor.vocab import TrainerChoice

    return TrainerChoice(choice(label, value, tuple(TrainerChoice)))


def _launcher(label: str, value: object) -> str:
    from zeroadvisor.hardware.machine import LAUNCHERS

    return choice(label, value, LAUNCHERS)


# The run-wide values each parsed by one parser, whoever gives them (a flag, a keyword, the project
# configuration). The model, the training shape and the rules have their own (inputs/model.py, rules.py).
PARSERS: dict[str, Callable[[str, object], object]] = {
    "gpus": gpus, "gpus_per_node": gpus, "gpu": gpu, "gpu_memory": gpu_memory, "cpu_memory": size, "nvme": size,
    "headroom": headroom, "fail_on": _fail_on, "integration": _integration,
    "inter_node_bandwidth": bandwidth, "nvme_bandwidth": bandwidth, "efficiency": efficiency, "cpu_cores": count,
    "launcher": _launcher, "deepspeed_version": deepspeed_version, "trainer": trainer,
    "transformers_version": transformers_version,
}


def parse(name: str, label: str, value: object) -> object:
    """``value`` of the input ``name`` as the run uses it (unchanged for inputs without a parser)."""
    reader = PARSERS.get(name)
    return value if reader is None or value is None else reader(label, value)

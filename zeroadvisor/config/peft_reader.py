"""LoRA/QLoRA as a trainer's own files say it: LLaMA-Factory's training YAML and ms-swift's command line.

What the file says becomes the PEFT inputs (inputs/model.py PEFT_INPUTS: ``peft``, ``lora_r``,
``lora_target_modules``, ``lora_dropout``, ``quantization``) where no flag gives any of them; each value keeps where
it came from, the trainer's default included, for the note that says what was read.

* LLaMA-Factory (src/llamafactory/hparams/finetuning_args.py, model_args.py @ v0.9.3): ``finetuning_type``
  ("lora" by default; "freeze", "oft" and "full" are not LoRA), ``lora_rank`` (default 8), ``lora_target``
  (default "all": every linear layer but the output head, peft's all-linear; else comma-separated names),
  ``lora_dropout`` (default 0.0), ``quantization_bit`` (4 or 8: the base quantized by bitsandbytes, QLoRA).
* ms-swift (swift/llm/argument/tuner_args.py TunerArguments, quant_args.py @ 3.x): ``--train_type`` (``--tuner_type``
  in later releases; "lora" by default), ``--lora_rank`` (default 8), ``--target_modules`` (default all-linear;
  several names after one flag), ``--lora_dropout`` (default 0.05), ``--quant_bits`` (4 or 8: QLoRA).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zeroadvisor.config.trainer_errors import TrainerInputError, shown
from zeroadvisor.jsontypes import JSONValue

ALL_LINEAR = "all-linear"  # model/peft.py ALL_LINEAR (peft's shorthand), spelled here to keep config/ below model/


@dataclass(frozen=True, slots=True)
class PeftReading:
    """The LoRA setup a trainer's file says: the PEFT inputs' values and where each came from."""

    method: str  # "lora" | "qlora"
    r: int
    target_modules: str | tuple[str, ...]  # ALL_LINEAR or module names
    dropout: float
    quantization: str | None  # "4bit" | "8bit" with qlora
    origin: tuple[tuple[str, str], ...]  # (input, where it was said or which default applies)
    defaults_of: str = "the trainer's default "  # how a default's origin starts ("ms-swift's default ")

    def inputs(self) -> dict[str, object]:
        """The PEFT inputs (inputs/model.py PEFT_INPUTS) this reading gives."""
        targets = self.target_modules if isinstance(self.target_modules, str) else list(self.target_modules)
        return {"peft": self.method, "lora_r": self.r, "lora_target_modules": targets, "lora_dropout": self.dropout,
                "quantization": self.quantization}

    def words(self) -> str:
        """The setup and where each value came from: the keys the files give, then the trainer's defaults."""
        targets = self.target_modules if isinstance(self.target_modules, str) else ", ".join(self.target_modules)
        quant = f" ({self.quantization} base)" if self.quantization else ""
        prefix = self.defaults_of
        given = [f"{name} from {where}" for name, where in self.origin if not where.startswith(prefix)]
        defaults = [where.removeprefix(prefix) for _, where in self.origin if where.startswith(prefix)]
        said = "; ".join([*given, *([f"{prefix.rstrip()}s: {', '.join(defaults)}"] if defaults else [])])
        return (f"{'QLoRA' if self.method == 'qlora' else 'LoRA'} r={self.r} on {targets}{quant}, lora_dropout "
                f"{self.dropout:g} ({said})")


# project -> (the tuner key(s), in the order read; its default; the tuners that are LoRA)
_TUNER_KEYS = {"llama-factory": (("finetuning_type",), "lora"), "ms-swift": (("tuner_type", "train_type"), "lora")}
_LORA_TUNERS = frozenset({"lora", "qlora"})
# project -> input -> (its key, its default as the trainer's release sets it)
_FIELDS: dict[str, dict[str, tuple[str, object]]] = {
    "llama-factory": {"r": ("lora_rank", 8), "targets": ("lora_target", "all"), "dropout": ("lora_dropout", 0.0),
                      "bits": ("quantization_bit", None)},
    "ms-swift": {"r": ("lora_rank", 8), "targets": ("target_modules", ALL_LINEAR),
                 "dropout": ("lora_dropout", 0.05), "bits": ("quant_bits", None)},
}
_DEFAULT_NAMES = {"llama-factory": "LLaMA-Factory's default ", "ms-swift": "ms-swift's default "}
# keys a launch command must read for this module (config/launch.py)
LAUNCH_KEYS = frozenset({"lora_rank", "target_modules", "lora_dropout", "quant_bits"})
LIST_KEYS = frozenset({"target_modules"})  # nargs="+": several words after one flag


def read_peft(data: Mapping[str, JSONValue], project: str, where: Callable[[str], str]) -> PeftReading | None:
    """The LoRA setup ``data`` (keys as ``project`` spells them) says; None where the file trains in full or its
    project is not one whose files say LoRA (``where(key)`` names where a key was given)."""
    if project not in _TUNER_KEYS:
        return None
    keys, default = _TUNER_KEYS[project]
    key = next((k for k in keys if data.get(k) is not None), None)
    tuner = default if key is None else str(data[key]).strip().lower()
    if tuner not in _LORA_TUNERS:
        return None
    fields = _FIELDS[project]
    origin: list[tuple[str, str]] = [("peft", where(key) if key else f"{_DEFAULT_NAMES[project]}{keys[-1]} {default}")]

    def value(name: str) -> tuple[object, str | None]:
        field_key, field_default = fields[name]
        if data.get(field_key) is None:
            return field_default, None
        return data[field_key], where(field_key)

    r, r_from = value("r")
    rank = _int(r, r_from or fields["r"][0])
    targets_value, targets_from = value("targets")
    targets = _targets(targets_value, targets_from or fields["targets"][0])
    dropout_value, dropout_from = value("dropout")
    dropout = _probability(dropout_value, dropout_from or fields["dropout"][0])
    bits_value, bits_from = value("bits")
    quantization = None if bits_value is None else _bits(bits_value, bits_from or fields["bits"][0])
    for name, said, (field_key, field_default) in (("lora_r", r_from, fields["r"]),
                                                   ("lora_target_modules", targets_from, fields["targets"]),
                                                   ("lora_dropout", dropout_from, fields["dropout"])):
        origin.append((name, said or f"{_DEFAULT_NAMES[project]}{field_key} {field_default}"))
    if bits_from:
        origin.append(("quantization", bits_from))
    method = "qlora" if quantization or tuner == "qlora" else "lora"
    return PeftReading(method, rank, targets, dropout, quantization, tuple(origin), _DEFAULT_NAMES[project])


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TrainerInputError(f"{where}: expected a LoRA rank (an integer > 0), got {shown(value)}")
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 6 or int(text) < 1:
        raise TrainerInputError(f"{where}: expected a LoRA rank (an integer > 0), got {shown(value)}")
    return int(text)


def probability(value: object) -> float | None:
    """``value`` as a dropout probability 0 <= p < 1 (nn.Dropout's p; a number or its text), None where it is not
    one (NaN, 1, a bool, ...): the one reading of lora_dropout, whether a file or a flag gives it."""
    try:
        p = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    except ValueError:
        return None
    return p if p is not None and 0.0 <= p < 1.0 else None


def _probability(value: object, where: str) -> float:
    p = probability(value)
    if p is None:
        raise TrainerInputError(f"{where}: expected a dropout probability 0 <= p < 1, got {shown(value)}")
    return p


def _bits(value: object, where: str) -> str:
    text = str(value).strip() if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if text not in ("4", "8"):
        raise TrainerInputError(f"{where}: expected 4 or 8 (bitsandbytes quantization), got {shown(value)}")
    return f"{text}bit"


def _targets(value: object, where: str) -> str | tuple[str, ...]:
    """LLaMA-Factory's comma-separated ``lora_target`` ("all": all-linear), ms-swift's names (a list, or one word);
    all-linear among other names counts as all-linear (the others, e.g. ms-swift's all-embedding, are not modelled)."""
    words = value if isinstance(value, list) else [value]
    if not words or not all(isinstance(word, str) for word in words):
        raise TrainerInputError(f"{where}: expected module names, got {shown(value)}")
    # commas (LLaMA-Factory) or spaces (several words after ms-swift's flag): module names hold neither
    names = [name for word in words for name in str(word).replace(",", " ").split()]
    if not names:
        raise TrainerInputError(f"{where}: expected module names, got {shown(value)}")
    if ALL_LINEAR in names or "all" in names:  # with other names (ms-swift's all-embedding...): all-linear counted
        return ALL_LINEAR
    return tuple(names)

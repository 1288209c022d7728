"""LoRA/QLoRA as a trainer's own files say it: LLaMA-Factory's training YAML and ms-swift's command line.

What the file says becomes the PEFT inputs (inputs/model.py PEFT_INPUTS: ``peft``, ``lora_r``,
``lora_target_modules``, ``lora_modules_to_save``, ``lora_dropout``, ``quantization``) where no flag gives any of
them; each value keeps where it came from, the trainer's default included, for the note that says what was read.

* LLaMA-Factory (src/llamafactory/hparams/finetuning_args.py, model_args.py @ v0.9.3): ``finetuning_type``
  ("lora" by default; "freeze", "oft" and "full" are not LoRA), ``lora_rank`` (default 8), ``lora_target``
  (default "all": every linear layer but the output head, peft's all-linear; else comma-separated names),
  ``lora_dropout`` (default 0.0), ``quantization_bit`` (4 or 8: the base quantized by bitsandbytes, QLoRA).
* ms-swift (swift/llm/argument/tuner_args.py TunerArguments, quant_args.py @ 3.x): ``--train_type`` (``--tuner_type``
  in later releases; "lora" by default), ``--lora_rank`` (default 8), ``--target_modules`` (default all-linear;
  several names after one flag), ``--lora_dropout`` (default 0.05), ``--quant_bits`` (4 or 8: QLoRA).
* TRL's ModelConfig (trl/trainer/model_config.py, utils.py get_peft_config @ 0.21-1.9), in its config files and
  script flags: ``use_peft`` (False by default: a full fine-tune), ``lora_r`` (16), ``lora_target_modules`` (None:
  LoraConfig gets none and peft adapts its default modules for the model type, PEFT_DEFAULT; several names after
  one flag), ``lora_dropout`` (0.05), ``load_in_4bit`` / ``load_in_8bit`` (get_quantization_config: the base
  quantized by bitsandbytes).
* axolotl (utils/schemas/peft.py LoraConfig, loaders/adapter.py _build_peft_lora_config, loaders/model.py @ 0.18):
  ``adapter`` (lora or qlora; absent: a full fine-tune), ``lora_r`` (no default: LoraConfig(r=None) fails),
  ``lora_target_linear: true`` (find_all_linear_names: every linear layer but the output head) or
  ``lora_target_modules`` (without either the target list is empty, which peft refuses), ``lora_dropout`` (0.0);
  qlora loads the base in 4 bits (it requires ``load_in_4bit``), lora with ``load_in_8bit`` in 8 bits.
* OpenRLHF's flags (openrlhf/cli/train_*.py; models/actor.py Actor, @ 0.8-0.11; the 0.10+ dotted spellings
  ``--ds.lora.rank`` ... are read as the same keys): ``--lora_rank`` (0, the default, trains in full),
  ``--target_modules`` (several names; "all-linear" by default), ``--lora_dropout`` (0) and ``--load_in_4bit`` (NF4
  with double quantization).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from zeroadvisor.config.trainer_errors import TrainerInputError, as_bool, shown
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.vocab import SavedModules

ALL_LINEAR = "all-linear"  # model/peft.py ALL_LINEAR (peft's shorthand), spelled here to keep config/ below model/
PEFT_DEFAULT = "peft-default"  # model/peft.py PEFT_DEFAULT: LoraConfig given no target_modules


@dataclass(frozen=True, slots=True)
class PeftReading:
    """The LoRA setup a trainer's file says: the PEFT inputs' values and where each came from."""

    method: str  # "lora" | "qlora"
    r: int
    target_modules: str | tuple[str, ...]  # ALL_LINEAR, PEFT_DEFAULT or module names
    dropout: float
    quantization: str | None  # "4bit" | "8bit" with qlora
    origin: tuple[tuple[str, str], ...]  # (input, where it was said or which default applies)
    defaults_of: str = "the trainer's default "  # how a default's origin starts ("ms-swift's default ")
    double_quant: bool | None = None  # bnb_4bit_use_double_quant, with a 4-bit base only
    modules_to_save: tuple[str, ...] = ()  # peft's modules_to_save: trained in full beside the adapters

    def inputs(self) -> dict[str, object]:
        """The PEFT inputs (inputs/model.py PEFT_INPUTS) this reading gives."""
        targets = self.target_modules if isinstance(self.target_modules, str) else list(self.target_modules)
        return {"peft": self.method, "lora_r": self.r, "lora_target_modules": targets,
                "lora_modules_to_save": list(self.modules_to_save) or None, "lora_dropout": self.dropout,
                "quantization": self.quantization, "double_quant": self.double_quant}

    def words(self) -> str:
        """The setup and where each value came from: the keys the files give, then the trainer's defaults."""
        targets = ("peft's default modules for the model type" if self.target_modules == PEFT_DEFAULT else
                   self.target_modules if isinstance(self.target_modules, str) else ", ".join(self.target_modules))
        quant = (f" ({self.quantization}{' double-quant' if self.double_quant else ''} base)" if self.quantization
                 else "")
        prefix = self.defaults_of
        given = [f"{name} from {where}" for name, where in self.origin if not where.startswith(prefix)]
        defaults = [where.removeprefix(prefix) for _, where in self.origin if where.startswith(prefix)]
        said = "; ".join([*given, *([f"{prefix.rstrip()}s: {', '.join(defaults)}"] if defaults else [])])
        saved = f", modules_to_save {', '.join(self.modules_to_save)}" if self.modules_to_save else ""
        return (f"{'QLoRA' if self.method == 'qlora' else 'LoRA'} r={self.r} on {targets}{quant}{saved}, lora_dropout "
                f"{self.dropout:g} ({said})")


# project -> (the tuner key(s), in the order read; its default; the tuners that are LoRA)
_TUNER_KEYS = {"llama-factory": (("finetuning_type",), "lora"), "ms-swift": (("tuner_type", "train_type"), "lora")}
_LORA_TUNERS = frozenset({"lora", "qlora"})
# project -> input -> (its key, its default as the trainer's release sets it)
# "double": bnb_4bit_use_double_quant with a 4-bit base (LLaMA-Factory hparams/model_args.py double_quantization,
# True; ms-swift swift/llm/argument/base_args/quant_args.py bnb_4bit_use_double_quant, True)
_FIELDS: dict[str, dict[str, tuple[str, object]]] = {
    "llama-factory": {"r": ("lora_rank", 8), "targets": ("lora_target", "all"), "dropout": ("lora_dropout", 0.0),
                      "bits": ("quantization_bit", None), "double": ("double_quantization", True)},
    "ms-swift": {"r": ("lora_rank", 8), "targets": ("target_modules", ALL_LINEAR),
                 "dropout": ("lora_dropout", 0.05), "bits": ("quant_bits", None),
                 "double": ("bnb_4bit_use_double_quant", True)},
}
_DEFAULT_NAMES = {"llama-factory": "LLaMA-Factory's default ", "ms-swift": "ms-swift's default "}
# project -> the key naming peft's modules_to_save (absent: none; trained in full beside the adapters):
# LLaMA-Factory hparams/finetuning_args.py additional_target (comma-separated; model/adapter.py passes it as
# LoraConfig(modules_to_save=...)); ms-swift tuner_args.py modules_to_save (a list, [] by default); TRL
# ModelConfig.lora_modules_to_save (utils.py get_peft_config); axolotl lora_modules_to_save
# (loaders/adapter.py _build_peft_lora_config). OpenRLHF's Actor has no such flag.
_SAVED_KEYS = {"llama-factory": "additional_target", "ms-swift": "modules_to_save",
               "transformers": "lora_modules_to_save", "axolotl": "lora_modules_to_save"}
# keys a launch command must read for this module (config/launch.py): ms-swift's, and a TRL script's ModelConfig
LAUNCH_KEYS = frozenset({"lora_rank", "target_modules", "lora_dropout", "quant_bits", "bnb_4bit_use_double_quant",
                         "modules_to_save"})
SCRIPT_KEYS = frozenset({"lora_r", "lora_target_modules", "lora_dropout", "load_in_4bit", "load_in_8bit",
                         "use_bnb_nested_quant", "target_modules", "lora_modules_to_save"})
# nargs="?" bool flags (HfArgumentParser)
SCRIPT_BOOLS = frozenset({"load_in_4bit", "load_in_8bit", "use_bnb_nested_quant", "bnb_4bit_use_double_quant"})
# nargs="+": several words after one flag
LIST_KEYS = frozenset({"target_modules", "lora_target_modules", "modules_to_save", "lora_modules_to_save"})
_TRL_DEFAULTS = "TRL's default "
_AXOLOTL = "axolotl's default "
_OPENRLHF = "OpenRLHF's default "


# LLaMA-Factory's resize_vocab with LoRA and no additional_target: model/adapter.py init_adapter sets additional_target
# to the names of model.get_input_embeddings() and get_output_embeddings() (@ ff6d4d1); model/patcher.py
# patch_tokenizer turns resize_vocab on when add_tokens or add_special_tokens add a token the tokenizer lacks.
_RESIZE_KEYS = ("resize_vocab", "add_tokens", "add_special_tokens", "new_special_tokens_config")
RESIZED_VOCAB_SAVED: tuple[str, ...] = (SavedModules.INPUT_EMBEDDINGS, SavedModules.OUTPUT_EMBEDDINGS)


def read_peft(data: Mapping[str, JSONValue], project: str, where: Callable[[str], str]) -> PeftReading | None:
    """The LoRA setup ``data`` (keys as ``project`` spells them) says; None where the file trains in full or its
    project is not one whose files say LoRA (``where(key)`` names where a key was given)."""
    reader = _OWN_READERS.get(project)
    reading = reader(data, where) if reader is not None else _tuner(data, project, where)
    if reading is None or project not in _SAVED_KEYS:
        return reading
    if data.get(_SAVED_KEYS[project]) in (None, "", []):
        return _resized_vocab(reading, data, where) if project == "llama-factory" else reading
    key = _SAVED_KEYS[project]
    saved = _module_names(data[key], where(key))
    return replace(reading, modules_to_save=saved, origin=(*reading.origin, ("lora_modules_to_save", where(key))))


def _resized_vocab(reading: PeftReading, data: Mapping[str, JSONValue], where: Callable[[str], str]) -> PeftReading:
    """LLaMA-Factory LoRA without additional_target: the input and output embeddings trained in full where the
    vocabulary is resized (_RESIZE_KEYS): resize_vocab true, or tokens to add (taken as new to the tokenizer)."""
    resize = data.get("resize_vocab") is not None and as_bool(data["resize_vocab"], where("resize_vocab"))
    key = "resize_vocab" if resize else next((k for k in _RESIZE_KEYS[1:] if data.get(k) not in (None, "", [])), None)
    if key is None:
        return reading
    said = where(key) if key == "resize_vocab" else (
        f"{where(key)} (LLaMA-Factory resizes the vocabulary for tokens new to the tokenizer: taken as new)")
    return replace(reading, modules_to_save=RESIZED_VOCAB_SAVED,
                   origin=(*reading.origin, ("lora_modules_to_save", said)))


def _tuner(data: Mapping[str, JSONValue], project: str, where: Callable[[str], str]) -> PeftReading | None:
    """LLaMA-Factory's and ms-swift's tuner keys (finetuning_type, train_type) and their LoRA fields."""
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
    double = None
    if quantization == "4bit":
        double_value, double_from = value("double")
        double = as_bool(data[fields["double"][0]], double_from) if double_from else bool(double_value)
        origin.append(("double_quant", double_from or f"{_DEFAULT_NAMES[project]}{fields['double'][0]} "
                                                      f"{double_value}"))
    method = "qlora" if quantization or tuner == "qlora" else "lora"
    return PeftReading(method, rank, targets, dropout, quantization, tuple(origin), _DEFAULT_NAMES[project], double)


def _trl(data: Mapping[str, JSONValue], where: Callable[[str], str]) -> PeftReading | None:
    """TRL's ModelConfig: get_peft_config gives a LoraConfig only with use_peft."""
    if data.get("use_peft") is None or not as_bool(data["use_peft"], where("use_peft")):
        return None
    origin: list[tuple[str, str]] = [("peft", where("use_peft"))]

    def given(key: str, name: str, default: object) -> tuple[object, str]:
        said = data.get(key) is not None
        origin.append((name, where(key) if said else f"{_TRL_DEFAULTS}{key} {default}"))
        return (data[key] if said else default), where(key)

    r_value, r_from = given("lora_r", "lora_r", 16)
    rank = _int(r_value, r_from)
    targets_value, targets_from = given("lora_target_modules", "lora_target_modules", "None (peft's default)")
    targets = PEFT_DEFAULT if data.get("lora_target_modules") is None else _targets(targets_value, targets_from)
    dropout_value, dropout_from = given("lora_dropout", "lora_dropout", 0.05)
    dropout = _probability(dropout_value, dropout_from)
    four, eight = _flag(data, "load_in_4bit", where), _flag(data, "load_in_8bit", where)
    if four and eight:  # ModelConfig.__post_init__
        raise TrainerInputError(f"{where('load_in_4bit')} and {where('load_in_8bit')}: TRL refuses 8 bit and 4 bit "
                                "precision at the same time")
    quantization = "4bit" if four else "8bit" if eight else None
    double = None
    if quantization:
        origin.append(("quantization", where("load_in_4bit" if four else "load_in_8bit")))
    if four:  # get_quantization_config: bnb_4bit_use_double_quant=use_bnb_nested_quant (False by default)
        said = data.get("use_bnb_nested_quant") is not None
        double = _flag(data, "use_bnb_nested_quant", where)
        origin.append(("double_quant", where("use_bnb_nested_quant") if said else
                       f"{_TRL_DEFAULTS}use_bnb_nested_quant False"))
    return PeftReading("qlora" if quantization else "lora", rank, targets, dropout, quantization, tuple(origin),
                       _TRL_DEFAULTS, double)


def _axolotl(data: Mapping[str, JSONValue], where: Callable[[str], str]) -> PeftReading | None:
    """axolotl's adapter: lora or qlora (another adapter, or none, is not LoRA)."""
    adapter = data.get("adapter")
    if not isinstance(adapter, str) or adapter.strip().lower() not in _LORA_TUNERS:
        return None
    kind = adapter.strip().lower()
    origin: list[tuple[str, str]] = [("peft", where("adapter"))]
    if data.get("lora_r") is None:  # LoraConfig(r=cfg.lora_r): None is refused by peft
        raise TrainerInputError(f"{where('adapter')}: adapter {kind} needs lora_r (axolotl passes it to peft's "
                                "LoraConfig, which has no rank without it)")
    rank = _int(data["lora_r"], where("lora_r"))
    origin.append(("lora_r", where("lora_r")))
    linear = _flag(data, "lora_target_linear", where)
    if linear:  # find_all_linear_names (with any names given: the union, all-linear counted)
        targets: str | tuple[str, ...] = ALL_LINEAR
        origin.append(("lora_target_modules", where("lora_target_linear")))
    elif data.get("lora_target_modules") is not None:
        targets = _targets(data["lora_target_modules"], where("lora_target_modules"))
        origin.append(("lora_target_modules", where("lora_target_modules")))
    else:
        raise TrainerInputError(f"{where('adapter')}: adapter {kind} needs lora_target_modules or lora_target_linear: "
                                "true (axolotl gives peft an empty target list, which it refuses)")
    said = data.get("lora_dropout") is not None
    dropout = _probability(data["lora_dropout"], where("lora_dropout")) if said else 0.0
    origin.append(("lora_dropout", where("lora_dropout") if said else f"{_AXOLOTL}lora_dropout 0.0"))
    four, eight = _flag(data, "load_in_4bit", where), _flag(data, "load_in_8bit", where)
    if kind == "qlora" and not four:  # schemas/peft.py validate_qlora
        raise TrainerInputError(f"{where('adapter')}: adapter qlora needs load_in_4bit: true (axolotl refuses it "
                                "without)")
    # loaders/model.py: qlora with load_in_4bit -> 4-bit with bnb_4bit_use_double_quant True (bnb_config_kwargs
    # may change it), lora with load_in_8bit -> 8-bit, else not quantized
    quantization = "4bit" if kind == "qlora" else "8bit" if eight else None
    if quantization:
        origin.append(("quantization", where("load_in_4bit" if kind == "qlora" else "load_in_8bit")))
    double = None
    if kind == "qlora":
        kwargs = data.get("bnb_config_kwargs")
        written = kwargs.get("bnb_4bit_use_double_quant") if isinstance(kwargs, dict) else None
        said = written is not None
        double = as_bool(written, where("bnb_config_kwargs")) if written is not None else True
        origin.append(("double_quant", where("bnb_config_kwargs") if said else
                       f"{_AXOLOTL}bnb_4bit_use_double_quant True"))
    return PeftReading("qlora" if quantization else "lora", rank, targets, dropout, quantization, tuple(origin),
                       _AXOLOTL, double)


def _openrlhf(data: Mapping[str, JSONValue], where: Callable[[str], str]) -> PeftReading | None:
    """OpenRLHF's Actor: a LoraConfig where --lora_rank > 0 (0, the default, trains in full)."""
    written = data.get("lora_rank")
    if written is None or str(written).strip() == "0":
        return None
    rank = _int(written, where("lora_rank"))
    origin: list[tuple[str, str]] = [("peft", where("lora_rank")), ("lora_r", where("lora_rank"))]
    if data.get("target_modules") is not None:
        targets = _targets(data["target_modules"], where("target_modules"))
        origin.append(("lora_target_modules", where("target_modules")))
    else:
        targets = ALL_LINEAR
        origin.append(("lora_target_modules", f"{_OPENRLHF}--target_modules all-linear"))
    said = data.get("lora_dropout") is not None
    dropout = _probability(data["lora_dropout"], where("lora_dropout")) if said else 0.0
    origin.append(("lora_dropout", where("lora_dropout") if said else f"{_OPENRLHF}--lora_dropout 0"))
    four = _flag(data, "load_in_4bit", where)
    if four:  # models/actor.py: BitsAndBytesConfig(nf4, bnb_4bit_use_double_quant=True)
        origin.append(("quantization", where("load_in_4bit")))
    return PeftReading("qlora" if four else "lora", rank, targets, dropout, "4bit" if four else None, tuple(origin),
                       _OPENRLHF, True if four else None)


# projects whose LoRA keys have readers of their own ("transformers": a TRL config file or script flags, ModelConfig)
_OWN_READERS: dict[str, Callable[[Mapping[str, JSONValue], Callable[[str], str]], PeftReading | None]] = {
    "transformers": _trl, "axolotl": _axolotl, "openrlhf": _openrlhf}


def _flag(data: Mapping[str, JSONValue], key: str, where: Callable[[str], str]) -> bool:
    """A bool key as HfArgumentParser reads it (as_bool), False where absent or null."""
    return data.get(key) is not None and as_bool(data[key], where(key))


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
    all-linear among other names counts as all-linear, beside ms-swift's all-embedding (LoRA on every embedding,
    model/peft.py), which is kept."""
    names = _module_names(value, where)
    if ALL_LINEAR in names or "all" in names:  # with other names: all-linear counted, and all-embedding
        return (ALL_LINEAR, SavedModules.ALL_EMBEDDING) if SavedModules.ALL_EMBEDDING in names else ALL_LINEAR
    return names


def _module_names(value: object, where: str) -> tuple[str, ...]:
    """Module names as the trainers write them: a list, one word, or comma-separated (LLaMA-Factory)."""
    words = value if isinstance(value, list) else [value]
    if not words or not all(isinstance(word, str) for word in words):
        raise TrainerInputError(f"{where}: expected module names, got {shown(value)}")
    # commas (LLaMA-Factory) or spaces (several words after ms-swift's flag): module names hold neither
    names = [name for word in words for name in str(word).replace(",", " ").split()]
    if not names:
        raise TrainerInputError(f"{where}: expected module names, got {shown(value)}")
    return tuple(names)

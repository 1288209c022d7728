"""The settings a trainer's own code refuses to run under DeepSpeed, at some ZeRO stages or at all of them: read
from its file or command (a LLaMA-Factory or axolotl YAML, an ms-swift command line) as config/method.py Refusal,
one per setting found, and applied per option by memory/method.py trainer_refusal at the trainer's pinned release.
TRL's one such check (precompute_ref_log_probs under ZeRO-3) depends on the method's own settings, not a file's
keys: memory/method.py TRL_PRECOMPUTE_ZERO3.

Each row is the check as the trainer's code makes it, with the words it raises and the releases that make it
(``since``: the first that does; ``before``: the first that no longer does). Read at every release tag of each:
LLaMA-Factory v0.7.1 to v0.9.5 (src/llamafactory/hparams/parser.py get_train_args), axolotl v0.5.0 to v0.18.0
(src/axolotl/utils/config/models/input/v0_4_1/__init__.py, then utils/schemas/config.py and validation.py),
ms-swift v3.0.0 to v4.5.2 (its launch flags, as config/launch.py reads them), OpenRLHF v0.6.0 to v0.11.0 (its
launch flags).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zeroadvisor.config.method import Refusal
from zeroadvisor.config.trainer_errors import TRUE_WORDS
from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.vocab import TRAINER_NAMES, TrainerFamily

__all__ = ["REFUSALS", "read_keys", "read_refusals"]

EVERY_STAGE = frozenset({0, 1, 2, 3})
ZERO3 = frozenset({3})
BELOW_ZERO3 = frozenset({0, 1, 2})


def _true(value: JSONValue) -> bool:
    """Set true as HfArgumentParser (string_to_bool) and pydantic's lax bool read it."""
    return value is True or (isinstance(value, str) and value.strip().lower() in TRUE_WORDS)


def _text(value: JSONValue) -> str:
    return value.strip().lower() if isinstance(value, str) else ""


@dataclass(frozen=True, slots=True)
class _Check:
    """One of the trainer's checks: ``matches`` reads the file; ``words`` names what it raises and where."""

    matches: Callable[[Mapping[str, JSONValue]], bool]
    keys: tuple[str, ...]  # the settings ``matches`` reads (a launch command's reader keeps them)
    setting: str  # the setting as the user wrote it, for the message ("use_unsloth: true"); {optimizer}: its value
    words: str
    where: str
    stages: frozenset[int]
    since: str | None = None
    before: str | None = None
    offload_optimizer_runs: bool = False  # Refusal.offload_optimizer_runs
    deepspeed_through: str | None = None  # Refusal.deepspeed_through


_LF_PARSER = "hparams/parser.py get_train_args"
_AX_VALIDATION = "utils/schemas/validation.py"
_OPENRLHF_SLEEP = "openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states"

REFUSALS: dict[TrainerFamily, tuple[_Check, ...]] = {
    TrainerFamily.LLAMA_FACTORY: (
        # under ZeRO-3 (is_deepspeed_zero3_enabled) @ v0.8.0 to v0.9.5; use_kt from v0.9.4
        _Check(lambda d: _true(d.get("predict_with_generate")), ("predict_with_generate",),
               "predict_with_generate: true", "`predict_with_generate` is incompatible with DeepSpeed ZeRO-3.",
               _LF_PARSER, ZERO3),
        _Check(lambda d: _true(d.get("pissa_init")), ("pissa_init",), "pissa_init: true",
               "Please use scripts/pissa_init.py to initialize PiSSA in DeepSpeed ZeRO-3.", _LF_PARSER, ZERO3),
        _Check(lambda d: _true(d.get("pure_bf16")), ("pure_bf16",), "pure_bf16: true",
               "`pure_bf16` is incompatible with DeepSpeed ZeRO-3.", _LF_PARSER, ZERO3),
        _Check(lambda d: _true(d.get("use_unsloth")), ("use_unsloth",), "use_unsloth: true",
               "Unsloth is incompatible with DeepSpeed ZeRO-3.", _LF_PARSER, ZERO3),
        _Check(lambda d: _true(d.get("use_kt")), ("use_kt",), "use_kt: true",
               "KTransformers is incompatible with DeepSpeed ZeRO-3.", _LF_PARSER, ZERO3, since="0.9.4"),
        # with any DeepSpeed config (``training_args.deepspeed is not None``): GaLore at every release read,
        # APOLLO from v0.9.2 (the words are v0.9.2's; "GaLore is incompatible with DeepSpeed yet." before)
        _Check(lambda d: _true(d.get("use_galore")), ("use_galore",), "use_galore: true",
               "GaLore and APOLLO are incompatible with DeepSpeed yet.", _LF_PARSER, EVERY_STAGE),
        _Check(lambda d: _true(d.get("use_apollo")), ("use_apollo",), "use_apollo: true",
               "GaLore and APOLLO are incompatible with DeepSpeed yet.", _LF_PARSER, EVERY_STAGE, since="0.9.2"),
        # BAdam: refused with DeepSpeed up to v0.8.2 ("GaLore and BAdam are incompatible with DeepSpeed yet."); from
        # v0.8.3, in distributed training (every DeepSpeed run), the ratio mode is refused and the layer-wise mode
        # (FinetuningArguments.badam_mode's default "layer") runs under ZeRO-3 only
        _Check(lambda d: _true(d.get("use_badam")), ("use_badam",), "use_badam: true",
               "GaLore and BAdam are incompatible with DeepSpeed yet.", _LF_PARSER, EVERY_STAGE, before="0.8.3"),
        _Check(lambda d: _true(d.get("use_badam")) and _text(d.get("badam_mode")) == "ratio",
               ("use_badam", "badam_mode"), "use_badam: true with badam_mode: ratio",
               "Radio-based BAdam does not yet support distributed training, use layer-wise BAdam.", _LF_PARSER,
               EVERY_STAGE, since="0.8.3"),
        _Check(lambda d: _true(d.get("use_badam")) and _text(d.get("badam_mode")) in ("", "layer"),
               ("use_badam", "badam_mode"), "use_badam: true (layer-wise)",
               "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training.", _LF_PARSER, BELOW_ZERO3, since="0.8.3"),
    ),
    TrainerFamily.AXOLOTL: (
        # the config's validators raise with ``deepspeed`` set, whatever its stage
        _Check(lambda d: _text(d.get("optimizer")) == "muon", ("optimizer",), "optimizer: muon",
               "Muon optimizer is currently incompatible with DeepSpeed",
               f"{_AX_VALIDATION} check_muon_deepspeed_fsdp", EVERY_STAGE, since="0.8.0"),
        _Check(lambda d: _text(d.get("optimizer")).startswith("flash_"), ("optimizer",), "optimizer: {optimizer}",
               "{optimizer} optimizer is incompatible with DeepSpeed. Flash optimizers only support DDP and FSDP2.",
               f"{_AX_VALIDATION} check_flashoptim_deepspeed_fsdp", EVERY_STAGE, since="0.16.0"),
        _Check(lambda d: _text(d.get("optimizer")) == "q_galore_adamw8bit", ("optimizer",),
               "optimizer: q_galore_adamw8bit", "q_galore_adamw8bit is not yet validated with DeepSpeed.",
               f"{_AX_VALIDATION} check_qgalore", EVERY_STAGE, since="0.17.0"),
        # ReLoRA: ``relora: true`` from v0.12.0, ``relora_steps: N`` before
        _Check(lambda d: _true(d.get("relora")), ("relora",), "relora: true", "deepspeed not supported with ReLoRA",
               f"{_AX_VALIDATION} check_relora", EVERY_STAGE, since="0.12.0"),
        _Check(lambda d: bool(d.get("relora_steps")), ("relora_steps",), "relora_steps",
               "deepspeed not supported with ReLoRA", "utils/config check_relora", EVERY_STAGE, before="0.12.0"),
        _Check(lambda d: bool(d.get("fsdp")), ("fsdp",), "fsdp", "deepspeed and fsdp cannot be used together.",
               f"{_AX_VALIDATION} check_fsdp_deepspeed", EVERY_STAGE),
    ),
    TrainerFamily.MS_SWIFT: (
        # swift/arguments/sft_args.py _init_fsdp @ v4.5.2 (swift/llm/argument/train_args.py @ v3.12.0): ``--fsdp``
        # with ``--deepspeed``, whatever the stage
        _Check(lambda d: bool(d.get("fsdp")), ("fsdp",), "--fsdp", "FSDP2 is not compatible with DeepSpeed.",
               "swift/arguments/sft_args.py _init_fsdp", EVERY_STAGE, since="3.12.0"),
        # swift/tuners/base.py grpo_context (the vLLM weight sync) @ v3.2.0 to v4.5.2: a LLaMA-Pro model under
        # ZeRO-3 in GRPO
        _Check(lambda d: _text(d.get("rlhf_type")) == "grpo"
               and _text(d.get("tuner_type") or d.get("train_type")) == "llamapro",
               ("rlhf_type", "tuner_type", "train_type"), "--train_type llamapro with --rlhf_type grpo",
               "DeepSpeed ZeRO3 not supported for LLaMAPro&GRPO currently.", "swift/tuners/base.py grpo_context",
               ZERO3, since="3.2.0"),
    ),
    TrainerFamily.OPENRLHF: (
        # openrlhf/utils/deepspeed/deepspeed_utils.py offload_deepspeed_states, called at the actor's setup with
        # --deepspeed_enable_sleep (trainer/ray/ppo_actor.py "initial offload"): it returns at once with Adam
        # offloaded (``offload_optimizer.device == "cpu"``, --adam_offload), else raises below ZeRO-3; from
        # v0.8.10 only with DeepSpeed 0.17.5 or lower (``version.parse(deepspeed.__version__) <= "0.17.5"``).
        # Read at every tag from v0.6.0 to v0.11.0 (the check arrives in v0.6.0.post1).
        _Check(lambda d: _true(d.get("deepspeed_enable_sleep")), ("deepspeed_enable_sleep",),
               "--deepspeed_enable_sleep without --adam_offload", "Only Zero stage 3 is currently supported",
               _OPENRLHF_SLEEP, BELOW_ZERO3, since="0.6.0.post1", before="0.8.10", offload_optimizer_runs=True),
        _Check(lambda d: _true(d.get("deepspeed_enable_sleep")), ("deepspeed_enable_sleep",),
               "--deepspeed_enable_sleep without --adam_offload",
               "Only Zero stage 3 is currently supported when using DeepSpeed version 0.17.5 or lower",
               _OPENRLHF_SLEEP, BELOW_ZERO3, since="0.8.10", offload_optimizer_runs=True, deepspeed_through="0.17.5"),
    ),
}



def read_refusals(data: Mapping[str, JSONValue], family: TrainerFamily) -> tuple[Refusal, ...]:
    """The refusals of ``family``'s checks that the file's settings trigger, each worded with where it is raised."""
    optimizer = str(data.get("optimizer"))[:60]  # the one value a check's words name (axolotl's flash_* optimizers)
    return tuple(Refusal(f"{TRAINER_NAMES[family]} raises \"{check.words}\" for {check.setting} ({check.where})"
                         .replace("{optimizer}", optimizer), check.stages, check.since, check.before,
                         check.offload_optimizer_runs, check.deepspeed_through)
                 for check in REFUSALS.get(family, ()) if check.matches(data))


def read_keys(family: TrainerFamily) -> frozenset[str]:
    """The settings ``family``'s checks read: what a launch command's reader must keep (config/launch.py)."""
    return frozenset(key for check in REFUSALS.get(family, ()) for key in check.keys)

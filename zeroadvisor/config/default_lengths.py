"""The lengths the trainers truncate to where their files leave them out, read where nothing else gives the sequence
(``--seq-len``, the trainer's file or command, the model description).

OpenRLHF (``openrlhf_default``): ``--max_len``'s argparse default (``--data.max_len`` from 0.10), the same at every
tag from v0.6.0 to v0.11.0 (openrlhf/cli/train_*.py; its datasets tokenize with ``max_length=max_len,
truncation=True``): 2048 for train_sft and train_kto, 512 for train_dpo and train_rm; PPO's prompt and generation
1024 + 1024 up to 0.9 (``--prompt_max_len``, ``--generate_max_len``), ``--max_len`` 2048 in all from 0.10.

TRL (``trl_defaults``): each config class's default at the release the user pins (read at the TRL tags):

- DPOConfig, KTOConfig, ORPOConfig, CPOConfig, RewardConfig ``max_length``: 1024 from TRL 0.14.0 (the config
  classes' field default). Before it the field was None, and KTO, ORPO, CPO and the reward trainer fell back to
  512 (``if args.max_length is None: ... max_length = 512``, trl/trainer/{kto,orpo,cpo,reward}_trainer.py
  @ v0.13.0), where DPOTrainer kept None: no truncation, so no length is known;
- SFTConfig ``max_seq_length`` (``max_length`` from 0.16): 1024 from TRL 0.15.0; before it SFTTrainer set
  ``min(tokenizer.model_max_length, 1024)`` (trl/trainer/sft_trainer.py @ v0.14.0), at most 1024;
- GRPOConfig ``max_completion_length`` 256 from 0.14.0 (where GRPO came), 512 from 1.10.0 (the same at 1.16.0),
  and ``max_prompt_length`` 512 until 0.25, None (prompts not truncated: deprecated) from 0.26.0.

The sequence is then the most a row can hold: each trainer's collator pads to the longest row of its batch, so a
run that fits at it fits (the padding finding says what the data decides where it does not).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.vocab import Method

_CONFIG_CLASS = {Method.SFT: "SFTConfig", Method.DPO: "DPOConfig", Method.KTO: "KTOConfig", Method.ORPO: "ORPOConfig",
                 Method.CPO: "CPOConfig", Method.REWARD: "RewardConfig", Method.GRPO: "GRPOConfig",
                 Method.PPO: "PPOConfig", Method.GKD: "GKDConfig"}


def config_class(setup: MethodSetup) -> str | None:
    """The TRL config class whose defaults the method reads (RLOO's lengths are GRPO's, under its own name)."""
    return "RLOOConfig" if setup.rloo else _CONFIG_CLASS.get(setup.method)
# (method, the first release with this default, the default); ascending per method; None: no truncation
_MAX_LENGTH: dict[Method, tuple[tuple[Version, int | None, str], ...]] = {
    Method.DPO: ((Version("0"), None, "max_length None: DPOTrainer truncates nothing"),
                 (Version("0.14.0"), 1024, "max_length")),
    **{method: ((Version("0"), 512, "max_length None, which the trainer sets to 512"),
                (Version("0.14.0"), 1024, "max_length"))
       for method in (Method.KTO, Method.ORPO, Method.CPO, Method.REWARD)},
    Method.SFT: ((Version("0"), 1024, "max_seq_length None: min(tokenizer.model_max_length, 1024)"),
                 (Version("0.15.0"), 1024, "max_seq_length"), (Version("0.16.0"), 1024, "max_length")),
}
_MAX_LENGTH[Method.GKD] = _MAX_LENGTH[Method.SFT]  # GKDConfig is an SFTConfig (trl/experimental/gkd/gkd_config.py)
# GKDConfig.max_new_tokens: what an on-policy (or seq_kd) step generates, 128 at every release read (v0.11.0 to v1.9.0)
GKD_MAX_NEW_TOKENS = 128
_GRPO_COMPLETION: tuple[tuple[Version, int | None], ...] = ((Version("0"), 256), (Version("1.10.0"), 512))
# the origin of a field filled from its class's default (config/method.py MethodSetup.origin), so that it is still
# listed as assumed (memory/method.py)
CLASS_DEFAULT = "the TRL config class's default"
_GRPO_PROMPT: tuple[tuple[Version, int | None], ...] = ((Version("0"), 512), (Version("0.26.0"), None))


# ms-swift's own cap on what GRPO and PPO generate, where no --max_completion_length (--response_length,
# --max_new_tokens) is given: RLHFArguments.max_completion_length 512 (and response_length 512) from 3.2.0
# (swift/llm/argument/rlhf_args.py @ v3.2.0, v3.8.0; swift/arguments/rlhf_args.py @ v4.0.0, v4.5.2); 3.0 and 3.1
# leave PPO TRL's PPOConfig.response_length (memory/generation.py TRL_PPO_RESPONSE) and have no GRPO.
_SWIFT_COMPLETION: tuple[tuple[Version, int | None], ...] = ((Version("0"), None), (Version("3.2.0"), 512))
SWIFT_COMPLETION_SOURCE = "RLHFArguments.max_completion_length (swift/arguments/rlhf_args.py)"


def swift_completion_default(setup: MethodSetup) -> int | None:
    """ms-swift's default completion cap at the release ``setup`` reads (None: the newest), for GRPO and PPO where
    the command gives none; None where that release has none of its own."""
    if setup.method not in (Method.GRPO, Method.PPO) or setup.generation.max_completion_length:
        return None
    return _since(_SWIFT_COMPLETION, setup.release)


_PPO = "the defaults --prompt_max_len 1024 + --generate_max_len 1024 (--max_len 2048 from 0.10)"
_OPENRLHF: dict[Method, tuple[int, str]] = {
    Method.SFT: (2048, "--max_len's default (train_sft)"), Method.DPO: (512, "--max_len's default (train_dpo)"),
    Method.KTO: (2048, "--max_len's default (train_kto)"), Method.REWARD: (512, "--max_len's default (train_rm)"),
    Method.PPO: (2048, _PPO), Method.GRPO: (2048, _PPO)}


def openrlhf_default(setup: MethodSetup) -> tuple[int, str] | None:
    """The sequence an OpenRLHF entry point truncates to where its command sets no length, and the note on it."""
    found = _OPENRLHF.get(setup.method)
    return None if found is None else (found[0], f"sequence length {found[0]} from OpenRLHF's {found[1]}")


@dataclass(frozen=True, slots=True)
class TrlLengths:
    """What a TRL config file leaves to its class's defaults; None: the file says it, or no default bounds it."""

    max_length: int | None = None
    max_prompt_length: int | None = None
    max_completion_length: int | None = None
    note: str = ""  # where the defaults come from, for the notes
    generation_note: str = ""  # GKD: where max_new_tokens comes from, beside the length's note


def _since(table: tuple[tuple[Version, int | None], ...], release: Version | None) -> int | None:
    """The value in force at ``release`` (None: the newest)."""
    return [value for since, value in table if release is None or since <= release][-1]


def _at(table: tuple[tuple[Version, int | None, str], ...], release: Version | None) -> tuple[int | None, str]:
    rows = [row for row in table if release is None or row[0] <= release]
    return rows[-1][1], rows[-1][2]


def trl_defaults(setup: MethodSetup) -> TrlLengths:
    """The lengths the TRL release ``setup`` reads (its pin; else the newest release's) defaults to, for the fields
    the file leaves out. Only for a run the files say TRL runs (axolotl and ms-swift have their own defaults)."""
    release = setup.release
    at = f"TRL {setup.trainer_version}" if release is not None else "TRL not pinned: the newest release's"
    name = config_class(setup)
    if name is None:
        return TrlLengths()
    if setup.method == Method.GRPO:
        gen = setup.generation
        prompt = None if gen.max_prompt_length else _since(_GRPO_PROMPT, release)
        completion = None if gen.max_completion_length else _since(_GRPO_COMPLETION, release)
        said = [f"{key} {value}" for key, value in (("max_prompt_length", prompt),
                                                    ("max_completion_length", completion)) if value]
        return TrlLengths(max_prompt_length=prompt, max_completion_length=completion,
                          note=f"{' and '.join(said)} from {name}'s defaults ({at})" if said else "")
    if setup.method not in _MAX_LENGTH:
        return TrlLengths()
    length, field_said = _at(_MAX_LENGTH[setup.method], release)
    new = GKD_MAX_NEW_TOKENS if setup.method == Method.GKD and not setup.generation.max_completion_length else None
    if length is None:
        return TrlLengths()
    return TrlLengths(max_length=length, max_completion_length=new,
                      note=f"sequence length {length} from {name}'s default {field_said} ({at}; set max_length in the "
                           "TRL config)",
                      generation_note=f"max_new_tokens {new} from {name}'s default ({at})" if new else "")

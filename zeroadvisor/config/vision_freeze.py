"""What a trainer's files freeze of a vision-language model: its vision tower and its projector (the merger).

Both trainers that read a model's layout for it freeze them by default, in full fine-tunes and under LoRA alike:

* LLaMA-Factory (hparams/finetuning_args.py @ v0.9.2-v0.9.5): ``freeze_vision_tower`` (default true) and
  ``freeze_multi_modal_projector`` (default true). model/adapter.py _setup_full_tuning sets ``requires_grad_(False)``
  on the parameters under the model type's vision_model_keys and projector_keys (model/model_utils/visual.py
  get_forbidden_modules; for qwen2_vl and qwen2_5_vl: ``visual.patch_embed``, ``visual.blocks`` and
  ``visual.merger``); under LoRA find_all_linear_modules and patch_target_modules leave the same modules out of the
  targets. (Up to v0.9.1 the projector has no switch: it trains in a full fine-tune and LoRA's "all" leaves it out;
  read as the later releases, a bound of the merger's optimizer states.)
* ms-swift (swift/llm/argument/tuner_args.py @ 3.0-3.12, swift/arguments/tuner_args.py @ 4.x): ``--freeze_vit``
  (default true) and ``--freeze_aligner`` (default true) freeze the model architecture's vision_tower (``visual``)
  and aligner (``visual.merger``) in a full fine-tune; under LoRA, all-linear becomes get_multimodal_target_regex,
  which reaches the tower's and the aligner's Linears only where they are not frozen.

TRL and axolotl freeze nothing of the model on their own. The module names are those of the vision-language models
counted (model/families.py: Qwen2-VL, Qwen2.5-VL, Qwen3-VL and Qwen3-VL-MoE, MODULES below); on a model without a
vision tower the reading changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from zeroadvisor.config.trainer_errors import as_bool
from zeroadvisor.jsontypes import JSONValue

# The tower's modules and the projector's, as each trainer names them (model/frozen.py matches an entry against the
# segments of a module's dotted name): LLaMA-Factory's vision_model_keys and projector_keys
# (model/model_utils/visual.py _register_composite_model @ v0.9.5), ms-swift's vision_tower less its aligner
# (swift/model/model_arch.py @ v4.5.2: qwen3_vl's aligner is the merger and the deepstack mergers). Qwen2-VL and
# Qwen2.5-VL: the same for both.
Parts = tuple[tuple[str, ...], tuple[str, ...]]  # (the tower's modules, the projector's)
QWEN2_VL_PARTS: Parts = (("visual.patch_embed", "visual.blocks"), ("visual.merger",))
_LF_QWEN3_VL: Parts = (("visual.pos_embed", "visual.patch_embed", "visual.blocks", "visual.deepstack_merger_list"),
                      ("visual.merger",))
_SWIFT_QWEN3_VL: Parts = (("visual.pos_embed", "visual.patch_embed", "visual.blocks"),
                          ("visual.merger", "visual.deepstack_merger_list"))
MODULES: dict[tuple[str, str], Parts] = {
    ("llama-factory", "qwen3_vl"): _LF_QWEN3_VL, ("llama-factory", "qwen3_vl_moe"): _LF_QWEN3_VL,
    ("ms-swift", "qwen3_vl"): _SWIFT_QWEN3_VL, ("ms-swift", "qwen3_vl_moe"): _SWIFT_QWEN3_VL,
}
# project -> ((the tower's switch, its default), (the projector's switch, its default))
KEYS: dict[str, tuple[tuple[str, bool], tuple[str, bool]]] = {
    "llama-factory": (("freeze_vision_tower", True), ("freeze_multi_modal_projector", True)),
    "ms-swift": (("freeze_vit", True), ("freeze_aligner", True)),
}
_NAMES = {"llama-factory": "LLaMA-Factory", "ms-swift": "ms-swift"}
# ms-swift's command-line switches (config/launch.py reads them; HfArgumentParser bools take "true"/"false")
LAUNCH_KEYS = frozenset({"freeze_vit", "freeze_aligner"})


@dataclass(frozen=True, slots=True)
class VisionFreeze:
    """The parts of a vision-language model the trainer freezes, and where each was said (or whose default)."""

    tower: bool
    projector: bool
    origin: str
    project: str  # the trainer family's project name (KEYS), which decides the module names (MODULES)

    def entries(self, model_type: str | None) -> tuple[str, ...]:
        """The frozen modules of a ``model_type`` model, as model/frozen.py and LoRA's exclusions take them."""
        tower, projector = MODULES.get((self.project, model_type or ""), QWEN2_VL_PARTS)
        return (tower if self.tower else ()) + (projector if self.projector else ())

    def words(self) -> str:
        parts = [name for name, on in (("vision tower", self.tower), ("projector", self.projector)) if on]
        frozen = " and ".join(parts) if parts else "nothing"
        return f"the trainer freezes the {frozen} of a vision-language model ({self.origin})"


def read_vision_freeze(data: Mapping[str, JSONValue], project: str, where: Callable[[str], str]
                       ) -> VisionFreeze | None:
    """What ``data`` (a ``project`` file's keys) freezes of a vision-language model; None for a trainer that freezes
    nothing on its own."""
    keys = KEYS.get(project)
    if keys is None:
        return None
    values, said = [], []
    for key, default in keys:
        if data.get(key) is None:
            values.append(default)
            said.append(f"{_NAMES[project]}'s default {key} {str(default).lower()}")
        else:
            values.append(as_bool(data[key], where(key)))
            said.append(f"{str(values[-1]).lower()} from {where(key)}")
    return VisionFreeze(values[0], values[1], "; ".join(said), project)

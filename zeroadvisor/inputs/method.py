"""The run's training method (config/method.py MethodSetup), resolved once: ``--trainer`` (the project
configuration's ``trainer``, the API's ``trainer=``) over what the trainer's files and launch command say
(config/method_reader.py), and the trainer's release from the pins (config/trainer_pins.py).

Where nothing says the method, the run is SFT and the setup is MethodSetup() itself: every output of such a run is
what it was before the method was read. Where a file holds a preference trainer's keys but nothing names the
trainer (a TRL YAML read alone), the method is guessed from them and a note says so, with the flag that sets it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.config.method_reader import MethodReading
from zeroadvisor.vocab import Method, ModelRole, TrainerChoice, TrainerFamily

if TYPE_CHECKING:
    from zeroadvisor.model.spec import ModelSpec


def resolve(reading: MethodReading | None, flag: TrainerChoice | None, label: str, ask: str,
            pin_start: str | None) -> tuple[MethodSetup, list[str]]:
    """(the setup, the notes on it). ``flag``: --trainer's method (None: not given), ``label``: how it was given
    (``--trainer``, ``trainer``, the project key); ``ask``: the flag in advice (``--trainer METHOD``);
    ``pin_start``: the file whose folder the pins are looked for from (None: the current folder)."""
    if reading is None and flag is None:
        return MethodSetup(), []
    base = reading or MethodReading()
    setup, notes = base.setup, []
    if flag is not None:
        said = "rloo" if base.setup.rloo else base.setup.method
        if base.said and said != flag:
            notes.append(f"{label} {flag} used; {base.said} says {said}")
        setup = replace(setup, method=flag.method, rloo=flag is TrainerChoice.RLOO,
                        origin=(*(o for o in setup.origin if o[0] != "method"), ("method", label)))
    elif not base.said:
        hints = base.hints
        if not hints:  # plain SFT; the trainer's family where a file says whose it is (its own refusals apply)
            return (MethodSetup(), []) if setup.trainer is None else (_with_release(setup, pin_start), [])
        key, guess = hints[0]
        where = dict(setup.origin)
        shown = ", ".join(where.get(name, name) for name, method in hints[:3] if method is guess)
        notes.append(f"training method {guess} guessed from {shown}: no file names the trainer that reads it; give "
                     f"{ask} to set it")
        setup = replace(setup, method=guess, origin=(*setup.origin, ("method", f"guessed from {key}")))
    setup = _with_release(setup, pin_start)
    if setup.method is not Method.SFT and not any("guessed" in note for note in notes):
        # what was read, said once: a plain SFT run says nothing (its output is what it was)
        notes.append(_read_note(setup, label if flag is not None else base.said))
    notes += base.setup.notes  # what the reader noted (ms-swift's default LoRA, ...), after what was read
    return replace(setup, notes=tuple(notes)), notes


def _read_note(setup: MethodSetup, said: str) -> str:
    """``training method dpo (trl dpo); trl 0.21.0 (trl==0.21.0 at requirements.txt:1)``."""
    family = setup.trainer or TrainerFamily.TRL
    text = f"training method {setup.method} ({said})"
    if setup.rloo:
        text = f"training method rloo, costed as {setup.method}, its sibling in TRL ({said})"
    if setup.trainer is None:
        text += ", costed as TRL runs it"
    if setup.trainer_version is not None:
        text += f"; {family} {setup.trainer_version} ({dict(setup.origin)['trainer_version']})"
    return text


def _with_release(setup: MethodSetup, start: str | None) -> MethodSetup:
    """The trainer's release from the pins (the trainer TRL where no file names it: the estimate assumes TRL's
    behaviour, so TRL's pin is the one that applies)."""
    from zeroadvisor.config.trainer_pins import DISTRIBUTIONS, find_distribution_pin, find_trainer_pin

    family = setup.trainer or TrainerFamily.TRL
    pin = find_trainer_pin(start or os.curdir, family)
    if pin is not None:
        setup = replace(setup, trainer_version=pin.version, origin=(*setup.origin, ("trainer_version", pin.origin)))
    if (setup.trainer, setup.method) in ((TrainerFamily.LLAMA_FACTORY, Method.PPO),
                                         (TrainerFamily.MS_SWIFT, Method.GRPO)):
        # LLaMA-Factory's PPO runs TRL's old PPOTrainer and checks TRL's release (memory/method.py
        # LLAMA_FACTORY_PPO_TRL); ms-swift's GRPO before 4.4 scores with TRL's own method (swift_grpo_scoring)
        trl = find_distribution_pin(start or os.curdir, DISTRIBUTIONS[TrainerFamily.TRL])
        if trl is not None:
            setup = replace(setup, trl_version=trl.version, origin=(*setup.origin, ("trl_version", trl.origin)))
    return setup


def auxiliary_specs(setup: MethodSetup, policy: object, transformers: str | None = None
                    ) -> tuple[tuple[tuple[ModelRole, ModelSpec], ...], list[str]]:
    """The other models the files name that are not the policy (``policy``: --model as given), each read as --model
    reads a name (a path, a model directory, the HF cache, the catalog: offline), as the policy's transformers
    release builds it (``transformers``; None: the modelled one); one the reader cannot find is costed as the
    policy's architecture, said in a note (TrainingShape.auxiliary_specs: a role absent is)."""
    from zeroadvisor.model.description import load_model
    from zeroadvisor.model.errors import ModelError

    named: dict[ModelRole, str] = {}
    if setup.reference_model is not None:
        named[ModelRole.REFERENCE] = setup.reference_model
    if setup.teacher_model is not None:
        named[ModelRole.TEACHER] = setup.teacher_model
    for placement in setup.placements:
        if placement.model is not None and placement.loaded is not False:  # an adapter or a server: no model
            named.setdefault(placement.role, placement.model)
    specs: list[tuple[ModelRole, ModelSpec]] = []
    notes: list[str] = []
    for role, name in named.items():
        if isinstance(policy, (str, os.PathLike)) and os.fspath(policy) == name:
            continue  # the policy's own model: nothing else to read
        try:
            spec, _ = load_model(name, transformers=transformers)
        except (ModelError, OSError) as err:
            reason = " ".join(str(err).split())[:160]
            notes.append(f"{role} model {name[:80]!r} not read ({reason}): costed as the policy's architecture")
            continue
        specs.append((role, spec))
    return tuple(specs), notes

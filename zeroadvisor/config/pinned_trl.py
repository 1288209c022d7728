"""The TRL a trainer's release runs on, where the trainer's preference losses are TRL's own trainers (axolotl's
AxolotlDPOTrainer and kin subclass TRL's): TRL's code at that release decides the loss side's memory
(memory/method.py) and whether Liger's preference loss runs (memory/liger.py). Read from each tag's pins."""

from __future__ import annotations

from typing import TYPE_CHECKING

from packaging.version import Version

from zeroadvisor.vocab import TrainerFamily

if TYPE_CHECKING:
    from zeroadvisor.config.method import MethodSetup

# The TRL each axolotl release pins (requirements.txt to v0.16.0, pyproject.toml from v0.17.0), ascending: its DPO
# trainer is TRL's (AxolotlDPOTrainer), so TRL's code at that release decides the loss side.
AXOLOTL_TRL_PINS = ((Version("0.4.0"), Version("0.7.9")), (Version("0.5.0"), Version("0.12.0")),
                    (Version("0.6.0"), Version("0.12.1")), (Version("0.7.0"), Version("0.15.0")),
                    (Version("0.8.0"), Version("0.16.0")), (Version("0.9.0"), Version("0.17.0")),
                    (Version("0.10.0"), Version("0.18.1")), (Version("0.12.0"), Version("0.21.0")),
                    (Version("0.13.0"), Version("0.25.0")), (Version("0.14.0"), Version("0.27.1")),
                    (Version("0.15.0"), Version("0.29.0")), (Version("0.17.0"), Version("1.5.1")),
                    (Version("0.18.0"), Version("1.8.0")))


def axolotl_trl(release: Version | None) -> Version | None:
    """The TRL the axolotl ``release`` pins (AXOLOTL_TRL_PINS: the row of the newest release at or below it); the
    release unknown, the newest read's; None before 0.4.0 and after the newest release line read (not read)."""
    newest = AXOLOTL_TRL_PINS[-1][0]
    if release is None:
        return AXOLOTL_TRL_PINS[-1][1]
    if release >= Version(f"{newest.major}.{newest.minor + 1}"):
        return None
    pinned = [trl for since, trl in AXOLOTL_TRL_PINS if since <= release]
    return pinned[-1] if pinned else None


def trl_release(setup: MethodSetup) -> Version | None:
    """The TRL release whose trainer code runs the method: the pinned TRL's own, or the one axolotl's release pins
    (its trainers are TRL's); None where unknown or another family's own code runs it."""
    if setup.trainer == TrainerFamily.AXOLOTL:
        return axolotl_trl(setup.release)
    return setup.release if setup.trainer in (None, TrainerFamily.TRL) else None

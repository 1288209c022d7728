"""The step time of each option of an estimate, with the machine facts it assumed added to the estimate's assumed
inputs: what ``estimate`` shows beside the memory (the command always, the API with ``step_times=True``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zeroadvisor.hardware.machine import Hardware
    from zeroadvisor.memory.estimate import Estimate
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime


def step_times(result: Estimate, hardware: Hardware) -> tuple[Estimate, dict[Option, StepTime]]:
    """Step time per option of ``result`` (zeroadvisor.throughput.per_option, on the config the estimate was
    made of), and ``result`` with the machine facts left to their defaults among its assumed inputs where a
    step time was computed (a new Estimate: a built one is never changed)."""
    from dataclasses import replace

    from zeroadvisor.memory.assumed import hardware_assumptions, machine_uses
    from zeroadvisor.throughput import Throughput, per_option

    steps = per_option(result, hardware)
    timed = [option for option, step in steps.items() if isinstance(step, Throughput)]
    if timed:
        uses = machine_uses(timed, result.cluster.nodes)
        result = replace(result, assumed=(*result.assumed, *hardware_assumptions(hardware, uses)))
    return result, steps

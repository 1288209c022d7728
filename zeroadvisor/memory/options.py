"""Which stage/offload combinations DeepSpeed 0.19.8 runs for a given config."""

from __future__ import annotations

from dataclasses import dataclass

from zeroadvisor.memory.settings import Settings
from zeroadvisor.vocab import Device

DEVICES = tuple(Device)  # the order options are listed in: no offload, CPU, NVMe


@dataclass(frozen=True, slots=True)
class Option:
    stage: int
    offload_optimizer: Device = Device.NONE
    offload_param: Device = Device.NONE

    def __post_init__(self) -> None:
        # the devices as the closed set, however they were given (settings read them from the config as text)
        if type(self.offload_optimizer) is not Device:
            object.__setattr__(self, "offload_optimizer", Device(self.offload_optimizer))
        if type(self.offload_param) is not Device:
            object.__setattr__(self, "offload_param", Device(self.offload_param))

    @property
    def label(self) -> str:
        """Compact column header: Z2, Z2 +opt:cpu, Z3 +opt:cpu +par:nvme (worded in vocab.py)."""
        from zeroadvisor.vocab import option_header

        return option_header(self)

    @property
    def words(self) -> str:
        """For sentences: ZeRO-3 with optimizer offload to CPU and parameter offload to NVMe."""
        from zeroadvisor.vocab import option_words

        return option_words(self)


@dataclass(frozen=True, slots=True)
class Skipped:
    option: Option
    reason: str


def configured_option(s: Settings) -> tuple[Option, list[str]]:
    """The option the config selects, normalised to what DeepSpeed actually runs."""
    notes: list[str] = []
    oo, op = s.offload_optimizer, s.offload_param
    if s.stage == 0 and (oo != Device.NONE or op != Device.NONE):
        notes.append("offload is ignored without ZeRO (stage 0): DeepSpeed accepts the keys silently")
        oo = op = Device.NONE
    if s.stage in (1, 2) and op != Device.NONE:
        notes.append(f"offload_param is ignored at stage {s.stage} (only stage 3 partitions parameters; "
                     "DeepSpeed runs without it and without a warning)")
        op = Device.NONE
    return Option(s.stage, oo, op), notes


def enumerate_options(s: Settings) -> tuple[list[Option], list[Skipped]]:
    """Every stage/offload option for this config, and those DeepSpeed would refuse to run."""
    configured, _ = configured_option(s)
    candidates: list[Option] = [Option(0)]
    for stage in (1, 2):
        candidates += [Option(stage, Device.NONE), Option(stage, Device.CPU)]
        if configured.stage == stage and configured.offload_optimizer == Device.NVME:
            # stage_1_and_2.py __init__: cpu_offload = device != none, so nvme runs as cpu
            candidates.append(Option(stage, Device.NVME))
    for oo in DEVICES:
        for op in DEVICES:
            candidates.append(Option(3, oo, op))
    runs: list[Option] = []
    skipped: list[Skipped] = []
    for option in candidates:
        reason = refusal(s, option)
        if reason is None:
            runs.append(option)
        else:
            skipped.append(Skipped(option, reason))
    if s.configured and configured not in runs:
        # the configured option is always estimated (the JSON contract marks exactly one entry), even
        # when DeepSpeed would refuse it; estimate.py attaches the refusal to that entry
        skipped = [k for k in skipped if k.option != configured]
        runs.append(configured)
        runs.sort(key=lambda o: (o.stage, DEVICES.index(o.offload_optimizer), DEVICES.index(o.offload_param)))
    return runs, skipped


def refusal(s: Settings, option: Option) -> str | None:
    """Why DeepSpeed 0.19.8 would not run ``option`` with these settings, or None."""
    master_flags = s.bf16_master_weights_and_grads or s.fp16_master_weights_and_grads or s.bf16_optimizer_states
    if option.stage == 0:
        if master_flags:
            return ("fp16/bf16 master_weights_and_grads and bf16_optimizer_states need ZeRO stage 1-3 "
                    "(runtime/config.py _do_error_check)")
        if s.grad_accum_dtype != s.precision:
            return (f"{s.precision} parameters with {s.grad_accum_dtype} gradient accumulation without ZeRO raise "
                    "NotImplementedError (runtime/engine.py _do_optimizer_sanity_check)")
        return None
    offloaded = option.offload_optimizer != Device.NONE
    if s.fp16_master_weights_and_grads and not offloaded:
        return ("fp16_master_weights_and_grads requires offload_optimizer with DeepSpeedCPUAdam "
                "(runtime/base_optimizer.py _configure_master_weights)")
    if s.bf16_master_weights_and_grads and not s.bf16_optimizer_states and not offloaded:
        return ("bf16_master_weights_and_grads without bf16_optimizer_states requires offload_optimizer with "
                "DeepSpeedCPUAdam (runtime/base_optimizer.py _configure_master_weights)")
    return None

"""Optimizer and scheduler rules: what the engine checks when it builds them.

The engine resolves ``optimizer.type`` (DeepSpeed's own names case-insensitively, else
``torch.optim.<type>``) and calls the class with ``**params``; likewise the scheduler
(runtime/engine.py _configure_basic_optimizer, _scheduler_from_config). The accepted
parameters per type are generated into the schema from the constructors' signatures.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

from zeroadvisor.config import merge_patch as patch
from zeroadvisor.deepspeed import effective as dsconfig
from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context
    from zeroadvisor.lint.schemawalk import Event

ONEBIT = ("onebitadam", "zerooneadam", "onebitlamb")


def _defs(kind: str) -> JSONObject:
    return schema.definition(kind)


def _kwargs_events(ctx: Context, prefix: str) -> list[Event]:
    return [e for e in ctx.events("unknown", policy="kwargs") if e.pointer.startswith(prefix)]


def _params_not_accepted(ctx: Context) -> Iterator[Hit]:
    for section, kind in (("optimizer", "optimizer_params"), ("scheduler", "scheduler_params")):
        name = ctx.deepspeed.optimizer_type if section == "optimizer" else ctx.get("/scheduler/type")
        for event in _kwargs_events(ctx, f"/{section}/params/"):
            accepted = sorted(schema.properties(_defs(kind).get(name))) if isinstance(name, str) else []
            hint = f" (did you mean {event.data['suggestions'][0]!r}?)" if event.data["suggestions"] else ""
            yield Hit(event.pointer,
                      f"{name} does not take {event.data['key']!r}{hint}: DeepSpeed passes params as keyword "
                      f"arguments and the constructor raises TypeError; it takes {', '.join(accepted) or 'no params'}",
                      fix=patch.delete(event.pointer))


PARAMS_NOT_ACCEPTED = Rule(
    code="ZA701",
    name="params-not-accepted",
    severity=Severity.ERROR,
    summary="An optimizer or scheduler param that the named type does not take.",
    explanation=(
        "DeepSpeed does not validate optimizer.params or scheduler.params: it passes them to the "
        "constructor as keyword arguments, which raises TypeError at engine start, on the cluster."
    ),
    check=_params_not_accepted,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "momentum": 0.9}}}',
                fails=True),
        Example('{"train_batch_size": 8, "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "betas": [0.9, 0.95]}}}',
                fails=False),
    ),
    source="deepspeed/runtime/engine.py _configure_basic_optimizer, _scheduler_from_config",
)


def _missing_params(ctx: Context) -> Iterator[Hit]:
    for section, kind in (("optimizer", "optimizer_params"), ("scheduler", "scheduler_params")):
        name = ctx.deepspeed.optimizer_type if section == "optimizer" else ctx.get("/scheduler/type")
        spec = _defs(kind).get(name) if isinstance(name, str) else None
        if not isinstance(spec, dict) or not isinstance(ctx.get(f"/{section}"), dict):
            continue
        if section == "scheduler" and ctx.get("/scheduler/params") is None:
            # engine._scheduler_from_config calls scheduler(optimizer, **params) with params None
            yield Hit("/scheduler", f"scheduler {name} has no 'params': the engine calls it with **None and "
                                    "raises TypeError; add \"params\": {}", fix=patch.at("/scheduler/params", {}))
            continue
        params = ctx.get(f"/{section}/params", {})
        params = params if isinstance(params, dict) else {}
        required = spec.get("required", [])
        missing = [p for p in required if p not in params] if isinstance(required, list) else []
        if missing:
            where = f"/{section}/params" if ctx.has(f"/{section}/params") else f"/{section}"
            yield Hit(where, f"{name} requires {', '.join(repr(m) for m in missing)}: the constructor raises "
                             "TypeError without it (Hugging Face fills it only when it is present as \"auto\")")


MISSING_REQUIRED_PARAM = Rule(
    code="ZA702",
    name="missing-required-param",
    severity=Severity.ERROR,
    summary="A required optimizer or scheduler param is missing.",
    explanation=(
        "WarmupDecayLR and WarmupCosineLR need total_num_steps, OneCycle needs cycle_min_lr and "
        "cycle_max_lr, torch's SGD needs lr. The engine constructs them with the given params and fails "
        "with TypeError when one is missing."
    ),
    check=_missing_params,
    examples=(
        Example('{"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100}}}',
                fails=True),
        Example('{"train_batch_size": 8, "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 100, '
                '"total_num_steps": 1000}}}', fails=False),
    ),
    source="deepspeed/runtime/lr_schedules.py (constructor signatures)",
)


def _finite_number(value: object) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


def _max_grad_norm(ctx: Context) -> Iterator[Hit]:
    pointer = "/optimizer/params/max_grad_norm"
    if ctx.has(pointer):
        value = ctx.get(pointer)
        fix = patch.delete(pointer)
        # A non-finite value (YAML .nan/.inf) would make the fix invalid JSON; only the deletion is safe.
        if not ctx.has("/gradient_clipping") and _finite_number(value):
            fix = patch.merge(fix, patch.at("/gradient_clipping", value))
        yield Hit(pointer, "max_grad_norm is not an optimizer parameter: DeepSpeed raises ValueError when it "
                           "builds the optimizer; set the top-level 'gradient_clipping' instead", fix=fix)


MAX_GRAD_NORM_IN_OPTIMIZER = Rule(
    code="ZA703",
    name="max-grad-norm-in-optimizer",
    severity=Severity.ERROR,
    summary="Gradient clipping set as optimizer.params.max_grad_norm.",
    explanation=(
        "DeepSpeed clips gradients itself from the top-level gradient_clipping. It warns at config "
        "time and raises ValueError in _configure_basic_optimizer when max_grad_norm is in the "
        "optimizer params."
    ),
    check=_max_grad_norm,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 1e-4, "max_grad_norm": 1.0}}}',
                fails=True),
        Example('{"train_batch_size": 8, "gradient_clipping": 1.0, '
                '"optimizer": {"type": "Adam", "params": {"lr": 1e-4}}}', fails=False),
    ),
    supersedes=("params-not-accepted",),
    source="deepspeed/runtime/engine.py _configure_basic_optimizer",
)


def _type_pointer(section: str) -> str:
    return f"/{section}/type"


def _unknown_optimizer(ctx: Context) -> Iterator[Hit]:
    name = ctx.get("/optimizer/type")
    if not isinstance(name, str) or name.lower() in ONEBIT:
        return
    native = schema.names("x-deepspeed-optimizers")
    if name.lower() in native or name in _defs("optimizer_params"):
        return
    # Compared case-folded (DeepSpeed's own names are matched case-insensitively, and a torch.optim name
    # typed in the wrong case is the likeliest slip), suggested as spelled; a DeepSpeed name wins a tie.
    spelled: dict[str, str] = {}
    for candidate in [*native, *_defs("optimizer_params")]:
        spelled.setdefault(candidate.lower(), candidate)
    folded = [name.lower()] if name.lower() in spelled else difflib.get_close_matches(name.lower(), list(spelled), n=2)
    close = [spelled[c] for c in folded]
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    yield Hit(_type_pointer("optimizer"), f"optimizer type {name!r} is neither a DeepSpeed optimizer nor in "
                                         f"torch.optim{hint}: the engine asserts it 'is not a supported DeepSpeed "
                                         "Optimizer'", at="value")


UNKNOWN_OPTIMIZER = Rule(
    code="ZA704",
    name="unknown-optimizer",
    severity=Severity.ERROR,
    summary="optimizer.type names no optimizer DeepSpeed can build.",
    explanation=(
        "DeepSpeed matches its own optimizers (adam, adamw, lamb, lion, adagrad, muon, ...) "
        "case-insensitively and otherwise looks the name up in torch.optim, case-sensitively."
    ),
    check=_unknown_optimizer,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "sgd", "params": {"lr": 0.1}}}', fails=True),
        Example('{"train_batch_size": 8, "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}', fails=False),
    ),
    supersedes=("out-of-range",),
    source="deepspeed/runtime/engine.py _configure_basic_optimizer",
)


def _onebit(ctx: Context) -> Iterator[Hit]:
    name = ctx.get("/optimizer/type")
    if isinstance(name, str) and name.lower() in ONEBIT:
        zero = f", and they never worked with ZeRO (stage {ctx.stage} here)" if ctx.stage else ""
        yield Hit(_type_pointer("optimizer"), f"{name} is a 1-bit optimizer: DeepSpeed 0.19 removed them{zero}; "
                                             "use Adam/AdamW", at="value")


ONEBIT_OPTIMIZER = Rule(
    code="ZA705",
    name="onebit-optimizer",
    severity=Severity.ERROR,
    summary="A 1-bit optimizer (OneBitAdam, ZeroOneAdam, OneBitLamb).",
    explanation=(
        "1-bit optimizers asserted that ZeRO was off, and DeepSpeed 0.19 removed them entirely "
        "(runtime/fp16/onebit/ is gone), so the engine no longer knows the name."
    ),
    check=_onebit,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "OneBitAdam", "params": {"lr": 1e-4}}, '
                '"zero_optimization": {"stage": 1}}', fails=True),
        Example('{"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 1e-4}}, '
                '"zero_optimization": {"stage": 1}}', fails=False),
    ),
    supersedes=("out-of-range",),
    source="deepspeed 0.19 runtime/config.py DEEPSPEED_OPTIMIZERS; runtime/fp16/",
)


def zero_supported(name: str, offloaded: bool) -> bool:
    supported = schema.load().get("x-zero-supported-optimizers", [])
    if isinstance(supported, dict):
        supported = supported.get("with_offload" if offloaded else "without_offload", [])
    return isinstance(supported, list) and name in supported


def _untested(ctx: Context) -> Iterator[Hit]:
    name = ctx.deepspeed.optimizer_type
    if name is None or not ctx.stage or ctx.get("/zero_allow_untested_optimizer") is True:
        return
    if name.lower() in ONEBIT:
        return
    native = schema.names("x-deepspeed-optimizers")
    if name not in native and name not in _defs("optimizer_params"):
        return  # unknown-optimizer reports it
    offloaded = ctx.deepspeed.offload_optimizer.on
    if not zero_supported(name, offloaded):
        yield Hit(_type_pointer("optimizer"),
                  f"{name} is not on ZeRO's list of tested optimizers: at stage {ctx.stage} DeepSpeed asserts "
                  "'You are using an untested ZeRO Optimizer'; set top-level \"zero_allow_untested_optimizer\": true "
                  "if you mean it", fix=patch.at("/zero_allow_untested_optimizer", True), at="value")


UNTESTED_OPTIMIZER = Rule(
    code="ZA706",
    name="untested-optimizer",
    severity=Severity.ERROR,
    summary="An optimizer that ZeRO rejects without zero_allow_untested_optimizer.",
    explanation=(
        "With ZeRO enabled the engine checks the optimizer against ZERO_SUPPORTED_OPTIMIZERS (torch "
        "Adam, AdamW, Adagrad, FusedAdam, FusedLion and the CPU variants); Lamb and torch's SGD are not "
        "on it. The top-level zero_allow_untested_optimizer: true lets them through (not inside "
        "zero_optimization)."
    ),
    check=_untested,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}, '
                '"zero_optimization": {"stage": 2}}', fails=True),
        Example('{"train_batch_size": 8, "zero_allow_untested_optimizer": true, "optimizer": {"type": "Lamb", '
                '"params": {"lr": 1e-3}}, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="deepspeed/runtime/engine.py _do_optimizer_sanity_check; runtime/zero/utils.py",
)


def _unknown_scheduler(ctx: Context) -> Iterator[Hit]:
    name = ctx.get("/scheduler/type")
    if not isinstance(name, str) or name == dsconfig.AUTO:
        return
    known = list(_defs("scheduler_params"))
    if name in known:
        return
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    yield Hit(_type_pointer("scheduler"), f"scheduler type {name!r} is neither a DeepSpeed scheduler nor in "
                                          f"torch.optim.lr_scheduler{hint}: the engine asserts 'DeepSpeed does not "
                                          "recognize LR scheduler'", at="value")


UNKNOWN_SCHEDULER = Rule(
    code="ZA707",
    name="unknown-scheduler",
    severity=Severity.ERROR,
    summary="scheduler.type names no scheduler DeepSpeed can build.",
    explanation=(
        "DeepSpeed looks the name up in deepspeed.runtime.lr_schedules (WarmupLR, WarmupDecayLR, "
        "WarmupCosineLR, OneCycle, LRRangeTest) and then torch.optim.lr_scheduler, both case-sensitively."
    ),
    check=_unknown_scheduler,
    examples=(
        Example('{"train_batch_size": 8, "scheduler": {"type": "WarmupCosine", "params": {}}}', fails=True),
        Example('{"train_batch_size": 8, "scheduler": {"type": "WarmupLR", "params": {}}}', fails=False),
    ),
    supersedes=("out-of-range",),
    source="deepspeed/runtime/engine.py _scheduler_from_config",
)

def _lamb_static_scale(ctx: Context) -> Iterator[Hit]:
    scale = ctx.get("/fp16/loss_scale")
    if ctx.deepspeed.optimizer_type != "lamb" or isinstance(scale, bool) or not isinstance(scale, (int, float)):
        return
    if scale != 0:
        yield Hit("/fp16/loss_scale",
                  f"a static fp16 loss_scale ({scale:g}) with the Lamb optimizer: the engine asserts 'DeepSpeed lamb "
                  "optimizer requires dynamic loss scaling'; set loss_scale to 0 (dynamic)",
                  fix=patch.at("/fp16/loss_scale", 0), at="value")


LAMB_STATIC_LOSS_SCALE = Rule(
    code="ZA708",
    name="lamb-static-loss-scale",
    severity=Severity.ERROR,
    summary="Lamb with a static fp16 loss scale.",
    explanation=(
        "The engine requires dynamic loss scaling (fp16.loss_scale 0, the default) for DeepSpeed's "
        "Lamb; it checks loss_scale == 0 whether or not fp16 is enabled."
    ),
    check=_lamb_static_scale,
    examples=(
        Example('{"train_batch_size": 8, "zero_allow_untested_optimizer": true, "fp16": {"enabled": true, '
                '"loss_scale": 128}, "optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}}', fails=True),
        Example('{"train_batch_size": 8, "zero_allow_untested_optimizer": true, "fp16": {"enabled": true, '
                '"loss_scale": 0}, "optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}}', fails=False),
    ),
    source="deepspeed/runtime/engine.py _do_sanity_check; dynamic_loss_scale()",
)

_REDUCE_SCATTER = "/zero_optimization/reduce_scatter"


def _muon_refused(ctx: Context) -> Iterator[Hit]:
    """The combinations the active release's engine or ZeRO optimizer refuses with Muon, each in its own words
    (behaviour flags generated from the release's source: tools/ds_release_sources.py LAUNCH_CHECKS)."""
    if ctx.deepspeed.optimizer_type != "muon":
        return
    refuses = releases.behaviour(schema.active_release())
    release = releases.label(schema.active_release())
    # zero_optimization.reduce_scatter defaults to true in every release that has Muon
    scatter = ctx.get(_REDUCE_SCATTER) is not False
    at_scatter = _REDUCE_SCATTER if ctx.has(_REDUCE_SCATTER) else _type_pointer("optimizer")
    if ctx.stage == 3 and refuses.muon_zero3_refused:
        yield Hit(_type_pointer("optimizer"),
                  f"the Muon optimizer at ZeRO stage 3: {release} asserts \"Muon optimizer is not yet compatible "
                  "with ZeRO Stage 3\" when it builds the optimizer; use stage 1 or 2, or a later release",
                  at="value")
    elif ctx.stage == 3 and scatter and refuses.muon_reduce_scatter_zero3_refused:
        default = "" if ctx.has(_REDUCE_SCATTER) else " (zero_optimization.reduce_scatter defaults to true)"
        yield Hit(at_scatter,
                  f"the Muon optimizer with reduce_scatter at ZeRO stage 3{default}: {release} raises \"Muon and "
                  "reduce scatter cannot be used together\" when it builds the ZeRO-3 optimizer; set "
                  "zero_optimization.reduce_scatter to false", fix=patch.at(_REDUCE_SCATTER, False), at="value")
    elif (ctx.stage in (1, 2) and scatter and ctx.deepspeed.offload_optimizer.on
          and refuses.muon_reduce_scatter_offload_refused):
        yield Hit(at_scatter,
                  f"the Muon optimizer with reduce_scatter and optimizer offload at ZeRO stage {ctx.stage}: {release} "
                  "raises \"Muon with reduce scatter does not support optimizer offload\"; set "
                  "zero_optimization.reduce_scatter to false, or drop the offload",
                  fix=patch.at(_REDUCE_SCATTER, False), at="value")


MUON_COMBINATION_REFUSED = Rule(
    code="ZA709",
    name="muon-combination-refused",
    severity=Severity.ERROR,
    summary="The Muon optimizer with a ZeRO setting the release refuses at launch.",
    explanation=(
        "DeepSpeed accepts the config, then refuses Muon when it builds the optimizer: 0.17.6-0.18.8 assert "
        "ZeRO stage <= 2; from 0.18.9 ZeRO-3 raises \"Muon and reduce scatter cannot be used together\" "
        "unless zero_optimization.reduce_scatter is false (it defaults to true); 0.19.3-0.19.7 also refuse "
        "reduce_scatter with optimizer offload at stages 1-2. Which release refuses what is read from each "
        "release's source."
    ),
    check=_muon_refused,
    examples=(
        Example('{"train_batch_size": 8, "optimizer": {"type": "Muon", "params": {"lr": 0.02}}, '
                '"zero_optimization": {"stage": 3}}', fails=True),
        Example('{"train_batch_size": 8, "optimizer": {"type": "Muon", "params": {"lr": 0.02}}, '
                '"zero_optimization": {"stage": 3, "reduce_scatter": false}}', fails=False),
    ),
    source="deepspeed/runtime/zero/stage3.py DeepSpeedZeroOptimizer_Stage3.__init__ (0.18.9+); runtime/engine.py "
           "_configure_basic_optimizer (0.17.6-0.18.8); runtime/zero/stage_1_and_2.py (0.19.3-0.19.7)",
)

RULES = (PARAMS_NOT_ACCEPTED, MISSING_REQUIRED_PARAM, MAX_GRAD_NORM_IN_OPTIMIZER, UNKNOWN_OPTIMIZER,
         ONEBIT_OPTIMIZER, UNTESTED_OPTIMIZER, UNKNOWN_SCHEDULER, LAMB_STATIC_LOSS_SCALE, MUON_COMBINATION_REFUSED)

"""``check``: lint findings and memory advice for one config, model and cluster."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from zeroadvisor.advisor import registry
from zeroadvisor.advisor.advice import Advice, Budget, Reason, failing_findings
from zeroadvisor.advisor.lead import Lead, NoFix, decide, no_fix
from zeroadvisor.advisor.rules import AdviceRuleContext
from zeroadvisor.advisor.trainer_settings import builds_config
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import Document
from zeroadvisor.deepspeed.settings import settings_of
from zeroadvisor.lint.context import Integration, LintOptions
from zeroadvisor.lint.engine import merge_findings, run_rules
from zeroadvisor.lint.findings import Finding
from zeroadvisor.lint.rule import Rule
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.errors import EstimateError
from zeroadvisor.memory.estimate import Estimate, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.rules.linter import lint_document
from zeroadvisor.units import DEFAULT_UNIT
from zeroadvisor.vocab import Accounting

if TYPE_CHECKING:
    from zeroadvisor.advisor.nofit import NothingFits
    from zeroadvisor.hardware.machine import Hardware
    from zeroadvisor.memory.options import Option
    from zeroadvisor.throughput import StepTime


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """What ``check_document`` runs with: the model and shape, the cluster (one type: memory/cluster.py), and the
    run's other inputs. zeroadvisor/inputs builds it from flags, keywords and files (RunInputs.check_options)."""

    model: ModelSpec
    shape: TrainingShape
    cluster: Cluster  # GPUs, the card's memory (required here: the advice needs a capacity), host RAM, NVMe, headroom
    accounting: Accounting = Accounting.DEEPSPEED
    integration: Integration = Integration.ANY
    unit: str = DEFAULT_UNIT
    training: Any = None  # the Hugging Face Trainer's arguments (config/training_args.TrainingArgs), when given
    # the step-time model's machine (throughput.Hardware); None: the stated defaults on ``cluster.gpu``
    hardware: Hardware | None = None
    # the DeepSpeed releases the lint part reads the config as (every release a range admits: a fix is proposed
    # only where all of them want it, rules/linter.py); () the latest. The memory model reads the active one.
    releases: tuple[str, ...] = ()
    # the file's batch keys are all "auto" and the document checked holds what the Trainer's arguments (``training``)
    # filled them with (advisor/trainer.py trainer_filled): a micro batch change is made in those arguments
    trainer_filled: bool = False

    def __post_init__(self) -> None:
        if self.cluster.gpu_memory is None:
            raise EstimateError("check needs the memory per GPU (a GPU name or its memory)")


@dataclass
class CheckResult:
    """The findings of one config, its estimate, and the advice they were worded from (None: no estimate), with
    the recommendation every report names first, decided once from the findings (:func:`finished`)."""

    findings: list[Finding]
    estimate: Estimate | None
    options: CheckOptions
    # why the memory model made no estimate of a config it could read (one line; the no-estimate finding says it)
    no_estimate: str | None = None
    advice: Advice | None = None
    # the lead recommendation (advisor/lead.py): what the verdict line names and the column marked recommended;
    # None where no finding recommends a change. Renderers read it and choose nothing themselves.
    recommendation: Lead | None = None
    # where the run fails and no config change makes it run: the failing finding a report points at instead
    no_fix: NoFix | None = None
    # where the run fails and nothing on the hardware given fits: the ways out, cheapest first, each priced
    # (advisor/nofit.py): LoRA/QLoRA, host RAM, NVMe, a bigger card, more GPUs
    nothing_fits: NothingFits | None = None

    def estimate_dict(self) -> dict[str, Any] | None:
        if self.estimate is None:
            return None
        return self.estimate.to_dict()

    def step_times(self) -> dict[Option, StepTime] | None:
        """The step time of each option of the estimate (throughput.per_option) on the machine the advice ranked
        with; None without an estimate or a named GPU."""
        hardware = self.advice.search.hardware if self.advice is not None else None
        if self.estimate is None or hardware is None:
            return None
        from zeroadvisor.throughput import per_option

        return per_option(self.estimate, hardware)


def finished(findings: list[Finding], estimate: Estimate | None, options: CheckOptions, *,
             no_estimate: str | None = None, advice: Advice | None = None) -> CheckResult:
    """The result of a check whose findings are final: its lead recommendation decided here, once."""
    lead = decide(findings, estimate)
    # the ways out are the failing run's: computed by its finding (does-not-fit, host-memory-insufficient) already
    nothing = advice.nothing_fits if advice is not None and failing_findings(findings) else None
    return CheckResult(findings, estimate, options, no_estimate=no_estimate, advice=advice, recommendation=lead,
                       no_fix=no_fix(findings, lead), nothing_fits=nothing)


def combined_patch(findings: list[Finding]) -> dict[str, Any]:
    """All fixes merged; config (lint) fixes first, memory advice last so it wins a conflict."""
    lint = [f.fix for f in findings if f.fix is not None and f.code not in registry.ADVICE_CODES]
    advised = [f.fix for f in findings if f.fix is not None and f.code in registry.ADVICE_CODES]
    return mp.merge(*lint, *advised)


def unestimated(doc: Document, linted: list[Finding], options: CheckOptions, rules: Iterable[Rule],
                reason: EstimateError | str) -> CheckResult:
    """The result of a config the memory model made no estimate of: its lint findings and, where that rule is
    selected, the no-estimate error (at the value it names, where the file has it): "could not decide" is never
    a pass."""
    from zeroadvisor.advisor.rules import NO_ESTIMATE, no_estimate_hit
    from zeroadvisor.lint.context import Context
    from zeroadvisor.lint.engine import capped

    selected = list(rules)
    findings = list(linted)
    if NO_ESTIMATE in selected:
        pointer = reason.pointer if isinstance(reason, EstimateError) else ""
        placed = bool(pointer) and Context(doc).has(pointer)
        findings += capped(NO_ESTIMATE, [no_estimate_hit(str(reason), pointer, placed)], doc)
    return finished(merge_findings(findings, selected), None, options, no_estimate=str(reason))


def _accumulation(options: CheckOptions) -> int | None:
    """The Trainer's gradient_accumulation_steps where its arguments are given (their value, else the default)."""
    if options.training is None:
        return None
    value = options.training.get("gradient_accumulation_steps")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def check_document(doc: Document, options: CheckOptions, rules: Iterable[Rule] | None = None) -> CheckResult:
    from zeroadvisor.advisor.search import Searcher

    cluster = options.cluster
    lint_options = LintOptions(integration=options.integration, gpus=cluster.gpus, training=options.training,
                               releases=options.releases)
    selected = list(registry.ALL if rules is None else rules)
    lint_rules = [r for r in selected if not r.needs_advice]
    if not isinstance(doc.data, dict):
        return finished(lint_document(doc, lint_options, selected), None, options)
    try:
        result = estimate(settings_of(doc), options.model, options.shape, cluster, options.accounting)
    except EstimateError as err:  # a value the memory model needs is unusable: no verdict, and an error says so
        return unestimated(doc, lint_document(doc, lint_options, lint_rules), options, selected, err)

    linted = lint_document(doc, lint_options, lint_rules)  # the file's lint findings: computed once

    def lint_fixes(data: dict[str, Any], gpus: int) -> dict[str, Any]:
        """The fixes the selected lint rules propose for ``data`` on ``gpus`` GPUs (the file, or the file as a
        change leaves it, on the cluster as given or grown): the advice is estimated and written with them."""
        if data is doc.data and gpus == cluster.gpus:
            return combined_patch(linted)
        document = doc if data is doc.data else Document(doc.name, "", data)
        on = lint_options if gpus == cluster.gpus else replace(lint_options, gpus=gpus)
        return combined_patch(lint_document(document, on, lint_rules))

    try:
        searcher = Searcher(doc.data, options.model, options.shape, cluster, options.accounting, result, lint_fixes,
                            tune_buckets=any(r.name == Reason.SMALLER_BUCKETS for r in selected)
                            and not builds_config(options.shape.method.trainer),
                            hardware=_hardware(options), trainer_filled=options.trainer_filled,
                            trainer_accumulation=_accumulation(options))
    except EstimateError as err:  # a lint fix left a value the memory model cannot use
        return unestimated(doc, linted, options, selected, err)
    from zeroadvisor.throughput import Throughput

    hardware = searcher.hardware
    if hardware is not None and isinstance(searcher.configured_step_time(), Throughput):
        # the ranking used step times: the machine facts nobody gave are assumed inputs too (ZA808)
        from zeroadvisor.memory.assumed import hardware_assumptions, machine_uses

        # only the machine facts that enter the step time of the configured run or the fix
        best = searcher.best()
        judged = [st.option for st in (result.configured, best.stage if best is not None else None) if st is not None]
        result = replace(result, assumed=(*result.assumed,
                                          *hardware_assumptions(hardware, machine_uses(judged, cluster.nodes))))
    advice = Advice(result, Budget(cluster, options.unit), searcher)
    context = AdviceRuleContext(doc, lint_options, advice)
    advice_rules = [r for r in selected if r.needs_advice]
    return finished(merge_findings([*linted, *run_rules(context, advice_rules)], selected), result, options,
                    advice=advice)


def _hardware(options: CheckOptions) -> Hardware | None:
    """What advice ranks step times on: the given Hardware, else the named GPU with the stated defaults (None
    without a GPU name: only its memory is known, so candidates keep the fixed order)."""
    if options.hardware is not None:
        return options.hardware
    if options.cluster.gpu is None:
        return None
    from zeroadvisor.throughput import DEFAULTS, Hardware

    return Hardware(options.cluster.gpu, defaulted=tuple(DEFAULTS))

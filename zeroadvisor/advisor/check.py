"""``check``: lint findings and memory advice for one config, model and cluster."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from zeroadvisor.lint.findings import Finding
from zeroadvisor.lint.engine import lint_document
from zeroadvisor.memory.estimate import Cluster, Estimate, estimate
from zeroadvisor.model.spec import ModelSpec, TrainingShape
from zeroadvisor.rules import registry
from zeroadvisor.lint.rule import Rule
from zeroadvisor.lint.context import LintOptions
from zeroadvisor.config.source import Document
from zeroadvisor.units import format_bytes

DEFAULT_HEADROOM = 0.10


@dataclass(frozen=True, slots=True)
class CheckOptions:
    model: ModelSpec
    shape: TrainingShape
    gpus: int
    gpu_memory: int  # bytes per GPU as the hardware has it
    gpus_per_node: int | None = None
    cpu_memory: int | None = None  # host RAM per node
    nvme: int | None = None  # NVMe per node
    headroom: float = DEFAULT_HEADROOM  # share of GPU memory kept free
    accounting: str = "deepspeed"
    integration: str = "any"
    unit: str = "GB"

    @property
    def usable(self) -> int:
        return int(self.gpu_memory * (1 - self.headroom))


@dataclass
class AdviceContext:
    """What advice rules see (Context.advice)."""

    estimate: Estimate
    searcher: Any  # zeroadvisor.advisor.search.Searcher
    gpu_memory: int
    usable: int
    headroom: float
    cpu_memory: int | None
    nvme: int | None
    unit: str = "GB"

    def fmt(self, nbytes: int) -> str:
        return format_bytes(nbytes, self.unit)


@dataclass
class CheckResult:
    findings: list[Finding]
    estimate: Estimate | None
    options: CheckOptions
    extra: dict[str, Any] = field(default_factory=dict)

    def estimate_dict(self) -> dict[str, Any] | None:
        if self.estimate is None:
            return None
        data = self.estimate.to_dict()
        data["cluster"].update({"gpu_memory": self.options.gpu_memory, "headroom": self.options.headroom,
                                "usable_gpu_memory": self.options.usable})
        return data


def check_document(doc: Document, options: CheckOptions, rules: Iterable[Rule] | None = None) -> CheckResult:
    from zeroadvisor.advisor.search import Searcher

    lint_options = LintOptions(integration=options.integration, gpus=options.gpus)
    selected = list(registry.ALL if rules is None else rules)
    if not isinstance(doc.data, dict):
        return CheckResult(lint_document(doc, lint_options, selected), None, options)
    cluster = Cluster(gpus=options.gpus, gpus_per_node=options.gpus_per_node, gpu_memory=options.usable,
                      cpu_memory=options.cpu_memory, nvme=options.nvme)
    try:
        result = estimate(doc.data, options.model, options.shape, cluster, options.accounting)
    except (ValueError, TypeError) as err:
        # A value the memory model needs is unusable; the lint findings say which.
        findings = lint_document(doc, lint_options, [r for r in selected if not r.needs_advice])
        return CheckResult(findings, None, options, {"estimate_error": str(err)})
    searcher = Searcher(doc.data, options.model, options.shape, cluster, options.accounting, result)
    advice = AdviceContext(result, searcher, options.gpu_memory, options.usable, options.headroom,
                           options.cpu_memory, options.nvme, options.unit)
    return CheckResult(lint_document(doc, lint_options, selected, advice), result, options)

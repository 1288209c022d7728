"""``check`` and ``estimate`` of an Accelerate launcher config: the DeepSpeed config Accelerate builds
(deepspeed/accelerate_map.py), on the world the YAML launches, through the same flow as a ds_config.

The YAML decides what it states: num_processes is the world size (the total across machines) and
num_machines the nodes; a --gpus or --gpus-per-node that contradicts it is a usage error, as a flag
that contradicts a ds_config is. Where the YAML has no mixed_precision, --precision stands for what
the training script passes to ``Accelerator(mixed_precision=...)`` (Accelerate runs "no" otherwise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from zeroadvisor.deepspeed import accelerate_map
from zeroadvisor.lint.findings import Finding, Severity

if TYPE_CHECKING:
    from zeroadvisor.advisor.check import CheckOptions, CheckResult
    from zeroadvisor.config.source import Document
    from zeroadvisor.jsontypes import JSONValue
    from zeroadvisor.lint.rule import Rule
    from zeroadvisor.memory.cluster import Cluster
    from zeroadvisor.model.spec import TrainingShape

# TrainingShape.precision -> Accelerate's mixed_precision word.
_MIXED = {"fp32": "no", "fp16": "fp16", "bf16": "bf16"}


class AccelerateConflict(ValueError):
    """A flag that contradicts what the Accelerate config launches (one line)."""


def launch_for(document: Document, shape: TrainingShape) -> accelerate_map.Launch:
    return accelerate_map.build(document, _MIXED.get(shape.precision) if shape.precision else None)


def launched_shape(launch: accelerate_map.Launch, shape: TrainingShape) -> TrainingShape:
    """zero3_init_flag decides whether from_pretrained runs under deepspeed.zero.Init (DeepSpeedPlugin
    set_deepspeed_weakref hands the config to transformers, whose is_deepspeed_zero3_enabled then holds);
    a --zero-init/--no-zero-init flag still wins, as a script that calls zero.Init itself would."""
    if launch.zero3_init is None or shape.load.zero_init is not None:
        return shape
    return dataclasses.replace(shape, load=dataclasses.replace(shape.load, zero_init=launch.zero3_init))


def why_no_config(launch: accelerate_map.Launch, data: JSONValue) -> str:
    """One line: why there is no DeepSpeed config to estimate (``data``: the Accelerate config, a mapping)."""
    if not launch.deepspeed:
        kind = data.get("distributed_type") if isinstance(data, dict) else None
        return (f"distributed_type is {kind!r}: 'accelerate launch' does not start DeepSpeed "
                "with this config")
    errors = [p for p in launch.problems if p.kind not in ("processes", "nvme-path-dropped")]
    return errors[0].message if errors else "Accelerate cannot build a DeepSpeed config from it"


def world(path: str, launch: accelerate_map.Launch, cluster: Cluster) -> tuple[int, int | None]:
    """(GPUs, GPUs per node) of the launch; the flags where the YAML leaves them open."""
    gpus, gpus_per_node = cluster.gpus, cluster.gpus_per_node if cluster.per_node_given else None
    if launch.world_size is None:
        return gpus, gpus_per_node
    machines = f" on {launch.num_machines} machines" if launch.num_machines > 1 else ""
    if gpus != launch.world_size:
        raise AccelerateConflict(f"{path}: the Accelerate config launches {launch.world_size} processes{machines} "
                                 f"(num_processes is the total), but --gpus gives {gpus}; "
                                 f"give --gpus {launch.world_size} or change num_processes")
    if launch.num_machines == 1:
        return gpus, gpus_per_node
    if gpus_per_node is not None and gpus_per_node != launch.per_node:
        raise AccelerateConflict(f"{path}: the Accelerate config starts {launch.per_node} processes per machine, but "
                                 f"--gpus-per-node gives {gpus_per_node}; "
                                 f"give --gpus-per-node {launch.per_node} or leave it out")
    return gpus, launch.per_node


def estimate_inputs(path: str, document: Document, shape: TrainingShape, cluster: Cluster
                    ) -> tuple[dict[str, Any] | None, TrainingShape, Cluster, str | None]:
    """(the DeepSpeed config, the training shape, the cluster it runs on, why there is no config)."""
    launch = launch_for(document, shape)
    gpus, per_node = world(path, launch, cluster)
    cluster = dataclasses.replace(cluster, gpus=gpus, gpus_per_node=per_node)
    if launch.ds_config is None:
        return None, shape, cluster, why_no_config(launch, document.data)
    return launch.ds_config, launched_shape(launch, shape), cluster, None


def check_accelerate(path: str, document: Document, options: CheckOptions,
                     rules: list[Rule], refuse_conflicts: Callable[[str, Any, CheckOptions], None]) -> CheckResult:
    """Lint findings and memory advice for an Accelerate config. ``refuse_conflicts(path, data, options)``
    is the flow's check that the flags agree with the DeepSpeed config."""
    from zeroadvisor.advisor.check import check_document, finished, unestimated
    from zeroadvisor.lint.context import Context, Integration, LintOptions
    from zeroadvisor.lint.engine import capped
    from zeroadvisor.rules import accelerate as rules_accelerate
    from zeroadvisor.rules.linter import place_on_yaml

    launch = launch_for(document, options.shape)
    gpus, per_node = world(path, launch, options.cluster)
    cluster = dataclasses.replace(options.cluster, gpus=gpus, gpus_per_node=per_node)
    options = dataclasses.replace(options, cluster=cluster, integration=Integration.ACCELERATE,
                                  shape=launched_shape(launch, options.shape))
    ctx = Context(document, LintOptions(integration=Integration.ACCELERATE, gpus=gpus, releases=options.releases))
    ctx.__dict__[rules_accelerate._LAUNCH] = launch
    yaml_findings: list[Finding] = []
    for rule in rules:
        if rule.code in rules_accelerate.CODES:
            yaml_findings.extend(capped(rule, rule.check(ctx), document))
    built = rules_accelerate.deepspeed_document(document, launch)
    if built is None:
        if any(f.severity is Severity.ERROR for f in yaml_findings):  # an error already says why
            return finished(_sorted(yaml_findings), None, options, no_estimate=why_no_config(launch, document.data))
        return unestimated(document, _sorted(yaml_findings), options, rules, why_no_config(launch, document.data))
    refuse_conflicts(path, built.data, options)
    result = check_document(built, options, [r for r in rules if r.code not in rules_accelerate.CODES])
    placed = place_on_yaml(document, launch, result.findings, yaml_findings)
    # the findings as placed on the YAML carry no fix (the DeepSpeed config is Accelerate's to build): the lead
    # recommendation is decided again on them, as every report reads them
    return finished(_sorted(yaml_findings + placed), result.estimate, result.options, no_estimate=result.no_estimate,
                    advice=result.advice)


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted((dataclasses.replace(f, fix=None) if f.fix is not None else f for f in findings),
                  key=Finding.sort_key)


__all__ = ["AccelerateConflict", "check_accelerate", "estimate_inputs", "launch_for", "world"]

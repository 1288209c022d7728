"""The ZeRO memory model: per-GPU, per-node host RAM and NVMe bytes for every stage/offload option.

Public entry point: ``zeroadvisor.memory.estimate.estimate(config, model, shape, cluster, accounting)``.
One job per module: bytes (dtype and optimizer-state tables), settings (effective DeepSpeed settings
from a config), options (which stage/offload combinations DeepSpeed runs), states (model states),
buffers (buckets, gathered parameters, staging, overhead), activations, estimate (assembly and JSON).
"""

from zeroadvisor.memory.errors import EstimateError

__all__ = ["EstimateError"]

"""Run by tests/oracle/test_parallel_oracle.py: DeepSpeed 0.19.8's own group and batch arithmetic for
sequence parallelism and AutoTP, on 2 CPU ranks over gloo. Prints one JSON object (rank 0).

usage: python parallel_groups_probe.py OUT.json
"""

from __future__ import annotations

import json
import os
import socket
import sys

os.environ.setdefault("DS_ACCELERATOR", "cpu")

WORLD = 2
CONFIGS = {
    "sequence": {"train_batch_size": 8, "gradient_accumulation_steps": 1, "sequence_parallel_size": 2},
    "tensor": {"train_batch_size": 8, "gradient_accumulation_steps": 1, "tensor_parallel": {"autotp_size": 2}},
}


def rank_main(rank: int, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD),
                      LOCAL_RANK=str(rank))
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.utils import groups

    deepspeed.init_distributed(dist_backend="gloo")
    result = {}
    for name, config in CONFIGS.items():
        parsed = DeepSpeedConfig(config)  # the HF zero.init path: no mpu (runtime/config.py __init__)
        result[name] = {"batch_world": parsed.world_size, "micro_batch": parsed.train_micro_batch_size_per_gpu}
    # AutoTP as the engine sets it up: _configure_tensor_parallel_states -> _init_tp_mesh_device, then
    # _configure_distributed_model sets groups.mpu = self.mpu (= groups); ZeRO's group is then
    # groups._get_sequence_data_parallel_group()
    groups._init_tp_mesh_device(tensor_model_parallel_size=2)
    groups.mpu = groups
    result["tensor"]["zero_group"] = deepspeed.comm.get_world_size(groups._get_sequence_data_parallel_group())
    if rank == 0:
        with open(out, "w") as handle:
            json.dump(result, handle)


if __name__ == "__main__":
    import torch.multiprocessing as mp

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    mp.spawn(rank_main, args=(free, sys.argv[1]), nprocs=WORLD)

"""The DeepSpeed config OpenRLHF builds from its flags for the model it trains: OpenRLHF reads no config file, so
its command is the whole of it.

``openrlhf/utils/deepspeed/deepspeed.py`` ``DeepspeedStrategy.get_ds_train_config`` calls
``deepspeed_utils.get_train_ds_config(offload=False, adam_offload=--adam_offload, stage=--zero_stage, bf16/param_dtype,
max_norm=--max_norm, zpg=--zpg, grad_accum_dtype=--grad_accum_dtype, overlap_comm=--overlap_comm, ...,
tensor_parallel_size=--ds_tensor_parallel_size)`` and sets ``train_micro_batch_size_per_gpu`` to
``--micro_train_batch_size`` and ``train_batch_size`` to ``--train_batch_size`` times the ring-attention and tensor
degrees (read at v0.6.0, v0.8.5, v0.9.5, v0.10.4 and v0.11.0: the same keys from v0.8.0; the dtype from
``--param_dtype``, default bf16, from v0.9.2, before from ``--bf16``, default off; from v0.10.4 an ``optimizer``
block, AdamW, where earlier releases handed DeepSpeed their own FusedAdam / DeepSpeedCPUAdam, the same states).

The ``"auto"`` entries it writes (sub_group_size, the stage-3 buckets, reduce_bucket_size) are left out: DeepSpeed's
config model drops an ``"auto"`` value (runtime/config_utils.py DeepSpeedConfigModel), so its defaults apply either
way. The parameters are never offloaded for the trained model (``offload=False``).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from zeroadvisor.jsontypes import JSONObject, JSONValue

# the flags get_ds_train_config reads (their 0.8 spellings; config/method_reader.py DOTTED maps the 0.10+ ones)
FLAGS = ("zero_stage", "adam_offload", "bf16", "param_dtype", "zpg", "overlap_comm", "grad_accum_dtype", "max_norm",
         "micro_train_batch_size", "train_batch_size", "ring_attn_size", "ds_tensor_parallel_size", "use_dynamic_batch")
# those argparse reads as int (config/launch.py whole: a whole number, or one line, exit 2)
COUNT_FLAGS = ("zero_stage", "zpg", "micro_train_batch_size", "train_batch_size", "ring_attn_size",
               "ds_tensor_parallel_size")
PARAM_DTYPE_SINCE = Version("0.9.2")  # --param_dtype (default bf16) replaced --bf16 (default off)
OPTIMIZER_BLOCK_SINCE = Version("0.10.4")  # get_train_ds_config(optim_config=...): the optimizer in the config
PPO_MICRO_ONE_SINCE = Version("0.10.0")  # train_ppo_ray's --train.micro_batch_size default 4 -> 1


@dataclass(frozen=True, slots=True)
class OpenRLHFFlags:
    """The flags of one OpenRLHF command that its DeepSpeed config follows from, as given (absent: the default)."""

    entry: str  # openrlhf.cli.train_ppo_ray, train_sft, train_dpo, train_rm, train_kto
    values: JSONObject


def _micro_default(entry: str, release: Version | None) -> int:
    """--micro_train_batch_size's argparse default by entry point (openrlhf/cli/train_*.py; no release: the 0.8
    defaults, as memory/method.py NEWEST_READ assumes for the rest of the method)."""
    if entry.endswith("train_rm"):
        return 1
    if entry.endswith("train_ppo_ray"):
        return 1 if release is not None and release >= PPO_MICRO_ONE_SINCE else 4
    return 8


def _truthy(value: JSONValue) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true", "yes"))


def _number(value: JSONValue, default: float) -> float:
    try:
        return float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else default
    except ValueError:
        return default


def train_config(flags: OpenRLHFFlags, release: Version | None) -> JSONObject:
    """The config ``get_ds_train_config`` builds for the trained model at ``release``. None: not known; then a
    command that sets neither ``--bf16`` nor ``--param_dtype`` trains in bf16 (``--param_dtype``'s default, v0.9.2 on:
    a command without either is a 0.9.2+ one, since the 0.8 examples all pass ``--bf16``), and the batch defaults
    are 0.8's."""
    given = flags.values
    stage = int(_number(given.get("zero_stage"), 2))
    dtype = given.get("param_dtype")
    if isinstance(dtype, str):
        half = dtype.strip().lower()
    elif "bf16" in given:
        half = "bf16" if _truthy(given["bf16"]) or given["bf16"] is None else "fp32"
    else:
        half = "bf16" if release is None or release >= PARAM_DTYPE_SINCE else "fp32"
    zero: JSONObject = {
        "stage": stage,
        "offload_param": {"device": "none"},
        "offload_optimizer": {"device": "cpu" if "adam_offload" in given and given["adam_offload"] is not False
                              else "none", "pin_memory": True},
        "zero_hpz_partition_size": int(_number(given.get("zpg"), 1)),
        "zero_quantized_weights": False,
        "zero_quantized_gradients": False,
    }
    if "overlap_comm" in given and given["overlap_comm"] is not False:
        zero.update({"overlap_comm": True, "contiguous_gradients": True})
    if stage == 3:
        zero["reduce_scatter"] = True
    ring = int(_number(given.get("ring_attn_size"), 1))
    tensor = int(_number(given.get("ds_tensor_parallel_size"), 1))
    config: JSONObject = {
        "steps_per_print": 100,
        "zero_optimization": zero,
        "bf16": {"enabled": half == "bf16"},
        "fp16": {"enabled": half == "fp16"},
        "gradient_clipping": _number(given.get("max_norm"), 1.0),
        "prescale_gradients": False,
        "wall_clock_breakdown": False,
        "data_types": {"grad_accum_dtype": given.get("grad_accum_dtype")},
        "tensor_parallel": {"autotp_size": tensor},
    }
    if release is not None and release >= OPTIMIZER_BLOCK_SINCE:
        config["optimizer"] = {"type": "AdamW"}
    if "use_dynamic_batch" in given and given["use_dynamic_batch"] is not False:
        config.update({"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1})
    else:
        micro = int(_number(given.get("micro_train_batch_size"), _micro_default(flags.entry, release)))
        config["train_micro_batch_size_per_gpu"] = micro
        config["train_batch_size"] = int(_number(given.get("train_batch_size"), 128)) * ring * tensor
    return config

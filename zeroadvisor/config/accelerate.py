"""The Accelerate launcher config (what ``accelerate config`` writes): how to recognise it, and its keys.

``accelerate launch --config_file FILE`` reads FILE with ``yaml.safe_load`` (``json.load`` for a
``.json`` name) in ``commands/config/config_args.py load_config_from_file``; the file is read here
with the project's YAML reader (config/yaml_source.py), which keeps the position of every key.

The facts below are accelerate 1.15.0's, each table naming the code it copies;
tests/oracle/test_accelerate_oracle.py compares every table with the installed package.
"""

from __future__ import annotations

from collections.abc import Mapping

from zeroadvisor.jsontypes import JSONObject, JSONValue

# commands/config/config_args.py BaseConfig + ClusterConfig dataclass fields: any other top-level key makes
# ``from_yaml_file`` raise "The config file at ... had unknown keys".
CLUSTER_KEYS: tuple[str, ...] = (
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
    "num_processes", "machine_rank", "num_machines", "gpu_ids", "main_process_ip", "main_process_port",
    "rdzv_backend", "same_network", "main_training_function", "enable_cpu_affinity", "fp8_config",
    "deepspeed_config", "fsdp_config", "parallelism_config", "megatron_lm_config", "mpirun_config",
    "downcast_bf16", "tpu_name", "tpu_zone", "tpu_use_cluster", "tpu_use_sudo", "command_file", "commands",
    "tpu_vm", "tpu_env", "dynamo_config",
)
# SageMakerConfig (compute_environment: AMAZON_SAGEMAKER) fields.
SAGEMAKER_KEYS: tuple[str, ...] = (
    "compute_environment", "distributed_type", "mixed_precision", "use_cpu", "debug",
    "ec2_instance_type", "iam_role_name", "image_uri", "profile", "region", "num_machines", "gpu_ids",
    "base_job_name", "pytorch_version", "transformers_version", "py_version", "sagemaker_inputs_file",
    "sagemaker_metrics_file", "additional_args", "dynamo_config", "enable_cpu_affinity",
)
# BaseConfig.process_config converts these older keys before the unknown-key check: key -> what it became.
LEGACY_KEYS: dict[str, str] = {"fp16": "mixed_precision", "dynamo_backend": "dynamo_config"}

# utils/dataclasses.py enums, checked by BaseConfig.__post_init__ (ComputeEnvironment(...), DistributedType(...)).
COMPUTE_ENVIRONMENTS: tuple[str, ...] = ("LOCAL_MACHINE", "AMAZON_SAGEMAKER")
DISTRIBUTED_TYPES: tuple[str, ...] = (
    "NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU", "DEEPSPEED",
    "FSDP", "XLA", "MEGATRON_LM", "MULTI_HPU", "MULTI_NEURON",
)
SAGEMAKER_DISTRIBUTED_TYPES: tuple[str, ...] = ("NO", "DATA_PARALLEL", "MODEL_PARALLEL")
# PrecisionType: utils/launch.py prepare_deepspeed_cmd_env raises "Unknown mixed_precision mode" for others.
PRECISIONS: tuple[str, ...] = ("no", "fp8", "fp16", "bf16")

# The ``deepspeed_config:`` keys that ``accelerate launch`` acts on: its "DeepSpeed Arguments"
# (commands/launch.py launch_command_parser). _validate_launch_command copies every key of the
# block onto the parsed arguments, and prepare_deepspeed_cmd_env turns these into the
# ACCELERATE_* environment the training processes read (DeepSpeedPlugin.__post_init__);
# any other key is set on the arguments and never read.
DEEPSPEED_KEYS: tuple[str, ...] = (
    "deepspeed_config_file", "zero_stage", "offload_optimizer_device", "offload_param_device",
    "offload_optimizer_nvme_path", "offload_param_nvme_path", "gradient_accumulation_steps", "gradient_clipping",
    "zero3_init_flag", "zero3_save_16bit_model", "deepspeed_hostfile", "deepspeed_exclusion_filter",
    "deepspeed_inclusion_filter", "deepspeed_multinode_launcher", "deepspeed_moe_layer_cls_names",
)
# DeepSpeedPlugin._deepspeed_config_checks: with a deepspeed_config_file, these fields of the
# Accelerate config (ACCELERATE_CONFIG_DS_FIELDS: the deepspeed_config keys, plus mixed_precision
# when the file sets it) raise "When using `deepspeed_config_file`, the following accelerate
# config variables will be ignored".
IGNORED_WITH_CONFIG_FILE: tuple[str, ...] = (
    "gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
    "offload_param_device", "offload_param_nvme_path", "offload_optimizer_nvme_path", "zero3_save_16bit_model",
)
# utils/constants.py DEEPSPEED_MULTINODE_LAUNCHERS; the first is the default.
MULTINODE_LAUNCHERS: tuple[str, ...] = ("pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm")
# DeepSpeedPlugin.__post_init__ defaults when launch sets no ACCELERATE_DEEPSPEED_* variable.
DEFAULT_ZERO_STAGE = 2
OFFLOAD_DEVICES: tuple[str, ...] = ("none", "cpu", "nvme")  # DeepSpeed's OffloadDeviceEnum values
# utils/environment.py str_to_bool: what ACCELERATE_DEEPSPEED_ZERO3_INIT may hold.
TRUTH_WORDS: tuple[str, ...] = ("y", "yes", "t", "true", "on", "1", "n", "no", "f", "false", "off", "0")

DEEPSPEED_SECTION = "/deepspeed_config"


def is_accelerate_config(data: JSONValue) -> bool:
    """An Accelerate launcher config, decided by content: a mapping with a top-level
    ``distributed_type`` or ``deepspeed_config`` block (neither is a DeepSpeed key)."""
    return isinstance(data, dict) and ("distributed_type" in data or isinstance(data.get("deepspeed_config"), dict))


def known_top_level(data: Mapping[str, JSONValue]) -> tuple[str, ...]:
    """The keys the config class that load_config_from_file chooses accepts."""
    return SAGEMAKER_KEYS if data.get("compute_environment") == "AMAZON_SAGEMAKER" else CLUSTER_KEYS


def deepspeed_section(data: Mapping[str, JSONValue]) -> JSONObject:
    section = data.get("deepspeed_config")
    return section if isinstance(section, dict) else {}


def uses_deepspeed(data: Mapping[str, JSONValue]) -> bool:
    """commands/launch.py: args.use_deepspeed = defaults.distributed_type == DistributedType.DEEPSPEED."""
    return data.get("distributed_type") == "DEEPSPEED"


def distributed_types(data: Mapping[str, JSONValue]) -> tuple[str, ...]:
    """The distributed_type values the config class that load_config_from_file chooses accepts."""
    return SAGEMAKER_DISTRIBUTED_TYPES if data.get("compute_environment") == "AMAZON_SAGEMAKER" else DISTRIBUTED_TYPES


def other_launcher(data: JSONValue) -> str | None:
    """The distributed_type of an Accelerate config that starts no DeepSpeed run at all: a valid type other than
    DEEPSPEED (FSDP, MULTI_GPU, ...) and no ``deepspeed_config`` block. None for anything else: a DeepSpeed run,
    a type Accelerate refuses (the Accelerate rules report it), or a ``deepspeed_config`` block that the type
    leaves unused (rule accelerate-deepspeed-unused says so)."""
    if not isinstance(data, dict) or "deepspeed_config" in data:
        return None
    kind = data.get("distributed_type")
    if not isinstance(kind, str) or kind == "DEEPSPEED" or kind not in distributed_types(data):
        return None
    return kind

"""Maintained table: the parts of ds_config that DeepSpeed 0.19.8 reads with ``dict.get``.

DeepSpeed validates some sections with pydantic models (``extra="forbid"``); tools/gen_schema.py
reads those straight from the models. Everything else -- the top level and the sections listed
below -- is a plain dict that DeepSpeed reads key by key with ``dict.get`` /
``get_scalar_param``, so no machine-readable description exists. This module is that
description, written from DeepSpeed's code (not its docs; see reference §8 for where they differ).
Each section cites the DeepSpeed file and function that reads it. Paths are relative to the
installed ``deepspeed`` package.

The generator checks these defaults against DeepSpeed at generation time wherever DeepSpeed
exposes them (constants, default dicts, parse functions), so a DeepSpeed upgrade that changes
a default fails loudly instead of drifting.

Plain data only: ``leaf``/``section``/``model``/``params`` below just build dicts.
Leaf keyword arguments are JSON Schema keywords in snake_case (``exclusive_minimum`` ->
``exclusiveMinimum``), ``x_*`` annotations (``x_unchecked`` -> ``x-unchecked``), plus:

- ``ci_enum``: allowed values compared case-insensitively (DeepSpeed lower/upper-cases them);
  the generator turns this into a portable ``pattern`` plus ``x-enum-ci`` and ``examples``.
- ``ci_enum_from``: like ``ci_enum``, with the values read from a DeepSpeed object.
- ``enum_from``: ``"module:attribute"`` in DeepSpeed whose values are the allowed values, so the
  list follows DeepSpeed instead of being copied; ``nullable_enum=True`` adds null.
- ``no_default``: reason why the key has no default (DeepSpeed indexes it directly).
- ``generated``: name of keywords the generator computes from DeepSpeed (the optimizer and
  scheduler type lists).
"""

from __future__ import annotations

from typing import Any

# --------------------------------------------------------------------------------------------
# Builders (plain dicts; the generator interprets them)
# --------------------------------------------------------------------------------------------

_MISSING = "__no_default__"


def leaf(type_: str | list[str], description: str, default: Any = _MISSING, **keywords: Any) -> dict:
    """A scalar or opaque value read with dict.get."""
    spec = {"kind": "leaf", "type": type_, "description": description, "keywords": keywords}
    if default != _MISSING:
        spec["default"] = default
    return spec


def section(description: str, source: str, keys: dict, *, nullable: bool = False,
            extra_types: tuple[str, ...] = (), default: Any = _MISSING,
            required_if_enabled: tuple[str, ...] = (), unknown: str = "ignored", **keywords: Any) -> dict:
    """A dict read key by key; unknown keys are silently ignored (``x-unknown-keys: ignored``)."""
    spec = {"kind": "section", "description": description, "source": source, "keys": keys,
            "nullable": nullable, "extra_types": list(extra_types), "unknown": unknown,
            "required_if_enabled": list(required_if_enabled), "keywords": keywords}
    if default != _MISSING:
        spec["default"] = default
    return spec


def mapping(description: str, source: str, value: dict) -> dict:
    """A dict whose keys are user-chosen names and whose values all follow ``value``."""
    return {"kind": "map", "description": description, "source": source, "value": value}


def model(cls: str, description: str, *, nullable: bool = False) -> dict:
    """A section validated by a DeepSpeed pydantic model (``module:Class``)."""
    return {"kind": "model", "cls": cls, "description": description, "nullable": nullable}


def params(defs: str, description: str) -> dict:
    """optimizer.params / scheduler.params: keyword arguments for the class DeepSpeed builds."""
    return {"kind": "params", "defs": defs, "description": description}


DTYPE_ENUM = "deepspeed.runtime.config:DtypeEnum"

# --------------------------------------------------------------------------------------------
# Sections read with dict.get
# --------------------------------------------------------------------------------------------

# runtime/activation_checkpointing/config.py DeepSpeedActivationCheckpointingConfig._initialize
ACTIVATION_CHECKPOINTING = section(
    "Activation checkpointing options used by deepspeed.checkpointing.checkpoint (Megatron-style models); unknown keys "
    "are ignored.",
    "runtime/activation_checkpointing/config.py DeepSpeedActivationCheckpointingConfig._initialize",
    {
        "partition_activations": leaf("boolean",
                                      "Partition checkpointed activations across model-parallel ranks instead of "
                                      "replicating them.",
                                      False, x_unchecked=True),
        "contiguous_memory_optimization": leaf("boolean",
                                               "Copy partitioned activation checkpoints into one contiguous buffer to "
                                               "reduce fragmentation.",
                                               False, x_unchecked=True),
        "cpu_checkpointing": leaf("boolean",
                                  "Offload partitioned activation checkpoints to CPU memory (requires "
                                  "partition_activations).",
                                  False, x_unchecked=True),
        "number_checkpoints": leaf(["integer", "null"],
                                   "Number of activation checkpoints stored per forward pass; sizes the contiguous "
                                   "buffer.",
                                   None, x_unchecked=True),
        "synchronize_checkpoint_boundary": leaf("boolean",
                                                "Synchronize the device at each checkpoint boundary (for profiling).",
                                                False, x_unchecked=True),
        "profile": leaf("boolean", "Log forward and backward time of each checkpointed function.",
                        False, x_unchecked=True),
    },
)

# profiling/config.py DeepSpeedFlopsProfilerConfig._initialize (defaults in profiling/constants.py)
FLOPS_PROFILER = section(
    "FLOPS profiler settings; enabling it also enables wall_clock_breakdown; unknown keys are ignored.",
    "profiling/config.py DeepSpeedFlopsProfilerConfig._initialize",
    {
        # runtime/config.py DeepSpeedConfig._initialize_params: wall_clock_breakdown | enabled
        "enabled": leaf("boolean", "Run the FLOPS profiler once at profile_step.", False, x_unchecked=True,
                        x_operand_types=["boolean", "integer"]),
        "recompute_fwd_factor": leaf("number",
                                     "Fraction of the forward pass recomputed in backward (activation checkpointing) "
                                     "counted in the FLOPS estimate.",
                                     0.0, x_unchecked=True),
        "profile_step": leaf("integer", "Training step at which the profiler runs.", 1, x_unchecked=True),
        "module_depth": leaf("integer", "Depth of the module tree printed in the profile (-1 prints all levels).",
                             -1, x_unchecked=True),
        "top_modules": leaf("integer", "Number of top modules listed in the aggregated profile.", 1, x_unchecked=True),
        "detailed": leaf("boolean", "Print the detailed per-module profile.", True, x_unchecked=True),
        "output_file": leaf(["string", "null"], "File the profile is written to; null prints to stdout.",
                            None, x_unchecked=True),
    },
)

# autotuning/config.py DeepSpeedAutotuningConfig._initialize and get_model_info_config
# (defaults in autotuning/constants.py; metric/tuner_type are used in autotuning/autotuner.py)
AUTOTUNING = section(
    "Settings for the DeepSpeed autotuner (the `deepspeed --autotuning` launcher); unknown keys are ignored.",
    "autotuning/config.py DeepSpeedAutotuningConfig._initialize",
    {
        "enabled": leaf("boolean",
                        "Make the engine record the metric between start_profile_step and end_profile_step and exit "
                        "(set by the autotuner for its experiments).",
                        False, x_unchecked=True),
        "fast": leaf("boolean", "Tune only the micro-batch size per ZeRO stage instead of the full ZeRO tuning space.",
                     True, x_unchecked=True),
        "results_dir": leaf("string", "Directory for autotuning results (must not be empty).",
                            "autotuning_results", min_length=1),
        "exps_dir": leaf("string", "Directory for autotuning experiment configs (must not be empty).",
                         "autotuning_exps", min_length=1),
        "overwrite": leaf("boolean", "Delete existing results_dir and exps_dir before tuning.", True, x_unchecked=True),
        "start_profile_step": leaf("integer",
                                   "Step at which the engine starts measuring the metric in an autotuning experiment.",
                                   3, x_unchecked=True),
        "end_profile_step": leaf("integer", "Step at which the engine stops measuring, writes the metric and exits.",
                                 5, x_unchecked=True),
        "metric": leaf("string",
                       "Metric the autotuner optimises (latency is minimised, others maximised); the engine writes "
                       "'latency', 'throughput' and 'FLOPS_per_gpu', so 'flops' is declared but never found.",
                       "throughput",
                       enum=["latency", "throughput", "flops"], x_unchecked=True),
        "metric_path": leaf(["string", "null"],
                            "File the engine writes the metric to; null means ./autotuning_metric.json.",
                            None, x_unchecked=True),
        "tuner_type": leaf("string", "Search strategy; any other value silently falls back to gridsearch.",
                           "gridsearch",
                           enum=["gridsearch", "random", "model_based"], x_unchecked=True),
        "tuner_early_stopping": leaf("integer", "Stop a tuner after this many experiments without improvement.",
                                     5, x_unchecked=True),
        "tuner_num_trials": leaf("integer", "Maximum number of experiments per tuner.", 50, x_unchecked=True),
        "arg_mappings": leaf(["object", "null"],
                             "Map from ds_config keys to training-script arguments that the autotuner should set too.",
                             None, x_unchecked=True),
        "model_info": section(
            "Model facts for the autotuner; when absent the autotuner profiles the model first; unknown keys are "
            "ignored.",
            "autotuning/config.py get_model_info_config",
            {
                "profile": leaf("boolean",
                                "Make the engine profile the model (parameter count etc.), write model_info_path and "
                                "exit.",
                                False, x_unchecked=True),
                "num_params": leaf(["integer", "null"], "Number of model parameters.", None, x_unchecked=True),
                "hidden_size": leaf(["integer", "null"], "Model hidden size.", None, x_unchecked=True),
                "num_layers": leaf(["integer", "null"], "Number of model layers.", None, x_unchecked=True),
            },
            nullable=True, default=None,
        ),
        "model_info_path": leaf(["string", "null"],
                                "File the profiled model info is written to; null means ./autotuning_model_info.json.",
                                None, x_unchecked=True),
        "mp_size": leaf("integer", "Model-parallel size assumed by the autotuner's memory estimate.",
                        1, x_unchecked=True),
        "max_train_batch_size": leaf(["integer", "null"], "Upper bound on train_batch_size explored by the autotuner.",
                                     None, x_unchecked=True),
        "min_train_batch_size": leaf("integer", "Lower bound on train_batch_size explored by the autotuner.",
                                     1, x_unchecked=True),
        "max_train_micro_batch_size_per_gpu": leaf("integer",
                                                   "Upper bound on the micro-batch size explored by the autotuner.",
                                                   1024, x_unchecked=True),
        "min_train_micro_batch_size_per_gpu": leaf("integer",
                                                   "Lower bound on the micro-batch size explored by the autotuner.",
                                                   1, x_unchecked=True),
        "num_tuning_micro_batch_sizes": leaf("integer", "Number of micro-batch sizes tried per ZeRO stage.",
                                             3, x_unchecked=True),
    },
)

# runtime/swap_tensor/aio_config.py get_aio_config (defaults in runtime/swap_tensor/constants.py)
AIO = section(
    "Asynchronous I/O (libaio / GDS) settings for NVMe offload and the fast checkpoint writer; null means defaults; "
    "unknown keys are ignored.",
    "runtime/swap_tensor/aio_config.py get_aio_config",
    {
        "block_size": leaf("integer", "I/O block size in bytes.", 1048576, x_unchecked=True),
        "queue_depth": leaf("integer", "I/O queue depth.", 8, x_unchecked=True),
        "intra_op_parallelism": leaf("integer", "Number of I/O threads per request.", 1, x_unchecked=True),
        "single_submit": leaf("boolean", "Submit requests to storage one at a time instead of as a batch.",
                              False, x_unchecked=True),
        "overlap_events": leaf("boolean", "Overlap submission of new requests with completion of earlier ones.",
                               True, x_unchecked=True),
        "use_gds": leaf("boolean", "Use NVIDIA GPUDirect Storage (asserts a CUDA accelerator).",
                        False, x_unchecked=True),
    },
    nullable=True,
)

# runtime/config.py get_checkpoint_params / get_checkpoint_tag_validation_mode /
# get_checkpoint_parallel_write_pipeline, and runtime/model_checkpointing/config.py
# get_checkpoint_config / get_checkpoint_writer_config (constants in runtime/model_checkpointing/constants.py)
CHECKPOINT = section(
    "Checkpoint saving and loading options; unknown keys are ignored.",
    "runtime/config.py get_checkpoint_params; runtime/model_checkpointing/config.py get_checkpoint_config",
    {
        "tag_validation": leaf("string",
                               "Check that all ranks save under the same tag: warn, ignore or fail (upper-cased, "
                               "invalid values raise DeepSpeedConfigError).",
                               "WARN",
                               ci_enum=["WARN", "IGNORE", "FAIL"]),
        "load_universal": leaf("boolean", "Load a universal checkpoint (one converted with ds_to_universal).",
                               False, x_unchecked=True),
        "use_node_local_storage": leaf("boolean",
                                       "Save on node-local storage: local rank 0 of every node writes instead of "
                                       "global rank 0 only.",
                                       False, x_unchecked=True),
        "parallel_write": section(
            "Parallel checkpoint writing options; unknown keys are ignored.",
            "runtime/config.py get_checkpoint_parallel_write_pipeline",
            {
                "pipeline_stage": leaf("boolean",
                                       "Let each pipeline stage write its own part of the checkpoint (must be true or "
                                       "false, else DeepSpeedConfigError).",
                                       False),
            },
        ),
        "checkpoint_serialization": leaf("boolean",
                                         "Use torch serialization in the fast checkpoint writer (false writes raw "
                                         "tensors).",
                                         True, x_unchecked=True),
        "writer": section(
            "Fast checkpoint writer; when present DeepSpeed uses the Fast (or Decoupled) checkpoint engine instead of "
            "torch.save; unknown keys are ignored.",
            "runtime/model_checkpointing/config.py get_checkpoint_writer_config",
            {
                "type": leaf("string", "Writer implementation (upper-cased and validated by assertion).",
                             "FAST", ci_enum=["MOCK", "PYTHON", "FAST"]),
                "io_buffer_size": leaf("integer", "Size in bytes of the pinned I/O buffer.",
                                       67108864, x_unchecked=True),
                "io_buffer_double": leaf("boolean", "Double-buffer I/O so copying and writing overlap.",
                                         True, x_unchecked=True),
                "show_statistics": leaf("boolean", "Print write throughput statistics.", False, x_unchecked=True),
                "data_parallel": leaf(["string", "null"],
                                      "Unit over which data-parallel ranks share the write (upper-cased and "
                                      "validated); null writes from rank 0 only.",
                                      None,
                                      ci_enum=["REPLICA", "SOCKET", "MACHINE"]),
                "decoupled": leaf("boolean", "Write checkpoints from a separate process (DecoupledCheckpointEngine).",
                                  False, x_unchecked=True),
                "io_multiplier": leaf("integer", "Multiplier on the number of parallel writers.", 1, x_unchecked=True),
            },
            nullable=True, default=None,
        ),
    },
)

# runtime/config.py DeepSpeedConfig._initialize_params (data_types block; constants in
# runtime/constants.py); dtype strings are resolved by DtypeEnum in runtime/engine.py get_data_types
DATA_TYPES = section(
    "Data types for gradient accumulation, parameters and buffers; unknown keys are ignored.",
    "runtime/config.py DeepSpeedConfig._initialize_params (data_types)",
    {
        "grad_accum_dtype": leaf(["string", "null"],
                                 "Dtype gradients are accumulated in; null means the model dtype (resolved with "
                                 "DtypeEnum at engine init).",
                                 None,
                                 enum_from=DTYPE_ENUM, nullable_enum=True),
        "param_dtype": leaf(["string", "null"],
                            "Dtype parameters are cast to; must agree with fp16/bf16.enabled (AssertionError at "
                            "engine init) and null follows them.",
                            None,
                            enum_from=DTYPE_ENUM, nullable_enum=True),
        "buffer_dtype": leaf(["string", "null"],
                             "Dtype module buffers are cast to; null keeps the dtype buffers were loaded with.",
                             None,
                             enum_from=DTYPE_ENUM, nullable_enum=True),
        "keep_in_fp32_modules": leaf(["string", "array"],
                                     "Buffers kept in fp32 under fp16/bf16: 'auto' uses the transformers model's "
                                     "_keep_in_fp32_modules(_strict), a list gives name patterns (anything else "
                                     "raises DeepSpeedConfigError).",
                                     "auto",
                                     pattern="^auto$", items={"type": "string"}),
    },
)

# runtime/config.py get_pipeline_config (the default dict); runtime/pipe/engine.py
# PipelineEngine.__init__ reads pipe_partitioned, grad_partitioned, use_reentrant,
# activation_checkpoint_interval. stages/partition/seed_layers are only defaults: nothing reads
# them from the config (PipelineModule takes them as constructor arguments).
PIPELINE = section(
    "Pipeline-engine options; every key is copied into the pipeline config, unknown keys are ignored.",
    "runtime/config.py get_pipeline_config; runtime/pipe/engine.py PipelineEngine.__init__",
    {
        "stages": leaf(["string", "integer"],
                       "Number of pipeline stages; only a default in DeepSpeed 0.19.8, PipelineModule(num_stages=...) "
                       "decides.",
                       "auto",
                       pattern="^auto$", x_unused=True),
        "partition": leaf("string",
                          "Layer partitioning method; only a default in DeepSpeed 0.19.8, "
                          "PipelineModule(partition_method=...) decides.",
                          "best", x_unused=True),
        "seed_layers": leaf("boolean",
                            "Use a different seed per layer; only a default in DeepSpeed 0.19.8, "
                            "PipelineModule(seed_layers=...) decides.",
                            False, x_unused=True),
        "activation_checkpoint_interval": leaf("integer",
                                               "Checkpoint activations every this many layers of the PipelineModule "
                                               "(0 keeps the module's own setting).",
                                               0, x_unchecked=True),
        "pipe_partitioned": leaf("boolean",
                                 "Partition activations sent between pipeline stages across tensor-parallel ranks "
                                 "(asserted to be a bool).",
                                 True),
        "grad_partitioned": leaf("boolean",
                                 "Partition gradients sent between pipeline stages across tensor-parallel ranks "
                                 "(asserted to be a bool).",
                                 True),
        "use_reentrant": leaf(["boolean", "null"],
                              "Use reentrant activation checkpointing; false selects non_reentrant_checkpoint, null "
                              "means true.",
                              None, x_unchecked=True),
    },
)

_CURRICULUM_METRIC = section(
    "One curriculum metric; unknown keys are ignored.",
    "runtime/data_pipeline/data_sampling/data_sampler.py DeepSpeedDataSampler.__init__; "
    "runtime/data_pipeline/curriculum_scheduler.py CurriculumScheduler.__init__",
    {
        "index_to_sample_path": leaf("string",
                                     "Path prefix of the data analyzer's index_to_sample files (used unless "
                                     "clustering_type is single_cluster).",
                                     no_default="read only when clustering is used"),
        "index_to_metric_path": leaf("string",
                                     "Path prefix of the data analyzer's index_to_metric files (used for value-based "
                                     "difficulty).",
                                     no_default="read only for value-based difficulty"),
        "difficulty_type": leaf("string", "How difficulty is measured: by metric value or by percentile.",
                                enum=["value", "percentile"],
                                no_default="KeyError when curriculum learning is enabled"),
        "clustering_type": leaf("string",
                                "'single_cluster' uses all data at every difficulty; any other value (DeepSpeed's "
                                "docs use 'schedule_based') clusters samples by difficulty.",
                                examples=["single_cluster", "schedule_based"], no_default="KeyError when curriculum "
                                                                                          "learning is enabled"),
        "min_difficulty": leaf("number", "Difficulty at the start of the schedule.",
                               no_default="KeyError when curriculum learning is enabled"),
        "max_difficulty": leaf("number", "Difficulty at the end of the schedule.",
                               no_default="KeyError when curriculum learning is enabled"),
        "schedule_type": leaf("string",
                              "Difficulty schedule; 'custom' needs set_custom_curriculum_learning_schedule, others "
                              "raise RuntimeError.",
                              enum=["fixed_discrete", "fixed_root", "fixed_linear", "custom"],
                              no_default="asserted present when curriculum learning is enabled"),
        "schedule_config": section(
            "Parameters of the difficulty schedule; which keys are required depends on schedule_type; unknown keys are "
            "ignored.",
            "runtime/data_pipeline/curriculum_scheduler.py CurriculumScheduler.__init__",
            {
                "difficulty": leaf("array", "fixed_discrete: difficulty levels, one more than max_step.",
                                   items={"type": "number"}, no_default="asserted present for fixed_discrete"),
                "max_step": leaf("array", "fixed_discrete: last step of each difficulty level but the final one.",
                                 items={"type": "integer"}, no_default="asserted present for fixed_discrete"),
                "total_curriculum_step": leaf("integer",
                                              "fixed_root/fixed_linear: steps to go from min to max difficulty.",
                                              no_default="asserted present for fixed_root and fixed_linear"),
                "difficulty_step": leaf("integer",
                                        "fixed_root/fixed_linear: difficulty is a multiple of this (8 or 16 keeps "
                                        "Tensor Cores busy; other values warn).",
                                        no_default="asserted present for fixed_root and fixed_linear"),
                "root_degree": leaf("number", "fixed_root: degree of the root function (2 = square root).",
                                    no_default="asserted present for fixed_root"),
            },
        ),
    },
)

# runtime/data_pipeline/config.py get_data_efficiency_config and helpers (constants in
# runtime/data_pipeline/constants.py); sub-keys are read in data_sampler.py,
# curriculum_scheduler.py, variable_batch_size_and_lr.py, data_routing/scheduler.py,
# data_routing/basic_layer.py and runtime/engine.py random_ltd_initialize.
DATA_EFFICIENCY = section(
    "Data efficiency library: curriculum-learning data sampling, dynamic batching and random layerwise token dropping; "
    "unknown keys are ignored.",
    "runtime/data_pipeline/config.py get_data_efficiency_config",
    {
        "enabled": leaf("boolean", "Enable the data efficiency library.", False, x_unchecked=True),
        "seed": leaf("integer", "Random seed for data sampling.", 1234, x_unchecked=True),
        "data_sampling": section(
            "Data sampling options; unknown keys are ignored.",
            "runtime/data_pipeline/config.py get_data_sampling",
            {
                "enabled": leaf("boolean", "Use DeepSpeed's data sampler.", False, x_unchecked=True),
                "num_epochs": leaf("integer", "Number of epochs the sampler plans for.", 1000, x_unchecked=True),
                "num_workers": leaf("integer", "Data loader worker processes.", 0, x_unchecked=True),
                "pin_memory": leaf("boolean", "Pin data loader memory.", False, x_unchecked=True),
                "curriculum_learning": section(
                    "Curriculum learning by data difficulty (replaces the removed top-level curriculum_learning); "
                    "unknown keys are ignored.",
                    "runtime/data_pipeline/config.py get_curriculum_learning",
                    {
                        "enabled": leaf("boolean",
                                        "Enable curriculum learning; then curriculum_metrics is required "
                                        "(AssertionError).",
                                        False, x_unchecked=True),
                        "data_cluster_path": leaf("string", "Directory where the sampler stores data clusters.",
                                                  no_default="KeyError when curriculum learning is enabled"),
                        "curriculum_metrics": mapping(
                            "Curriculum metrics by name; each value configures one metric.",
                            "runtime/data_pipeline/data_sampling/data_sampler.py DeepSpeedDataSampler.__init__",
                            _CURRICULUM_METRIC,
                        ),
                    },
                    required_if_enabled=("curriculum_metrics",),
                ),
                "dynamic_batching": section(
                    "Variable batch size and learning rate by sequence length; unknown keys are ignored.",
                    "runtime/data_pipeline/config.py get_dynamic_batching",
                    {
                        "enabled": leaf("boolean",
                                        "Enable dynamic batching (bool() of the value); then max_tokens is required "
                                        "(AssertionError).",
                                        False, x_unchecked=True),
                        "metrics_path": leaf("string",
                                             "Directory of the data analyzer's seqlen metric files (computed there if "
                                             "missing).",
                                             no_default="KeyError when the dynamic-batching data loader is built"),
                        "lr_scaling_method": leaf("string", "How the learning rate scales with the batch size.",
                                                  "linear", enum=["linear", "sqrt", "none"], x_unchecked=True),
                        "min_batch_size": leaf("integer", "Smallest batch (int() of the value).", 1, x_unchecked=True),
                        "max_batch_size": leaf(["integer", "null"],
                                               "Largest batch (int() of the value); null means unbounded.",
                                               None, x_unchecked=True),
                        "sequence_picking_order": leaf("string", "Order in which sequences are packed into batches.",
                                                       "dataloader", enum=["random", "seqlen", "dataloader"],
                                                       x_unchecked=True),
                        "max_tokens": leaf("integer", "Token budget per batch (int() of the value).",
                                           no_default="asserted present when dynamic batching is enabled"),
                        "verbose": leaf("boolean", "Print batching statistics.", False, x_unchecked=True),
                    },
                    required_if_enabled=("max_tokens",),
                ),
            },
        ),
        "data_routing": section(
            "Data routing options; unknown keys are ignored.",
            "runtime/data_pipeline/config.py get_data_routing",
            {
                "enabled": leaf("boolean", "Enable data routing.", False, x_unchecked=True),
                "random_ltd": section(
                    "Random layerwise token dropping (random-LTD); unknown keys are ignored.",
                    "runtime/data_pipeline/config.py get_random_ltd; runtime/data_pipeline/data_routing/scheduler.py "
                    "RandomLTDScheduler",
                    {
                        "enabled": leaf("boolean", "Enable random-LTD.", False, x_unchecked=True),
                        "total_layer_num": leaf("integer", "Number of transformer layers in the model.",
                                                no_default="KeyError when random-LTD is enabled"),
                        "random_ltd_layer_num": leaf("integer",
                                                     "Number of layers that drop tokens; must equal the length of "
                                                     "random_ltd_layer_id (ValueError).",
                                                     no_default="KeyError when random-LTD is enabled"),
                        "random_ltd_layer_id": leaf("array", "Indices of the layers that drop tokens.",
                                                    items={"type": "integer"}, no_default="KeyError when random-LTD is "
                                                                                          "enabled"),
                        "model_mask_name": leaf(["string", "null"],
                                                "Name of the attention-mask argument in the layer's forward.",
                                                no_default="KeyError when random-LTD is enabled"),
                        "model_type": leaf("string", "Model family, e.g. 'decoder' or 'encoder'.",
                                           no_default="KeyError when random-LTD is enabled"),
                        "hidden_state_order": leaf("string", "Layout of hidden states passed to the layer.",
                                                   enum=["batch_seq_dim", "seq_batch_dim"],
                                                   no_default="KeyError when random-LTD is enabled"),
                        "random_ltd_schedule": section(
                            "Schedule of the number of kept tokens; unknown keys are ignored.",
                            "runtime/data_pipeline/data_routing/scheduler.py RandomLTDScheduler.reset_to_init",
                            {
                                "min_value": leaf("integer", "Kept sequence length at the start.",
                                                  no_default="KeyError when random-LTD is enabled"),
                                "max_value": leaf("integer", "Kept sequence length at the end (the full length).",
                                                  no_default="KeyError when random-LTD is enabled"),
                                "schedule_type": leaf("string", "Schedule shape; other values raise RuntimeError.",
                                                      enum=["fixed_linear"], no_default="KeyError when random-LTD is "
                                                                                        "enabled"),
                                "schedule_config": section(
                                    "Schedule parameters; unknown keys are ignored.",
                                    "runtime/data_pipeline/data_routing/scheduler.py "
                                    "BaseScheduler.__fixed_root_get_value",
                                    {
                                        "seq_per_step": leaf("integer", "Kept length grows in multiples of this.",
                                                             no_default="KeyError when random-LTD is enabled"),
                                        "require_steps": leaf("integer", "Steps to go from min_value to max_value.",
                                                              no_default="KeyError when random-LTD is enabled"),
                                    },
                                ),
                            },
                        ),
                        "layer_token_lr_schedule": section(
                            "Learning-rate schedule by consumed layer tokens; enabling it raises (not implemented in "
                            "DeepSpeed 0.19.8); unknown keys are ignored.",
                            "runtime/data_pipeline/data_routing/scheduler.py RandomLTDScheduler.__init__",
                            {
                                "enabled": leaf("boolean",
                                                "Must stay false: true raises NotImplementedError/ValueError at "
                                                "engine init.",
                                                False, const=False),
                                "total_layer_tokens": leaf("integer", "Total layer tokens of the schedule.",
                                                           no_default="not implemented"),
                                "warmup_type": leaf("string", "Warm-up shape.", no_default="not implemented"),
                                "warmup_layer_tokens": leaf("integer", "Warm-up length in layer tokens.",
                                                            no_default="not implemented"),
                            },
                        ),
                    },
                    required_if_enabled=("total_layer_num", "random_ltd_layer_num", "random_ltd_layer_id",
                                         "model_mask_name", "model_type", "hidden_state_order", "random_ltd_schedule"),
                ),
            },
        ),
    },
)

# runtime/config.py get_torch_autocast_enabled / get_torch_autocast_dtype /
# get_lower_precision_safe_modules (constants in runtime/constants.py)
TORCH_AUTOCAST = section(
    "torch.autocast mixed precision, an alternative to fp16/bf16; unknown keys are ignored.",
    "runtime/config.py get_torch_autocast_enabled, get_torch_autocast_dtype, get_lower_precision_safe_modules",
    {
        "enabled": leaf("boolean", "Run the forward pass under torch.autocast.", False, x_unchecked=True),
        "dtype": leaf(["string", "null"],
                      "Lower-precision dtype for autocast (DtypeEnum name; others raise ValueError); null uses "
                      "DeepSpeed's default.",
                      None,
                      enum_from=DTYPE_ENUM, nullable_enum=True),
        "lower_precision_safe_modules": leaf(["array", "null"],
                                             "Fully qualified module classes run in lower precision (non-strings "
                                             "raise ValueError); null uses DeepSpeed's default list.",
                                             None,
                                             items={"type": "string"}),
    },
)

# module_inject/auto_ep_config.py parse_autoep_config (read) and validate_autoep_config
# (checked at engine init when enabled); types from module_inject/auto_ep_presets/base.py AutoEPConfig
EXPERT_PARALLEL = section(
    "AutoEP: automatic expert parallelism for MoE models; null or {} means disabled; unknown keys are ignored.",
    "module_inject/auto_ep_config.py parse_autoep_config, validate_autoep_config",
    {
        "enabled": leaf("boolean", "Replace detected MoE layers with AutoEP expert-parallel layers.",
                        False, x_unchecked=True),
        "autoep_size": leaf("integer",
                            "Expert-parallel group size; must divide each layer's number of experts (ValueError).",
                            1, minimum=1),
        "expert_tensor_parallel_size": leaf("integer", "Tensor-parallel size inside each expert.", 1, minimum=1),
        "validate_folding_routing": leaf("boolean",
                                         "Check routing consistency of the folded EP/TP layout (must be a bool, else "
                                         "ValueError).",
                                         False),
        "async_split_plan": leaf("boolean",
                                 "Compute the token split plan asynchronously (must be a bool; unsupported with "
                                 "AutoTP folding).",
                                 False),
        "preset_model": leaf(["string", "null"],
                             "Built-in MoE model preset; unknown names raise ValueError; null auto-detects.",
                             None,
                             enum_from="deepspeed.module_inject.auto_ep_presets.registry:PRESET_MODELS",
                             nullable_enum=True),
        "moe_layer_pattern": leaf(["string", "null"], "Regex matching MoE layer module names (custom preset).",
                                  None, x_unchecked=True),
        "expert_pattern": leaf(["string", "null"], "Attribute name of the experts container inside an MoE layer.",
                               None),
        "router_pattern": leaf(["string", "null"], "Attribute name of the router (gate) inside an MoE layer.", None),
        "use_grouped_mm": leaf("boolean", "Run experts with torch._grouped_mm instead of a sequential loop.",
                               True, x_unchecked=True),
        "disable_triton_grouped_mm": leaf("boolean", "Do not use the Triton grouped-GEMM kernel.",
                                          False, x_unchecked=True),
        "route_norm": leaf(["boolean", "null"], "Renormalise the top-k routing weights; null follows the preset.",
                           None, x_unchecked=True),
        "route_scale": leaf("number", "Scale applied to routing weights.", 1.0, x_unchecked=True),
        "score_apply": leaf("string", "Apply routing scores before or after the experts; auto follows the preset.",
                            "auto", enum=["auto", "pre", "post"]),
        "combine_impl": leaf("string", "Implementation of the weighted combine of expert outputs.",
                             "auto", enum=["auto", "weighted_sum", "fused_weighted_sum", "legacy_bmm"]),
        "row_weighting_impl": leaf("string",
                                   "Implementation of per-row routing weighting ('fused' needs comm_backend deepep "
                                   "and autoep_size > 1).",
                                   "auto", enum=["auto", "eager", "fused"]),
        "gate_up_impl": leaf("string",
                             "Run gate and up projections separately or as one grouped GEMM ('fused' needs "
                             "use_grouped_mm).",
                             "separate", enum=["separate", "fused"]),
        "comm_backend": leaf("string", "All-to-all backend for token dispatch.", "comm", enum=["comm", "deepep"]),
        "comm_num_sm": leaf("integer", "Streaming multiprocessors reserved for DeepEP communication.",
                            12, minimum=1, x_int_literal=True),
        "comm_qp_margin": leaf("integer", "Extra DeepEP queue pairs.", 4, minimum=0, x_int_literal=True),
        "comm_max_tokens_per_rank": leaf("integer",
                                         "Largest number of tokens one rank can route; must be positive with "
                                         "comm_backend deepep.",
                                         0, minimum=0, x_int_literal=True),
        "num_expert_groups": leaf(["integer", "null"], "Number of expert groups for group-limited routing.",
                                  None, minimum=1),
        "num_limited_groups": leaf(["integer", "null"],
                                   "Number of groups each token may route to (needs num_expert_groups).",
                                   None, minimum=1),
        "score_func": leaf("string", "Router score function; auto follows the preset.",
                           "auto", enum=["auto", "softmax", "sigmoid"]),
        "top_k": leaf(["integer", "string"], "Experts per token; 'auto' reads it from the model config.",
                      "auto", pattern="^auto$", x_unchecked=True),
        "load_balance_coeff": leaf("null", "Not supported by AutoEP: any non-null value raises.", None),
        "routed_scaling_factor": leaf(["number", "string"],
                                      "Scale on routed expert outputs; 'auto' follows the preset (other strings raise "
                                      "ValueError).",
                                      "auto", pattern="^auto$"),
        "expert_w1": leaf(["string", "null"], "Attribute name of the first expert weight.", None),
        "expert_w2": leaf(["string", "null"], "Attribute name of the second expert weight.", None),
        "expert_w3": leaf(["string", "null"],
                          "Attribute name of the third expert weight; null means gate and up are fused, absent uses "
                          "the preset.",
                          no_default="absent means the preset's value"),
        "num_experts_attr": leaf(["string", "null"], "model.config attribute holding the number of experts.", None),
        "top_k_attr": leaf(["string", "null"],
                           "model.config attribute holding top-k (ignored when top_k is an integer).",
                           None),
        "has_shared_experts": leaf(["boolean", "null"],
                                   "Whether MoE layers have shared experts; null follows the preset.",
                                   None),
        "shared_experts_pattern": leaf(["string", "null"],
                                       "Attribute name of the shared experts (needs has_shared_experts).",
                                       None),
        "shared_experts_gate_pattern": leaf(["string", "null"],
                                            "Attribute name of the shared-experts gate (needs has_shared_experts).",
                                            None),
        "expert_activation": leaf(["string", "null"], "Expert activation form; null follows the preset.", None,
                                  enum_from="deepspeed.moe.ep_experts:EXPERT_ACTIVATIONS", nullable_enum=True),
    },
    nullable=True,
)

# utils/config.py get_timers_config: only timers.throughput is read (a pydantic model).
TIMERS = section(
    "Engine timers; only 'throughput' is read, other keys are ignored.",
    "utils/config.py get_timers_config",
    {
        "throughput": model("deepspeed.utils.config:DeepSpeedThroughputTimerConfig",
                            "Throughput timer settings (validated; unknown keys raise)."),
    },
)

# runtime/config.py get_optimizer_name / get_optimizer_params / get_optimizer_legacy_fusion;
# the optimizer is built in runtime/engine.py _configure_basic_optimizer.
OPTIMIZER = section(
    "Optimizer DeepSpeed builds itself; unknown keys are ignored, but unknown params raise TypeError at engine init.",
    "runtime/config.py get_optimizer_name, get_optimizer_params; runtime/engine.py _configure_basic_optimizer",
    {
        "type": leaf(["string", "null"],
                     "Optimizer: a DeepSpeed name (case-insensitive) or a torch.optim class name (case-sensitive); "
                     "anything else fails the engine's 'not a supported DeepSpeed Optimizer' assertion.",
                     None,
                     generated="optimizer_type"),
        "params": params("optimizer_params", "Keyword arguments for the optimizer class DeepSpeed constructs for "
                                             "'type' (see $defs/optimizer_params); an unknown key raises TypeError at "
                                             "engine init and max_grad_norm raises ValueError."),
        "legacy_fusion": leaf("boolean", "Use the legacy fused-Adam step in FP16_Optimizer.", False, x_unchecked=True),
    },
)

# runtime/config.py get_scheduler_name / get_scheduler_params; runtime/engine.py
# _scheduler_from_config calls scheduler(optimizer, **params), so params=None raises TypeError.
SCHEDULER = section(
    "Learning-rate scheduler DeepSpeed builds itself; unknown keys are ignored, unknown params raise TypeError at "
    "engine init.",
    "runtime/config.py get_scheduler_name, get_scheduler_params; runtime/engine.py _scheduler_from_config",
    {
        "type": leaf(["string", "null"],
                     "Scheduler class: a name in deepspeed.runtime.lr_schedules or torch.optim.lr_scheduler "
                     "(case-sensitive); others fail 'DeepSpeed does not recognize LR scheduler'.",
                     None,
                     generated="scheduler_type"),
        "params": params("scheduler_params", "Keyword arguments for the scheduler class (see $defs/scheduler_params); "
                                             "required when type is set, since DeepSpeed calls scheduler(optimizer, "
                                             "**params)."),
    },
    dependentRequired={"type": ["params"]},
)

# --------------------------------------------------------------------------------------------
# Top level: runtime/config.py DeepSpeedConfig._initialize_params (in its order), then the keys
# read elsewhere. Defaults are runtime/constants.py *_DEFAULT unless noted.
# --------------------------------------------------------------------------------------------

_BATCH_RULE = ("tbs = mbs x gas x data-parallel world size; two of the three derive the third "
               "(runtime/config.py _set_batch_related_parameters)")

TOP_LEVEL = {
    "train_batch_size": leaf(["integer", "null"], "Global batch size per optimizer step: "
                             + _BATCH_RULE + ".", None, exclusive_minimum=0),
    "train_micro_batch_size_per_gpu": leaf(["integer", "null"],
                                           "Batch size of one forward/backward pass on one GPU; at least one of this "
                                           "and train_batch_size is required.",
                                           None, exclusive_minimum=0),
    "gradient_accumulation_steps": leaf(["integer", "null"],
                                        "Micro-batches accumulated before each optimizer step; derived from the other "
                                        "two batch keys when absent.",
                                        None, exclusive_minimum=0),
    "managed_gradient_accumulation": leaf("boolean",
                                          "DeepSpeed tracks micro-steps and steps only on the accumulation boundary; "
                                          "false lets every step() apply an update.",
                                          True, x_unchecked=True),
    "steps_per_print": leaf(["integer", "null"],
                            "Print training progress every this many steps; null disables the periodic report.",
                            None, exclusive_minimum=0, x_unchecked=True),
    "dump_state": leaf("boolean", "Print the engine state after initialisation.", False, x_unchecked=True),
    "disable_python_gc": leaf("boolean", "Disable Python's automatic cyclic garbage collector during training.",
                              False, x_unchecked=True),
    "disable_allgather": leaf("boolean", "Disable the all-gather in the legacy fp16 path.", False, x_unchecked=True),
    "communication_data_type": leaf(["string", "null"],
                                    "Dtype for gradient communication (lower-cased; others raise ValueError); null "
                                    "derives it from the training precision.",
                                    None,
                                    ci_enum=["fp16", "bf16", "fp32"]),
    "seq_parallel_communication_data_type": leaf(["string", "null"],
                                                 "Dtype for gradient reduction under sequence parallelism "
                                                 "(lower-cased; others raise ValueError).",
                                                 "fp32",
                                                 ci_enum=["fp16", "bf16", "fp32"]),
    "prescale_gradients": leaf("boolean", "Scale gradients before the all-reduce instead of after it.",
                               False, x_unchecked=True),
    "gradient_predivide_factor": leaf("number",
                                      "Divide gradients by this before the all-reduce and by world_size/factor after "
                                      "it (limits fp16 overflow).",
                                      1.0, x_unchecked=True),
    "gradient_allreduce_op": leaf("string",
                                  "Reduce data-parallel gradients by mean or sum (lower-cased, validated); sum is "
                                  "rejected with ZeRO-3, ZenFlow and DeepCompile.",
                                  "mean",
                                  ci_enum=["mean", "sum"]),
    "zero_optimization": model("deepspeed.runtime.zero.config:DeepSpeedZeroConfig",
                               "ZeRO optimizer settings (validated; unknown keys raise); the legacy true/false form "
                               "means stage 1/0."),
    "activation_checkpointing": ACTIVATION_CHECKPOINTING,
    "comms_logger": model("deepspeed.comm.config:CommsLoggerConfig",
                          "Communication logger (validated; unknown keys raise); present means the logger is "
                          "configured."),
    "tensorboard": model("deepspeed.monitor.config:TensorBoardConfig", "TensorBoard monitor (validated; unknown keys "
                                                                       "raise)."),
    "wandb": model("deepspeed.monitor.config:WandbConfig", "Weights & Biases monitor (validated; unknown keys raise)."),
    "csv_monitor": model("deepspeed.monitor.config:CSVConfig", "CSV file monitor (validated; unknown keys raise)."),
    "comet": model("deepspeed.monitor.config:CometConfig", "Comet monitor (validated; unknown keys raise)."),
    "gradient_clipping": leaf("number",
                              "Clip the global gradient norm to this value (0 disables clipping); DeepSpeed stores "
                              "whatever is given without a type check.",
                              1.0, minimum=0, x_unchecked=True),
    "fp16": model("deepspeed.runtime.precision_config:DeepSpeedFP16Config",
                  "fp16 mixed precision with loss scaling (validated; unknown keys raise); cannot be enabled together "
                  "with bf16."),
    "bf16": model("deepspeed.runtime.precision_config:DeepSpeedBF16Config",
                  "bf16 mixed precision (validated; unknown keys raise); null or absent falls back to the legacy "
                  "'bfloat16' section.", nullable=True),
    "bfloat16": model("deepspeed.runtime.precision_config:DeepSpeedBF16Config",
                      "Legacy spelling of bf16, read only when bf16 is absent or null "
                      "(validated; unknown keys raise)."),
    "torch_autocast": TORCH_AUTOCAST,
    "optimizer": OPTIMIZER,
    "zero_allow_untested_optimizer": leaf("boolean",
                                          "Allow ZeRO with an optimizer outside ZERO_SUPPORTED_OPTIMIZERS (otherwise "
                                          "an AssertionError at engine init).",
                                          False, x_unchecked=True),
    "zero_force_ds_cpu_optimizer": leaf("boolean",
                                        "With optimizer offload, reject a client optimizer that is not "
                                        "DeepSpeedCPUAdam/DeepSpeedCPULion (ZeRORuntimeException).",
                                        True, x_unchecked=True),
    "scheduler": SCHEDULER,
    "flops_profiler": FLOPS_PROFILER,
    # runtime/config.py DeepSpeedConfig._initialize_params: get_wall_clock_breakdown(...) | flops_profiler.enabled
    "wall_clock_breakdown": leaf("boolean",
                                 "Time forward, backward and step and print the breakdown every steps_per_print steps.",
                                 False, x_unchecked=True, x_operand_types=["boolean", "integer"]),
    "memory_breakdown": leaf("boolean", "Print device memory usage at key points of each step.",
                             False, x_unchecked=True),
    "autotuning": AUTOTUNING,
    "use_data_before_expert_parallelism": leaf("boolean",
                                               "Build expert-data-parallel groups with data-parallel ranks adjacent "
                                               "before expert-parallel ones.",
                                               False, x_unchecked=True),
    "hybrid_engine": model("deepspeed.runtime.config:HybridEngineConfig",
                           "Hybrid engine for RLHF (training plus fast generation, DeepSpeed-Chat) (validated; unknown "
                           "keys raise)."),
    "pipeline": PIPELINE,
    "data_efficiency": DATA_EFFICIENCY,
    "checkpoint": CHECKPOINT,
    "data_types": DATA_TYPES,
    "aio": AIO,
    "dataloader_drop_last": leaf("boolean", "Drop the last incomplete batch in data loaders built by deepspeed_io().",
                                 False, x_unchecked=True),
    "log_level": leaf(["string", "null"],
                      "DeepSpeed logger level set at engine init (lower-cased; others raise ValueError); null keeps "
                      "the current level.",
                      None,
                      ci_enum_from="deepspeed.utils.logging:log_levels"),
    # datastates/config.py DeepSpeedDataStatesConfig: enabled when present and not False; the
    # value is handed to the DataStates-LLM checkpoint engine as its configuration.
    "datastates_ckpt": section(
        "DataStates-LLM asynchronous checkpointing: any value other than false enables it and is passed to the "
        "DataStates engine (falls back to torch.save if not installed).",
        "datastates/config.py DeepSpeedDataStatesConfig.__init__",
        {},
        extra_types=("boolean",), default=False,
    ),
    "weight_quantization": model("deepspeed.inference.config:WeightQuantConfig",
                                 "Weight quantization for ZeRO-3 initialisation and post-init quantization (validated; "
                                 "unknown keys raise); read only when present."),
    "compile": model("deepspeed.compile.config:CompileConfig", "torch.compile / DeepCompile settings (validated; "
                                                               "unknown keys raise)."),
    "timers": TIMERS,
    "tensor_parallel": model("deepspeed.runtime.tensor_parallel.config:TPTrainingConfig",
                             "AutoTP tensor-parallel training (validated; unknown keys raise)."),
    "expert_parallel": EXPERT_PARALLEL,
    # runtime/config.py _do_warning_check
    "vocabulary_size": leaf(["integer", "null"],
                            "Model vocabulary size, only used to warn when it is not a multiple of 8.",
                            None),
    # __init__.py initialize (mesh device) and runtime/config.py DeepSpeedConfig.__init__ (world size)
    "sequence_parallel_size": leaf("integer",
                                   "Ulysses sequence-parallel degree: data-parallel world size becomes world_size / "
                                   "this; with data_parallel_size it also builds the device mesh.",
                                   1, minimum=1, x_unchecked=True),
    "data_parallel_size": leaf("integer",
                               "Data-parallel degree of the device mesh; used only together with "
                               "sequence_parallel_size.",
                               no_default="used only when both mesh sizes are given", minimum=1, x_unchecked=True),
    # runtime/zero/config.py read_zero_config_deprecated: only read with zero_optimization: true.
    "allgather_size": leaf("integer",
                           "Legacy all-gather bucket size, read only with the boolean zero_optimization form.",
                           500000000, minimum=0,
                           deprecated=True, x_replaced_by="/zero_optimization/allgather_bucket_size",
                           x_deprecation="Read only by the deprecated boolean 'zero_optimization' form "
                                         "(runtime/zero/config.py read_zero_config_deprecated), which warns "
                                         "'DeepSpeedConfig: this format of ZeRO optimization setup is deprecated'; use "
                                         "zero_optimization.allgather_bucket_size."),
}

# --------------------------------------------------------------------------------------------
# Optimizers: runtime/engine.py _configure_basic_optimizer and get_optimizer_configuration.
# For each config type (lower-cased DeepSpeed name) the classes the engine may construct, in the
# order the engine prefers them, and under which settings. "offload" is the value of
# zero_use_cpu_optimizer() (offload_optimizer.device is cpu or nvme); None means regardless.
# "injected" are keywords the engine passes itself (a user key of that name collides: TypeError,
# unless the engine popped it first, see ENGINE_OPTIMIZER_KEYS). "kwargs_to" describes
# mup's MuAdam/MuAdamW/MuSGD, functions that forward **kwargs to a torch optimizer
# (microsoft/mup mup/optim.py; mup is not a DeepSpeed dependency, so it is not imported).
# --------------------------------------------------------------------------------------------

OPTIMIZER_VARIANTS = {
    "adagrad": [
        {"class": "torch.optim.Adagrad", "offload": False, "default": True, "when": "no optimizer offload"},
        {"class": "deepspeed.ops.adagrad.DeepSpeedCPUAdagrad", "offload": True, "default": True,
         "when": "optimizer offload (offload_optimizer.device cpu or nvme)"},
    ],
    "adam": [
        {"class": "deepspeed.ops.adam.FusedAdam", "offload": False, "default": True,
         "injected": ["adam_w_mode"], "when": "default"},
        {"class": "deepspeed.ops.adam.DeepSpeedCPUAdam", "offload": True, "default": True,
         "injected": ["adamw_mode", "fp32_optimizer_states"],
         "when": "optimizer offload (offload_optimizer.device cpu or nvme)"},
        {"class": "deepspeed.ops.adam.ZenFlowCPUAdam", "offload": True, "default": False,
         "injected": ["adamw_mode", "fp32_optimizer_states", "overlap_step"],
         "when": "optimizer offload with zero_optimization.zenflow"},
        {"class": "torch.optim.AdamW", "offload": None, "default": False,
         "when": "params.torch_adam true (adam_w_mode true, the default)"},
        {"class": "torch.optim.Adam", "offload": None, "default": False,
         "when": "params.torch_adam true and params.adam_w_mode false"},
    ],
    "adamw": [
        {"class": "deepspeed.ops.adam.FusedAdam", "offload": False, "default": True,
         "injected": ["adam_w_mode"], "when": "default"},
        {"class": "deepspeed.ops.adam.DeepSpeedCPUAdam", "offload": True, "default": True,
         "injected": ["adamw_mode", "fp32_optimizer_states"],
         "when": "optimizer offload (offload_optimizer.device cpu or nvme)"},
        {"class": "deepspeed.ops.adam.ZenFlowCPUAdam", "offload": True, "default": False,
         "injected": ["adamw_mode", "fp32_optimizer_states", "overlap_step"],
         "when": "optimizer offload with zero_optimization.zenflow"},
        {"class": "torch.optim.AdamW", "offload": None, "default": False, "when": "params.torch_adam true"},
    ],
    "lamb": [
        {"class": "deepspeed.ops.lamb.FusedLamb", "offload": None, "default": True, "when": "always"},
    ],
    "lion": [
        {"class": "deepspeed.ops.lion.FusedLion", "offload": False, "default": True, "when": "no optimizer offload"},
        {"class": "deepspeed.ops.lion.DeepSpeedCPULion", "offload": True, "default": True,
         "when": "optimizer offload (offload_optimizer.device cpu or nvme)"},
    ],
    "muadam": [
        {"class": "mup.MuAdam", "kwargs_to": "torch.optim.Adam", "required": ["lr"], "offload": None, "default": True,
         "when": "always (needs the mup package)"},
    ],
    "muadamw": [
        {"class": "mup.MuAdamW", "kwargs_to": "torch.optim.AdamW", "required": ["lr"], "offload": None, "default": True,
         "when": "always (needs the mup package)"},
    ],
    "musgd": [
        {"class": "mup.MuSGD", "kwargs_to": "torch.optim.SGD", "required": ["lr"], "offload": None, "default": True,
         "when": "always (needs the mup package)"},
    ],
    # Muon does not take the params as kwargs: runtime/engine.py _muon_param_groups copies only
    # the keys in MUON_PARAMS into param groups, so other keys are ignored (see MUON_PARAMS).
    "muon": [
        {"class": "deepspeed.runtime.zero.muon.muon_optimizer.MuonWithAuxAdam", "offload": None, "default": True,
         "when": "always (auxiliary Adam: FusedAdam, DeepSpeedCPUAdam with offload, torch AdamW/Adam with torch_adam)"},
    ],
}

# Keys the engine pops from optimizer.params before calling the class
# (runtime/engine.py _configure_basic_optimizer, get_optimizer_configuration).
_ADAM_ENGINE_KEYS = {
    "adam_w_mode": leaf("boolean",
                        "Use decoupled weight decay (AdamW); popped by the engine, and type 'adamw' forces it on.",
                        True),
    "torch_adam": leaf("boolean",
                       "Build torch.optim.AdamW/Adam instead of DeepSpeed's fused or CPU Adam; popped by the engine.",
                       False),
    "fp32_optimizer_states": leaf(["boolean", "null"],
                                  "CPU Adam only: keep Adam moments in fp32 (null means true; forced false by "
                                  "bf16.bf16_optimizer_states); popped by the engine.",
                                  None),
}
ENGINE_OPTIMIZER_KEYS = {"adam": _ADAM_ENGINE_KEYS, "adamw": _ADAM_ENGINE_KEYS, "muon": _ADAM_ENGINE_KEYS}

# runtime/engine.py _configure_basic_optimizer raises for this key whatever the optimizer.
REJECTED_OPTIMIZER_PARAMS = {
    "max_grad_norm": {
        "message": "'max_grad_norm' is not supported as an optimizer parameter, please switch to using the deepspeed "
                   "parameter 'gradient_clipping' see: https://www.deepspeed.ai/docs/config-json/#gradient-clipping "
                   "for more details",
        "replaced_by": "/gradient_clipping",
    },
}

# Muon: runtime/engine.py _muon_param_groups (_MUON_HALF_KEYS, _ADAM_HALF_KEYS, muon_lr/adam_lr)
# and runtime/zero/muon/original_muon.py MuonWithAuxAdam.__init__ (group defaults, NS_METHODS).
MUON_PARAMS = {
    "lr": leaf("number",
               "Learning rate shared by the Muon and auxiliary Adam halves (overridden by muon_lr / adam_lr).",
               no_default="unset, the Muon half uses 0.02 and the Adam half 3e-4"),
    "muon_lr": leaf("number", "Learning rate of the Muon half (2-D hidden weights).", 0.02),
    "adam_lr": leaf("number", "Learning rate of the auxiliary Adam half (embeddings, heads, biases, norms).", 0.0003),
    "momentum": leaf("number", "Muon momentum.", 0.95),
    "weight_decay": leaf("number", "Weight decay of both halves.", 0),
    "ns_method": leaf("string", "Newton-Schulz orthogonalisation method.",
                      "gram", enum_from="deepspeed.runtime.zero.muon.original_muon:NS_METHODS"),
    "betas": leaf("array", "Auxiliary Adam betas.", [0.9, 0.95], items={"type": "number"}, min_items=2, max_items=2),
    "eps": leaf("number", "Auxiliary Adam epsilon.", 1e-10),
}

# Descriptions for $defs entries where the class docstring is misleading for the config type,
# keyed by (type or class name, parameter).
PARAM_NOTES = {
    ("adam", "amsgrad"): "AMSGrad variant; FusedAdam and DeepSpeedCPUAdam raise RuntimeError when true, only "
                         "torch_adam supports it.",
    ("adamw", "amsgrad"): "AMSGrad variant; FusedAdam and DeepSpeedCPUAdam raise RuntimeError when true, only "
                          "torch_adam supports it.",
    ("lamb", "amsgrad"): "Not supported: FusedLamb raises RuntimeError when true.",
    ("lamb", "max_grad_norm"): "Rejected by the engine: use the top-level gradient_clipping instead.",
    ("adagrad", "amsgrad"): "Accepted by DeepSpeedCPUAdagrad (optimizer offload) only.",
    ("Adafactor", "eps"): "Pair (eps1, eps2): eps1 stabilises the denominator (null picks it from the dtype), eps2 "
                          "bounds the relative step.",
    ("ReduceLROnPlateau", "mode"): "Reduce the learning rate when the monitored metric stops decreasing (min) or "
                                   "increasing (max); DeepSpeed's engine calls step() without the metric, so this "
                                   "scheduler fails at the first step.",
    ("ReduceLROnPlateau", "threshold_mode"): "Whether threshold is relative to the best value (rel) or absolute (abs).",
    ("ReduceLROnPlateau", "min_lr"): "Lower bound on the learning rate, one value or one per param group.",
    ("OneCycleLR", "anneal_strategy"): "Annealing shape: cosine or linear.",
    ("WarmupLR", "warmup_max_lr"): "Learning rate reached at the end of warm-up; null (the code default, the docstring "
                                   "says 0.001) uses each param group's lr.",
    ("CyclicLR", "mode"): "Cycle policy; ignored when scale_fn is given.",
    ("CyclicLR", "scale_mode"): "Whether scale_fn is evaluated on the cycle number or on cycle iterations.",
}

# Common optimizer/scheduler parameter meanings; they take precedence over class docstrings,
# whose first sentence is often not self-contained (PARAM_NOTES overrides both).
PARAM_DESCRIPTIONS = {
    "lr": "Learning rate.",
    "betas": "Coefficients for the running averages of the gradient and its square.",
    "eps": "Term added to the denominator for numerical stability.",
    "weight_decay": "Weight decay coefficient.",
    "amsgrad": "Use the AMSGrad variant.",
    "bias_correction": "Apply Adam bias correction.",
    "lr_decay": "Learning-rate decay.",
    "initial_accumulator_value": "Initial value of the Adagrad sum of squares.",
    "foreach": "Use the foreach (multi-tensor) implementation; null lets torch choose.",
    "maximize": "Maximise the objective instead of minimising it.",
    "capturable": "Make the optimizer safe to capture in CUDA graphs.",
    "differentiable": "Let autograd run through the optimizer step.",
    "fused": "Use the fused implementation; null lets torch choose.",
    "fp32_optimizer_states": "Keep the optimizer states in fp32 whatever the parameter dtype (DeepSpeed CPU "
                             "optimizers).",
    "last_batch_iteration": "Index of the last batch, for resuming (-1 starts from the beginning).",
    "last_epoch": "Index of the last epoch, for resuming (-1 starts from the beginning).",
}

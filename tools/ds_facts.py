"""The hand-kept DeepSpeed facts tools/gen_schema.py adds to what DeepSpeed's own code says.

Facts no pydantic model carries: which keys the Hugging Face integrations fill for "auto" and
with what formula, which keys only matter at some ZeRO stages, cross-field checks DeepSpeed makes in
validators or at engine init, and descriptions DeepSpeed does not document. Each cites its source.
The generator is the only reader; the linter and memory model read the schema it writes.
"""

from __future__ import annotations

HF = ["hf-trainer", "accelerate"]
ACCELERATE = ["accelerate"]

# ---------------------------------------------------------------------------------------------
# Facts the pydantic models do not carry
# ---------------------------------------------------------------------------------------------

# "auto" values filled by Hugging Face integrations (reference §5): transformers
# integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_process/_finalize and
# accelerate utils/deepspeed.py. Both only look up the stage3_* spelling.
HF_AUTO = {
    "/train_batch_size": HF,
    "/train_micro_batch_size_per_gpu": HF,
    "/gradient_accumulation_steps": HF,
    "/gradient_clipping": HF,
    "/fp16/enabled": HF,
    "/bf16/enabled": HF,
    "/zero_optimization/stage": ACCELERATE,
    "/zero_optimization/reduce_bucket_size": HF,
    "/zero_optimization/stage3_prefetch_bucket_size": HF,
    "/zero_optimization/stage3_param_persistence_threshold": HF,
    "/zero_optimization/stage3_gather_16bit_weights_on_model_save": ACCELERATE,
    "/zero_optimization/offload_optimizer/device": ACCELERATE,
    "/zero_optimization/offload_optimizer/nvme_path": ACCELERATE,
    "/zero_optimization/offload_param/device": ACCELERATE,
    "/zero_optimization/offload_param/nvme_path": ACCELERATE,
}
# What the integrations write for "auto" in the hidden-size-based keys: int(factor·h^power), h the
# model's hidden_size (transformers integrations/deepspeed.py HfTrainerDeepSpeedConfig.trainer_config_finalize:
# hidden_size * hidden_size, int(0.9 * hidden_size * hidden_size), 10 * hidden_size; the stage3_* two
# only when is_zero3(); accelerate writes the same). The memory model and large-buckets read it back.
HF_AUTO_FILL = {
    "/zero_optimization/reduce_bucket_size": {"factor": 1, "power": 2},
    "/zero_optimization/stage3_prefetch_bucket_size": {"factor": 0.9, "power": 2},
    "/zero_optimization/stage3_param_persistence_threshold": {"factor": 10, "power": 1},
}
# optimizer.params.* / scheduler.params.* filled by both, applied wherever the parameter exists.
PARAMS_AUTO = {
    "optimizer_params": ("lr", "betas", "eps", "weight_decay"),
    "scheduler_params": ("warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "total_num_steps"),
}

# Keys that only take effect at ZeRO stage 3. runtime/engine.py _configure_zero_optimizer passes
# them only to the stage-3 optimizers (DeepSpeedZeroOptimizer_Stage3 / SuperOffloadOptimizer_Stage3
# / DeepSpeedZeRoOffload), or they are read only by runtime/zero/stage3.py,
# partition_parameters.py (zero.Init: memory_efficient_linear, override_module_apply,
# use_all_reduce_for_fetch_params) or parameter_offload.py (leaf modules); pipeline_loading_checkpoint
# asserts stage 3 in _load_zero_checkpoint; ratio < 1 is asserted by offload_ratio_check.
STAGE3_ONLY = {
    "DeepSpeedZeroConfig": (
        "offload_param", "cpu_offload_param", "sub_group_size", "prefetch_bucket_size",
        "param_persistence_threshold", "model_persistence_threshold", "max_live_parameters",
        "max_reuse_distance", "gather_16bit_weights_on_model_save", "module_granularity_threshold",
        "use_all_reduce_for_fetch_params", "allgather_sequential", "stage3_gather_fp16_weights_on_model_save",
        "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_nontrainable_weights",
        "zero_quantized_gradients", "memory_efficient_linear", "pipeline_loading_checkpoint",
        "override_module_apply", "log_trace_cache_warnings", "enable_sanity_checks",
        "save_muon_momentum_buffer_in_memory", "leaf_module",
    ),
    "DeepSpeedZeroOffloadOptimizerConfig": ("ratio", "super_offload", "cpuadam_cores_perc"),
}
# Keys that need ZeRO (stage 1 or above): optimizer offload (ZeRO-Offload) is built only by the ZeRO
# optimizers (runtime/engine.py _configure_zero_optimizer); at stage 0 DeepSpeed ignores it silently.
ZERO_ONLY = {
    "DeepSpeedZeroConfig": ("offload_optimizer", "cpu_offload"),
}
# Keys passed only to the stage 1/2 optimizer (DeepSpeedZeroOptimizer / ZenFlowZeroOptimizer) in
# runtime/engine.py _configure_zero_optimizer; compute_grad_norm is enforced by its validator.
STAGE12_ONLY = {
    "DeepSpeedZeroConfig": ("use_multi_rank_bucket_allreduce", "ignore_unused_parameters",
                            "round_robin_gradients", "parameter_alignment"),
}

# Extra schema keywords for model fields, for checks done in validators rather than in the
# annotation (keyed by model class and field; applied to the field and its alias).
FIELD_KEYWORDS = {
    # precision_config.py DeepSpeedFP16Config._validate_loss_scale
    ("DeepSpeedFP16Config", "loss_scale"): {"minimum": 0},
    # zenflow/zenflow_config.py ZenFlowConfig.validate_fields
    ("ZenFlowConfig", "select_strategy"): {"enum": ["auto", "step", "epoch"]},
    ("ZenFlowConfig", "select_interval"): {"pattern": "^auto$"},
    ("ZenFlowConfig", "update_interval"): {"pattern": "^auto$", "minimum": 1},
    ("ZenFlowConfig", "steps_per_epoch"): {"x-internal": True},
    # zero/leaf_module_config.py _coerce_container_types turns a string into a one-item list
    ("DeepSpeedZeroLeafModuleConfig", "classes"): {"type": ["array", "string"]},
    ("DeepSpeedZeroLeafModuleConfig", "names"): {"type": ["array", "string"]},
    ("DeepSpeedZeroLeafModuleConfig", "name_suffixes"): {"type": ["array", "string"]},
    # tensor_parallel/config.py: a torch.dtype field with arbitrary_types_allowed only accepts a
    # torch.dtype instance (is_instance_of), which JSON cannot express.
    ("TPTrainingConfig", "dtype"): {"not": {}, "x-not-settable": "pydantic requires a torch.dtype instance "
                                                                 "(is_instance_of); any JSON value fails validation"},
}
# Section-level fixes: zero/leaf_module_config.py _coerce_container_types maps None to {}.
NULLABLE_MODEL_FIELDS = {("DeepSpeedZeroConfig", "leaf_module")}

# Descriptions where DeepSpeed has no docstring or its first sentence does not explain the key.
FIELD_DESCRIPTIONS = {
    ("DeepSpeedZeroConfig", "stage"): "ZeRO stage: 0 disables ZeRO, 1 partitions optimizer states, 2 also gradients, 3 "
                                      "also parameters.",
    ("DeepSpeedZeroConfig", "overlap_comm"): "Overlap gradient reduction with the backward pass; null (the default) "
                                             "means true at stage 3 and false otherwise.",
    ("DeepSpeedZeroConfig", "elastic_checkpoint"): "Legacy elastic checkpointing; not supported at stage 3 (warning), "
                                                   "use Universal Checkpointing instead.",
    ("DeepSpeedZeroConfig", "zenflow"): "ZenFlow: update the most important gradient columns on the GPU and the rest "
                                        "asynchronously on the CPU (null disables it).",
    ("DeepSpeedZeroConfig", "cpu_offload_param"): "Deprecated: true offloads parameters to CPU and is migrated to "
                                                  "offload_param {\"device\": \"cpu\"}.",
    ("DeepSpeedZeroConfig", "cpu_offload_use_pin_memory"): "Deprecated and without effect: set pin_memory in "
                                                           "offload_param or offload_optimizer instead.",
    ("DeepSpeedZeroConfig", "cpu_offload"): "Deprecated: true offloads optimizer state to CPU and is migrated to "
                                            "offload_optimizer {\"device\": \"cpu\"}.",
    ("DeepSpeedZeroConfig", "stage3_gather_fp16_weights_on_model_save"): "Deprecated spelling of "
                                                                         "gather_16bit_weights_on_model_save, migrated "
                                                                         "to it.",
    ("DeepSpeedZeroConfig", "gather_16bit_weights_on_model_save"): "Gather the partitioned ZeRO-3 weights so "
                                                                   "save_16bit_model() writes a full 16-bit model.",
    ("DeepSpeedZeroConfig", "module_granularity_threshold"): "ZeRO-3 fetches modules whose parameter_count / (1 + "
                                                             "descendant count) is below this as one unit (0 disables "
                                                             "it).",
    ("DeepSpeedZeroConfig", "ignore_unused_parameters"): "Let ZeRO stage 1/2 continue when some parameters get no "
                                                         "gradient instead of stopping with an error.",
    ("DeepSpeedZeroConfig", "legacy_stage1"): "Removed legacy ZeRO stage 1 implementation: true makes engine "
                                              "initialisation raise.",
    ("DeepSpeedZeroConfig", "zero_hpz_partition_size"): "ZeRO++ hierarchical partitioning (hpZ): size of the secondary "
                                                        "parameter-partition group, usually GPUs per node (1 disables "
                                                        "it).",
    ("DeepSpeedZeroConfig", "zero_quantized_weights"): "ZeRO++ qwZ: quantize weights for the ZeRO-3 all-gather.",
    ("DeepSpeedZeroConfig", "zero_quantized_nontrainable_weights"): "Store non-trainable ZeRO-3 weights quantized, "
                                                                    "saving memory and communication (for LoRA).",
    ("DeepSpeedZeroConfig", "zero_quantized_gradients"): "ZeRO++ qgZ: quantize gradients in an all-to-all based ZeRO-3 "
                                                         "reduce-scatter.",
    ("DeepSpeedZeroConfig", "pipeline_loading_checkpoint"): "Load ZeRO-3 checkpoints one local rank at a time (asserts "
                                                            "stage 3).",
    ("DeepSpeedZeroOffloadParamConfig", "device"): "Where parameters are offloaded: none, cpu or nvme.",
    ("DeepSpeedZeroOffloadOptimizerConfig", "device"): "Where optimizer state is offloaded (the optimizer step then "
                                                       "runs on the CPU): none, cpu or nvme.",
    ("DeepSpeedZeroOffloadOptimizerConfig", "ratio"): "Fraction of optimizer states offloaded; below 1 (partial "
                                                      "offload) is only accepted at ZeRO stage 3.",
    ("ZenFlowConfig", "pt_reserved_cores_perc"): "Fraction of CPU cores reserved for PyTorch threads; the rest run "
                                                 "ZenFlow optimizer workers.",
    ("ZenFlowConfig", "steps_per_epoch"): "Set by DeepSpeed at run time; not meant to be configured.",
    ("DeepSpeedZeroLeafModuleConfig", "classes"): "Fully qualified module classes treated as ZeRO-3 leaf modules "
                                                  "(parameters fetched as one unit); a string counts as a one-item "
                                                  "list.",
    ("DeepSpeedZeroLeafModuleConfig", "names"): "Module names (as in named_modules()) treated as ZeRO-3 leaf modules.",
    ("DeepSpeedZeroLeafModuleConfig", "name_suffixes"): "Module name suffixes treated as ZeRO-3 leaf modules.",
    ("DeepSpeedFP16Config", "loss_scale"): "Static loss scale; 0 (the default) selects dynamic loss scaling.",
    ("CommsLoggerConfig", "enabled"): "Enable the communication logger.",
    ("CommsLoggerConfig", "prof_all"): "Profile all communication operations.",
    ("CommsLoggerConfig", "prof_ops"): "Names of the communication operations to profile when prof_all is false.",
    ("CommsLoggerConfig", "verbose"): "Print every logged communication operation immediately.",
    ("CommsLoggerConfig", "debug"): "Include the calling function in logged operation names.",
    ("CometConfig", "samples_log_interval"): "Submit metrics to Comet every this many samples.",
    ("CometConfig", "online"): "Log to the Comet server (true) or to an offline experiment (false); null means true.",
    ("CometConfig", "mode"): "How the Comet experiment is started: 'get', 'create' or 'get_or_create' (null means "
                             "get_or_create).",
    ("HybridEngineConfig", "enabled"): "Use the hybrid engine, which switches the model between training and fast "
                                       "generation.",
    ("HybridEngineConfig", "max_out_tokens"): "Maximum number of tokens generated, which sizes the inference KV cache.",
    ("HybridEngineConfig", "inference_tp_size"): "Tensor-parallel degree used during generation.",
    ("HybridEngineConfig", "release_inference_cache"): "Free the inference KV cache after each generation to save "
                                                       "memory.",
    ("HybridEngineConfig", "pin_parameters"): "Keep gathered inference parameters in pinned memory.",
    ("HybridEngineConfig", "tp_gather_partition_size"): "Number of layers gathered at once when switching to "
                                                        "tensor-parallel generation.",
    ("HybridEngineConfig", "enable_cuda_graph"): "Capture generation in CUDA graphs.",
    ("CompileConfig", "passes"): "Compiler passes DeepCompile composes (z1, z3, autosp, autotp); null uses its default "
                                 "selection.",
    ("TPTrainingConfig", "dtype"): "Model dtype for AutoTP training; the field takes a torch.dtype object, so only the "
                                   "default torch.float16 is usable from JSON.",
    ("TPTrainingConfig", "autotp_size"): "AutoTP tensor-parallel degree for training (0 disables AutoTP).",
    ("TPTrainingConfig", "tensor_parallel"): "Tensor-parallel group settings.",
    ("TPTrainingConfig", "keep_module_on_host"): "Keep loaded checkpoint weights on the host instead of moving them to "
                                                 "the device, avoiding OOM for very large models.",
    ("TPTrainingConfig", "injection_policy_tuple"): "AutoTP injection policy (module class and output-linear names), "
                                                    "normally set from Python.",
    ("TPTrainingConfig", "replace_with_kernel_inject"): "Inject DeepSpeed inference kernels instead of AutoTP layers.",
    ("TPConfig", "tp_grain_size"): "Granularity of the MLP/lm_head tensor-parallel split (not yet used in training).",
    ("TPConfig", "mpu"): "Model-parallel unit object, set from Python; a JSON value is meaningless.",
    ("TPConfig", "tp_group"): "Tensor-parallel process group, set from Python; a JSON value is meaningless.",
    ("WeightQuantConfig", "enabled"): "Enable weight quantization (the section is only read when present).",
    ("WeightQuantConfig", "num_bits"): "Bits per quantized weight.",
    ("WeightQuantConfig", "q_type"): "Symmetric or asymmetric quantization.",
    ("WeightQuantConfig", "q_groups"): "Number of quantization groups.",
    ("WeightQuantConfig", "quantized_initialization"): "Quantize weights while zero.Init builds the model with these "
                                                       "options (e.g. num_bits, group_size); empty disables it.",
    ("WeightQuantConfig", "post_init_quant"): "Per-module quantization options applied after model construction by "
                                              "deepspeed.inference.quantization.",
}

# Cross-field checks DeepSpeed makes (validators, _do_error_check, engine init). Each entry is a
# JSON Schema fragment added to the node's allOf; "$comment" cites the check.
MODEL_RULES = {
    "DeepSpeedZeroConfig": [
        {"$comment": "runtime/zero/config.py compute_grad_norm_valid: 'compute_grad_norm=false is supported only with "
                     "ZeRO Stage 1 or 2'",
         "if": {"properties": {"compute_grad_norm": {"const": False}}, "required": ["compute_grad_norm"]},
         "then": {"properties": {"stage": {"enum": [1, 2]}}, "required": ["stage"]}},
        {"$comment": "runtime/zero/config.py offload_ratio_check: 'Partial offloading only supported for ZeRO "
                     "Stage 3.'",
         "if": {"properties": {"offload_optimizer": {"type": "object",
                                                     "properties": {"ratio": {"type": "number", "exclusiveMaximum": 1}},
                                                     "required": ["ratio"]}},
                "required": ["offload_optimizer"]},
         "then": {"properties": {"stage": {"const": 3}}, "required": ["stage"]}},
    ],
    "DeepSpeedZeroOffloadParamConfig": [
        {"$comment": "runtime/zero/partition_parameters.py: '\"nvme_path\" in DeepSpeed Config cannot be None if "
                     "remote device is OffloadDeviceEnum.nvme' (engine init)",
         "if": {"properties": {"device": {"const": "nvme"}}, "required": ["device"]},
         "then": {"properties": {"nvme_path": {"type": "string"}}, "required": ["nvme_path"]}},
    ],
    "DeepSpeedZeroOffloadOptimizerConfig": [
        {"$comment": "runtime/zero/stage3.py: nvme without nvme_path fails at engine init with 'TypeError: expected "
                     "str, bytes or os.PathLike object, not NoneType'",
         "if": {"properties": {"device": {"const": "nvme"}}, "required": ["device"]},
         "then": {"properties": {"nvme_path": {"type": "string"}}, "required": ["nvme_path"]}},
    ],
    "DeepSpeedFP16Config": [
        {"$comment": "runtime/precision_config.py _validate_dynamic_loss_scale_params: loss_scale_window and "
                     "min_loss_scale must be > 0 under dynamic loss scaling",
         "if": {"properties": {"enabled": {"const": True}, "loss_scale": {"const": 0}}, "required": ["enabled"]},
         "then": {"properties": {"loss_scale_window": {"exclusiveMinimum": 0},
                                 "min_loss_scale": {"exclusiveMinimum": 0}}}},
    ],
    "DeepSpeedBF16Config": [
        {"$comment": "runtime/config.py _do_error_check: 'bf16_optimizer_states requires bf16_master_weights_and_grads "
                     "to be enabled.'",
         "if": {"properties": {"bf16_optimizer_states": {"const": True}}, "required": ["bf16_optimizer_states"]},
         "then": {"properties": {"bf16_master_weights_and_grads": {"const": True}},
                  "required": ["bf16_master_weights_and_grads"]}},
    ],
}


def _enabled(section: str, key: str = "enabled") -> dict:
    return {"properties": {section: {"type": "object", "properties": {key: {"const": True}}, "required": [key]}},
            "required": [section]}


_ZERO_STAGE_1_TO_3 = {"properties": {"zero_optimization": {"anyOf": [
    {"const": True}, {"type": "object", "properties": {"stage": {"enum": [1, 2, 3]}}, "required": ["stage"]}]}},
    "required": ["zero_optimization"]}

ROOT_RULES = [
    {"$comment": "runtime/config.py _initialize_params: 'bfloat16 and fp16 modes cannot be simultaneously enabled'",
     "not": {"allOf": [_enabled("fp16"), _enabled("bf16")]}},
    {"$comment": "runtime/config.py _initialize_params: 'bfloat16 and fp16 modes cannot be simultaneously enabled' "
                 "(legacy bfloat16, read when bf16 is absent)",
     "not": {"allOf": [_enabled("fp16"), _enabled("bfloat16"), {"not": {"required": ["bf16"]}}]}},
    {"$comment": "runtime/config.py _do_error_check: \"gradient_allreduce_op='sum' is not supported with ZeRO stage 3 "
                 "/ ZenFlow / DeepCompile\"",
     "if": {"properties": {"gradient_allreduce_op": {"type": "string", "pattern": "^[Ss][Uu][Mm]$"}},
            "required": ["gradient_allreduce_op"]},
     "then": {"properties": {
         "zero_optimization": {"not": {"type": "object", "anyOf": [
             {"properties": {"stage": {"const": 3}}, "required": ["stage"]},
             {"properties": {"zenflow": {"type": "object"}}, "required": ["zenflow"]}]}},
         "compile": {"not": {"type": "object", "properties": {"deepcompile": {"const": True}},
                             "required": ["deepcompile"]}}}}},
    {"$comment": "runtime/engine.py _do_sanity_check: 'DeepSpeed lamb optimizer requires dynamic loss scaling' "
                 "(dynamic_loss_scale() is fp16.loss_scale == 0, whatever fp16.enabled says; engine init)",
     "if": {"properties": {"optimizer": {"type": "object",
                                         "properties": {"type": {"type": "string", "pattern": "^[Ll][Aa][Mm][Bb]$"}},
                                         "required": ["type"]}},
            "required": ["optimizer"]},
     "then": {"properties": {"fp16": {"properties": {
         "loss_scale": {"not": {"type": "number", "not": {"const": 0}}}}}}}},
    {"$comment": "runtime/config.py _do_error_check: 'Fp16_master_weights_and_grads is only supported with ZeRO Stage "
                 "1, 2, or 3.'",
     "if": _enabled("fp16", "fp16_master_weights_and_grads"), "then": _ZERO_STAGE_1_TO_3},
    {"$comment": "runtime/config.py _do_error_check: 'Bf16_master_weights_and_grads is only supported with ZeRO Stage "
                 "1, 2, or 3.'",
     "if": _enabled("bf16", "bf16_master_weights_and_grads"), "then": _ZERO_STAGE_1_TO_3},
    {"$comment": "runtime/config.py _do_error_check: 'bf16_optimizer_states is only supported with ZeRO Stage 1, 2, or "
                 "3.'",
     "if": _enabled("bf16", "bf16_optimizer_states"), "then": _ZERO_STAGE_1_TO_3},
]

# runtime/zero/config.py read_zero_config_deprecated: the legacy boolean zero_optimization form.
ZERO_LEGACY_BOOL = {
    "boolean": {
        "deprecated": True,
        "description": "true means ZeRO stage 1 (allgather_bucket_size from the top-level allgather_size), false means "
                       "stage 0.",
        "x-deprecation": "DeepSpeedConfig: this format of ZeRO optimization setup is deprecated. Please use the "
                         "following format: "
                         "\"zero_optimization\": {\"stage\": ...}",
        "x-replaced-by": "/zero_optimization/stage",
    }
}

# Top-level legacy bfloat16 section (runtime/precision_config.py get_bfloat16_config: read only
# when bf16 is absent; constants.py: "keeping for backwards compatibility"; DeepSpeed does not warn).
LEGACY_BFLOAT16 = {
    "deprecated": True,
    "x-replaced-by": "/bf16",
    "x-deprecation": "Legacy spelling of 'bf16' kept for backwards compatibility (runtime/constants.py BFLOAT16_OLD); "
                     "read only when 'bf16' is absent or null, without a warning.",
}

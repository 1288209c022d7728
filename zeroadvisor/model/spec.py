"""What the memory model needs to know about a network and how it is trained."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from zeroadvisor.config.method import MethodSetup
from zeroadvisor.model.layout import Module
from zeroadvisor.vocab import ActivationOffload, Checkpointing, ModelRole, Padding

Precision = Literal["fp32", "fp16", "bf16"]  # the training (model) dtype, and the dtypes a model is loaded in
ZERO_STAGES = (0, 1, 2, 3)
# The closed sets Checkpointing and Padding live in vocab (so that the lint path, which parses them, does not import
# this module); they are named here too, their old home.
__all__ = ["CLIENT_OPTIMIZER_NAMES", "DEFAULT_CLIENT_OPTIMIZER", "ZERO_STAGES", "Checkpointing", "LayerFacts",
           "LoadInputs", "ModelSpec", "Padding", "Precision", "TrainingShape", "VisionTower"]


@dataclass(frozen=True, slots=True)
class LayerFacts:
    """What transformers' modelling code of a family keeps for backward, beyond the shapes
    (memory/activations.py). Each value cites the transformers/torch code it follows where it is set
    (model/activation_facts.py); a ModelSpec without them is costed with Korthikanti et al.'s
    assumptions (LayerNorm, GeLU, dropout masks everywhere)."""

    norm: str = "layernorm"  # "layernorm" | "rmsnorm" (LlamaRMSNorm: fp32 upcast) | "t5" (T5LayerNorm)
    activation: str = "gelu"  # MLP activation; "relu" keeps its output (shared with the next linear)
    attention_dropout: float | None = None  # on the attention probabilities; None: unknown (a mask counted)
    hidden_dropout: float | None = None  # on the embeddings, the attention output and the MLP output
    mlp_dropout: float = 0.0  # between the activation and the down projection (T5DenseActDense)
    softmax_fp32: bool = False  # eager attention keeps its softmax output in fp32 (Llama-family eager)
    loss_in_fp32: bool = True  # the loss upcasts the logits (transformers loss_utils ForCausalLMLoss)
    # the loss takes log_softmax one row at a time in the logits' dtype (TRL's selective_log_softmax): its backward
    # holds two copies of the logits and one row's, not three copies (memory/activations.py)
    row_log_softmax: bool = False
    # beside it a cross-entropy over the chosen half of the rows (TRL's ORPO and CPO: their NLL term) saves that half's
    # log-softmax too: half a copy of the logits more (memory/activations.py)
    chosen_nll: bool = False
    # the loss also takes the entropy of the fp32 logits inside their graph (TRL 0.9.6 PPOTrainer.loss's
    # entropy_from_logits on the logits LLaMA-Factory's PPO keeps; OpenRLHF's actor with --entropy_loss_coef beside
    # fused_ce_fp32): four fp32 copies at its peak, not three
    entropy_from_logits: bool = False
    # the loss is flash-attn's Triton cross-entropy over fp32 logits the caller holds (OpenRLHF's Actor.forward): the
    # logits, the kernel's one gradient tensor and its cast to the model dtype at the peak (memory/activations.py)
    fused_ce_fp32: bool = False
    # the loss scores only the last ``response_tokens`` of each row through a log-softmax of a slice the temperature
    # divides in place (TRL's PPO step): the whole sequence's logits kept, the slice's zero-filled gradient and
    # CopySlices' clone of it, and ``response_copies`` copies of the response's (memory/activations.py)
    response_tokens: int = 0
    response_copies: int = 0
    # the loss holds this many copies of the whole logits in their dtype at its peak (TRL's GKD: the student's and the
    # teacher's logits and the generalized JSD's temporaries, memory/method.py gkd_copies); 0: not this loss
    jsd_copies: int = 0
    norms_per_layer: int = 2  # decoder layers of an encoder-decoder add one for cross-attention
    final_dropout: bool = False  # a dropout after each stack's final norm (T5Stack)
    relative_position_buckets: bool = False  # int64 (s, s) bucket indices per stack (T5Attention.compute_bias)
    head_transform: bool = False  # dense + activation + LayerNorm before the LM decoder (BertLMPredictionHead)
    qk_norm: str | None = None  # a norm of this kind over head_dim on Q and K (Qwen3, Gemma 3): None without
    router_topk_softmax: bool = False  # MoE router: softmax over the top-k logits (GPT-OSS), not over all experts
    router_fp32_input: bool = False  # MoE router: its input cast to fp32 and kept (DeepSeek's gate)
    expert_loop: bool = False  # transformers 4.x MoE: a loop over nn.Linear experts (more kept per routed copy)
    sdpa_repeat_kv: bool = False  # transformers < 4.54: SDPA gets K/V repeated to every query head
    attention_softcap: bool = False  # eager scores through tanh (Gemma 2 attn_logit_softcapping): its output kept
    final_softcap: bool = False  # logits through tanh before the loss (Gemma 2 final_logit_softcapping)


@dataclass(frozen=True, slots=True)
class VisionTower:
    """The vision transformer beside a multimodal model's decoder (Qwen2-VL, Qwen2.5-VL: ``model.visual``), as its
    modelling code builds it (model/families.py): what its activations are counted from (memory/vision.py).

    Each image is cut into patches (14 x 14 pixels, two frames deep); every patch runs through ``depth`` blocks of
    width ``width``, and the merger folds ``merge`` x ``merge`` neighbouring patches into one token of the decoder's
    sequence: an image token in the sequence is ``merge**2`` patches in the tower."""

    depth: int
    width: int  # the blocks' hidden size (embed_dim)
    intermediate: int  # the blocks' MLP width
    heads: int
    gated: bool  # SwiGLU MLP (Qwen2.5-VL) or a two-matrix one (Qwen2-VL's fc1/fc2)
    norm: str  # "rmsnorm" | "layernorm" (norm1/norm2 and the merger's ln_q)
    activation: str  # the blocks' MLP activation (vision_config.hidden_act)
    merge: int  # spatial_merge_size: merge x merge patches become one decoder token
    out: int  # the merger's output width (the decoder's hidden size)
    parameters: int  # every parameter under the tower (patch embedding, blocks, merger)
    patch_elements: int = 0  # the pixel values of one patch (in_channels x temporal_patch_size x patch_size^2)
    prefix: str = "model.visual"  # the tower's module name in transformers 5 (``visual`` before 4.52)
    # the mergers under the tower (the main one first; Qwen3-VL's deepstack mergers after it), as layout names
    # relative to ``prefix``, each keeping its own inputs where it trains
    projectors: tuple[str, ...] = ("merger",)
    mergers: int = 1  # how many mergers run over the patches (Qwen3-VL: 1 + its deepstack_visual_indexes)

    @property
    def patches_per_token(self) -> int:
        return self.merge * self.merge

    def owns(self, name: str) -> bool:
        """Whether the module ``name`` (a layout name, model/layout.py) is part of the tower."""
        return name.startswith(f"{self.prefix}.")

    def trains_through(self, name: str) -> bool:
        """Whether a trainable parameter in module ``name`` makes the tower keep its blocks' activations: one in the
        patch or position embedding or a block (the gradient flows back through the blocks to it); a merger alone
        needs only its own inputs."""
        return self.owns(name) and not any(name.startswith(f"{self.prefix}.{p}") for p in self.projectors)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """Architecture facts; counts are exact when derived from a Hugging Face config.

    Fields other than ``parameters`` are None when the description does not say
    (e.g. ``parameters: 7.5B`` alone); the memory model then states what it assumed.
    """

    parameters: int
    model_type: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    intermediate_size: int | None = None  # dense MLP width (per expert for MoE)
    vocab_size: int | None = None
    gated_mlp: bool | None = None  # SwiGLU/GeGLU: three projections instead of two
    num_experts: int | None = None  # routed experts per MoE layer
    experts_per_token: int | None = None  # top-k
    shared_expert_size: int | None = None  # the MLP width of an MoE layer's shared expert(s) (Qwen2-MoE, DeepSeek)
    latent_ranks: tuple[int, ...] = ()  # DeepSeek's latent attention: q_lora_rank and kv_lora_rank (each normed)
    value_head_dim: int | None = None  # the value head's width where it differs from head_dim (MLA's v_head_dim)
    # Largest number of parameters owned directly by one module (not its children):
    # ZeRO-3 gathers a module's own parameters at once (DS estimator's largest_layer_params).
    largest_layer_parameters: int | None = None
    embedding_parameters: int | None = None  # input embedding(s) V*h (+ positions)
    tied_embeddings: bool | None = None
    source: str = ""  # where the description came from, for the report
    notes: tuple[str, ...] = field(default_factory=tuple)
    # Element counts of the trainable parameters in model.parameters() order (what DeepSpeed flattens
    # into its stage-1/2 bit16 group; one param group assumed). None: layout unknown, partitions costed as P/N.
    parameter_numels: tuple[int, ...] | None = None
    # The dtype config.json stores the weights in ("dtype", formerly "torch_dtype"), as fp32/fp16/bf16;
    # None when not given or another dtype. transformers 5 loads in it by default (see LoadInputs).
    checkpoint_dtype: str | None = None
    # LoRA/QLoRA (model/peft.py): the parameters the optimizer gets (adapters + modules_to_save copies),
    # exactly as peft's print_trainable_parameters counts them; None: every parameter trains. With PEFT
    # every one of ``parameters`` is frozen.
    trainable_parameters: int | None = None
    # PEFT: the largest trainable tensor (a LoRA A/B matrix or a modules_to_save copy's weight): what ZeRO sizes
    # the buffers that hold one parameter's gradient by. None: unknown (bounded by the largest layer).
    largest_trainable_parameter: int | None = None
    # QLoRA: base Linear weight elements stored by bitsandbytes, their bytes with the quantization
    # constants, and the largest such weight (dequantized to 16 bits per matmul).
    quantized_parameters: int = 0
    quantized_bytes: int = 0
    largest_quantized_parameters: int = 0
    quantization: str | None = None  # QLoRA: bitsandbytes' "4bit" or "8bit" (model/peft.py Quantization)
    peft: str | None = None  # e.g. "LoRA r=16 on q_proj, v_proj", for the report
    # LoRA with lora_dropout > 0 (model/peft.py): per token, the input features of every adapted Linear over the
    # model, each of which peft's Linear.forward drops out into a new tensor that lora_A keeps for its backward,
    # with the dropout's mask (tuners/lora/layer.py: lora_B(lora_A(dropout(x)))); 0: no dropout (nn.Identity
    # passes x itself, which the layer keeps anyway) or no PEFT.
    lora_dropout_inputs: int = 0
    # LoRA: per token, the features of the layer inputs a full fine-tune keeps that nothing keeps under this LoRA
    # (the frozen base keeps no input; with dropout lora_A keeps its copy instead): model/peft.py _unkept_inputs.
    lora_unkept_inputs: int = 0
    # LoRA: per token, r x the adapted Linear modules (counting repeats): the r-wide inputs lora_B keeps.
    lora_rank_features: int = 0
    # PEFT with the output head in modules_to_save: its trainable copy gets a weight gradient (head_gets_gradient);
    # False: the head is frozen under PEFT, or no PEFT.
    peft_head_saved: bool = False
    frozen: str | None = None  # modules frozen without PEFT (model/frozen.py), e.g. "embed_tokens", for the report
    # A multimodal model's vision tower (None: a text model), and whether any of its parameters trains (frozen
    # without PEFT, or PEFT adapting none of its Linears, leave it False): a tower that trains keeps its
    # activations for backward, a frozen one runs without a graph (memory/vision.py).
    vision: VisionTower | None = None
    vision_trains: bool = False

    # Every parameter's element count once (tied tensors once), as (numel, how many parameters of that size),
    # order unknown: the multiset of model.parameters() sizes, exact from a Hugging Face config. What the
    # stage-3 persistence threshold selects from (zero/parameter_offload.py mark_persistent_parameters).
    parameter_sizes: tuple[tuple[int, int], ...] | None = None
    # Encoder-decoder models (T5, BART): the layers of each stack (num_layers is their sum). The encoder runs
    # over the source sequence, the decoder over the target with cross-attention to the source.
    encoder_layers: int | None = None
    decoder_layers: int | None = None
    # Whether the counted class computes vocabulary-wide logits (an LM head: *ForCausalLM, *ForMaskedLM,
    # *ForConditionalGeneration); False for classifiers and base models; None: unknown (an LM head assumed).
    lm_head: bool | None = None
    # Where lm_head is False because the method computes its logits another way (GRPO's completion only, a reward
    # model's scalar head: memory/method.py activation_spec), what the activations' note says instead
    logits_note: str = ""
    # Modules that own parameters (model/layout.py census; a tied LM head counts): what ZeRO-3 fetches one by
    # one (throughput/host.py). None: not counted (estimated from the layer count).
    modules_with_parameters: int | None = None
    layer_facts: LayerFacts | None = None
    # The module census (model/layout.py) of a spec counted from a Hugging Face config: what LoRA adapts
    # (model/peft.py), so that the advice can price LoRA/QLoRA on this model (advisor/nofit.py). None: not
    # counted (a parameter count). Not part of the spec's identity: the counts above are.
    layout: tuple[Module, ...] | None = field(default=None, compare=False, repr=False)
    # The transformers release the layout was counted as, where one was given (model/transformers_release.py);
    # None: the modelled release (5.24). ``release_dependent``: the layout differs between transformers 4.x and
    # 5.x (an MoE model: fused experts or per-expert Linears), so an unsaid release is an assumed input.
    transformers_version: str | None = None
    release_dependent: bool = False

    @property
    def release_moves_activations(self) -> bool:
        """Whether what the activations keep depends on the transformers release: grouped-query attention, whose
        K/V SDPA repeats to every query head before 4.54 (model/transformers_release.py sdpa_repeats_kv)."""
        heads, kv = self.num_attention_heads, self.num_key_value_heads
        return bool(heads and kv and kv < heads)

    @property
    def head_gets_gradient(self) -> bool:
        """Whether the LM head gets a weight gradient: every parameter trains without PEFT; peft leaves the head
        frozen unless modules_to_save trains a copy of it; modules frozen without PEFT (model/frozen.py) are costed
        as leaving the head trained."""
        return self.trainable_parameters is None or self.frozen is not None or self.peft_head_saved

    @property
    def adapters(self) -> bool:
        """Whether PEFT trains adapters on a frozen base (model/peft.py); a model with some modules frozen without PEFT
        (model/frozen.py) trains the rest in full and has none, though trainable_parameters is set for both."""
        return self.peft is not None

    @property
    def encoder_decoder(self) -> bool:
        """An encoder and a decoder stack: the decoder runs on TrainingShape.target_length."""
        return self.decoder_layers is not None


@dataclass(frozen=True, slots=True)
class LoadInputs:
    """How the model reaches ``deepspeed.initialize`` (the load phase, memory/phases.py). None: not
    given; the memory model then takes the Hugging Face Trainer's behaviour (transformers 5.24) and
    reports it as an assumed input (memory/assumed.py):

    ``load_dtype``: the dtype the weights are materialised in (``from_pretrained(dtype=...)``). Default
    ``dtype="auto"`` (modeling_utils.py from_pretrained -> _get_dtype): the checkpoint's dtype from
    config.json (``ModelSpec.checkpoint_dtype``); fp32 when that is unknown (torch's default dtype).
    ``zero_init``: the parameters are created under ``deepspeed.zero.Init`` (stage 3 only). Default on at
    stage 3: modeling_utils.py get_init_context enters zero.Init when integrations/deepspeed.py
    is_deepspeed_zero3_enabled(), i.e. the TrainingArguments with the stage-3 config exist before
    from_pretrained.
    ``meta_device``: the model is built on the meta device and its weights are materialised straight on
    the GPU (e.g. ``from_pretrained(device_map={"": local_rank})``): no host copy. Default off: without
    a device_map the weights are materialised on the CPU, in every local rank.
    ``script_moves_to_gpu``: the script calls ``model.cuda()``/``.to(device)`` itself before
    ``deepspeed.initialize``, so the cast to 16 bits happens on the GPU.
    """

    load_dtype: Precision | None = None  # from_pretrained(dtype=...)
    zero_init: bool | None = None  # parameters created under deepspeed.zero.Init (stage 3 only)
    meta_device: bool | None = None  # built on the meta device, weights materialised on the GPU (no host copy)
    script_moves_to_gpu: bool = False  # the script calls model.cuda() itself before deepspeed.initialize


# The Hugging Face Trainer's ``optim`` names (transformers 5.24 training_args.py OptimizerNames, plus 4.x's
# adamw_apex_fused and adamw_hf): the client optimizer where the DeepSpeed config has no optimizer block
# (memory/step_temporaries.py).
CLIENT_OPTIMIZER_NAMES = (
    "adamw_torch", "adamw_torch_fused", "adamw_apex_fused", "adamw_hf", "adamw_torch_xla", "adamw_torch_npu_fused",
    "adafactor", "adamw_anyprecision", "adamw_torch_4bit", "adamw_torch_8bit", "ademamix", "sgd", "adagrad",
    "adamw_bnb_8bit", "adamw_8bit", "ademamix_8bit", "lion_8bit", "lion_32bit", "paged_adamw_32bit",
    "paged_adamw_8bit", "paged_ademamix_32bit", "paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit",
    "rmsprop", "rmsprop_bnb", "rmsprop_bnb_8bit", "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit",
    "galore_adafactor", "galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise",
    "lomo", "adalomo", "grokadamw", "schedule_free_radam", "schedule_free_adamw", "schedule_free_sgd",
    "apollo_adamw", "apollo_adamw_layerwise", "stable_adamw")
# The Trainer's ``optim`` when nobody gives it: "adamw_torch" is its default up to transformers 4.53, and after
# that with torch < 2.8 (training_args.py default_optim); with torch >= 2.8, 4.54+ default to "adamw_torch_fused".
# The foreach path is the larger of the two: a bound.
DEFAULT_CLIENT_OPTIMIZER = "adamw_torch"


@dataclass(frozen=True, slots=True)
class TrainingShape:
    """How the model is run: the inputs to the activation estimate, and the values a flag or the
    model description gives where the DeepSpeed config leaves them open (None: not given)."""

    sequence_length: int | None = None  # encoder-decoder: the source (encoder) length
    activation_checkpointing: Checkpointing = Checkpointing.NONE
    flash_attention: bool = True
    target_length: int | None = None  # encoder-decoder: decoder tokens per sample (None: sequence_length)
    # A multimodal model: how many of each sample's sequence_length tokens are image tokens (the merger's outputs;
    # merge**2 patches each in the vision tower). None: not given (memory/vision.py assumes the bound).
    image_tokens: int | None = None
    # Whether a vision tower's blocks are checkpointed (ms-swift's --vit_gradient_checkpointing); None: as the decoder's
    # layers are (transformers' gradient_checkpointing_enable checkpoints every GradientCheckpointingLayer)
    vision_checkpointing: bool | None = None
    # How batches are padded (Padding); None: not given, costed as max_length (every batch at the full length).
    padding: Padding | None = None
    micro_batch_size: int | None = None  # fills train_micro_batch_size_per_gpu "auto" / absent
    precision: Precision | None = None  # fills fp16/bf16 "enabled": "auto" (or no config)
    zero_stage: int | None = None  # fills zero_optimization.stage "auto" (Accelerate's zero_stage)
    # Parallel degrees (memory/parallel.py): tensor and sequence fill what the config leaves out
    # (tensor_parallel.autotp_size, sequence_parallel_size); pipeline and expert are set in code only.
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    sequence_parallel: int | None = None
    expert_parallel: int | None = None
    load: LoadInputs = field(default_factory=LoadInputs)
    # the client optimizer's implementation: the Hugging Face Trainer's ``optim`` (memory/step_temporaries.py)
    optim: str | None = None
    # The Liger kernel (linkedin/Liger-Kernel) is applied to the model: its fused linear cross-entropy, RMSNorm and
    # SwiGLU in place of transformers' head, loss and modules (memory/liger.py). Off unless a run says so.
    liger_kernel: bool = False
    # Cut Cross-Entropy (apple/ml-cross-entropy; axolotl's CutCrossEntropyPlugin) computes the supervised loss
    # without the logits (memory/cut_cross_entropy.py). Off unless a run says so.
    cut_cross_entropy: bool = False
    # axolotl's TiledMLP (ALST): each MLP runs over shards of the sequence, saving only its input
    # (memory/activations.py tiled_mlp_bytes); shards: its tiled_mlp_num_shards (None: its default rule)
    tiled_mlp: bool = False
    tiled_mlp_shards: int | None = None
    # Which offloader holds the checkpointed layer inputs in host memory (memory/activation_offload.py); none
    # unless a run says so.
    activation_offload: ActivationOffload = ActivationOffload.NONE
    # Under full recomputation, checkpoint every n-th layer only (transformers 5.16+ every_n_layers in the checkpoint
    # arguments); the others keep what they keep without checkpointing. 1: every layer.
    checkpoint_every: int = 1
    # The training method (DPO, GRPO, PPO, ...) and what the trainer's files say about it (config/method.py):
    # memory/ counts the reference, reward and critic models, the paired batch and generation it implies.
    method: MethodSetup = field(default_factory=MethodSetup)
    # The other models' descriptions where they are not the policy's (a different reference / reward / critic
    # model named in the files, resolved by inputs/); a role absent here is costed as the policy's architecture.
    auxiliary_specs: tuple[tuple[ModelRole, ModelSpec], ...] = ()

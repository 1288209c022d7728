"""Hugging Face model families: one table row per ``model_type``.

Each row mirrors transformers 5.24's ``models/<type>/configuration_<type>.py`` (the keys it
reads, their defaults and spellings: :class:`~zeroadvisor.model.hfconfig.Field`) and
``modeling_<type>.py`` (which modules own which parameters). Decoder-only families differ
in a handful of ways that are data here (:class:`Dec`: fused or separate q/k/v, which
biases, which norm, how many norms per layer, gated or plain MLP, MoE placement and shared
experts); a single builder (:func:`_decoder`) turns a row into modules. BERT/RoBERTa and T5
have their own builders. Every formula cites the transformers class it follows; paths are
relative to ``transformers/models/``.

Nothing here imports torch: the oracle test (tests/oracle/test_param_counts_oracle.py)
builds every family with transformers on the meta device and compares, module by module.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from zeroadvisor.jsontypes import JSONValue
from zeroadvisor.model.hfconfig import DERIVED, REQUIRED, Cfg, Default
from zeroadvisor.model.hfconfig import Field as F
from zeroadvisor.model.layout import Layout, TorchClass
from zeroadvisor.model.spec import VisionTower

TRANSFORMERS_VERSION = "5.24"  # the modelling code these rows were read from

Flag = bool | str  # a constant, or the row name of a bool field of the family

# Head kinds: what ``config["architectures"][0]`` adds on top of the base model.
BASE, CAUSAL_LM, SEQ_CLS = "base", "causal_lm", "seq_cls"
MLM, PRETRAINING, NSP, MULTIPLE_CHOICE, TOKEN_CLS, QA = (
    "mlm",
    "pretraining",
    "nsp",
    "multiple_choice",
    "token_cls",
    "qa",
)
SEQ2SEQ_LM, ENCODER = "seq2seq_lm", "encoder"


@dataclass(frozen=True, slots=True)
class Arch:
    """The architecture facts that go into ModelSpec besides the counts."""

    num_layers: int
    hidden_size: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    gated: bool
    experts: int | None = None
    top_k: int | None = None
    # Whether the output embedding (lm_head / MLM decoder) is the input embedding; None when
    # the counted class has no output embedding (a base model, a classifier).
    tied: bool | None = None
    notes: tuple[str, ...] = ()
    encoder_layers: int | None = None  # encoder-decoder stacks (T5); num_layers is their sum
    decoder_layers: int | None = None
    # the layout differs between transformers 4.x and 5.x (an MoE block with a MoeV4 row)
    release_dependent: bool = False
    shared_expert_width: int | None = None  # an MoE block's always-on shared expert MLP (None: none)
    latent_ranks: tuple[int, ...] = ()  # multi-head latent attention: the low ranks an RMSNorm runs over (q, kv)
    value_head_dim: int | None = None  # a value head narrower than the query/key head (MLA's v_head_dim)
    vision: VisionTower | None = None  # a multimodal model's vision tower (Qwen2-VL, Qwen2.5-VL)


# --------------------------------------------------------------------------- helpers


def _flag(c: Cfg, flag: Flag) -> bool:
    return flag if isinstance(flag, bool) else bool(getattr(c, flag))


def _opt(c: Cfg, name: str) -> Any:
    """A field some rows declare and others do not (None when undeclared)."""
    try:
        return getattr(c, name)
    except AttributeError:
        return None


def _divisible_head_dim(c: Cfg) -> int:
    """``hidden_size // num_attention_heads``, which transformers uses when no head_dim is
    given (several families raise when it does not divide; none builds a sane model)."""
    h: int = c.hidden_size
    n: int = c.num_attention_heads
    if h % n:
        raise c.fail(
            "num_attention_heads",
            f"hidden_size {h} is not a multiple of num_attention_heads {n}",
        )
    return h // n


def _head_dim(c: Cfg) -> int:
    explicit: int | None = _opt(c, "head_dim")
    return explicit if explicit is not None else _divisible_head_dim(c)


def _kv_heads(c: Cfg) -> int:
    kv: int | None = _opt(c, "num_key_value_heads")
    heads: int = c.num_attention_heads
    return kv if kv is not None else heads


def _num_labels(c: Cfg) -> int:
    labels: int = c.num_labels  # set by hf.py from id2label / num_labels (default 2)
    return labels


def _mlp(L: Layout, kind: str, h: int, width: int, bias: bool) -> None:
    if kind == "gated":  # LlamaMLP: gate_proj, up_proj, down_proj
        L.linear("gate_proj", h, width, bias)
        L.linear("up_proj", h, width, bias)
        L.linear("down_proj", width, h, bias)
    elif kind == "gated_fused":  # Phi3MLP: gate_up_proj (h -> 2I), down_proj
        L.linear("gate_up_proj", h, 2 * width, bias)
        L.linear("down_proj", width, h, bias)
    elif kind == "plain":  # GPT-2/NeoX/Falcon/...: fc_in (h -> I), fc_out (I -> h)
        L.linear("fc_in", h, width, bias)
        L.linear("fc_out", width, h, bias)
    else:  # pragma: no cover - a table bug
        raise AssertionError(kind)


# --------------------------------------------------------------------------- decoders


@dataclass(frozen=True, slots=True)
class MoeV4:
    """The sparse block as transformers 4.x builds it (model/transformers_release.py): ``experts`` an
    ``nn.ModuleList`` of one MLP per routed expert, each three ``nn.Linear`` (gate h -> w, up h -> w,
    down w -> h; with the family's mlp_bias), and a router that is ``nn.Linear(h, E, bias=False)`` or a
    module owning an (E, h) weight. bitsandbytes quantizes those Linears, peft's all-linear adapts
    them, and ZeRO-3 gathers one expert projection (w*h) at a time instead of the fused 3*E*w*h."""

    names: tuple[str, str, str]  # the per-expert Linears: gate, up, down
    router_linear: bool  # the router is an nn.Linear (else a module with a weight parameter)


@dataclass(frozen=True, slots=True)
class Moe:
    """A sparse MLP block: router + one fused experts module (+ shared experts).

    transformers 5 stores all routed experts of a layer in ONE module (``*Experts``) with
    3-D parameters ``gate_up_proj (E, 2I, h)`` and ``down_proj (E, h, I)``: that module,
    3*E*I*h parameters, is what ZeRO-3 gathers at once, and usually the largest one.
    ``v4``: the layout before transformers 5.0 (None: the same at every release the family has).
    """

    experts: str  # row name of the routed-expert count
    width: str  # row name of the per-expert MLP width
    placement: str = "all"  # "all" | "qwen" | "first_k_dense"
    shared: str | None = None  # None | "qwen2" | "deepseek"
    biases: bool = False  # gpt_oss: router bias and expert biases
    v4: MoeV4 | None = None


@dataclass(frozen=True, slots=True)
class Dec:
    """How one decoder-only family differs from Llama (the defaults)."""

    attention: str = "separate"  # "separate" q/k/v/o | "fused" qkv + o | "falcon" | "mla"
    qkv_bias: Flag = False
    o_bias: Flag = False
    qk_norm: str | None = None  # "rms": RMSNorm(head_dim) on q, k | "phi": LayerNorms if qk_layernorm
    sinks: bool = False  # gpt_oss: a learned logit per head, owned by the attention module
    mlp: str = "gated"  # "gated" | "gated_fused" | "plain"
    mlp_bias: Flag = False
    norm: str = "rms"  # "rms" | "ln" | "ln_nobias" (MPT) | "ln_opt" (OPT's optional affine)
    norms: int | Callable[[Cfg], int] = 2  # norms per decoder layer
    final_norm: bool | Callable[[Cfg], bool] = True
    embed_norm: bool = False  # BLOOM's word_embeddings_layernorm
    positions: int | None = None  # learned positions: max_position_embeddings + this offset
    word_embed_proj: bool = False  # OPT: embeddings of width word_embed_proj_dim
    layer_extra: Callable[[Cfg, Layout, int], None] | None = None
    moe: Moe | None = None
    lm_head_bias: bool = False


def _norm(d: Dec, c: Cfg, L: Layout, name: str, dim: int) -> None:
    if d.norm == "rms":
        L.rms_norm(name, dim)
    elif d.norm == "ln":
        L.layer_norm(name, dim)
    elif d.norm == "ln_nobias":
        L.layer_norm(name, dim, bias=False)
    elif d.norm == "ln_opt":
        L.layer_norm(name, dim, affine=c.layer_norm_elementwise_affine)
    else:  # pragma: no cover - a table bug
        raise AssertionError(d.norm)


def _attention(d: Dec, c: Cfg, L: Layout) -> tuple[int, int, int]:
    """Adds one layer's attention modules; returns (heads, kv heads, head_dim)."""
    h, n = c.hidden_size, c.num_attention_heads
    qkv_bias, o_bias = _flag(c, d.qkv_bias), _flag(c, d.o_bias)
    if d.attention == "mla":
        return _mla(c, L)
    if d.attention == "falcon":
        # falcon/modeling_falcon.py FalconAttention: one fused query_key_value whose width
        # depends on the variant, then dense (h -> h); both with config.bias.
        hd = _divisible_head_dim(c)
        if c.new_decoder_architecture:  # Falcon-40B/180B: grouped kv heads
            kv = c.num_kv_heads if c.num_kv_heads is not None else n
            out = (2 * kv + n) * hd
        elif c.multi_query:  # Falcon-7B: one shared k and v head
            kv, out = 1, h + 2 * hd
        else:
            kv, out = n, 3 * h
        L.linear("query_key_value", h, out, bool(c.bias))
        L.linear("dense", h, h, bool(c.bias))
        return n, kv, hd
    hd, kv = _head_dim(c), _kv_heads(c)
    if d.attention == "separate":  # LlamaAttention: q_proj, k_proj, v_proj, o_proj
        L.linear("q_proj", h, n * hd, qkv_bias)
        L.linear("k_proj", h, kv * hd, qkv_bias)
        L.linear("v_proj", h, kv * hd, qkv_bias)
    elif d.attention == "fused":  # GPT-2 c_attn, NeoX query_key_value, Phi3 qkv_proj, MPT Wqkv
        L.linear("qkv_proj", h, (n + 2 * kv) * hd, qkv_bias)
    else:  # pragma: no cover - a table bug
        raise AssertionError(d.attention)
    L.linear("o_proj", n * hd, h, o_bias)
    if d.qk_norm == "rms":  # qwen3/gemma3: RMSNorm over head_dim, shared by all heads
        L.rms_norm("q_norm", hd)
        L.rms_norm("k_norm", hd)
    elif d.qk_norm == "phi" and c.qk_layernorm:
        # phi/modeling_phi.py PhiAttention: LayerNorm(hidden_size // num_attention_heads),
        # i.e. NOT head_dim when config.json overrides head_dim.
        L.layer_norm("q_layernorm", _divisible_head_dim(c))
        L.layer_norm("k_layernorm", _divisible_head_dim(c))
    if d.sinks:  # gpt_oss/modeling_gpt_oss.py GptOssAttention.sinks: (num_attention_heads,)
        L.add("", n)
    return n, kv, hd


def _mla(c: Cfg, L: Layout) -> tuple[int, int, int]:
    """Multi-head latent attention, deepseek_v2/v3 modeling_deepseek_v*.py DeepseekV*Attention.

    Queries: q_proj (h -> n*(nope+rope)) when q_lora_rank is None, else the low-rank pair
    q_a_proj (h -> r_q, attention_bias), q_a_layernorm RMSNorm(r_q), q_b_proj (r_q -> n*(nope+rope)).
    Keys/values: kv_a_proj_with_mqa (h -> r_kv + rope, attention_bias), kv_a_layernorm
    RMSNorm(r_kv), kv_b_proj (r_kv -> n*(nope + v)); o_proj (n*v -> h, attention_bias).
    """
    h, n = c.hidden_size, c.num_attention_heads
    nope, rope, v = c.qk_nope_head_dim, c.qk_rope_head_dim, c.v_head_dim
    bias = c.attention_bias
    if c.q_lora_rank is None:
        L.linear("q_proj", h, n * (nope + rope), False)
    else:
        L.linear("q_a_proj", h, c.q_lora_rank, bias)
        L.rms_norm("q_a_layernorm", c.q_lora_rank)
        L.linear("q_b_proj", c.q_lora_rank, n * (nope + rope), False)
    L.linear("kv_a_proj_with_mqa", h, c.kv_lora_rank + rope, bias)
    L.rms_norm("kv_a_layernorm", c.kv_lora_rank)
    L.linear("kv_b_proj", c.kv_lora_rank, n * (nope + v), False)
    L.linear("o_proj", n * v, h, bias)
    return n, _kv_heads(c), nope + rope


def _moe_layers(m: Moe, c: Cfg) -> int:
    """How many of the decoder layers carry the sparse block."""
    N: int = c.num_hidden_layers
    E: int = getattr(c, m.experts)
    if m.placement == "all":
        return N
    if m.placement == "first_k_dense":
        # deepseek_v3/modeling_deepseek_v3.py DeepseekV3DecoderLayer:
        # MoE iff layer_idx >= first_k_dense_replace (moe_layer_freq is not read).
        dense: int = c.first_k_dense_replace
        return max(0, N - dense)
    if m.placement == "qwen":
        # qwen2_moe/qwen3_moe Qwen*MoeDecoderLayer: MoE iff layer_idx not in mlp_only_layers
        # and num_experts > 0 and (layer_idx + 1) % decoder_sparse_step == 0.
        only = set(c.mlp_only_layers or ())
        step = c.decoder_sparse_step
        return sum(1 for i in range(N) if i not in only and E > 0 and (i + 1) % step == 0)
    raise AssertionError(m.placement)  # pragma: no cover


def _moe_block(m: Moe, c: Cfg, L: Layout, d: Dec) -> None:
    if m.v4 is not None and not c.fused_experts:
        _moe_v4(m.v4, c, L, getattr(c, m.experts), getattr(c, m.width), _flag(c, d.mlp_bias))
    else:
        _moe_fused(m, c, L)
    _shared_experts(m, c, L, d)


def _moe_v4(v4: MoeV4, c: Cfg, L: Layout, E: int, w: int, bias: bool) -> None:
    """The router and routed experts as transformers 4.x builds them: experts.<i>.{gate, up, down}."""
    h = c.hidden_size
    if v4.router_linear:
        L.linear("gate", h, E, False)
    else:  # DeepseekV2MoEGate / DeepseekV3TopkRouter: weight (E, h), not a Linear
        L.add("gate", E * h)
    experts = L.sub("experts.*", E)
    gate, up, down = v4.names
    experts.linear(gate, h, w, bias)
    experts.linear(up, h, w, bias)
    experts.linear(down, w, h, bias)


def _moe_fused(m: Moe, c: Cfg, L: Layout) -> None:
    """The router and the one fused *Experts module of transformers 5."""
    h, E, w = c.hidden_size, getattr(c, m.experts), getattr(c, m.width)
    # Router (*TopKRouter / *TopkRouter): weight (E, h) [+ bias (E,) in gpt_oss]. DeepSeek-V3's
    # e_score_correction_bias is an nn.Buffer there: not a parameter, not counted.
    L.add("gate", E * h, *([E] if m.biases else []))
    # *Experts: gate_up_proj (E, 2w, h) and down_proj (E, h, w) in one module; gpt_oss adds
    # gate_up_proj_bias (E, 2w) and down_proj_bias (E, h).
    experts = [E * 2 * w * h, E * h * w]
    if m.biases:
        experts += [E * 2 * w, E * h]
    L.add("experts", *experts)


def _shared_experts(m: Moe, c: Cfg, L: Layout, d: Dec) -> None:
    h = c.hidden_size
    if m.shared == "qwen2":
        # qwen2_moe/modeling_qwen2_moe.py Qwen2MoeSparseMoeBlock: shared_expert
        # (Qwen2MoeMLP of shared_expert_intermediate_size) and shared_expert_gate (h -> 1).
        _mlp(L.sub("shared_expert"), "gated", h, c.shared_expert_intermediate_size, False)
        L.linear("shared_expert_gate", h, 1, False)
    elif m.shared == "deepseek":
        # DeepseekV*MoE.shared_experts: one MLP of width moe_intermediate_size * n_shared_experts.
        width = c.moe_intermediate_size * c.n_shared_experts
        _mlp(L.sub("shared_experts"), "gated", h, width, _flag(c, d.mlp_bias))


def _decoder(d: Dec, c: Cfg, L: Layout, head: str, base_name: str = "model") -> Arch:
    h, N, V = c.hidden_size, c.num_hidden_layers, c.vocab_size
    base = L.sub(base_name)
    e = _decoder_embeddings(d, c, base)

    layers = base.sub("layers.*", N)
    heads, kv, hd = _attention(d, c, layers.sub("self_attn"))
    norms = d.norms(c) if callable(d.norms) else d.norms
    for i in range(norms):
        _norm(d, c, layers, f"norm{i}", h)
    if d.layer_extra is not None:
        d.layer_extra(c, layers, h)
    n_moe, width = _decoder_mlps(d, c, base)
    final = d.final_norm(c) if callable(d.final_norm) else d.final_norm
    if final:
        _norm(d, c, base, "norm", h)
    tied = _decoder_head(d, c, L, head, e)

    m = d.moe if n_moe else None  # the sparse block, where some layer has it
    return Arch(
        num_layers=N,
        hidden_size=h,
        heads=heads,
        kv_heads=kv,
        head_dim=hd,
        intermediate=getattr(c, m.width) if m is not None else width,
        vocab=V,
        gated=d.mlp != "plain",
        experts=getattr(c, m.experts) if m is not None else None,
        top_k=_opt(c, "num_experts_per_tok") if m is not None else None,
        tied=tied,
        notes=(_moe_note(m, c, n_moe, width),) if m is not None else (),
        release_dependent=m is not None and m.v4 is not None,
        shared_expert_width=_shared_expert_width(m, c) if m is not None else None,
        latent_ranks=tuple(r for r in (c.q_lora_rank, c.kv_lora_rank) if r) if d.attention == "mla" else (),
        value_head_dim=c.v_head_dim if d.attention == "mla" else None,
    )


def _shared_expert_width(m: Moe, c: Cfg) -> int | None:
    """The shared expert's MLP width (_shared_experts builds it): Qwen2-MoE's shared_expert, DeepSeek's
    n_shared_experts experts as one MLP."""
    if m.shared == "qwen2":
        return int(c.shared_expert_intermediate_size)
    if m.shared == "deepseek":
        return int(c.moe_intermediate_size * c.n_shared_experts) or None
    return None


def _decoder_embeddings(d: Dec, c: Cfg, base: Layout) -> int:
    """Adds the input embeddings (and what sits between them and the layers); returns their width."""
    h, V = c.hidden_size, c.vocab_size
    # OPT embeds at word_embed_proj_dim and projects in/out when it differs from hidden_size
    # (opt/modeling_opt.py OPTDecoder.project_in/project_out).
    e: int = (c.word_embed_proj_dim or h) if d.word_embed_proj else h
    base.embedding("embed_tokens", V, e)
    if d.positions is not None:
        # gpt2 wpe (n_positions, h); OPTLearnedPositionalEmbedding: num_embeddings + 2.
        base.embedding("embed_positions", c.max_position_embeddings + d.positions, h)
    if e != h:
        base.linear("project_in", e, h, False)
        base.linear("project_out", h, e, False)
    if d.embed_norm:
        _norm(d, c, base, "word_embeddings_layernorm", h)
    return e


def _decoder_mlps(d: Dec, c: Cfg, base: Layout) -> tuple[int, int]:
    """Adds the MLPs: dense everywhere, or sparse on the layers the family's placement rule picks.
    Returns (layers with the sparse block, the dense MLP width)."""
    h, N = c.hidden_size, c.num_hidden_layers
    n_moe = _moe_layers(d.moe, c) if d.moe is not None else 0
    width: int = c.intermediate_size if _opt(c, "intermediate_size") is not None else 4 * h
    if N - n_moe:
        if d.moe is not None:
            width = c.need("intermediate_size", f"the dense MLP of {N - n_moe} non-MoE layers")
        _mlp(base.sub("layers.*.mlp", N - n_moe), d.mlp, h, width, _flag(c, d.mlp_bias))
    if n_moe and d.moe is not None:
        _moe_block(d.moe, c, base.sub("layers.*.mlp", n_moe), d)
    return n_moe, width


def _decoder_head(d: Dec, c: Cfg, L: Layout, head: str, e: int) -> bool | None:
    """Adds the head; returns whether lm_head is the input embedding (None without an lm_head)."""
    if head == CAUSAL_LM:
        tied: bool = c.tie_word_embeddings
        L.linear("lm_head", e, c.vocab_size, d.lm_head_bias, tied_weight=tied)
        return tied
    if head == SEQ_CLS:  # score = Linear(h, num_labels, bias=False) in every family
        L.linear("score", e, _num_labels(c), False)
    elif head != BASE:  # pragma: no cover - a table bug
        raise AssertionError(head)
    return None


def _moe_note(m: Moe, c: Cfg, n_moe: int, width: int) -> str:
    N = c.num_hidden_layers
    shared = ""
    if m.shared == "qwen2":
        shared = f", a shared expert of width {c.shared_expert_intermediate_size} with its gate"
    elif m.shared == "deepseek":
        shared = f", shared experts of total width {c.moe_intermediate_size * c.n_shared_experts}"
    top_k = _opt(c, "num_experts_per_tok")
    dense = f"; dense MLP of width {width} on the other {N - n_moe}" if N - n_moe else ""
    if m.v4 is not None and not c.fused_experts:
        layout = "; experts as one MLP of nn.Linear each (transformers 4.x)"
    else:
        layout = "; routed experts of a layer in one fused module of 3-D parameters (transformers 5)"
    return (f"MoE on {n_moe} of {N} layers: {getattr(c, m.experts)} routed experts of width "
            f"{getattr(c, m.width)}" + (f", top-{top_k}" if top_k else "") + shared + dense + layout)


def _gpt2_cross_attention(c: Cfg, L: Layout, h: int) -> None:
    # gpt2/modeling_gpt2.py GPT2Block with add_cross_attention: crossattention
    # (c_attn Conv1D h -> 2h, q_attn h -> h, c_proj h -> h, all with bias) + ln_cross_attn.
    if c.add_cross_attention:
        x = L.sub("crossattention")
        x.linear("c_attn", h, 2 * h, True)
        x.linear("q_attn", h, h, True)
        x.linear("c_proj", h, h, True)
        L.layer_norm("ln_cross_attn", h)


def _falcon_norms(c: Cfg) -> int:
    # falcon/modeling_falcon.py FalconDecoderLayer: two LayerNorms unless parallel_attn;
    # with parallel_attn, ln_attn + ln_mlp when num_ln_in_parallel_attn == 2 (its default
    # under new_decoder_architecture), else the single input_layernorm.
    if not c.parallel_attn:
        return 2
    n = c.num_ln_in_parallel_attn
    if n is None and c.new_decoder_architecture:
        n = 2
    return 2 if n == 2 else 1


def _opt_final_norm(c: Cfg) -> bool:
    # opt/modeling_opt.py OPTDecoder: final_layer_norm only for pre-LN models that did not
    # set the legacy _remove_final_layer_norm.
    return c.do_layer_norm_before and not c.remove_final_layer_norm


# --------------------------------------------------------------------------- BERT/RoBERTa


def _bert(c: Cfg, L: Layout, head: str, *, roberta: bool) -> Arch:
    """bert/modeling_bert.py and roberta/modeling_roberta.py (the same encoder)."""
    h, n, N, V, inter = (
        c.hidden_size,
        c.num_attention_heads,
        c.num_hidden_layers,
        c.vocab_size,
        c.intermediate_size,
    )
    hd = _divisible_head_dim(c)  # BertSelfAttention raises otherwise
    base = L.sub("roberta" if roberta else "bert")
    # BertEmbeddings: word (V, h), position (max_position_embeddings, h), token type
    # (type_vocab_size, h), LayerNorm. RoBERTa's positions start after padding_idx, which
    # is why its configs say max_position_embeddings = 514 for 512 tokens: the table
    # simply has that many rows.
    emb = base.sub("embeddings")
    emb.embedding("word_embeddings", V, h)
    emb.embedding("position_embeddings", c.max_position_embeddings, h)
    emb.embedding("token_type_embeddings", c.type_vocab_size, h)
    emb.layer_norm("LayerNorm", h)

    def attention(A: Layout) -> None:  # BertAttention: query/key/value + output dense + LN
        for name in ("self.query", "self.key", "self.value", "output.dense"):
            A.linear(name, h, h, True)
        A.layer_norm("output.LayerNorm", h)

    layer = base.sub("encoder.layer.*", N)
    attention(layer.sub("attention"))
    if c.add_cross_attention:
        if not c.is_decoder:  # BertLayer raises ValueError in this case
            raise c.fail("add_cross_attention", "add_cross_attention needs is_decoder: true")
        attention(layer.sub("crossattention"))
    layer.linear("intermediate.dense", h, inter, True)
    layer.linear("output.dense", inter, h, True)
    layer.layer_norm("output.LayerNorm", h)

    # Which heads build BertModel with its pooler (add_pooling_layer=True).
    pooled = {BASE, MULTIPLE_CHOICE} | (set() if roberta else {PRETRAINING, NSP, SEQ_CLS})
    if head in pooled:
        base.linear("pooler.dense", h, h, True)

    tied = _bert_head(c, L, head, roberta=roberta)
    return Arch(N, h, n, n, hd, inter, V, gated=False, tied=tied)


def _bert_head(c: Cfg, L: Layout, head: str, *, roberta: bool) -> bool | None:
    """Adds the head; returns whether the MLM decoder is the word embedding (None without one)."""
    h, V = c.hidden_size, c.vocab_size
    tied = None
    if head in (MLM, CAUSAL_LM, PRETRAINING):
        # BertLMPredictionHead / RobertaLMHead: a transform (dense + LayerNorm), the decoder
        # Linear(h, V) and a separate `bias` (V,). With tie_word_embeddings the decoder's
        # weight is the word embedding and its bias is that `bias` parameter.
        tied = c.tie_word_embeddings
        lm = L.sub("lm_head" if roberta else "cls.predictions")
        lm.linear("transform.dense", h, h, True)
        lm.layer_norm("transform.LayerNorm", h)
        lm.linear("decoder", h, V, True, tied_weight=tied, tied_bias=tied)
        lm.add("", V)  # the head's own `bias` parameter
        if head == PRETRAINING:
            L.linear("cls.seq_relationship", h, 2, True)
    elif head == NSP:
        L.linear("cls.seq_relationship", h, 2, True)
    elif head == SEQ_CLS and roberta:  # RobertaClassificationHead: dense + out_proj
        L.linear("classifier.dense", h, h, True)
        L.linear("classifier.out_proj", h, _num_labels(c), True)
    elif head in (SEQ_CLS, TOKEN_CLS, QA):  # classifier / qa_outputs: Linear(h, num_labels)
        L.linear("qa_outputs" if head == QA else "classifier", h, _num_labels(c), True)
    elif head == MULTIPLE_CHOICE:
        L.linear("classifier", h, 1, True)
    elif head != BASE:  # pragma: no cover - a table bug
        raise AssertionError(head)
    return tied


# --------------------------------------------------------------------------- T5


def _t5(c: Cfg, L: Layout, head: str) -> Arch:
    """t5/modeling_t5.py: shared embedding, encoder and decoder T5Stacks, lm_head.

    transformers 5.24's T5Config forces ``tie_word_embeddings = True`` (the saved value
    only decides output scaling), so ``lm_head`` and both stacks' ``embed_tokens`` are
    always the ``shared`` tensor.
    """
    d, n, dkv, ff, V = c.hidden_size, c.num_attention_heads, c.head_dim, c.d_ff, c.vocab_size
    act = c.feed_forward_proj.split("-")
    if (len(act) > 1 and act[0] != "gated") or len(act) > 2:  # T5Config.validate_architecture
        raise c.fail("feed_forward_proj", f"feed_forward_proj {c.feed_forward_proj!r} is invalid")
    gated = act[0] == "gated"
    enc_n = c.num_hidden_layers
    dec_n = c.num_decoder_layers if c.num_decoder_layers is not None else enc_n

    # T5ForSequenceClassification wraps a T5Model, T5ForTokenClassification a T5EncoderModel.
    root = L.sub("transformer") if head in (SEQ_CLS, TOKEN_CLS) else L
    root.embedding("shared", V, d)
    _t5_stack(c, root.sub("encoder"), enc_n, gated, decoder=False)
    has_decoder = head not in (ENCODER, TOKEN_CLS)
    if has_decoder:
        _t5_stack(c, root.sub("decoder"), dec_n, gated, decoder=True)
    tied = _t5_head(c, L, head)
    layers = enc_n + dec_n if has_decoder else enc_n
    notes = (f"num_layers counts {enc_n} encoder + {dec_n} decoder blocks",) if has_decoder else ()
    return Arch(layers, d, n, n, dkv, ff, V, gated=gated, tied=tied, notes=notes,
                encoder_layers=enc_n if has_decoder else None, decoder_layers=dec_n if has_decoder else None)


def _t5_stack(c: Cfg, S: Layout, layers: int, gated: bool, *, decoder: bool) -> None:
    """One T5Stack: embed_tokens (the shared tensor), its blocks and final_layer_norm."""
    d, n, ff, V = c.hidden_size, c.num_attention_heads, c.d_ff, c.vocab_size
    inner = n * c.head_dim
    S.embedding("embed_tokens", V, d, shared=True)  # tied to `shared`
    if layers:
        # T5Attention.relative_attention_bias: nn.Embedding(buckets, n_heads), only in
        # the self-attention of block 0 of each stack (has_relative_attention_bias).
        S.add("block.0.layer.0.SelfAttention.relative_attention_bias",
              c.relative_attention_num_buckets * n, torch_class=TorchClass.EMBEDDING,
              embedding_shape=(c.relative_attention_num_buckets, n))
    B = S.sub("block.*", layers)
    attentions = ("SelfAttention", "EncDecAttention") if decoder else ("SelfAttention",)
    for name in attentions:  # T5Attention: q, k, v (d -> n*d_kv), o; no biases
        for proj in ("q", "k", "v"):
            B.linear(f"{name}.{proj}", d, inner, False)
        B.linear(f"{name}.o", inner, d, False)
        B.rms_norm(f"{name}.layer_norm", d, cls=TorchClass.OTHER_NORM)  # T5LayerNorm: weight only
    if gated:  # T5DenseGatedActDense: wi_0, wi_1, wo
        B.linear("wi_0", d, ff, False)
        B.linear("wi_1", d, ff, False)
    else:  # T5DenseActDense: wi, wo
        B.linear("wi", d, ff, False)
    B.linear("wo", ff, d, False)
    B.rms_norm("ff.layer_norm", d, cls=TorchClass.OTHER_NORM)
    S.rms_norm("final_layer_norm", d, cls=TorchClass.OTHER_NORM)


def _t5_head(c: Cfg, L: Layout, head: str) -> bool | None:
    """Adds the head; lm_head is always the shared embedding (None without an lm_head)."""
    d, V = c.hidden_size, c.vocab_size
    tied = None
    if head == SEQ2SEQ_LM:
        tied = True
        L.linear("lm_head", d, V, False, tied_weight=True)
    elif head == SEQ_CLS:  # T5ClassificationHead: dense (d -> d) + out_proj, with biases
        L.linear("classification_head.dense", d, d, True)
        L.linear("classification_head.out_proj", d, _num_labels(c), True)
    elif head in (TOKEN_CLS, QA):  # classifier / qa_outputs: Linear(d, num_labels)
        L.linear("qa_outputs" if head == QA else "classifier", d, _num_labels(c), True)
    elif head not in (BASE, ENCODER):  # pragma: no cover - a table bug
        raise AssertionError(head)
    return tied


@dataclass(frozen=True, slots=True)
class BartLike:
    """What tells BART's descendants apart (bart/, mbart/ and blenderbot/modeling_*.py): the learned position
    table's extra rows (BartLearnedPositionalEmbedding's offset 2), a LayerNorm on the embeddings of each stack
    (layernorm_embedding) and one after its last layer (layer_norm, the pre-LN variants)."""

    position_offset: int
    embedding_norm: bool
    final_norm: bool


def _bart(like: BartLike, c: Cfg, L: Layout, head: str) -> Arch:
    """BartModel and its descendants: ``shared`` embedding, encoder and decoder stacks with learned positions,
    BartAttention (q/k/v/out_proj with biases), fc1/fc2 with biases, LayerNorms; the LM head is ``lm_head``.

    With tie_word_embeddings (the default) ``lm_head`` and both stacks' ``embed_tokens`` are the ``shared``
    tensor (_tied_weights_keys); without it each is its own table (measured with transformers 5.24 on the meta
    device: four V x d tables). ``final_logits_bias`` is a buffer, not a parameter."""
    d, V = c.hidden_size, c.vocab_size
    tied = bool(c.tie_word_embeddings)
    enc_n, dec_n = c.encoder_layers, c.decoder_layers
    for heads in (c.encoder_attention_heads, c.decoder_attention_heads):
        if d % heads:  # BartAttention raises ValueError
            raise c.fail("d_model", f"d_model {d} is not divisible by the attention heads ({heads})")
    root = L.sub("model") if head == SEQ2SEQ_LM else L
    root.embedding("shared", V, d)
    _bart_stack(like, c, root.sub("encoder"), enc_n, c.encoder_ffn_dim, decoder=False)
    _bart_stack(like, c, root.sub("decoder"), dec_n, c.decoder_ffn_dim, decoder=True)
    out: bool | None = None
    if head == SEQ2SEQ_LM:
        out = tied
        L.linear("lm_head", d, V, False, tied_weight=tied)
    elif head != BASE:  # pragma: no cover - a table bug
        raise AssertionError(head)
    notes = [f"num_layers counts {enc_n} encoder + {dec_n} decoder layers"]
    heads, ffn = c.decoder_attention_heads, c.decoder_ffn_dim
    if (c.encoder_attention_heads, c.encoder_ffn_dim) != (heads, ffn):
        heads, ffn = max(heads, c.encoder_attention_heads), max(ffn, c.encoder_ffn_dim)
        notes.append(f"encoder and decoder differ in heads or MLP width: activations costed with the larger "
                     f"({heads} heads, MLP {ffn}), a bound")
    return Arch(enc_n + dec_n, d, heads, heads, d // heads, ffn, V, gated=False, tied=out, notes=tuple(notes),
                encoder_layers=enc_n, decoder_layers=dec_n)


def _bart_stack(like: BartLike, c: Cfg, S: Layout, layers: int, ffn: int, *, decoder: bool) -> None:
    """One BartEncoder / BartDecoder: token and position embeddings, its layers (the decoder's with
    cross-attention), the LayerNorms the variant has."""
    d = c.hidden_size
    S.embedding("embed_tokens", c.vocab_size, d, shared=bool(c.tie_word_embeddings))
    S.embedding("embed_positions", c.max_position_embeddings + like.position_offset, d)
    if like.embedding_norm:
        S.layer_norm("layernorm_embedding", d)
    B = S.sub("layers.*", layers)
    for attention in ("self_attn", "encoder_attn") if decoder else ("self_attn",):
        for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
            B.linear(f"{attention}.{proj}", d, d, True)
        B.layer_norm(f"{attention}_layer_norm", d)
    B.linear("fc1", d, ffn, True)
    B.linear("fc2", ffn, d, True)
    B.layer_norm("final_layer_norm", d)
    if like.final_norm:
        S.layer_norm("layer_norm", d)


def _bart_fields(**defaults: F) -> dict[str, F]:
    """BartConfig's keys (MBartConfig and BlenderbotConfig declare the same): the matrix sizes required."""
    return {
        "vocab_size": F(),
        "hidden_size": F(keys=("d_model", "hidden_size")),
        "max_position_embeddings": F(),
        "encoder_layers": F(kind="nonneg"),
        "decoder_layers": F(kind="nonneg"),
        "encoder_attention_heads": F(),
        "decoder_attention_heads": F(),
        "encoder_ffn_dim": F(),
        "decoder_ffn_dim": F(),
        "tie_word_embeddings": F(True, "bool"),
        **defaults,
    }


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True, slots=True)
class VisionRow:
    """A vision tower's row: the keys of ``vision_config`` (its config class's defaults) and the builder that adds
    its modules under ``model.visual``; ``flat_text``: the config class pops a flat config's decoder keys into its
    text config (Qwen2VLConfig.__post_init__; Qwen3VLConfig has no such step, so its decoder keys must be nested) and
    forwards text_config's tie_word_embeddings to the top (both Qwen2-VL families; Qwen3-VL reads the top only)."""

    fields: Mapping[str, F]
    build: Callable[[Cfg, Layout], VisionTower]
    flat_text: bool = True


@dataclass(frozen=True, slots=True)
class Family:
    model_type: str
    modeling: str  # the transformers file this row mirrors
    fields: Mapping[str, F]
    build: Callable[[Cfg, Layout, str], Arch]
    heads: Mapping[str, str]  # architectures[0] class name -> head kind
    default_head: str  # the class counted when config.json names none
    notes: Callable[[Mapping[str, JSONValue], Cfg], list[str]] | None = None
    # The config class's validate_architecture rejects hidden_size % num_attention_heads != 0
    # even when head_dim is given (LlamaConfig, Gemma2Config, Gemma3TextConfig,
    # GPTNeoXConfig, DeepseekV2Config): such a config.json cannot be loaded at all.
    divisible_heads: bool = False
    # A multimodal family's vision tower (VisionRow): vision_config's keys and its builder; the decoder's keys are
    # then read from text_config where the config nests them (transformers 5 saves) and from the top level where it
    # is flat (older hub configs: Qwen2VLConfig.__post_init__ pops them into text_config)
    vision: VisionRow | None = None


def _fields(
    *,
    tie: bool,
    kv: Default = DERIVED,
    kv_null: bool | None = None,
    head_dim: Default = DERIVED,
    head_dim_null: bool | None = None,
    intermediate: Default = REQUIRED,
    **extra: F,
) -> dict[str, F]:
    """The keys every Llama-like config class declares, with that class's defaults.

    ``head_dim=None`` leaves head_dim out (the family computes hidden_size // heads);
    ``*_null`` says whether JSON null is replaced by transformers (``__post_init__`` or an
    ``or`` in the attention class) rather than crashing it.
    """
    rows = {
        "vocab_size": F(),
        "hidden_size": F(),
        "num_hidden_layers": F(),
        "num_attention_heads": F(),
        "num_key_value_heads": F(kv, nullable=kv_null),
        "intermediate_size": F(intermediate),
        "tie_word_embeddings": F(tie, "bool"),
    }
    if head_dim is not None:
        rows["head_dim"] = F(head_dim, nullable=head_dim_null)
    rows.update(extra)
    return rows


def _decoder_heads(prefix: str, **names: str) -> dict[str, str]:
    return {
        names.get("base", f"{prefix}Model"): BASE,
        names.get("lm", f"{prefix}ForCausalLM"): CAUSAL_LM,
        names.get("seq", f"{prefix}ForSequenceClassification"): SEQ_CLS,
    }


def _dec(dec: Dec) -> Callable[[Cfg, Layout, str], Arch]:
    return lambda c, L, head: _decoder(dec, c, L, head)


def _mpt_notes(raw: Mapping[str, JSONValue], c: Cfg) -> list[str]:
    # mpt/modeling_mpt.py builds Wqkv/out_proj/up_proj/down_proj without biases, 4*d_model
    # MLPs, norms without bias and no learned positions, whatever MptConfig says.
    notes = []
    attn_config = raw.get("attn_config")
    attn: Mapping[str, JSONValue] = attn_config if isinstance(attn_config, Mapping) else {}
    if raw.get("no_bias") is False:
        notes.append("mpt: no_bias=false is ignored by transformers' MptModel (built without biases)")
    if raw.get("expansion_ratio", 4) != 4:
        notes.append(
            f"mpt: expansion_ratio={raw.get('expansion_ratio')} is ignored by transformers' "
            "MptModel (its MLP is always 4*d_model wide)"
        )
    if raw.get("learned_pos_emb") is True:
        notes.append("mpt: learned_pos_emb is ignored by transformers' MptModel (ALiBi, no wpe)")
    if attn.get("attn_type", "multihead_attention") != "multihead_attention":
        notes.append(f"mpt: attn_type {attn.get('attn_type')!r} is ignored (Wqkv is 3*d_model wide)")
    if attn.get("qk_ln"):
        notes.append("mpt: qk_ln is ignored by transformers' MptModel (no q/k LayerNorms)")
    return notes


def _deepseek_notes(raw: Mapping[str, JSONValue], c: Cfg) -> list[str]:
    notes = []
    if not c.given("q_lora_rank"):
        notes.append("q_lora_rank not given: transformers' default 1536 applies")
    freq = raw.get("moe_layer_freq", 1)
    if freq != 1:
        notes.append(
            f"moe_layer_freq={freq} is ignored by transformers (every layer from "
            f"first_k_dense_replace on is MoE)"
        )
    if c.model_type == "deepseek_v3":
        n_moe = max(0, c.num_hidden_layers - c.first_k_dense_replace)
        notes.append(
            f"e_score_correction_bias is a buffer in transformers, not a parameter: "
            f"{n_moe * c.n_routed_experts:,} values not counted (DeepSeek's own code counts them)"
        )
        mtp = raw.get("num_nextn_predict_layers", raw.get("num_mtp_layers", 0))
        if mtp:
            notes.append(
                f"the {mtp} multi-token-prediction layer(s) in the checkpoint are not built "
                "by transformers and not counted"
            )
    return notes


def _t5_notes(raw: Mapping[str, JSONValue], c: Cfg) -> list[str]:
    if raw.get("tie_word_embeddings") is False:
        return [
            ("t5: transformers 5.24 ties lm_head to the shared embedding even though "
             "tie_word_embeddings is false (counted tied); a checkpoint with its own lm_head "
             "(T5 v1.1, Flan-T5) may load it untied via from_pretrained: "
             f"+{c.vocab_size * c.hidden_size:,} parameters")
        ]
    return []


FAMILIES: dict[str, Family] = {}

# transformers 4.x's routed experts (MoeV4): gate_proj/up_proj/down_proj Linears per expert, with an
# nn.Linear router (qwen2_moe, qwen3_moe) or a router module owning its weight (deepseek_v2/v3).
_V4_GATED = MoeV4(("gate_proj", "up_proj", "down_proj"), router_linear=True)
_V4_ROUTER_WEIGHT = MoeV4(("gate_proj", "up_proj", "down_proj"), router_linear=False)


def _bart_family(model_type: str, prefix: str, like: BartLike) -> Family:
    """One of BART's descendants: its modeling file, BartConfig's keys, its base and conditional-generation
    classes (counted by _bart with ``like``)."""
    return Family(model_type, f"{model_type}/modeling_{model_type}.py", _bart_fields(),
                  lambda c, L, head: _bart(like, c, L, head),
                  {f"{prefix}Model": BASE, f"{prefix}ForConditionalGeneration": SEQ2SEQ_LM},
                  f"{prefix}ForConditionalGeneration")


def _register(*families: Family) -> None:
    for fam in families:
        FAMILIES[fam.model_type] = fam


_register(
    # llama/modeling_llama.py: LlamaAttention (attention_bias on q/k/v/o), LlamaMLP
    # (mlp_bias), two RMSNorms per layer, final norm, lm_head without bias.
    Family(
        "llama",
        "llama/modeling_llama.py",
        _fields(
            tie=False,
            kv_null=True,
            head_dim_null=True,
            attention_bias=F(False, "bool"),
            mlp_bias=F(False, "bool"),
        ),
        _dec(Dec(qkv_bias="attention_bias", o_bias="attention_bias", mlp_bias="mlp_bias")),
        _decoder_heads("Llama"),
        "LlamaForCausalLM",
        divisible_heads=True,
    ),
    # mistral/modeling_mistral.py: Llama without biases; num_key_value_heads defaults to 8;
    # head_dim = config.head_dim or hidden // heads.
    Family(
        "mistral",
        "mistral/modeling_mistral.py",
        _fields(tie=False, kv=8, kv_null=True, head_dim_null=True),
        _dec(Dec()),
        _decoder_heads("Mistral"),
        "MistralForCausalLM",
    ),
    # mixtral/modeling_mixtral.py: MixtralSparseMoeBlock in every layer (router + fused
    # MixtralExperts of width intermediate_size), no shared expert.
    Family(
        "mixtral",
        "mixtral/modeling_mixtral.py",
        _fields(
            tie=False,
            kv=8,
            kv_null=True,
            head_dim_null=True,
            num_experts=F(keys=("num_local_experts", "num_experts")),
            num_experts_per_tok=F(2),
        ),
        # 4.x (modeling_mixtral.py at v4.41.2 and v4.57.1): gate = nn.Linear(h, E), experts =
        # ModuleList of MixtralBlockSparseTop2MLP (w1, w3: h -> I; w2: I -> h).
        _dec(Dec(moe=Moe("num_experts", "intermediate_size", v4=MoeV4(("w1", "w3", "w2"), router_linear=True)))),
        _decoder_heads("Mixtral"),
        "MixtralForCausalLM",
    ),
    # qwen2/modeling_qwen2.py: q/k/v with bias=True, o_proj without; kv heads default 32.
    Family(
        "qwen2",
        "qwen2/modeling_qwen2.py",
        _fields(tie=False, kv=32, kv_null=True, head_dim_null=False),
        _dec(Dec(qkv_bias=True)),
        _decoder_heads("Qwen2"),
        "Qwen2ForCausalLM",
    ),
    # qwen2_moe/modeling_qwen2_moe.py: q/k/v bias = qkv_bias; Qwen2MoeSparseMoeBlock with a
    # shared expert and its sigmoid gate on layers picked by mlp_only_layers and
    # decoder_sparse_step; the other layers get a dense Qwen2MoeMLP(intermediate_size).
    Family(
        "qwen2_moe",
        "qwen2_moe/modeling_qwen2_moe.py",
        _fields(
            tie=False,
            kv=16,
            kv_null=False,
            head_dim_null=False,
            intermediate=5632,
            qkv_bias=F(True, "bool"),
            num_experts=F(kind="nonneg"),
            moe_intermediate_size=F(),
            shared_expert_intermediate_size=F(),
            num_experts_per_tok=F(4),
            decoder_sparse_step=F(1),
            mlp_only_layers=F(DERIVED, "ints"),
        ),
        _dec(
            Dec(
                qkv_bias="qkv_bias",
                # 4.x (modeling_qwen2_moe.py at v4.41.2 and v4.57.1): gate = nn.Linear(h, E), experts =
                # ModuleList of Qwen2MoeMLP(moe_intermediate_size).
                moe=Moe("num_experts", "moe_intermediate_size", "qwen", shared="qwen2", v4=_V4_GATED),
            )
        ),
        _decoder_heads("Qwen2Moe"),
        "Qwen2MoeForCausalLM",
    ),
    # qwen3/modeling_qwen3.py: attention_bias on q/k/v/o, RMSNorm(head_dim) q_norm/k_norm;
    # head_dim defaults to 128 (not hidden // heads).
    Family(
        "qwen3",
        "qwen3/modeling_qwen3.py",
        _fields(
            tie=False,
            kv=32,
            kv_null=True,
            head_dim=128,
            head_dim_null=False,
            attention_bias=F(False, "bool"),
        ),
        _dec(Dec(qkv_bias="attention_bias", o_bias="attention_bias", qk_norm="rms")),
        _decoder_heads("Qwen3"),
        "Qwen3ForCausalLM",
    ),
    # qwen3_moe/modeling_qwen3_moe.py: Qwen3 attention + Qwen3MoeSparseMoeBlock (no shared
    # expert); kv heads default 4; head_dim read with getattr (hidden // heads if absent).
    Family(
        "qwen3_moe",
        "qwen3_moe/modeling_qwen3_moe.py",
        _fields(
            tie=False,
            kv=4,
            kv_null=False,
            head_dim_null=False,
            intermediate=6144,
            attention_bias=F(False, "bool"),
            num_experts=F(kind="nonneg", keys=("num_experts", "num_local_experts")),
            moe_intermediate_size=F(),
            num_experts_per_tok=F(8),
            decoder_sparse_step=F(1),
            mlp_only_layers=F(DERIVED, "ints"),
        ),
        _dec(
            Dec(
                qkv_bias="attention_bias",
                o_bias="attention_bias",
                qk_norm="rms",
                # 4.x (modeling_qwen3_moe.py at v4.57.1): as qwen2_moe, experts of Qwen3MoeMLP.
                moe=Moe("num_experts", "moe_intermediate_size", "qwen", v4=_V4_GATED),
            )
        ),
        _decoder_heads("Qwen3Moe"),
        "Qwen3MoeForCausalLM",
    ),
    # gemma/modeling_gemma.py: Llama layout, head_dim default 256, kv default 16, tied.
    Family(
        "gemma",
        "gemma/modeling_gemma.py",
        _fields(
            tie=True,
            kv=16,
            kv_null=False,
            head_dim=256,
            head_dim_null=False,
            attention_bias=F(False, "bool"),
        ),
        _dec(Dec(qkv_bias="attention_bias", o_bias="attention_bias")),
        _decoder_heads("Gemma"),
        "GemmaForCausalLM",
    ),
    # gemma2/modeling_gemma2.py: four RMSNorms per layer (input, post_attention,
    # pre_feedforward, post_feedforward).
    Family(
        "gemma2",
        "gemma2/modeling_gemma2.py",
        _fields(
            tie=True,
            kv=4,
            kv_null=False,
            head_dim=256,
            head_dim_null=False,
            attention_bias=F(False, "bool"),
        ),
        _dec(Dec(qkv_bias="attention_bias", o_bias="attention_bias", norms=4)),
        _decoder_heads("Gemma2"),
        "Gemma2ForCausalLM",
        divisible_heads=True,
    ),
    # gemma3/modeling_gemma3.py (text part, model_type gemma3_text): Gemma2 layout plus
    # RMSNorm(head_dim) q_norm/k_norm; classes Gemma3TextModel / Gemma3ForCausalLM.
    Family(
        "gemma3_text",
        "gemma3/modeling_gemma3.py",
        _fields(
            tie=True,
            kv=4,
            kv_null=False,
            head_dim=256,
            head_dim_null=False,
            attention_bias=F(False, "bool"),
        ),
        _dec(Dec(qkv_bias="attention_bias", o_bias="attention_bias", qk_norm="rms", norms=4)),
        _decoder_heads(
            "Gemma3", base="Gemma3TextModel", seq="Gemma3TextForSequenceClassification"
        ),
        "Gemma3ForCausalLM",
        divisible_heads=True,
    ),
    # phi/modeling_phi.py: q/k/v/dense with bias, optional q/k LayerNorms (qk_layernorm),
    # fc1/fc2 with bias, ONE LayerNorm per layer (parallel block), final_layernorm,
    # lm_head WITH bias.
    Family(
        "phi",
        "phi/modeling_phi.py",
        _fields(tie=False, kv_null=True, head_dim_null=False, qk_layernorm=F(False, "bool")),
        _dec(
            Dec(
                qkv_bias=True,
                o_bias=True,
                qk_norm="phi",
                mlp="plain",
                mlp_bias=True,
                norm="ln",
                norms=1,
                lm_head_bias=True,
            )
        ),
        _decoder_heads("Phi"),
        "PhiForCausalLM",
    ),
    # phi3/modeling_phi3.py: fused qkv_proj ((heads + 2*kv) * head_dim), fused
    # gate_up_proj (2*intermediate), no biases, RMSNorms.
    Family(
        "phi3",
        "phi3/modeling_phi3.py",
        _fields(tie=False, kv_null=True, head_dim_null=False),
        _dec(Dec(attention="fused", mlp="gated_fused")),
        _decoder_heads("Phi3"),
        "Phi3ForCausalLM",
    ),
    # gpt2/modeling_gpt2.py: wte + wpe (n_positions), Conv1D c_attn (3h) / c_proj with bias,
    # MLP n_inner (4h if null), two LayerNorms, ln_f, optional cross-attention, tied.
    Family(
        "gpt2",
        "gpt2/modeling_gpt2.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("n_embd", "hidden_size")),
            "num_hidden_layers": F(keys=("n_layer", "num_hidden_layers")),
            "num_attention_heads": F(keys=("n_head", "num_attention_heads")),
            "max_position_embeddings": F(keys=("n_positions", "max_position_embeddings")),
            "intermediate_size": F(DERIVED, keys=("n_inner",)),  # null/absent: 4 * hidden_size
            "add_cross_attention": F(False, "bool"),
            "tie_word_embeddings": F(True, "bool"),
        },
        _dec(
            Dec(
                attention="fused",
                qkv_bias=True,
                o_bias=True,
                mlp="plain",
                mlp_bias=True,
                norm="ln",
                positions=0,
                layer_extra=_gpt2_cross_attention,
            )
        ),
        _decoder_heads("GPT2", lm="GPT2LMHeadModel"),
        "GPT2LMHeadModel",
    ),
    # gpt_neox/modeling_gpt_neox.py: fused query_key_value and dense with attention_bias,
    # dense_h_to_4h/dense_4h_to_h with bias, two LayerNorms (also when
    # use_parallel_residual), final_layer_norm; untied embed_in / embed_out by default.
    Family(
        "gpt_neox",
        "gpt_neox/modeling_gpt_neox.py",
        {
            "vocab_size": F(),
            "hidden_size": F(),
            "num_hidden_layers": F(),
            "num_attention_heads": F(),
            "intermediate_size": F(),
            "attention_bias": F(True, "bool"),
            "tie_word_embeddings": F(False, "bool"),
        },
        _dec(
            Dec(
                attention="fused",
                qkv_bias="attention_bias",
                o_bias="attention_bias",
                mlp="plain",
                mlp_bias=True,
                norm="ln",
            )
        ),
        _decoder_heads("GPTNeoX"),
        "GPTNeoXForCausalLM",
        divisible_heads=True,
    ),
    # gptj/modeling_gptj.py: q/k/v/out_proj without bias, fc_in/fc_out with bias (n_inner,
    # 4h if null), ONE LayerNorm per layer, ln_f, lm_head WITH bias, untied.
    Family(
        "gptj",
        "gptj/modeling_gptj.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("n_embd", "hidden_size")),
            "num_hidden_layers": F(keys=("n_layer", "num_hidden_layers")),
            "num_attention_heads": F(keys=("n_head", "num_attention_heads")),
            "intermediate_size": F(DERIVED, keys=("n_inner",)),  # null/absent: 4 * hidden_size
            "tie_word_embeddings": F(False, "bool"),
        },
        _dec(
            Dec(mlp="plain", mlp_bias=True, norm="ln", norms=1, lm_head_bias=True)
        ),
        _decoder_heads("GPTJ"),
        "GPTJForCausalLM",
    ),
    # falcon/modeling_falcon.py: see _attention ("falcon") and _falcon_norms; MLP
    # ffn_hidden_size (4h if null) with config.bias; ln_f; tied by default.
    Family(
        "falcon",
        "falcon/modeling_falcon.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("hidden_size", "n_embed")),
            "num_hidden_layers": F(),
            "num_attention_heads": F(),
            "num_kv_heads": F(DERIVED),
            # FalconConfig types these `bool | None`; null acts as false in FalconAttention
            # and FalconDecoderLayer (plain truth tests), so it is accepted as false.
            "new_decoder_architecture": F(False, "bool", nullable=True),
            "multi_query": F(True, "bool", nullable=True),
            "parallel_attn": F(True, "bool", nullable=True),
            "bias": F(False, "bool", nullable=True),
            "num_ln_in_parallel_attn": F(DERIVED),
            "intermediate_size": F(DERIVED, keys=("ffn_hidden_size",)),  # null/absent: 4 * hidden_size
            "tie_word_embeddings": F(True, "bool"),
        },
        _dec(
            Dec(
                attention="falcon",
                mlp="plain",
                mlp_bias="bias",
                norm="ln",
                norms=_falcon_norms,
            )
        ),
        _decoder_heads("Falcon"),
        "FalconForCausalLM",
    ),
    # bloom/modeling_bloom.py: word_embeddings_layernorm, fused query_key_value (3h) and
    # dense with bias, 4h MLP with bias, two LayerNorms, ln_f, tied.
    Family(
        "bloom",
        "bloom/modeling_bloom.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("hidden_size", "n_embed")),
            "num_hidden_layers": F(keys=("n_layer", "num_hidden_layers")),
            "num_attention_heads": F(keys=("n_head", "num_attention_heads")),
            "tie_word_embeddings": F(True, "bool"),
        },
        _dec(
            Dec(
                attention="fused",
                qkv_bias=True,
                o_bias=True,
                mlp="plain",
                mlp_bias=True,
                norm="ln",
                embed_norm=True,
            )
        ),
        _decoder_heads("Bloom"),
        "BloomForCausalLM",
    ),
    # opt/modeling_opt.py: embed_tokens at word_embed_proj_dim (+ project_in/out),
    # OPTLearnedPositionalEmbedding (max_position_embeddings + 2 rows), q/k/v/out_proj and
    # fc1/fc2 with enable_bias, LayerNorms with optional affine, conditional final norm.
    Family(
        "opt",
        "opt/modeling_opt.py",
        {
            "vocab_size": F(),
            "hidden_size": F(),
            "num_hidden_layers": F(),
            "num_attention_heads": F(),
            "intermediate_size": F(keys=("ffn_dim",)),
            "max_position_embeddings": F(),
            "word_embed_proj_dim": F(DERIVED),
            "do_layer_norm_before": F(True, "bool"),
            "remove_final_layer_norm": F(False, "bool", keys=("_remove_final_layer_norm",)),
            "enable_bias": F(True, "bool"),
            "layer_norm_elementwise_affine": F(True, "bool"),
            "tie_word_embeddings": F(True, "bool"),
        },
        _dec(
            Dec(
                qkv_bias="enable_bias",
                o_bias="enable_bias",
                mlp="plain",
                mlp_bias="enable_bias",
                norm="ln_opt",
                final_norm=_opt_final_norm,
                positions=2,
                word_embed_proj=True,
            )
        ),
        _decoder_heads("OPT"),
        "OPTForCausalLM",
    ),
    # mpt/modeling_mpt.py: Wqkv (3h) and out_proj without bias, up/down 4h without bias,
    # LayerNorms with their bias set to None, norm_f; see _mpt_notes for ignored options.
    Family(
        "mpt",
        "mpt/modeling_mpt.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("d_model", "hidden_size")),
            "num_hidden_layers": F(keys=("n_layers", "num_hidden_layers")),
            "num_attention_heads": F(keys=("n_heads", "num_attention_heads")),
            "tie_word_embeddings": F(True, "bool"),
        },
        _dec(Dec(attention="fused", mlp="plain", norm="ln_nobias")),
        _decoder_heads("Mpt"),
        "MptForCausalLM",
        _mpt_notes,
    ),
    # starcoder2/modeling_starcoder2.py: GQA q/k/v/o and c_fc/c_proj with use_bias,
    # LayerNorms (with bias), final norm, tied; kv heads default 2.
    Family(
        "starcoder2",
        "starcoder2/modeling_starcoder2.py",
        _fields(
            tie=True, kv=2, kv_null=False, head_dim_null=True, use_bias=F(True, "bool")
        ),
        _dec(
            Dec(
                qkv_bias="use_bias",
                o_bias="use_bias",
                mlp="plain",
                mlp_bias="use_bias",
                norm="ln",
            )
        ),
        _decoder_heads("Starcoder2"),
        "Starcoder2ForCausalLM",
    ),
    # deepseek_v2/modeling_deepseek_v2.py: MLA attention, dense DeepseekV2MLP (mlp_bias) on
    # the first first_k_dense_replace layers, then DeepseekV2Moe (router, fused experts,
    # shared_experts of width moe_intermediate_size * n_shared_experts).
    Family(
        "deepseek_v2",
        "deepseek_v2/modeling_deepseek_v2.py",
        _fields(
            tie=False,
            kv_null=True,
            head_dim=None,
            intermediate=11008,
            attention_bias=F(False, "bool"),
            mlp_bias=F(False, "bool"),
            first_k_dense_replace=F(0, "nonneg"),
            kv_lora_rank=F(),
            q_lora_rank=F(1536, nullable=True),
            qk_nope_head_dim=F(),
            qk_rope_head_dim=F(),
            v_head_dim=F(),
            num_experts=F(keys=("n_routed_experts", "num_experts")),
            n_shared_experts=F(2, "nonneg"),
            moe_intermediate_size=F(),
            num_experts_per_tok=F(None, nullable=True),
        ),
        _dec(
            Dec(
                attention="mla",
                mlp_bias="mlp_bias",
                # 4.x (modeling_deepseek_v2.py at v4.57.1): gate = DeepseekV2MoEGate (weight (E, h)),
                # experts = ModuleList of DeepseekV2MLP(moe_intermediate_size), with mlp_bias.
                moe=Moe(
                    "num_experts", "moe_intermediate_size", "first_k_dense", shared="deepseek",
                    v4=_V4_ROUTER_WEIGHT,
                ),
            )
        ),
        _decoder_heads("DeepseekV2"),
        "DeepseekV2ForCausalLM",
        _deepseek_notes,
        divisible_heads=True,
    ),
    # deepseek_v3/modeling_deepseek_v3.py: as V2 with first_k_dense_replace default 3, no
    # MLP biases, and a router whose e_score_correction_bias is a buffer (not counted).
    Family(
        "deepseek_v3",
        "deepseek_v3/modeling_deepseek_v3.py",
        _fields(
            tie=False,
            kv=128,
            kv_null=True,
            head_dim=None,
            intermediate=18432,
            attention_bias=F(False, "bool"),
            first_k_dense_replace=F(3, "nonneg"),
            kv_lora_rank=F(),
            q_lora_rank=F(1536, nullable=True),
            qk_nope_head_dim=F(),
            qk_rope_head_dim=F(),
            v_head_dim=F(),
            n_routed_experts=F(keys=("n_routed_experts", "num_local_experts")),
            n_shared_experts=F(1, "nonneg"),
            moe_intermediate_size=F(),
            num_experts_per_tok=F(8, nullable=True),
        ),
        _dec(
            Dec(
                attention="mla",
                # 4.x (modeling_deepseek_v3.py at v4.57.1): gate = DeepseekV3TopkRouter (weight (E, h)),
                # experts = ModuleList of DeepseekV3MLP(moe_intermediate_size).
                moe=Moe(
                    "n_routed_experts", "moe_intermediate_size", "first_k_dense", shared="deepseek",
                    v4=_V4_ROUTER_WEIGHT,
                ),
            )
        ),
        _decoder_heads("DeepseekV3"),
        "DeepseekV3ForCausalLM",
        _deepseek_notes,
    ),
    # gpt_oss/modeling_gpt_oss.py: q/k/v/o with attention_bias (default true), per-head
    # sinks, router with bias, fused experts with biases (width intermediate_size) in
    # every layer; head_dim default 64. Fused in 4.x too (GptOssExperts
    # at v4.57.1): no 4.x row.
    Family(
        "gpt_oss",
        "gpt_oss/modeling_gpt_oss.py",
        _fields(
            tie=False,
            kv=8,
            kv_null=True,
            head_dim=64,
            head_dim_null=True,
            attention_bias=F(True, "bool"),
            num_experts=F(keys=("num_local_experts", "num_experts")),
            num_experts_per_tok=F(4),
        ),
        _dec(
            Dec(
                qkv_bias="attention_bias",
                o_bias="attention_bias",
                sinks=True,
                moe=Moe("num_experts", "intermediate_size", biases=True),
            )
        ),
        _decoder_heads("GptOss"),
        "GptOssForCausalLM",
    ),
)


def _encoder_fields() -> dict[str, F]:
    return {
        "vocab_size": F(),
        "hidden_size": F(),
        "num_hidden_layers": F(),
        "num_attention_heads": F(),
        "intermediate_size": F(),
        "max_position_embeddings": F(),
        "type_vocab_size": F(2),  # BertConfig/RobertaConfig default (roberta-base says 1)
        "is_decoder": F(False, "bool"),
        "add_cross_attention": F(False, "bool"),
        "tie_word_embeddings": F(True, "bool"),
    }


def _encoder_heads(prefix: str, lm: str, extra: Mapping[str, str]) -> dict[str, str]:
    return {
        f"{prefix}Model": BASE,
        f"{prefix}ForMaskedLM": MLM,
        lm: CAUSAL_LM,
        f"{prefix}ForSequenceClassification": SEQ_CLS,
        f"{prefix}ForMultipleChoice": MULTIPLE_CHOICE,
        f"{prefix}ForTokenClassification": TOKEN_CLS,
        f"{prefix}ForQuestionAnswering": QA,
        **extra,
    }


_register(
    Family(
        "bert",
        "bert/modeling_bert.py",
        _encoder_fields(),
        lambda c, L, head: _bert(c, L, head, roberta=False),
        _encoder_heads(
            "Bert",
            "BertLMHeadModel",
            {"BertForPreTraining": PRETRAINING, "BertForNextSentencePrediction": NSP},
        ),
        "BertForMaskedLM",
    ),
    Family(
        "roberta",
        "roberta/modeling_roberta.py",
        _encoder_fields(),
        lambda c, L, head: _bert(c, L, head, roberta=True),
        _encoder_heads("Roberta", "RobertaForCausalLM", {}),
        "RobertaForMaskedLM",
    ),
    # bart/, mbart/, blenderbot/modeling_*.py: the same encoder-decoder; the position table, the embedding
    # LayerNorm and the stacks' final LayerNorm differ (BartLike)
    _bart_family("bart", "Bart", BartLike(2, embedding_norm=True, final_norm=False)),
    _bart_family("mbart", "MBart", BartLike(2, embedding_norm=True, final_norm=True)),
    _bart_family("blenderbot", "Blenderbot", BartLike(0, embedding_norm=False, final_norm=True)),
    Family(
        "t5",
        "t5/modeling_t5.py",
        {
            "vocab_size": F(),
            "hidden_size": F(keys=("d_model", "hidden_size")),
            "head_dim": F(keys=("d_kv", "head_dim")),
            "d_ff": F(),
            "num_hidden_layers": F(keys=("num_layers", "num_hidden_layers")),
            "num_decoder_layers": F(DERIVED, "nonneg"),
            "num_attention_heads": F(keys=("num_heads", "num_attention_heads")),
            "relative_attention_num_buckets": F(32),
            "feed_forward_proj": F("relu", "str"),
        },
        _t5,
        {
            "T5Model": BASE,
            "T5ForConditionalGeneration": SEQ2SEQ_LM,
            # The class name of old checkpoints (e.g. the original t5-base config.json).
            "T5WithLMHeadModel": SEQ2SEQ_LM,
            "T5EncoderModel": ENCODER,
            "T5ForSequenceClassification": SEQ_CLS,
            "T5ForTokenClassification": TOKEN_CLS,
            "T5ForQuestionAnswering": QA,
        },
        "T5ForConditionalGeneration",
        _t5_notes,
    ),
)


# --------------------------------------------------------------------------- vision-language models


def _qwen_vision(c: Cfg, L: Layout, *, v25: bool) -> VisionTower:
    """Qwen2-VL's Qwen2VisionTransformerPretrainedModel / Qwen2.5-VL's Qwen2_5_VisionTransformerPretrainedModel
    (qwen2_vl/modeling_qwen2_vl.py, qwen2_5_vl/modeling_qwen2_5_vl.py): a Conv3d patch embedding without bias
    (in_channels x temporal_patch_size x patch_size^2 -> width), ``depth`` blocks of norm1/norm2, attention (qkv and
    proj, both with bias) and an MLP (Qwen2.5-VL: gate/up/down with bias, SwiGLU; Qwen2-VL: fc1/fc2 of
    width * mlp_ratio with bias), then the PatchMerger: ln_q over the width and two Linears with bias over
    width * merge^2 (the second to the decoder's width). Qwen2.5-VL's norms are RMSNorms, Qwen2-VL's LayerNorms; the
    rotary embedding owns no parameter."""
    d, m = c.width, c.spatial_merge_size
    norm = L.rms_norm if v25 else L.layer_norm
    start = len(L.modules)
    pixels = c.in_channels * c.temporal_patch_size * c.patch_size * c.patch_size
    L.add("patch_embed.proj", pixels * d)
    B = L.sub("blocks.*", c.depth)
    block_norm = B.rms_norm if v25 else B.layer_norm
    block_norm("norm1", d)
    block_norm("norm2", d)
    B.linear("attn.qkv", d, 3 * d, True)
    B.linear("attn.proj", d, d, True)
    width = c.intermediate_size if v25 else d * c.mlp_ratio
    if v25:
        _mlp(B.sub("mlp"), "gated", d, width, True)
    else:
        B.linear("mlp.fc1", d, width, True)
        B.linear("mlp.fc2", width, d, True)
    merged = d * m * m
    norm("merger.ln_q", d)
    L.linear("merger.mlp.0", merged, merged, True)
    L.linear("merger.mlp.2", merged, c.out, True)
    parameters = sum(mod.unique * mod.count for mod in L.modules[start:])
    return VisionTower(depth=c.depth, width=d, intermediate=width, heads=c.num_heads, gated=v25,
                       norm="rmsnorm" if v25 else "layernorm", activation=c.hidden_act, merge=m, out=c.out,
                       parameters=parameters, patch_elements=pixels)


def _vision_fields(*, v25: bool) -> dict[str, F]:
    """Qwen2VLVisionConfig / Qwen2_5_VLVisionConfig: the widths that size the tower's matrices are required (as the
    decoder's are, hfconfig.py), the rest take the class defaults (``in_chans`` in hub configs is a key transformers
    does not read: ``in_channels`` is)."""
    rows = {
        "depth": F(),
        "num_heads": F(),
        "in_channels": F(3),
        "patch_size": F(14),
        "temporal_patch_size": F(2),
        "spatial_merge_size": F(2),
    }
    if v25:  # hidden_size is the blocks' width, out_hidden_size the merger's output, intermediate_size the MLP's
        rows |= {"width": F(keys=("hidden_size",)), "out": F(keys=("out_hidden_size",)),
                 "intermediate_size": F(), "hidden_act": F("silu", "str")}
    else:  # embed_dim is the blocks' width, hidden_size the merger's output, mlp_ratio the MLP's factor
        rows |= {"width": F(keys=("embed_dim",)), "out": F(keys=("hidden_size",)), "mlp_ratio": F(4),
                 "hidden_act": F("quick_gelu", "str")}
    return rows


def _qwen_vl(prefix: str, model_type: str, *, v25: bool) -> Family:
    """Qwen2VLForConditionalGeneration / Qwen2_5_VLForConditionalGeneration: ``model.visual`` (the tower), then
    ``model.language_model`` (Qwen2's decoder: q/k/v with bias, o_proj without) and ``lm_head`` beside ``model``;
    Qwen*VLModel has no head. The decoder's keys are Qwen2VLTextConfig's / Qwen2_5_VLTextConfig's: kv heads default
    8 (null: the attention heads, __post_init__), head_dim not read (hidden_size // heads, which must divide:
    Qwen2_5_VLAttention raises otherwise)."""
    fields = {k: v for k, v in _fields(tie=False, kv=8, kv_null=True, head_dim=None).items()
              if k != "tie_word_embeddings"}  # read from the top level and text_config both (model/hf.py)
    return Family(
        model_type,
        f"{model_type}/modeling_{model_type}.py",
        fields,
        lambda c, L, head: _decoder(Dec(qkv_bias=True), c, L, head, "model.language_model"),
        {f"{prefix}ForConditionalGeneration": CAUSAL_LM, f"{prefix}Model": BASE},
        f"{prefix}ForConditionalGeneration",
        divisible_heads=True,
        vision=VisionRow(_vision_fields(v25=v25), lambda c, L: _qwen_vision(c, L, v25=v25)),
    )


_register(_qwen_vl("Qwen2VL", "qwen2_vl", v25=False), _qwen_vl("Qwen2_5_VL", "qwen2_5_vl", v25=True))


def _qwen3_vision(c: Cfg, L: Layout) -> VisionTower:
    """qwen3_vl/modeling_qwen3_vl.py Qwen3VLVisionModel: a Conv3d patch embedding with bias, a learned position table
    (nn.Embedding(num_position_embeddings, width), resampled to each image's grid), ``depth`` blocks of LayerNorms,
    attention (qkv and proj with bias) and a plain MLP (linear_fc1/linear_fc2 with bias), the merger (LayerNorm over
    the width, then linear_fc1 over width * merge^2 and linear_fc2 to out_hidden_size) and one deepstack merger per
    deepstack_visual_indexes entry (the same, its LayerNorm after the shuffle: over width * merge^2)."""
    d, m = c.width, c.spatial_merge_size
    merged = d * m * m
    start = len(L.modules)
    pixels = c.in_channels * c.temporal_patch_size * c.patch_size * c.patch_size
    L.add("patch_embed.proj", pixels * d, d)  # a Conv3d with bias (all-linear's LoRA does not wrap it)
    L.add("pos_embed", c.num_position_embeddings * d, torch_class=TorchClass.EMBEDDING,
          embedding_shape=(c.num_position_embeddings, d))  # the tower's own table, not the decoder's input
    B = L.sub("blocks.*", c.depth)
    B.layer_norm("norm1", d)
    B.layer_norm("norm2", d)
    B.linear("attn.qkv", d, 3 * d, True)
    B.linear("attn.proj", d, d, True)
    B.linear("mlp.linear_fc1", d, c.intermediate_size, True)
    B.linear("mlp.linear_fc2", c.intermediate_size, d, True)
    deep = len(c.deepstack_visual_indexes)
    for name, norm_width, count in (("merger", d, 1), ("deepstack_merger_list.*", merged, deep)):
        M = L.sub(name, count)
        M.layer_norm("norm", norm_width)
        M.linear("linear_fc1", merged, merged, True)
        M.linear("linear_fc2", merged, c.out, True)
    parameters = sum(mod.unique * mod.count for mod in L.modules[start:])
    return VisionTower(depth=c.depth, width=d, intermediate=c.intermediate_size, heads=c.num_heads, gated=False,
                       norm="layernorm", activation=c.hidden_act, merge=m, out=c.out, parameters=parameters,
                       patch_elements=pixels, projectors=("merger", "deepstack_merger_list"), mergers=1 + deep)


# qwen3_vl/configuration_qwen3_vl.py Qwen3VLVisionConfig: the widths that size the tower are required (as the
# decoder's are), the rest take the class defaults
_QWEN3_VISION_FIELDS = {
    "depth": F(), "num_heads": F(), "width": F(keys=("hidden_size",)), "intermediate_size": F(),
    "out": F(keys=("out_hidden_size",)), "in_channels": F(3), "patch_size": F(16), "temporal_patch_size": F(2),
    "spatial_merge_size": F(2), "num_position_embeddings": F(2304), "hidden_act": F("gelu_pytorch_tanh", "str"),
    "deepstack_visual_indexes": F([8, 16, 24], "ints"),
}


# qwen3_vl/modeling_qwen3_vl.py Qwen3VLForConditionalGeneration: model.visual, then model.language_model (Qwen3's
# decoder: q_norm/k_norm, attention_bias on q/k/v/o, head_dim 128 by default) and lm_head; Qwen3VLTextConfig's keys
# (kv heads default 32, null: the attention heads)
_register(Family(
    "qwen3_vl",
    "qwen3_vl/modeling_qwen3_vl.py",
    {k: v for k, v in _fields(tie=False, kv=32, kv_null=True, head_dim=128, head_dim_null=False,
                              attention_bias=F(False, "bool")).items() if k != "tie_word_embeddings"},
    lambda c, L, head: _decoder(Dec(qkv_bias="attention_bias", o_bias="attention_bias", qk_norm="rms"), c, L, head,
                                "model.language_model"),
    {"Qwen3VLForConditionalGeneration": CAUSAL_LM, "Qwen3VLModel": BASE},
    "Qwen3VLForConditionalGeneration",
    vision=VisionRow(_QWEN3_VISION_FIELDS, _qwen3_vision, flat_text=False),
))


# qwen3_vl_moe/modeling_qwen3_vl_moe.py: Qwen3-VL's tower (Qwen3VLMoeVisionModel, the same modules) beside Qwen3-MoE's
# decoder (Qwen3VLMoeTextSparseMoeBlock: a TopKRouter and one Experts module of 3-D gate_up_proj / down_proj on the
# layers decoder_sparse_step and mlp_only_layers pick, dense Qwen3VLMoeTextMLP on the others). The experts were one
# fused module from the family's first release (transformers 4.57), so the layout does not depend on the release.
# Qwen3VLMoeTextConfig: kv heads default 16 (null: the attention heads), head_dim null or absent: hidden // heads.
_register(Family(
    "qwen3_vl_moe",
    "qwen3_vl_moe/modeling_qwen3_vl_moe.py",
    {k: v for k, v in _fields(tie=False, kv=16, kv_null=True, head_dim_null=True, intermediate=5632,
                              attention_bias=F(False, "bool"), num_experts=F(kind="nonneg"),
                              moe_intermediate_size=F(), num_experts_per_tok=F(4), decoder_sparse_step=F(1),
                              mlp_only_layers=F(DERIVED, "ints")).items() if k != "tie_word_embeddings"},
    lambda c, L, head: _decoder(Dec(qkv_bias="attention_bias", o_bias="attention_bias", qk_norm="rms",
                                    moe=Moe("num_experts", "moe_intermediate_size", "qwen")), c, L, head,
                                "model.language_model"),
    {"Qwen3VLMoeForConditionalGeneration": CAUSAL_LM, "Qwen3VLMoeModel": BASE},
    "Qwen3VLMoeForConditionalGeneration",
    vision=VisionRow(_QWEN3_VISION_FIELDS, _qwen3_vision, flat_text=False),
))

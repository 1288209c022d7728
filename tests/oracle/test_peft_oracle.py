"""zeroadvisor.model.peft against the ``peft`` package itself.

Each model is built by transformers on the meta device (no memory, no download), wrapped by
``peft.get_peft_model`` with a ``LoraConfig``, and ``get_nb_trainable_parameters()`` (the two numbers
``print_trainable_parameters`` prints) is compared EXACTLY with :func:`zeroadvisor.model.peft.count`.
Every supported model_type (the parameter-count oracle's cases) is checked with ``all-linear``, which
also checks that the layout marks exactly transformers' Linear/Conv1D modules, with their shapes and
names.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

pytestmark = [pytest.mark.oracle, pytest.mark.slow]  # real models on the meta device, peft on each: minutes

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from test_param_counts_oracle import CASES, _build, _llama, _small  # noqa: E402
from zeroadvisor.model.hf import layout_from_hf_config, spec_from_hf_config  # noqa: E402
from zeroadvisor.model.layout import TorchClass  # noqa: E402
from zeroadvisor.model.peft import PeftSettings, count, real_name  # noqa: E402

Conv1D = transformers.pytorch_utils.Conv1D


def _peft_numbers(config: dict[str, Any], **lora: Any) -> tuple[int, int]:
    model = _build(config)
    wrapped = peft.get_peft_model(model, peft.LoraConfig(**lora))
    return wrapped.get_nb_trainable_parameters()


def _ours(config: dict[str, Any], settings: PeftSettings) -> tuple[int, int]:
    spec = spec_from_hf_config(config)
    _, _, modules, _, _ = layout_from_hf_config(config)
    c = count(modules, settings, spec)
    return c.trainable, c.all


def _linear_census(model: Any) -> Counter[tuple[str, int, int]]:
    found: Counter[tuple[str, int, int]] = Counter()
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.Linear):
            found[(name.rpartition(".")[2], m.in_features, m.out_features)] += 1
        elif isinstance(m, Conv1D):  # weight (nx, nf): in nx, out nf
            found[(name.rpartition(".")[2], m.weight.shape[0], m.nf)] += 1
    return found


def _swift_kind(module: Any) -> str | None:
    """What ms-swift's modules_to_save words find a module as (swift/utils/transformers_utils.py @ 3602360:
    find_embedding, nn.Embedding; find_norm, nn.LayerNorm or a class name holding "rmsnorm")."""
    if isinstance(module, torch.nn.Embedding):
        return "embedding"
    if isinstance(module, torch.nn.LayerNorm) or "rmsnorm" in type(module).__name__.lower():
        return "norm"
    return None


def _swift_census(model: Any) -> Counter[tuple[str, int]]:
    found: Counter[tuple[str, int]] = Counter()
    for _, m in model.named_modules():
        kind, own = _swift_kind(m), sum(p.numel() for p in m.parameters(recurse=False))
        if kind is not None and own:
            found[(kind, own)] += 1
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_linear_norm_and_embedding_modules_match_transformers(name: str) -> None:
    """The layout's Linear modules (what all-linear adapts) are transformers' own by leaf name and shape, and its
    embeddings and norms (what ms-swift's all-embedding and all-norm save) by kind and size (the layout's norm
    names are not transformers' and need not be: the words are expanded over the layout's own names)."""
    config = CASES[name]
    model = _build(config)
    _, _, modules, _, _ = layout_from_hf_config(config)
    ours: Counter[tuple[str, int, int]] = Counter()
    kinds: Counter[tuple[str, int]] = Counter()
    for m in modules:
        leaf = real_name(config["model_type"], m.name).rpartition(".")[2]
        if m.linear is not None:
            ours[(leaf, *m.linear)] += m.count
        kind = {TorchClass.EMBEDDING: "embedding", TorchClass.LAYER_NORM: "norm", TorchClass.RMS_NORM: "norm"}.get(
            m.torch_class) if m.torch_class else None
        if kind and m.own:
            kinds[(kind, m.own)] += m.count
    assert ours == _linear_census(model)
    assert kinds == _swift_census(model)


SWIFT_WORDS = {"llama": (_llama(), "q_proj"), "llama-tied": (_llama(tie_word_embeddings=True), "q_proj"),
               "gpt2": (CASES["gpt2-small"], "c_attn")}


@pytest.mark.parametrize("name", sorted(SWIFT_WORDS))
def test_swift_s_saved_words_match_peft_on_the_modules_swift_finds(name: str) -> None:
    """ms-swift replaces all-embedding and all-norm with the modules it finds before peft sees modules_to_save;
    peft given those modules' names counts what we count for the words."""
    config, target = SWIFT_WORDS[name]
    model = _build(config)
    names = [key for key, m in model.named_modules()
             if _swift_kind(m) is not None and any(True for _ in m.parameters(recurse=False))]
    expected = _peft_numbers(config, r=4, target_modules=[target], modules_to_save=names)
    settings = PeftSettings(r=4, target_modules=(target,), modules_to_save=("all-embedding", "all-norm"))
    assert _ours(config, settings) == expected


@pytest.mark.parametrize("name", sorted(CASES))
def test_all_linear_matches_peft(name: str) -> None:
    config = CASES[name]
    assert _ours(config, PeftSettings(r=4)) == _peft_numbers(config, r=4, target_modules="all-linear")


# (config, LoraConfig kwargs): named targets, modules_to_save, ranks
NAMED = {
    "llama-qv": (_llama(), dict(r=8, target_modules=["q_proj", "v_proj"])),
    "llama-gqa-all-proj": (_llama(num_key_value_heads=2),
                           dict(r=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                                      "down_proj"])),
    "llama-save-lm-head": (_llama(), dict(r=4, target_modules=["q_proj"], modules_to_save=["lm_head"])),
    "llama-tied-save-embed": (_llama(tie_word_embeddings=True),
                              dict(r=4, target_modules=["v_proj"], modules_to_save=["embed_tokens"])),
    "mistral-qkvo": (_small("mistral", num_key_value_heads=4),
                     dict(r=32, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])),
    "qwen2-dotted": (_small("qwen2", num_key_value_heads=2),
                     dict(r=8, target_modules=["self_attn.q_proj", "mlp.up_proj"])),
    "gpt2-c-attn": (dict(model_type="gpt2", vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64),
                    dict(r=8, target_modules=["c_attn"])),
    "gpt2-c-proj": (dict(model_type="gpt2", vocab_size=1000, n_embd=64, n_layer=2, n_head=4, n_positions=64),
                    dict(r=8, target_modules=["c_proj", "c_fc"])),
    "mixtral-attn-experts": (CASES["mixtral-small"], dict(r=4, target_modules=["q_proj", "w1", "w3", "w2", "gate"])),
    "qwen3moe-mlp": (CASES["qwen3moe-mixed"], dict(r=8, target_modules=["gate_proj", "up_proj", "down_proj"])),
    "dsv3-attn-only": (CASES["dsv3-default-dense"], dict(r=4, target_modules=["q_a_proj", "kv_b_proj", "o_proj"])),
    "qwen2moe-shared": (CASES["qwen2moe-sparse-step"], dict(r=4, target_modules=["up_proj", "shared_expert_gate"])),
    "t5-qv": (dict(model_type="t5", vocab_size=1000, d_model=64, d_kv=8, d_ff=128, num_layers=2, num_heads=8),
              dict(r=8, target_modules=["q", "v"])),
    "t5-wo-save-lm-head": (dict(model_type="t5", vocab_size=1000, d_model=64, d_kv=8, d_ff=128, num_layers=2,
                                num_decoder_layers=3, num_heads=8, feed_forward_proj="gated-gelu"),
                           dict(r=4, target_modules=["wi_0", "wo"], modules_to_save=["lm_head"])),
}


@pytest.mark.parametrize("name", sorted(NAMED))
def test_named_targets_match_peft(name: str) -> None:
    config, lora = NAMED[name]
    settings = PeftSettings(r=lora["r"], target_modules=tuple(lora["target_modules"]),
                            modules_to_save=tuple(lora.get("modules_to_save", ())))
    assert _ours(config, settings) == _peft_numbers(config, **lora)


def test_llama_2_7b_lora_r16_q_v_is_what_peft_prints() -> None:
    """The issue's example: peft prints trainable 8,388,608 || all 6,746,804,224."""
    config = CASES["llama-2-7b"]
    numbers = _peft_numbers(config, r=16, target_modules=["q_proj", "v_proj"])
    assert numbers == (8_388_608, 6_746_804_224)
    assert _ours(config, PeftSettings(r=16, target_modules=("q_proj", "v_proj"))) == numbers


def test_the_default_targets_table_is_peft_s_own() -> None:
    """LORA_DEFAULT_TARGETS is peft's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, every list entry."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as PEFTS

    from zeroadvisor.model.peft import LORA_DEFAULT_TARGETS

    assert LORA_DEFAULT_TARGETS == {t: tuple(v) for t, v in PEFTS.items() if isinstance(v, list)}


@pytest.mark.parametrize("name", sorted(n for n in CASES if CASES[n]["model_type"] in
                                        __import__("zeroadvisor.model.peft", fromlist=["x"]).LORA_DEFAULT_TARGETS))
def test_peft_default_targets_match_peft(name: str) -> None:
    """LoraConfig without target_modules (TRL's use_peft without lora_target_modules) against ours, resolved from
    the model type (model/peft.py with_default_targets): the same counts, or both refuse the run."""
    from zeroadvisor.model.errors import ModelError
    from zeroadvisor.model.peft import with_default_targets

    config = CASES[name]
    try:
        settings = with_default_targets(PeftSettings(r=8, default_targets=True), spec_from_hf_config(config))
    except ModelError:
        with pytest.raises(ValueError, match="target_modules"):  # peft's NoMatchingPeftModuleError is one
            _peft_numbers(config, r=8)
        return
    assert _ours(config, settings) == _peft_numbers(config, r=8)


RESIZED = {"llama": (_llama(), "q_proj"), "llama-tied": (_llama(tie_word_embeddings=True), "q_proj"),
           "gpt2": (CASES["gpt2-small"], "c_attn"), "t5": (CASES["t5-small"], "q")}


@pytest.mark.parametrize("name", sorted(RESIZED))
def test_the_input_and_output_embeddings_words_are_what_llama_factory_saves(name: str) -> None:
    """LLaMA-Factory's resize_vocab (model/adapter.py init_adapter): the last name component of every module that is
    model.get_input_embeddings() or get_output_embeddings() becomes modules_to_save; peft given those names counts
    what we count for input-embeddings and output-embeddings."""
    config, target = RESIZED[name]
    model = _build(config)
    wanted = [model.get_input_embeddings(), model.get_output_embeddings()]
    names = sorted({key.split(".")[-1] for key, m in model.named_modules() if any(m is w for w in wanted)})
    expected = _peft_numbers(config, r=4, target_modules=[target], modules_to_save=names)
    settings = PeftSettings(r=4, target_modules=(target,), modules_to_save=("input-embeddings", "output-embeddings"))
    assert _ours(config, settings) == expected


@pytest.mark.parametrize("name", sorted(SWIFT_WORDS))
def test_swift_s_target_word_all_embedding_matches_peft_s_lora_embeddings(name: str) -> None:
    """ms-swift's get_target_modules adds find_embedding's names to target_modules: peft puts a LoRA Embedding
    (lora_embedding_A r x num, lora_embedding_B dim x r) on each; given those names it counts what we count for
    the word."""
    config, target = SWIFT_WORDS[name]
    model = _build(config)
    names = [key.split(".")[-1] for key, m in model.named_modules() if isinstance(m, torch.nn.Embedding)]
    expected = _peft_numbers(config, r=4, target_modules=[target, *names])
    assert _ours(config, PeftSettings(r=4, target_modules=(target, "all-embedding"))) == expected

"""Vision-language models (Qwen2-VL, Qwen2.5-VL): the tower's parameters, what freezing and LoRA leave training, and
the activations it keeps (memory/vision.py); counts checked against transformers and peft in tests/oracle."""

from __future__ import annotations

import dataclasses

import pytest

from zeroadvisor.memory.assumed import shape_assumptions
from zeroadvisor.memory.vision import vision_activations
from zeroadvisor.model import frozen
from zeroadvisor.model import peft as P
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import Checkpointing, TrainingShape

VISION_25 = dict(depth=32, hidden_act="silu", hidden_size=1280, intermediate_size=3420, num_heads=16, in_chans=3,
                 out_hidden_size=3584, patch_size=14, spatial_merge_size=2, window_size=112,
                 fullatt_block_indexes=[7, 15, 23, 31], temporal_patch_size=2)
QWEN25_VL_7B = dict(model_type="qwen2_5_vl", architectures=["Qwen2_5_VLForConditionalGeneration"], hidden_size=3584,
                    intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
                    vocab_size=152064, tie_word_embeddings=False, vision_config=VISION_25)


def _spec():
    return spec_from_hf_config(QWEN25_VL_7B)


def test_the_tower_is_counted_beside_the_decoder():
    spec = _spec()
    assert spec.parameters == 8_292_166_656  # Qwen2.5-VL-7B-Instruct as transformers builds it (oracle test)
    assert spec.vision is not None and spec.vision.parameters == 676_550_144
    assert spec.num_layers == 28 and spec.hidden_size == 3584  # the decoder's, for its activations
    assert spec.vision_trains  # nothing frozen yet


def test_nested_text_config_reads_the_same_model():
    flat = _spec()
    text = {k: v for k, v in QWEN25_VL_7B.items() if k not in ("model_type", "architectures", "vision_config")}
    nested = spec_from_hf_config(dict(model_type="qwen2_5_vl", vision_config=VISION_25, text_config=text))
    assert nested.parameters == flat.parameters


def test_errors_name_the_nested_mapping():
    broken = dict(QWEN25_VL_7B, vision_config={k: v for k, v in VISION_25.items() if k != "depth"})
    with pytest.raises(ModelError, match=r"^vision_config: missing required key depth"):
        spec_from_hf_config(broken)
    with pytest.raises(ModelError, match="vision_config must be a mapping"):
        spec_from_hf_config({k: v for k, v in QWEN25_VL_7B.items() if k != "vision_config"})


def test_a_frozen_tower_keeps_nothing_and_trains_nothing():
    spec = _spec()
    cold = frozen.apply(spec, spec.layout or (), ["visual"])
    assert not cold.vision_trains
    assert cold.trainable_parameters == spec.parameters - spec.vision.parameters
    shape = TrainingShape(sequence_length=4096)
    assert vision_activations(cold, shape, 2, "bf16").nbytes == 0
    assert not any(a.name == "image_tokens" for a in shape_assumptions(cold, shape, 3))
    # the merger alone trains: the blocks need no graph (the merger keeps only its own inputs)
    merger_trains = frozen.apply(spec, spec.layout or (), ["patch_embed", "blocks"])
    assert not merger_trains.vision_trains


def test_lora_trains_through_the_tower_only_where_it_adapts_it():
    spec = _spec()
    text_only = P.apply(spec, spec.layout or (), P.PeftSettings(r=16, target_modules=("q_proj", "v_proj")))
    assert not text_only.vision_trains
    everywhere = P.apply(spec, spec.layout or (), P.PeftSettings(r=16, target_modules=None))
    assert everywhere.vision_trains
    # the decoder's per-token LoRA terms leave the tower's modules out: 7 adapted Linears per decoder layer
    assert everywhere.lora_rank_features == 16 * 7 * 28


def test_trained_tower_kept_bytes_follow_the_patches():
    spec = _spec()
    tower = spec.vision
    tokens, b = 1000, 2
    patches = tokens * 4 * b
    full = TrainingShape(sequence_length=4096, image_tokens=tokens, activation_checkpointing=Checkpointing.FULL)
    got = vision_activations(spec, full, b, "bf16")
    assert got.patches == patches
    # each block's input, the merger (RMSNorm: 4w + 2w + 4, and 3 tensors of 2w) and the pixel values (2 x 1176)
    merger = patches * (4 * 1280 + 2 * 1280 + 4 + 3 * 2 * 1280 + 2 * tower.patch_elements)
    assert got.nbytes == tower.depth * 2 * 1280 * patches + merger
    none = vision_activations(spec, dataclasses.replace(full, activation_checkpointing=Checkpointing.NONE), b, "bf16")
    assert none.nbytes > 10 * got.nbytes  # every block's tensors, not its input
    half = vision_activations(spec, dataclasses.replace(full, image_tokens=tokens // 2), b, "bf16")
    assert half.nbytes * 2 == got.nbytes


def test_unsaid_image_tokens_are_the_whole_sequence_and_listed():
    spec = _spec()
    shape = TrainingShape(sequence_length=2048)
    assumed = [a for a in shape_assumptions(spec, shape, 3) if a.name == "image_tokens"]
    assert [(a.value, a.flag, a.field) for a in assumed] == [(2048, "--image-tokens", "image_tokens")]
    said = dataclasses.replace(shape, image_tokens=2048)
    assert vision_activations(spec, shape, 1, "bf16").nbytes == vision_activations(spec, said, 1, "bf16").nbytes
    assert not any(a.name == "image_tokens" for a in shape_assumptions(spec, said, 3))


def test_the_tower_s_own_checkpointing_switch_wins_over_the_decoder_s():
    spec = _spec()
    shape = TrainingShape(sequence_length=4096, image_tokens=512, activation_checkpointing=Checkpointing.FULL)
    both = vision_activations(spec, shape, 1, "bf16").nbytes
    tower_off = vision_activations(spec, dataclasses.replace(shape, vision_checkpointing=False), 1, "bf16").nbytes
    decoder_off = dataclasses.replace(shape, activation_checkpointing=Checkpointing.NONE)
    assert vision_activations(spec, decoder_off, 1, "bf16").nbytes == tower_off > 10 * both
    tower_on = dataclasses.replace(decoder_off, vision_checkpointing=True)
    assert vision_activations(spec, tower_on, 1, "bf16").nbytes == both


def test_malformed_vision_language_configs_are_one_line_model_errors():
    """Random damage to a Qwen2.5-VL config (flat or nested): a ModelError of one line or a spec, never another
    exception (the files are the user's)."""
    import copy
    import random

    values = [None, True, False, 0, -1, 1, 2**70, 3.5, "x", "", [], [1], {}, {"a": 1}, float("nan"), 1e308]
    rng = random.Random(7)
    for _ in range(2000):
        config = copy.deepcopy(QWEN25_VL_7B)
        if rng.random() < 0.5:
            config["text_config"] = {k: config.pop(k) for k in list(config)
                                     if k not in ("model_type", "architectures", "vision_config")}
        for _ in range(rng.randint(1, 3)):
            nested = [v for v in (config.get("vision_config"), config.get("text_config")) if isinstance(v, dict)]
            target = rng.choice([config, *nested])
            key = rng.choice([*target, "depth", "hidden_size", "spatial_merge_size", "text_config", "vision_config"])
            if rng.random() < 0.2:
                target.pop(key, None)
            else:
                target[key] = rng.choice(values)
        try:
            spec = spec_from_hf_config(config)
        except ModelError as err:
            assert "\n" not in str(err)
            continue
        shape = TrainingShape(sequence_length=512, image_tokens=100)
        assert vision_activations(spec, shape, 1, "bf16").nbytes >= 0


QWEN3_VL_8B = dict(
    model_type="qwen3_vl", architectures=["Qwen3VLForConditionalGeneration"], tie_word_embeddings=False,
    text_config=dict(model_type="qwen3_vl_text", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
                     num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936),
    vision_config=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, out_hidden_size=4096,
                       patch_size=16, spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=2304,
                       deepstack_visual_indexes=[8, 16, 24]))


def test_qwen3_vl_counts_its_deepstack_mergers_and_needs_a_nested_text_config():
    spec = spec_from_hf_config(QWEN3_VL_8B)
    tower = spec.vision
    assert tower is not None and tower.mergers == 4 and tower.projectors == ("merger", "deepstack_merger_list")
    layout = spec.layout or ()
    under = sum(m.unique * m.count for m in layout if m.name.startswith("model.visual."))
    assert tower.parameters == under
    merged = 1152 * 4
    mergers = 4 * (merged * merged + merged + merged * 4096 + 4096)  # linear_fc1, linear_fc2 (with biases)
    norms = 2 * 1152 + 3 * 2 * merged  # the merger's LayerNorm over the width, the deepstack ones over width x 4
    assert sum(m.unique * m.count for m in layout if "merger" in m.name) == mergers + norms
    flat = {k: v for k, v in QWEN3_VL_8B.items() if k != "text_config"} | QWEN3_VL_8B["text_config"]
    flat["model_type"] = "qwen3_vl"
    with pytest.raises(ModelError, match="reads its decoder's sizes from text_config only"):
        spec_from_hf_config(flat)


def test_qwen3_vl_mergers_alone_need_no_graph_through_the_blocks():
    spec = spec_from_hf_config(QWEN3_VL_8B)
    blocks_frozen = frozen.apply(spec, spec.layout or (), ["visual.pos_embed", "visual.patch_embed", "visual.blocks"])
    assert not blocks_frozen.vision_trains  # the deepstack mergers and the merger train on the blocks' outputs
    shape = TrainingShape(sequence_length=2048, image_tokens=1000, activation_checkpointing=Checkpointing.FULL)
    got = vision_activations(spec, shape, 1, "bf16")
    patches, w = 4000, 1152
    pixels = 3 * 2 * 16 * 16
    assert got.nbytes == patches * (27 * 2 * w + 4 * (2 * w + 8 + 3 * 2 * w) + 2 * pixels)


def test_qwen3_vl_moe_counts_fused_experts_at_every_release():
    config = dict(
        model_type="qwen3_vl_moe", tie_word_embeddings=False,
        text_config=dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=48, num_attention_heads=32,
                         num_key_value_heads=4, head_dim=128, vocab_size=151936, num_experts=128,
                         moe_intermediate_size=768, num_experts_per_tok=8),
        vision_config=dict(QWEN3_VL_8B["vision_config"], out_hidden_size=2048))
    spec = spec_from_hf_config(config)
    assert spec.num_experts == 128 and spec.experts_per_token == 8 and not spec.release_dependent
    assert spec.largest_layer_parameters == 128 * 3 * 768 * 2048  # one layer's experts, gathered at once by ZeRO-3
    assert spec_from_hf_config(config, transformers="4.57").parameters == spec.parameters
    assert spec.vision is not None and spec.vision.mergers == 4


def test_sequence_parallelism_splits_the_decoder_not_the_tower():
    """ms-swift splits the decoder's input embeddings after the tower (ulysses.py pre_forward_split_hook): every rank
    runs the tower over every image, so its activations do not shrink with the degree."""
    from zeroadvisor.memory.parallel import Parallel, parallel_activations

    spec = _spec()
    shape = TrainingShape(sequence_length=8192, image_tokens=4096, activation_checkpointing=Checkpointing.FULL)
    tower = vision_activations(spec, shape, 1, "bf16").nbytes
    for degree in (1, 4):
        got = parallel_activations(spec, shape, 1, "bf16", Parallel(sequence=degree))
        assert dict(got.parts)["vision tower"] == tower


def test_the_json_report_names_the_tower():
    from zeroadvisor.memory.estimate import Cluster, estimate

    shape = TrainingShape(sequence_length=2048, image_tokens=700)
    report = estimate({"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
                       "zero_optimization": {"stage": 3}}, _spec(), shape, Cluster(gpus=8, gpu_memory=80 * 2**30))
    tower = report.to_dict()["model"]["vision_tower"]
    assert tower == {"parameters": 676_550_144, "trains": True, "image_tokens": 700}

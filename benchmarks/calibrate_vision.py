"""Calibrate memory/vision.py: what a Qwen2-VL / Qwen2.5-VL / Qwen3-VL vision tower keeps for backward, measured on CPU.

Each case builds the tower with transformers (SDPA, bf16, every parameter trainable), runs one forward over a grid
of patches under ``torch.autograd.graph.saved_tensors_hooks`` and records every tensor autograd saves once (by
storage; parameters left out), attributed to the block or the merger whose forward saved it (the rest: the patch
embedding's input, the rotary tables and the window reordering, "outside"). The same config.json goes through
``zeroadvisor.model.hf.spec_from_hf_config`` and ``memory.vision.vision_activations`` at the same patch count.

    PYTHONPATH=. python benchmarks/calibrate_vision.py          # writes benchmarks/vision.{md,json}
    PYTHONPATH=. python benchmarks/calibrate_vision.py --quick  # QUICK's cases (the oracle test)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO))

from calibrate_activations import saved_by_part  # noqa: E402

TEXT = dict(vocab_size=1000, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=8,
            num_key_value_heads=2)
CASES: dict[str, dict[str, Any]] = {
    "qwen2_5_vl 16x16 patches": dict(model_type="qwen2_5_vl", grid=(1, 16, 16), vision_config=dict(
        depth=4, hidden_size=64, intermediate_size=96, num_heads=4, out_hidden_size=64, patch_size=14,
        spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1, 3])),
    "qwen2_vl 16x16 patches": dict(model_type="qwen2_vl", grid=(1, 16, 16), vision_config=dict(
        depth=4, embed_dim=64, mlp_ratio=4, num_heads=4, hidden_size=64, patch_size=14, spatial_merge_size=2,
        temporal_patch_size=2)),
    "qwen3_vl 16x16 patches": dict(model_type="qwen3_vl", grid=(1, 16, 16), vision_config=dict(
        depth=4, hidden_size=64, intermediate_size=96, num_heads=4, out_hidden_size=64, patch_size=16,
        spatial_merge_size=2, temporal_patch_size=2, num_position_embeddings=64, deepstack_visual_indexes=[1, 3])),
    "qwen2_5_vl two images": dict(model_type="qwen2_5_vl", grid=(1, 8, 16), images=2, vision_config=dict(
        depth=2, hidden_size=128, intermediate_size=160, num_heads=8, out_hidden_size=64, patch_size=14,
        spatial_merge_size=2, temporal_patch_size=2, window_size=112, fullatt_block_indexes=[1])),
}
QUICK = ("qwen2_5_vl 16x16 patches", "qwen3_vl 16x16 patches")


def measure(case: dict[str, Any]) -> dict[str, Any]:
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.AutoConfig.for_model(case["model_type"], vision_config=case["vision_config"], text_config=TEXT,
                                            attn_implementation="sdpa")
    module = getattr(transformers.models, case["model_type"])
    modeling = getattr(module, f"modeling_{case['model_type']}")
    cls = next(getattr(modeling, n) for n in dir(modeling)
               if n.endswith(("VisionTransformerPretrainedModel", "VLVisionModel")))
    vision = cfg.vision_config
    vision._attn_implementation = "sdpa"
    tower = cls._from_config(vision).to(torch.bfloat16)
    t, h, w = case["grid"]
    images = case.get("images", 1)
    patches = t * h * w * images
    pixels = torch.randn(patches, vision.in_channels * vision.temporal_patch_size * vision.patch_size ** 2,
                         dtype=torch.bfloat16)
    parts = [*((f"block {i}", block) for i, block in enumerate(tower.blocks)), ("merger", tower.merger),
             *((f"deepstack merger {i}", m) for i, m in enumerate(getattr(tower, "deepstack_merger_list", ())))]
    by = saved_by_part(tower, parts, lambda: tower(pixels, grid_thw=torch.tensor([case["grid"]] * images)), "outside")
    return {"patches": patches, "by": by, "total": sum(by.values())}


def estimate(case: dict[str, Any], patches: int) -> dict[str, int]:
    from zeroadvisor.memory.vision import vision_activations
    from zeroadvisor.model.hf import spec_from_hf_config
    from zeroadvisor.model.spec import TrainingShape

    spec = spec_from_hf_config(dict(model_type=case["model_type"], vision_config=case["vision_config"],
                                    text_config=TEXT))
    assert spec.vision is not None
    tokens = patches // spec.vision.patches_per_token
    return {"total": vision_activations(spec, TrainingShape(sequence_length=tokens, image_tokens=tokens), 1,
                                        "bf16").nbytes}


def run(names: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        case = CASES[name]
        got = measure(case)
        est = estimate(case, got["patches"])
        last = max(k for k in got["by"] if k.startswith("block "))  # the first block also records shared tables
        rows.append({"name": name, "patches": got["patches"], "measured_total": got["total"],
                     "estimated_total": est["total"], "gap": est["total"] / got["total"] - 1,
                     "measured": got["by"], "last_block": last})
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["# Vision tower activations: memory/vision.py against saved_tensors_hooks (CPU)", "",
             ("Written by `benchmarks/calibrate_vision.py`: each tower built by transformers (SDPA, bf16, trainable), "
              "one forward, every tensor autograd saves counted once by storage."), "",
             "| case | patches | measured | estimated | gap | per part (measured) |", "|---|---|---|---|---|---|"]
    for r in rows:
        parts = ", ".join(f"{k} {v:,}" for k, v in r["measured"].items())
        lines.append(f"| {r['name']} | {r['patches']} | {r['measured_total']:,} B | {r['estimated_total']:,} B | "
                     f"{r['gap']:+.2%} | {parts} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=str(Path(__file__).with_name("vision")))
    args = parser.parse_args(argv)
    rows = run(QUICK if args.quick else tuple(CASES))
    out = Path(args.out)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    out.with_suffix(".md").write_text(markdown(rows))
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Record what the commands print over a fixed grid of inputs, to compare a refactor byte for byte.

A refactor that must not change behaviour (issue 33: "the rule fixtures, the field and throughput tables and the
README examples give the same answers before and after") is checked by running this before and after it and
comparing the two folders (``diff -r``). The grid: every field case (benchmarks/field/cases, its inputs built as
benchmarks/field/run.py builds them) checked in JSON and text; the sample configs linted, estimated and checked
in every output format; and a grid of stages, offloads, precisions, optimizers and cluster sizes over the
sample model, estimated and checked in JSON with step times. Each run is one file holding the exit code,
stdout and stderr.

Usage: ``PYTHONPATH=. python tools/behaviour_snapshot.py OUT_DIR [--only SUBSTRING]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks" / "field"))

import run as field  # noqa: E402  (benchmarks/field/run.py: the one place that builds a case's inputs)

from zeroadvisor import cli  # noqa: E402

SAMPLES = REPO / "sample_configs"
MODEL = SAMPLES / "models" / "llama-2-7b.yaml"
FORMATS = ("text", "json", "markdown", "sarif", "github", "html")


def _run(argv: list[str]) -> str:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.run(argv)
    return f"exit {int(code)}\n--- stdout\n{out.getvalue()}--- stderr\n{err.getvalue()}"


_FIELD_CLI = field._cli  # run_check's command line is recorded, not run (--help, for its flags, is run)


def _field_runs(workdir: Path) -> Iterator[tuple[str, list[str]]]:
    for path in sorted(field.CASES.glob("*.yaml")):
        case = field.load_case(path)
        folder = workdir / path.stem
        folder.mkdir()
        ds_path = folder / "ds_config.json"
        ds_path.write_text(json.dumps(field.fill_auto(case["ds_config"], case), indent=2))
        model_path = field.write_model(case, folder)
        captured: list[str] = []

        def capture(*args: str, _captured: list[str] = captured) -> object:
            if "--help" in args:
                return _FIELD_CLI(*args)
            _captured.extend(args)
            raise StopIteration

        field._cli = capture
        try:
            with contextlib.suppress(StopIteration):
                field.run_check(case, ds_path, model_path)
        finally:
            field._cli = _FIELD_CLI
        yield f"field-{path.stem}-json", captured
        text = [a if a != "json" else "text" for a in captured]
        yield f"field-{path.stem}-text", text


def _sample_runs() -> Iterator[tuple[str, list[str]]]:
    configs = sorted(p for p in SAMPLES.iterdir() if p.is_file())
    for config in configs:
        for fmt in FORMATS:
            yield f"lint-{config.name}-{fmt}", ["lint", str(config), "--format", fmt]
        yield (f"estimate-{config.name}", ["estimate", str(config), "--model", str(MODEL), "--gpus", "8",
                                           "--gpu", "A100-80GB", "--format", "json"])
        for fmt in FORMATS:
            yield (f"check-{config.name}-{fmt}", ["check", str(config), "--model", str(MODEL), "--gpus", "8",
                                                  "--gpu", "A100-80GB", "--format", fmt, "--fail-on", "never"])
        yield (f"check-{config.name}-24g", ["check", str(config), "--model", str(MODEL), "--gpus", "2",
                                            "--gpu", "RTX-4090", "--format", "json", "--fail-on", "never"])


def _grid_configs() -> Iterator[tuple[str, dict[str, object]]]:
    for stage in (0, 1, 2, 3):
        for offload in ("none", "cpu", "nvme"):
            if offload != "none" and stage == 0:
                continue
            for precision in ("bf16", "fp16", "fp32"):
                zero: dict[str, object] = {"stage": stage}
                if offload != "none":
                    zero["offload_optimizer"] = {"device": offload, "nvme_path": "/nvme"}
                    if stage == 3:
                        zero["offload_param"] = {"device": offload, "nvme_path": "/nvme"}
                config: dict[str, object] = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
                                             "zero_optimization": zero,
                                             "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}
                if precision != "fp32":
                    config[precision] = {"enabled": True}
                yield f"z{stage}-{offload}-{precision}", config
    yield "auto", json.loads((SAMPLES / "hf_trainer_auto.json").read_text())
    yield "sgd-z2", {"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2, "overlap_comm": True,
                     "reduce_bucket_size": 5e7}, "optimizer": {"type": "SGD"}, "bf16": {"enabled": True}}
    yield "z3-knobs", {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": "true"},
                       "zero_optimization": {"stage": "3", "stage3_prefetch_bucket_size": "auto",
                                             "stage3_param_persistence_threshold": 1e5, "sub_group_size": 1e8,
                                             "stage3_max_live_parameters": 5e8, "zero_quantized_weights": True,
                                             "offload_optimizer": {"device": "cpu", "pin_memory": False,
                                                                   "ratio": 0.5}},
                       "gradient_clipping": "auto", "data_types": {"grad_accum_dtype": "fp32"}}


def _grid_runs(workdir: Path) -> Iterator[tuple[str, list[str]]]:
    for name, config in _grid_configs():
        path = workdir / f"{name}.json"
        path.write_text(json.dumps(config))
        for gpus, gpu in (("1", "A100-80GB"), ("8", "A100-80GB"), ("16", "RTX-4090")):
            yield (f"grid-{name}-{gpus}x{gpu}-estimate", ["estimate", str(path), "--model", str(MODEL), "--gpus", gpus,
                                                       "--gpus-per-node", "8", "--gpu", gpu, "--format", "json",
                                                       "--seq-len", "2048"])
            yield (f"grid-{name}-{gpus}x{gpu}-check", ["check", str(path), "--model", str(MODEL), "--gpus", gpus,
                                                    "--gpus-per-node", "8", "--gpu", gpu, "--format", "json",
                                                    "--fail-on", "never", "--seq-len", "2048"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.update({"NO_COLOR": "1", "COLUMNS": "200"})
    os.environ.pop("GITHUB_ACTIONS", None)
    os.chdir(REPO)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "field").mkdir()
        (work / "grid").mkdir()
        runs = [*_field_runs(work / "field"), *_sample_runs(), *_grid_runs(work / "grid")]
        for name, argv in runs:
            if args.only not in name:
                continue
            text = _run(argv).replace(str(work), "<tmp>").replace(str(REPO), "<repo>")
            (args.out / f"{name}.txt").write_text(text)
    print(f"{len(runs)} runs written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""deepspeed/hf_fill.py and the Trainer's inputs against transformers 5.24, accelerate, DeepSpeed and torch.

* The fill: for a grid of DeepSpeed configs x TrainingArguments (built on CPU), transformers' own
  HfTrainerDeepSpeedConfig.trainer_config_process (+ trainer_config_finalize with a real model built on
  the meta device and a step count) yields exactly the config and the mismatch lines :func:`hf_fill.fill`
  yields.
* The mismatch error: TrainingArguments(deepspeed=config) followed by trainer_config_finalize raises
  "Please correct the following DeepSpeed config values that mismatch TrainingArguments values" exactly
  when rule ZA310 reports a mismatch.
* The readers: TrainingArguments' defaults are config/training_args.py DEFAULTS; a script's arguments
  parse as HfArgumentParser parses them; each launcher's no-value options are its argparse parser's.

World sizes above 1 need that many processes; there the TrainingArguments subclass below answers
``world_size`` as the launcher would set it (the only attribute replaced) and everything else is real.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json

import pytest

pytestmark = pytest.mark.oracle

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")
pytest.importorskip("deepspeed")

from transformers import HfArgumentParser, TrainingArguments  # noqa: E402
from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig, unset_hf_deepspeed_config  # noqa: E402

from zeroadvisor.config import launch  # noqa: E402
from zeroadvisor.config.training_args import DEFAULTS, from_mapping  # noqa: E402
from zeroadvisor.deepspeed import hf_fill  # noqa: E402
from zeroadvisor.lint.context import LintOptions  # noqa: E402
from zeroadvisor.rules.linter import lint_text  # noqa: E402

HIDDEN = 4096
STEPS = 1000

CONFIGS = {
    "all-auto-z3": {
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto", "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                  "weight_decay": "auto"}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                          "warmup_num_steps": "auto", "total_num_steps": "auto"}},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto"},
    },
    "auto-z2-buckets": {
        "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"},
        "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"},
    },
    "explicit": {
        "train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
        "gradient_clipping": 1.0, "bf16": {"enabled": True},
        "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 100, "warmup_max_lr": 2e-5}},
        "zero_optimization": {"stage": 2},
    },
    "types-that-compare-equal": {
        "train_micro_batch_size_per_gpu": 4.0, "gradient_clipping": 1, "fp16": {"enabled": 0},
        "zero_optimization": {"stage": 1},
    },
    "string-bool": {"train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "true"},
                    "zero_optimization": {"stage": 0}},
    "sections-missing": {"zero_optimization": {"stage": 3}},
}
ARGS = {
    "defaults": {},
    "bf16-batch4": {"bf16": True, "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2},
    "fp16-lr": {"fp16": True, "learning_rate": 2e-5, "adam_beta2": 0.95, "weight_decay": 0.1, "max_grad_norm": 0.5},
    "steps-ratio": {"max_steps": 200, "warmup_steps": 0.1, "per_device_train_batch_size": 4},
    "steps-whole": {"max_steps": 200, "warmup_steps": 30, "bf16_full_eval": True, "save_on_each_node": True},
}
WORLDS = (1, 8)


class _LaunchedArguments(TrainingArguments):
    """TrainingArguments as in a job of ``_world`` processes (torch.distributed sets it; one process here)."""

    _world = 1

    @property
    def world_size(self):
        return self._world


def _training_arguments(tmp_path, world: int, **kwargs) -> TrainingArguments:
    cls = TrainingArguments
    if world != 1:
        cls = type("Launched", (_LaunchedArguments,), {"_world": world})
    return cls(output_dir=str(tmp_path), use_cpu=True, report_to="none", **kwargs)


def _meta_model(hidden: int):
    config = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=32, num_key_value_heads=32, vocab_size=32)
    with torch.device("meta"):
        return transformers.LlamaForCausalLM(config)


@pytest.fixture(scope="module")
def model():
    return _meta_model(HIDDEN)


def _transformers_fill(config: dict, args: TrainingArguments, model, steps: int) -> tuple[dict, list[str]]:
    ds = HfTrainerDeepSpeedConfig(json.loads(json.dumps(config)))
    ds.trainer_config_process(args)
    mismatches = list(ds.mismatches)
    try:
        ds.trainer_config_finalize(args, model, steps)
    except ValueError as err:
        assert "Please correct the following DeepSpeed config values" in str(err)
    finally:
        unset_hf_deepspeed_config()
    return ds.config, ds.mismatches or mismatches


GRID = list(itertools.product(CONFIGS, ARGS, WORLDS))


@pytest.mark.parametrize("config_name,args_name,world", GRID, ids=[f"{c}-{a}-w{w}" for c, a, w in GRID])
def test_fill_is_transformers_fill(tmp_path, model, config_name, args_name, world):
    config, kwargs = CONFIGS[config_name], ARGS[args_name]
    args = _training_arguments(tmp_path, world, **kwargs)
    steps = kwargs.get("max_steps", STEPS)
    expected_config, expected_mismatches = _transformers_fill(config, args, model, steps)
    ours = hf_fill.fill(config, from_mapping(kwargs, "grid"), world, HIDDEN, steps)
    assert ours.config == expected_config
    assert [m.transformers_line() for m in ours.mismatches] == expected_mismatches
    assert not ours.unfilled


def test_without_hidden_size_the_buckets_stay_auto():
    """transformers raises when it cannot find a hidden size; we leave the keys "auto" and say so."""
    ours = hf_fill.fill(CONFIGS["all-auto-z3"], from_mapping({}, "t"), 1, None, None)
    assert ours.config["zero_optimization"]["reduce_bucket_size"] == "auto"
    assert set(ours.unfilled) >= {"zero_optimization.reduce_bucket_size", "scheduler.params.total_num_steps"}


MISMATCH_GRID = list(itertools.product(CONFIGS, ARGS))


@pytest.mark.parametrize("config_name,args_name", MISMATCH_GRID, ids=[f"{c}-{a}" for c, a in MISMATCH_GRID])
def test_transformers_raises_exactly_when_za310_fires(tmp_path, model, config_name, args_name):
    config, kwargs = CONFIGS[config_name], ARGS[args_name]
    steps = kwargs.get("max_steps", STEPS)
    if "max_steps" not in kwargs:
        kwargs = {**kwargs, "max_steps": steps}  # the rule knows the step count only from max_steps
    try:
        args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none",
                                 deepspeed=json.loads(json.dumps(config)), **kwargs)
        try:
            args.hf_deepspeed_config.trainer_config_finalize(args, model, steps)
            raised = None
        except ValueError as err:
            raised = str(err)
    finally:
        unset_hf_deepspeed_config()
    findings = [f for f in lint_text(json.dumps(config, indent=1), "ds.json",
                                     LintOptions(integration="hf-trainer", gpus=1, training=kwargs))
                if f.code == "ZA310"]
    if findings:
        assert raised is not None and "Please correct the following DeepSpeed config values" in raised
        for finding in findings:  # each finding names a key transformers lists, at that key's line
            key = finding.pointer.lstrip("/").replace("/", ".")
            assert f"- ds {key}=" in raised
            assert finding.line is not None and finding.fix == _auto_at(finding.pointer)
    else:
        assert raised is None or "Please correct" not in raised, raised


def _auto_at(pointer: str) -> dict:
    out: dict = "auto"
    for token in reversed(pointer.lstrip("/").split("/")):
        out = {token: out}
    return out


def test_defaults_are_training_arguments_defaults():
    fields = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    for name, value in DEFAULTS.items():
        assert fields[name] == value, name


SCRIPT_ARGV = [
    ["--bf16", "--per_device_train_batch_size", "4"],
    ["--bf16=true", "--per-device-train-batch-size=2", "--gradient_accumulation_steps", "16"],
    ["--fp16", "false", "--bf16", "True", "--learning_rate", "2e-5", "--weight_decay=0.1"],
    ["--gradient_checkpointing", "--max_grad_norm", "0.3", "--adam_beta2", "0.95", "--warmup_steps", "0.03"],
    ["--gradient_checkpointing", "no", "--max_steps", "500", "--save_on_each_node", "--adam_epsilon", "1e-6"],
    ["--activation_checkpointing=yes", "--bf16_full_eval", "--fp16_full_eval", "0"],
    ["--optim", "adamw_torch", "--bf16"],
]


@pytest.mark.parametrize("argv", SCRIPT_ARGV, ids=[" ".join(a) for a in SCRIPT_ARGV])
def test_script_arguments_parse_as_hf_argument_parser(tmp_path, argv):
    parser = HfArgumentParser(TrainingArguments)
    (real,) = parser.parse_args_into_dataclasses([*argv, "--output_dir", str(tmp_path), "--use_cpu"])
    ours = launch.script_training_args(argv)
    for name in DEFAULTS:
        if name in _CHECKPOINTING:  # __post_init__ resolves the deprecated alias pair to one bool
            continue
        assert ours.get(name) == getattr(real, name), name
    assert real.activation_checkpointing == real.gradient_checkpointing
    if any(word.lstrip("-").replace("-", "_").split("=")[0] in _CHECKPOINTING for word in argv):
        assert ours.checkpointing == real.gradient_checkpointing
    else:  # the Trainer's default (False) is no statement: the script may enable it in code
        assert ours.checkpointing is None and real.gradient_checkpointing is False


_CHECKPOINTING = ("gradient_checkpointing", "activation_checkpointing")


def _argparse_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for action in parser._actions if action.nargs == 0 for s in action.option_strings}


def _deepspeed_parser() -> argparse.ArgumentParser:
    from deepspeed.launcher import runner

    captured = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        captured["parser"] = self
        return original(self, ["train.py"])

    argparse.ArgumentParser.parse_args = capture
    try:
        runner.parse_args([])
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


def test_launcher_flag_tables_are_the_launchers_own(monkeypatch):
    from accelerate.commands.launch import launch_command_parser
    from torch.distributed.run import get_args_parser

    assert launch.LAUNCHERS["deepspeed"].flags == _argparse_flags(_deepspeed_parser())
    assert launch.LAUNCHERS["torchrun"].flags == _argparse_flags(get_args_parser())
    assert launch.LAUNCHERS["accelerate"].flags == _argparse_flags(launch_command_parser())


def test_deepspeed_hostfile_as_deepspeed_reads_it(tmp_path):
    from deepspeed.launcher.runner import fetch_hostfile

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# cluster\nworker-0 slots=8\nworker-1 slots=4\n\n")
    pool = fetch_hostfile(str(hostfile))
    parsed = launch.parse_launch(["deepspeed", "--hostfile", str(hostfile), "train.py"])
    assert parsed.world_size == sum(pool.values())


@pytest.mark.parametrize("options", [
    [], ["--num_nodes", "1"], ["--num_gpus", "2"], ["--num_nodes", "2", "--num_gpus", "4"],
    ["--include", "worker-0"], ["--include", "worker-0:0,1@worker-1"], ["--include", "worker-1:0,1,2"],
    ["--exclude", "worker-1"], ["--exclude", "worker-0:0,1,2@worker-1:3"],
])
def test_deepspeed_resources_as_deepspeed_narrows_them(tmp_path, options):
    """runner.py main's arithmetic: the hostfile, parse_inclusion_exclusion, then apply_num_nodes_and_gpus."""
    from deepspeed.launcher.runner import apply_num_nodes_and_gpus, fetch_hostfile, parse_inclusion_exclusion

    hostfile = tmp_path / "hostfile"
    hostfile.write_text("worker-0 slots=8\nworker-1 slots=4\n")
    args = dict(zip(options[::2], options[1::2], strict=True))
    active = parse_inclusion_exclusion(fetch_hostfile(str(hostfile)), args.get("--include", ""),
                                       args.get("--exclude", ""))
    active = apply_num_nodes_and_gpus(active, int(args.get("--num_nodes", -1)), int(args.get("--num_gpus", -1)))
    parsed = launch.parse_launch(["deepspeed", "--hostfile", str(hostfile), *options, "train.py"])
    assert parsed.world_size == sum(len(slots) for slots in active.values())


def test_accelerate_overrides_are_launch_options_of_their_type():
    """Each option that overrides a config key is an ``accelerate launch`` option of that type, and the key is
    one the config file holds (a top-level key, or a deepspeed_config key)."""
    from accelerate.commands.launch import launch_command_parser

    from zeroadvisor.config.accelerate import CLUSTER_KEYS, DEEPSPEED_KEYS

    actions = {action.dest: action for action in launch_command_parser()._actions}
    for name, (path, kind) in launch.ACCELERATE_OVERRIDES.items():
        assert f"--{name}" in actions[name].option_strings, name
        assert (actions[name].type or str) is kind, name
        assert path[0] in CLUSTER_KEYS and (len(path) == 1 or path[1] in DEEPSPEED_KEYS), name


def test_the_mismatch_grid_has_both_outcomes():
    """The raise/no-raise test above is only a test if the grid holds cases of each."""
    fired = [any(f.code == "ZA310" for f in lint_text(json.dumps(CONFIGS[c]), "ds.json",
                                                       LintOptions(gpus=1, training=ARGS[a])))
             for c, a in MISMATCH_GRID]
    assert sum(fired) >= 5 and fired.count(False) >= 5


def test_the_optim_names_are_transformers_own():
    # model/spec.py CLIENT_OPTIMIZER_NAMES: every OptimizerNames value of transformers 5.24, plus 4.x's adamw_hf and
    # adamw_apex_fused (removed in 5)
    from transformers.training_args import OptimizerNames

    from zeroadvisor.model.spec import CLIENT_OPTIMIZER_NAMES

    assert set(CLIENT_OPTIMIZER_NAMES) == {o.value for o in OptimizerNames} | {"adamw_hf", "adamw_apex_fused"}

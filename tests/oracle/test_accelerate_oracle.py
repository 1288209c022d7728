"""accelerate 1.15.0 itself judges Accelerate configs, and DeepSpeed 0.19.8 the config it builds.

The verdict replays ``accelerate launch --config_file FILE train.py`` on the CPU, with accelerate's
own functions and nothing re-implemented: ``launch_command_parser`` and ``_validate_launch_command``
(which load the YAML with ``load_config_from_file``), the field list ``launch_command`` passes on,
``prepare_deepspeed_cmd_env`` for the environment of the training processes, then in that
environment ``DeepSpeedPlugin()`` and ``set_mixed_precision`` (what AcceleratorState calls). The
config it ends with is handed to the corpus oracle's DeepSpeed verdict (DeepSpeedConfig plus the
engine-time checks), "auto" filled as the integrations do, on the launched world size.

Agreement: where the linter reports an error, accelerate or DeepSpeed rejects; where it reports
none, both accept, and the DeepSpeed config the linter builds is the one accelerate built.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from test_corpus_oracle import Judging, _ds, deepspeed_verdict
from test_rule_fixes_oracle import fixtures
from zeroadvisor.config import accelerate as A
from zeroadvisor.config.reader import read_document
from zeroadvisor.deepspeed.accelerate_map import build
from zeroadvisor.lint.findings import Severity
from zeroadvisor.rules import accelerate as accelerate_rules
from zeroadvisor.rules.linter import lint_file

pytestmark = pytest.mark.oracle

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Verdict:
    accepted: bool
    stage: str = ""  # load | launch | plugin | deepspeed
    error: str = ""
    deepspeed: bool = True
    config: dict[str, Any] | None = None  # what DeepSpeedPlugin ended with (less steps_per_print)
    notes: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def oracle():
    pytest.importorskip("accelerate")
    pytest.importorskip("deepspeed")
    pytest.importorskip("transformers")
    _ds()


def accelerate_verdict(path: Path, monkeypatch, tmp_path: Path, flags: tuple[str, ...] = ()) -> Verdict:
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    for name in [n for n in os.environ if n.startswith(("ACCELERATE_", "PARALLELISM_CONFIG_"))]:
        monkeypatch.delenv(name)
    args = launch_command_parser().parse_args(["--config_file", str(path), *flags, "train.py"])
    stage = "load"
    try:
        args, defaults, mp_from_config = _validate_launch_command(args)
        stage = "launch"
        if not (args.use_deepspeed and not args.cpu):
            return Verdict(True, deepspeed=False)
        # commands/launch.py launch_command, before deepspeed_launcher
        fields = list(defaults.deepspeed_config.keys()) if defaults else []
        if mp_from_config:
            fields.append("mixed_precision")
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        _, env = prepare_deepspeed_cmd_env(args)
        stage = "plugin"
        for name, value in env.items():
            if name.startswith(("ACCELERATE_", "PARALLELISM_CONFIG_")):
                monkeypatch.setenv(name, value)
        plugin = DeepSpeedPlugin()
        plugin.set_mixed_precision(env["ACCELERATE_MIXED_PRECISION"])
    except Exception as err:  # accelerate's own refusal, whatever its type
        return Verdict(False, stage, f"{type(err).__name__}: {err}")
    config = dict(plugin.deepspeed_config)
    config.pop("steps_per_print", None)  # float("inf"): logging only (accelerate_map leaves it out)
    world = int(args.num_processes) // int(args.num_machines) * int(args.num_machines)
    built = tmp_path / "accelerate_built.json"
    built.write_text(json.dumps(config), "utf-8")
    verdict = deepspeed_verdict(built, Judging(world_size=world, fill="any", inject_batch=True))
    if not verdict.accepted:
        return Verdict(False, "deepspeed", verdict.error, config=config)
    return Verdict(True, config=config)


# Errors the linter reports on purpose where accelerate stays silent (the run starts, as something other than
# configured): a dropped deepspeed_config key (ZA051: the default runs), a dropped NVMe path (ZA057: DeepSpeed swaps
# to a folder named none), a total that does not divide (ZA058: fewer processes). The test below still asserts that
# accelerate accepts such a file and builds the DeepSpeed config the linter predicts, without the dropped value.
SILENT_IN_ACCELERATE = {"ZA051", "ZA057", "ZA058"}


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR and f.code not in SILENT_IN_ACCELERATE]


def assert_agrees(path: Path, monkeypatch, tmp_path: Path) -> None:
    findings = lint_file(path).findings
    verdict = accelerate_verdict(path, monkeypatch, tmp_path)
    codes = {f.code for f in findings}
    if "ZA055" in codes:
        # the deepspeed_config_file is not on this machine: accelerate refuses it here, the linter warns
        assert (verdict.accepted, verdict.stage) == (False, "plugin") and "Expected a string path" in verdict.error, \
            verdict
        return
    errors = _errors(findings)
    if errors:
        assert not verdict.accepted, \
            f"the linter reports {[(f.code, f.pointer) for f in errors]}; accelerate and DeepSpeed accept it"
        return
    if any(f.code == "ZA058" and f.pointer == "" for f in findings):
        # no num_processes: the linter warns that the command must give it, and accelerate refuses without it
        assert (verdict.accepted, verdict.stage) == (False, "load") and "--num_processes" in verdict.error, verdict
        verdict = accelerate_verdict(path, monkeypatch, tmp_path, ("--num_processes", "2"))
    assert verdict.accepted, f"the linter reports no error; accelerate rejects at {verdict.stage}: {verdict.error}"
    launch = build(read_document(path))
    assert launch.deepspeed == verdict.deepspeed
    if verdict.deepspeed:
        assert launch.ds_config == verdict.config, "the DeepSpeed config differs from the one accelerate built"


# -- the corpus --------------------------------------------------------------------------------

def _corpus_files():
    from conftest import CORPUS

    folder = CORPUS / "accelerate_yaml"
    return sorted(folder.glob("*.y*ml")) if folder.is_dir() else []


@pytest.mark.parametrize("path", _corpus_files(), ids=lambda p: p.name)
def test_corpus_accelerate_yaml(oracle, corpus, path, monkeypatch, tmp_path):
    """Every real Accelerate config accelerate accepts lints without errors; the others get one."""
    assert_agrees(path, monkeypatch, tmp_path)


def test_the_corpus_is_there(corpus):
    assert len(_corpus_files()) == 31


# -- the per-rule fixtures and a few more ----------------------------------------------------------

def _fixture_cases():
    out = []
    for path in fixtures.fixture_files():
        data = fixtures.load(path)
        if data["rule"] not in accelerate_rules.CODES:
            continue
        out.extend(pytest.param(case, id=f"{path.stem}::{case['name']}") for case in data["cases"])
    return out


@pytest.mark.parametrize("case", _fixture_cases())
def test_accelerate_agrees_with_the_fixture(oracle, case, monkeypatch, tmp_path):
    monkeypatch.chdir(REPO)  # fixture paths (tests/data/accelerate/...) are relative to the repository
    path = tmp_path / "accelerate.yaml"
    path.write_text(case["config"], "utf-8")
    # the fixtures' relative deepspeed_config_file paths resolve against the folder the job starts in
    assert_agrees(path, monkeypatch, tmp_path)


MORE = {
    "gradient-accumulation-text": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                                  "  gradient_accumulation_steps: four\n",
    "gradient-clipping-text": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                              "  gradient_clipping: none\n",
    "stage-true": "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: true\n",
    "mixed-precision-fp32": "distributed_type: DEEPSPEED\nmixed_precision: fp32\nnum_processes: 2\n",
    "compute-environment-typo": "compute_environment: LOCAL\ndistributed_type: DEEPSPEED\nnum_processes: 2\n",
    "fp8-is-bf16-for-deepspeed": "distributed_type: DEEPSPEED\nmixed_precision: fp16\nnum_processes: 4\n"
                                 "deepspeed_config:\n  zero_stage: 0\n  gradient_clipping: 0.5\n",
    "offload-both-nvme": "distributed_type: DEEPSPEED\nnum_processes: 8\ndeepspeed_config:\n  zero_stage: 3\n"
                         "  offload_optimizer_device: nvme\n  offload_param_device: nvme\n"
                         "  zero3_save_16bit_model: true\n",
    "two-machines": "distributed_type: DEEPSPEED\nnum_machines: 2\nnum_processes: 16\nmachine_rank: 0\n"
                    "main_process_ip: 10.0.0.1\nmain_process_port: 29555\ndeepspeed_config:\n  zero_stage: 2\n"
                    "  deepspeed_multinode_launcher: standard\n",
}


@pytest.mark.parametrize("name", sorted(MORE))
def test_accelerate_agrees_on_more_values(oracle, name, monkeypatch, tmp_path):
    path = tmp_path / "accelerate.yaml"
    path.write_text(MORE[name], "utf-8")
    assert_agrees(path, monkeypatch, tmp_path)


# -- the tables --------------------------------------------------------------------------------

def test_tables_match_accelerate():
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig, SageMakerConfig
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils import ComputeEnvironment, DistributedType, PrecisionType, SageMakerDistributedType
    from accelerate.utils.constants import DEEPSPEED_MULTINODE_LAUNCHERS

    assert set(A.CLUSTER_KEYS) == set(ClusterConfig.__dataclass_fields__)
    assert set(A.SAGEMAKER_KEYS) == set(SageMakerConfig.__dataclass_fields__)
    assert set(A.COMPUTE_ENVIRONMENTS) == {e.value for e in ComputeEnvironment}
    assert set(A.DISTRIBUTED_TYPES) == {e.value for e in DistributedType}
    assert set(A.SAGEMAKER_DISTRIBUTED_TYPES) == {e.value for e in SageMakerDistributedType}
    assert set(A.PRECISIONS) == set(PrecisionType.list())
    assert A.MULTINODE_LAUNCHERS == tuple(DEEPSPEED_MULTINODE_LAUNCHERS)
    parser = launch_command_parser()
    group = next(g for g in parser._action_groups if g.title == "DeepSpeed Arguments")
    assert set(A.DEEPSPEED_KEYS) == {action.dest for action in group._group_actions}

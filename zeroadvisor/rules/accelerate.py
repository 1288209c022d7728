"""Rules for the Accelerate launcher config (ZA05x), and the DeepSpeed config such a file builds.

An Accelerate YAML is linted in two parts (rules/linter.py ``lint_accelerate``, for a file that
config/accelerate.py recognises): these rules read the YAML as ``accelerate launch`` does
(config_args.py, launch.py, DeepSpeedPlugin), and the DeepSpeed rules read the DeepSpeed config
Accelerate builds from it (deepspeed/accelerate_map.py), their findings placed on the YAML key
each value comes from, or left in the deepspeed_config_file they are in.

No finding on an Accelerate YAML carries a fix: the fix writer edits JSON text only.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from zeroadvisor.config import accelerate as A
from zeroadvisor.deepspeed.kind import ACCELERATE, deepspeed_keys
from zeroadvisor.jsontypes import JSONObject
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.config.source import Document
    from zeroadvisor.deepspeed import accelerate_map
    from zeroadvisor.lint.context import Context

_LAUNCH = "_accelerate_launch"  # where a Context keeps the launch built for it


def launch_of(ctx: Context) -> accelerate_map.Launch:
    """The launch of the Context's document, built once per lint."""
    launch: accelerate_map.Launch | None = ctx.__dict__.get(_LAUNCH)
    if launch is None:
        from zeroadvisor.deepspeed import accelerate_map  # only for an Accelerate file (lint's start-up)

        launch = accelerate_map.build(ctx.doc)
        ctx.__dict__[_LAUNCH] = launch
    return launch


def _problems(kind: str) -> Callable[[Context], Iterable[Hit]]:
    def check(ctx: Context) -> Iterable[Hit]:
        if ctx.kind != ACCELERATE:
            return
        for problem in launch_of(ctx).problems:
            if problem.kind == kind:
                yield Hit(problem.pointer, problem.message, position=(1, 1) if problem.pointer == "" else None)
    return check


def _close(key: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(key, list(known), n=2, cutoff=0.75)
    return " (did you mean " + " or ".join(repr(c) for c in close) + "?)" if close else ""


def _accelerate_config(ctx: Context) -> JSONObject | None:
    """The document where it is an Accelerate config (always a mapping: deepspeed/kind.py), else None."""
    return ctx.data if ctx.kind == ACCELERATE and isinstance(ctx.data, dict) else None


def _unknown_top_level(ctx: Context) -> Iterable[Hit]:
    data = _accelerate_config(ctx)
    if data is None:
        return
    known = A.known_top_level(data)
    for key in data:
        if key not in known and key not in A.LEGACY_KEYS:
            yield Hit(f"/{_escape(key)}", f"unknown key {key!r}{_close(key, known)}: 'accelerate launch' raises "
                      "'The config file ... had unknown keys' and does not start")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


UNKNOWN_KEY = Rule(
    code="ZA050",
    name="accelerate-unknown-key",
    severity=Severity.ERROR,
    summary="A top-level key the Accelerate config does not have.",
    explanation=(
        "accelerate launch loads the file into ClusterConfig (SageMakerConfig for AMAZON_SAGEMAKER) and raises "
        "ValueError 'had unknown keys' for any key that is not one of its fields, after converting the old fp16 and "
        "dynamo_backend keys. Rename or delete the key (DeepSpeed settings go under deepspeed_config, or in the "
        "JSON file deepspeed_config_file names)."
    ),
    check=_unknown_top_level,
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_procesess": 8}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 8}', fails=False),
    ),
    source="accelerate commands/config/config_args.py BaseConfig.from_yaml_file",
)


def _ignored(ctx: Context) -> Iterable[Hit]:
    data = _accelerate_config(ctx)
    if data is None or not A.uses_deepspeed(data):
        return
    for key in A.deepspeed_section(data):
        if key in A.DEEPSPEED_KEYS:
            continue
        if key in deepspeed_keys():
            why = (f"{key!r} is a DeepSpeed config key: Accelerate builds the DeepSpeed config from its own keys "
                   "only and ignores it, so the run uses the default; put DeepSpeed settings in a JSON file named by "
                   "deepspeed_config_file")
        else:
            why = (f"unknown key {key!r} in deepspeed_config{_close(key, A.DEEPSPEED_KEYS)}: 'accelerate launch' "
                   "ignores it, so the run uses the default")
        yield Hit(f"{A.DEEPSPEED_SECTION}/{_escape(key)}", why)


IGNORED_KEY = Rule(
    code="ZA051",
    name="accelerate-ignored-key",
    severity=Severity.ERROR,
    summary="A deepspeed_config key that accelerate launch never reads: the run silently uses the default.",
    explanation=(
        "accelerate launch copies every deepspeed_config key onto its arguments but passes only its DeepSpeed "
        "arguments (zero_stage, offload_*_device, gradient_accumulation_steps, gradient_clipping, zero3_*, "
        "deepspeed_config_file, the multinode keys) to the training processes; any other key, a misspelling or a "
        "DeepSpeed block such as zero_optimization, is dropped without a word and the default runs (zero_stag: 3 "
        "runs at DeepSpeedPlugin's default stage 2), as a misspelled key in a DeepSpeed config does (misspelled-key), "
        "so it is an error too. Fix the spelling, or move DeepSpeed settings into a JSON file named by "
        "deepspeed_config_file."
    ),
    check=_ignored,
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stge": 3}}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 3}}', fails=False),
    ),
    source="accelerate commands/launch.py _validate_launch_command (copies each key onto args); utils/launch.py "
           "prepare_deepspeed_cmd_env; utils/dataclasses.py DeepSpeedPlugin.__post_init__ (zero_stage default 2)",
)


def _invalid(ctx: Context) -> Iterable[Hit]:
    data = _accelerate_config(ctx)
    if data is None:
        return
    if "distributed_type" not in data:
        yield Hit("", "no distributed_type: Accelerate raises 'A `distributed_type` must be specified in the config "
                      "file'", position=(1, 1))
    environment = data.get("compute_environment", "LOCAL_MACHINE")
    if environment not in A.COMPUTE_ENVIRONMENTS:
        yield Hit("/compute_environment", f"compute_environment {environment!r}: Accelerate accepts "
                  f"{' or '.join(A.COMPUTE_ENVIRONMENTS)} (ComputeEnvironment) and raises on others", at="value")
    kinds = A.distributed_types(data)
    kind = data.get("distributed_type")
    if "distributed_type" in data and kind not in kinds:
        close = difflib.get_close_matches(str(kind).upper(), list(kinds), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        yield Hit("/distributed_type", f"distributed_type {kind!r}{hint}: Accelerate raises ValueError; it accepts "
                  f"{', '.join(kinds)}", at="value")
    yield from _problems("invalid-value")(ctx)


INVALID_VALUE = Rule(
    code="ZA052",
    name="accelerate-invalid-value",
    severity=Severity.ERROR,
    summary="A value accelerate launch or the DeepSpeed it starts refuses.",
    explanation=(
        "Accelerate checks compute_environment, distributed_type and mixed_precision against its enums, passes "
        "each DeepSpeed key to the training processes as text and reads it back with int(), float() or "
        "str_to_bool (a zero_stage of 2.0 or true raises), and DeepSpeed then refuses a stage outside 0-3 or an "
        "offload device other than none, cpu or nvme. An unquoted no in YAML is the boolean false, which "
        "mixed_precision cannot take. Give a value from the list in the message."
    ),
    check=_invalid,
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 8, "deepspeed_config": {"zero_stage": 4}}',
                fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 8, "deepspeed_config": {"zero_stage": 3}}',
                fails=False),
    ),
    source="accelerate utils/dataclasses.py DeepSpeedPlugin.__post_init__; utils/launch.py prepare_deepspeed_cmd_env; "
           "deepspeed/runtime/zero/config.py",
)

CONFIG_FILE_CONFLICT = Rule(
    code="ZA053",
    name="accelerate-config-file-conflict",
    severity=Severity.ERROR,
    summary="Accelerate DeepSpeed keys or mixed_precision next to a deepspeed_config_file.",
    explanation=(
        "With a deepspeed_config_file, DeepSpeedPlugin._deepspeed_config_checks raises ValueError when the "
        "Accelerate config also sets gradient_accumulation_steps, gradient_clipping, zero_stage, "
        "offload_*_device, offload_*_nvme_path, zero3_save_16bit_model or mixed_precision (the key's presence is "
        "enough), and set_mixed_precision raises when the precision asked for contradicts the file. Set these in "
        "the DeepSpeed config file and delete them from the YAML; zero3_init_flag may stay."
    ),
    check=_problems("config-file-conflict"),
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, "mixed_precision": "bf16", '
                '"deepspeed_config": {"deepspeed_config_file": "{\\"zero_optimization\\": {\\"stage\\": 2}}"}}',
                fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, '
                '"deepspeed_config": {"deepspeed_config_file": "{\\"zero_optimization\\": {\\"stage\\": 2}}"}}',
                fails=False),
    ),
    source="accelerate utils/dataclasses.py DeepSpeedPlugin._deepspeed_config_checks, set_mixed_precision",
)

CONFIG_FILE_UNUSABLE = Rule(
    code="ZA054",
    name="accelerate-config-file-unusable",
    severity=Severity.ERROR,
    summary="The deepspeed_config_file is one Accelerate cannot use.",
    explanation=(
        "Accelerate opens deepspeed_config_file with json.load (HfDeepSpeedConfig), so comments and trailing "
        "commas that DeepSpeed's hjson reader accepts fail here, and DeepSpeedPlugin raises 'Please specify the "
        "ZeRO optimization config' when the file has no zero_optimization block. Write strict JSON with a "
        "zero_optimization block."
    ),
    check=_problems("config-file-unusable"),
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, '
                '"deepspeed_config": {"deepspeed_config_file": "{\\"train_batch_size\\": 8}"}}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, '
                '"deepspeed_config": {"deepspeed_config_file": "{\\"zero_optimization\\": {\\"stage\\": 2}}"}}',
                fails=False),
    ),
    source="accelerate utils/deepspeed.py HfDeepSpeedConfig.__init__; utils/dataclasses.py DeepSpeedPlugin",
)

CONFIG_FILE_MISSING = Rule(
    code="ZA055",
    name="accelerate-config-file-missing",
    severity=Severity.WARNING,
    summary="The deepspeed_config_file is not found, so its DeepSpeed settings are not checked.",
    explanation=(
        "Accelerate opens deepspeed_config_file relative to the folder the job starts in and raises when it is "
        "not there. It is looked up here beside the YAML, then in the current folder; a path that exists only on "
        "the training machine is a warning, not an error. Lint the DeepSpeed config file itself, or run from the "
        "folder the job starts in."
    ),
    check=_problems("config-file-missing"),
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, '
                '"deepspeed_config": {"deepspeed_config_file": "/nonexistent/ds_config.json"}}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 2, "deepspeed_config": {"zero_stage": 2}}',
                fails=False),
    ),
    source="accelerate utils/deepspeed.py HfDeepSpeedConfig.__init__ (os.path.exists)",
)


def _unused(ctx: Context) -> Iterable[Hit]:
    data = _accelerate_config(ctx)
    if data is None or A.uses_deepspeed(data) or "distributed_type" not in data:
        return
    if A.deepspeed_section(data):
        yield Hit(A.DEEPSPEED_SECTION, f"distributed_type is {data['distributed_type']!r}, not 'DEEPSPEED': "
                  "'accelerate launch' does not start DeepSpeed and ignores deepspeed_config")


DEEPSPEED_UNUSED = Rule(
    code="ZA056",
    name="accelerate-deepspeed-unused",
    severity=Severity.WARNING,
    summary="A deepspeed_config block in a config whose distributed_type is not DEEPSPEED.",
    explanation=(
        "accelerate launch uses DeepSpeed only when distributed_type is DEEPSPEED; with MULTI_GPU, FSDP or any "
        "other type the deepspeed_config block is read and ignored, and the job runs without ZeRO. Set "
        "distributed_type: DEEPSPEED, or delete the block."
    ),
    check=_unused,
    examples=(
        Example('{"distributed_type": "MULTI_GPU", "deepspeed_config": {"zero_stage": 3}}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "deepspeed_config": {"zero_stage": 3}}', fails=False),
    ),
    source="accelerate commands/launch.py _validate_launch_command (args.use_deepspeed)",
)

NVME_PATH_DROPPED = Rule(
    code="ZA057",
    name="accelerate-nvme-path-dropped",
    severity=Severity.ERROR,
    summary="offload_*_nvme_path in the Accelerate YAML never reaches DeepSpeed.",
    explanation=(
        "accelerate 1.15's prepare_deepspeed_cmd_env passes zero_stage, the offload devices, the accumulation "
        "steps, clipping and the zero3 flags to the training processes, but sets no "
        "ACCELERATE_DEEPSPEED_OFFLOAD_*_NVME_PATH variable, so DeepSpeedPlugin falls back to the text 'none' and "
        "DeepSpeed swaps to a folder named none in the working directory. Give NVMe offload in a JSON file named by "
        "deepspeed_config_file (zero_optimization.offload_*.nvme_path)."
    ),
    check=_problems("nvme-path-dropped"),
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 8, "deepspeed_config": {"zero_stage": 3, '
                '"offload_param_device": "nvme", "offload_param_nvme_path": "/local_nvme"}}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_processes": 8, "deepspeed_config": {"zero_stage": 3, '
                '"offload_param_device": "cpu"}}', fails=False),
    ),
    source="accelerate utils/launch.py prepare_deepspeed_cmd_env; utils/dataclasses.py DeepSpeedPlugin.__post_init__",
)

def _processes(ctx: Context) -> Iterable[Hit]:
    for hit in _problems("processes")(ctx):
        # no num_processes at all: 'accelerate launch' refuses unless the command line gives it, which lint cannot see
        yield dataclasses.replace(hit, severity=Severity.WARNING) if hit.pointer == "" else hit


PROCESSES = Rule(
    code="ZA058",
    name="accelerate-processes",
    severity=Severity.ERROR,
    summary="num_processes does not divide by num_machines, or is missing.",
    explanation=(
        "num_processes is the total across machines: each machine starts num_processes // num_machines "
        "processes, so a total that does not divide silently runs fewer processes than configured (an error). "
        "Without num_processes, accelerate launch raises unless the command gives --num_processes (a warning: "
        "lint cannot see the command). Give the total, a multiple of num_machines."
    ),
    check=_processes,
    examples=(
        Example('{"distributed_type": "DEEPSPEED", "num_machines": 2, "num_processes": 9}', fails=True),
        Example('{"distributed_type": "DEEPSPEED", "num_machines": 2, "num_processes": 16}', fails=False),
    ),
    source="accelerate commands/launch.py _validate_launch_command; utils/launch.py prepare_deepspeed_cmd_env",
    severity_varies="warning when num_processes is missing: the launch command may give --num_processes",
)

RULES = (UNKNOWN_KEY, IGNORED_KEY, INVALID_VALUE, CONFIG_FILE_CONFLICT, CONFIG_FILE_UNUSABLE, CONFIG_FILE_MISSING,
         DEEPSPEED_UNUSED, NVME_PATH_DROPPED, PROCESSES)
CODES = frozenset(rule.code for rule in RULES)


# -- the DeepSpeed config an Accelerate config builds -------------------------------------------

def deepspeed_document(doc: Document, launch: accelerate_map.Launch) -> Document | None:
    """The built DeepSpeed config as a Document: the deepspeed_config_file's text and positions
    where there is one, else a document without text (its findings are placed on the YAML)."""
    from zeroadvisor.config.source import Document

    if launch.ds_config is None:
        return None
    if launch.config_document is not None:
        return dataclasses.replace(launch.config_document, data=launch.ds_config)
    return Document(doc.name, "", launch.ds_config)

"""Run zeroadvisor's pre-flight verdict on public reports of real DeepSpeed runs.

Every ``cases/*.yaml`` is one report (source link, quoted outcome, model, ds_config, cluster,
training shape, measured memory where given; see README.md). For each case this script

1. writes the model as a Hugging Face ``config.json`` (or, for a model given by parameter count,
   a zeroadvisor model description) plus a description YAML with the training shape;
2. writes the ds_config with the ``"auto"`` values filled the way the integration that ran the
   report fills them before ``deepspeed.initialize`` (:func:`fill_auto`), so that the tool sees
   the micro batch, precision and buckets the run really used;
3. runs ``zeroadvisor check ... --format json`` (:func:`run_check`: the one place that knows the
   command line) and reads the configured option's verdict;
4. prints a table (case, outcome, predicted verdict, agreement, predicted vs measured memory) and
   the totals; ``--markdown`` prints the same table as markdown for the README.

Usage: ``PYTHONPATH=. python benchmarks/field/run.py [--markdown] [--only ID ...]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CASES = HERE / "cases"
if str(HERE) not in sys.path:  # heldout.py beside this script, however it is loaded (script, test by path)
    sys.path.insert(0, str(HERE))

import heldout  # noqa: E402  (needs the path above)

OUTCOMES = ("fits", "does-not-fit")


def _gpu_args(case_cluster: dict) -> list[str]:
    """``--gpu NAME`` for a name zeroadvisor's table resolves (driver-reported capacity; a name of several cards
    of one memory, ``A100-40GB``: SXM4 or PCIe, resolves too); otherwise ``--gpu-memory`` with the capacity the
    case states."""
    from zeroadvisor.hardware.gpus import resolve_gpu

    name = case_cluster["gpu"]
    try:
        resolve_gpu(name)
    except ValueError:
        return ["--gpu-memory", str(case_cluster["gpu_memory"])]
    return ["--gpu", name]


class CaseLoader(yaml.SafeLoader):
    """YAML 1.1 reads ``2e8`` and ``1e-6`` as strings (its float needs a dot); the ds_configs in
    the cases are JSON, where they are numbers. Resolve floats with YAML 1.2's core-schema
    pattern, which is JSON's."""


CaseLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$"),
    list("-+0123456789."),
)


def load_case(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=CaseLoader)


# ----------------------------------------------------------------------------- inputs


def hidden_size(model: dict[str, Any]) -> int:
    cfg = model.get("config") or model.get("architecture") or {}
    for key in ("hidden_size", "d_model", "n_embd"):
        if key in cfg:
            return int(cfg[key])
    raise KeyError(f"model {model.get('hf_id')} has no hidden size")


def fill_auto(ds: dict[str, Any], case: dict[str, Any]) -> dict[str, Any]:
    """The ds_config as the integration hands it to ``deepspeed.initialize``.

    Hugging Face Trainer (transformers integrations/deepspeed.py,
    HfTrainerDeepSpeedConfig.trainer_config_process / trainer_config_finalize) and accelerate
    (accelerator.py _prepare_deepspeed) replace ``"auto"`` with: the per-device batch, the
    accumulation steps, world x micro x accumulation, max_grad_norm, fp16/bf16 from the mixed
    precision flag, and from the model's hidden size h: reduce_bucket_size = h*h,
    stage3_prefetch_bucket_size = int(0.9*h*h), stage3_param_persistence_threshold = 10*h.
    Optimizer/scheduler hyper-parameters do not change memory; they are left as they are.
    """
    ds = copy.deepcopy(ds)
    t, c = case["training"], case["cluster"]
    micro = int(t["micro_batch"])
    gas = ds.get("gradient_accumulation_steps")
    gas = 1 if gas in (None, "auto") else int(gas)
    fills = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": gas,
        "train_batch_size": micro * gas * int(c["gpus"]),
        "gradient_clipping": 1.0,
    }
    for key, value in fills.items():
        if ds.get(key) == "auto" or (key.startswith("train_micro") and key not in ds):
            ds[key] = value
    precision = t["precision"]
    for key, on in (("fp16", precision == "fp16"), ("bf16", precision == "bf16")):
        if isinstance(ds.get(key), dict) and ds[key].get("enabled") == "auto":
            ds[key]["enabled"] = on
    zero = ds.get("zero_optimization") or {}
    h = hidden_size(case["model"])
    buckets = {
        "reduce_bucket_size": h * h,
        "stage3_prefetch_bucket_size": int(0.9 * h * h),
        "stage3_param_persistence_threshold": 10 * h,
    }
    for key, value in buckets.items():
        if zero.get(key) == "auto":
            zero[key] = value
    return ds


def write_model(case: dict[str, Any], workdir: Path) -> Path:
    """A model description YAML (training shape) pointing at a config.json, or a count."""
    model, t = case["model"], case["training"]
    desc: dict[str, Any] = {}
    if "config" in model:
        (workdir / "config.json").write_text(json.dumps(model["config"], indent=2))
        desc["hf_config"] = "config.json"
    else:
        desc["parameters"] = model["parameters"]
        desc.update(model.get("architecture") or {})
    desc["sequence_length"] = int(t["sequence_length"])
    desc["activation_checkpointing"] = t.get("activation_checkpointing", "none")
    desc["flash_attention"] = bool(t.get("flash_attention", False))
    # A trainer's own Ulysses (ms-swift's sequence_parallel_size) is not in the ds_config: the description says it.
    if t.get("sequence_parallel"):
        desc["sequence_parallel"] = int(t["sequence_parallel"])
    if isinstance(case.get("peft"), dict):  # LoRA/QLoRA: the description's peft block, as the case gives it
        desc["peft"] = dict(case["peft"])
    path = workdir / "model.yaml"
    path.write_text(yaml.safe_dump(desc, sort_keys=False))
    return path


# ----------------------------------------------------------------------------- the training method

# The `method:` block's fields a TRL config file carries under the same names (DPOConfig, KTOConfig, ORPOConfig,
# CPOConfig, GRPOConfig, RewardConfig): written into the file passed as --training-args. Generation's fields sit in
# the block's `generation:` mapping (MethodSetup.generation) and flat in GRPOConfig.
TRL_FIELDS = ("beta", "precompute_ref_log_probs", "loss_type", "max_length")
TRL_GENERATION_FIELDS = ("num_generations", "max_prompt_length", "max_completion_length", "use_vllm", "vllm_mode",
                         "vllm_gpu_memory_utilization", "offload_model", "offload_optimizer",
                         "vllm_tensor_parallel_size", "move_model_batches")
# A LLaMA-Factory YAML says the method and the family itself: `stage` (with `pref_loss` for ORPO/SimPO, which run
# as stage dpo), `pref_beta`, `ref_model`, `cutoff_len` (LLaMA-Factory's hparams/finetuning_args.py, data_args.py).
LLAMA_FACTORY_STAGES = {"dpo": "dpo", "kto": "kto", "ppo": "ppo", "reward": "rm", "orpo": "dpo", "cpo": "dpo"}
LLAMA_FACTORY_FIELDS = {"beta": "pref_beta", "loss_type": "pref_loss", "reference_model": "ref_model",
                        "max_length": "cutoff_len"}
# Whether the method's own settings travel as a config file (--training-args) beside --trainer. The readers are
# issue 35's (item 1: TRL, LLaMA-Factory and axolotl files); if they take them another way, change
# method_config/method_arguments here.
PASS_METHOD_CONFIG = True


@dataclass(frozen=True)
class MethodArguments:
    """What a case's `method:` block becomes on the command line.

    ``method`` is None for a case without a block (or with ``method: sft``): nothing to pass. ``passed`` is False
    when the CLI cannot be told the method (no ``--trainer`` yet): such a case is costed as SFT, so its verdict is
    shown but not scored (``Result.method_passed``). ``unpassed`` names the block's fields no flag or file carries.
    """

    method: str | None
    flags: tuple[str, ...] = ()
    passed: bool = True
    unpassed: tuple[str, ...] = ()


def _shape(case: dict[str, Any]) -> dict[str, Any]:
    """The training shape as the HF Trainer's arguments, so that a method file agrees with the flags run_check
    passes (a trainer's config file is a TrainingArguments too)."""
    t = case["training"]
    shape: dict[str, Any] = {"per_device_train_batch_size": int(t["micro_batch"])}
    gas = case["ds_config"].get("gradient_accumulation_steps")
    if isinstance(gas, int):
        shape["gradient_accumulation_steps"] = gas
    if t.get("precision") in ("bf16", "fp16"):
        shape[t["precision"]] = True
    shape["gradient_checkpointing"] = t.get("activation_checkpointing", "none") != "none"
    return shape


def trl_config(case: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The case as a TRL config file (``trl dpo --config f.yaml``): the method's fields under TRL's names,
    ``use_peft`` for a LoRA/QLoRA case (TRL's scripts then build no reference copy), and the training shape; with
    the `method:` fields it carries."""
    method = case["method"]
    generation = method.get("generation") or {}
    config: dict[str, Any] = {key: method[key] for key in TRL_FIELDS if method.get(key) is not None}
    config.update({key: generation[key] for key in TRL_GENERATION_FIELDS if generation.get(key) is not None})
    carried = set(config) - set(TRL_GENERATION_FIELDS)
    carried |= {f"generation.{key}" for key in TRL_GENERATION_FIELDS if key in config}
    level = generation.get("vllm_sleep_level")
    if level is not None:  # ms-swift's --sleep_level; TRL's vllm_enable_sleep_mode sleeps at level 2
        config.update({"sleep_level": level} if method.get("trainer") == "ms-swift"
                      else {"vllm_enable_sleep_mode": level > 0})
        carried.add("generation.vllm_sleep_level")
    if isinstance(case.get("peft"), dict):
        config["use_peft"] = True
    return {**config, **_shape(case)}, carried


def llama_factory_config(case: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """The case as a LLaMA-Factory training YAML: ``stage`` (and ``pref_loss``) say the method, ``finetuning_type``
    says whether a second model is loaded, the rest under LLaMA-Factory's names; with the `method:` fields it
    carries (the family too: the file is LLaMA-Factory's)."""
    method = case["method"]
    config: dict[str, Any] = {"stage": LLAMA_FACTORY_STAGES[method["method"]],
                              "finetuning_type": "lora" if isinstance(case.get("peft"), dict) else "full"}
    if method["method"] in ("orpo", "cpo") and method.get("loss_type") is None:
        config["pref_loss"] = "orpo" if method["method"] == "orpo" else "simpo"
    config.update({name: method[key] for key, name in LLAMA_FACTORY_FIELDS.items() if method.get(key) is not None})
    carried = {"trainer", *(key for key in LLAMA_FACTORY_FIELDS if method.get(key) is not None)}
    completion = (method.get("generation") or {}).get("max_completion_length")
    if method["method"] == "ppo" and completion is not None:  # PPO's response cap: GeneratingArguments'
        config["max_new_tokens"] = completion
        carried.add("generation.max_completion_length")
    return {**config, **_shape(case)}, carried


def method_config(case: dict[str, Any]) -> tuple[str, dict[str, Any], set[str]]:
    """The file that says the case's method as its trainer's users write it: a LLaMA-Factory YAML for a
    LLaMA-Factory case, a TRL config file for the others (ms-swift and OpenRLHF take TRL's names or have no file
    zeroadvisor reads beside a launch command); the file's name, its content and the `method:` fields it carries."""
    if case["method"].get("trainer") == "llama-factory":
        return ("llama_factory.yaml", *llama_factory_config(case))
    return (f"{case['method']['method']}_config.yaml", *trl_config(case))


def method_arguments(case: dict[str, Any], workdir: Path) -> MethodArguments:
    """The flags (and the method's file in ``workdir``) that tell ``zeroadvisor check`` the case's method.

    ``--trainer METHOD`` when ``check --help`` lists it; the method's fields as a config file (:func:`method_config`)
    through ``--training-args`` when that flag exists too and PASS_METHOD_CONFIG holds. What neither carries (the
    trainer's release, PPO's placements, a family without a file) is listed in ``unpassed``.
    """
    block = case.get("method")
    if not block or block.get("method", "sft") == "sft":
        return MethodArguments(method=None)
    method = str(block["method"])
    generation = block.get("generation") or {}
    said = [key for key, value in block.items() if key not in ("method", "generation") and value is not None]
    said += [f"generation.{key}" for key, value in generation.items() if value is not None]
    if not supports("--trainer"):
        return MethodArguments(method=method, passed=False, unpassed=tuple(said))
    flags = ["--trainer", method]
    carried: set[str] = set()
    # a case that quotes its launch command (an OpenRLHF run: its flags are the method's only file) passes that
    # (run_check), not a TRL config file its trainer never reads
    if PASS_METHOD_CONFIG and supports("--training-args") and not case.get("launch"):
        name, config, carried = method_config(case)
        path = workdir / name
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        flags += ["--training-args", str(path)]
    # the release as the project pins it, also for a case that passes its launch command (OpenRLHF)
    carried |= trainer_pin(block, workdir)
    return MethodArguments(method=method, flags=tuple(flags), unpassed=tuple(k for k in said if k not in carried))


def trainer_pin(block: dict[str, Any], workdir: Path) -> set[str]:
    """The trainer's release where the case names it, as the run's project pins it (the alignment handbook's
    setup.py: ``trl==0.7.4``): a requirements.txt beside the method's file, which check reads as the user's pin
    (config/trainer_pins.py). Without it check would read the trainer installed where the suite runs, whose
    defaults and logits handling are not the case's. The fields it carries."""
    from zeroadvisor.config.trainer_pins import DISTRIBUTIONS
    from zeroadvisor.vocab import TrainerFamily

    version = block.get("trainer_version")
    if version is None:
        return set()
    family = TrainerFamily(block.get("trainer") or TrainerFamily.TRL)
    (workdir / "requirements.txt").write_text(f"{DISTRIBUTIONS[family]}=={version}\n")
    return {"trainer_version"}


def swift_launch(case: dict[str, Any]) -> str | None:
    """The ms-swift launch command a case ran (``swift sft`` / ``swift rlhf --rlhf_type M``), which tells check the
    trainer family (its own sequence-parallel loss, its reference-model rules: issue 35's readers), with the
    world from the case's cluster and ``--train_type`` from the case's PEFT block; None for another trainer."""
    method = case.get("method") or {}
    if "ms-swift" not in (case["training"].get("trainer"), method.get("trainer")):
        return None
    c = case["cluster"]
    per_node = int(c.get("gpus_per_node", c["gpus"]))
    kind = method.get("method", "sft")
    command = "sft" if kind == "sft" else f"rlhf --rlhf_type {'rm' if kind == 'reward' else kind}"
    tuner = "lora" if case.get("peft") else "full"
    # the report's own ms-swift switches that decide memory and that no other key carries (a vision-language model's
    # --freeze_vit / --freeze_aligner / --vit_gradient_checkpointing), as its command gives them
    extra = f" {case['training']['trainer_flags']}" if case["training"].get("trainer_flags") else ""
    return (f"NPROC_PER_NODE={per_node} NNODES={int(c['gpus']) // per_node} swift {command} --train_type {tuner}"
            f"{extra}")


# ----------------------------------------------------------------------------- the tool


_HELP_CACHE: dict[str, str] = {}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "zeroadvisor", *args], capture_output=True, text=True, env=env,
        cwd=REPO, timeout=120, check=False
    )


def supports(flag: str) -> bool:
    """Whether ``zeroadvisor check`` takes ``flag`` (the interface is growing; issue 8)."""
    if "check" not in _HELP_CACHE:
        _HELP_CACHE["check"] = _cli("check", "--help").stdout
    return re.search(rf"{re.escape(flag)}\b", _HELP_CACHE["check"]) is not None


def run_check(case: dict[str, Any], ds_path: Path, model_path: Path,
              method_flags: Sequence[str] = ()) -> dict[str, Any]:
    """Run ``zeroadvisor check`` on one case; the parsed JSON report.

    The only function that knows the command line (with :func:`method_arguments` for the training method): adapt
    here when the CLI changes.
    """
    c, t = case["cluster"], case["training"]
    args = ["check", str(ds_path), "--model", str(model_path), "--gpus", str(c["gpus"]),
            "--gpus-per-node", str(c.get("gpus_per_node", c["gpus"])), "--format", "json",
            "--fail-on", "never"]
    args += _gpu_args(c)
    if c.get("host_ram_per_node"):
        args += ["--cpu-memory", str(c["host_ram_per_node"])]
    if c.get("nvme"):
        args += ["--nvme", str(c["nvme"])]
    if t.get("integration") in ("deepspeed", "hf-trainer", "accelerate"):
        args += ["--integration", t["integration"]]
    # Inputs issue 8 adds as flags; passed when this version of the CLI has them.
    optional = {
        "--micro-batch": t.get("micro_batch"),
        "--precision": t.get("precision"),
        "--target-len": t.get("target_length"),
        "--padding": t.get("padding"),
        "--load-dtype": t.get("load_dtype"),
        "--optim": t.get("optim"),  # the HF Trainer's optim where the ds_config has no optimizer block
        # the transformers release the report ran (an MoE model's expert layout: 4.x Linears, 5.x fused)
        "--transformers-version": t.get("transformers_version"),
        # the DeepSpeed release the report ran, where it says or its date fixes it (stage 1/2 flatten the
        # parameters on the host before 0.19.0: memory/ds_changes.py); else the installed one is read
        "--deepspeed-version": t.get("deepspeed_version"),
        # the offloader that holds the checkpointed layer inputs in host memory (memory/activation_offload.py)
        "--activation-offload": t.get("activation_offload"),
        "--checkpoint-every": t.get("checkpoint_every"),  # transformers' every_n_layers
        "--image-tokens": t.get("image_tokens"),  # a vision-language model's image tokens per sample
    }
    launch = case.get("launch") or swift_launch(case)
    if launch is not None and supports("--launch"):
        args += ["--launch", launch]
    for flag, value in optional.items():
        if value is not None and supports(flag):
            args += [flag, str(value)]
    for key, flag in (("zero_init", "--zero-init"), ("meta_load", "--meta-load"), ("liger_kernel", "--liger-kernel"),
                      ("cut_cross_entropy", "--cut-cross-entropy"), ("tiled_mlp", "--tiled-mlp"),
                      ("vision_checkpointing", "--vision-checkpointing")):
        if t.get(key) is not None and supports(flag):
            args += [flag if t[key] else flag.replace("--", "--no-", 1)]
    args += list(method_flags)
    proc = _cli(*args)
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        err = (proc.stderr or proc.stdout).strip().splitlines()
        raise RuntimeError(err[-1] if err else f"exit {proc.returncode}, no output") from None


# ----------------------------------------------------------------------------- results


@dataclass
class Result:
    id: str
    outcome: str
    well_documented: bool
    stage: str
    source: str = ""  # the report's source (heldout.source_key: a repository, else a web host)
    verdict: str = "error"
    counted: str | None = None  # the verdict on what is counted, where the verdict is "unknown"
    peak_gpu: int | None = None
    host: int | None = None
    measured_gpu: str | None = None
    measured_host: str | None = None
    # What the measured GPU figure is (MEASURED_OF) and the prediction of that same quantity (predicted_as).
    measured_of: str = "device"
    predicted_gpu: int | None = None  # None: the peak itself, what a "device" figure measures
    # The length the estimate is made at is a maximum the data may stay under (dynamic padding): its peak is a bound,
    # not a prediction of the measured one, so it is left out of the predicted/measured distribution.
    length_is_bound: bool = False
    # A preference/RL case (its `method:` block): the method, and whether check was told it. One it was not told is
    # costed as the same SFT run, so it is shown but not scored (neither agreement nor the GPU ratios).
    method: str | None = None
    method_passed: bool = True
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def compared_gpu(self) -> int | None:
        """The prediction set against the measured GPU figure (predicted_as), the peak where none is set."""
        return self.peak_gpu if self.predicted_gpu is None else self.predicted_gpu

    @property
    def judged(self) -> str:
        """The verdict scored: an "unknown" one (something the report does not state, e.g. the host RAM under
        offload, is not counted) is scored on what is counted, and listed apart (``unknown``)."""
        return self.counted if self.verdict == "unknown" and self.counted else self.verdict

    @property
    def unknown(self) -> bool:
        return self.verdict == "unknown"

    @property
    def scored(self) -> bool:
        """Whether the case counts in the totals: it ran, and check was told its training method."""
        return self.error is None and self.method_passed

    @property
    def agrees(self) -> bool:
        # "tight" is a warning that the run is inside the headroom: it counts as fits.
        predicted = {"fits": "fits", "tight": "fits", "does-not-fit": "does-not-fit"}.get(self.judged)
        return predicted == self.outcome


# What a report's GPU figure measures, and the overhead terms the estimate's peak holds that the figure leaves out:
# "device" is the card's use as nvidia-smi shows it (the default: a figure whose tool is not named is read as what a
# user sees), "reserved" torch's caching-allocator high-water mark (max_memory_reserved, memory_stats
# reserved_bytes.all.peak: without the CUDA context, NCCL's buffers and other memory outside the allocator),
# "allocated" torch's allocated high-water mark (max_memory_allocated: without those and without the memory the
# allocator holds in freed blocks, which the fragmentation allowance stands for).
MEASURED_OF: dict[str, frozenset[str]] = {
    "device": frozenset(),
    "reserved": frozenset({"cuda_context"}),
    "allocated": frozenset({"cuda_context", "fragmentation"}),
}



def measured_of(value: object) -> str:
    """A case's ``measured.gpu_memory_per_gpu.of`` (default "device"); anything else is an error in the case."""
    of = "device" if value is None else value
    if of not in MEASURED_OF:
        raise ValueError(f"measured.gpu_memory_per_gpu.of must be one of {sorted(MEASURED_OF)}, not {value!r}")
    return str(of)


def predicted_as(option: dict[str, Any], of: str) -> int | None:
    """The configured option's expected GPU peak as the figure ``of`` measures it: the peak less the overhead terms
    (by key, in the phase that sets the peak) the figure does not see (MEASURED_OF). A reading on a card with room
    (device, reserved) is set against the peak itself: the cache torch's allocator keeps without memory pressure
    (benchmarks/allocator_fit.md, 15 % of the allocated peak over 11 sources) is not added, since adding it moved
    the field suite's median error from 8 % to 15 % (docs/benchmarks.md)."""
    peak = option.get("peak_gpu", (option.get("per_gpu") or {}).get("total"))
    if peak is None:
        return None
    phase = option.get("binding_phase")
    left_out = sum(t["bytes"] for t in option.get("terms", ())
                   if t["key"] in MEASURED_OF[of] and t["device"] == "gpu" and t["phase"] == phase)
    return int(peak) - int(left_out)


def configured_option(report: dict[str, Any]) -> dict[str, Any]:
    estimate = report.get("estimate") or {}
    for option in estimate.get("stages", []):
        if option.get("configured"):
            return option
    raise RuntimeError("the report has no configured option (estimate missing?)")


def verdict_of(option: dict[str, Any]) -> str:
    """``verdict`` when the tool gives one (issue 8), else the configured option's ``fits``."""
    if option.get("verdict"):
        return str(option["verdict"])
    fits = option.get("fits")
    return "unknown" if fits is None else ("fits" if fits else "does-not-fit")


def stage_label(ds: dict[str, Any]) -> str:
    zero = ds.get("zero_optimization") or {}
    label = f"Z{zero.get('stage', 0)}"
    for key, short in (("offload_optimizer", "opt"), ("offload_param", "par")):
        device = (zero.get(key) or {}).get("device", "none")
        if device not in ("none", None):
            label += f"+{short}:{device}"
    return label


def evaluate(path: Path) -> Result:
    case = load_case(path)
    if case["outcome"] not in OUTCOMES:
        raise ValueError(f"{path.name}: outcome must be one of {OUTCOMES}")
    measured = case.get("measured") or {}
    result = Result(
        id=case["id"], outcome=case["outcome"], well_documented=bool(case["well_documented"]),
        stage=stage_label(case["ds_config"]), source=heldout.source_key(case["source"]),
        measured_gpu=(measured.get("gpu_memory_per_gpu") or {}).get("value"),
        measured_host=(measured.get("host_ram_per_node") or {}).get("value"),
        measured_of=measured_of((measured.get("gpu_memory_per_gpu") or {}).get("of")),
        length_is_bound=case["training"].get("padding") == "longest",
    )
    with tempfile.TemporaryDirectory(prefix="field-") as tmp:
        work = Path(tmp)
        ds_path = work / "ds_config.json"
        ds_path.write_text(json.dumps(fill_auto(case["ds_config"], case), indent=2))
        model_path = write_model(case, work)
        method = method_arguments(case, work)
        result.method, result.method_passed = method.method, method.passed
        try:
            option = configured_option(run_check(case, ds_path, model_path, method.flags))
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            result.error = str(exc)
            return result
    result.verdict = verdict_of(option)
    result.counted = option.get("counted_verdict")
    result.peak_gpu = option.get("peak_gpu", (option.get("per_gpu") or {}).get("total"))
    result.host = option.get("peak_host_per_node", option.get("per_node_cpu"))
    result.predicted_gpu = predicted_as(option, result.measured_of)
    return result


# ----------------------------------------------------------------------------- output


def gb(n: int | None) -> str:
    return "" if n is None else f"{n / 1e9:.1f} GB"


COLUMNS = ("case", "config", "outcome", "predicted", "agree", "pred. GPU peak", "measured GPU",
           "pred. host/node", "measured host")


def measured_cell(r: Result) -> str:
    """The measured GPU figure as the report states it, with what it measures where that is not the card's use."""
    if not r.measured_gpu:
        return ""
    return r.measured_gpu if r.measured_of == "device" else f"{r.measured_gpu} ({r.measured_of})"


def rows(results: list[Result]) -> list[tuple[str, ...]]:
    out = []
    for r in results:
        name = r.id + (" *" if r.well_documented else "")
        verdict = (f"error: {r.error[:60]}" if r.error else
                   f"unknown ({r.counted} counted)" if r.unknown and r.counted else r.verdict)
        if not r.method_passed:
            verdict += " (as SFT)"
        agree = "method not passed" if not r.method_passed else "yes" if r.agrees else "NO"
        config = f"{r.stage} {r.method}" if r.method else r.stage
        out.append((name, config, r.outcome, verdict, agree,
                    gb(r.peak_gpu), measured_cell(r), gb(r.host) if r.host else "",
                    r.measured_host or ""))
    return out


# A measured value as the reports write it: 36.6GB (decimal), 28.28GiB / 72782MiB (binary), 27G (nvidia-smi and
# top print binary units with a bare G). A range ("750-800GB") or text has no single value.
_MEASURED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(GiB|MiB|GB|MB|G|M)\s*$")
_UNIT = {"GiB": 2**30, "G": 2**30, "MiB": 2**20, "M": 2**20, "GB": 10**9, "MB": 10**6}


def measured_bytes(text: str | None) -> float | None:
    """The bytes a report's measured figure states, or None where it states no single value."""
    match = _MEASURED.match(text or "")
    return float(match.group(1)) * _UNIT[match.group(2)] if match else None


@dataclass(frozen=True)
class RatioSpread:
    """The distribution of predicted/measured GPU peaks: is the model centred (median) and how wide (p10-p90)."""

    count: int
    median: float
    p10: float
    p90: float
    median_abs_error: float  # median |ratio - 1|


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) by linear interpolation between the closest ranks (numpy's default), so that a
    percentile of a handful of cases is not pinned to one of them."""
    if not values:
        raise ValueError("quantile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside [0, 1]")
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def spread(ratios: Sequence[float]) -> RatioSpread | None:
    """Count, median, 10th/90th percentiles and median |ratio - 1| of predicted/measured ratios; None for none."""
    if not ratios:
        return None
    return RatioSpread(count=len(ratios), median=quantile(ratios, 0.5), p10=quantile(ratios, 0.1),
                       p90=quantile(ratios, 0.9), median_abs_error=quantile([abs(r - 1) for r in ratios], 0.5))


def gpu_ratios(results: Sequence[Result]) -> list[tuple[str, float]]:
    """(id, predicted/measured GPU peak) for the runs that trained and state one measured GPU figure, the prediction
    taken of the quantity the figure measures (predicted_as: the card's use, torch's reserved or allocated peak).

    Only runs that trained: a reading at an OOM is what was allocated when it failed, a lower bound of the need.
    Runs whose length is a bound (dynamic padding) are left out: their peak is not a prediction of the reading.
    """
    out = []
    for r in results:
        measured = measured_bytes(r.measured_gpu)
        compared = r.compared_gpu
        if r.outcome == "fits" and compared and measured and not r.length_is_bound and r.method_passed:
            out.append((r.id, compared / measured))
    return out


def spread_line(label: str, ratios: Sequence[float]) -> str:
    s = spread(ratios)
    if s is None:
        return f"predicted/measured GPU peak, {label}: no measured peaks"
    return (f"predicted/measured GPU peak, {label}: {s.count} runs, median {s.median:.2f}, "
            f"10th-90th percentile {s.p10:.2f}-{s.p90:.2f}, median |ratio - 1| {s.median_abs_error:.1%}")


def configuration_class(stage: str) -> str:
    """The class of a run's ZeRO configuration for the spread by configuration (its stage label, stage_label):
    stage 3 or below, with or without an offload. Where the model is off, it is off by class: the classes show it."""
    below = not stage.startswith("Z3")
    offload = "opt:" in stage or "par:" in stage
    return ("ZeRO-0/1/2" if below else "ZeRO-3") + (" with offload" if offload else "")


def by_configuration_line(results: Sequence[Result]) -> str:
    """predicted/measured per configuration class (configuration_class), largest class first."""
    stage = {r.id: r.stage for r in results}
    groups: dict[str, list[float]] = {}
    for case, ratio in gpu_ratios(results):
        groups.setdefault(configuration_class(stage[case]), []).append(ratio)
    parts = []
    for name, ratios in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        s = spread(ratios)
        assert s is not None  # a group holds at least one ratio
        parts.append(f"{name} {s.count} (median {s.median:.2f}, 10th-90th {s.p10:.2f}-{s.p90:.2f}, "
                     f"|ratio - 1| {s.median_abs_error:.0%})")
    return "predicted/measured GPU peak by configuration: " + "; ".join(parts)


def held_out_lines(results: Sequence[Result], constants: Sequence[heldout.Constant] = heldout.CONSTANTS) -> list[str]:
    """The distribution held out by source: which constants are fitted and on what, the spread over the runs whose
    source no constant was fitted on, per source, and how far it moves when any one source is left out."""
    source = {r.id: r.source for r in results}
    rows = [heldout.Row(i, source[i], v) for i, v in gpu_ratios(results)]
    fitted = [c for c in constants if c.field_sources]
    lines = [f"constants no code or datasheet gives: {len(constants)} ("
             + ", ".join(c.name.partition(":")[2] for c in constants) + "); fitted on field cases: "
             + (", ".join(f"{c.name.partition(':')[2]} on {', '.join(sorted(c.field_sources))}" for c in fitted)
                if fitted else "none (each is measured on CPU here or taken from outside figures; "
                "heldout.CONSTANTS says which), so every case is held out")]
    kept, left = heldout.held_out(rows, constants)
    groups = heldout.by_source(kept)
    lines.append(spread_line(f"held out by source ({len(groups)} sources)", [r.ratio for r in kept]))
    if left:
        lines.append("not held out (a constant was fitted on their source): " + ", ".join(r.case for r in left))
    per = []
    for name, ratios in sorted(groups.items(), key=lambda g: (-len(g[1]), g[0])):
        s = spread(ratios)
        if s is not None:
            per.append(f"{name} {s.count} (median {s.median:.2f}, |ratio - 1| {s.median_abs_error:.0%})")
    lines.append("held-out runs per source: " + "; ".join(per))
    if groups:  # one recipe's many runs should not carry the centre: each source's median, weighted alike
        lines.append(f"median of the {len(groups)} source medians: "
                     f"{quantile([quantile(g, 0.5) for g in groups.values()], 0.5):.2f}")
    loso = {name: spread(ratios) for name, ratios in heldout.leave_one_source_out(kept).items()}
    moved = {name: s for name, s in loso.items() if s is not None}
    if len(moved) > 1:
        medians = sorted(moved.items(), key=lambda m: m[1].median)
        errors = sorted(moved.items(), key=lambda m: m[1].median_abs_error)
        lines.append(f"leaving one source out: median {medians[0][1].median:.2f} (without {medians[0][0]})"
                     f" to {medians[-1][1].median:.2f} (without {medians[-1][0]}), median |ratio - 1| "
                     f"{errors[0][1].median_abs_error:.0%} (without {errors[0][0]}) to "
                     f"{errors[-1][1].median_abs_error:.0%} (without {errors[-1][0]})")
    return lines


def totals(results: list[Result]) -> list[str]:
    def line(label: str, group: list[Result]) -> str:
        ok = sum(r.agrees for r in group)
        return f"{label}: {ok} of {len(group)} agree"

    unscored = [r for r in results if not r.method_passed]
    results = [r for r in results if r.method_passed]
    documented = [r for r in results if r.well_documented]
    lines = [
        line("all cases", results),
        line("well-documented cases (*)", documented),
        line("reported fits", [r for r in results if r.outcome == "fits"]),
        line("reported does-not-fit", [r for r in results if r.outcome == "does-not-fit"]),
    ]
    unknown = [r for r in results if r.unknown and not r.error]
    if unknown:
        lines.append(f"verdict unknown, scored on what is counted: {len(unknown)} ({', '.join(r.id for r in unknown)})")
    ratios = gpu_ratios(results)
    if ratios:
        documented_ids = {r.id for r in documented}
        lines.append(spread_line("all", [v for _, v in ratios]))
        lines.append(spread_line("well documented (*)", [v for i, v in ratios if i in documented_ids]))
        lines.append(by_configuration_line(results))
        lines.append(f"measured GPU peaks of runs that trained: {len(ratios)}, predicted/measured - 1 per run ("
                     + ", ".join(f"{i} {v - 1:+.0%}" for i, v in ratios) + ")")
        lines.extend(held_out_lines(results))
    bounded = [r.id for r in results if r.length_is_bound and measured_bytes(r.measured_gpu)]
    if bounded:
        lines.append(f"left out of the ratios, length a bound (dynamic padding): {', '.join(bounded)}")
    errors = [r for r in results if r.error]
    if errors:
        lines.append(f"errors: {len(errors)} ({', '.join(r.id for r in errors)})")
    if unscored:
        lines.append(f"method not passed (check has no --trainer; costed as SFT, not scored): {len(unscored)} ("
                     + ", ".join(f"{r.id} ({r.method})" for r in unscored) + ")")
    return lines


def render_text(results: list[Result]) -> str:
    table = [COLUMNS, *rows(results)]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)).rstrip() for row in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join([*lines, "", *totals(results)])


def render_markdown(results: list[Result]) -> str:
    def md(row: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"

    lines = [md(COLUMNS), "|" + "---|" * len(COLUMNS), *(md(row) for row in rows(results))]
    return "\n".join([*lines, "", *(f"- {t}" for t in totals(results))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--only", nargs="*", help="case ids to run")
    args = parser.parse_args(argv)
    paths = sorted(CASES.glob("*.yaml"))
    if args.only:
        paths = [p for p in paths if p.stem in set(args.only)]
    results = [evaluate(p) for p in paths]
    print(render_markdown(results) if args.markdown else render_text(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

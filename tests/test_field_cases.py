"""The field suite's case files (benchmarks/field/cases/*.yaml) hold the schema benchmarks/field/README.md states, and
a preference/RL case's `method:` block names MethodSetup's fields (config/method.py) with values of its closed sets;
run.py turns that block into check's flags only where check takes them, and never scores a case it could not tell
the method as if it were SFT. No case is run through check here (the suite takes minutes)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml

from conftest import REPO, load_script
from zeroadvisor.config.method import Generation, MethodSetup, Placement
from zeroadvisor.vocab import Method, ModelRole, TrainerFamily, VllmMode

run = load_script("benchmarks/field/run.py", "field_run")
CASE_FILES = sorted((REPO / "benchmarks" / "field" / "cases").glob("*.yaml"))
REQUIRED = {"id", "source", "quote", "outcome", "well_documented", "peft", "model", "ds_config", "reconstructed",
            "cluster", "training"}
OPTIONAL = {"also", "failure", "measured", "method", "launch"}  # launch: the command as the report quotes it
FAILURES = {"gpu-oom", "gpu-oom-train", "host-oom", "oom-unstated"}
# The block carries what a report states; MethodSetup's bookkeeping (where each field was said, notes) is the
# reader's, not the report's.
METHOD_KEYS = {f.name for f in dataclasses.fields(MethodSetup)} - {"origin", "notes"}
GENERATION_KEYS = {f.name for f in dataclasses.fields(Generation)}
PLACEMENT_KEYS = {f.name for f in dataclasses.fields(Placement)}
_NUMBER = (int, float)
VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "trainer_version": (str,), "use_reference": (bool,), "reference_model": (str,),
    "precompute_ref_log_probs": (bool,), "beta": _NUMBER, "loss_type": (str,), "max_length": (int,),
    "colocate_all_models": (bool,), "num_generations": (int,), "max_prompt_length": (int,),
    "max_completion_length": (int,), "use_vllm": (bool,), "vllm_gpu_memory_utilization": _NUMBER,
    "vllm_num_gpus": (int,), "model": (str,), "num_nodes": (int,), "gpus_per_node": (int,), "offload": (bool,),
    "zero_stage": (int,),
}


def _load(path: Path) -> dict:
    return run.load_case(path)


def method_problems(block: object) -> list[str]:
    """What is wrong with one `method:` block (empty: nothing)."""
    if not isinstance(block, dict):
        return ["method: not a mapping"]
    problems = [f"method.{key}: not a MethodSetup field" for key in sorted(set(block) - METHOD_KEYS)]
    if block.get("method") not in {m.value for m in Method}:
        problems.append(f"method.method: {block.get('method')!r} is not one of {[m.value for m in Method]}")
    if "trainer" in block and block["trainer"] not in {t.value for t in TrainerFamily}:
        problems.append(f"method.trainer: {block['trainer']!r} is not one of {[t.value for t in TrainerFamily]}")
    return (problems + _type_problems(block, "method") + _generation_problems(block.get("generation") or {})
            + _placement_problems(block.get("placements") or []))


def _generation_problems(generation: object) -> list[str]:
    if not isinstance(generation, dict):
        return ["method.generation: not a mapping"]
    problems = [f"method.generation.{key}: not a Generation field"
                for key in sorted(set(generation) - GENERATION_KEYS)]
    if "vllm_mode" in generation and generation["vllm_mode"] not in {m.value for m in VllmMode}:
        problems.append(f"method.generation.vllm_mode: {generation['vllm_mode']!r}")
    utilisation = generation.get("vllm_gpu_memory_utilization")
    if utilisation is not None and not (isinstance(utilisation, _NUMBER) and 0 < utilisation <= 1):
        problems.append(f"method.generation.vllm_gpu_memory_utilization: {utilisation!r} is not a share of a card")
    return problems + _type_problems(generation, "method.generation")


def _placement_problems(placements: object) -> list[str]:
    if not isinstance(placements, list):
        return ["method.placements: not a list"]
    problems = []
    for i, placement in enumerate(placements):
        where = f"method.placements[{i}]"
        if not isinstance(placement, dict):
            problems.append(f"{where}: not a mapping")
            continue
        problems += [f"{where}.{key}: not a Placement field" for key in sorted(set(placement) - PLACEMENT_KEYS)]
        if placement.get("role") not in {r.value for r in ModelRole}:
            problems.append(f"{where}.role: {placement.get('role')!r}")
        problems += _type_problems(placement, where)
    return problems


def _type_problems(mapping: dict, where: str) -> list[str]:
    out = []
    for key, value in mapping.items():
        expected = VALUE_TYPES.get(key)
        # bool is an int in Python: a count given as true is as wrong as a flag given as 3
        if expected and value is not None and (not isinstance(value, expected)
                                               or (isinstance(value, bool) and bool not in expected)):
            out.append(f"{where}.{key}: {value!r} is not {'/'.join(t.__name__ for t in expected)}")
    return out


def case_problems(path: Path) -> list[str]:
    case = _load(path)
    problems = [f"missing {key}" for key in sorted(REQUIRED - set(case))]
    problems += [f"unknown key {key}" for key in sorted(set(case) - REQUIRED - OPTIONAL)]
    if case.get("id") != path.stem:
        problems.append(f"id {case.get('id')!r} is not the file's name")
    if case.get("outcome") not in run.OUTCOMES:
        problems.append(f"outcome {case.get('outcome')!r}")
    if case.get("outcome") == "does-not-fit" and case.get("failure") not in FAILURES:
        problems.append(f"failure {case.get('failure')!r} (a run that failed says how: {sorted(FAILURES)})")
    if not re.match(r"^https://\S+$", str(case.get("source", ""))):
        problems.append(f"source {case.get('source')!r} is not a URL")
    problems += _shape_problems(case)
    if "method" in case:
        problems += method_problems(case["method"])
    return problems


def _shape_problems(case: dict) -> list[str]:
    problems = []
    if not isinstance(case.get("well_documented"), bool):
        problems.append("well_documented is not true/false")
    if not isinstance(case.get("reconstructed"), list):
        problems.append("reconstructed is not a list")
    if not isinstance(case.get("ds_config"), dict):  # a ZeRO-0 run may have no zero_optimization block
        problems.append("ds_config is not a mapping")
    problems += [f"cluster.{key} missing" for key in ("gpus", "gpu") if key not in (case.get("cluster") or {})]
    return problems + [f"training.{key} missing" for key in ("micro_batch", "sequence_length", "precision")
                       if key not in (case.get("training") or {})]


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.stem)
def test_every_case_file_holds_the_schema(path):
    problems = case_problems(path)
    assert not problems, f"{path.name}: " + "; ".join(problems)


def test_the_suite_has_preference_and_rl_cases_of_several_methods_and_trainers():
    blocks = [_load(p)["method"] for p in CASE_FILES if "method" in _load(p)]
    assert len(blocks) >= 8
    assert {"dpo", "cpo", "ppo", "grpo"} <= {b["method"] for b in blocks}
    assert {"trl", "llama-factory", "ms-swift", "openrlhf"} <= {b["trainer"] for b in blocks}


@pytest.mark.parametrize("block, fragment", [
    ({"method": "dpo", "beta": 0.1}, None),
    ({"method": "sdpo"}, "method.method: 'sdpo'"),
    ({"method": "dpo", "ref_beta": 0.1}, "method.ref_beta: not a MethodSetup field"),
    ({"method": "dpo", "origin": []}, "method.origin: not a MethodSetup field"),
    ({"method": "dpo", "trainer": "trlx"}, "method.trainer: 'trlx'"),
    ({"method": "dpo", "beta": "0.1"}, "method.beta: '0.1' is not int/float"),
    ({"method": "dpo", "use_reference": 1}, "method.use_reference: 1 is not bool"),
    ({"method": "grpo", "generation": {"num_generations": True}}, "method.generation.num_generations: True"),
    ({"method": "grpo", "generation": {"vllm_mode": "remote"}}, "method.generation.vllm_mode: 'remote'"),
    ({"method": "grpo", "generation": {"vllm_gpu_memory_utilization": 30}}, "is not a share of a card"),
    ({"method": "grpo", "generation": {"vllm_gpus": 2}}, "method.generation.vllm_gpus: not a Generation field"),
    ({"method": "ppo", "placements": [{"role": "value"}]}, "method.placements[0].role: 'value'"),
    ({"method": "ppo", "placements": [{"role": "critic", "stage": 3}]}, "placements[0].stage: not a Placement field"),
])
def test_the_method_check_finds_each_kind_of_mistake(block, fragment):
    problems = method_problems(block)
    if fragment is None:
        assert problems == []
    else:
        assert any(fragment in p for p in problems), problems


# ----------------------------------------------------------------------------- run.py and the method


@pytest.fixture
def help_text():
    """check's help as run.py reads it (``supports``), set to a given text for one test and restored after."""
    saved = dict(run._HELP_CACHE)

    def set_to(text: str) -> None:
        run._HELP_CACHE["check"] = text

    yield set_to
    run._HELP_CACHE.clear()
    run._HELP_CACHE.update(saved)


GRPO_CASE = REPO / "benchmarks" / "field" / "cases" / "swift-grpo-qwen2.5-72b-4x80g-z3off-lora-vllm-colocate.yaml"
SFT_CASE = REPO / "benchmarks" / "field" / "cases" / "qwen3-32b-8xh200-z2-bf16.yaml"
LLAMA_FACTORY_CASE = REPO / "benchmarks" / "field" / "cases" / "llamafactory-dpo-qwen2-72b-72xa800-z3-11k.yaml"


def test_a_case_without_a_method_passes_nothing(tmp_path, help_text):
    help_text("  --trainer <str>  the training method\n  --training-args <str>\n")
    assert run.method_arguments(_load(SFT_CASE), tmp_path) == run.MethodArguments(method=None)
    assert list(tmp_path.iterdir()) == []


def test_without_a_trainer_flag_the_method_is_not_passed_and_every_field_is_named(tmp_path, help_text):
    help_text("  --training-args <str>  The Hugging Face Trainer's arguments\n")
    args = run.method_arguments(_load(GRPO_CASE), tmp_path)
    assert (args.method, args.passed, args.flags) == ("grpo", False, ())
    expected = {"beta", "trainer", "generation.vllm_gpu_memory_utilization", "generation.num_generations"}
    assert expected <= set(args.unpassed)
    assert list(tmp_path.iterdir()) == []


def test_with_the_flags_the_method_and_its_fields_are_passed_as_a_trl_config(tmp_path, help_text):
    help_text("  --trainer <str>  sft|dpo|...\n  --training-args <str>  TrainingArguments or a TRL config\n")
    args = run.method_arguments(_load(GRPO_CASE), tmp_path)
    assert args.passed and args.flags[:2] == ("--trainer", "grpo")
    assert args.flags[2] == "--training-args"
    written = yaml.safe_load(Path(args.flags[3]).read_text())
    assert written == {"beta": 0.04, "loss_type": "grpo", "num_generations": 4, "max_completion_length": 1024,
                       "use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": 0.55,
                       # ms-swift's vLLM sleep and offload switches (its --sleep_level 1 for vllm_sleep_level 1)
                       "sleep_level": 1, "offload_model": True, "offload_optimizer": True,
                       "vllm_tensor_parallel_size": 4, "move_model_batches": 16,
                       "use_peft": True,  # a LoRA case: TRL's scripts then build no reference copy
                       "per_device_train_batch_size": 1, "bf16": True, "gradient_checkpointing": True}
    # what no flag or file carries is named, not dropped silently (ms-swift has no file the tool reads)
    assert set(args.unpassed) == {"trainer", "use_reference"}


def test_a_llama_factory_case_is_passed_as_a_llama_factory_yaml(tmp_path, help_text):
    help_text("  --trainer <str>  sft|dpo|...\n  --training-args <str>  TrainingArguments or a TRL config\n")
    args = run.method_arguments(_load(LLAMA_FACTORY_CASE), tmp_path)
    assert args.flags[:3] == ("--trainer", "dpo", "--training-args")
    written = yaml.safe_load(Path(args.flags[3]).read_text())
    assert written == {"stage": "dpo", "finetuning_type": "full", "pref_beta": 0.01, "pref_loss": "sigmoid",
                       "cutoff_len": 11008, "per_device_train_batch_size": 1, "bf16": True,
                       "gradient_checkpointing": True}
    assert set(args.unpassed) == {"use_reference"}  # the family is the file's
    # the release as the run's project pins it, beside the file: check reads it (not the suite's installed one)
    assert (tmp_path / "requirements.txt").read_text() == "llamafactory==0.9.1.dev0\n"


@pytest.mark.parametrize("method, peft, expected", [
    ("orpo", None, {"stage": "dpo", "finetuning_type": "full", "pref_loss": "orpo"}),
    ("cpo", None, {"stage": "dpo", "finetuning_type": "full", "pref_loss": "simpo"}),
    ("reward", {"method": "lora", "r": 8}, {"stage": "rm", "finetuning_type": "lora"}),
])
def test_llama_factory_stages_follow_its_names(method, peft, expected):
    case = _load(LLAMA_FACTORY_CASE)
    case["method"] = {"method": method, "trainer": "llama-factory"}
    case["peft"] = peft
    config, carried = run.llama_factory_config(case)
    assert {k: config[k] for k in expected} == expected
    assert carried == {"trainer"}


def _result(case_id: str, method: str | None = None, passed: bool = True, verdict: str = "fits",
            outcome: str = "fits"):
    return run.Result(id=case_id, outcome=outcome, well_documented=False, stage="Z3", verdict=verdict,
                      peak_gpu=int(20e9), measured_gpu="10GB", method=method, method_passed=passed)


def test_a_case_whose_method_was_not_passed_is_shown_but_never_scored_as_sft():
    results = [_result("sft-ok"), _result("dpo-as-sft", method="dpo", passed=False, verdict="fits",
                                          outcome="does-not-fit"),
               _result("dpo-told", method="dpo", verdict="does-not-fit", outcome="does-not-fit")]
    lines = run.totals(results)
    assert "all cases: 2 of 2 agree" in lines
    assert "reported does-not-fit: 1 of 1 agree" in lines
    assert ("method not passed (check has no --trainer; costed as SFT, not scored): 1 (dpo-as-sft (dpo))"
            in lines)
    assert [i for i, _ in run.gpu_ratios(results)] == ["sft-ok"]
    row = {r[0]: r for r in run.rows(results)}
    assert row["dpo-as-sft"][1:5] == ("Z3 dpo", "does-not-fit", "fits (as SFT)", "method not passed")
    assert row["dpo-told"][1] == "Z3 dpo" and row["dpo-told"][4] == "yes"
    assert row["sft-ok"][1] == "Z3"

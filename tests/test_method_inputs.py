"""The training method delivered into TrainingShape.method (inputs/method.py, issue 35): ``--trainer`` on estimate
and check, ``trainer=`` in the Python API and ``trainer`` in the project configuration give the same setup; the
Trainer's files say it where no flag does; a preference file that names no trainer is guessed and said so; a run
that says nothing has MethodSetup() itself."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.method import MethodSetup
from zeroadvisor.config.project import ProjectConfigError
from zeroadvisor.inputs import run as inputs_run
from zeroadvisor.inputs.command import Command
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.inputs.request import Request
from zeroadvisor.vocab import Method, TrainerFamily

SAMPLES = Path(__file__).resolve().parent.parent / "sample_configs"
RUN = {"params": "7B", "gpus": 8, "gpu_memory": "80GiB", "seq_len": 1024}


@pytest.fixture
def built(monkeypatch) -> list:
    """Each RunInputs the one builder returns (the builder itself runs)."""
    results: list = []
    real = inputs_run.build

    def recording(request: Request, **kwargs):
        results.append(real(request, **kwargs))
        return results[-1]

    monkeypatch.setattr(inputs_run, "build", recording)
    return results


@pytest.fixture
def project(tmp_path) -> Path:
    shutil.copy(SAMPLES / "zero2_bf16.json", tmp_path / "ds.json")
    (tmp_path / ".git").mkdir()  # the pins' search stops here
    (tmp_path / "requirements.txt").write_text("deepspeed==0.16.4\ntrl>=0.19,<0.22  # the trainer\n")
    return tmp_path


def _flags(values: dict) -> list[str]:
    return [word for name, value in values.items() for word in (f"--{name.replace('_', '-')}", str(value))]


@pytest.mark.parametrize("command", ["estimate", "check"])
def test_the_flag_the_keyword_and_the_project_key_give_the_same_setup(cli, project, built, command):
    call = zeroadvisor.estimate if command == "estimate" else zeroadvisor.check
    config = str(project / "ds.json")
    call(config, trainer="dpo", **RUN)
    cli(command, config, *_flags(RUN), "--trainer", "dpo", cwd=project)
    (project / ".zeroadvisor.toml").write_text('trainer = "dpo"\n')
    cli(command, config, *_flags(RUN), cwd=project)
    api, flag, configured = (inputs.shape.method for inputs in built)
    assert api.method is flag.method is configured.method is Method.DPO
    assert api.trainer_version == flag.trainer_version == configured.trainer_version == ">=0.19,<0.22"
    assert dict(flag.origin)["trainer_version"] == "trl>=0.19,<0.22 at requirements.txt:2"
    assert dict(api.origin)["method"] == "trainer" and dict(flag.origin)["method"] == "--trainer"
    assert dict(configured.origin)["method"] == f"{project / '.zeroadvisor.toml'}:1: 'trainer'"


def test_the_flag_wins_over_the_project_key(cli, project, built):
    (project / ".zeroadvisor.toml").write_text('trainer = "grpo"\n')
    cli("estimate", str(project / "ds.json"), *_flags(RUN), "--trainer", "kto", cwd=project)
    assert built[0].shape.method.method is Method.KTO


def test_a_run_that_says_nothing_has_the_default_setup(project, built):
    zeroadvisor.estimate(str(project / "ds.json"), **RUN)
    assert built[0].shape.method == MethodSetup() and built[0].shape.method is not None


def test_a_preference_file_naming_no_trainer_is_guessed_and_said(project, built):
    (project / "grpo.yaml").write_text("num_generations: 8\nbeta: 0.04\nuse_vllm: true\n")
    request = Request(Command.ESTIMATE, config=str(project / "ds.json"), training_args=str(project / "grpo.yaml"),
                      **RUN)
    inputs = inputs_run.build(request)
    setup = inputs.shape.method
    assert setup.method is Method.GRPO and setup.generation.num_generations == 8
    guessed = [note for note in inputs.notes if "guessed" in note]
    assert len(guessed) == 1 and "give trainer= to set it" in guessed[0] and "num_generations in " in guessed[0]
    named = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"), trainer="dpo",
                                     training_args=str(project / "grpo.yaml"), **RUN))
    assert named.shape.method.method is Method.DPO and not any("guessed" in note for note in named.notes)


def test_the_flag_over_a_file_that_says_the_method_is_noted(project):
    (project / "lf.yaml").write_text("stage: dpo\nfinetuning_type: lora\ncutoff_len: 1024\n")
    inputs = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"), trainer="kto",
                                      training_args=str(project / "lf.yaml"), **RUN))
    assert inputs.shape.method.method is Method.KTO
    assert inputs.shape.method.trainer is TrainerFamily.LLAMA_FACTORY
    assert any(note.startswith("trainer kto used; stage in ") for note in inputs.notes)


def test_rloo_named_by_the_flag_is_costed_as_its_grpo_sibling_with_its_own_defaults(cli, project, built):
    """``--trainer rloo`` (a TRL RLOOConfig file read alone says no trainer) is what ``trl rloo`` is: GRPO with
    MethodSetup.rloo, so RLOOConfig's beta 0.05 puts a reference model in the run where GRPOConfig's 1.x default
    (0.0) loads none; named in the note and no "used; ... says" note against a GRPO file."""
    (project / "rloo.yaml").write_text("num_generations: 4\nmax_completion_length: 256\n")
    config = str(project / "ds.json")
    cli("check", config, *_flags(RUN), "--trainer", "rloo", "--training-args", str(project / "rloo.yaml"),
        "--format", "json", cwd=project)
    zeroadvisor.check(config, trainer="grpo", training_args=str(project / "rloo.yaml"), **RUN)
    rloo, grpo = (inputs.shape.method for inputs in built)
    assert rloo.method is grpo.method is Method.GRPO and rloo.rloo and not grpo.rloo
    assert rloo.generation.num_generations == 4
    notes = built[0].notes
    assert any(note.startswith("training method rloo, costed as grpo") for note in notes), notes
    assert not any("used;" in note for note in notes)
    from zeroadvisor.memory.method import grpo_default_beta

    assert grpo_default_beta(rloo)[0] == 0.05


def test_the_launch_commands_method_reaches_the_shape(project, monkeypatch):
    monkeypatch.chdir(project)
    (project / "dpo.yaml").write_text("beta: 0.2\nmodel_name_or_path: Qwen/Qwen2.5-0.5B\ndeepspeed: ds.json\n")
    request = Request(Command.CHECK, params="7B", gpu_memory="80GiB", seq_len=1024,
                      launch=f"trl dpo --config {project / 'dpo.yaml'} --num_processes 8")
    inputs = inputs_run.build(request)
    assert inputs.shape.method.method is Method.DPO and inputs.shape.method.beta == 0.2
    assert inputs.cluster.gpus == 8
    # what was read is said once, with the trainer's release and where it was pinned
    assert "training method dpo (trl dpo); trl >=0.19,<0.22 (trl>=0.19,<0.22 at requirements.txt:2)" in inputs.notes


def test_a_plain_sft_file_says_nothing_of_the_method(project):
    (project / "lf.yaml").write_text("stage: sft\nfinetuning_type: full\ncutoff_len: 1024\n")
    inputs = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"),
                                      training_args=str(project / "lf.yaml"), **RUN))
    assert inputs.shape.method.method is Method.SFT and inputs.shape.method.trainer is TrainerFamily.LLAMA_FACTORY
    assert not any("training method" in note for note in inputs.notes)


def test_openrlhf_without_a_config_is_checked_with_the_one_its_flags_build(project, cli):
    """Before, one error asking for the config; now the config train_dpo builds from --zero_stage 3 (and the rest of
    its flags at their defaults: config/openrlhf_config.py) is the one checked, and a note says so."""
    result = cli("check", "--params", "7B", "--gpu-memory", "80GiB", "--format", "json", "--", "deepspeed",
                 "--num_gpus", "8", "--module", "openrlhf.cli.train_dpo", "--pretrain", "m", "--zero_stage", "3",
                 "--max_len", "1024", cwd=project)
    assert result.returncode == 5, result.stderr  # what is counted fits; no --cpu-memory for the host's share
    assert "config: the one openrlhf.cli.train_dpo builds from its flags (get_ds_train_config" in result.stderr
    (configured,) = [st for st in json.loads(result.stdout)["estimate"]["stages"] if st["configured"]]
    assert configured["label"] == "Z3"


def test_openrlhf_zero_stage_fills_an_auto_stage(project):
    (project / "auto.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": '
                                       '{"stage": "auto"}, "bf16": {"enabled": "auto"}}')
    inputs = inputs_run.build(Request(Command.CHECK, config=str(project / "auto.json"), params="7B",
                                      gpu_memory="80GiB", launch="deepspeed --num_gpus 8 --module "
                                      "openrlhf.cli.train_dpo --pretrain m --zero_stage 3 --max_len 1024"))
    assert inputs.shape.zero_stage == 3 and any("from --zero_stage" in note for note in inputs.notes)
    assert inputs.shape.method.trainer is TrainerFamily.OPENRLHF


@pytest.mark.parametrize("value", ["dpo2", 3, ""])
def test_a_method_outside_the_set_is_one_line(value):
    with pytest.raises(UsageError,
                       match=r"^trainer: expected one of sft, dpo, kto, orpo, cpo, grpo, rloo, ppo, reward"):
        zeroadvisor.estimate(trainer=value, **RUN)


def test_the_command_line_refuses_an_unknown_method(cli, project):
    result = cli("estimate", str(project / "ds.json"), *_flags(RUN), "--trainer", "rlhf", cwd=project)
    assert result.returncode == 2 and "--trainer" in result.stderr


def test_a_bad_project_key_names_the_file_and_key(cli, project):
    (project / ".zeroadvisor.toml").write_text('trainer = "sftt"\n')
    result = cli("estimate", str(project / "ds.json"), *_flags(RUN), cwd=project)
    assert result.returncode == 2 and ".zeroadvisor.toml" in result.stderr and "trainer" in result.stderr


def test_the_project_key_is_checked_as_the_flag(project, monkeypatch):
    from zeroadvisor.inputs import project as project_inputs

    (project / ".zeroadvisor.toml").write_text('trainer = 7\n')
    monkeypatch.chdir(project)
    project_inputs.forget()
    with pytest.raises(ProjectConfigError, match=r"\.zeroadvisor\.toml.*trainer.*expected one of sft, dpo"):
        project_inputs.for_run()


def test_a_different_reference_model_is_read_as_model_reads_it(project, monkeypatch):
    """LLaMA-Factory ref_model naming a config.json: its ModelSpec is the reference's (TrainingShape.auxiliary_specs);
    a name nothing here resolves is costed as the policy, said in a note."""
    from zeroadvisor.vocab import ModelRole

    model = SAMPLES / "models" / "llama-2-7b" / "config.json"
    (project / "lf.yaml").write_text(f"stage: dpo\nfinetuning_type: full\ncutoff_len: 1024\nref_model: {model}\n")
    inputs = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"),
                                      training_args=str(project / "lf.yaml"), **RUN))
    ((role, spec),) = inputs.shape.auxiliary_specs
    assert role is ModelRole.REFERENCE and spec.num_layers == 32 and spec.hidden_size == 4096
    (project / "lf.yaml").write_text("stage: dpo\nfinetuning_type: full\ncutoff_len: 1024\nref_model: nobody/none-7b\n")
    unknown = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"),
                                       training_args=str(project / "lf.yaml"), **RUN))
    assert unknown.shape.auxiliary_specs == ()
    assert any(note.startswith("reference model 'nobody/none-7b' not read (model nobody/none-7b not found offline")
               and note.endswith("costed as the policy's architecture") for note in unknown.notes)


def test_the_policys_own_model_named_as_reference_is_not_read_twice(project):
    model = str(SAMPLES / "models" / "llama-2-7b" / "config.json")
    (project / "lf.yaml").write_text(f"stage: dpo\nfinetuning_type: full\ncutoff_len: 1024\nref_model: {model}\n")
    inputs = inputs_run.build(Request(Command.ESTIMATE, config=str(project / "ds.json"), model=model, gpus=8,
                                      gpu_memory="80GiB", training_args=str(project / "lf.yaml")))
    assert inputs.shape.auxiliary_specs == () and inputs.shape.method.reference_model == model


@pytest.mark.parametrize(("text", "words"), [("num_generations: 0\n", "num_generations in "),
                                             ("stage: grpo\ncutoff_len: 1024\n", "stage in "),
                                             ("rl: ppo\nbase_model: m\n", "rl in ")])
def test_a_bad_method_value_is_exit_2_in_one_line_naming_the_file(cli, project, text, words):
    (project / "args.yaml").write_text(text)
    result = cli("estimate", str(project / "ds.json"), *_flags(RUN), "--training-args", "args.yaml", cwd=project)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and words + "args.yaml" in result.stderr


def test_estimate_says_a_guessed_method_with_the_flag_that_sets_it(cli, project):
    (project / "grpo.yaml").write_text("num_generations: 8\nbeta: 0.04\n")
    result = cli("estimate", str(project / "ds.json"), *_flags(RUN), "--training-args", "grpo.yaml", cwd=project)
    assert result.returncode == 0, result.stderr
    assert "zeroadvisor: note: training method grpo guessed from num_generations in grpo.yaml" in result.stderr
    assert "give --trainer METHOD to set it" in result.stderr
    plain = cli("estimate", str(project / "ds.json"), *_flags(RUN), cwd=project)
    assert "training method" not in plain.stderr


# -- what the method assumed: in the "Assumed" block with the flag or file key that sets it (memory/method.py) -------

def _assumed(cli, project, *extra: str) -> dict[str, dict]:
    import json

    result = cli("estimate", project / "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--seq-len", "1024", "--training-args", project / "dpo.yaml", "-f", "json", *extra, cwd=project)
    assert result.returncode == 0, result.stderr
    return {a["name"]: a for a in json.loads(result.stdout)["assumed"]}


def test_a_guessed_dpo_without_a_release_pin_lists_what_it_assumed(cli, project, monkeypatch):
    monkeypatch.setattr("zeroadvisor.config.trainer_pins._installed", lambda name: None)
    (project / "requirements.txt").write_text("deepspeed==0.16.4\n")  # no trl pin, none installed
    (project / "dpo.yaml").write_text("beta: 0.1\nmax_length: 1024\n")
    assumed = _assumed(cli, project)
    # the method, guessed from beta, and set by --trainer
    assert assumed["trainer"]["value"] == "dpo" and assumed["trainer"]["flag"] == "--trainer"
    assert "guessed from beta in " in assumed["trainer"]["effect"]
    # the release (TRL's newest read), set by a pin; precompute_ref_log_probs (TRL's default false), by its key
    assert assumed["trainer_version"]["value"] is None and "TRL 1.16.0" in assumed["trainer_version"]["effect"]
    assert assumed["trainer_version"]["key"].startswith("a pin of the trainer")
    assert (assumed["precompute_ref_log_probs"]["value"], assumed["precompute_ref_log_probs"]["key"]) == \
        (False, "precompute_ref_log_probs")
    text = cli("estimate", project / "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
               "--seq-len", "1024", "--training-args", project / "dpo.yaml", cwd=project).stdout
    block = text.split("Assumed (not given; the flag sets it):", 1)[1]
    for item in ("--trainer dpo", "trainer release unknown (a pin)",
                 "reference log-probs precomputed off (precompute_ref_log_probs)"):
        assert item in block, item


def test_what_the_files_and_flags_say_is_not_assumed(cli, project, monkeypatch):
    # the project's requirements.txt pins trl>=0.19,<0.22; --trainer says the method; the file says precompute
    (project / "dpo.yaml").write_text("beta: 0.1\nprecompute_ref_log_probs: false\n")
    assumed = _assumed(cli, project, "--trainer", "dpo")
    assert not {"trainer", "trainer_version", "precompute_ref_log_probs"} & set(assumed)


@pytest.mark.parametrize(("release", "mode"), [("0.21.0", "server"), ("1.9.0", "colocate")])
def test_grpo_defaults_that_decide_memory_are_assumed_with_their_keys(cli, project, release, mode):
    (project / "requirements.txt").write_text(f"deepspeed==0.16.4\ntrl=={release}\n")
    (project / "dpo.yaml").write_text("use_vllm: true\n")
    assumed = _assumed(cli, project, "--trainer", "grpo")
    assert "trainer_version" not in assumed
    assert (assumed["beta"]["value"], assumed["beta"]["key"]) == (0.0, "beta")
    # GRPOConfig's default completion cap at that release (config/default_lengths.py), still said as assumed
    assert (assumed["max_completion_length"]["value"], assumed["max_completion_length"]["key"]) == \
        (256, "max_completion_length")
    # GRPOConfig.vllm_mode's default by release: server up to 0.29, colocate from 1.0.0; colocated, its share
    assert (assumed["vllm_mode"]["value"], assumed["vllm_mode"]["key"]) == (mode, "vllm_mode")
    assert assumed.get("vllm_gpu_memory_utilization", {}).get("value") == (0.3 if mode == "colocate" else None)
    given = ("use_vllm: true\nbeta: 0.04\nmax_completion_length: 256\nvllm_mode: colocate\n"
             "vllm_gpu_memory_utilization: 0.5\n")
    (project / "dpo.yaml").write_text(given)
    assert not {"beta", "max_completion_length", "vllm_mode", "vllm_gpu_memory_utilization"} & set(
        _assumed(cli, project, "--trainer", "grpo"))


@pytest.mark.parametrize(("pins", "refused"), [
    ("llamafactory==0.9.5\n", True),  # its own pin installs trl 0.18-0.24
    ("llamafactory==0.9.5\ntrl==0.24.0\n", True),
    ("llamafactory==0.9.5\ntrl==0.9.6\n", False),  # hiyouga/LlamaFactory#9617's way: TRL 0.9.6 beside it
    ("llamafactory==0.9.5\ntrl>=0.8.6,<=0.9.6\n", False),
    ("llamafactory==0.9.3\n", False),  # before the check (its pin was trl 0.8.6-0.9.6 then)
    ("llamafactory==0.9.3\ntrl==0.24.0\n", False),
])
def test_llama_factory_ppo_is_refused_with_a_trl_outside_0_8_6_to_0_9_6_from_0_9_4(cli, project, pins, refused):
    """llamafactory/train/ppo/trainer.py CustomPPOTrainer.__init__ @ v0.9.4, v0.9.5: require_version("trl>=0.8.6,
    <=0.9.6") raises for any other TRL (users hit it at launch: hiyouga/LlamaFactory#10757). The TRL release is
    read from the pins (the installed trl where none pins it); the memory is still counted, at every stage."""
    (project / "requirements.txt").write_text("deepspeed==0.16.4\n" + pins)
    (project / "ppo.yaml").write_text("model_name_or_path: m\nstage: ppo\nfinetuning_type: lora\ncutoff_len: 1024\n"
                                      "reward_model: saves/rm\nreward_model_type: lora\n")
    result = cli("check", project / "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--training-args", project / "ppo.yaml", "-f", "json", cwd=project)
    data = json.loads(result.stdout)
    words = [st["trainer_refusal"] for st in data["estimate"]["stages"]]
    if refused:
        assert result.returncode != 0 and all(w and "requires TRL version >=0.8.6,<=0.9.6" in w for w in words)
        # the pinned TRL, else the installed one (the oracle extra's, where the CLI runs), else LLaMA-Factory's pin
        said = ("trl 0.24.0 (trl==0.24.0 at requirements.txt:3)",) if "trl==" in pins else \
            ("(the installed trl ", "own pin installs trl>=0.18.0,<=0.24.0")
        assert "install trl==0.9.6" in words[0] and any(s in words[0] for s in said), words[0]
        assert any(f["code"] == "ZA814" for f in data["findings"])
    else:
        assert all(w is None for w in words), words
    assert all(st["per_gpu"]["total"] > 0 for st in data["estimate"]["stages"])


def _assumed_completion(cli, project, launch: str) -> dict | None:
    result = cli("check", project / "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--seq-len", "1024", "--launch", launch, "-f", "json", cwd=project)
    assert result.stdout, result.stderr
    return next((a for a in json.loads(result.stdout)["estimate"]["assumed"] if a["name"] == "max_completion_length"),
                None)


@pytest.mark.parametrize(("pin", "rlhf", "value", "whose"), [
    ("", "ppo", 512, "ms-swift's default"), ("ms-swift==3.8.0\n", "grpo", 512, "ms-swift's default"),
    ("ms-swift==3.1.0\n", "ppo", 53, "PPOConfig's default")])  # 3.0 and 3.1: TRL's response_length
def test_swift_s_own_completion_cap_is_taken_and_listed_as_assumed(cli, project, pin, rlhf, value, whose):
    """RLHFArguments.max_completion_length 512 from ms-swift 3.2.0 (swift/arguments/rlhf_args.py @ v4.5.2): the
    cap GRPO and PPO generate to where the command gives none, listed with the flag that sets it."""
    (project / "requirements.txt").write_text("deepspeed==0.16.4\n" + pin)
    found = _assumed_completion(cli, project, f"NPROC_PER_NODE=8 swift rlhf --rlhf_type {rlhf} --model m "
                                              "--reward_model m --max_length 1024")
    assert found is not None and found["value"] == value and found["key"] == "--max_completion_length", found
    assert found["effect"].startswith(whose)
    given = _assumed_completion(cli, project, f"NPROC_PER_NODE=8 swift rlhf --rlhf_type {rlhf} --model m "
                                              "--reward_model m --max_length 1024 --max_completion_length 256")
    assert given is None


def test_trl_ppo_s_response_length_default_is_listed_as_assumed(cli, project):
    """PPOConfig.response_length 53 (trl/trainer/ppo_config.py @ v0.21.0, trl/experimental/ppo @ v1.9.0): the
    response PPO generates, trains on and scores; listed with its key where the file leaves it out."""
    (project / "ppo.yaml").write_text("per_device_train_batch_size: 2\n")
    found = _assumed_completion(cli, project, "accelerate launch examples/scripts/ppo/ppo.py --config ppo.yaml")
    assert found is not None and (found["value"], found["key"]) == (53, "response_length"), found
    (project / "ppo.yaml").write_text("per_device_train_batch_size: 2\nresponse_length: 128\n")
    assert _assumed_completion(cli, project, "accelerate launch examples/scripts/ppo/ppo.py --config ppo.yaml") is None


def test_trl_ppo_without_a_reward_model_path_lists_its_reward_and_value_models_as_assumed(cli, project):
    """ppo.py loads both from PPOConfig.reward_model_path, whose default (EleutherAI/pythia-160m) cannot score another
    policy's tokens: without it in the file they are costed as the policy and said so, with the key that sets
    them; a file that names one assumes nothing of them (nor ms-swift's, whose --reward_model is its own flag)."""
    def assumed(text: str, launch: str = "accelerate launch examples/scripts/ppo/ppo.py --config ppo.yaml"):
        (project / "ppo.yaml").write_text(text)
        result = cli("check", project / "ds.json", "--params", "7B", "--gpus", "8", "--gpu-memory", "80GiB",
                     "--seq-len", "1024", "--launch", launch, "-f", "json", cwd=project)
        assert result.stdout, result.stderr
        return next((a for a in json.loads(result.stdout)["estimate"]["assumed"] if a["name"] == "reward_model_path"),
                    None)

    found = assumed("per_device_train_batch_size: 2\nresponse_length: 128\n")
    assert found is not None and found["key"] == "reward_model_path" and "pythia-160m" in found["effect"], found
    assert assumed("per_device_train_batch_size: 2\nreward_model_path: Qwen/Qwen2.5-0.5B\n") is None
    assert assumed("", "NPROC_PER_NODE=8 swift rlhf --rlhf_type ppo --model m --reward_model r") is None


def _ppo_rows(cli, project, launch: str) -> dict:
    result = cli("check", project / "ds.json", "--model", "Qwen/Qwen2.5-7B", "--gpus", "8", "--gpu-memory", "80GiB",
                 "--seq-len", "1024", "--launch", launch, "-f", "json", cwd=project)
    assert result.stdout, result.stderr
    stage = next(st for st in json.loads(result.stdout)["estimate"]["stages"] if st["configured"])
    return stage["per_gpu"]


@pytest.mark.parametrize(("policy_file", "smaller_file"), [
    ("per_device_train_batch_size: 1\nbf16: true\nresponse_length: 128\n",
     "per_device_train_batch_size: 1\nbf16: true\nresponse_length: 128\nreward_model_path: Qwen/Qwen2.5-0.5B\n")])
def test_trl_ppo_s_reward_model_path_sizes_its_reward_and_value_models(cli, project, policy_file, smaller_file):
    """TRL's ppo.py loads the value model and the reward model from PPOConfig.reward_model_path
    (examples/scripts/ppo/ppo.py @ v0.21.0, v1.9.0): a 0.5B reward model beside a 7B policy is costed as the 0.5B,
    not as copies of the policy."""
    launch = "accelerate launch examples/scripts/ppo/ppo.py --config ppo.yaml"
    (project / "ppo.yaml").write_text(policy_file)
    whole = _ppo_rows(cli, project, launch)
    (project / "ppo.yaml").write_text(smaller_file)
    small = _ppo_rows(cli, project, launch)
    # Qwen2.5-0.5B has 494M parameters against the 7B's 7.6B: its rows a fifteenth or less
    assert small["reward_model"] * 10 < whole["reward_model"] and small["critic"] * 10 < whole["critic"]
    assert small["reference_model"] == whole["reference_model"]


def test_swift_ppo_s_reward_model_sizes_its_reward_and_value_models(cli, project):
    """ms-swift's PPO loads the value model and the reward model from --reward_model
    (swift/pipelines/train/rlhf.py @ 4.x)."""
    base = "NPROC_PER_NODE=8 swift rlhf --rlhf_type ppo --model Qwen/Qwen2.5-7B --train_type full --max_length 512"
    whole = _ppo_rows(cli, project, f"{base} --reward_model Qwen/Qwen2.5-7B")
    small = _ppo_rows(cli, project, f"{base} --reward_model Qwen/Qwen2.5-0.5B")
    assert small["reward_model"] * 10 < whole["reward_model"] and small["critic"] * 10 < whole["critic"]


def test_swift_grpo_s_reward_model_is_a_frozen_model_beside_the_policy(cli, project):
    """ms-swift's GRPO prepares a --reward_model among its reward functions with prepare_deepspeed, as the reference
    (swift/rlhf_trainers/grpo_trainer.py @ v4.5.2): a reward-model row; none without it, no critic either way."""
    base = ("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B --train_type full --max_length 512 "
            "--max_completion_length 256 --num_generations 8")
    plain = _ppo_rows(cli, project, base)
    scored = _ppo_rows(cli, project, f"{base} --reward_model Qwen/Qwen2.5-0.5B")
    assert "reward_model" not in plain and "critic" not in scored
    # ZeRO-2 (the project's ds.json): prepare_deepspeed runs it at stage 0, a whole bf16 copy of 494M parameters
    assert 0.9e9 < scored["reward_model"] < 1.1e9, scored["reward_model"]


def test_trl_grpo_s_reward_model_is_a_frozen_model_beside_the_policy(cli, project):
    """trl/scripts/grpo.py's reward_model_name_or_path: GRPOTrainer loads it as AutoModelForSequenceClassification
    and prepares it with prepare_deepspeed (trl/trainer/grpo_trainer.py @ v0.21.0, v1.9.0): a reward-model row."""
    text = "per_device_train_batch_size: 8\nnum_generations: 8\nmax_completion_length: 256\nbf16: true\n"
    (project / "grpo.yaml").write_text(text)
    plain = _ppo_rows(cli, project, "trl grpo --config grpo.yaml")
    (project / "grpo.yaml").write_text(text + "reward_model_name_or_path: Qwen/Qwen2.5-0.5B\n")
    scored = _ppo_rows(cli, project, "trl grpo --config grpo.yaml")
    assert "reward_model" not in plain and "critic" not in scored
    assert 0.9e9 < scored["reward_model"] < 1.1e9, scored["reward_model"]  # 494M parameters in bf16, stage 0


def test_every_method_is_a_trainer_word_and_rloo_is_costed_as_grpo():
    """--trainer's words (TrainerChoice) are the methods costed (Method) and TRL's RLOO: a method added to one and not
    the other would be refused by the flag or costed as nothing."""
    from zeroadvisor.vocab import TrainerChoice

    assert {c.value for c in TrainerChoice} == {m.value for m in Method} | {"rloo"}
    assert {c.method for c in TrainerChoice} == set(Method)
    assert TrainerChoice.RLOO.method is Method.GRPO

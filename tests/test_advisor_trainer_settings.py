"""The fix said in the trainer's own settings (advisor/trainer_settings.py): checkpointing and the micro batch where
the trainer's file or command sets them, and for OpenRLHF, which builds its DeepSpeed config from its flags, the
flags that make the priced run; no option its flags cannot give (parameter offload, NVMe, other buckets)."""

from __future__ import annotations

import json
import re

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.advisor.trainer_settings import TRAINER_SETTINGS, builds_config, can_set
from zeroadvisor.memory.options import Option
from zeroadvisor.vocab import Device, TrainerFamily

LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
             "num_attention_heads": 32, "vocab_size": 32000}
Z2 = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
      "zero_optimization": {"stage": 2}}
OPENRLHF = ("ray job submit -- python3 -m openrlhf.cli.train_ppo_ray --zero_stage 2 --bf16 --prompt_max_len 1024 "
            "--generate_max_len 1024 --micro_train_batch_size 1 --advantage_estimator group_norm --init_kl_coef 0 "
            "--remote_rm_url http://rm --vllm_num_engines 2")


def _check(cli, tmp_path, *args: str, config: dict = Z2) -> dict:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "ds.json").write_text(json.dumps(config))
    (tmp_path / "model").mkdir(exist_ok=True)
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    result = cli("check", str(tmp_path / "ds.json"), "--model", str(tmp_path / "model"), "--gpus", "8",
                 "--format", "json", "--fail-on", "never", *args)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _fix_actions(report: dict, code: str) -> list[dict]:
    (finding,) = [f for f in report["findings"] if f["code"] == code]
    assert "recommends" in finding, finding["message"]
    return finding.get("actions", [])


def test_an_openrlhf_fix_names_the_flags_that_make_the_priced_run(cli, tmp_path):
    # 7B actor at ZeRO-2 with its 8-sequence rollout on 40 GB cards does not fit; the fix is said in OpenRLHF's
    # flags (--adam_offload, --zero_stage), not through a config file OpenRLHF never reads
    report = _check(cli, tmp_path, "--gpu-memory", "40GB", "--launch", OPENRLHF)
    actions = _fix_actions(report, "ZA801")
    (flags,) = [a for a in actions if a["kind"] == "trainer-flags"]
    assert flags["text"].startswith("OpenRLHF builds its DeepSpeed config from its flags, not from this file")
    (finding,) = [f for f in report["findings"] if f["code"] == "ZA801"]
    option = finding["recommends"]["option"]
    assert ("--adam_offload" in flags["flags"]) == ("opt:cpu" in option)
    assert ("--zero_stage 3" in flags["flags"]) == option.startswith("Z3")
    assert "par:" not in option and "nvme" not in option  # OpenRLHF's flags never offload the parameters


def test_no_option_openrlhf_cannot_set_is_recommended(cli, tmp_path):
    # so small a card that only parameter offload would fit: OpenRLHF has no flag for it, so no such fix
    report = _check(cli, tmp_path, "--gpu-memory", "8GB", "--cpu-memory", "2TB", "--launch", OPENRLHF)
    for finding in report["findings"]:
        option = (finding.get("recommends") or {}).get("option", "")
        assert "par:" not in option and "nvme" not in option, finding["message"]
        assert "parameter offload" not in finding["message"], finding["message"]  # nor its shortfall
    plain = _check(cli, tmp_path / "plain", "--gpu-memory", "8GB", "--cpu-memory", "2TB", "--seq-len", "2048",
                   "--activation-checkpointing", "full")
    options = [(f.get("recommends") or {}).get("option", "") for f in plain["findings"]]
    assert any("par:cpu" in option for option in options)  # the same run with a config of its own: it is the fix


def test_can_set_and_builds_config():
    assert builds_config(TrainerFamily.OPENRLHF) and not builds_config(TrainerFamily.TRL) and not builds_config(None)
    assert can_set(TrainerFamily.OPENRLHF, Option(3, Device.CPU, Device.NONE))
    assert not can_set(TrainerFamily.OPENRLHF, Option(3, Device.CPU, Device.CPU))
    assert not can_set(TrainerFamily.OPENRLHF, Option(3, Device.NVME, Device.NONE))
    assert can_set(TrainerFamily.AXOLOTL, Option(3, Device.NVME, Device.NVME)) and can_set(None, Option(3))
    assert set(TRAINER_SETTINGS) == {TrainerFamily.TRL, TrainerFamily.LLAMA_FACTORY, TrainerFamily.AXOLOTL,
                                     TrainerFamily.MS_SWIFT, TrainerFamily.OPENRLHF}


def test_a_checkpointing_fix_is_said_in_the_trainer_s_file(cli, tmp_path):
    # LLaMA-Factory with checkpointing turned off at 8k tokens on 40 GB cards: the fix turns it back on, which in
    # LLaMA-Factory means removing disable_gradient_checkpointing
    (tmp_path / "lf.yaml").write_text("model_name_or_path: m\nstage: sft\ndo_train: true\nfinetuning_type: full\n"
                                      "cutoff_len: 8192\nper_device_train_batch_size: 1\nbf16: true\n"
                                      "disable_gradient_checkpointing: true\n")
    report = _check(cli, tmp_path, "--gpu-memory", "40GB", "--training-args", str(tmp_path / "lf.yaml"),
                    config={**Z2, "zero_optimization": {"stage": 3}})
    texts = [a["text"] for f in report["findings"] for a in f.get("actions", [])
             if a["kind"] == "gradient-checkpointing"]
    assert texts and all("remove disable_gradient_checkpointing: true from the LLaMA-Factory YAML" in t
                         for t in texts)
    assert not any("model.gradient_checkpointing_enable()" in t for t in texts)


def test_an_openrlhf_fix_that_leaves_the_offload_drops_its_flag(cli, tmp_path):
    # Adam offloaded where the states fit on 80 GB cards: the fix without it is "drop --adam_offload", a flag to
    # remove, never a flag to pass
    offloaded = {**Z2, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}
    report = _check(cli, tmp_path, "--gpu", "A100-SXM4-80GB", "--cpu-memory", "1TB", "--launch",
                    OPENRLHF.replace("--zero_stage 2", "--zero_stage 2 --adam_offload"), config=offloaded)
    (finding,) = [f for f in report["findings"] if f["code"] == "ZA804"]
    assert "opt:" not in finding["recommends"]["option"]
    (flags,) = [a for a in finding.get("actions", []) if a["kind"] == "trainer-flags"]
    assert "--adam_offload" in flags["drop"] and "--adam_offload" not in flags["flags"]
    assert flags["text"].endswith("drop --adam_offload")


AUTO_BATCH = {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
              "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}}


TRL_DPO = ("per_device_train_batch_size: {mb}\ngradient_accumulation_steps: {gas}\nmax_length: 8192\nbf16: true\n"
           "gradient_checkpointing: true\nbeta: 0.1\n")
LF_DPO = ("model_name_or_path: m\nstage: dpo\ndo_train: true\nfinetuning_type: full\ncutoff_len: 8192\n"
          "per_device_train_batch_size: {mb}\ngradient_accumulation_steps: {gas}\nbf16: true\n")


def _peak_gib(report: dict) -> float:
    (configured,) = [s for s in report["estimate"]["stages"] if s.get("configured")]
    return configured["peak_gpu"]


def test_a_micro_batch_fix_is_made_where_the_trainer_fills_the_auto_batch_keys(cli, tmp_path):
    """All batch keys "auto", filled by the Trainer from a trainer file's micro batch 8 with accumulation 2 (DPO at
    8192 tokens, ZeRO-2, 80 GB): the fix is a smaller micro batch M in that file with the accumulation that keeps
    the global batch (8 x 2 = M x 16/M), the config's "auto" keys untouched, priced as the same file at M checks.
    Before, the filled values were the config's own: a written micro batch was reverted to "auto" by the
    Trainer-mismatch fix, so every micro batch change was priced at 8 and the check said that nothing fits."""
    for name, text, where in (
            ("trl.yaml", TRL_DPO, "in the TRL config"), ("lf.yaml", LF_DPO, "in the LLaMA-Factory YAML")):
        case = tmp_path / name.split(".")[0]
        case.mkdir()
        (case / name).write_text(text.format(mb=8, gas=2))
        args = ("--gpu", "A100-SXM4-80GB", "--trainer", "dpo", "--training-args", str(case / name), "--padding",
                "max_length")
        report = _check(cli, case, *args, config=AUTO_BATCH)
        (finding,) = [f for f in report["findings"] if f["code"] == "ZA801"]
        recommends = finding["recommends"]
        found = re.search(r"micro batch (\d+) with gradient accumulation (\d+)", recommends["change"])
        assert found, finding["message"]
        micro, accumulation = int(found[1]), int(found[2])
        assert micro < 8 and micro * accumulation == 16
        assert not (finding.get("fix") or {}).keys() & {"train_micro_batch_size_per_gpu", "train_batch_size",
                                                        "gradient_accumulation_steps"}
        (action,) = [a for a in finding["actions"] if a["kind"] == "trainer-batch"]
        assert where in action["text"], action["text"]
        assert (action["per_device_train_batch_size"], action["gradient_accumulation_steps"]) \
            == (micro, accumulation)
        # the price is the run the changed file gives
        (case / name).write_text(text.format(mb=micro, gas=accumulation))
        changed = _check(cli, case / "changed", *args, config={**AUTO_BATCH, "zero_optimization": {
            "stage": int(recommends["option"][1])}})
        assert recommends["peak_gpu"] == _peak_gib(changed)


AXOLOTL = ("base_model: {model}\nsequence_len: 4096\nsample_packing: true\nmicro_batch_size: {mb}\n"
           "gradient_accumulation_steps: {gas}\noptimizer: adamw_torch_fused\nbf16: auto\n"
           "gradient_checkpointing: true\nflash_attention: true\ndeepspeed: {config}\n")
HF_AUTO_Z2 = {**AUTO_BATCH, "gradient_clipping": "auto",
              "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8, "allgather_bucket_size": 5e8}}


def test_a_fix_on_a_trainer_filled_config_is_written_on_the_file_and_is_the_run_it_priced(cli, tmp_path):
    """The Trainer fills the config's "auto" values from the trainer's file before the check; the fix is written on
    the file as it is (its "auto" kept), and that file with the trainer's settings the actions name checks as the
    run the fix priced. Before, the diff was made against the filled values, so it did not read back and no diff
    came (--suggest) or nothing was written (--fix)."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    config = tmp_path / "ds.json"
    text = json.dumps(HF_AUTO_Z2, indent=1)
    config.write_text(text)
    yaml = tmp_path / "axolotl.yaml"
    yaml.write_text(AXOLOTL.format(model=tmp_path / "model", mb=16, gas=4, config=config))
    args = ("--launch", f"axolotl train {yaml}", "--gpus", "4", "--gpu", "A100-SXM4-40GB", "--cpu-memory", "1TB")
    suggested = cli("check", *args, "--suggest")
    assert "does not read back" not in suggested.stderr, suggested.stderr
    assert f"+++ b/{config}".replace("b//", "b/") in suggested.stdout.replace("b//", "b/")
    fixed = cli("check", *args, "--fix", "--format", "json", "--fail-on", "never")
    assert fixed.returncode == 0, fixed.stderr
    report = json.loads(fixed.stdout)
    (finding,) = [f for f in report["findings"] if f["code"] == "ZA801"]
    data = json.loads(config.read_text())
    assert data["train_micro_batch_size_per_gpu"] == data["train_batch_size"] == "auto"  # the Trainer's, still
    assert data != HF_AUTO_Z2  # the fix changed the run
    # micro batch 16 x 4096 packed tokens: the fix also takes a smaller micro batch, in the axolotl YAML
    (action,) = [a for a in finding["actions"] if a["kind"] == "trainer-batch"]
    assert "in the axolotl YAML" in action["text"]
    micro, gas = action["per_device_train_batch_size"], action["gradient_accumulation_steps"]
    assert micro < 16 and micro * gas == 16 * 4
    yaml.write_text(AXOLOTL.format(model=tmp_path / "model", mb=micro, gas=gas, config=config))
    again = cli("check", *args, "--format", "json", "--fail-on", "never")
    rechecked = json.loads(again.stdout)
    (configured,) = [s for s in rechecked["estimate"]["stages"] if s.get("configured")]
    assert configured["peak_gpu"] == finding["recommends"]["peak_gpu"] and configured["verdict"] in ("fits", "tight")


def test_a_sequence_parallel_fix_is_the_trainer_s_own_setting_not_deepspeed_s(cli, tmp_path):
    """ms-swift splits sequences with its own --sequence_parallel_size (its own groups), so a Ulysses fix is that flag
    and the config gets no sequence_parallel_size; the command with the flag and the written config checks as the
    priced run."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({**HF_AUTO_Z2, "zero_optimization": {"stage": 2}}, indent=1))
    command = (f"NPROC_PER_NODE=4 swift sft --model {tmp_path / 'model'} --train_type full --torch_dtype bfloat16 "
               f"--max_length 65536 --deepspeed {config}")
    args = ("--gpu", "A10G", "--cpu-memory", "1TB", "--format", "json", "--fail-on", "never")
    fixed = cli("check", "--launch", command, *args, "--fix")
    assert fixed.returncode == 0, fixed.stderr
    (finding,) = [f for f in json.loads(fixed.stdout)["findings"] if f["code"] == "ZA801"]
    assert "(--sequence_parallel_size " in finding["recommends"]["change"], finding["message"]
    (action,) = [a for a in finding["actions"] if a["kind"] == "sequence-parallel"]
    degree = action["degree"]
    assert action["text"].startswith(f"set --sequence_parallel_size {degree}: ms-swift's own sequence parallelism")
    assert "sequence_parallel_size" not in json.loads(config.read_text())
    batch = [a for a in finding["actions"] if a["kind"] == "trainer-batch"]
    flags = " ".join(f"--{key} {a[key]}" for a in batch for key in ("per_device_train_batch_size",
                                                                     "gradient_accumulation_steps"))
    again = cli("check", "--launch", f"{command} --sequence_parallel_size {degree} {flags}", *args)
    (configured,) = [s for s in json.loads(again.stdout)["estimate"]["stages"] if s["configured"]]
    assert configured["peak_gpu"] == finding["recommends"]["peak_gpu"]


def test_under_trl_s_own_accelerate_config_the_micro_batch_fix_keeps_the_trainer_s_accumulation(cli, tmp_path):
    """trl dpo --config f.yaml --accelerate_config zero3: the YAML's gradient_accumulation_steps is the Trainer's
    (TrlParser's dataclasses take it; accelerate launch never sees it), so Accelerate's config leaves the batch keys
    "auto" and a micro batch fix keeps the global batch on the Trainer's accumulation: 8 x 2 = M x 16/M. Before, the
    key went to accelerate launch, no micro batch change could be written, and the check said nothing fits."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    (tmp_path / "dpo.yaml").write_text(f"model_name_or_path: {tmp_path / 'model'}\n" + TRL_DPO.format(mb=8, gas=2))
    result = cli("check", "--launch", f"trl dpo --config {tmp_path / 'dpo.yaml'} --accelerate_config zero3", "--gpu",
                 "A100-SXM4-80GB", "--cpu-memory", "1TB", "--padding", "max_length", "--format", "json",
                 "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    assert "gradient_accumulation_steps 2 from the launch command" not in result.stderr
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "ZA801"]
    (action,) = [a for a in finding["actions"] if a["kind"] == "trainer-batch"]
    micro, accumulation = action["per_device_train_batch_size"], action["gradient_accumulation_steps"]
    assert micro < 8 and micro * accumulation == 16, finding["message"]
    # TRL's file is named as TRL's, not by where this install keeps its copy
    assert {f["file"] for f in json.loads(result.stdout)["findings"]} == {"TRL trl/accelerate_configs/zero3.yaml"}


def test_a_fix_never_writes_a_number_over_a_batch_key_the_trainer_fills(cli, tmp_path):
    """The config's micro batch (4) disagrees with the Trainer's (8; ZA310), and the batch arithmetic on the filled
    values fails (ZA401), whose fix alone would write gradient_accumulation_steps 2 over the file's "auto": the
    Trainer would then find that mismatching its own accumulation of 1. The written file keeps the Trainer's keys
    "auto" and checks without either error."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({**AUTO_BATCH, "train_micro_batch_size_per_gpu": 4}))
    (tmp_path / "args.yaml").write_text("per_device_train_batch_size: 8\nmax_length: 2048\nbf16: true\n"
                                        "gradient_checkpointing: true\n")
    args = ("check", str(config), "--model", str(tmp_path / "model"), "--gpus", "8", "--gpu", "A100-SXM4-80GB",
            "--cpu-memory", "1TB", "--training-args", str(tmp_path / "args.yaml"), "--format", "json",
            "--fail-on", "never")
    before = {f["code"] for f in json.loads(cli(*args).stdout)["findings"]}
    assert {"ZA310", "ZA401"} <= before
    assert cli(*args, "--fix").returncode == 0
    written = json.loads(config.read_text())
    assert [written[key] for key in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                     "train_batch_size")] == ["auto", "auto", "auto"]
    after = {f["code"] for f in json.loads(cli(*args).stdout)["findings"]}
    assert not after & {"ZA310", "ZA401"}


def test_no_sequence_parallel_fix_for_a_trainer_that_splits_no_sequence(cli, tmp_path):
    """LLaMA-Factory's trainers set up no Ulysses (src/llamafactory/train/ @ v0.9.4), so DeepSpeed's
    sequence_parallel_size would split nothing there: a long-sequence run that the HF Trainer's Ulysses would fix
    gets another fix, or none, under a LLaMA-Factory YAML. Before, it was told to write sequence_parallel_size."""
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(LLAMA2_7B))
    config = tmp_path / "ds.json"
    config.write_text(json.dumps({**HF_AUTO_Z2, "zero_optimization": {"stage": 2}}, indent=1))
    args = ("--gpus", "4", "--gpu", "A10G", "--cpu-memory", "1TB", "--format", "json", "--fail-on", "never")
    shape = (f"model_name_or_path: {tmp_path / 'model'}\nper_device_train_batch_size: 1\nbf16: true\n"
             f"deepspeed: {config}\n")
    (tmp_path / "hf.yaml").write_text(shape + "max_seq_length: 65536\n")
    (tmp_path / "lf.yaml").write_text(shape + "stage: sft\nfinetuning_type: full\ncutoff_len: 65536\n")

    def recommended(name: str) -> dict:
        result = cli("check", "--training-args", str(tmp_path / name), *args)
        assert result.returncode == 0, result.stderr
        (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "ZA801"]
        return finding

    assert "sequence_parallel_size" in json.dumps(recommended("hf.yaml").get("recommends"))  # the control
    lf = recommended("lf.yaml")
    assert "sequence_parallel_size" not in json.dumps(lf.get("recommends")), lf["message"]
    assert not [a for a in lf.get("actions", []) if a["kind"] == "sequence-parallel"]

"""Dynamic padding (memory/padding.py, issue 19): the padding input end to end, and the verdict it changes.

The case is the Hugging Face ZeRO blog post's t5-large on 2x 24 GB Titan RTX, ZeRO-2, micro batch 40 at
max_source_length/max_target_length 128 (benchmarks/field/cases/t5-large-2xtitan-z2-bs40.yaml): the run
trained, with finetune_trainer.py padding each batch to its longest sample; at 128/128 it does not fit.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.config.launch import script_training_args
from zeroadvisor.config.training_args import from_mapping
from zeroadvisor.memory.cluster import Cluster
from zeroadvisor.memory.estimate import estimate
from zeroadvisor.memory.padding import longest_fit, shortened, steps
from zeroadvisor.model.description import apply_overrides
from zeroadvisor.model.errors import ModelError
from zeroadvisor.model.hf import spec_from_hf_config
from zeroadvisor.model.spec import Padding, TrainingShape
from zeroadvisor.vocab import Verdict

T5_LARGE = {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5", "d_model": 1024, "d_ff": 4096,
            "d_kv": 64, "num_heads": 16, "num_layers": 24, "num_decoder_layers": 24, "vocab_size": 32128,
            "feed_forward_proj": "relu", "relative_attention_num_buckets": 32, "tie_word_embeddings": True}
CONFIG = {"fp16": {"enabled": True}, "optimizer": {"type": "Adam", "params": {"lr": 3e-5}},
          "zero_optimization": {"stage": 2, "allgather_bucket_size": 2e8, "reduce_bucket_size": 2e8,
                                "overlap_comm": True, "contiguous_gradients": True},
          "train_micro_batch_size_per_gpu": 40, "gradient_accumulation_steps": 1}
TITAN = Cluster(gpus=2, gpus_per_node=2, gpu_memory=24219 * 2**20)


def _shape(padding: Padding | None, seq: int = 128, target: int = 128) -> TrainingShape:
    return TrainingShape(sequence_length=seq, target_length=target, flash_attention=False, precision="fp16",
                         padding=padding)


def _configured(padding: Padding | None, seq: int = 128, target: int = 128, cluster: Cluster = TITAN):
    result = estimate(CONFIG, spec_from_hf_config(T5_LARGE), _shape(padding, seq, target), cluster)
    return result, result.configured


def test_longest_padding_makes_a_run_that_fits_shorter_unknown_with_the_bound():
    result, st = _configured(Padding.LONGEST)
    assert st.counted_verdict == Verdict.DOES_NOT_FIT  # at the maximum, as before
    assert st.verdict == Verdict.UNKNOWN and st.fits is None
    fit = st.padded
    assert fit is not None and (fit.maximum, fit.target_maximum) == (128, 128)
    assert fit.sequence_length == fit.target_length  # equal maxima: shortened together
    assert 1 <= fit.sequence_length < 128
    # the bound is the longest: at it the run fits (every batch padded to it), one token longer it does not
    _, at = _configured(Padding.MAX_LENGTH, fit.sequence_length, fit.target_length)
    _, above = _configured(Padding.MAX_LENGTH, fit.sequence_length + 1, fit.target_length + 1)
    assert at.verdict == Verdict.FITS and at.peak_gpu == fit.peak_gpu
    assert above.verdict != Verdict.FITS
    assert not [a for a in result.assumed if a.name == "padding"]  # given: not an assumption
    assert result.to_dict()["stages"][[s.configured for s in result.stages].index(True)]["padded_fit"] == \
        fit.to_dict()


def test_padding_not_given_keeps_the_verdict_and_says_it_was_assumed():
    result, st = _configured(None)
    assert st.verdict == Verdict.DOES_NOT_FIT and st.padded is None
    (assumed,) = [a for a in result.assumed if a.name == "padding"]
    assert assumed.value == "max_length" and assumed.flag == "--padding" and assumed.field == "padding"
    assert "--padding longest" in assumed.message() and "source and" in assumed.message()


def test_max_length_padding_is_the_estimate_as_it_was():
    result, st = _configured(Padding.MAX_LENGTH)
    _, unset = _configured(None)
    assert st.verdict == Verdict.DOES_NOT_FIT and st.padded is None and st.peak_gpu == unset.peak_gpu
    assert not [a for a in result.assumed if a.name == "padding"]


def test_a_run_that_fits_at_the_maximum_is_not_changed_by_padding():
    big = dataclasses.replace(TITAN, gpu_memory=80 * 2**30)
    for padding in (None, Padding.LONGEST):
        result, st = _configured(padding, cluster=big)
        assert st.verdict == Verdict.FITS and st.padded is None
        assert not [a for a in result.assumed if a.name == "padding"]


def test_a_run_no_length_saves_stays_does_not_fit():
    small = dataclasses.replace(TITAN, gpu_memory=8 * 2**30)  # the model states alone exceed it
    result, st = _configured(Padding.LONGEST, cluster=small)
    assert st.verdict == Verdict.DOES_NOT_FIT and st.padded is None
    assert not [a for a in result.assumed if a.name == "padding"]


def test_the_peak_never_falls_as_the_padded_length_grows():
    """What the bisection relies on (memory/padding.py): the configured option's peak is non-decreasing."""
    model = spec_from_hf_config(T5_LARGE)
    shape = _shape(None, 128, 64)
    peaks = [estimate(CONFIG, model, shortened(model, shape, k), TITAN).configured.peak_gpu
             for k in range(1, steps(model, shape) + 1)]
    assert peaks == sorted(peaks) and peaks[0] < peaks[-1]


def test_source_and_target_are_shortened_in_proportion_rounded_up():
    model = spec_from_hf_config(T5_LARGE)
    shape = _shape(None, 512, 128)
    assert steps(model, shape) == 512
    half = shortened(model, shape, 256)
    assert (half.sequence_length, half.target_length) == (256, 64)
    one = shortened(model, shape, 1)
    assert (one.sequence_length, one.target_length) == (1, 1)  # ceil(128/512) = 1: never a zero length
    assert shortened(model, shape, 512) == shape


def test_longest_fit_bisects_to_the_last_fitting_step():
    model = spec_from_hf_config(T5_LARGE)
    calls = []

    def judge(shape):
        calls.append(shape.sequence_length)
        return (Verdict.FITS if shape.sequence_length <= 37 else Verdict.DOES_NOT_FIT), shape.sequence_length

    fit = longest_fit(model, _shape(None, 100, 100), judge)
    assert fit is not None and (fit.sequence_length, fit.target_length, fit.verdict) == (37, 37, Verdict.FITS)
    assert len(calls) <= 10  # 1, a bisection of 100 steps, the bound


def test_longest_fit_falls_back_to_tight_then_none():
    model = spec_from_hf_config(T5_LARGE)
    tight = longest_fit(model, _shape(None, 64, 64),
                        lambda s: (Verdict.TIGHT if s.sequence_length <= 10 else Verdict.DOES_NOT_FIT, 0))
    assert tight is not None and tight.sequence_length == 10 and tight.verdict == Verdict.TIGHT
    assert "inside the headroom" in tight.words(short=True)
    assert longest_fit(model, _shape(None, 64, 64), lambda s: (Verdict.DOES_NOT_FIT, 0)) is None


def test_decoder_only_words_name_one_length():
    fit = longest_fit(spec_from_hf_config({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12,
                                           "vocab_size": 50257, "n_positions": 1024}),
                      TrainingShape(sequence_length=1024),
                      lambda s: (Verdict.FITS if s.sequence_length <= 300 else Verdict.DOES_NOT_FIT, 0))
    assert fit is not None and fit.target_length is None
    assert fit.words(short=True) == ("fits while no batch is padded beyond 300 tokens (dynamic padding: the data "
                                     "decides)")


def test_padding_override_is_checked():
    assert apply_overrides(TrainingShape(), padding="longest").padding is Padding.LONGEST
    with pytest.raises(ModelError, match="--padding must be one of max_length, longest"):
        apply_overrides(TrainingShape(), padding="dynamic")


@pytest.mark.parametrize(("data", "padding"), [
    ({"pad_to_max_length": False, "max_seq_length": 128}, "longest"),
    ({"pad_to_max_length": "true"}, "max_length"),
    ({"block_size": 1024}, "max_length"),  # run_clm.py group_texts: full blocks
    ({"max_seq_length": 512}, None),  # the arguments do not say how the script pads
])
def test_trainer_arguments_give_the_padding(data, padding):
    args = from_mapping(data, "args.yaml")
    assert args.padding == padding
    assert (args.padding_from != "") == (padding is not None)


def test_launch_command_reads_pad_to_max_length():
    args = script_training_args(["--pad_to_max_length", "--max_seq_length", "128"])
    assert args.padding == "max_length" and args.padding_from == "--pad_to_max_length"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(T5_LARGE))
    (tmp_path / "ds.json").write_text(json.dumps(CONFIG))
    return tmp_path


def _check_args(files, *extra):
    return ["check", str(files / "ds.json"), "--model", str(files / "config.json"), "--gpus", "2",
            "--gpus-per-node", "2", "--gpu-memory", "24219MiB", "--seq-len", "128", "--target-len", "128",
            "--no-flash-attention", *extra]


def test_cli_padding_longest_is_unknown_with_the_bound(cli, files):
    result = cli(*_check_args(files, "--padding", "longest", "--format", "json"))
    assert result.returncode == 5, result.stderr  # unknown: check's exit code for no verdict
    report = json.loads(result.stdout)
    (st,) = [s for s in report["estimate"]["stages"] if s["configured"]]
    assert st["verdict"] == "unknown" and st["counted_verdict"] == "does-not-fit" and st["fits"] is None
    assert st["padded_fit"]["maximum"] == 128 and st["padded_fit"]["sequence_length"] < 128
    assert report["estimate"]["model"]["padding"] == "longest"
    codes = {f["code"] for f in report["findings"]}
    assert "ZA811" in codes and "ZA801" not in codes
    text = cli(*_check_args(files, "--padding", "longest"))
    bound = st["padded_fit"]["sequence_length"]
    assert f"padded beyond {bound} source and {bound} target tokens" in text.stdout
    assert "unknown (does not fit at the maximum length, 128 source and 128 target tokens)" in text.stdout


def test_cli_padding_not_given_names_the_assumption(cli, files):
    result = cli(*_check_args(files))
    assert result.returncode == 1  # does not fit, as before
    assert "--padding max_length" in result.stdout  # the Assumed: block
    report = json.loads(cli(*_check_args(files, "--format", "json")).stdout)
    assert [a["flag"] for a in report["estimate"]["assumed"] if a["name"] == "padding"] == ["--padding"]
    assert report["estimate"]["model"]["padding"] == "max_length"


def test_cli_bad_padding_is_one_line(cli, files):
    result = cli(*_check_args(files, "--padding", "dynamic"))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "longest" in result.stderr


def test_model_description_and_project_config_give_the_padding(cli, files):
    (files / "model.yaml").write_text("hf_config: config.json\nsequence_length: 128\ntarget_length: 128\n"
                                      "flash_attention: false\npadding: longest\n")
    args = _check_args(files, "--format", "json")
    args[args.index(str(files / "config.json"))] = str(files / "model.yaml")
    report = json.loads(cli(*args).stdout)
    assert report["estimate"]["model"]["padding"] == "longest"
    (files / "model.yaml").write_text("hf_config: config.json\npadding: dynamic\n")
    bad = cli(*args)
    assert bad.returncode == 2 and "padding" in bad.stderr and "Traceback" not in bad.stderr
    (files / ".zeroadvisor.toml").write_text('[training]\npadding = "longest"\n')
    (files / "model.yaml").write_text("hf_config: config.json\n")
    report = json.loads(cli(*args, cwd=files).stdout)  # the project configuration is found from the cwd
    assert report["estimate"]["model"]["padding"] == "longest"

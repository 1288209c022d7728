"""The Python API's error contract (zeroadvisor/api.py): any input gives a result or one of EXPECTED_ERRORS
(PreflightError from preflight), each ``str(err)`` one line; never a KeyError, ValueError, ZeroDivisionError,
AttributeError, TypeError or the memory model's internal EstimateError. And the command line's: whatever the
launch command, Trainer arguments, Accelerate config and project configuration, ``check`` ends with a defined
exit code and never an internal error (3).

The regression cases first (each one failed before its fix), then the properties in the bounded CI profile
(tests/conftest.py: fixed seed in CI, deadlines)."""

from __future__ import annotations

import contextlib
import io
import os
import re
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zeroadvisor
from zeroadvisor import api
from zeroadvisor.memory.errors import EstimateError

DOCUMENTED = (*zeroadvisor.EXPECTED_ERRORS, zeroadvisor.PreflightError)
CONFIG = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
CLUSTER = {"params": "7B", "gpus": 8, "gpu_memory": "80GiB"}
BEYOND_FLOAT = 10**400
HUGE_TEXT = "9" * 5000


def _documented(call, *args, **kwargs):
    """The call's result, or None when it raised a documented error (one line); anything else fails the test."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # preflight warns when it cannot judge
            return call(*args, **kwargs)
    except DOCUMENTED as err:  # EstimateError is none of them: it fails the test, as any other exception does
        assert isinstance(err, zeroadvisor.PreflightError) or "\n" not in str(err), str(err)
        return None


# -- regressions: each raised an undocumented error before ----------------------------------------

@pytest.mark.parametrize("keywords", [
    {"gpus": []},  # EstimateError from the cluster
    {"gpu_memory": []},
    {"headroom": []},
    {"gpu": []},  # AttributeError: 'list' object has no attribute 'memory_bytes'
    {"gpu_memory": "1B"},  # ZeroDivisionError in the advice
    {"gpu_memory": 1},
    {"headroom": "99.9999999999%"},
    {"stage": "²"},  # ValueError: invalid literal for int()
    {"model": 0, "params": None},  # TypeError from os.fspath
    {"model": b"config.json", "params": None},
    {"lora_target_modules": -1},  # TypeError: 'int' object is not iterable
    {"lora_target_modules": [1, 2]},
    {"select": 0},  # TypeError
    {"select": b"ZA1"},  # AttributeError
    {"ignore": [None]},
    {"integration": []},  # TypeError: unhashable type
    {"name": -1},  # AttributeError in the reader
    {"name": b"x"},
    {"params": "1e18", "cpu_memory": "1TB"},  # EstimateError: the advisor grew host RAM past 1 EB
], ids=lambda keywords: ",".join(f"{k}={v!r}"[:30] for k, v in keywords.items()))
def test_check_raises_only_documented_errors(keywords):
    advised = keywords.get("params") == "1e18"  # a report: nothing fits on that cluster
    with contextlib.nullcontext() if advised else pytest.raises(zeroadvisor.EXPECTED_ERRORS):
        _strict(zeroadvisor.check, CONFIG, **{**CLUSTER, **keywords})


def _strict(call, *args, **kwargs):
    """``call``, which must give a result or raise a documented error (re-raised for pytest.raises)."""
    try:
        return call(*args, **kwargs)
    except zeroadvisor.EXPECTED_ERRORS as err:
        assert type(err) is not EstimateError and "\n" not in str(err)
        raise


@pytest.mark.parametrize("config", [{"train_batch_size": BEYOND_FLOAT},
                                    {"train_batch_size": BEYOND_FLOAT, "gradient_accumulation_steps": 2}],
                         ids=["tbs", "tbs-gas"])
def test_estimate_of_a_count_past_the_float_range_is_an_unusable_config(config):
    """The memory model's EstimateError (a micro batch derived past its bound) was an internal error."""
    with pytest.raises(api.UnusableConfig, match="cannot estimate"):
        _strict(zeroadvisor.estimate, config, **CLUSTER)


def test_estimate_and_check_agree_on_the_estimate_error(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(f'{{"train_batch_size": {BEYOND_FLOAT}}}')
    with pytest.raises(api.UnusableConfig, match=r"ds\.json: cannot estimate"):
        _strict(zeroadvisor.estimate, str(path), **CLUSTER)
    _strict(zeroadvisor.check, str(path), **CLUSTER)  # a report with findings


@pytest.mark.parametrize("paths", [(0,), (b"ds.json",), (None,)])
def test_lint_of_a_path_that_is_no_path_is_a_usage_error(paths):
    with pytest.raises(zeroadvisor.UsageError):
        _strict(zeroadvisor.lint, *paths)


@pytest.mark.parametrize("keywords", [
    {"exclude": 0}, {"exclude": [None]}, {"exclude": b"node_modules"}, {"exclude": {"a": 1}},
    {"default_excludes": "no"}, {"default_excludes": 0}, {"default_excludes": None},
], ids=lambda keywords: ",".join(f"{k}={v!r}" for k, v in keywords.items()))
def test_lint_walk_keywords_of_the_wrong_type_are_usage_errors(keywords):
    name = next(iter(keywords))
    with pytest.raises(zeroadvisor.UsageError, match=f"^{name}: expected"):
        _strict(zeroadvisor.lint, config=CONFIG, **keywords)


@pytest.mark.parametrize("world, expected", [
    ("²", "WORLD_SIZE='\\xb2' is not a whole number of processes"),  # never read as unset (tests/test_preflight.py)
    ("0", "WORLD_SIZE=0 starts no process"),
    (HUGE_TEXT, "WORLD_SIZE=99999999999999999999... (5,000 digits) is more than any cluster has"),
    (str(2**24 + 1), "is more than any cluster has"),
])
def test_preflight_world_size_from_the_environment(monkeypatch, world, expected):
    monkeypatch.setenv("WORLD_SIZE", world)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    keywords = {"params": "7B", "gpu_memory": "80GiB", "warn_only": True}
    with pytest.raises(zeroadvisor.UsageError, match=re.escape(expected)):
        zeroadvisor.preflight(CONFIG, **keywords)


def test_preflight_local_world_size_past_the_bound(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", HUGE_TEXT)
    with pytest.raises(zeroadvisor.UsageError, match="LOCAL_WORLD_SIZE"):
        zeroadvisor.preflight(CONFIG, params="7B", gpu_memory="80GiB", warn_only=True)


# -- the property: any value of any keyword --------------------------------------------------------

# Values a caller may plausibly pass by mistake: wrong types, zero, negatives, non-finite, past every bound,
# the digits int() refuses, text where numbers go and the reverse.
BAD_VALUES = st.sampled_from([
    0, -1, 1, 2, 3, 8, 1.5, -0.0, float("nan"), float("inf"), 2**24 + 1, 2**63, BEYOND_FLOAT, True, False, None,
    "", " ", "x", "²", "٣", HUGE_TEXT[:50], "1e400", "0B", "1B", "80GiB", "1EB", "99.9999999999%", "100%", "-5%",
    "auto", "fp16", "bf16", "full", "none", "all-linear", "q_proj,,v_proj", "A100-SXM4-80GB", "H100", "7B", "1e18",
    "nan", "ZA101", "ZA9", [], [0], ["x"], {}, {"a": 1}, (1, 2), b"x", object(),
])
KEYWORDS = ["params", "gpus", "gpus_per_node", "gpu", "gpu_memory", "cpu_memory", "nvme", "headroom", "accounting",
            "seq_len", "micro_batch", "precision", "stage", "activation_checkpointing", "flash_attention",
            "target_len", "padding", "load_dtype", "zero_init", "meta_load", "optim", "liger_kernel",
            "tensor_parallel", "pipeline_parallel", "sequence_parallel", "expert_parallel", "peft", "lora_r",
            "lora_target_modules", "lora_modules_to_save", "quantization", "double_quant", "lora_dropout",
            "inter_node_bandwidth", "cpu_cores", "nvme_bandwidth", "efficiency", "launcher"]
CHECK_ONLY = ["integration", "unit", "name", "select", "ignore"]
# Config values: the counts and degrees DeepSpeed divides by, past every range
CONFIG_KEYS = ["train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
               "gradient_clipping", "sequence_parallel_size", "steps_per_print"]
CONFIG_VALUES = st.sampled_from([0, -1, 1, 2, 3, 16, 2.5, 10**9, 2 * 10**9, BEYOND_FLOAT, -BEYOND_FLOAT, 1e308,
                                 "auto", "x", None, True, [], {}])
configs = st.fixed_dictionaries({}, optional=dict.fromkeys(CONFIG_KEYS, CONFIG_VALUES)).map(
    lambda extra: {**CONFIG, **extra})

# A check of a 7B model takes up to a second (the advice searches every option), the first one in a process
# several (imports): a deadline of 10 s per example, and few examples (each property runs in CI's time).
DEADLINE_MS = 10_000


def bounded(examples: int) -> settings:
    return settings(max_examples=examples, deadline=DEADLINE_MS,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.mark.slow  # a property test
@bounded(30)
@given(configs, st.dictionaries(st.sampled_from(KEYWORDS + CHECK_ONLY), BAD_VALUES, max_size=3))
def test_check_gives_a_report_or_a_documented_error(config, keywords):
    _documented(zeroadvisor.check, config, **{**CLUSTER, **keywords})


@pytest.mark.slow
@bounded(30)
@given(configs, st.dictionaries(st.sampled_from(KEYWORDS), BAD_VALUES, max_size=3))
def test_estimate_gives_a_result_or_a_documented_error(config, keywords):
    _documented(zeroadvisor.estimate, config, **{**CLUSTER, **keywords})


@pytest.mark.slow
@bounded(60)
@given(configs, st.dictionaries(st.sampled_from(["gpus", "select", "ignore", "integration", "name", "exclude",
                                                 "default_excludes"]), BAD_VALUES, max_size=3))
def test_lint_gives_a_result_or_a_documented_error(config, keywords):
    _documented(zeroadvisor.lint, config=config, **keywords)


@pytest.mark.slow
@bounded(20)
@given(configs, st.dictionaries(st.sampled_from(KEYWORDS[:12]), BAD_VALUES, max_size=2),
       st.sampled_from([None, "8", "0", "²", "x", HUGE_TEXT, str(2**24 + 1)]))
def test_preflight_gives_a_result_or_a_documented_error(config, keywords, world):
    environ = {"WORLD_SIZE": world} if world is not None else {}
    with _environment(environ):
        _documented(zeroadvisor.preflight, config, **{"params": "7B", "gpu_memory": "80GiB", "warn_only": True,
                                                      **keywords})


@contextlib.contextmanager
def _environment(values: dict[str, str]):
    saved = {name: os.environ.get(name) for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    for name in saved:
        os.environ.pop(name, None)
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


# -- check end to end: the Trainer's inputs, the launch command, the project configuration ---------------

def _cli(argv: list[str], cwd) -> tuple[int, str]:
    from zeroadvisor import cli as command_line

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = command_line.run(argv)
    return int(code), err.getvalue()


NUMBERS = st.sampled_from(["0", "1", "2", "8", "²", "٣", "-1", "1.5", "x", "", HUGE_TEXT, str(2**24 + 1), "4096"])
LAUNCH = st.one_of(
    st.builds(lambda nodes, each: f"torchrun --nnodes {nodes} --nproc-per-node {each} train.py --deepspeed ds.json",
              NUMBERS, st.one_of(NUMBERS, st.just("gpu"))),
    st.builds(lambda gpus, nodes: f"deepspeed --num_gpus {gpus} --num_nodes {nodes} train.py --deepspeed ds.json",
              NUMBERS, NUMBERS),
    st.builds(lambda count, machines: f"accelerate launch --num_processes {count} --num_machines {machines} "
                                      "train.py --deepspeed ds.json", NUMBERS, NUMBERS),
    st.builds(lambda visible, length: f"CUDA_VISIBLE_DEVICES={visible} torchrun --nproc-per-node gpu train.py "
                                      f"--deepspeed ds.json --max_seq_length {length}",
              st.sampled_from(["", "0", "0,1", ",", "x"]), NUMBERS),
    st.builds(lambda length, micro: f"python train.py --deepspeed ds.json --max_seq_length {length} "
                                    f"--per_device_train_batch_size {micro}", NUMBERS, NUMBERS),
)
TRAINING_ARGS = st.one_of(
    st.builds(lambda micro, batch: f"base_model: x\nmicro_batch_size: {micro}\nbatch_size: {batch}\n"
                                   "sequence_len: 2048\n", NUMBERS, NUMBERS),
    st.builds(lambda micro, length: f'{{"per_device_train_batch_size": {micro}, "max_seq_length": {length}}}',
              st.sampled_from(["0", "1", "-1", "1e400", '"x"', "null", HUGE_TEXT[:400]]),
              st.sampled_from(["0", "2048", "-1", "1e400", '"x"', HUGE_TEXT[:400]])),
)
ACCELERATE = st.builds(lambda count, machines, stage: f"distributed_type: DEEPSPEED\nnum_processes: {count}\n"
                                                      f"num_machines: {machines}\ndeepspeed_config:\n"
                                                      f"  zero_stage: {stage}\n",
                       NUMBERS, NUMBERS, st.sampled_from(["0", "2", "3", "9", "x"]))
PROJECT = st.one_of(
    st.builds(lambda gpus, memory, headroom: f"[cluster]\ngpus = {gpus}\ngpu-memory = \"{memory}\"\n"
                                             f"headroom = \"{headroom}\"\n",
              st.sampled_from(["0", "8", str(2**24 + 1), '"x"', "1e400", HUGE_TEXT[:400]]),
              st.sampled_from(["1B", "80GiB", "1EB", "x"]), st.sampled_from(["10%", "99.9999999999%", "100%"])),
    st.builds(lambda depth: "a = " + "[" * depth + "]" * depth + "\n", st.sampled_from([1, 10, 3000])),
    st.sampled_from(["", "select = [\"ZA1\"]\n", "[training]\nseq-len = 0\n", "[training]\nseq-len = 1e400\n"]),
)


@pytest.mark.slow
@bounded(50)
@given(st.one_of(st.none(), LAUNCH), st.one_of(st.none(), TRAINING_ARGS), st.one_of(st.none(), ACCELERATE),
       st.one_of(st.none(), PROJECT))
def test_check_end_to_end_never_ends_in_an_internal_error(tmp_path, launch, training, accelerate, project):
    folder = tmp_path / "run"
    folder.mkdir(exist_ok=True)
    for name in os.listdir(folder):
        os.remove(folder / name)
    (folder / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}')
    argv = ["check", "--params", "7B", "--gpu-memory", "80GiB"]
    argv += ["acc.yaml"] if accelerate is not None else ["ds.json"]
    if accelerate is not None:
        (folder / "acc.yaml").write_text(accelerate)
    if training is not None:
        name = "args.yml" if training.startswith("base_model") else "args.json"
        (folder / name).write_text(training)
        argv += ["--training-args", name]
    if project is not None:
        (folder / ".zeroadvisor.toml").write_text(project)
    argv += ["--launch", launch] if launch is not None else ["--gpus", "8"]
    code, err = _cli(argv, folder)
    assert code in (0, 1, 2, 4, 5), err
    assert "internal error" not in err and "Traceback" not in err
    if code == 2:
        assert len([line for line in err.splitlines() if not line.startswith("zeroadvisor: note:")]) == 1, err

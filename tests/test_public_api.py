"""The Python API (zeroadvisor.lint / estimate / check): typed results over the same flows as the CLI."""

from __future__ import annotations

import json

import pytest

import zeroadvisor
from cli_run import cli_process
from conftest import REPO
from zeroadvisor.api import UsageError

TYPO = {"train_batch_size": 8, "zero_optimisation": {"stage": 3}}
GIB = 1 << 30
# 7e9 parameters, bf16 + Adam: 2 + 2 + 12 bytes per parameter (ZeRO paper §3.1, K = 12)
STAGE0 = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True}, "zero_optimization": {"stage": 0},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-5}}}
STAGE3 = {**STAGE0, "zero_optimization": {"stage": 3}}


def test_lint_a_dict_finds_the_typo_at_its_line():
    result = zeroadvisor.lint(config=TYPO)
    # json.dumps(indent=2): "{", "train_batch_size", then the typo on line 3, column 3
    assert [(f.code, f.line, f.column) for f in result.findings] == [("ZA102", 3, 3)]
    assert result.errors == 1 and not result.ok and result.fails("error") and not result.fails("never")
    assert json.loads(result.report("json"))["findings"][0]["code"] == "ZA102"


def test_lint_text_yaml_and_paths(tmp_path):
    yaml_text = "train_batch_size: 8\nzero_optimisation:\n  stage: 3\n"
    assert [f.line for f in zeroadvisor.lint(text=yaml_text, name="ds.yaml").findings] == [2]
    (tmp_path / "ds.json").write_text(json.dumps(TYPO))
    (tmp_path / "package.json").write_text('{"name": "x", "version": "1.0.0"}')
    result = zeroadvisor.lint(tmp_path)
    assert result.files == 1 and result.skipped == [str(tmp_path / "package.json")]
    assert "1 file checked (1 skipped: not DeepSpeed configs): 1 error" in result.report()


@pytest.mark.parametrize("kwargs", [{}, {"text": "{}", "config": {}}])
def test_lint_needs_exactly_one_input(kwargs):
    with pytest.raises(UsageError, match="exactly one"):
        zeroadvisor.lint(**kwargs)


def test_lint_is_callable_after_the_lint_package_is_imported():
    # importing zeroadvisor.lint.* binds the name to the package: the package itself must call lint
    code = ("import zeroadvisor.lint.engine, zeroadvisor, sys; "
            "print(zeroadvisor.lint(config={'fp16': {'enabled': True}}).ok); "
            "print(callable(zeroadvisor.preflight), zeroadvisor.preflight.__module__); "
            "print('torch' in sys.modules)")
    result = cli_process(code=code, cwd=REPO, env={"PATH": ""})  # a fresh interpreter
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "zeroadvisor.api", "False"]  # no torch: the core never imports it


def _imports(path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _above(names: set[str], packages: tuple[str, ...]) -> set[str]:
    return {n for n in names for p in packages if n == p or n.startswith(p + ".")}


def test_the_lint_package_imports_nothing_above_it():
    """zeroadvisor/lint/ is the engine: the callable binding lives in the facade (zeroadvisor/__init__.py)."""
    for path in (REPO / "zeroadvisor" / "lint").glob("*.py"):
        assert not _above(_imports(path), ("zeroadvisor.api", "zeroadvisor.flows", "zeroadvisor.cli",
                                           "zeroadvisor.inputs")), path.name


def test_the_library_never_imports_the_command_line():
    for path in (REPO / "zeroadvisor").rglob("*.py"):
        relative = path.relative_to(REPO / "zeroadvisor")
        if "cli" not in relative.parts and relative.name != "__main__.py":  # python -m zeroadvisor runs the CLI
            assert not _above(_imports(path), ("zeroadvisor.cli",)), path
    project = REPO / "zeroadvisor" / "config" / "project.py"
    assert not _above(_imports(project), ("zeroadvisor.cli", "zeroadvisor.rules", "zeroadvisor.inputs"))


def test_estimate_counts_model_states_by_hand():
    # ZeRO stage 1 (paper §5.1, P_os): 2 + 2 + K/N_d bytes per parameter, K = 12 for mixed-precision Adam
    stage1 = {**STAGE0, "zero_optimization": {"stage": 1}}
    result = zeroadvisor.estimate(stage1, params=7_000_000_000, gpus=8, gpu="A100-SXM4-80GB")
    rows = result.configured.per_gpu
    assert rows["parameters"] == 2 * 7_000_000_000  # bf16 weights
    assert rows["gradients"] == 2 * 7_000_000_000
    assert rows["optimizer_states"] == 12 * 7_000_000_000 // 8  # fp32 master, momentum, variance, split 8 ways
    # 38.5 GB of states on an 80 GiB card; with a parameter count alone activations are not counted: unknown
    assert result.verdict == "unknown" and result.configured.counted_verdict in ("fits", "tight")
    assert json.loads(result.report("json"))["stages"]


def test_check_verdicts_follow_the_arithmetic():
    # stage 0: at least 16 bytes x 7e9 = 112 GB per GPU > 80 GiB; stage 3 over 8 GPUs: 14 GB of states
    bad = zeroadvisor.check(STAGE0, params="7B", gpus=8, gpu_memory=80 * GIB)
    assert bad.verdict == "does-not-fit" and bad.fits is False
    assert "ZA801" in {f.code for f in bad.findings}
    good = zeroadvisor.check(STAGE3, params="7B", gpus=8, gpu_memory="80GiB")
    # the states fit; activations are not counted without an architecture, so no "fits" (fits is None)
    assert good.verdict == "unknown" and good.fits is None and "ZA801" not in {f.code for f in good.findings}
    assert "ZA811" in {f.code for f in good.findings}
    assert "zeroadvisor" in good.report("markdown")


def test_check_a_file_with_a_diff(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(STAGE0, indent=2))
    report = zeroadvisor.check(path, params="7B", gpus=8, gpu="A100-SXM4-80GB", diff=True)
    assert report.path == str(path) and report.diff.startswith("---")


@pytest.mark.parametrize("kwargs, message", [
    ({"gpu_memory": "80"}, "no unit"),
    ({"gpu_memory": -1}, "byte count"),
    ({"gpu_memory": "80GiB", "gpu": "A100-SXM4-80GB"}, "not both"),
    ({"gpu_memory": "80GiB", "sequence": 4096}, "unknown keyword 'sequence'"),
    ({"gpu_memory": "80GiB", "gpus": 0}, "at least 1"),
])
def test_bad_values_are_one_line_usage_errors(kwargs, message):
    arguments = {"params": "7B", "gpus": 8, **kwargs}
    with pytest.raises(zeroadvisor.EXPECTED_ERRORS, match=message):
        zeroadvisor.check(STAGE3, **arguments)


# -- a dict and a file take the same path ------------------------------------------------------

MICRO_BATCH_4 = {**STAGE3, "train_micro_batch_size_per_gpu": 4}
CLUSTER = {"params": "7B", "gpus": 8, "gpu": "A100-SXM4-80GB"}


@pytest.mark.parametrize("run", [zeroadvisor.check, zeroadvisor.estimate], ids=["check", "estimate"])
def test_a_value_the_config_contradicts_is_refused_for_a_dict_as_for_a_file(tmp_path, run):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(MICRO_BATCH_4, indent=2))
    errors = []
    for config in (path, MICRO_BATCH_4):
        with pytest.raises(UsageError) as refused:
            run(config, micro_batch=8, **CLUSTER)
        errors.append(str(refused.value))
    from_file, from_dict = errors
    assert from_file.startswith(f"{path}: ") and from_dict.startswith("<config>: ")
    assert from_file.removeprefix(f"{path}: ") == from_dict.removeprefix("<config>: ")
    assert "micro batch per GPU 8, but the DeepSpeed config runs 4" in from_dict


@pytest.mark.parametrize("config", [STAGE0, STAGE3, MICRO_BATCH_4, TYPO], ids=["stage0", "stage3", "mb4", "typo"])
def test_a_dict_and_a_file_give_the_same_findings_and_verdicts(tmp_path, config):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config, indent=2))  # as the dict is written (inputs/source.py)
    from_file = zeroadvisor.check(path, **CLUSTER, diff=True)
    from_dict = zeroadvisor.check(config, name=str(path), **CLUSTER, diff=True)
    assert from_dict.findings == from_file.findings and from_dict.verdict == from_file.verdict
    assert from_dict.diff == from_file.diff and from_dict.notes == from_file.notes
    assert zeroadvisor.estimate(config, **CLUSTER).to_dict() == zeroadvisor.estimate(path, **CLUSTER).to_dict()
    assert zeroadvisor.lint(config=config, name=str(path)).findings == zeroadvisor.lint(path).findings


def test_all_names_exactly_the_public_names_and_each_resolves():
    # __all__ is written out for linters; it must stay the lazily imported names plus those defined in the package
    assert sorted(zeroadvisor.__all__) == sorted(["DEEPSPEED_TARGET", "__version__", "lint", *zeroadvisor._PUBLIC])
    for name in zeroadvisor.__all__:
        assert getattr(zeroadvisor, name) is not None


@pytest.mark.parametrize("make, formats", [
    (lambda: zeroadvisor.lint(config={"train_batch_size": 8}), "text, json, sarif, github, html"),
    (lambda: zeroadvisor.estimate(params="1B", gpus=1, gpu_memory="80GiB"), "text, json, sarif, github, html"),
])
def test_a_format_a_result_does_not_render_is_the_documented_error(make, formats):
    # issue 32 (round 3): lint(...).report("markdown") raised a bare ValueError, not one of EXPECTED_ERRORS
    result = make()
    with pytest.raises(zeroadvisor.UsageError) as raised:
        result.report("markdown")
    message = str(raised.value)
    assert isinstance(raised.value, zeroadvisor.EXPECTED_ERRORS) and "\n" not in message
    assert f"format must be one of {formats} for a" in message
    assert "got 'markdown' (markdown renders a check)" in message
    for fmt in formats.split(", "):
        assert isinstance(result.report(fmt), str)  # each format it names renders


@pytest.mark.parametrize("fmt", [["json"], 3, None])
def test_a_format_that_is_no_string_is_the_documented_error(fmt):
    with pytest.raises(zeroadvisor.UsageError, match="format must be one of"):
        zeroadvisor.lint(config={"train_batch_size": 8}).report(fmt)


def test_check_and_estimate_read_the_trainer_s_files_as_the_command_line_does(tmp_path):
    """training_args= and launch= are --training-args and --launch: the same report as the command's, for the file
    and for the command given as a string or as its words; a value of another type is a UsageError."""
    model = str(REPO / "sample_configs" / "models" / "llama-2-7b" / "config.json")
    config = str(REPO / "sample_configs" / "hf_trainer_auto.json")
    dpo = str(REPO / "sample_configs" / "trainers" / "dpo.yaml")
    common = {"model": model, "gpus": 8, "gpu": "A100-SXM4-80GB", "cpu_memory": "1TB", "trainer": "dpo"}
    report = zeroadvisor.check(config, training_args=dpo, **common)
    command = cli_process("check", config, "--model", model, "--gpus", "8", "--gpu", "A100-SXM4-80GB",
                          "--cpu-memory", "1TB", "--trainer", "dpo", "--training-args", dpo, "--format", "json")
    assert json.loads(report.report("json")) == json.loads(command.stdout)
    assert zeroadvisor.estimate(config, training_args=dpo, **common).verdict == report.verdict
    words = ["deepspeed", "--num_gpus", "8", "train.py", "--deepspeed", config, "--per_device_train_batch_size", "2",
             "--bf16", "--gradient_checkpointing"]
    by_words = zeroadvisor.check(config, model=model, gpu="A100-SXM4-80GB", seq_len=2048, launch=words)
    by_line = zeroadvisor.check(config, model=model, gpu="A100-SXM4-80GB", seq_len=2048, launch=" ".join(words))
    assert json.loads(by_words.report("json")) == json.loads(by_line.report("json"))
    assert by_words.result.estimate.settings.micro_batch == 2  # the launch command's, filled into "auto"
    for bad in ({"launch": 3}, {"launch": ["deepspeed", 8]}, {"training_args": 3}):
        with pytest.raises(UsageError, match=r"launch|training_args"):
            zeroadvisor.check(config, model=model, gpus=8, gpu="A100-SXM4-80GB", **bad)

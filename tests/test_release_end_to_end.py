"""The DeepSpeed release decides, end to end: a pin beside the config or a flag picks the release, lint reports
what that release rejects or ignores, and the estimate reads that release's defaults (issue 21's "Done when").

The releases' own verdicts are tests/oracle/test_release_oracle.py; here the knowledge committed in
zeroadvisor/schemas/ds_releases.json is exercised through the command line and the Python API.
"""

from __future__ import annotations

import json

import pytest

import zeroadvisor
from cli_run import cli  # noqa: F401 - the fixture
from zeroadvisor.deepspeed import releases
from zeroadvisor.inputs import release as choice
from zeroadvisor.memory.phases import FLAT_COPY_KEY
from zeroadvisor.vocab import Phase, Resource

OFFLOAD = {"train_micro_batch_size_per_gpu": 1, "bf16": {"enabled": True},
           "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}  # no pin_memory
NEWER_KEYS = {"train_batch_size": 8, "torch_autocast": {"enabled": True},
              "zero_optimization": {"stage": 3, "stage3_module_granularity_threshold": 0}}


@pytest.fixture
def project(tmp_path):
    """A repository (a .git folder bounds the pin search) holding one config; pins are written per test."""
    (tmp_path / ".git").mkdir()
    choice._pin_choice.cache_clear()  # pins are cached per folder within a run
    yield tmp_path
    choice._pin_choice.cache_clear()


def _write(folder, config, name="ds_config.json"):
    path = folder / name
    path.write_text(json.dumps(config, indent=2) + "\n")
    return path


def _pinned_terms(result):
    return [t for t in result.configured.terms if "(pinned)" in t.what]


def test_pin_memory_default_reaches_the_estimate():
    """offload pin_memory defaults to true from 0.19.5 (runtime/zero/offload_config.py): the optimizer partition
    on the host is pinned under 0.19.5, pageable under 0.19.3, and the pinned rounding term exists only then."""
    kwargs = {"params": "1B", "gpus": 8, "gpu": "A100-SXM4-80GB"}
    old = zeroadvisor.estimate(OFFLOAD, deepspeed_version="0.19.3", **kwargs)
    new = zeroadvisor.estimate(OFFLOAD, deepspeed_version="0.19.5", **kwargs)
    assert not _pinned_terms(old) and not any(t.key.startswith("pinned_rounding") for t in old.configured.terms)
    assert _pinned_terms(new) and any(t.key.startswith("pinned_rounding") for t in new.configured.terms)
    host = {r: sum(t.nbytes for t in res.configured.terms if t.device == "cpu") for r, res in (("old", old),
                                                                                              ("new", new))}
    assert host["new"] > host["old"]  # pinned buffers are rounded up to a power of two by torch's host allocator
    # an explicit pin_memory wins over either release's default
    given = {**OFFLOAD, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}
    assert _pinned_terms(zeroadvisor.estimate(given, deepspeed_version="0.19.3", **kwargs))


def test_requirements_pin_decides_the_estimate(project, cli):
    config = _write(project, OFFLOAD)
    outputs = {}
    for version in ("0.19.3", "0.19.5"):
        (project / "requirements.txt").write_text(f"torch\ndeepspeed=={version}\n")
        choice._pin_choice.cache_clear()
        done = cli("estimate", str(config), "--params", "1B", "--gpus", "8", "--gpu", "A100-SXM4-80GB",
                   "--explain")
        assert done.returncode == 0, done.stderr
        outputs[version] = done.stdout
        assert f"read as DeepSpeed {version} (deepspeed=={version}" in " ".join(done.stdout.split())
    assert "(pinned)" in outputs["0.19.5"] and "(pinned)" not in outputs["0.19.3"]


def test_assumed_release_is_an_assumed_input_where_its_default_counts(project, monkeypatch):
    monkeypatch.setattr(choice, "installed_release", lambda: None)
    config = _write(project, OFFLOAD)
    result = zeroadvisor.estimate(str(config), params="1B", gpus=8, gpu="A100-SXM4-80GB")
    assumed = {a.name: a for a in result.estimate.assumed}
    assert assumed["deepspeed_version"].value == releases.latest()
    assert assumed["deepspeed_version"].pointer == "/zero_optimization/offload_optimizer/pin_memory"
    (project / "requirements.txt").write_text("deepspeed==0.19.5\n")
    choice._pin_choice.cache_clear()
    pinned = zeroadvisor.estimate(str(config), params="1B", gpus=8, gpu="A100-SXM4-80GB")
    assert "deepspeed_version" not in {a.name for a in pinned.estimate.assumed}
    # without an offload no default of the release moves the numbers: nothing is said to be assumed
    plain = _write(project, {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}, "plain.json")
    (project / "requirements.txt").unlink()
    choice._pin_choice.cache_clear()
    result = zeroadvisor.estimate(str(plain), params="1B", gpus=8, gpu="A100-SXM4-80GB")
    assert "deepspeed_version" not in {a.name for a in result.estimate.assumed}


def _load_gpu(result):
    return result.configured.phases[Phase.LOAD].gpu


def test_stage12_flatten_follows_the_release():
    """stage_1_and_2.py flattens the bit16 parameters on the host up to 0.18.9 ('create flat buffer in CPU') and
    beside them on the GPU from 0.19.0 where it has room (flatten_on_accelerator): the load's GPU peak is one copy
    of the 16-bit model under 0.18.9 and two under 0.19.0."""
    kwargs = {"params": "8B", "gpus": 8, "gpu": "A100-SXM4-80GB"}
    old = zeroadvisor.estimate(OFFLOAD, deepspeed_version="0.18.9", **kwargs)
    new = zeroadvisor.estimate(OFFLOAD, deepspeed_version="0.19.0", **kwargs)
    two_bytes = 2 * 8 * 10**9
    assert not [t for t in old.configured.terms if t.key == FLAT_COPY_KEY and t.device == Resource.GPU]
    assert [t for t in new.configured.terms if t.key == FLAT_COPY_KEY and t.device == Resource.GPU]
    assert two_bytes <= _load_gpu(old) < 1.5 * two_bytes
    assert 2 * two_bytes <= _load_gpu(new) < 2.5 * two_bytes
    assert new.configured.binding_phase == Phase.LOAD and old.configured.binding_phase == Phase.TRAIN
    assert any("create flat buffer in CPU" in note for note in old.configured.notes)


def test_assumed_release_is_said_where_the_flatten_sets_the_peak(project, monkeypatch):
    monkeypatch.setattr(choice, "installed_release", lambda: None)
    config = _write(project, {**OFFLOAD, "zero_optimization": {"stage": 2, "offload_optimizer": {
        "device": "cpu", "pin_memory": True}}})  # pin_memory written: only the flatten depends on the release
    result = zeroadvisor.estimate(str(config), params="8B", gpus=8, gpu="A100-SXM4-80GB")
    assumed = {a.name: a for a in result.estimate.assumed}
    assert "flattened beside them on the GPU" in assumed["deepspeed_version"].effect
    # without the offload the optimizer's states on the GPU make the step the peak: the release moves nothing
    plain = _write(project, {**OFFLOAD, "zero_optimization": {"stage": 2}}, "plain.json")
    trained = zeroadvisor.estimate(str(plain), params="8B", gpus=8, gpu="A100-SXM4-80GB")
    assert trained.estimate.configured.binding_phase == Phase.TRAIN
    assert "deepspeed_version" not in {a.name for a in trained.estimate.assumed}


def test_requirements_pin_decides_lint(project, cli):
    config = _write(project, NEWER_KEYS)
    (project / "requirements.txt").write_text("# training\ndeepspeed==0.14.5  # LTS\n")
    done = cli("lint", str(config))
    assert done.returncode == 1
    assert "ZA101" in done.stdout and "DeepSpeed 0.14.5" in done.stdout and "added in 0.16" in done.stdout
    assert "ZA103" in done.stdout and "torch_autocast" in done.stdout
    assert "requirements.txt:2" in done.stderr  # where the release came from, said once
    # the flag overrides the pin
    assert cli("lint", str(config), "--deepspeed-version", "0.19.8").returncode == 0


def test_pyproject_range_is_checked_against_every_line_in_it(project, cli):
    config = _write(project, NEWER_KEYS)
    (project / "pyproject.toml").write_text('[project]\nname = "train"\nversion = "1"\n'
                                            'dependencies = ["torch", "deepspeed>=0.10.0,<=0.16.9"]\n')
    done = cli("lint", str(config), "--format", "json")
    assert done.returncode == 1
    findings = json.loads(done.stdout)["findings"]
    granularity = [f for f in findings if f["code"] == "ZA101"]
    assert granularity and all(f["severity"] == "error" for f in granularity)
    assert "DeepSpeed 0.10-0.15" in granularity[0]["message"]  # 0.16 knows the key: not among the releases named


def test_no_pin_reads_the_latest(project, cli, monkeypatch):
    monkeypatch.setattr(choice, "installed_release", lambda: None)
    config = _write(project, NEWER_KEYS)
    done = cli("lint", str(config))
    assert done.returncode == 0, done.stdout
    latest = releases.latest()
    assert f"assumed the latest, {latest}" in done.stderr


@pytest.mark.parametrize("bad", ["0.8", "banana", ">=0.30", "0.19.x"])
def test_bad_version_is_a_one_line_usage_error(project, cli, bad):
    config = _write(project, NEWER_KEYS)
    done = cli("lint", str(config), "--deepspeed-version", bad)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--deepspeed-version" in lines[0] and "Traceback" not in done.stderr


def test_unusable_pin_is_a_one_line_usage_error(project, cli):
    config = _write(project, NEWER_KEYS)
    (project / "requirements.txt").write_text("deepspeed>=0.30\n")
    done = cli("lint", str(config))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "requirements.txt:1" in lines[0] and "--deepspeed-version" in lines[0]


@pytest.mark.parametrize(("config", "code", "rejected_from"), [
    ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 0, "loss_scale_window": 0}}, "ZA504", "0.19.3"),
    ({"train_batch_size": 8, "fp16": {"enabled": True, "loss_scale": 0, "min_loss_scale": 0}}, "ZA504", "0.19.3"),
    ({"train_batch_size": 8, "gradient_allreduce_op": "sum", "zero_optimization": {"stage": 3}}, "ZA904", "0.19.6"),
    ({"train_batch_size": 8, "managed_gradient_accumulation": False,
      "zero_optimization": {"stage": 1, "overlap_comm": True}}, "ZA404", "0.19.4"),
])
def test_checks_new_in_a_release_apply_from_it(config, code, rejected_from):
    """What 0.19.8 rejects and 0.19.2 (or 0.19.5) accepts: an error from the release that added the check."""
    known = releases.known()
    for version in known[known.index("0.19.0"):]:
        codes = {f.code for f in zeroadvisor.lint(config=config, deepspeed_version=version).findings
                 if f.severity == "error"}
        expected = tuple(int(x) for x in version.split(".")) >= tuple(int(x) for x in rejected_from.split("."))
        assert (code in codes) == expected, version


ZENFLOW = {"train_batch_size": 8, "zero_optimization": {"stage": 2, "zenflow": {"topk_ratio": 0.05}}}


def test_a_key_added_in_a_patch_release_is_refused_before_it(project, cli):
    """ZenFlow came in 0.17.5 (runtime/zero/config.py); 0.17.0-0.17.4 forbid unknown zero_optimization keys."""
    config = _write(project, ZENFLOW)
    done = cli("lint", str(config), "--deepspeed-version", "0.17.2")
    assert done.returncode == 1
    assert "ZA101" in done.stdout and "DeepSpeed 0.17.2 does not have 'zenflow'" in done.stdout
    assert "added in 0.17.5" in done.stdout
    assert cli("lint", str(config), "--deepspeed-version", "0.17.5").returncode == 0
    # a range names the patch releases that refuse it, compactly
    ranged = cli("lint", str(config), "--deepspeed-version", ">=0.17.0,<0.18")
    assert ranged.returncode == 1 and "DeepSpeed 0.17.0-0.17.4 does not have 'zenflow'" in ranged.stdout


def test_compile_is_ignored_by_releases_without_a_compile_config(project, cli):
    """0.14.4-0.16.5 have no compile configuration (0.13.2-0.14.3 had one, 0.16.6 brought it back): runtime/config.py
    reads the top level with dict.get, so the section is silently ignored, which lint says (ZA103)."""
    config = _write(project, {"train_batch_size": 8, "compile": {"deepcompile": True}})
    done = cli("lint", str(config), "--deepspeed-version", "0.14.5", "--format", "json")
    found = [f for f in json.loads(done.stdout)["findings"] if f["pointer"] == "/compile"]
    assert [f["code"] for f in found] == ["ZA103"], found
    assert "ignores" in found[0]["message"]
    for reading in ("0.14.3", "0.16.6"):
        later = cli("lint", str(config), "--deepspeed-version", reading, "--format", "json")
        assert not [f for f in json.loads(later.stdout)["findings"] if f["pointer"] == "/compile"], reading


def test_a_patch_pin_reads_that_patch_release(project, cli):
    (project / "requirements.txt").write_text("deepspeed==0.16.3\n")
    config = _write(project, ZENFLOW)
    found = choice.choose_release(flag=None, config_path=str(config))
    assert (found.origin, found.releases, found.notes) == ("pin", ("0.16.3",), ())
    assert releases.reads_as("0.16.3") == "0.16.3"  # its configuration code differs from 0.16.2's and 0.16.4's
    done = cli("lint", str(config))
    assert "DeepSpeed 0.16.3 does not have 'zenflow'" in done.stdout


MUON = {"train_batch_size": 8, "optimizer": {"type": "Muon", "params": {"lr": 0.02}}}


@pytest.mark.parametrize(("zero", "refusing"), [
    # runtime/engine.py asserts stage <= 2 (0.17.6-0.18.8); stage3.py refuses reduce_scatter (0.18.9+, default true)
    ({"stage": 3}, ("0.17.6", "0.19.8")),
    ({"stage": 3, "reduce_scatter": False}, ("0.17.6", "0.18.8")),
    # runtime/zero/stage_1_and_2.py: reduce_scatter with optimizer offload (0.19.3-0.19.7)
    ({"stage": 2, "offload_optimizer": {"device": "cpu"}}, ("0.19.3", "0.19.7")),
    ({"stage": 2}, None),
])
def test_muon_refusals_follow_each_release(zero, refusing):
    config = {**MUON, "zero_optimization": zero}
    for version in releases.known()[releases.known().index("0.17.0"):]:
        codes = {f.code for f in zeroadvisor.lint(config=config, deepspeed_version=version).findings
                 if f.severity == "error"}
        key = releases.version_key(version)
        expected = refusing is not None and releases.version_key(refusing[0]) <= key <= releases.version_key(
            refusing[1])
        assert ("ZA709" in codes) == expected, version


def test_older_releases_offload_step_and_boundary_are_said_where_the_release_is_assumed(project, monkeypatch):
    """Stage 1/2 with the optimizer offloaded: 0.14.1-0.16.9 move the stepped fp32 partition to the GPU and
    0.13.3-0.19.5 test the largest gradient for overflow elementwise (memory/ds_changes.py); assumed the latest
    release, the estimate says both, and a pin of such a release counts them."""
    monkeypatch.setattr(choice, "installed_release", lambda: None)
    config = _write(project, {**OFFLOAD, "zero_optimization": {"stage": 2, "offload_optimizer": {
        "device": "cpu", "pin_memory": True}}})
    result = zeroadvisor.estimate(str(config), params="8B", gpus=8, gpu="A100-SXM4-80GB")
    effect = {a.name: a for a in result.estimate.assumed}["deepspeed_version"].effect
    assert "DeepSpeed 0.14.1 to 0.16.9 allocate 4 B per parameter / GPUs more on the GPU" in effect
    (project / "requirements.txt").write_text("deepspeed==0.16.9\n")
    choice._pin_choice.cache_clear()
    pinned = zeroadvisor.estimate(str(config), params="8B", gpus=8, gpu="A100-SXM4-80GB")
    assert "deepspeed_version" not in {a.name for a in pinned.estimate.assumed}
    (copy,) = [t for t in pinned.configured.terms if t.key == "offload_step_fp32_copy"]
    activations = sum(t.nbytes for t in pinned.configured.terms if t.key == "activations" and t.phase == Phase.TRAIN)
    assert copy.nbytes == 4 * 8 * 10**9 // 8 - activations  # the 8B parameters' fp32 partition on each of 8

"""DeepSpeed 0.19.8 judges the per-rule fixtures (tests/rules/): what an error rule flags,
DeepSpeed rejects, at the key the rule names; what the linter passes, DeepSpeed accepts; and
every fix the linter offers yields a config DeepSpeed accepts, on which the rule is silent.

The verdicts come from the corpus oracle (test_corpus_oracle.deepspeed_verdict: DeepSpeedConfig
plus the engine's optimizer and scheduler construction), run as the case's options say: the
world size from --gpus, "auto" filled only by the integration chosen, and no micro batch
injected (a config without a batch size fails as it does under DeepSpeed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import load_script
from test_corpus_oracle import _BATCH_POINTERS, Judging, deepspeed, deepspeed_verdict, pointer_related  # noqa: F401 - the fixture
from zeroadvisor.advisor import registry
from zeroadvisor.config import merge_patch
from zeroadvisor.lint.findings import Severity
from zeroadvisor.rules.accelerate import CODES as ACCELERATE_CODES

pytestmark = pytest.mark.oracle

fixtures = load_script("tools/update_rule_fixtures.py", "update_rule_fixtures")

# Error rules whose findings DeepSpeed does not turn into a rejection the oracle can see. The
# test asserts that DeepSpeed really accepts such a case (completed with a micro batch), so an
# exemption cannot outlive its reason.
SILENT_IN_DEEPSPEED = {
    "ZA310": "transformers raises the mismatch (HfTrainerDeepSpeedConfig.trainer_config_finalize), not DeepSpeed; "
             "tests/oracle/test_hf_fill_oracle.py proves each case against transformers",
    "ZA102": "DeepSpeed reads the top level and dict.get sections without checking keys: the misspelled key is "
             "dropped and the default used (the linter errs on purpose: the job runs, wrongly)",
    "ZA602": "the NVMe swapper is built by the engine with a model (partitioned_param_swapper.py), which the "
             "oracle does not replay; DeepSpeedConfig accepts a missing nvme_path",
    "ZA901": "PipelineEngine.__init__ asserts the stage (runtime/pipe/engine.py) only when deepspeed.initialize gets "
             "a PipelineModule; DeepSpeedConfig stores the pipeline section (get_pipeline_config) without looking",
    "ZA903": "the parallel groups are built by deepspeed.initialize and the engine (groups._init_tp_mesh_device, "
             "_create_zero_param_parallel_group, parallel_state_sp.initialize_sequence_parallel, the device mesh), "
             "which the oracle does not replay; DeepSpeedConfig accepts any degree",
}
# Rules whose cases the oracle cannot replay at all, and where they are judged instead; the cases are checked to
# still be out of its reach (test_not_replayed_cases_are_still_out_of_reach), so an entry cannot outlive its reason.
NOT_REPLAYED = {
    "ZA709": "Muon is built by deepspeed.initialize for a model whose parameters carry use_muon, and the refusals "
             "come from the engine and the ZeRO optimizers' constructors; the oracle raises OracleBug for Muon. "
             "Judged against each release's source instead: tools/ds_release_sources.py LAUNCH_CHECKS, "
             "tests/test_release_end_to_end.py test_muon_refusals_follow_each_release",
}
# Single cases where the oracle's verdict differs from the linter for a stated reason: the verdict
# the oracle gives is asserted (accepted: True/False), so the entry fails once the reason is gone.
KNOWN_DISAGREEMENTS = {
    ("ZA503", "fp16-master-weights-without-cpu-offload"): (True,
        ("the CPU-offload requirement of fp16_master_weights_and_grads is checked when the ZeRO optimizer is "
         "built (stage_1_and_2.py), which the oracle does not replay")),
    ("ZA301", "gradient-clipping-plain-deepspeed"): (True,
        "gradient_clipping is first used at the first optimizer step (engine clip_grad_norm_), not replayed"),
    ("ZA301", "optimizer-lr-plain-deepspeed"): (True,
        ("the oracle binds the optimizer's signature but does not construct it; torch's AdamW rejects lr='auto' "
         "in its constructor")),
    ("ZA401", "sequence-parallel-divides-world"): (False,
        ("DeepSpeedConfig divides the world size by sequence_parallel_size only when given a dict "
         "(`'sequence_parallel_size' in config` on a path string tests the path's characters, config.py "
         "__init__); the HF Trainer and Accelerate pass a dict, the oracle and deepspeed.initialize(config=path) "
         "a path")),
}


def _judging(case: dict, inject_batch: bool = False) -> Judging:
    options = case.get("options") or {}
    return Judging(world_size=options.get("gpus"), fill=options.get("integration", "any"), inject_batch=inject_batch)


def _write(case: dict, folder: Path, text: str | None = None, data=None) -> Path:
    if data is not None:
        path = folder / "fixed.json"
        path.write_text(json.dumps(data), "utf-8")
        return path
    path = folder / fixtures.doc_name(case)
    path.write_text(text if text is not None else case["config"], "utf-8")
    return path


def _severity(code: str) -> Severity:
    return registry.BY_CODE[code].severity


def _errors(findings) -> list:
    return [f for f in findings if f.severity is Severity.ERROR]


def _all_cases():
    for path in fixtures.fixture_files():
        data = fixtures.load(path)
        for case in data["cases"]:
            yield data["rule"], case, f"{path.stem}::{case['name']}"


def _judged(code: str, case: dict) -> bool:
    """Cases DeepSpeed can judge: lint cases (advice cases only for their fixes) the oracle can fill.
    The Accelerate rules' cases are Accelerate configs, judged by test_accelerate_oracle.py."""
    rule = registry.BY_CODE[code]
    return "xfail" not in case and not rule.needs_advice and (case.get("options") or {}).get(
        "integration", "any") != "accelerate" and code not in ACCELERATE_CODES and not _is_accelerate(case) \
        and _read_as_the_venvs_release(case) and code not in NOT_REPLAYED


def _read_as_the_venvs_release(case: dict) -> bool:
    """Whether the case is linted as the installed DeepSpeed (the latest) reads it, among others: a case read as
    older releases only (options deepspeed_version) is theirs to judge (tests/oracle/test_release_oracle.py)."""
    from zeroadvisor.deepspeed import releases

    request = (case.get("options") or {}).get("deepspeed_version")
    return request is None or releases.latest() in releases.resolve(str(request)).releases


def _is_accelerate(case: dict) -> bool:
    """An Accelerate launcher config (linted as Accelerate reads it, judged by test_accelerate_oracle.py)."""
    from zeroadvisor.config.accelerate import is_accelerate_config
    from zeroadvisor.config.source import ParseError

    try:
        return is_accelerate_config(fixtures.parse_case(case).data)
    except ParseError:
        return False


_VERDICT_CASES = [pytest.param(code, case, id=ident) for code, case, ident in _all_cases() if _judged(code, case)]
_FIX_CASES = [pytest.param(code, case, id=ident) for code, case, ident in _all_cases()
              if "xfail" not in case and code not in NOT_REPLAYED and any("fix" in f for f in case.get("expected", []))]
_NOT_REPLAYED_CASES = [pytest.param(code, case, id=ident) for code, case, ident in _all_cases()
                       if code in NOT_REPLAYED and _read_as_the_venvs_release(case)
                       and any(f["code"] == code for f in case.get("expected", []))]


@pytest.mark.parametrize("code,case", _NOT_REPLAYED_CASES)
def test_not_replayed_cases_are_still_out_of_reach(deepspeed, tmp_path, code, case):
    verdict = deepspeed_verdict(_write(case, tmp_path), _judging(case, inject_batch=True))
    assert not verdict.accepted and str(verdict.error).startswith("OracleBug"), (NOT_REPLAYED[code], verdict)


def _silent(finding, case: dict) -> bool:
    return finding.code in SILENT_IN_DEEPSPEED


@pytest.mark.parametrize("code,case", _VERDICT_CASES)
def test_deepspeed_agrees_with_the_fixture(deepspeed, tmp_path, code, case):
    """Error findings: DeepSpeed rejects, at a key an error names. No error: DeepSpeed accepts.

    Rejections are judged as DeepSpeed runs the file (no batch injected). Acceptance is judged as
    the corpus oracle does, with a micro batch injected into a file that has none: such partial
    templates are a warning (no-batch-size), and then DeepSpeed must reject only for the batch.
    """
    findings = fixtures.run_case(case)
    path = _write(case, tmp_path)
    as_written = deepspeed_verdict(path, _judging(case))
    completed = deepspeed_verdict(path, _judging(case, inject_batch=True))
    known = KNOWN_DISAGREEMENTS.get((code, case["name"]))
    if known is not None:
        accepted, reason = known
        assert as_written.accepted is accepted, f"the known disagreement is gone ({reason}): {as_written}"
        return
    loud = [f for f in _errors(findings) if not _silent(f, case)]
    if loud:
        assert not as_written.accepted, \
            f"the linter reports {[(f.code, f.pointer) for f in loud]}; DeepSpeed accepts {as_written.notes}"
        assert any(pointer_related(f.pointer, p) for f in loud for p in as_written.pointers), (
            f"DeepSpeed rejects at {list(as_written.pointers)} ({as_written.error}); the linter's errors are at "
            f"{[(f.code, f.pointer) for f in loud]}")
        return
    if not as_written.accepted and set(as_written.pointers) == set(_BATCH_POINTERS):
        assert any(f.code in ("ZA403", "ZA004", "ZA006") for f in findings), \
            f"DeepSpeed misses a batch size ({as_written.error}) and the linter says nothing"
    assert completed.accepted, (f"the linter reports no error; DeepSpeed rejects it: {completed.error} "
                                f"at {list(completed.pointers)} {completed.notes}")


def _actions_done(options: dict | None, findings) -> dict | None:
    """The case's options once the fixes' cluster actions are done (more GPUs, host RAM or NVMe per node:
    advisor/change.py Action "cluster"); the other actions are in the training script or the machine."""
    if options is None:
        return None
    grown = dict(options)
    for finding in findings:
        for action in finding.actions:
            if action.kind == "cluster":
                for key in ("gpus", "gpus_per_node"):
                    if key in action.values:
                        grown[key] = action.values[key]
                for key in ("cpu_memory", "nvme"):
                    if key in action.values:
                        grown[key] = f"{action.values[key]}B"  # bytes, as the size flags read them
    return grown


@pytest.mark.parametrize("code,case", _FIX_CASES)
def test_fix_makes_deepspeed_accept(deepspeed, tmp_path, code, case):
    """Apply every fix of the rule (RFC 7396 on the parsed data): an error rule no longer fires, no
    new error appears, and when no error is left DeepSpeed accepts the result."""
    before = fixtures.run_case(case)
    findings = [f for f in before if f.code == code]
    rule = registry.BY_CODE[code]
    assert findings and (rule.severity is not Severity.ERROR or all(f.fix is not None for f in findings))
    fixed = fixtures.parse_case(case).data
    for finding in findings:
        if finding.fix is not None:
            fixed = merge_patch.apply(fixed, finding.fix)
    done = _actions_done(case.get("options"), findings)
    after = fixtures.run_case(dict(case, config=json.dumps(fixed, indent=2), format="json", options=done))
    if rule.severity is Severity.ERROR:
        assert not [f for f in after if f.code == code], f"{code} still fires after its fix: {after}"
    new = {(f.code, f.pointer) for f in _errors(after)} - {(f.code, f.pointer) for f in _errors(before)}
    assert not new, f"the fix brings new errors: {new}"
    if _errors(after):
        return  # the case keeps another error on purpose (asserted by test_deepspeed_agrees_with_the_fixture)
    judging = Judging(world_size=(done or {}).get("gpus"), fill=_judging(case).fill,
                      inject_batch=True)
    verdict = deepspeed_verdict(_write(case, tmp_path, data=fixed), judging)
    assert verdict.accepted, f"DeepSpeed rejects the fixed config {fixed}: {verdict.error} at {list(verdict.pointers)}"


def test_every_error_rule_is_judged():
    """Each lint error rule has a firing case DeepSpeed judges (or one proven out of the oracle's reach:
    NOT_REPLAYED), and each rule with a fix a checked fix."""
    judged = {p.values[0] for p in [*_VERDICT_CASES, *_NOT_REPLAYED_CASES] if p.values[1].get("expected")}
    errors = {r.code for r in registry.LINT if r.severity is Severity.ERROR} - ACCELERATE_CODES
    assert errors - judged == set(), f"error rules without a firing case DeepSpeed judges: {sorted(errors - judged)}"
    assert {p.values[0] for p in _FIX_CASES}, "no fixture case carries a fix"

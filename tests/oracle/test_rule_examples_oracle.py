"""Each lint rule's failing example is a problem DeepSpeed itself detects (it raises, at the
key the linter names), and each passing example is one DeepSpeed accepts.

The verdict comes from DeepSpeed 0.19's own DeepSpeedConfig plus the engine's optimizer and
scheduler construction, via the corpus oracle (test_corpus_oracle.check_file).
"""

from __future__ import annotations

import pytest

from test_corpus_oracle import check_file, deepspeed, deepspeed_verdict, linter_errors  # noqa: F401 - the fixture
from zeroadvisor.advisor import registry
from zeroadvisor.lint.findings import Severity
from zeroadvisor.rules.accelerate import CODES as ACCELERATE_CODES

# Errors the linter raises on purpose where DeepSpeed stays silent: the misspelled key is
# dropped (zero_optimisation runs at stage 0). The test asserts DeepSpeed really accepts it.
SILENT_IN_DEEPSPEED = {"misspelled-key"}
# Engine-time failures the oracle does not replay (building the NVMe swapper needs the
# aio op and a model; PipelineEngine's stage assertion needs a PipelineModule; the parallel
# groups are built by deepspeed.initialize): the config itself passes DeepSpeedConfig.
NOT_REPLAYED = {"nvme-without-path", "pipeline-with-zero-2-3", "parallel-degree-does-not-divide"}

# The Accelerate rules' examples are Accelerate launcher configs: accelerate, not DeepSpeed, rejects them, and
# tests/oracle/test_accelerate_oracle.py judges them with accelerate's own launch code.
# Rules whose examples the oracle cannot replay at all (it raises OracleBug for Muon): the reason, where they are
# judged instead and the check that they are still out of its reach are test_rule_fixes_oracle.py NOT_REPLAYED's.
OUT_OF_REACH = {"ZA709"}
CASES = [(rule, i, ex) for rule in registry.LINT
         if rule.severity is Severity.ERROR and rule.code not in ACCELERATE_CODES and rule.code not in OUT_OF_REACH
         for i, ex in enumerate(rule.examples) if not ex.options and rule.needs_data]


@pytest.mark.oracle
@pytest.mark.parametrize("rule,index,example", CASES, ids=[f"{r.code}-{r.name}-{i}" for r, i, _ in CASES])
def test_example_against_deepspeed(deepspeed, tmp_path, rule, index, example):
    path = tmp_path / example.name  # a YAML example is judged as YAML
    path.write_text(example.config)
    verdict = deepspeed_verdict(path)
    if rule.name in SILENT_IN_DEEPSPEED | NOT_REPLAYED:
        assert verdict.accepted, f"DeepSpeed now rejects it: {verdict.error}"
        fired = [f for f in linter_errors(path) if f.name == rule.name]
        assert bool(fired) == example.fails
        return
    if example.fails:
        assert not verdict.accepted, f"{rule.name}: DeepSpeed accepts {example.config}"
    problem = check_file(path)
    assert problem is None, problem
    if example.fails:
        assert any(f.name == rule.name for f in linter_errors(path))

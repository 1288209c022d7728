"""A non-finite number that reaches a rule (a reader that lets one through) never lands in a fix:
JSON has no NaN/Infinity, so the fix would not be valid JSON (issue 7 defect 2). Found by benchmarks/fuzz.py."""

from __future__ import annotations

import math

import pytest

from zeroadvisor.config.source import parse
from zeroadvisor.rules.linter import lint_document
from zeroadvisor.rules.optimizer import MAX_GRAD_NORM_IN_OPTIMIZER

TEXT = '{"train_batch_size": 8, "optimizer": {"type": "Adam", "params": {"lr": 0.001, "max_grad_norm": 1.0}}}'


def _fix_for(max_grad_norm):
    doc = parse(TEXT, "ds.json")
    doc.data["optimizer"]["params"]["max_grad_norm"] = max_grad_norm
    [finding] = lint_document(doc, rules=[MAX_GRAD_NORM_IN_OPTIMIZER])
    return finding.fix


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_max_grad_norm_is_deleted_not_copied(value):
    assert _fix_for(value) == {"optimizer": {"params": {"max_grad_norm": None}}}


def test_a_finite_max_grad_norm_moves_to_gradient_clipping():
    assert _fix_for(1.0) == {"optimizer": {"params": {"max_grad_norm": None}}, "gradient_clipping": 1.0}

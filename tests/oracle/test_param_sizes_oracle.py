"""ModelSpec.parameter_sizes (what the stage-3 persistence threshold selects from) against transformers.

For every config of test_param_counts_oracle.py, built on the meta device: the multiset of
``p.numel() for p in model.parameters()`` (tied tensors once) equals the (numel, count) pairs
spec_from_hf_config gives, so the persistent parameters (numel <= stage3_param_persistence_threshold)
are exact for every supported family.
"""

from __future__ import annotations

from collections import Counter

import pytest

pytestmark = pytest.mark.oracle

pytest.importorskip("torch")
pytest.importorskip("transformers")

import test_param_counts_oracle as COUNTS  # noqa: E402 - the configs and the meta-device builder
from zeroadvisor.model.hf import spec_from_hf_config  # noqa: E402


@pytest.mark.parametrize("name", sorted(COUNTS.CASES))
def test_parameter_sizes_match_transformers(name: str) -> None:
    config = COUNTS.CASES[name]
    spec = spec_from_hf_config(config)
    model = COUNTS._build(config)
    assert dict(spec.parameter_sizes) == dict(Counter(p.numel() for p in model.parameters()))

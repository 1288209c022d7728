"""The committed schema against the installed DeepSpeed (the oracle).

1. Regenerating ds_config.schema.json with tools/gen_schema.py from the installed DeepSpeed must give
   both committed copies (zeroadvisor/schemas/, schemas/) byte for byte (run ``python tools/gen_schema.py``
   after a deliberate change).
2. The hand-written configs of tests/test_schema_file.py get the same verdict from
   ``DeepSpeedConfig`` as from the schema, except the ones DeepSpeed only rejects at engine
   initialisation, which its config parser accepts.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import os
from types import ModuleType

import pytest

from conftest import load_script

os.environ.setdefault("DS_ACCELERATOR", "cpu")  # silence the accelerator warning on import
pytestmark = pytest.mark.oracle
deepspeed = pytest.importorskip("deepspeed")

HF_FILLED_TOP_LEVEL = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                       "gradient_clipping")

# INVALID cases of tests/test_schema_file.py that DeepSpeed accepts in DeepSpeedConfig and only
# rejects in deepspeed.initialize (runtime/engine.py, the optimizer/scheduler constructors).
ENGINE_TIME = {
    "nvme without path",
    "max_grad_norm in optimizer params",
    "unknown optimizer kwarg",
    "1-bit optimizer is gone",
    "lamb with a static loss scale",
    "torch name is case-sensitive",
    "unknown scheduler",
    "scheduler missing required",
    "scheduler without params",
    "non-positive warmup",
}


@pytest.fixture(scope="module")
def generator() -> ModuleType:
    return load_script("tools/gen_schema.py", "gen_schema")


@pytest.fixture(scope="module")
def cases() -> ModuleType:
    return load_script("tests/test_schema_file.py", "schema_file_cases")


def test_committed_schema_matches_the_generator(generator):
    if deepspeed.__version__ != generator.TARGET_DEEPSPEED:
        pytest.skip(f"schema is pinned to DeepSpeed {generator.TARGET_DEEPSPEED}, installed {deepspeed.__version__}")
    up_to_date, summary = generator.check()
    assert up_to_date, summary


def _deepspeed_verdict(config: dict) -> str | None:
    """None if DeepSpeedConfig accepts the config, else the exception it raises."""
    from deepspeed.runtime.config import DeepSpeedConfig

    config = copy.deepcopy(config)
    for key in HF_FILLED_TOP_LEVEL:
        if config.get(key) == "auto":  # filled by HF/Accelerate before DeepSpeed sees the file
            del config[key]
    if "train_batch_size" not in config and "train_micro_batch_size_per_gpu" not in config:
        config["train_micro_batch_size_per_gpu"] = 1
    logging.disable(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            DeepSpeedConfig(config)
    except Exception as err:  # the verdict is whatever DeepSpeed raises
        return f"{type(err).__name__}: {err}"
    finally:
        logging.disable(logging.NOTSET)
    return None


def test_schema_verdicts_match_deepspeedconfig(cases):
    disagreements = []
    for name, config in cases.VALID.items():
        verdict = _deepspeed_verdict(config)
        if verdict is not None:
            disagreements.append(f"valid in the schema, rejected by DeepSpeed: {name}: {verdict[:200]}")
    for name, (config, _) in cases.IGNORED_BY_DEEPSPEED.items():  # flagged for the editor only
        verdict = _deepspeed_verdict(config)
        if verdict is not None:
            disagreements.append(f"flagged as ignored by the schema, rejected by DeepSpeed: {name}: {verdict[:200]}")
    for name, (config, _) in cases.INVALID.items():
        verdict = _deepspeed_verdict(config)
        if name in ENGINE_TIME and verdict is not None:
            disagreements.append(f"expected DeepSpeedConfig to accept (engine-time error): {name}: {verdict[:200]}")
        if name not in ENGINE_TIME and verdict is None:
            disagreements.append(f"invalid in the schema, accepted by DeepSpeedConfig: {name}: {json.dumps(config)}")
    assert not disagreements, "\n".join(disagreements)

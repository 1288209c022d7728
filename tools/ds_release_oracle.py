#!/usr/bin/env python
"""Read configs with one installed DeepSpeed release's own parser and print its verdicts as JSON lines.

    PYTHONPATH=.venv/deepspeed-releases/0.14.5 python tools/ds_release_oracle.py a.json b.json

For each file: ``DeepSpeedConfig(path)`` (deepspeed/runtime/config.py) with no process group, so the
world size is 1, as the release's engine would read the file before building anything. One line per
file: {"file", "release", "accepted", "error"} where ``error`` is the exception's type and first line.
The releases come from tools/install_deepspeed_release.py; this script is the only place that imports
them (tests/oracle/test_release_oracle.py and benchmarks/releases.py run it in a subprocess).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
import warnings


def choose_accelerator() -> None:
    """DeepSpeed's CPU accelerator, as tools/gen_schema.py uses; releases before 0.10 built it only with
    intel_extension_for_pytorch installed (deepspeed/accelerator/real_accelerator.py). There the variable is
    left unset: detection falls back to the CUDA accelerator, which imports without a GPU and reads the config
    the same way (0.12's override branch does not even know "cuda": naming it recurses)."""
    import importlib.util

    spec = importlib.util.find_spec("deepspeed")
    source = ""
    if spec is not None and spec.submodule_search_locations:
        path = os.path.join(next(iter(spec.submodule_search_locations)), "accelerator", "real_accelerator.py")
        with contextlib.suppress(OSError), open(path, encoding="utf-8") as stream:
            source = stream.read()
    needs_ipex = "CPU_Accelerator requires intel_extension_for_pytorch" in source
    if needs_ipex:
        os.environ.pop("DS_ACCELERATOR", None)
    else:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")


def restore_elastic_names() -> None:
    """Releases before 0.14 import ``log`` and ``_get_socket_with_port`` from torch's elastic agent
    (deepspeed/elasticity/elastic_agent.py); torch 2.13 removed both. Neither is used by the config
    parser, so a logger and a stand-in let the import succeed without editing the installed release."""
    from torch.distributed.elastic.agent.server import api

    if not hasattr(api, "log"):
        api.log = logging.getLogger("torch.distributed.elastic.agent.server.api")  # type: ignore[attr-defined]
    if not hasattr(api, "_get_socket_with_port"):
        def _get_socket_with_port():  # type: ignore[no-untyped-def]
            raise RuntimeError("not available under torch 2.13 (zeroadvisor release oracle)")
        api._get_socket_with_port = _get_socket_with_port  # type: ignore[attr-defined]


def verdict(path: str, config_class: type) -> dict:
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config_class(path)
    except BaseException as err:
        if isinstance(err, KeyboardInterrupt):
            raise
        first = (str(err).strip().splitlines() or [""])[0]
        return {"accepted": False, "error": f"{type(err).__name__}: {first}"[:400]}
    return {"accepted": True, "error": None}


def main(paths: list[str]) -> int:
    choose_accelerator()
    restore_elastic_names()
    logging.disable(logging.CRITICAL)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import deepspeed
        from deepspeed.runtime.config import DeepSpeedConfig
    logging.disable(logging.CRITICAL)  # DeepSpeed's logger is set up on import
    release = deepspeed.__version__.split("+")[0]
    for path in paths:
        print(json.dumps({"file": path, "release": release, **verdict(path, DeepSpeedConfig)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

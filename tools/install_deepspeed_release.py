#!/usr/bin/env python
"""Install one or more DeepSpeed releases side by side, each in its own folder, for the release oracle.

    python tools/install_deepspeed_release.py 0.14.5 0.16.9 --into .venv/deepspeed-releases
    python tools/install_deepspeed_release.py --ci        the releases CI tests against (CI_RELEASES)

Each release goes to ``<into>/<version>`` with ``pip install --target --no-deps --no-build-isolation``
(DeepSpeed's setup.py imports torch; the venv's torch 2.13.0 CPU build is used, no op is compiled:
DS_BUILD_OPS=0). A release is imported by putting its folder first on PYTHONPATH
(tools/ds_release_oracle.py does that); everything else comes from the venv (torch, hjson, psutil, ...).

What the older releases need beside them, installed into the same folder so the venv stays as it is:
- releases before 0.14.4 need numpy < 2 (their code uses names numpy 2 removed, e.g. ``np.BUFSIZE``
  through ``torch.from_numpy`` users and ``np.bool8``): numpy 1.26.4;
- releases before 0.11.2 require ``pydantic<2.0.0`` and use the v1 API directly (0.11.2-0.14 go through
  ``deepspeed/pydantic_v1.py``, which finds ``pydantic.v1``): pydantic 1.10.26;
- releases before 0.14 import ``log`` and ``_get_socket_with_port`` from
  ``torch.distributed.elastic.agent.server.api`` (deepspeed/elasticity/elastic_agent.py), which
  torch 2.13 no longer has: tools/ds_release_oracle.py puts them back before DeepSpeed is imported
  (no installed file is edited).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import pathlib
import subprocess
import sys

# The releases .ci/run installs and tests/oracle/test_release_oracle.py reads them with: one per parser era,
# within CI's time budget (each costs about 35 s to install and 10 s to read the cases with):
# 0.13.5: pydantic 1 (truncated floats, "stage": "1" refused), fp16/bf16 read with dict.get ("auto" is true),
#         communication_data_type "bfp16", no ZeRO-3 granularity or offload ratio checks, numpy<2 and the
#         torch elastic shim; 0.16.9: pydantic 2, the newest release LLaMA-Factory allows, loose fp16/bf16;
# 0.19.5: strict fp16/bf16, dynamic loss-scale checks (0.19.3), pinned offload by default, before the
#         removals of 0.19.7 and the allreduce-sum check of 0.19.6 (the venv's 0.19.8 has both).
CI_RELEASES = ("0.13.5", "0.16.9", "0.19.5")
DEFAULT_INTO = pathlib.Path(__file__).resolve().parent.parent / ".venv" / "deepspeed-releases"

# (first release that does not need it, requirement installed beside the older ones)
COMPANIONS = (
    ((0, 14, 4), "numpy==1.26.4"),  # 0.14.1-0.14.3 still import numpy.BUFSIZE (autotuning/scheduler.py)
    ((0, 11, 2), "pydantic==1.10.26"),  # 0.11.0 and 0.11.1 still require pydantic<2 and use its v1 API
)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def install(version: str, into: pathlib.Path) -> pathlib.Path:
    target = into / version
    if (target / "deepspeed" / "__init__.py").exists():
        return target
    env = {**os.environ, "DS_BUILD_OPS": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target)]
    extra = [req for first, req in COMPANIONS if version_tuple(version) < first]
    if extra:
        subprocess.run([*pip, *extra], check=True, env=env)
    # setup.py imports deepspeed itself (its version and op builders), so the build sees the
    # companions first on the path, as the release's import will.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(target), env.get("PYTHONPATH"))))
    subprocess.run([*pip, "--upgrade", "--no-build-isolation", f"deepspeed=={version}"], check=True, env=env)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="*")
    parser.add_argument("--ci", action="store_true", help=f"install CI_RELEASES ({', '.join(CI_RELEASES)})")
    parser.add_argument("--into", type=pathlib.Path, default=DEFAULT_INTO)
    parser.add_argument("--jobs", type=int, default=2, help="releases built at once (each is one pip process)")
    args = parser.parse_args()
    versions = [*args.versions, *(CI_RELEASES if args.ci else ())]
    if not versions:
        parser.error("name the releases to install, or --ci")
    failed = []
    # each release goes to its own folder, so the pip processes never share a target; one that fails to
    # build is reported at the end and the others still install
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {version: pool.submit(install, version, args.into) for version in versions}
        for version, future in futures.items():
            try:
                print(future.result(), flush=True)
            except subprocess.CalledProcessError as err:
                failed.append(version)
                print(f"DeepSpeed {version}: pip exited with {err.returncode}", file=sys.stderr, flush=True)
    if failed:
        print(f"not installed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

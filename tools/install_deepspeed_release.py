#!/usr/bin/env python
"""Install one or more DeepSpeed releases side by side, each in its own folder, for the release oracle.

    python tools/install_deepspeed_release.py 0.14.5 0.16.9 --into .venv/deepspeed-releases

Each release goes to ``<into>/<version>`` with ``pip install --target --no-deps --no-build-isolation``
(DeepSpeed's setup.py imports torch; the venv's torch 2.13.0 CPU build is used, no op is compiled:
DS_BUILD_OPS=0). A release is imported by putting its folder first on PYTHONPATH
(tools/ds_release_oracle.py does that); everything else comes from the venv (torch, hjson, psutil, ...).

What the older releases need beside them, installed into the same folder so the venv stays as it is:
- releases before 0.14 need numpy < 2 (their code uses names numpy 2 removed, e.g. ``np.BUFSIZE``
  through ``torch.from_numpy`` users and ``np.bool8``): numpy 1.26.4;
- releases before 0.11 require ``pydantic<2.0.0`` and use the v1 API directly (0.11-0.14 go through
  ``deepspeed/pydantic_v1.py``, which finds ``pydantic.v1``): pydantic 1.10.26;
- releases before 0.14 import ``log`` and ``_get_socket_with_port`` from
  ``torch.distributed.elastic.agent.server.api`` (deepspeed/elasticity/elastic_agent.py), which
  torch 2.13 no longer has: tools/ds_release_oracle.py puts them back before DeepSpeed is imported
  (no installed file is edited).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import subprocess
import sys

# (first release that does not need it, requirement installed beside the older ones)
COMPANIONS = (
    ((0, 14), "numpy==1.26.4"),
    ((0, 11), "pydantic==1.10.26"),
)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def install(version: str, into: pathlib.Path) -> pathlib.Path:
    target = into / version
    if (target / "deepspeed" / "__init__.py").exists():
        return target
    env = {**os.environ, "DS_BUILD_OPS": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target)]
    extra = [req for first, req in COMPANIONS if version_tuple(version)[:2] < first]
    if extra:
        subprocess.run([*pip, *extra], check=True, env=env)
    # setup.py imports deepspeed itself (its version and op builders), so the build sees the
    # companions first on the path, as the release's import will.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(target), env.get("PYTHONPATH"))))
    subprocess.run([*pip, "--upgrade", "--no-build-isolation", f"deepspeed=={version}"], check=True, env=env)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("versions", nargs="+")
    parser.add_argument("--into", type=pathlib.Path, default=pathlib.Path(".venv/deepspeed-releases"))
    args = parser.parse_args()
    for version in args.versions:
        print(install(version, args.into))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

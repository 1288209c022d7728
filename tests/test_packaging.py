"""Packaging facts that a user relies on: the hook manifest, the console script, no heavy imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_pre_commit_hook_runs_a_real_command():
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "zeroadvisor" and hook["language"] == "python"
    program, command, *flags = hook["entry"].split()
    assert program == "zeroadvisor"
    result = subprocess.run([sys.executable, "-m", "zeroadvisor", command, *flags, "--help"], capture_output=True,
                            text=True)
    assert result.returncode == 0


def test_core_never_imports_torch_or_deepspeed(tmp_path):
    """lint, estimate and check must not pull torch/deepspeed/transformers (a CI linter stays light)."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    code = (
        "import sys\n"
        "from zeroadvisor.cli.app import app\n"
        "from typer.testing import CliRunner\n"
        f"r = CliRunner().invoke(app, ['lint', {str(config)!r}])\n"
        f"r2 = CliRunner().invoke(app, ['check', {str(config)!r}, '--params', '7B', '--gpus', '8', '--gpu', 'H100-SXM5-80GB'])\n"
        f"r3 = CliRunner().invoke(app, ['estimate', '--params', '7B', '--gpus', '8'])\n"
        "assert r.exit_code in (0, 1) and r2.exit_code in (0, 1) and r3.exit_code == 0, (r.output, r2.output)\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'deepspeed', 'transformers', "
        "'jsonschema'))\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]", result.stdout


def test_schemas_ship_as_package_data():
    from importlib import resources

    names = {p.name for p in resources.files("zeroadvisor.schemas").iterdir()}
    assert {"ds_config.schema.json", "model.schema.json"} <= names


def test_lint_starts_without_typer_or_the_memory_model(tmp_path):
    """Start-up (benchmarks/latency.py times it): plain `lint` needs neither the typer app (typer
    and pydantic are most of its start) nor the modules only check/estimate use."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    code = (
        "import sys\n"
        "from zeroadvisor.cli import run\n"
        f"assert run(['lint', '--format', 'json', '--fail-on', 'never', {str(config)!r}]) == 0\n"
        "heavy = ('typer', 'click', 'pydantic', 'yaml', 'jsonschema', 'zeroadvisor.memory', 'zeroadvisor.advisor',\n"
        "         'zeroadvisor.model.description', 'zeroadvisor.fix.apply', 'zeroadvisor.cli.app')\n"
        "# the rule catalogue (advisor/registry.py, advisor/rules.py) names every rule, lint's --select/--ignore\n"
        "# accept advice codes too; it imports the memory model only inside the advice checks\n"
        "catalogue = ('zeroadvisor.advisor', 'zeroadvisor.advisor.registry', 'zeroadvisor.advisor.rules')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy) and m not in catalogue))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "[]", result.stdout

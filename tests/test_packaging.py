"""Packaging facts that a user relies on: the hook manifest, the console script, no heavy imports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli_run import cli, cli_process  # noqa: F401 - the fixture

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("hook_id", ["zeroadvisor", "zeroadvisor-fix"])
def test_pre_commit_hook_runs_a_real_command(cli, hook_id):
    hooks = {hook["id"]: hook for hook in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"zeroadvisor", "zeroadvisor-fix"}
    hook = hooks[hook_id]
    assert hook["language"] == "python"
    program, command, *flags = hook["entry"].split()
    assert program == "zeroadvisor"
    result = cli(command, *flags, "--help")
    assert result.returncode == 0, result.stderr


def modules_after(*commands: tuple[list[str], tuple[int, ...]]) -> list[str]:
    """The modules a fresh interpreter holds after running each (argv, allowed exit codes) through
    ``zeroadvisor.cli.run`` (a real process: this one has imported everything already)."""
    code = ("import json, sys\n"
            "from zeroadvisor.cli import run\n"
            f"for argv, codes in {commands!r}:\n"
            "    assert run(argv) in codes, argv\n"
            "print(json.dumps(sorted(sys.modules)))\n")
    result = cli_process(code=code)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_core_never_imports_torch_or_deepspeed(tmp_path):
    """lint, estimate and check must not pull torch/deepspeed/transformers (a CI linter stays light)."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    loaded = modules_after((["lint", str(config)], (0, 1)),
                           (["check", str(config), "--params", "7B", "--gpus", "8", "--gpu", "H100-SXM5-80GB"],
                            (0, 1, 5)),
                           (["estimate", "--params", "7B", "--gpus", "8"], (0,)))
    assert [m for m in loaded if m.split(".")[0] in ("torch", "deepspeed", "transformers", "jsonschema")] == []


def test_schemas_ship_as_package_data():
    from importlib import resources

    names = {p.name for p in resources.files("zeroadvisor.schemas").iterdir()}
    assert {"ds_config.schema.json", "model.schema.json", "ds_releases.json"} <= names


def test_published_schemas_are_the_package_data_byte_for_byte():
    """schemas/ (what an editor fetches by $id) and zeroadvisor/schemas/ (what the package ships and the linter
    reads) are both written by the generators (tools/published_schemas.py); neither is edited by hand."""
    from conftest import load_script

    published = load_script("tools/published_schemas.py", "published_schemas")
    names = sorted(p.name for p in (ROOT / "schemas").glob("*.json"))
    assert names == ["ds_config.schema.json", "model.schema.json"]
    package_data = sorted(p.name for p in (ROOT / "zeroadvisor" / "schemas").glob("*.json"))
    assert names == sorted(set(package_data) - set(published.PACKAGE_ONLY))
    for name in names:
        package, public = published.targets(name)
        assert public.read_bytes() == package.read_bytes(), f"schemas/{name} differs: run the generator"
        schema = json.loads(public.read_text("utf-8"))
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["$id"] == published.schema_id(name)
        assert schema["$id"] == ("https://raw.githubusercontent.com/zeroadvisor/zeroadvisor/main/schemas/" + name)


def test_lint_starts_without_typer_or_the_memory_model(tmp_path):
    """Start-up (benchmarks/latency.py times it): plain `lint` needs neither the typer app (typer
    and pydantic are most of its start) nor the modules only check/estimate use."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}')
    loaded = modules_after((["lint", "--format", "json", "--fail-on", "never", str(config)], (0,)),
                           (["lint", "--fail-on", "never", str(config)], (0,)))  # text: the terminal's width
    # model.spec's dataclasses are the estimate's (the request's closed sets come from vocab)
    heavy = ("typer", "click", "pydantic", "yaml", "jsonschema", "zeroadvisor.memory", "zeroadvisor.advisor",
             "zeroadvisor.model.description", "zeroadvisor.model.spec", "zeroadvisor.fix.apply", "zeroadvisor.cli.app")
    # the rule catalogue (advisor/registry.py, advisor/rules.py) names every rule, lint's --select/--ignore
    # accept advice codes too; it imports the memory model only inside the advice checks
    catalogue = ("zeroadvisor.advisor", "zeroadvisor.advisor.registry", "zeroadvisor.advisor.rules")
    assert [m for m in loaded if m.startswith(heavy) and m not in catalogue] == []


def test_license_file_is_the_license_pyproject_names():
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]  # PEP 639
    text = (ROOT / "LICENSE").read_text("utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_project_urls_point_into_the_repository():
    import tomllib

    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["urls"]
    repository = urls["Repository"]
    assert repository.startswith("https://github.com/") and repository.count("/") == 4
    assert {"Homepage", "Documentation", "Issues"} <= set(urls)
    assert all(url.startswith(repository) for url in urls.values())
    assert urls["Documentation"].endswith("/docs/index.md") and (ROOT / "docs" / "index.md").is_file()


@pytest.mark.slow
def test_the_wheel_builds_quietly_and_holds_every_data_file(tmp_path):
    """issue 32: every install printed setuptools deprecation warnings (`project.license` as a table, catalog/
    "absent from the packages configuration"). The wheel is built from a copy of the tree (no build/ or egg-info
    left in the checkout) with the installed setuptools; what setuptools says is checked, and every file the
    package reads (schemas, the model catalog) is in the wheel."""
    import shutil
    import subprocess
    import sys
    import zipfile

    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "zeroadvisor", source / "zeroadvisor", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
                           "--no-index", ".", "-w", str(tmp_path / "dist")], cwd=source, capture_output=True,
                          text=True, check=False, timeout=240)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    said = [line for line in output.splitlines() if "Deprecat" in line or "Warning" in line
            or "absent from the `packages`" in line]
    assert said == [], "\n".join(said)
    (wheel,) = (tmp_path / "dist").glob("zeroadvisor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = {p.relative_to(ROOT).as_posix() for p in (ROOT / "zeroadvisor").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc")}
    assert data and {n for n in data if "/catalog/" in n} and data <= names, sorted(data - names)
    metadata = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert "License-Expression: Apache-2.0" in metadata

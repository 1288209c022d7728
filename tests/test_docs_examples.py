"""Every code block in README.md and docs/*.md is run or checked, so no example drifts from the code.

Console blocks (``$ zeroadvisor ...``) are compared with the real output by tests/test_readme_examples.py.
Every other block is preceded by ``<!-- example: KIND -->``, and KIND names its check below (CHECKS);
a block that cannot run as it stands says why: ``<!-- example: not-run (REASON) -->``. docs/rules.md is
generated from the rule registry: its blocks are the rules' own examples, which
tests/test_rule_examples.py runs.
"""

from __future__ import annotations

import fnmatch
import glob
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from markdown_it import MarkdownIt

from conftest import REPO

if "readme_examples" in sys.modules:
    readme_examples = sys.modules["readme_examples"]
else:
    _spec = importlib.util.spec_from_file_location("readme_examples", REPO / "tools" / "readme_examples.py")
    readme_examples = importlib.util.module_from_spec(_spec)
    sys.modules["readme_examples"] = readme_examples  # dataclasses look their module up there
    _spec.loader.exec_module(readme_examples)

MARKER = re.compile(r"^<!--\s*example:\s*(?P<kind>[a-z][\w-]*)\s*(?:\((?P<reason>.*)\))?\s*-->$", re.DOTALL)
GENERATED_RULES_PAGE = "docs/rules.md"  # tools/gen_rules_doc.py writes it from the rule registry


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # 1-based line of the opening fence
    info: str
    content: str
    kind: str | None
    reason: str | None

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks(path: Path) -> list[Block]:
    page = path.relative_to(REPO).as_posix()
    tokens = MarkdownIt("commonmark").parse(path.read_text("utf-8"))
    out = []
    for i, token in enumerate(tokens):
        if token.type not in ("fence", "code_block"):
            continue
        before = tokens[i - 1] if i else None
        marker = MARKER.match(before.content.strip()) if before is not None and before.type == "html_block" else None
        kind = marker["kind"] if marker else None
        if kind is None and token.info.strip() == "console" and token.content.startswith(readme_examples.PROMPT):
            kind = "console"
        if kind is None and page == GENERATED_RULES_PAGE:
            kind = "rule-example"
        out.append(Block(page, token.map[0] + 1, token.info.strip(), token.content, kind,
                         (marker["reason"] or "").strip() if marker else None))
    return out


BLOCKS = [block for page in readme_examples.pages() for block in _blocks(page)]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))


def _repository() -> str:
    """The repository's address, written once: pyproject.toml [project.urls] Repository."""
    return str(_pyproject()["project"]["urls"]["Repository"])


def _release_tag() -> str:
    """The tag a user pins the Action and the hook to: v + the package version (the scheme the examples use)."""
    from zeroadvisor.version import __version__  # pyproject.toml reads the version from there

    return "v" + __version__


def _existing_tags() -> set[str]:
    try:
        done = subprocess.run(["git", "tag", "--list"], check=False, cwd=REPO, capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(done.stdout.split()) if done.returncode == 0 else set()


def _assert_pinnable(ref: str, what: str) -> None:
    """The pinned ref is the package version's tag (v + zeroadvisor/version.py), and a tag of this repository
    where it has tags: the install the docs show is the release they describe."""
    assert ref == _release_tag(), f"{what} pins {ref!r}; the package version's tag is {_release_tag()!r}"
    tags = _existing_tags()
    if tags:
        assert ref in tags, f"{what} pins {ref!r}, not a tag of this repository ({sorted(tags)})"


def _zeroadvisor(argv: list[str], codes: tuple[int, ...], where: Block) -> str:
    code, output = readme_examples.execute(argv)
    assert code in codes, f"{where}: zeroadvisor {shlex.join(argv)} exited {code}:\n{output}"
    return output


def _command_lines(text: str) -> list[str]:
    """The block's command lines, continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [line for line in joined.splitlines() if shlex.split(line, comments=True)]


def _without_redirect(argv: list[str]) -> list[str]:
    out = []
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in (">", ">>", "2>"):
            skip = True
        elif not token.startswith(">"):
            out.append(token)
    return out


def _globbed(argv: list[str]) -> list[str]:
    """Arguments as the shell would pass them from the repository root (a pattern that matches nothing stays)."""
    out = []
    for token in argv:
        matches = sorted(glob.glob(token, root_dir=REPO)) if any(c in token for c in "*?[") else []
        out += matches or [token]
    return out


def _check_script_line(argv: list[str], block: Block) -> None:
    """``python tools/X.py --opt ...``: the script exists and takes every option shown."""
    script = REPO / argv[1]
    assert argv[1].startswith(("tools/", "benchmarks/")) and script.is_file(), f"{block}: no script {argv[1]}"
    source = script.read_text("utf-8")
    for option in (a.split("=", 1)[0] for a in argv[2:] if a.startswith("--")):
        assert re.search(rf"['\"]{re.escape(option)}['\"]", source), f"{block}: {argv[1]} has no option {option}"


# -- the checks, one per kind ------------------------------------------------------------------------------

def check_setup(block: Block, tmp_path: Path) -> None:
    """The README's two commands: each step is a known one, the pins are pyproject's, CI runs the same
    installs and test command, and the main job's zeroadvisor commands run cleanly on sample_configs/."""
    project = _pyproject()
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    ci_commands = {re.sub(r"\s+--quiet\b", "", line.strip()) for line in ci.splitlines()}
    extras = project["project"]["optional-dependencies"].values()
    pins = {re.split(r"[=<>!~ ]", dep, maxsplit=1)[0]: dep for deps in extras
            for dep in deps}
    lines = _command_lines(block.content)
    assert len(lines) == 2, f"{block}: expected the two set-up commands, got {lines}"
    for index, line in enumerate(lines):
        main_job, tests = index == 0, index == 1
        for step in (s.strip() for s in line.split("&&")):
            argv = shlex.split(step)
            if step in ("python3 -m venv .venv", ". .venv/bin/activate", "pip install ."):
                continue
            if argv[:2] == ["pip", "install"]:
                target = argv[-1]
                if target.startswith("torch=="):
                    assert pins.get("torch") == target, f"{block}: {target} but pyproject pins {pins.get('torch')}"
                else:
                    extras = re.fullmatch(r"\.\[([\w,-]+)\]", target)
                    assert argv[2] == "-e" and extras, f"{block}: unexpected install {step!r}"
                    missing = set(extras[1].split(",")) - set(project["project"]["optional-dependencies"])
                    assert not missing, f"{block}: pyproject has no extra {missing}"
                assert main_job or step in ci_commands, f"{block}: .ci/run does not run {step!r}"
            elif argv[:2] == ["python", "tools/install_deepspeed_release.py"]:
                # the release oracle's DeepSpeed releases; .ci/run installs them in the background
                assert tests and f"{step} " in ci, f"{block}: .ci/run does not run {step!r}"
            elif step == "python -m pytest -q":
                assert tests and step in ci_commands, f"{block}: .ci/run does not run {step!r} as the test command"
            elif argv[0] == "zeroadvisor":
                assert main_job, f"{block}: the main job's commands belong to the first command"
                _zeroadvisor(_globbed(argv[1:]), (0,), block)
            else:
                pytest.fail(f"{block}: unknown set-up step {step!r}")
    assert "zeroadvisor " in lines[0] and "pytest" in lines[1], f"{block}: first the main job, then the tests"


def check_shell(block: Block, tmp_path: Path) -> None:
    """Each ``zeroadvisor`` line runs from the repository root (0: clean, 1: findings; never a usage error);
    each ``python tools/...`` or ``python benchmarks/...`` line names a script that takes the options shown."""
    lines = _command_lines(block.content)
    assert lines, f"{block}: an empty shell example"
    for line in lines:
        argv = _without_redirect(shlex.split(line, comments=True))
        assert "|" not in argv, f"{block}: a pipeline belongs in a console block (| grep -E shows an excerpt)"
        if argv[0] == "zeroadvisor":
            _zeroadvisor(_globbed(argv[1:]), (0, 1), block)
        elif argv[0] in ("python", "python3"):
            _check_script_line(argv, block)
        else:
            pytest.fail(f"{block}: {argv[0]!r} cannot be checked: mark the block not-run with a reason")


# What a Python example promises to print: every print() call carries ``# prints: TEXT`` on its line(s), TEXT a
# line of what it prints (a TEXT ending in "..." is the start of that line); the promises are met in the order
# they are written. No other comment on a print() line (an unchecked "# fits | tight" promised what never printed).
PRINTS = re.compile(r"#\s*prints:\s*(?P<text>.*?)\s*$")


def _print_promises(block: Block) -> list[str]:
    """The ``# prints:`` texts of a Python example, in order; a print() without one (or a promise on a line that
    prints nothing) fails."""
    import ast
    import io
    import tokenize

    comments = {tok.start[0]: tok.string for tok in tokenize.generate_tokens(io.StringIO(block.content).readline)
                if tok.type == tokenize.COMMENT}
    calls = sorted((node.lineno, node.end_lineno or node.lineno) for node in ast.walk(ast.parse(block.content))
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print")
    promised: list[str] = []
    for first, last in calls:
        said = [comments[line] for line in range(first, last + 1) if line in comments]
        found = [PRINTS.match(comment) for comment in said]
        assert len(said) == 1 and found[0], (
            f"{block}: print() on line {first} of the block needs one comment, '# prints: TEXT' (what it prints), "
            f"got {said}")
        promised.append(found[0]["text"])
    printing = {line for first, last in calls for line in range(first, last + 1)}
    stray = [line for line, comment in comments.items() if PRINTS.match(comment) and line not in printing]
    assert not stray, f"{block}: '# prints:' on line(s) {stray} of the block, which call no print()"
    return promised


def _check_printed(block: Block, promised: list[str], output: str) -> None:
    """Each promise is a line of ``output`` (or its start, "..."), in the order written."""
    lines = [line.rstrip() for line in output.splitlines()]
    at = 0
    for text in promised:
        prefix = text.endswith("...")
        wanted = text[:-3] if prefix else text
        for index in range(at, len(lines)):
            if lines[index] == wanted or (prefix and lines[index].startswith(wanted)):
                at = index + 1
                break
        else:
            pytest.fail(f"{block}: the example promises it prints {text!r} (in this order); it printed:\n{output}")


def check_python(block: Block, tmp_path: Path) -> None:
    """Run in a temporary folder holding a copy of sample_configs/, with this checkout's zeroadvisor; what it
    prints is what its ``# prints:`` comments say."""
    promised = _print_promises(block)
    shutil.copytree(REPO / "sample_configs", tmp_path / "sample_configs")
    (tmp_path / "example.py").write_text(block.content, "utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run([sys.executable, "example.py"], check=False, cwd=tmp_path, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=240)
    assert done.returncode == 0, f"{block}: the example failed:\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, f"{block}:\n{done.stderr}"
    _check_printed(block, promised, done.stdout)


def check_github_workflow(block: Block, tmp_path: Path) -> None:
    """Valid YAML; the step using this action passes only inputs action.yml declares, pins the release
    tag, names a GPU the tool resolves, and the job grants what the inputs need."""
    workflow = yaml.safe_load(block.content)
    action = yaml.safe_load((REPO / "action.yml").read_text("utf-8"))
    declared = set(action["inputs"])
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    ours = [step for step in steps if str(step.get("uses", "")).split("@")[0].endswith("/zeroadvisor")]
    assert ours, f"{block}: no step uses the zeroadvisor action"
    permissions = workflow.get("permissions", {})
    for step in ours:
        name, ref = step["uses"].split("@", 1)
        assert _repository().endswith("/" + name), f"{block}: {name} is not pyproject.toml's Repository"
        _assert_pinnable(ref, f"{block}: the workflow")
        given = step.get("with", {})
        assert set(given) <= declared, f"{block}: inputs action.yml does not declare: {set(given) - declared}"
        if "gpu" in given:  # the action passes it to check --gpu: an ambiguous name would fail the job
            _zeroadvisor(["estimate", "--params", "1B", "--gpus", "1", "--gpu", str(given["gpu"])], (0,), block)
        if "gpus" in given:
            assert int(given["gpus"]) >= 1
        if str(given.get("comment", action["inputs"]["comment"]["default"])).lower() == "true":
            assert permissions.get("pull-requests") == "write", f"{block}: the comment needs pull-requests: write"
        if str(given.get("upload-sarif", action["inputs"]["upload-sarif"]["default"])).lower() == "true":
            assert permissions.get("security-events") == "write", f"{block}: SARIF upload needs security-events: write"


def check_pre_commit_config(block: Block, tmp_path: Path) -> None:
    """Valid YAML naming this repository at the release tag and a hook id .pre-commit-hooks.yaml declares."""
    config = yaml.safe_load(block.content)
    hooks = {hook["id"] for hook in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text("utf-8"))}
    ours = [repo for repo in config["repos"] if str(repo["repo"]).rstrip("/").endswith("/zeroadvisor")]
    assert ours, f"{block}: no entry for this repository"
    for repo in ours:
        assert repo["repo"] == _repository(), f"{block}: {repo['repo']} is not pyproject.toml's Repository"
        _assert_pinnable(str(repo["rev"]), f"{block}: the pre-commit config")
        named = {hook["id"] for hook in repo["hooks"]}
        assert named and named <= hooks, f"{block}: hook ids {named - hooks} are not in .pre-commit-hooks.yaml"


def check_project_config(block: Block, tmp_path: Path) -> None:
    """Loads with the project-configuration reader (zeroadvisor/config/project.py), as the CLI finds it."""
    from zeroadvisor.config import project

    name = project.PYPROJECT if "[tool.zeroadvisor" in block.content else project.DEDICATED
    path = tmp_path / name
    path.write_text(block.content, "utf-8")
    config = project.load(str(path))
    assert config is not None, f"{block}: {name} holds no zeroadvisor configuration"
    from zeroadvisor.inputs.project import checked

    checked(config)  # every value as the run parses it (sizes, GPU names, declared GPUs)


def check_model_description(block: Block, tmp_path: Path) -> None:
    """Loads with the model-description reader, beside the sample models its paths name."""
    from zeroadvisor.model.description import load_description

    shutil.copytree(REPO / "sample_configs" / "models", tmp_path / "models")
    path = tmp_path / "models" / "example.yaml"
    path.write_text(block.content, "utf-8")
    spec, _shape = load_description(path)
    assert spec is not None


def check_vscode_settings(block: Block, tmp_path: Path) -> None:
    """A settings.json fragment: valid JSON once wrapped, naming a schema file that exists and patterns
    that match the sample configs."""
    settings = json.loads("{" + block.content + "}")
    for entry in settings["json.schemas"]:
        _published_schema(entry["url"], block)
        names = [p.name for p in (REPO / "sample_configs").glob("*.json")]
        assert any(fnmatch.fnmatch(n, pattern) for n in names for pattern in entry["fileMatch"]), block


def _published_schema(url: str, block: Block) -> dict:
    """The schema a URL names: a published address is the $id of a file in schemas/ (a raw URL of the main
    branch), anything else a path in the repository."""
    schema = REPO / "schemas" / url.rsplit("/", 1)[1] if url.startswith("https://") else REPO / url
    assert schema.is_file(), f"{block}: no schema at {url}"
    loaded = json.loads(schema.read_text("utf-8"))
    assert not url.startswith("https://") or loaded["$id"] == url, f"{block}: {url} is not the $id of {schema}"
    return loaded


def check_ds_config(block: Block, tmp_path: Path) -> None:
    """A DeepSpeed config: `lint` passes it, and it validates against the schema its "$schema" names."""
    import jsonschema

    config = json.loads(block.content)
    path = tmp_path / "ds_config.json"
    path.write_text(block.content, "utf-8")
    _zeroadvisor(["lint", "--fail-on", "warning", str(path)], (0,), block)
    if "$schema" in config:
        jsonschema.Draft202012Validator(_published_schema(config["$schema"], block)).validate(config)


def check_layout(block: Block, tmp_path: Path) -> None:
    """The package tree: every folder it names exists (tests/test_layout.py compares it with the packages)."""
    folders = re.findall(r"^(zeroadvisor/\w+)/\s", block.content, re.MULTILINE)
    assert folders and all((REPO / folder).is_dir() for folder in folders), block


def check_console(block: Block, tmp_path: Path) -> None:
    """Compared with the real output by tests/test_readme_examples.py; here: the tool sees it."""
    page = REPO / block.page
    seen = [e.start + 1 for e in readme_examples.parse(page.read_text("utf-8"), block.page)]
    assert block.line in seen, f"{block}: tools/readme_examples.py does not see this console block"


def check_rule_example(block: Block, tmp_path: Path) -> None:
    """docs/rules.md's blocks are the registry's examples (tests/test_rule_examples.py runs each)."""
    from zeroadvisor.advisor import registry

    examples = {example.config.strip() for rule in registry.ALL for example in rule.examples}
    assert block.content.rstrip("\n") in examples, f"{block}: not an example of the rule registry"


def check_not_run(block: Block, tmp_path: Path) -> None:
    assert block.reason and len(block.reason.split()) >= 3, (
        f"{block}: a block that is not run says why: <!-- example: not-run (REASON) -->")
    # a promise of output is only made where the test checks it (a run `python` block)
    assert not any(PRINTS.search(line) for line in block.content.splitlines()), (
        f"{block}: '# prints:' in a block that is not run: nothing checks it")


CHECKS: dict[str, Callable[[Block, Path], None]] = {
    "setup": check_setup,
    "shell": check_shell,
    "python": check_python,
    "github-workflow": check_github_workflow,
    "pre-commit-config": check_pre_commit_config,
    "project-config": check_project_config,
    "model-description": check_model_description,
    "vscode-settings": check_vscode_settings,
    "ds-config": check_ds_config,
    "layout": check_layout,
    "console": check_console,
    "rule-example": check_rule_example,
    "not-run": check_not_run,
}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b}-{b.kind}" for b in BLOCKS])
def test_block(block, tmp_path, monkeypatch):
    assert block.kind is not None, (
        f"{block}: a code block needs <!-- example: KIND --> before it, KIND one of {sorted(CHECKS)}, or "
        "<!-- example: not-run (REASON) -->")
    assert block.kind in CHECKS, f"{block}: unknown example kind {block.kind!r} (known: {sorted(CHECKS)})"
    assert block.kind == "not-run" or not block.reason, f"{block}: only not-run takes a reason"
    monkeypatch.chdir(REPO)
    CHECKS[block.kind](block, tmp_path)


def test_every_integration_example_is_checked():
    """The checks cannot vanish with a marker: each kind that guards an integration has its block."""
    kinds = {block.kind for block in BLOCKS}
    expected = {"setup", "shell", "python", "github-workflow", "pre-commit-config", "project-config",
                "model-description", "vscode-settings", "layout", "console", "rule-example"}
    assert expected <= kinds, f"no block of kind {sorted(expected - kinds)}"


def test_the_readme_starts_with_the_two_commands():
    tokens = MarkdownIt("commonmark").parse((REPO / "README.md").read_text("utf-8"))
    blocks = [t for t in tokens if t.type in ("fence", "code_block", "paragraph_open", "bullet_list_open")]
    first = blocks[0]
    assert first.type == "fence" and [t.type for t in tokens[:tokens.index(first)]] == [
        "heading_open", "inline", "heading_close", "html_block"], "the README opens with its title, then the commands"
    readme_blocks = [b for b in BLOCKS if b.page == "README.md"]
    assert readme_blocks[0].kind == "setup" and [b.kind for b in BLOCKS].count("setup") == 1



OLD_API_EXAMPLE = """import zeroadvisor

report = zeroadvisor.check("sample_configs/zero3_offload.json", model="sample_configs/models/llama-2-7b/config.json",
                           gpus=8, gpu="A100-SXM4-80GB", seq_len=4096)
print(report.verdict)                                 # fits | tight | does-not-fit
"""


def test_an_example_that_does_not_print_what_it_says_fails(tmp_path, monkeypatch):
    """issue 32: docs/python-api.md promised `fits | tight | does-not-fit` and printed `unknown`: such a comment on
    a print() is refused, and a `# prints:` that the run does not print fails."""
    monkeypatch.chdir(REPO)
    old = Block("docs/python-api.md", 9, "python", OLD_API_EXAMPLE, "python", None)
    with pytest.raises(AssertionError, match="needs one comment, '# prints: TEXT'"):
        check_python(old, tmp_path / "old")
    wrong = Block("docs/python-api.md", 9, "python", OLD_API_EXAMPLE.replace("fits | tight | does-not-fit",
                                                                             "prints: fits"), "python", None)
    with pytest.raises(pytest.fail.Exception, match="promises it prints 'fits'"):
        check_python(wrong, tmp_path / "wrong")
    stray = Block("x.md", 1, "python", "x = 1  # prints: 1\n", "python", None)
    with pytest.raises(AssertionError, match="which call no print"):
        check_python(stray, tmp_path / "stray")

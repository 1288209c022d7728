"""config/pins.py: the DeepSpeed requirement in the user's files, found walking up from a config."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from cli_run import cli_process
from zeroadvisor.config.pins import MAX_REQUIREMENTS_FILES, clear_cache, find_pin, poetry_specifier


def _config(folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ds_config.json"
    path.write_text('{"train_batch_size": 8}\n', encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("name", "text", "specifier", "line"), [
    ("requirements.txt", "torch==2.3\n# pinned\ndeepspeed==0.14.5  # cluster image\n", "==0.14.5", 3),
    ("requirements-train.txt", "DeepSpeed[autotuning] >=0.10.0, <=0.16.9 ; python_version>'3.8'\n",
     ">=0.10.0,<=0.16.9", 1),
    ("requirements.txt", "deepspeed==0.15.4 \\\n    --hash=sha256:abc\n", "==0.15.4", 1),
    ("pyproject.toml", '[project]\nname = "x"\ndependencies = ["torch", "deepspeed>=0.10.0,<=0.16.9"]\n',
     ">=0.10.0,<=0.16.9", 3),
    ("pyproject.toml", '[project]\nname = "x"\n[project.optional-dependencies]\ntrain = ["deepspeed==0.12.6"]\n',
     "==0.12.6", 4),
    ("pyproject.toml", '[tool.poetry.dependencies]\npython = "^3.10"\ndeepspeed = "^0.14.2"\n', ">=0.14.2,<0.15.0", 3),
    ("setup.cfg", "[options]\ninstall_requires =\n    torch\n    deepspeed~=0.13.1\n", "~=0.13.1", 4),
    ("setup.py", "from setuptools import setup\nREQS = ['torch', 'deepspeed==0.9.5']\nsetup(install_requires=REQS)\n",
     "==0.9.5", 2),
    ("environment.yml", "dependencies:\n  - python=3.10\n  - deepspeed=0.16.9\n", "==0.16.9", 3),
    ("environment.yml", "dependencies:\n  - pip\n  - pip:\n    - deepspeed==0.17.6\n", "==0.17.6", 4),
    ("Pipfile", '[packages]\ndeepspeed = "==0.18.9"\n', "==0.18.9", 2),
    ("uv.lock", 'version = 1\n[[package]]\nname = "deepspeed"\nversion = "0.14.5"\n', "==0.14.5", 4),
    ("poetry.lock", ('[[package]]\nname = "torch"\nversion = "2.3.0"\n\n[[package]]\nname = "deepspeed"\n'
                     'version = "0.15.4"\n'), "==0.15.4", 7),
    ("Pipfile.lock", json.dumps({"default": {"deepspeed": {"version": "==0.13.5"}}}, indent=1), "==0.13.5", 3),
])
def test_each_format(tmp_path, name, text, specifier, line):
    (tmp_path / name).write_text(text, encoding="utf-8")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None, found.notes
    assert (found.pin.specifier, found.pin.line) == (specifier, line)
    assert found.pin.file.endswith(name)


def test_requirements_folder(tmp_path):
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "base.txt").write_text("deepspeed==0.11.2\n", encoding="utf-8")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None and found.pin.specifier == "==0.11.2"


def test_lock_wins_over_declared_range_in_one_folder(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\ndependencies=["deepspeed>=0.10"]\n')
    (tmp_path / "uv.lock").write_text('[[package]]\nname = "deepspeed"\nversion = "0.14.5"\n')
    assert find_pin(_config(tmp_path)).pin.specifier == "==0.14.5"


def test_nearest_folder_wins_and_walk_stops_at_repository_root(tmp_path):
    (tmp_path / "requirements.txt").write_text("deepspeed==0.9.5\n")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "requirements.txt").write_text("deepspeed==0.16.9\n")
    assert find_pin(_config(repo / "configs")).pin.specifier == "==0.16.9"
    (repo / "requirements.txt").unlink()
    assert find_pin(_config(repo / "configs")).pin is None  # outside the repository does not count


def test_no_version_is_an_empty_specifier(tmp_path):
    (tmp_path / "requirements.txt").write_text("deepspeed\n")
    assert find_pin(_config(tmp_path)).pin.specifier == ""


@pytest.mark.parametrize(("name", "text"), [
    ("pyproject.toml", "[project\nname = 'deepspeed'"),
    ("setup.py", "def (:\n    'deepspeed'\n"),
    ("environment.yml", b"dependencies:\n  - deepspeed=0.14.5\xff\n"),
    ("Pipfile.lock", '{"default": {"deepspeed": '),
    ("requirements.txt", b"\xff\xfe\x00junk"),
])
def test_broken_file_is_a_note_not_an_error(tmp_path, name, text):
    (tmp_path / ".git").mkdir()
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    found = find_pin(_config(tmp_path))
    assert found.pin is None
    assert len(found.notes) == 1 and name in found.notes[0] and "\n" not in found.notes[0]


def test_huge_file_is_skipped(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("# x\n" * 1_500_000 + "deepspeed==0.14.5\n")
    found = find_pin(_config(tmp_path))
    assert found.pin is None and "larger than 5 MB" in found.notes[0]


def test_other_packages_are_not_deepspeed(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("deepspeed-mii==0.2\ndeepspeedx==1\n")
    assert find_pin(_config(tmp_path)).pin is None


@pytest.mark.parametrize(("poetry", "pep440"), [
    ("^0.14.2", ">=0.14.2,<0.15.0"), ("^1.2", ">=1.2.0,<2.0.0"), ("^0.0.3", ">=0.0.3,<0.0.4"),
    ("~0.14.2", ">=0.14.2,<0.15.0"), ("~1", ">=1.0.0,<2.0.0"), ("^0", ">=0.0.0,<1.0.0"),
    ("^0.0", ">=0.0.0,<0.1.0"), ("*", ""), ("0.14.5", "==0.14.5"), (">=0.10,<0.17", ">=0.10,<0.17"),
])
def test_poetry_constraints(poetry, pep440):
    assert poetry_specifier(poetry) == pep440


# Issue 32: the spellings pip, conda, Poetry, pipenv and setuptools accept, read as they read them.
@pytest.mark.parametrize(("name", "text", "specifier", "line"), [
    ("requirements.txt", "deepspeed==0.14.5+cu121\n", "==0.14.5", 1),  # a local (CUDA) build of the release
    ("requirements.txt", "deepspeed==0.14.5 --global-option=build_ext --hash=sha256:abc\n", "==0.14.5", 1),
    ("requirements.txt", "torch\ndeepspeed>=0.14,\\\n    <0.16  # LTS\n", ">=0.14,<0.16", 2),
    ("requirements.txt", "deepspeed===0.15.4\n", "==0.15.4", 1),
    ("requirements.txt", "deepspeed (>=0.14, <0.16)\n", ">=0.14,<0.16", 1),
    ("requirements.txt", "# deepspeed==0.9.5 \\\ndeepspeed==0.16.9\n", "==0.16.9", 2),  # a comment does not continue
    ("requirements.txt", "DeepSpeed[autotuning]==0.13.5\n", "==0.13.5", 1),
    ("requirements.txt", "deepspeed @ https://example.com/deepspeed-0.14.5.whl\n", "", 1),  # no version said
    ("environment.yml", "dependencies:\n  - deepspeed=0.14.5=py310_cuda121_0\n", "==0.14.5", 2),
    ("environment.yml", "dependencies:\n  - deepspeed 0.14.5\n", "==0.14.5", 2),
    ("environment.yml", "dependencies:\n  - deepspeed 0.14.5 py310_0\n", "==0.14.5", 2),
    ("environment.yml", "dependencies:\n  - deepspeed==0.14.5\n", "==0.14.5", 2),
    ("environment.yml", "dependencies:\n  - deepspeed>=0.14,<0.16\n", ">=0.14,<0.16", 2),
    ("environment.yml", "dependencies:\n  - conda-forge::deepspeed=0.14\n", "==0.14.*", 2),  # conda's 0.14.*
    ("environment.yml", "name: t\ndependencies: [python=3.11, deepspeed=0.15.4]\n", "==0.15.4", 2),
    ("environment.yml", "dependencies:\n- pip:\n  - 'deepspeed==0.16.9'  # pip's\n- python=3.11\n", "==0.16.9", 3),
    ("environment.yml", "dependencies:\n  - pip:\n    - torch\n  - deepspeed=0.9.5\n", "==0.9.5", 4),  # conda's
    ("pyproject.toml", ('[tool.poetry.dependencies]\ndeepspeed = [\n  {version = "0.9.5", python = "<3.8"},\n'
                       '  {version = "^0.15.1", python = ">=3.8"},\n]\n'), ">=0.15.1,<0.16.0", 2),
    ("pyproject.toml", '[tool.poetry.dependencies]\ndeepspeed = {version = "0.14.5", extras = ["autotuning"]}\n',
     "==0.14.5", 2),
    ("pyproject.toml", '[dependency-groups]\ntrain = [{include-group = "x"}, "deepspeed~=0.14.0"]\n', "~=0.14.0", 2),
    ("Pipfile", '[packages]\ndeepspeed = {version = "==0.14.5", markers = "python_version >= \'3\'"}\n',
     "==0.14.5", 2),
    ("Pipfile.lock", '{"default": {"deepspeed": {"version": "==0.14.5+cu121"}}}', "==0.14.5", 1),
    ("uv.lock", ('version = 1\n[[package]]\nname = "deepspeed"\nversion = "0.15.4+cu121"\n[[package.wheels]]\n'
                'url = "x"\n\n[[package]]\nname = "torch"\nversion = "2.3.0"\n'), "==0.15.4", 4),
    ("setup.cfg", "[options]\ninstall_requires = torch; deepspeed==0.14.5\n", "==0.14.5", 2),
    ("setup.cfg", "[options.extras_require]\ntrain =\n    deepspeed>=0.15  # the trainer\n", ">=0.15", 3),
    ("setup.py", "setup(extras_require={'deepspeed': ['deepspeed==0.14.5']})\n", "==0.14.5", 1),
    ("setup.py", "R = ['torch']\nif True:\n    R += ['deepspeed>=0.15']\nsetup(install_requires=R)\n", ">=0.15", 3),
    ("setup.py", "setup(**dict(install_requires=['torch'] + [\n    'deepspeed==0.12.6',\n]))\n", "==0.12.6", 2),
    ("setup.py", 'setup(install_requires="""\n    torch\n    deepspeed==0.11.2\n""")\n', "==0.11.2", 3),
])
def test_spellings(tmp_path, name, text, specifier, line):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text, encoding="utf-8")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None, found.notes
    assert (found.pin.specifier, found.pin.line) == (specifier, line)
    assert not found.notes


def test_setup_py_reads_only_install_and_extras_requires(tmp_path):
    """A description or any other string that starts with the name is prose, not a pin (it made every command
    exit 2); an extras key named deepspeed is a name."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='ds-tools', description='DeepSpeed >= all the rest',\n"
        "      long_description='deepspeed==0.9.5', install_requires=['torch'],\n"
        "      extras_require={'deepspeed': ['transformers']})\n")
    found = find_pin(_config(tmp_path))
    assert (found.pin, found.notes) == (None, ())


def test_setup_py_limits(tmp_path):
    (tmp_path / ".git").mkdir()
    setup = tmp_path / "setup.py"
    setup.write_text("X = [" + "0," * 200_000 + "]\nsetup(install_requires=['deepspeed==0.14.5'])\n")
    found = find_pin(_config(tmp_path))
    assert found.pin is None and found.notes[0].endswith("setup.py: not parsed: larger than 256 KB of Python")
    # variables built from variables, many times over: a bounded walk, not 50**16 visits
    lines = ["A0 = ['deepspeed==0.14.5']"] + [f"A{i} = [{', '.join([f'A{i - 1}'] * 50)}]" for i in range(1, 7)]
    setup.write_text("\n".join(lines) + "\nsetup(install_requires=A6)\n")
    start = time.monotonic()
    found = find_pin(_config(tmp_path))
    assert time.monotonic() - start < 2 and found.pin is not None and found.pin.specifier == "==0.14.5"


@pytest.mark.parametrize("nested", ["-" * 7000 + "1", "(" * 300 + ")" * 300, "+".join(["1"] * 5000),
                                    "a" + ".b" * 4000])
def test_deeply_nested_setup_py_is_a_note(tmp_path, nested):
    (tmp_path / ".git").mkdir()
    (tmp_path / "setup.py").write_text(f"# deepspeed\nx = {nested}\nsetup(install_requires=['deepspeed'])\n")
    found = find_pin(_config(tmp_path))
    assert found.pin is None and len(found.notes) == 1 and "setup.py: not read for the DeepSpeed pin" in found.notes[0]


def test_markers_choose_the_line_for_this_interpreter(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text(
        "deepspeed==0.9.5; python_version < '3.0'\ndeepspeed==0.15.4; python_version >= '3.0'\n")
    found = find_pin(_config(tmp_path))
    assert (found.pin.specifier, found.pin.line, found.notes) == ("==0.15.4", 2, ())


def test_markers_that_match_nothing_are_a_note_and_the_search_goes_on(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("deepspeed==0.9.5; sys_platform == 'nonexistent'\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed==0.16.9"]\n')
    found = find_pin(_config(tmp_path))
    assert found.pin.specifier == "==0.16.9"
    assert len(found.notes) == 1 and "sys_platform == \"nonexistent\"" in found.notes[0]
    assert "requirements.txt" in found.notes[0] and "not used" in found.notes[0]


def test_two_lines_that_apply_the_first_decides_with_a_note(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.txt").write_text("deepspeed>=0.14\ndeepspeed<0.16\n")
    found = find_pin(_config(tmp_path))
    assert found.pin.specifier == ">=0.14" and "requirements.txt:2" in found.notes[0]


def test_pip_tools_compiled_file_before_its_input(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "requirements.in").write_text("deepspeed>=0.14\n")
    compiled = "deepspeed==0.14.5 \\\n    --hash=sha256:abc\n    # via -r requirements.in\n"
    (tmp_path / "requirements.txt").write_text(compiled)
    (tmp_path / "requirements-dev.in").write_text("deepspeed>=0.10\n")
    assert find_pin(_config(tmp_path)).pin.file.endswith("requirements.txt")
    (tmp_path / "requirements.txt").unlink()
    (tmp_path / "requirements-dev.txt").write_text("deepspeed==0.12.6\n")
    assert find_pin(_config(tmp_path / "x")).pin.file.endswith("requirements.in")  # the main file's input first
    (tmp_path / "requirements.in").unlink()
    assert find_pin(_config(tmp_path / "y")).pin.file.endswith("requirements-dev.txt")


def test_requirements_includes_are_followed_inside_the_repository(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "deps").mkdir()
    (tmp_path / "requirements.txt").write_text("-r a\0b\n-r deps/base.txt\n--requirement=https://example.com/r.txt\n")
    (tmp_path / "deps" / "base.txt").write_text("-r ../requirements.txt\ndeepspeed==0.13.5\n")
    found = find_pin(_config(tmp_path))
    assert found.pin.file.endswith("base.txt") and found.pin.specifier == "==0.13.5"
    (tmp_path / "requirements.txt").write_text("-r ../../outside.txt\n")
    (tmp_path.parent / "outside.txt").write_text("deepspeed==0.9.5\n")
    found = find_pin(_config(tmp_path / "again"))
    assert found.pin is None and "outside" in found.notes[0]


@pytest.mark.parametrize(("name", "text", "said"), [
    ("environment.yml", "dependencies:\n  - pip:\n# deepspeed later\n", None),  # an empty "- pip:"
    ("environment.yml", "dependencies:\n  - deepspeed=0.14|0.15\n", "is not a conda match spec"),
    ("pyproject.toml", "project = [1]\n# deepspeed\n", "[project] is a list, not a table"),
    ("pyproject.toml", '[project]\ndependencies = "deepspeed==0.14.5"\n', "[project] dependencies is a str"),
    ("pyproject.toml", '[project]\ndependencies = [1]\n# deepspeed\n',
     "[project] dependencies: 1 is not a requirement string"),
    ("pyproject.toml", '[[tool.poetry.dependencies]]\ndeepspeed = "1"\n', "[tool.poetry.dependencies] is a list"),
    ("pyproject.toml", '[tool.poetry.dependencies]\ndeepspeed = [1]\n', "not a version, a table"),
    ("pyproject.toml", '[tool.poetry.dependencies]\ndeepspeed = "^0.14 || ^0.15"\n', "'^0.14||^0.15' is not a PEP 440"),
    ("Pipfile", "[packages]\ndeepspeed = 3\n", "not a version string or a table with one"),
    ("Pipfile.lock", '{"default": ["deepspeed"]}', '"default" is a list, not a table'),
    ("Pipfile.lock", '{"default": {"deepspeed": {"version": 5}}}', "has no version string"),
    ("uv.lock", '[[package]]\nname = "deepspeed"\nversion = 5\n', "the locked deepspeed has no version string"),
    ("uv.lock", '[[package]]\nname = "deepspeed"\nversion = "not a version"\n', "not a PEP 440"),
    ("requirements.txt", "deepspeed==abc\n", "'deepspeed==abc' is not a requirement pip reads"),
    ("requirements.txt", "deepspeed==0.14.5; python_version <> '3'\n", "is not a requirement pip reads"),
    ("setup.cfg", "[options\ninstall_requires = deepspeed\n", "not read for the DeepSpeed pin"),
    ("pyproject.toml", "# deepspeed\nx = " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply to parse"),
    ("Pipfile.lock", '{"deepspeed": ' + "[" * 50_000 + "]" * 50_000 + "}", "nested too deeply to parse"),
])
def test_malformed_shapes_are_notes(tmp_path, name, text, said):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    found = find_pin(_config(tmp_path))
    assert found.pin is None
    if said is None:
        assert found.notes == ()
    else:
        assert len(found.notes) == 1 and said in found.notes[0] and name in found.notes[0], found.notes


def test_what_a_file_holds_stays_data(tmp_path):
    """A marker with a line break is one line of note; the user's setup.py warnings are not this run's."""
    import warnings

    (tmp_path / ".git").mkdir()
    (tmp_path / "Pipfile.lock").write_text(json.dumps({"default": {"deepspeed": {
        "version": "==0.14.5", "markers": "os_name == 'x'\nand os_name == 'y'"}}}))
    (tmp_path / "setup.py").write_text("x = [0x1for x in y]\nsetup(install_requires=['deepspeed==0.12.6'])\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = find_pin(_config(tmp_path))
    assert found.pin.specifier == "==0.12.6" and not caught
    assert found.notes and all("\n" not in note and "Pipfile.lock" in note for note in found.notes)


def test_at_most_32_requirements_files_a_folder_are_read_and_a_note_counts_the_rest(tmp_path):
    assert MAX_REQUIREMENTS_FILES == 32  # the bound docs/deepspeed-releases.md states
    # 30 requirements-NN.txt beside requirements.txt, then requirements/ with 10 more: 41 in reading order
    (tmp_path / "requirements.txt").write_text("torch\n")
    for n in range(30):
        (tmp_path / f"requirements-{n:02}.txt").write_text("torch\n")
    (tmp_path / "requirements").mkdir()
    for n in range(10):
        (tmp_path / "requirements" / f"r{n}.txt").write_text("torch\n")
    # the 32nd file read (requirements/r0.txt) pins: read, no note (the search stopped there)
    (tmp_path / "requirements" / "r0.txt").write_text("deepspeed==0.14.5\n")
    found = find_pin(_config(tmp_path))
    assert found.pin is not None and found.pin.file.endswith("r0.txt") and not found.notes
    # the 33rd is not read; the search goes on to the manifests, and one note counts what was left
    (tmp_path / "requirements" / "r0.txt").write_text("torch\n")
    (tmp_path / "requirements" / "r1.txt").write_text("deepspeed==0.14.5\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed>=0.16,<0.17"]\n')
    clear_cache()
    found = find_pin(_config(tmp_path))
    assert found.pin is not None and found.pin.specifier == ">=0.16,<0.17", found
    (note,) = found.notes
    assert note == (f"{tmp_path}: 9 more requirements files not read for the DeepSpeed pin (at most 32 a folder, "
                    "in reading order; the last read: r0.txt)")


PLAIN_AND_NOT = [
    "deepspeed", "deepspeed==0.19.8", "DeepSpeed >= 0.14 , <0.16", " deepspeed==0.14.5+cu121 ", "deepspeed===0.14.5",
    "deepspeed~=0.14", "deepspeed!=0.15.0,>=0.14", "deepspeed==0.14.*", "deepspeed===build-7", "deepspeed==1.0rc1",
    "deepspeed>=0.14,", "deepspeed 0.14", "deepspeed==", "deepspeed==0.14 ,, <1", "deepspeed==0.14.*.1",
    "deepspeed[1bit]==0.14", "deepspeed==0.14; python_version > '3.8'", "deepspeed @ https://example.org/ds.whl",
    "deepspeed (>=0.14)", "deepspeed>=0.14<0.16", "deepspeed>=0.14;", "deepspeed==0.14.5+cu121.x",
]


@pytest.mark.parametrize("text", PLAIN_AND_NOT)
def test_a_plain_requirement_reads_as_packaging_reads_it(text):
    """config/pin_requirements.py reads "deepspeed" plus a plain specifier set without packaging.requirements (its
    import is a tenth of a lint's start-up): the candidates and notes are those of the full parse, for plain texts
    and for the look-alikes that must go to it."""
    from zeroadvisor.config.pin_requirements import Reading, add_parsed_requirement, add_requirement

    fast, full = Reading("f"), Reading("f")
    add_requirement(fast, 3, text)
    add_parsed_requirement(full, 3, text)
    assert (fast.candidates, fast.notes) == (full.candidates, full.notes)


def test_a_plain_pin_is_read_without_packaging_requirements(tmp_path):
    (tmp_path / "requirements.txt").write_text("torch\ndeepspeed==0.16.4\n")
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1}')
    code = ("import json, sys\nfrom zeroadvisor.cli import run\n"
            f"assert run(['lint', {str(config)!r}]) == 0\n"
            "print(json.dumps([m for m in sys.modules if m.startswith(('packaging.requirements', 'packaging.markers', "
            "'packaging.tags'))]))\n")
    done = cli_process(code=code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "0.16.4" in done.stderr  # the pin was read: "read as DeepSpeed 0.16.4 (deepspeed==0.16.4 at ...)"
    assert done.stdout.splitlines()[-1] == "[]"

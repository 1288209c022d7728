"""Run every per-rule fixture in tests/rules/ and write the tool's output into it, for review.

Like a snapshot update (ruff's ``cargo insta review``): each fixture file holds hand-written
cases (config text, options, a note saying why) and the expected findings of its rule. This
tool recomputes ``expected`` (and ``also``, the other rules that fire) for every case and
rewrites the file; review the change with ``git diff tests/rules`` before committing. The
expectations are reviewed claims about DeepSpeed 0.19.8, not copies of output: where the tool
is believed wrong, the case carries ``xfail: <reason>`` and its hand-written ``expected`` is
kept as is (the actual output is printed instead).

    python tools/update_rule_fixtures.py            # rewrite every fixture
    python tools/update_rule_fixtures.py ZA101 ZA2  # only these codes / code prefixes
    python tools/update_rule_fixtures.py --check    # exit 1 if any file would change

A fixture file is ``tests/rules/<CODE>-<name>.yaml``::

    rule: ZA101
    name: unknown-key
    cases:
    - name: typo-in-zero-section          # unique in the file: the test id
      note: why the expectation is right (DeepSpeed's behaviour, with its source)
      # ...in words: the outcome's figures are the expectation's; a size, time or stage that fits which a note
      # states is one the case gives or expects (tests/test_rule_fixtures.py checks)
      config: |                           # the file as a user writes it (JSON or hjson)
        {"zero_optimization": {"stage": 2, "overlap_com": true}}
      format: yaml                        # optional: read with the YAML reader instead
      options: {integration: deepspeed, gpus: 8}
      # advice rules (run through ``check``): options model, gpus, gpu | gpu_memory, cpu_memory, nvme,
      # gpus_per_node, headroom, integration, and the machine of the step time (efficiency,
      # inter_node_bandwidth, cpu_cores, nvme_bandwidth, launcher); the model is a model description (an inline
      # hf_config object becomes a config.json beside it)
      xfail: reason the current output is wrong (expected is then hand-kept)
      expected:                           # the findings of this rule, in report order
      - {code, pointer, line, column, message, fix, severity}  # severity: only where not the rule's default
      also: [ZA002]                       # codes of the other rules that fire (sorted)

The library functions here are shared with tests/test_rule_fixtures.py and
tests/oracle/test_rule_fixes_oracle.py.
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

FIXTURES = REPO / "tests" / "rules"
CASE_KEYS = ("name", "note", "xfail", "format", "options", "config", "expected", "also")
INPUT_KEYS = ("name", "note", "xfail", "format", "options", "config")
FINDING_KEYS = ("code", "pointer", "line", "column", "message", "fix")
LINT_OPTIONS = ("integration", "gpus", "training", "deepspeed_version")
# the step-time model's machine: the inputs of hardware/machine.py DEFAULTS (memory/assumed.py HARDWARE_INPUTS)
HARDWARE_OPTIONS = ("efficiency", "inter_node_bandwidth", "cpu_cores", "nvme_bandwidth", "launcher")
# the run's own files as check reads them: a launch command (its trainer's flags: ms-swift, OpenRLHF, TRL scripts)
RUN_OPTIONS = ("launch", "training_args")  # training_args: the trainer's file as a mapping (written out as YAML)
CHECK_OPTIONS = ("model", "gpus", "gpu", "gpu_memory", "cpu_memory", "nvme", "gpus_per_node", "headroom",
                 "integration", *HARDWARE_OPTIONS, *RUN_OPTIONS)


def check_options(options: dict, model: Path):
    """The CheckOptions a check with the fixture's ``options`` runs with, built as the command line builds them
    (zeroadvisor.inputs.run.build; ``model``: the model description, written out)."""
    from zeroadvisor.inputs.command import Command
    from zeroadvisor.inputs.request import Request
    from zeroadvisor.inputs.run import build

    given = {key: value for key, value in options.items() if key != "model"}
    if isinstance(given.get("training_args"), dict):  # the trainer's file, beside the model description
        path = model.parent / "training_args.yaml"
        path.write_text(yaml.safe_dump(given["training_args"]), "utf-8")
        given["training_args"] = str(path)
    return build(Request.taking(Command.CHECK, config="example.json", model=str(model), **given)).check_options()


class FixtureError(Exception):
    """A fixture file that is malformed (a test failure, never a silent pass)."""


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------

def fixture_path(rule) -> Path:
    return FIXTURES / f"{rule.code}-{rule.name}.yaml"


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.yaml"))


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text("utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise FixtureError(f"{path.name}: expected a mapping with 'rule', 'name' and a list 'cases'")
    names = [case.get("name") for case in data["cases"]]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise FixtureError(f"{path.name}: every case needs a unique non-empty 'name'")
    for case in data["cases"]:
        unknown = set(case) - set(CASE_KEYS)
        if unknown:
            raise FixtureError(f"{path.name}::{case['name']}: unknown keys {sorted(unknown)}")
        if not isinstance(case.get("config"), str):
            raise FixtureError(f"{path.name}::{case['name']}: 'config' must be the file's text")
        if not isinstance(case.get("note"), str) or not case["note"].strip():
            raise FixtureError(f"{path.name}::{case['name']}: every case says why in a 'note'")
    return data


# --------------------------------------------------------------------------------------------
# Running one case
# --------------------------------------------------------------------------------------------

def is_check_case(case: dict[str, Any]) -> bool:
    return "model" in (case.get("options") or {})


def parse_case(case: dict[str, Any], name: str = "ds_config.json"):
    """The case's config as a Document (raises ParseError like the linter's reader)."""
    from zeroadvisor.config.source import parse
    from zeroadvisor.config.yaml_source import parse_yaml

    if case.get("format") == "yaml":
        return parse_yaml(case["config"], name)
    return parse(case["config"], name)


def run_case(case: dict[str, Any]) -> list:
    """Every finding (all rules) for the case, in report order."""
    options = dict(case.get("options") or {})
    if is_check_case(case):
        return _run_check(case, options)
    unknown = set(options) - set(LINT_OPTIONS)
    if unknown:
        raise FixtureError(f"{case['name']}: lint options are {LINT_OPTIONS}, got {sorted(unknown)}")
    from zeroadvisor.config.source import ParseError
    from zeroadvisor.deepspeed import releases
    from zeroadvisor.lint.context import LintOptions
    from zeroadvisor.rules.linter import lint_document, parse_error_findings

    request = options.pop("deepspeed_version", None)
    if request is not None:  # a release, release line or range: the releases it names (deepspeed/releases.py)
        options["releases"] = releases.resolve(str(request)).releases
    lint_options = LintOptions(**options)
    try:
        doc = parse_case(case)
    except ParseError as err:
        return parse_error_findings(doc_name(case), err, None)
    return lint_document(doc, lint_options)


def doc_name(case: dict[str, Any]) -> str:
    return "ds_config.yaml" if case.get("format") == "yaml" else "ds_config.json"


def _run_check(case: dict[str, Any], options: dict[str, Any]) -> list:
    from zeroadvisor.advisor.check import check_document

    unknown = set(options) - set(CHECK_OPTIONS)
    if unknown:
        raise FixtureError(f"{case['name']}: check options are {CHECK_OPTIONS}, got {sorted(unknown)}")
    with tempfile.TemporaryDirectory() as folder:
        description = dict(options["model"])
        if isinstance(description.get("hf_config"), dict):
            (Path(folder) / "config.json").write_text(json.dumps(description["hf_config"]))
            description["hf_config"] = "config.json"
        (Path(folder) / "model.json").write_text(json.dumps(description))
        run_options = check_options(options, Path(folder) / "model.json")
    return check_document(parse_case(case, doc_name(case)), run_options).findings


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _sorted_keys(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted_keys(v) for v in value]
    return value


def finding_record(finding) -> dict[str, Any]:
    from zeroadvisor.advisor import registry

    record = {"code": finding.code, "pointer": finding.pointer, "line": finding.line, "column": finding.column,
              "message": finding.message}
    if finding.fix is not None:
        record["fix"] = _sorted_keys(finding.fix)
    if finding.severity is not registry.BY_CODE[finding.code].severity:  # a rule's severity_varies case
        record["severity"] = finding.severity.value
    return record


def outcome(code: str, findings: list) -> tuple[list[dict[str, Any]], list[str]]:
    """(this rule's findings as records, sorted codes of the other rules that fired)."""
    mine = [finding_record(f) for f in findings if f.code == code]
    also = sorted({f.code for f in findings if f.code != code})
    return mine, also


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------

class _Dumper(yaml.SafeDumper):
    pass


def _str(dumper: yaml.SafeDumper, value: str):
    # Config text reads best as a literal block; PyYAML falls back to a quoted scalar by itself
    # where a block cannot hold the text exactly (trailing spaces, control characters, ...).
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump(data: dict[str, Any]) -> str:
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100_000,
                     default_flow_style=False)
    if yaml.safe_load(text) != data:  # never write a file that does not read back as written
        raise FixtureError("the YAML dump does not read back identically")
    return text


def updated(path: Path, report) -> str:
    """The new text of one fixture file."""
    from zeroadvisor.advisor import registry

    data = load(path)
    rule = registry.BY_CODE.get(data.get("rule"))
    if rule is None or path.name != f"{rule.code}-{rule.name}.yaml" or data.get("name") != rule.name:
        raise FixtureError(f"{path.name}: 'rule'/'name' must match a registry rule and the file name")
    cases = []
    for case in data["cases"]:
        out = {key: case[key] for key in INPUT_KEYS if key in case}
        mine, also = outcome(rule.code, run_case(case))
        if "xfail" in case:
            out["expected"] = case.get("expected", [])
            out["also"] = case.get("also", [])
            if (mine, also) != (out["expected"], out["also"]):
                report(f"{path.name}::{case['name']} xfail ({case['xfail']}); the tool gives:\n"
                       + dump({"expected": mine, "also": also}))
            else:
                report(f"{path.name}::{case['name']} xfail now passes: remove 'xfail'")
        else:
            out["expected"] = mine
            out["also"] = also
        cases.append(out)
    return dump({"rule": rule.code, "name": rule.name, "cases": cases})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("codes", nargs="*", help="rule codes or code prefixes (default: every fixture)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = parser.parse_args(argv)

    from zeroadvisor.advisor import registry

    missing = [rule for rule in registry.ALL if not fixture_path(rule).is_file()]
    for rule in missing:
        print(f"missing fixture: {fixture_path(rule).relative_to(REPO)}", file=sys.stderr)
    changed = 0
    for path in fixture_files():
        if args.codes and not any(path.name.upper().startswith(c.upper()) for c in args.codes):
            continue
        old = path.read_text("utf-8")
        new = updated(path, lambda line: print(line, file=sys.stderr))
        if new == old:
            continue
        changed += 1
        name = str(path.relative_to(REPO))
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), name, name))
        else:
            path.write_text(new, "utf-8")
            print(f"updated {name}")
    if args.check and changed:
        print(f"{changed} fixture file(s) out of date: run tools/update_rule_fixtures.py and review the diff",
              file=sys.stderr)
    return 1 if (args.check and changed) or missing else 0


if __name__ == "__main__":
    sys.exit(main())

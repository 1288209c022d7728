"""A longer, bounded fuzz run over the library's entry points: lint, check and the reporters.

Generates DeepSpeed configs as users write them (strict JSON and hjson: comments, unquoted keys,
quoteless values, trailing commas, a brace-less root, YAML-ish placeholders) around the keys of
the committed schema, with hostile values (huge and negative integers, NaN/Infinity spellings,
1e308, deep nesting, control and bidi characters, lone surrogates, NBSP in keys, duplicate keys)
and random byte-level mutations of the text. Each input goes through

    lint_text (every --integration, with and without --gpus)   -> findings
    check_document (a 7B model on 8 x 80 GB)                    -> findings + estimate
    every --format renderer                                     -> text

and must keep the contract: no exception, one-line messages, fixes that are JSON (no NaN), the
JSON and SARIF output parse as JSON. A share of the runs (--inputs, default half) fuzzes the inputs beside
the config instead: the public API's keywords (check, estimate, lint: a result or one of
api.EXPECTED_ERRORS), the launch command, the Trainer's arguments, Accelerate configs and the project
configuration (each parser: a result or its own error), and ``check`` end to end through the command line
(a defined exit code, never 3); a finding there prints the choices that made the input.

Reports the executions, the unique failures (exception type
and the innermost zeroadvisor frame) with the smallest input of each, and every input slower
than --slow seconds; an input still running after --hang seconds is stopped (SIGALRM) and
reported as a hang. Exits 1 on any finding. Plain ``random`` with a seed: the same seed and
budget replay the same inputs.

    python benchmarks/fuzz.py --seconds 300 --seed 1
    python benchmarks/fuzz.py --max-examples 2000 --out /tmp/fuzz-findings
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from zeroadvisor.advisor.check import CheckOptions, check_document  # noqa: E402
from zeroadvisor.config.source import ParseError, parse  # noqa: E402
from zeroadvisor.deepspeed import schema  # noqa: E402
from zeroadvisor.lint.context import INTEGRATIONS, LintOptions  # noqa: E402
from zeroadvisor.memory.cluster import Cluster  # noqa: E402
from zeroadvisor.model.spec import ModelSpec, TrainingShape  # noqa: E402
from zeroadvisor.report import CHECK_FORMATS, LINT_FORMATS, Report, render  # noqa: E402
from zeroadvisor.rules.linter import lint_text  # noqa: E402

CHECK = CheckOptions(model=ModelSpec(parameters=7_000_000_000, num_layers=32, hidden_size=4096, num_attention_heads=32,
                                     intermediate_size=11008, vocab_size=32000),
                     shape=TrainingShape(sequence_length=2048),
                     cluster=Cluster(gpus=8, gpu_memory=80 * 2**30, cpu_memory=512 * 10**9))

# Hostile scalars, written as text so that hjson's own number and string grammar is exercised.
NUMBERS = ["0", "-1", "1", "2", "3", "4", "8", "0.5", "1e-320", "1e308", "1e309", "-1e309", "15099494.4", "5e8",
           "9223372036854775808", "-9223372036854775809", "1" + "0" * 30, "1" + "0" * 400, "1000000000000",
           "NaN", "Infinity", "-Infinity", "1.0", "-0", "0.0000001", "2e63"]
STRINGS = ["auto", "cpu", "nvme", "none", "gpu", "", "2", "true", "yes", "fp16", "bf16", "Adam", "AdamW", "lamb",
           "OneBitAdam", "WarmupLR", "WarmupCosine", "ZERO_STAGE", "${BATCH}", "\u00a0", "a\u2028b", "\u202eevil",
           "::error file=x::y", "\x1b[31mred", "<img src=x>", "```", "@team", "\\ud800", "x" * 300, "é", "日本"]
WEIRD_KEYS = ["train_batch_size\u00a0", "stage\x0c", "zero_optimization\u0085", "zero_optimisation", "_comment",
              "\u202ekey", "", " ", "a/b", "a~b", "ключ", "🚀", "train_batch_size", "stage3_prefetch_bucket_size",
              "::add-mask::x", "<b>k</b>"]
PLACEHOLDERS = ["ZERO_STAGE", "CONFIG_BATCH_SIZE,", "LOG_INTERVAL", "${GLOBAL_BATCH}", "PRESCALE_GRAD"]


def _schema_keys():
    top = schema.load()["properties"]
    nested = {name: list(node.get("properties", {})) for name, node in top.items() if node.get("properties")}
    return list(top), nested


TOP_KEYS, NESTED_KEYS = _schema_keys()


class Hang(Exception):
    pass


@dataclass
class Failure:
    kind: str
    where: str
    detail: str
    inputs: list[str] = field(default_factory=list)

    @property
    def smallest(self) -> str:
        return min(self.inputs, key=len)


# --------------------------------------------------------------------------------------------
# Generation
# --------------------------------------------------------------------------------------------

class Generator:
    def __init__(self, rng: random.Random):
        self.rng = rng

    def scalar(self) -> tuple[str, str]:
        """(kind, text): kind is number, string, literal or placeholder."""
        r = self.rng.random()
        if r < 0.45:
            return "number", self.rng.choice(NUMBERS)
        if r < 0.85:
            return "string", self.rng.choice(STRINGS)
        if r < 0.95:
            return "literal", self.rng.choice(["true", "false", "null"])
        return "placeholder", self.rng.choice(PLACEHOLDERS)

    def key(self, section: str | None) -> str:
        r = self.rng.random()
        if r < 0.12:
            return self.rng.choice(WEIRD_KEYS)
        pool = NESTED_KEYS.get(section) if section else TOP_KEYS
        return self.rng.choice(pool or TOP_KEYS)

    def value(self, section: str | None, depth: int):
        """A tree of ("obj", [(key, value)]), ("arr", [...]) and scalars."""
        if section in NESTED_KEYS and depth < 4 and self.rng.random() < 0.8:
            return ("obj", [(k, self.value(k if k in NESTED_KEYS else None, depth + 1))
                            for k in (self.key(section) for _ in range(self.rng.randint(0, 6)))])
        r = self.rng.random()
        if r < 0.05 and depth < 6:
            return ("arr", [self.value(None, depth + 1) for _ in range(self.rng.randint(0, 3))])
        if r < 0.08:
            return self.deep(self.rng.choice([50, 150, 199, 200, 201, 400]))
        return self.scalar()

    def deep(self, levels: int):
        """Nesting far beyond real configs (DeepSpeed's recursive hjson decoder stops near 1000):
        rendered without recursion, as raw text."""
        opens = [self.rng.choice(["[", '{"d": ']) for _ in range(levels)]
        closes = "".join("]" if o == "[" else "}" for o in reversed(opens))
        return ("raw", "".join(opens) + self.rng.choice(NUMBERS) + closes)

    def config(self):
        members = []
        for _ in range(self.rng.randint(0, 10)):
            key = self.key(None)
            members.append((key, self.value(key if key in NESTED_KEYS else None, 0)))
        if members and self.rng.random() < 0.1:
            members.append(self.rng.choice(members))  # a duplicate key
        if self.rng.random() < 0.02:
            return self.rng.choice([("arr", []), ("literal", "null"), ("number", "8"), ("string", "x")])
        return ("obj", members)

    # -- rendering -------------------------------------------------------------------------
    def render(self, node, hjson: bool, indent: int = 0) -> str:
        kind = node[0]
        pad = "\n" + "  " * (indent + 1) if hjson else ""
        if kind == "obj":
            parts = [f"{self.render_key(k, hjson)}: {self.render(v, hjson, indent + 1)}" for k, v in node[1]]
            sep = self.rng.choice([",", "\n", ",\n"]) if hjson else ", "
            body = sep.join(pad + p for p in parts) if hjson else sep.join(parts)
            trailing = "," if hjson and parts and self.rng.random() < 0.2 else ""
            comment = self.rng.choice(["", " // note", " # note", " /* note */"]) if hjson else ""
            return "{" + comment + body + trailing + ("\n" + "  " * indent if hjson else "") + "}"
        if kind == "arr":
            return "[" + ", ".join(self.render(v, hjson, indent + 1) for v in node[1]) + "]"
        text = node[1]
        if kind == "raw":
            return text
        if kind == "string":
            if hjson and self.rng.random() < 0.3 and text and text.strip() == text and text[0].isalpha():
                return text + "\n" + "  " * indent  # quoteless: runs to the end of the line
            return json.dumps(text, ensure_ascii=self.rng.random() < 0.5).replace("\\\\ud800", "\\ud800")
        if kind == "placeholder":
            return text + "\n" + "  " * indent
        return text

    def render_key(self, key: str, hjson: bool) -> str:
        if hjson and key.isidentifier() and self.rng.random() < 0.5:
            return key
        return json.dumps(key, ensure_ascii=self.rng.random() < 0.5)

    def text(self) -> str:
        tree = self.config()
        hjson = self.rng.random() < 0.4
        text = self.render(tree, hjson)
        if hjson and tree[0] == "obj" and self.rng.random() < 0.1:
            text = text.strip()[1:-1]  # a brace-less root
        if self.rng.random() < 0.15:
            text = self.mutate(text)
        if self.rng.random() < 0.05:
            text = "\ufeff" + text
        return text

    def mutate(self, text: str) -> str:
        chars = list(text)
        for _ in range(self.rng.randint(1, 4)):
            op = self.rng.random()
            at = self.rng.randint(0, len(chars))
            if op < 0.3 and chars:
                del chars[min(at, len(chars) - 1)]
            elif op < 0.7:
                chars.insert(at, self.rng.choice(['"', "'", "{", "}", "[", "]", ",", ":", "\n", "#", "/", "\\",
                                                  "\x00", "\u00a0", "\u2028", "\r", "\ud800", "e", "-", "0"]))
            else:
                chars = chars[:at]
        return "".join(chars)


# --------------------------------------------------------------------------------------------
# Running one input against the contract
# --------------------------------------------------------------------------------------------

def _contract(findings, where: str) -> None:
    for finding in findings:
        if not finding.message or "\n" in finding.message:
            raise AssertionError(f"{where}: {finding.code} message is empty or spans lines")
        if finding.fix is not None:
            json.dumps(finding.fix, allow_nan=False)  # ValueError on NaN/Infinity: not JSON
        json.dumps(finding.to_dict(), allow_nan=False)


def _reports(findings, check_result) -> None:
    # markdown is a check format: it renders a CheckResult (none when the text does not parse)
    for fmt in CHECK_FORMATS if check_result is not None else LINT_FORMATS:
        out = render(fmt, Report(findings=findings, check=check_result, path="fuzz.json"))
        if fmt in ("json", "sarif"):
            json.loads(out)


def run_one(text: str, rng: random.Random) -> None:
    integration = rng.choice(INTEGRATIONS)
    gpus = rng.choice([None, 1, 3, 8, 1 << 20])
    findings = lint_text(text, "fuzz.json", LintOptions(integration=integration, gpus=gpus))
    _contract(findings, "lint")
    try:
        doc = parse(text, "fuzz.json")
    except ParseError:
        _reports(findings, None)
        return
    result = check_document(doc, CHECK)
    _contract(result.findings, "check")
    _reports(result.findings, result)


# --------------------------------------------------------------------------------------------
# The inputs besides the DeepSpeed config: the public API's keywords, the launch command, the Trainer's
# arguments, Accelerate YAML, the project configuration, and check end to end through the command line.
# Each may end only in a result or a documented error (api.EXPECTED_ERRORS), one line.
# --------------------------------------------------------------------------------------------

# Numbers as text where counts go: zero, signs, fractions, digits int() refuses ("²"), past int()'s 4,300 digits,
# past every bound and past the float range.
COUNT_TEXTS = ["0", "1", "2", "8", "00", "-1", "1.5", "1e3", "²", "٣", "x", "", " ", "gpu", "auto", "1:4", "0:0",
               "9" * 5000, str(2**24), str(2**24 + 1), "4096", "1" + "0" * 400]
VALUES = [0, -1, 1, 2, 8, 1.5, -0.0, float("nan"), float("inf"), 2**24 + 1, 2**63, 10**400, True, False, None, "", "x",
          "²", "1e400", "0B", "1B", "1MiB", "80GiB", "1EB", "2EB", "99.9999999999%", "100%", "-5%", "0%", "auto",
          "fp16", "full", "none", "all-linear", "A100-SXM4-80GB", "7B", "1e18", "1e31", "ZA101", [], [0], ["x"], {},
          b"x"]
API_KEYWORDS = ["params", "gpus", "gpus_per_node", "gpu", "gpu_memory", "cpu_memory", "nvme", "headroom", "accounting",
                "seq_len", "micro_batch", "precision", "stage", "activation_checkpointing", "flash_attention",
                "target_len", "padding", "load_dtype", "zero_init", "meta_load", "optim", "liger_kernel",
                "tensor_parallel", "pipeline_parallel", "sequence_parallel", "expert_parallel", "peft", "lora_r",
                "lora_target_modules", "quantization", "inter_node_bandwidth", "cpu_cores", "nvme_bandwidth",
                "efficiency", "launcher"]
CHECK_KEYWORDS = ["integration", "unit", "name", "select", "ignore"]
LINT_KEYWORDS = ["gpus", "select", "ignore", "integration", "exclude", "default_excludes"]
LAUNCHER_OPTIONS = {
    "torchrun": ["--nnodes", "--nproc-per-node", "--nproc_per_node", "--standalone"],
    "deepspeed": ["--num_gpus", "--num_nodes", "--num_accelerators", "--include", "--exclude", "--hostfile"],
    "accelerate launch": ["--num_processes", "--num_machines", "--zero_stage", "--gradient_accumulation_steps",
                          "--config_file", "--mixed_precision"],
    "python": ["-u"],
}
SCRIPT_OPTIONS = ["--deepspeed", "--max_seq_length", "--per_device_train_batch_size", "--gradient_accumulation_steps",
                  "--bf16", "--gradient_checkpointing", "--model_name_or_path", "--max_grad_norm", "--optim"]
TRAINER_KEYS = ["per_device_train_batch_size", "gradient_accumulation_steps", "max_seq_length", "bf16", "fp16",
                "gradient_checkpointing", "max_grad_norm", "optim", "deepspeed", "model_name_or_path",
                "micro_batch_size", "batch_size", "sequence_len", "base_model", "cutoff_len", "model_max_length",
                "num_epochs", "use_liger_kernel"]
ACCELERATE_KEYS = ["num_processes", "num_machines", "mixed_precision", "distributed_type", "machine_rank",
                   "deepspeed_config"]
PROJECT_LINES = ["gpus = {n}", "gpus-per-node = {n}", "gpu-memory = \"{s}\"", "headroom = \"{s}\"", "gpu = \"{s}\"",
                 "cpu-memory = \"{s}\"", "select = [\"{s}\"]", "seq-len = {n}", "micro-batch = {n}",
                 "fail-on = \"{s}\"", "format = \"{s}\"", "cpu-cores = {n}", "efficiency = \"{s}\""]
PROJECT_TABLES = ["", "[cluster]", "[training]", "[run]", "[gpus.my-card]"]


class InputsGenerator:
    """Random inputs for the parsers around the config, from the tables above."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def count(self) -> str:
        return self.rng.choice(COUNT_TEXTS)

    def value(self):
        return self.rng.choice(VALUES)

    def keywords(self, names: list[str], most: int = 3) -> dict:
        return {self.rng.choice(names): self.value() for _ in range(self.rng.randint(0, most))}

    def launch(self) -> str:
        import shlex

        launcher = self.rng.choice(list(LAUNCHER_OPTIONS))
        words = [] if self.rng.random() < 0.8 else [f"CUDA_VISIBLE_DEVICES={self.rng.choice(['', '0', '0,1', ','])}"]
        words += launcher.split()
        for _ in range(self.rng.randint(0, 3)):
            option = self.rng.choice(LAUNCHER_OPTIONS[launcher])
            words += [option] if option in ("--standalone", "-u") else [option, self.count()]
        words += ["train.py", "--deepspeed", "ds.json"]
        for _ in range(self.rng.randint(0, 3)):
            words += [self.rng.choice(SCRIPT_OPTIONS), self.count()]
        return shlex.join(words)

    def mapping(self, keys: list[str]) -> dict:
        return {self.rng.choice(keys): self.rng.choice([self.value(), self.count()])
                for _ in range(self.rng.randint(0, 6))}

    def accelerate(self) -> dict:
        data = self.mapping(ACCELERATE_KEYS)
        data.setdefault("distributed_type", "DEEPSPEED")
        if self.rng.random() < 0.7:
            data["deepspeed_config"] = {"zero_stage": self.rng.choice([0, 2, 3, "x", 10**400]),
                                        "gradient_clipping": self.rng.choice([1.0, 10**400, "auto"])}
        return data

    def project(self) -> str:
        if self.rng.random() < 0.1:  # nesting past tomllib's recursion
            depth = self.rng.choice([10, 500, 3000])
            return "a = " + "[" * depth + "]" * depth + "\n"
        lines = []
        for _ in range(self.rng.randint(0, 5)):
            if self.rng.random() < 0.3:
                lines.append(self.rng.choice(PROJECT_TABLES))
            number = self.count()
            number = number if number.isascii() and number.strip().lstrip("-").isdigit() else "8"
            text = str(self.value()).replace("\\", "").replace('"', "")
            lines.append(self.rng.choice(PROJECT_LINES).format(n=number, s=text))
        return "\n".join(lines) + "\n"


def _documented(call, *args, **kwargs):
    """``call``'s result, or None where it raised a documented error; any other exception propagates (a finding)."""
    from zeroadvisor import api

    try:
        return call(*args, **kwargs)
    except (*api.EXPECTED_ERRORS, api.PreflightError) as err:
        if "\n" in str(err) and not isinstance(err, api.PreflightError):
            raise AssertionError(f"{type(err).__name__} message spans lines: {str(err)[:200]!r}") from None
        return None


def run_api(gen: InputsGenerator, text: str) -> None:
    """check / estimate / lint through the public API, with the generated config as text and random keywords."""
    import warnings

    import zeroadvisor

    cluster = {"params": "7B", "gpus": 8, "gpu_memory": "80GiB"}
    which = gen.rng.choice(["check", "estimate", "lint"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if which == "lint":
            _documented(zeroadvisor.lint, text=text, **gen.keywords(LINT_KEYWORDS))
            return
        try:
            config = json.loads(text)
        except ValueError:
            config = {}
        config = config if isinstance(config, dict) else {}
        keywords = {**cluster, **gen.keywords(API_KEYWORDS + (CHECK_KEYWORDS if which == "check" else []))}
        _documented(getattr(zeroadvisor, which), config, **keywords)


def run_parsers(gen: InputsGenerator, folder: Path) -> None:
    """The launch command, the Trainer's arguments, an Accelerate config and the project configuration, each read by
    its own parser: a result or the parser's documented error."""
    from zeroadvisor.config import project
    from zeroadvisor.config.launch import parse_launch
    from zeroadvisor.config.training_args import from_mapping
    from zeroadvisor.deepspeed import accelerate_map
    from zeroadvisor.inputs import project as checked_project

    _documented(parse_launch, gen.launch(), str(folder))
    _documented(from_mapping, gen.mapping(TRAINER_KEYS), "fuzz.yaml")
    try:
        document = parse(json.dumps(gen.accelerate(), default=str), "acc.json")
    except ParseError:  # a generated value past the reader's limits: the config fuzz covers the reader
        document = None
    if document is not None:
        accelerate_map.build(document, cwd=str(folder))
    toml = folder / ".zeroadvisor.toml"
    toml.write_text(gen.project(), "utf-8")
    config = _documented(project.load, str(toml))
    if config is not None:
        _documented(checked_project.checked, config)


def run_cli_check(gen: InputsGenerator, folder: Path) -> None:
    """``check`` end to end, in this process, with a launch command or Trainer arguments and a project configuration:
    a defined exit code, never an internal error (3)."""
    import contextlib
    import io

    from zeroadvisor import cli as command_line
    from zeroadvisor.inputs import project

    (folder / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2}}')
    (folder / ".zeroadvisor.toml").write_text(gen.project() if gen.rng.random() < 0.5 else "", "utf-8")
    argv = ["check", "ds.json", "--params", gen.rng.choice(["7B", "1e18", "1e31", "x"]), "--gpu-memory",
            gen.rng.choice(["80GiB", "1B", "1EB"])]
    if gen.rng.random() < 0.5:
        argv += ["--launch", gen.launch()]
    else:
        argv += ["--gpus", gen.count()]
    if gen.rng.random() < 0.3:
        (folder / "args.json").write_text(json.dumps(gen.mapping(TRAINER_KEYS), default=str))
        argv += ["--training-args", "args.json"]
    if gen.rng.random() < 0.3:
        argv += ["--headroom", gen.rng.choice(["10%", "99.9999999999%", "0", "1"])]
    err = io.StringIO()
    project.forget()
    with contextlib.chdir(folder), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = command_line.run(argv)
    if code not in (0, 1, 2, 4, 5):
        raise AssertionError(f"check exit {code}: {err.getvalue()[:300]!r} for {argv!r}"[:600])


class Recorded:
    """The generator's random source, recording each choice: the input of a finding, printed as they were chosen."""

    def __init__(self, rng: random.Random):
        self.rng, self.chosen = rng, []

    def random(self) -> float:
        return self.rng.random()

    def randint(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def choice(self, seq):
        value = self.rng.choice(seq)
        self.chosen.append(value if not isinstance(value, str) or len(value) < 60 else f"{value[:20]}...({len(value)})")
        return value


def run_inputs(text: str, rng: random.Random, folder: Path) -> list:
    """One of the inputs beside the config, chosen at random; what was chosen is ``recorded`` (for the report)."""
    recorded = Recorded(rng)
    recorded_inputs[:] = [recorded.chosen]
    gen = InputsGenerator(recorded)
    target = recorded.choice(["api", "parsers", "cli-check"])
    if target == "api":
        run_api(gen, text)
    elif target == "parsers":
        run_parsers(gen, folder)
    else:
        run_cli_check(gen, folder)
    return recorded.chosen


recorded_inputs: list[list] = [[]]  # the choices of the inputs run now (run_inputs)


def _where(exc: BaseException) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f"{os.sep}zeroadvisor{os.sep}" in f.filename]
    if not frames:
        frames = traceback.extract_tb(exc.__traceback__)[-1:]
    if not frames:
        return "?"
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} {frame.name}"


def _on_alarm(signum, frame):
    raise Hang()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    parser.add_argument("--max-examples", type=int, default=None, help="stop after this many inputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow", type=float, default=2.0, help="report inputs slower than this (s)")
    parser.add_argument("--hang", type=int, default=10, help="stop an input after this many seconds (a hang)")
    parser.add_argument("--out", type=Path, help="write the smallest input of each finding here")
    parser.add_argument("--inputs", type=float, default=0.5,
                        help="share of the runs that fuzz the inputs beside the config (the API's keywords, the "
                             "launch command, Trainer arguments, Accelerate YAML, the project configuration, check "
                             "end to end) instead of the config itself (default 0.5)")
    return parser.parse_args(argv)


@dataclass
class Session:
    """One fuzz run's findings and counts."""

    failures: dict[tuple[str, str], Failure] = field(default_factory=dict)
    slow: list[tuple[float, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"config": 0, "inputs": 0})


def _run_once(args: argparse.Namespace, session: Session, generator: Generator, rng: random.Random,
              folder: Path) -> None:
    """One input (a config, or the inputs beside it), under the hang alarm; what it breaks is recorded."""
    text = generator.text()
    side = "inputs" if rng.random() < args.inputs else "config"
    session.counts[side] += 1
    t0 = time.perf_counter()
    signal.alarm(args.hang)
    hung = False
    try:
        if side == "inputs":
            run_inputs(text, rng, folder)
        else:
            run_one(text, rng)
    except Hang:
        hung = True
        session.failures.setdefault(("hang", "?"), Failure("hang", f"> {args.hang} s", "stopped")).inputs.append(text)
    except Exception as exc:  # noqa: BLE001 - every exception is a finding: the contract is "never raise"
        key = (type(exc).__name__, _where(exc))
        shown = repr(recorded_inputs[0])[:2000] if side == "inputs" else text
        session.failures.setdefault(key, Failure(key[0], key[1], str(exc)[:200])).inputs.append(shown)
    finally:
        signal.alarm(0)
    took = time.perf_counter() - t0
    if took > args.slow and not hung:
        session.slow.append((took, text if side == "config" else repr(recorded_inputs[0])[:2000]))


def _report(args: argparse.Namespace, session: Session, executions: int, elapsed: float) -> None:
    counts = session.counts
    print(f"executions: {executions} in {elapsed:.0f} s (seed {args.seed}); unique failures: {len(session.failures)}; "
          f"slower than {args.slow:g} s: {len(session.slow)} (configs {counts['config']}, other inputs "
          f"{counts['inputs']})")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for n, ((kind, where), failure) in enumerate(sorted(session.failures.items())):
        print(f"  [{len(failure.inputs)}x] {kind} at {where}: {failure.detail}")
        print(f"      smallest input ({len(failure.smallest)} chars): {failure.smallest[:300]!r}")
        if args.out:
            (args.out / f"failure-{n}.txt").write_text(failure.smallest, "utf-8", errors="surrogatepass")
    for n, (took, text) in enumerate(sorted(session.slow, reverse=True)[:10]):
        print(f"  slow {took:.1f} s ({len(text)} chars): {text[:200]!r}")
        if args.out:
            (args.out / f"slow-{n}.txt").write_text(text, "utf-8", errors="surrogatepass")


def main(argv: list[str] | None = None) -> int:
    import tempfile

    args = _arguments(argv)
    rng = random.Random(args.seed)
    generator = Generator(rng)
    session = Session()
    executions = 0
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _on_alarm)
    with tempfile.TemporaryDirectory(prefix="zeroadvisor-fuzz-") as folder:
        while time.monotonic() - started < args.seconds and (args.max_examples is None
                                                               or executions < args.max_examples):
            executions += 1
            _run_once(args, session, generator, rng, Path(folder))
    _report(args, session, executions, time.monotonic() - started)
    return 1 if session.failures or session.slow else 0


if __name__ == "__main__":
    sys.exit(main())

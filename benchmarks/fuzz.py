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
JSON and SARIF output parse as JSON. Reports the executions, the unique failures (exception type
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
from zeroadvisor.memory.cluster import Cluster  # noqa: E402
from zeroadvisor.config.source import ParseError, parse  # noqa: E402
from zeroadvisor.deepspeed import schema  # noqa: E402
from zeroadvisor.lint.context import INTEGRATIONS, LintOptions  # noqa: E402
from zeroadvisor.rules.linter import lint_text  # noqa: E402
from zeroadvisor.model.spec import ModelSpec, TrainingShape  # noqa: E402
from zeroadvisor.report import CHECK_FORMATS, LINT_FORMATS, Report, render  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    parser.add_argument("--max-examples", type=int, default=None, help="stop after this many inputs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--slow", type=float, default=2.0, help="report inputs slower than this (s)")
    parser.add_argument("--hang", type=int, default=10, help="stop an input after this many seconds (a hang)")
    parser.add_argument("--out", type=Path, help="write the smallest input of each finding here")
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    generator = Generator(rng)
    failures: dict[tuple[str, str], Failure] = {}
    slow: list[tuple[float, str]] = []
    executions = 0
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _on_alarm)
    while time.monotonic() - started < args.seconds and (args.max_examples is None or executions < args.max_examples):
        text = generator.text()
        executions += 1
        t0 = time.perf_counter()
        signal.alarm(args.hang)
        hung = False
        try:
            run_one(text, rng)
        except Hang:
            hung = True
            failures.setdefault(("hang", "?"), Failure("hang", f"> {args.hang} s", "stopped")).inputs.append(text)
        except Exception as exc:  # every exception is a finding: the contract is "never raise"
            key = (type(exc).__name__, _where(exc))
            failures.setdefault(key, Failure(key[0], key[1], str(exc)[:200])).inputs.append(text)
        finally:
            signal.alarm(0)
        took = time.perf_counter() - t0
        if took > args.slow and not hung:
            slow.append((took, text))

    elapsed = time.monotonic() - started
    print(f"executions: {executions} in {elapsed:.0f} s (seed {args.seed}); unique failures: {len(failures)}; "
          f"slower than {args.slow:g} s: {len(slow)}")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for n, ((kind, where), failure) in enumerate(sorted(failures.items())):
        print(f"  [{len(failure.inputs)}x] {kind} at {where}: {failure.detail}")
        print(f"      smallest input ({len(failure.smallest)} chars): {failure.smallest[:300]!r}")
        if args.out:
            (args.out / f"failure-{n}.txt").write_text(failure.smallest, "utf-8", errors="surrogatepass")
    for n, (took, text) in enumerate(sorted(slow, reverse=True)[:10]):
        print(f"  slow {took:.1f} s ({len(text)} chars): {text[:200]!r}")
        if args.out:
            (args.out / f"slow-{n}.txt").write_text(text, "utf-8", errors="surrogatepass")
    return 1 if failures or slow else 0


if __name__ == "__main__":
    sys.exit(main())

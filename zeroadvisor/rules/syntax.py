"""Rules about the file itself: can DeepSpeed read it, and can the HF/Accelerate path?"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.lint.context import Integration
from zeroadvisor.lint.findings import Severity
from zeroadvisor.lint.rule import Example, Hit, Rule

if TYPE_CHECKING:
    from zeroadvisor.lint.context import Context


def _no_hits(ctx: Context) -> Iterable[Hit]:
    # Parse errors are raised by the loader and reported by the engine with this rule's
    # identity (zeroadvisor.lint.engine.parse_error_findings); there is nothing to walk.
    return ()


INVALID_SYNTAX = Rule(
    code="ZA001",
    name="invalid-syntax",
    severity=Severity.ERROR,
    summary="The file cannot be parsed by DeepSpeed's loader.",
    explanation=(
        "DeepSpeed reads a config path with hjson (runtime/config.py). Text that hjson cannot "
        "read (a stray word, a Markdown fence after the closing brace, an unclosed string) stops "
        "deepspeed.initialize before training. Not UTF-8, binary content, numbers beyond a 64-bit "
        "float and files far larger than any config are reported here too. Fix the text at the "
        "reported line and column."
    ),
    check=_no_hits,
    examples=(
        Example('{"train_batch_size": 8}\n```\n', fails=True),
        Example('{"train_batch_size": 8}\n', fails=False),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig.__init__ (hjson.load)",
    needs_data=False,
)


def _has_auto(data: object) -> bool:
    """Whether any value in the parsed file is the string "auto" (iterative: a deep file is no recursion)."""
    stack = [data]
    while stack:
        node = stack.pop()
        if node == "auto":
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


def _json_load_launches(ctx: Context) -> str | None:
    """Why only a json.load reader (the Trainer, Accelerate: HfDeepSpeedConfig) can launch this file, or None
    when plain DeepSpeed, which reads the path with hjson, may launch it."""
    integration = ctx.options.integration
    if integration in _JSON_LOAD_INTEGRATIONS:
        return f"--integration {integration} says it is launched by one of them"
    if integration is Integration.ANY and _has_auto(ctx.data):
        return "its \"auto\" values need one of them (plain DeepSpeed fills no \"auto\")"
    return None


def _strict_json(ctx: Context) -> Iterator[Hit]:
    # A template placeholder is reported once, by template-placeholder, not again here.
    placeholders = {ctx.doc.values[e.pointer].start for e in ctx.events("template")
                    if e.pointer in ctx.doc.values} if isinstance(ctx.data, dict) else set()
    fatal = _json_load_launches(ctx) if ctx.doc.deviations else None
    for deviation in ctx.doc.deviations:
        if deviation.kind == "quoteless-string" and deviation.offset in placeholders:
            continue
        if fatal:
            yield Hit("", f"{deviation.detail}: the Hugging Face Trainer and Accelerate read this file with json.load "
                          f"and fail at launch; {fatal}, so the run cannot start; use strict JSON",
                      offset=deviation.offset, severity=Severity.ERROR)
            continue
        yield Hit(
            "",
            f"{deviation.detail}: DeepSpeed's hjson loader accepts it, but the Hugging Face "
            "Trainer and Accelerate read this file with json.load and will fail; use strict JSON",
            offset=deviation.offset,
        )


NOT_STRICT_JSON = Rule(
    code="ZA002",
    name="not-strict-json",
    severity=Severity.WARNING,
    summary="Comments, trailing commas, unquoted keys or values: fine for DeepSpeed, fatal for json.load.",
    explanation=(
        "DeepSpeed parses a config path with hjson, which accepts comments, trailing commas, "
        "unquoted keys and quoteless values. The Hugging Face Trainer and Accelerate read the same file "
        "with json.load (accelerate's HfDeepSpeedConfig, which transformers' subclasses), which raises on all "
        "of them. A file with \"auto\" values is meant for those two (plain DeepSpeed fills no \"auto\"), so "
        "there the finding is an error: the run cannot start. Write strict JSON so the file works with every "
        "launcher."
    ),
    check=_strict_json,
    examples=(
        Example('{"train_batch_size": 8,}', fails=True),
        Example('{"train_batch_size": "auto", // the Trainer fills it\n "gradient_clipping": 1.0}', fails=True),
        Example('{"train_batch_size": 8}', fails=False),
    ),
    source="transformers integrations/deepspeed.py HfDeepSpeedConfig -> accelerate utils/deepspeed.py "
           "HfDeepSpeedConfig.__init__ (json.load); deepspeed/runtime/config.py DeepSpeedConfig (hjson.load)",
    needs_data=False,
    severity_varies="error when the file has an \"auto\" value, or with --integration hf-trainer or accelerate: "
                    "the launchers that can run it read it with json.load and fail at launch",
)


def _duplicates(ctx: Context) -> Iterator[Hit]:
    for dup in ctx.doc.duplicates:
        line, column = ctx.doc.position(dup.first.start)
        key = dup.pointer.rsplit("/", 1)[-1]
        yield Hit(
            dup.pointer,
            f"duplicate key {key!r} (first at line {line}, column {column}): DeepSpeed raises "
            "'Duplicate keys in DeepSpeed config'; json.load (HF Trainer, Accelerate) silently keeps "
            "the last value. Keep one",
            offset=dup.second.start,
        )


DUPLICATE_KEY = Rule(
    code="ZA003",
    name="duplicate-key",
    severity=Severity.ERROR,
    summary="A key appears twice in the same object.",
    explanation=(
        "DeepSpeed loads config files with dict_raise_error_on_duplicate_keys and raises "
        "ValueError at launch. The Hugging Face Trainer and Accelerate use json.load, which keeps "
        "the last value without a word, so the same file behaves differently per launcher. Delete "
        "one of the two."
    ),
    check=_duplicates,
    examples=(
        Example('{"train_batch_size": 8, "train_batch_size": 16}', fails=True),
        Example('{"train_batch_size": 16}', fails=False),
    ),
    source="deepspeed/runtime/config_utils.py dict_raise_error_on_duplicate_keys",
)


def _not_an_object(ctx: Context) -> Iterator[Hit]:
    data = ctx.data
    if isinstance(data, dict):
        # No root value in the text (blank, or only comments): hjson returns {} for it.
        if not data and "" not in ctx.doc.values:
            yield Hit("", "the file is empty: DeepSpeed reads it as {} and fails on the missing batch size",
                      position=(1, 1))
        return
    kind = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(data), "a number")
    yield Hit("", f"the config is {kind}, not an object: DeepSpeed needs a JSON object of settings",
              at="value", position=(1, 1) if not ctx.doc.values.get("") else None)


NOT_AN_OBJECT = Rule(
    code="ZA004",
    name="not-an-object",
    severity=Severity.ERROR,
    summary="The file is empty or its top level is not a JSON object.",
    explanation=(
        "A DeepSpeed config is one JSON object. An empty file parses as {} under hjson and fails "
        "later on the missing batch size; an array or a bare value fails when DeepSpeed calls "
        ".get on it."
    ),
    check=_not_an_object,
    examples=(
        Example("[]", fails=True),
        Example('{"train_batch_size": 8}', fails=False),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig._initialize_params",
    supersedes=("no-batch-size",),  # "the file is empty" already says the batch size is missing
    needs_data=False,  # a top-level null parses to None, which is exactly what this rule reports
)


def _templates(ctx: Context) -> Iterator[Hit]:
    for event in ctx.events("template"):
        yield Hit(
            event.pointer,
            f"unquoted placeholder {event.data['raw']!r}: this file is a template (substitute the "
            "value before use); hjson would read the placeholder as a string",
            at="value",
        )


TEMPLATE_PLACEHOLDER = Rule(
    code="ZA005",
    name="template-placeholder",
    severity=Severity.ERROR,
    summary="An unquoted placeholder such as ZERO_STAGE stands where a value belongs.",
    explanation=(
        "Shell/sed templates (Megatron-DeepSpeed examples_deepspeed/**/ds_config_*TEMPLATE*.json) "
        "leave placeholders like CONFIG_BATCH_SIZE unquoted until a script substitutes them. hjson "
        "reads such a placeholder as the string 'CONFIG_BATCH_SIZE', so the raw template fails with "
        "a misleading type error. Lint the generated config, or substitute the value."
    ),
    check=_templates,
    examples=(
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": ZERO_STAGE\n}}', fails=True),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 2}}', fails=False),
    ),
    source="corpus FINDINGS A10; hjson decoder scantfnns",
)

# Keys that say what kind of file it is, for the message.
_KINDS = (("model_type", "a Hugging Face model config"), ("compute_environment", "an Accelerate launcher config"),
          ("distributed_type", "an Accelerate launcher config"))


def _foreign(ctx: Context) -> Iterator[Hit]:
    data = ctx.data
    if ctx.foreign and isinstance(data, dict):  # foreign keys: the document is a mapping
        kind = next((words for key, words in _KINDS if key in data), "not a DeepSpeed config")
        shown = ", ".join(repr(k) for k in ctx.foreign[:4]) + (", ..." if len(ctx.foreign) > 4 else "")
        yield Hit("", f"no DeepSpeed key at the top level ({shown}): this looks like {kind}; DeepSpeed would "
                      "ignore every key here", position=(1, 1))


NOT_A_DEEPSPEED_CONFIG = Rule(
    code="ZA006",
    name="not-a-deepspeed-config",
    severity=Severity.WARNING,
    summary="A JSON object without a single DeepSpeed key.",
    explanation=(
        "When none of the top-level keys is one DeepSpeed reads, the file is something else (a Hugging "
        "Face config.json, an Accelerate YAML) or the whole config is nested one level too deep. The "
        "per-key warnings are folded into this one finding."
    ),
    check=_foreign,
    examples=(
        Example('{"model_type": "llama", "hidden_size": 4096}', fails=True),
        Example('{"train_batch_size": 8}', fails=False),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig._initialize_params (dict.get)",
)

# Who reads a config by path with json.load, which refuses YAML (transformers integrations/deepspeed.py and accelerate
# utils/deepspeed.py HfDeepSpeedConfig: ``json.load(f)`` for an existing path).
_JSON_LOAD_INTEGRATIONS = (Integration.HF_TRAINER, Integration.ACCELERATE)
_JSON_LOAD = "the Hugging Face Trainer and Accelerate read it with json.load, which refuses YAML"
_INSTEAD = "write it as JSON, or load it in your script (yaml.safe_load) and pass the dict"


def _yaml_config(ctx: Context) -> Iterator[Hit]:
    """A DeepSpeed config written in YAML: read as DeepSpeed reads a path (hjson), compared with the YAML."""
    from zeroadvisor.config.source import ParseError, parse
    from zeroadvisor.deepspeed.kind import DEEPSPEED, deepspeed_keys

    if ctx.doc.syntax != "yaml" or ctx.kind != DEEPSPEED or not isinstance(ctx.data, dict):
        return
    try:
        as_hjson = parse(ctx.doc.text, ctx.doc.name).data
    except ParseError as err:
        where = f" (line {err.line})" if err.line else ""
        yield Hit("", f"a DeepSpeed config in YAML: DeepSpeed reads a config path with hjson, which cannot read this "
                      f"file{where}: {err.message}, and {_JSON_LOAD}; {_INSTEAD}", position=(1, 1),
                  severity=_by_path(ctx))
        return
    if not isinstance(as_hjson, dict):
        yield Hit("", f"a DeepSpeed config in YAML: DeepSpeed reads a config path with hjson, which reads this file "
                      f"as {_shown(as_hjson)}, not an object, so given the path DeepSpeed fails at launch; "
                      f"{_JSON_LOAD}; {_INSTEAD}", position=(1, 1), severity=_by_path(ctx))
        return
    misread = _misread_section(ctx.data, as_hjson, deepspeed_keys())
    if misread is not None:
        key, value = misread
        pointer = "/" + key.replace("~", "~0").replace("/", "~1")
        yield Hit(pointer, f"a DeepSpeed config in YAML: DeepSpeed reads a config path with hjson, which reads "
                           f"'{key}' here as {_shown(value)}, so given the path DeepSpeed fails at launch; "
                           f"{_JSON_LOAD}; {_INSTEAD}", severity=_by_path(ctx))
    elif ctx.options.integration in _JSON_LOAD_INTEGRATIONS:
        yield Hit("", f"a DeepSpeed config in YAML: {_JSON_LOAD}, so the run fails at launch; {_INSTEAD}",
                  position=(1, 1), severity=Severity.ERROR)


def _by_path(ctx: Context) -> Severity | None:
    """An error where --integration says the Trainer or Accelerate is given the path (json.load refuses YAML);
    else the rule's warning: a project that writes its DeepSpeed config in YAML loads it in its own script and
    passes the dict (the real corpus's YAML configs are such), which lint cannot see."""
    return Severity.ERROR if ctx.options.integration in _JSON_LOAD_INTEGRATIONS else None


def _misread_section(data: JSONObject, as_hjson: JSONObject, read: frozenset[str]) -> tuple[str, JSONValue] | None:
    """The first top-level key DeepSpeed reads (``read``) whose value YAML reads as an object or list and hjson as
    something else (a YAML block ``zero_optimization:\n  stage: 3`` is hjson's quoteless string "stage: 3"), with
    hjson's value. DeepSpeed 0.19.8 builds each such section from a mapping (``**section`` or a pydantic model),
    so a string there fails in deepspeed.initialize (TypeError or ValidationError)."""
    for key, value in data.items():
        if key in read and isinstance(value, (dict, list)) and type(as_hjson.get(key)) is not type(value):
            return key, as_hjson.get(key)
    return None


def _shown(value: object) -> str:
    if isinstance(value, str):
        first = value.splitlines()[0] if value else ""
        return f"the string {first[:40]!r}" + (" and the lines after it" if "\n" in value or len(first) > 40 else "")
    return "null" if value is None else f"the {type(value).__name__} {value!r}"[:60]


YAML_CONFIG = Rule(
    code="ZA007",
    name="yaml-config",
    severity=Severity.WARNING,
    severity_varies="error with --integration hf-trainer or accelerate: given the path, their json.load refuses YAML",
    summary="A DeepSpeed config written in YAML: nothing that takes a config path reads YAML.",
    explanation=(
        "DeepSpeed reads a config path with hjson (deepspeed/runtime/config.py DeepSpeedConfig: hjson.load for "
        "an existing path), which is not YAML: a YAML block such as 'zero_optimization:' followed by indented "
        "keys becomes the string 'stage: 3', and DeepSpeed 0.19.8 then fails in deepspeed.initialize "
        "(TypeError: DeepSpeedZeroConfig() argument after ** must be a mapping, not str). The Hugging Face "
        "Trainer (TrainingArguments(deepspeed=path)) and Accelerate (deepspeed_config_file) read the path with "
        "json.load, which refuses YAML outright. The one way a YAML DeepSpeed config works is a script that "
        "loads it itself and passes the dict (deepspeed.initialize(config=dict), TrainingArguments(deepspeed="
        "dict)), as the project behind the real-config corpus's two YAML DeepSpeed configs does; lint cannot see "
        "the script, so the finding is a warning that says what happens if the path is given. It is an error "
        "where --integration says the Trainer or Accelerate reads the file (they are given a path there). A YAML "
        "whose every section hjson reads as YAML does (flat 'key: value' lines, or '{...}' flow mappings) is "
        "reported only where --integration says the Trainer or Accelerate reads it. An Accelerate config (with "
        "its deepspeed_config mapping) is linted by the Accelerate rules and never reported here."
    ),
    check=_yaml_config,
    examples=(
        Example("train_batch_size: 8\nzero_optimization:\n  stage: 3\n", fails=True, name="ds_config.yaml"),
        Example('{"train_batch_size": 8, "zero_optimization": {"stage": 3}}', fails=False, name="ds_config.json"),
    ),
    source="deepspeed/runtime/config.py DeepSpeedConfig.__init__ (hjson.load); transformers integrations/"
           "deepspeed.py and accelerate utils/deepspeed.py HfDeepSpeedConfig (json.load)",
)

RULES = (INVALID_SYNTAX, NOT_STRICT_JSON, DUPLICATE_KEY, NOT_AN_OBJECT, TEMPLATE_PLACEHOLDER, NOT_A_DEEPSPEED_CONFIG,
         YAML_CONFIG)

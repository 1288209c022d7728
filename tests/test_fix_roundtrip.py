"""--fix on every valid corpus config changes nothing but the patched keys (issue #4)."""

from __future__ import annotations

import re

import pytest

from conftest import CORPUS, corpus_manifest
from zeroadvisor.config import merge_patch as mp
from zeroadvisor.config.source import ParseError, join_pointer, parse
from zeroadvisor.fix.editor import EditError, patched_text, write_atomically
from zeroadvisor.lint.schemawalk import _PLACEHOLDER

PATCHES = [
    {"zero_optimization": {"stage": 1}},  # change a value
    {"zero_optimization": {"offload_optimizer": {"device": "cpu", "pin_memory": True}}},  # add a block
    {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8},  # set top-level keys
    {"zero_optimization": {"offload_param": None, "offload_optimizer": None, "stage": 2}},  # delete + change
    {"zero_optimization": None},  # delete a whole section
]


def _configs():
    if not (CORPUS / "MANIFEST.tsv").is_file():
        return []
    return sorted(row["file"] for row in corpus_manifest(CORPUS) if row["kind"] == "ds_json")


def _unparseable(corpus) -> list[str]:
    out = []
    for name in _configs():
        try:
            parse((corpus / name).read_bytes().decode("utf-8"), name)
        except ParseError:
            out.append(name)
    return out


# Configs DeepSpeed cannot read either: invalid-syntax reports them and there is nothing to fix.
UNPARSEABLE = ("KtechB", "abliao")


def _patched_pointers(patch, data, pointer=""):
    """Pointers of the keys a patch touches (its leaves, and objects it replaces or deletes)."""
    for key, value in patch.items():
        child = join_pointer(pointer, key)
        if isinstance(value, dict) and isinstance(data, dict) and isinstance(data.get(key), dict):
            yield from _patched_pointers(value, data[key], child)
        else:
            yield child


def _outside(doc, pointers) -> str:
    """The text with the patched members cut out, minus whitespace and commas."""
    spans = sorted((doc.keys[p].start, doc.values[p].end) for p in pointers if p in doc.keys)
    text, last, parts = doc.text, 0, []
    for start, end in spans:
        parts.append(text[last:start])
        last = max(last, end)
    parts.append(text[last:])
    return re.sub(r"[\s,]", "", "".join(parts))


@pytest.mark.corpus
@pytest.mark.parametrize("name", _configs())
def test_fix_changes_only_patched_keys(corpus, name):
    text = (corpus / name).read_bytes().decode("utf-8")  # as written: CRLF stays CRLF
    try:
        doc = parse(text, name)
    except ParseError:
        assert name.startswith(UNPARSEABLE)  # checked apart in test_only_known_configs_do_not_parse
        return
    assert isinstance(doc.data, dict)
    placeholders = [p for p, raw in doc.quoteless.items() if _PLACEHOLDER.match(raw)]
    for patch in PATCHES:
        pointers = set(_patched_pointers(patch, doc.data))
        touched = [p for p in placeholders if any(p == q or p.startswith(q + "/") for q in pointers)]
        if touched:  # a template: the edit would overwrite or delete a placeholder
            with pytest.raises(EditError) as err:
                patched_text(doc, patch)
            assert err.value.reason == "placeholder"
            continue
        new_text = patched_text(doc, patch)  # raises if the result reads back differently
        new_doc = parse(new_text, name)
        assert new_doc.data == mp.apply(doc.data, patch)
        assert patched_text(new_doc, patch) == new_text  # the same patch again changes nothing
        pointers |= set(_patched_pointers(patch, new_doc.data))
        assert _outside(doc, pointers) == _outside(new_doc, pointers), f"{name}: text outside {patch} changed"
        # Edits bring no new way of deviating from strict JSON: a JSON file stays JSON.
        assert {d.kind for d in new_doc.deviations} <= {d.kind for d in doc.deviations}
        assert new_text.endswith("\n") == text.endswith("\n")
        if "\r\n" in text:
            assert new_text.count("\n") == new_text.count("\r\n")


def test_corpus_has_configs_to_round_trip(corpus):
    assert len(_configs()) > 200


@pytest.mark.corpus
def test_only_known_configs_do_not_parse(corpus):
    assert sorted(name.split("__")[0] for name in _unparseable(corpus)) == sorted(UNPARSEABLE)


@pytest.mark.corpus
def test_corpus_templates_are_round_tripped_too(corpus):
    """The placeholders of Megatron-DeepSpeed templates stay; patches beside them apply."""
    templates = [n for n in _configs() if (corpus / n).is_file() and "ZERO_STAGE" in (corpus / n).read_text("utf-8")]
    assert templates
    for name in templates:
        doc = parse((corpus / name).read_text("utf-8"), name)
        new = patched_text(doc, {"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})
        assert "ZERO_STAGE" in new and parse(new).data["zero_optimization"]["offload_optimizer"] == {"device": "cpu"}


def test_atomic_write_keeps_mode_and_replaces(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{"a": 1}')
    path.chmod(0o640)
    write_atomically(str(path), '{"a": 2}')
    assert path.read_text() == '{"a": 2}'
    assert path.stat().st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["ds.json"]


def test_edits_keep_comments_and_number_spelling():
    text = ('{\n  // why: 8 GPUs\n  "zero_optimization": {\n    "stage": 3, # hjson comment\n'
            '    "reduce_bucket_size": 5e8\n  }\n}\n')
    new = patched_text(parse(text), {"zero_optimization": {"stage": 2, "stage3_max_live_parameters": None}})
    assert new == text.replace('"stage": 3', '"stage": 2')

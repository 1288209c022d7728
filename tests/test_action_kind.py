"""The action kind is a closed set (lint/findings.py ActionKind): the advisor makes members, the JSON gets the word."""

from __future__ import annotations

import json

import pytest

from zeroadvisor.lint.findings import Action, ActionKind

WORDS = ["gradient-checkpointing", "trainer-batch", "nvme-path", "sequence-parallel", "tensor-parallel", "cluster",
         "trainer-flags"]


def test_the_kinds_are_the_words_the_json_has_always_given():
    assert [kind.value for kind in ActionKind] == WORDS


@pytest.mark.parametrize("kind", list(ActionKind))
def test_the_json_entry_holds_the_plain_word(kind):
    entry = Action(kind, "text", {"degree": 2}).to_dict()
    assert type(entry["kind"]) is str and entry["kind"] == kind.value
    assert json.loads(json.dumps(entry)) == {"kind": kind.value, "text": "text", "degree": 2}

"""Which DeepSpeed releases a config is read as (inputs/release.py) and what a request means (deepspeed/releases.py)."""

from __future__ import annotations

import pytest

from zeroadvisor.deepspeed import releases
from zeroadvisor.inputs import release as choice
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.version import DEEPSPEED_TARGET


def test_knowledge_covers_every_release_line():
    lines = {".".join(v.split(".")[:2]) for v in releases.known()}
    assert lines == {f"0.{n}" for n in range(9, 20)}
    assert releases.latest() == releases.known()[-1] == DEEPSPEED_TARGET  # one source of truth: the schema's release


@pytest.mark.parametrize(("request_", "expected"), [
    ("0.14.5", ("0.14.5",)),
    ("0.14", ("0.14.5",)),
    ("0.19", tuple(v for v in releases.known() if v.startswith("0.19."))),
    (">=0.10.0,<=0.16.9", tuple(v for v in releases.known() if (0, 10) <= releases.version_key(v)[:2] <= (0, 16))),
    ("==0.19.5", ("0.19.5",)),
])
def test_requests(request_, expected):
    assert releases.resolve(request_).releases == expected


def test_unknown_patch_reads_as_nearest_of_its_line_with_a_note():
    found = releases.resolve("0.14.2")
    assert found.releases == ("0.14.5",)  # the only 0.14 known: nearest of the line
    assert "0.14.2" in found.notes[0] and "0.14.5" in found.notes[0]
    assert releases.resolve("0.16.12").releases == ("0.16.9",)


@pytest.mark.parametrize("bad", ["0.8", "0.20.1", "abc", "0.x", "", ">=0.30", "1" * 100_000])
def test_bad_requests_are_one_line_usage_errors(bad):
    with pytest.raises(UsageError) as err:
        choice.parse_request(bad, "--deepspeed-version")
    message = str(err.value)
    assert message.startswith("--deepspeed-version") and "\n" not in message and len(message) < 300


def test_precedence(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    config = tmp_path / "ds.json"
    config.write_text("{}")
    monkeypatch.setattr(choice, "installed_release", lambda: "0.16.9")
    choice._pin_choice.cache_clear()
    assert choice.choose_release(flag=None, config_path=str(config)).origin == "installed"
    (tmp_path / "requirements.txt").write_text("deepspeed==0.14.5\n")
    choice._pin_choice.cache_clear()
    pinned = choice.choose_release(flag=None, config_path=str(config))
    assert (pinned.origin, pinned.releases) == ("pin", ("0.14.5",))
    assert "requirements.txt:1" in pinned.describe()
    flagged = choice.choose_release(flag="0.12", config_path=str(config))
    assert (flagged.origin, flagged.releases) == ("flag", ("0.12.6",))
    monkeypatch.setattr(choice, "installed_release", lambda: None)
    (tmp_path / "requirements.txt").unlink()
    choice._pin_choice.cache_clear()
    assumed = choice.choose_release(flag=None, config_path=str(config))
    assert assumed.assumed and assumed.releases == (releases.latest(),)
    assert "--deepspeed-version" in assumed.describe()


def test_range_pin_in_pyproject(tmp_path):
    (tmp_path / ".git").mkdir()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["deepspeed>=0.10.0,<=0.16.9"]\n')
    config = tmp_path / "ds.json"
    config.write_text("{}")
    choice._pin_choice.cache_clear()
    found = choice.choose_release(flag=None, config_path=str(config))
    assert found.releases[0] == "0.10.0" and found.releases[-1] == "0.16.9"


@pytest.mark.parametrize(("versions", "text"), [
    (("0.14.5", "0.15.4", "0.16.9"), "0.14-0.16"),
    (("0.19.3", "0.19.4"), "0.19.3-0.19.4"),
    (("0.9.5",), "0.9"),
    (("0.9.5", "0.19.8"), "0.9, 0.19.8"),
])
def test_span(versions, text):
    assert releases.span(versions) == text

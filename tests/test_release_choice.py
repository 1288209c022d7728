"""Which DeepSpeed releases a config is read as (inputs/release.py) and what a request means (deepspeed/releases.py)."""

from __future__ import annotations

import pytest

from zeroadvisor.deepspeed import releases, schema
from zeroadvisor.inputs import release as choice
from zeroadvisor.inputs.errors import UsageError
from zeroadvisor.version import DEEPSPEED_TARGET


def test_knowledge_covers_every_release_pip_serves():
    """`pip index versions deepspeed`: 73 releases from 0.9.0 to 0.19.8, none skipped in between."""
    known = releases.known()
    assert len(known) == 73 and (known[0], known[-1]) == ("0.9.0", "0.19.8")
    assert {"0.9.1", "0.11.1", "0.14.2", "0.16.3", "0.17.2", "0.18.4"} <= set(known)
    assert releases.latest() == releases.known()[-1] == DEEPSPEED_TARGET  # one source of truth: the schema's release


def test_releases_with_the_same_configuration_code_share_one_entry():
    """0.16.6-0.16.9 share their configuration source (tools/ds_release_sources.py), so one entry serves them."""
    assert {releases.reads_as(v) for v in ("0.16.6", "0.16.7", "0.16.8", "0.16.9")} == {"0.16.9"}
    assert schema.of_release("0.16.7") == schema.of_release("0.16.9")
    assert releases.behaviour("0.16.7") == releases.behaviour("0.16.9")
    assert releases.reads_as("0.17.4") != releases.reads_as("0.17.5")  # zenflow came in 0.17.5
    assert releases.reads_like("0.16.8") == "0.16.6" and releases.reads_like("0.17.5") == "0.17.5"


@pytest.mark.parametrize(("request_", "expected"), [
    ("0.14.5", ("0.14.5",)),
    ("0.14", ("0.14.0", "0.14.1", "0.14.2", "0.14.3", "0.14.4", "0.14.5")),
    ("0.14.2", ("0.14.2",)),
    ("==0.16.3", ("0.16.3",)),
    (">=0.16.0,<0.16.5", ("0.16.0", "0.16.1", "0.16.2", "0.16.3", "0.16.4")),
    ("0.19", tuple(v for v in releases.known() if v.startswith("0.19."))),
    (">=0.10.0,<=0.16.9", tuple(v for v in releases.known() if (0, 10) <= releases.version_key(v)[:2] <= (0, 16))),
    ("==0.19.5", ("0.19.5",)),
])
def test_requests(request_, expected):
    assert releases.resolve(request_).releases == expected


def test_unknown_patch_reads_as_nearest_of_its_line_with_a_note():
    found = releases.resolve("0.16.12")  # no such release: the newest of its line below it
    assert found.releases == ("0.16.9",)
    assert "0.16.12" in found.notes[0] and "0.16.9" in found.notes[0]
    assert releases.resolve("0.14.2").notes == ()  # every release pip serves is known


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
    assert (flagged.origin, flagged.releases) == ("flag", tuple(f"0.12.{n}" for n in range(7)))
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
    (tuple(v for v in releases.known() if v.startswith(("0.14.", "0.15.", "0.16."))), "0.14-0.16"),
    (("0.16.0", "0.16.1", "0.16.2", "0.16.3", "0.16.4"), "0.16.0-0.16.4"),
    (("0.19.3", "0.19.4"), "0.19.3-0.19.4"),
    (("0.9.5",), "0.9.5"),
    (("0.9.5", "0.19.8"), "0.9.5, 0.19.8"),
    (tuple(v for v in releases.known() if v.startswith(("0.17.", "0.18."))), "0.17-0.18"),
])
def test_span(versions, text):
    assert releases.span(versions) == text

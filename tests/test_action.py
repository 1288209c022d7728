"""The GitHub Action: action.yml against GitHub's metadata syntax, its shell steps' text, and the pull-request
comment script with a fake HTTP layer and with real local HTTP servers (no network, no `act`). The steps
themselves are run in tests/test_action_steps.py."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import urllib.error

import jsonschema
import pytest
import yaml

from action_runner import LocalGitHub
from conftest import REPO
from zeroadvisor.cli import options
from zeroadvisor.integrations import github_comment as gc

ACTION = yaml.safe_load((REPO / "action.yml").read_text())
SCHEMA = json.loads((REPO / "tests" / "data" / "github-action-metadata.schema.json").read_text())
STEPS = ACTION["runs"]["steps"]


def errors(document) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(document)]


# -- action.yml ----------------------------------------------------------------------------------

def test_action_yml_follows_the_metadata_syntax():
    assert errors(ACTION) == []


@pytest.mark.parametrize("breakage", [
    lambda a: a.pop("runs"),
    lambda a: a["runs"]["steps"][1].update(uses="actions/checkout@v4"),  # run and uses in one step
    lambda a: a["inputs"]["configs"].pop("description"),
    lambda a: a["runs"]["steps"][0].update(uses="actions/setup-python"),  # no ref
])
def test_the_schema_check_can_fail(breakage):
    broken = json.loads(json.dumps(ACTION))
    breakage(broken)
    assert errors(broken)


def test_inputs_the_workflows_use():
    assert set(ACTION["inputs"]) >= {"configs", "model", "gpus", "gpu", "cpu-memory", "fail-on", "sarif-file",
                                     "comment", "github-token"}


def test_inputs_reach_scripts_only_through_the_environment():
    # ${{ inputs.x }} pasted into `run:` is a script injection (a config path or model name is data)
    for step in STEPS:
        assert "${{" not in step.get("run", ""), step.get("name")


def test_every_python_runs_isolated():
    # -I: no current directory (the pull request's checkout), PYTHONPATH or user site on sys.path; and
    # never the console script, whose interpreter would take PYTHONPATH
    commands = [re.split(r"\s+", line.strip(), maxsplit=1) for s in STEPS for line in s.get("run", "").splitlines()
                if line.strip() and not line.strip().startswith(("#", "[", "if ", "echo", "cat", "code", "args",
                                                                    "IFS", "exit", "venv=", "rm ", "unset"))]
    assert commands
    for command in commands:
        assert "python" in command[0].lower() and command[1].startswith("-I "), command


def test_sarif_is_uploaded_with_codeql_upload_sarif():
    upload = next(s for s in STEPS if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    assert upload["with"]["sarif_file"] == "${{ inputs.sarif-file }}"


def test_scripts_are_bash_and_use_only_real_flags():
    flags = {cmd.name: {f for p in cmd.params for flag in p.flags for f in flag.split("/")}
             for cmd in options.COMMANDS}
    for step in (s for s in STEPS if "run" in s):
        assert step["shell"] == "bash"
        if shutil.which("bash"):
            subprocess.run(["bash", "-n", "-c", step["run"]], check=True)
        for command, words in re.findall(r"zeroadvisor (lint|check)([^\n]*)", step["run"]):
            used = set(re.findall(r"(?<![\w-])(--[a-z-]+)", words))
            assert used <= flags[command], (command, used - flags[command])
        for command in re.findall(r"args=\(([^)]*)\)|args\+=\(([^)]*)\)", step["run"]):
            used = set(re.findall(r"(--[a-z-]+)", " ".join(command)))
            assert used <= flags["lint"] | flags["check"], used


# -- the comment script --------------------------------------------------------------------------

class FakeGitHub:
    """Answers the issue-comment endpoints from a list of comments; records every request."""

    def __init__(self, comments: list[dict], fail: int | None = None, user: dict | None = None):
        self.comments = comments
        self.fail = fail
        self.user = user  # GET /user's answer; None: 403, as GITHUB_TOKEN gets
        self.requests: list[tuple[str, str, dict | None, dict]] = []

    def __call__(self, request, timeout):
        body = json.loads(request.data) if request.data else None
        self.requests.append((request.get_method(), request.full_url, body, dict(request.header_items())))
        if self.fail:
            raise urllib.error.HTTPError(request.full_url, self.fail, "Forbidden", {}, None)
        method, url = request.get_method(), request.full_url
        if url.endswith("/user"):
            if self.user is None:
                raise urllib.error.HTTPError(url, 403, "Forbidden", {}, None)
            answer = self.user
        elif method == "GET":
            page = int(re.search(r"[?&]page=(\d+)", url).group(1))
            answer = self.comments[(page - 1) * gc.PAGE_SIZE: page * gc.PAGE_SIZE]
        elif method == "POST":
            answer = {"id": 999, "body": body["body"]}
        else:
            answer = {"id": int(url.rsplit("/", 1)[1]), "body": body["body"]}
        return io.BytesIO(json.dumps(answer).encode())


def run_main(tmp_path, fake, report="### zeroadvisor: `ds.json` — ❌ does not fit\n", event=None):
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(event if event is not None else {"pull_request": {"number": 7}}))
    report_path = tmp_path / "report.md"
    report_path.write_text(report, encoding="utf-8")
    environ = {"GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": "org/repo", "GITHUB_EVENT_PATH": str(event_path),
               "GITHUB_API_URL": "https://api.example"}
    return gc.main([str(report_path)], environ, fake)


BOT = {"login": "github-actions[bot]", "type": "Bot"}
PERSON = {"login": "octocat", "type": "User"}


def test_first_run_creates_the_comment_with_the_marker(tmp_path, capsys):
    fake = FakeGitHub([{"id": 1, "body": "LGTM", "user": PERSON}])
    assert run_main(tmp_path, fake) == 0
    _user, (get, get_url, _, headers), (post, post_url, body, _) = fake.requests
    assert (get, post) == ("GET", "POST")
    assert get_url == "https://api.example/repos/org/repo/issues/7/comments?per_page=100&page=1"
    assert post_url == "https://api.example/repos/org/repo/issues/7/comments"
    assert body["body"].splitlines()[0] == gc.MARKER and "does not fit" in body["body"]
    assert headers["Authorization"] == "Bearer t0ken" and headers["X-github-api-version"] == "2022-11-28"
    assert "created comment 999 on #7" in capsys.readouterr().out


def test_later_runs_update_the_marked_comment_found_on_a_later_page(tmp_path):
    comments = [{"id": i, "body": f"comment {i}", "user": PERSON} for i in range(gc.PAGE_SIZE)]
    comments.append({"id": 4242, "body": f"{gc.MARKER}\nold report", "user": BOT})
    fake = FakeGitHub(comments)
    assert run_main(tmp_path, fake) == 0
    methods = [(m, url.split("/repos/org/repo")[1]) for m, url, _, _ in fake.requests[1:]]
    assert methods == [("GET", "/issues/7/comments?per_page=100&page=1"),
                       ("GET", "/issues/7/comments?per_page=100&page=2"), ("PATCH", "/issues/comments/4242")]


def test_http_errors_are_one_line(tmp_path, capsys):
    assert run_main(tmp_path, FakeGitHub([], fail=403)) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HTTP 403" in err and "t0ken" not in err


def test_not_a_pull_request_posts_nothing(tmp_path):
    fake = FakeGitHub([])
    assert run_main(tmp_path, fake, event={"push": {}}) == 0 and fake.requests == []


def test_missing_environment_is_named(capsys):
    assert gc.main(["report.md"], {}, FakeGitHub([])) == 1
    assert "GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH not set" in capsys.readouterr().err


def test_long_reports_are_cut_to_githubs_limit():
    body = gc.body_of("x" * 100_000)
    assert len(body) == gc.MAX_BODY and body.startswith(gc.MARKER) and "truncated" in body


def test_the_real_markdown_report_is_posted(tmp_path, capsys):
    from zeroadvisor import check

    report = check({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 0}}, params="7B", gpus=8,
                   gpu="A100-SXM4-80GB").report("markdown")
    fake = FakeGitHub([])
    assert run_main(tmp_path, fake, report=report) == 0
    assert fake.requests[-1][2]["body"] == f"{gc.MARKER}\n{report}"


# -- whose comment it is: the token's identity, the marker on the first line ------------------------

@pytest.mark.parametrize("comment", [
    {"id": 5, "body": f"I saw `{gc.MARKER}` in the report", "user": PERSON},  # a person quoting it
    {"id": 5, "body": f"> {gc.MARKER}\n> quoted reply", "user": PERSON},
    {"id": 5, "body": f"{gc.MARKER}\nplanted first", "user": PERSON},  # planted to catch every later report
    {"id": 5, "body": f"{gc.MARKER}\nplanted by another bot", "user": {"login": "renovate[bot]", "type": "Bot"}},
    {"id": 5, "body": f"summary\n{gc.MARKER}\n", "user": BOT},  # the bot's, but the marker not first
    {"id": 5, "body": f" {gc.MARKER}\n", "user": BOT},
    {"id": 5, "body": f"{gc.MARKER}\n"},  # no author (a deleted account): not ours either
])
def test_a_comment_that_is_not_ours_is_never_edited(tmp_path, comment):
    fake = FakeGitHub([comment])
    assert run_main(tmp_path, fake) == 0
    assert [m for m, *_ in fake.requests] == ["GET", "GET", "POST"]  # /user, the list, a new comment


@pytest.mark.parametrize("body", [f"{gc.MARKER}\nold", f"{gc.MARKER}\r\nedited in the browser", gc.MARKER])
def test_our_own_comment_is_updated(tmp_path, body):
    fake = FakeGitHub([{"id": 3, "body": f"{gc.MARKER}\nsomeone's", "user": PERSON},
                       {"id": 8, "body": body, "user": BOT}])
    assert run_main(tmp_path, fake) == 0
    assert fake.requests[-1][:2] == ("PATCH", "https://api.example/repos/org/repo/issues/comments/8")


def test_a_token_that_knows_its_user_matches_that_user(tmp_path):
    # a personal token: GET /user answers, and the comment to update is that user's, not the bot's
    comments = [{"id": 1, "body": f"{gc.MARKER}\n", "user": BOT}, {"id": 2, "body": f"{gc.MARKER}\n", "user": PERSON}]
    fake = FakeGitHub(comments, user={"login": "OctoCat"})
    assert run_main(tmp_path, fake) == 0
    assert fake.requests[-1][:2] == ("PATCH", "https://api.example/repos/org/repo/issues/comments/2")


def test_warn_turns_a_failure_into_an_escaped_workflow_warning(tmp_path, capsys):
    report = tmp_path / "report.md"
    report.write_text("### report\n")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    environ = {"GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": "org/repo", "GITHUB_EVENT_PATH": str(event)}

    def refuse(request, timeout):
        raise urllib.error.HTTPError(request.full_url, 403, "Forbidden\n::error::x %0A", {}, None)
    assert gc.main(["--warn", str(report)], environ, refuse) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("::warning::zeroadvisor: cannot comment")
    assert "\n::error" not in out and "%250A" in out and "t0ken" not in out


def test_an_empty_report_is_not_posted(tmp_path, capsys):
    fake = FakeGitHub([])
    assert run_main(tmp_path, fake, report="") == 1 and fake.requests == []
    assert "is empty" in capsys.readouterr().err


# -- the token stays on the API host: real servers, a real redirect --------------------------------

def post_through(api: LocalGitHub, tmp_path) -> int:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 7}}))
    report = tmp_path / "report.md"
    report.write_text("### zeroadvisor report\n")
    environ = {"GITHUB_TOKEN": "t0ken", "GITHUB_REPOSITORY": "org/repo", "GITHUB_EVENT_PATH": str(event),
               "GITHUB_API_URL": api.url}
    return gc.main([str(report)], environ)  # the script's own opener: urllib, redirects followed


def test_a_redirect_to_another_host_gets_no_token(tmp_path):
    with LocalGitHub(host="localhost") as elsewhere:
        moved = {("GET", "/repos/org/repo/issues/7/comments"): (302, f"{elsewhere.url}/steal/comments")}
        with LocalGitHub(answers=moved) as api:
            assert post_through(api, tmp_path) == 0
        assert [s.path for s in elsewhere.seen] == ["/steal/comments"]  # it was followed, without the token
        assert all("t0ken" not in json.dumps(s.headers) for s in elsewhere.seen), elsewhere.seen[0].headers
        assert "Authorization" not in elsewhere.seen[0].headers
        assert [s.headers.get("Authorization") for s in api.seen] == ["Bearer t0ken"] * 3


def test_a_redirect_to_another_port_of_the_same_host_gets_no_token(tmp_path):
    with LocalGitHub() as elsewhere:
        moved = {("GET", "/repos/org/repo/issues/7/comments"): (301, f"{elsewhere.url}/x/comments")}
        with LocalGitHub(answers=moved) as api:
            assert post_through(api, tmp_path) == 0
        assert elsewhere.seen and all("Authorization" not in s.headers for s in elsewhere.seen)


def test_a_redirect_on_the_api_host_keeps_the_token(tmp_path):
    # GitHub redirects a renamed repository's URLs on the same host; the token must go along there
    with LocalGitHub() as api:
        api.answers[("GET", "/repos/org/repo/issues/7/comments")] = (301, f"{api.url}/repositories/1/issues/7/comments")
        assert post_through(api, tmp_path) == 0
        followed = next(s for s in api.seen if s.path.startswith("/repositories/1/"))
        assert followed.headers.get("Authorization") == "Bearer t0ken"

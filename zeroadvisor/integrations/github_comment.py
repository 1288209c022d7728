"""Create or update ONE pull-request comment holding the markdown report (the GitHub Action's last step).

The comment is found again so each push updates the same comment instead of adding one: it is ours when
its author is the token's identity and its FIRST line is exactly ``MARKER``. A person's comment quoting
the marker, or one planted with it by someone else, is never edited (a new comment is created instead).
The token is sent to the API host only: a redirect elsewhere is followed without ``Authorization``.
GitHub REST API, issue comments:
https://docs.github.com/en/rest/issues/comments (list: GET /repos/{owner}/{repo}/issues/{number}/comments,
update: PATCH /repos/{owner}/{repo}/issues/comments/{id}, create: POST .../issues/{number}/comments).

Usage (the environment is what GitHub Actions sets; GITHUB_TOKEN is the action's github-token input)::

    python -I -m zeroadvisor.integrations.github_comment [--warn] REPORT.md

``--warn`` (the Action): a comment that cannot be posted (a fork's read-only token: HTTP 403) is a
``::warning::`` workflow command and exit 0, so the job's verdict stays the lint and check steps'.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from http.client import HTTPMessage
from typing import IO, Protocol, TypeGuard

from zeroadvisor.jsontypes import JSONObject, JSONValue
from zeroadvisor.report.escape import workflow_data

MARKER = "<!-- zeroadvisor -->"
# Who wrote the comment when the token cannot say who it is: GITHUB_TOKEN (an installation token) gets
# 403 from GET /user, and comments made with it are by this bot account (a user login cannot hold "[").
ACTIONS_BOT = "github-actions[bot]"
# GitHub refuses comment bodies over 65536 characters (the API answers 422 "body is too long").
MAX_BODY = 65536
PAGE_SIZE = 100  # the most the list endpoint returns per page
TIMEOUT_S = 30


class CommentError(Exception):
    """One line: what failed (an HTTP status, a missing variable)."""


class _Response(Protocol):
    def read(self) -> bytes: ...


class Opener(Protocol):
    """urllib.request.urlopen's signature, as used: (request, timeout=...) -> the response, a context manager."""

    def __call__(self, request: urllib.request.Request, /, *, timeout: float) -> AbstractContextManager[_Response]: ...


def _origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: what "the same host" means."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or {"https": 443, "http": 80}.get(scheme)


class SameOriginAuthRedirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects, with the token only to the origin it was meant for.

    urllib copies every ordinary header onto the redirected request, ``Authorization`` included, so a
    redirect to another host would receive the token. It is therefore sent as an unredirected header
    (never copied) and put back here only when scheme, host and port are unchanged (GitHub redirects
    a renamed repository's URLs on the same host)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str, headers: HTTPMessage,
                         newurl: str) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        token = req.get_header("Authorization")
        if new is not None and token is not None and _origin(new.full_url) == _origin(req.full_url):
            new.add_unredirected_header("Authorization", token)
        return new


def default_opener() -> Opener:
    return urllib.request.build_opener(SameOriginAuthRedirects).open


@dataclass
class GitHub:
    token: str
    api_url: str = "https://api.github.com"
    opener: Opener = field(default_factory=default_opener)

    def request(self, method: str, path: str, body: JSONObject | None = None) -> JSONValue:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(f"{self.api_url.rstrip('/')}{path}", data=data, method=method, headers={
            "Accept": "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28",
            "Content-Type": "application/json", "User-Agent": "zeroadvisor-action"})
        # unredirected: urllib never copies it onto a redirect; SameOriginAuthRedirects decides
        request.add_unredirected_header("Authorization", f"Bearer {self.token}")
        try:
            with self.opener(request, timeout=TIMEOUT_S) as response:
                answer: JSONValue = json.loads(response.read().decode("utf-8") or "null")
                return answer
        except urllib.error.HTTPError as err:
            raise CommentError(f"{method} {path}: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError) as err:
            raise CommentError(f"{method} {path}: {getattr(err, 'reason', err)}") from None


def body_of(report: str) -> str:
    """The comment: the marker, then the report, cut to GitHub's limit with a note when longer."""
    body = f"{MARKER}\n{report}"
    if len(body) <= MAX_BODY:
        return body
    note = "\n\n… (report truncated: GitHub comments hold at most 65536 characters; see the job log)\n"
    return body[:MAX_BODY - len(note)] + note


def identity(github: GitHub) -> str:
    """The login the token acts as: GET /user where the token may ask (a personal token), else the
    Actions bot (GITHUB_TOKEN is refused there: 401/403; 404 on some GitHub Enterprise setups)."""
    try:
        user = github.request("GET", "/user")
    except CommentError as err:
        if any(f"HTTP {code} " in str(err) for code in (401, 403, 404)):
            return ACTIONS_BOT
        raise
    login = user.get("login") if isinstance(user, dict) else None
    return str(login) if login else ACTIONS_BOT


def is_ours(comment: JSONValue, login: str) -> TypeGuard[JSONObject]:
    """Written by ``login`` and opening with the marker line: quoting the marker elsewhere is not enough."""
    if not isinstance(comment, dict):
        return False
    author = comment.get("user")
    if not isinstance(author, dict):
        return False
    first_line = str(comment.get("body") or "").split("\n", 1)[0].rstrip("\r")
    return str(author.get("login") or "").lower() == login.lower() and first_line == MARKER


def find_comment(github: GitHub, repository: str, number: int, login: str) -> int | None:
    """The id of the first comment of ours (``is_ours``), over every page of the pull request's comments."""
    page = 1
    while True:
        comments = github.request("GET", f"/repos/{repository}/issues/{number}/comments"
                                         f"?per_page={PAGE_SIZE}&page={page}")
        if not isinstance(comments, list):
            raise CommentError(f"unexpected answer listing the comments of #{number}")
        for comment in comments:
            if is_ours(comment, login):
                return _id(comment["id"])
        if len(comments) < PAGE_SIZE:
            return None
        page += 1


def upsert(github: GitHub, repository: str, number: int, report: str) -> tuple[str, int]:
    """("updated" | "created", comment id)."""
    body = body_of(report)
    existing = find_comment(github, repository, number, identity(github))
    if existing is not None:
        github.request("PATCH", f"/repos/{repository}/issues/comments/{existing}", {"body": body})
        return "updated", existing
    created = github.request("POST", f"/repos/{repository}/issues/{number}/comments", {"body": body})
    return "created", _id(created["id"] if isinstance(created, dict) else None)


def _id(value: JSONValue) -> int:
    """A comment's id as GitHub answers it (a number); int() refuses anything else as it did unchecked."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"a comment id, not {type(value).__name__}")


def pull_request_number(event_path: str) -> int | None:
    """The pull request's number from the event payload (None: not a pull-request event)."""
    with open(event_path, encoding="utf-8") as handle:
        event = json.load(handle)
    number = (event.get("pull_request") or {}).get("number")
    return int(number) if number is not None else None


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None, opener: Opener | None = None) -> int:
    environ = dict(os.environ) if environ is None else environ
    args = sys.argv[1:] if argv is None else list(argv)
    warn = "--warn" in args[:1]
    args = args[1:] if warn else args
    if len(args) != 1:
        sys.stderr.write("usage: python -m zeroadvisor.integrations.github_comment [--warn] REPORT.md\n")
        return 2
    try:
        comment_or_fail(args[0], environ, opener)
    except (CommentError, OSError, ValueError) as err:
        return failed(str(err), warn)
    return 0


def failed(reason: str, warn: bool) -> int:
    """The one-line error; with --warn a ::warning:: workflow command (escaped: the reason may quote an
    answer of the server) and exit 0."""
    if warn:
        sys.stdout.write(f"::warning::{workflow_data(f'zeroadvisor: cannot comment on the pull request: {reason}')}\n")
        return 0
    sys.stderr.write(f"zeroadvisor: cannot comment: {reason}\n")
    return 1


def comment_or_fail(report_path: str, environ: dict[str, str], opener: Opener | None) -> None:
    """Post or update the comment (or say why not: not a pull request); CommentError / OSError otherwise."""
    missing = [name for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH") if not environ.get(name)]
    if missing:
        raise CommentError(f"{', '.join(missing)} not set (run inside GitHub Actions with github-token)")
    number = pull_request_number(environ["GITHUB_EVENT_PATH"])
    if number is None:
        sys.stdout.write("zeroadvisor: not a pull request: no comment\n")
        return
    with open(report_path, encoding="utf-8") as handle:
        report = handle.read()
    if not report.strip():
        # the check step wrote nothing (a usage error, in its log): a marker-only comment says nothing
        raise CommentError(f"{report_path} is empty: the memory check reported nothing (see its step's log)")
    github = GitHub(environ["GITHUB_TOKEN"], environ.get("GITHUB_API_URL") or GitHub.api_url,
                    opener or default_opener())
    action, comment = upsert(github, environ["GITHUB_REPOSITORY"], number, report)
    sys.stdout.write(f"zeroadvisor: {action} comment {comment} on #{number}\n")


if __name__ == "__main__":
    raise SystemExit(main())

"""Create or update ONE pull-request comment holding the markdown report (the GitHub Action's last step).

The comment is found again by a hidden marker (``MARKER``) on its first line, so each push updates
the same comment instead of adding one. GitHub REST API, issue comments:
https://docs.github.com/en/rest/issues/comments (list: GET /repos/{owner}/{repo}/issues/{number}/comments,
update: PATCH /repos/{owner}/{repo}/issues/comments/{id}, create: POST .../issues/{number}/comments).

Usage (the environment is what GitHub Actions sets; GITHUB_TOKEN is the action's github-token input)::

    python -m zeroadvisor.integrations.github_comment REPORT.md
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MARKER = "<!-- zeroadvisor -->"
# GitHub refuses comment bodies over 65536 characters (the API answers 422 "body is too long").
MAX_BODY = 65536
PAGE_SIZE = 100  # the most the list endpoint returns per page
TIMEOUT_S = 30


class CommentError(Exception):
    """One line: what failed (an HTTP status, a missing variable)."""


Opener = Callable[..., Any]  # urllib.request.urlopen's signature: (request, timeout=...) -> response


@dataclass
class GitHub:
    token: str
    api_url: str = "https://api.github.com"
    opener: Opener = urllib.request.urlopen

    def request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(f"{self.api_url.rstrip('/')}{path}", data=data, method=method, headers={
            "Accept": "application/vnd.github+json", "Authorization": f"Bearer {self.token}",
            "X-GitHub-Api-Version": "2022-11-28", "Content-Type": "application/json",
            "User-Agent": "zeroadvisor-action"})
        try:
            with self.opener(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read().decode("utf-8") or "null")
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


def find_comment(github: GitHub, repository: str, number: int) -> int | None:
    """The id of the first comment carrying the marker, over every page of the pull request's comments."""
    page = 1
    while True:
        comments = github.request("GET", f"/repos/{repository}/issues/{number}/comments"
                                         f"?per_page={PAGE_SIZE}&page={page}")
        if not isinstance(comments, list):
            raise CommentError(f"unexpected answer listing the comments of #{number}")
        for comment in comments:
            if MARKER in str(comment.get("body") or ""):
                return int(comment["id"])
        if len(comments) < PAGE_SIZE:
            return None
        page += 1


def upsert(github: GitHub, repository: str, number: int, report: str) -> tuple[str, int]:
    """("updated" | "created", comment id)."""
    body = body_of(report)
    existing = find_comment(github, repository, number)
    if existing is not None:
        github.request("PATCH", f"/repos/{repository}/issues/comments/{existing}", {"body": body})
        return "updated", existing
    created = github.request("POST", f"/repos/{repository}/issues/{number}/comments", {"body": body})
    return "created", int(created["id"])


def pull_request_number(event_path: str) -> int | None:
    """The pull request's number from the event payload (None: not a pull-request event)."""
    with open(event_path, encoding="utf-8") as handle:
        event = json.load(handle)
    number = (event.get("pull_request") or {}).get("number")
    return int(number) if number is not None else None


def main(argv: list[str] | None = None, environ: dict[str, str] | None = None, opener: Opener | None = None) -> int:
    environ = dict(os.environ) if environ is None else environ
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: python -m zeroadvisor.integrations.github_comment REPORT.md\n")
        return 2
    try:
        missing = [name for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_EVENT_PATH") if not environ.get(name)]
        if missing:
            raise CommentError(f"{', '.join(missing)} not set (run inside GitHub Actions with github-token)")
        number = pull_request_number(environ["GITHUB_EVENT_PATH"])
        if number is None:
            sys.stdout.write("zeroadvisor: not a pull request: no comment\n")
            return 0
        with open(args[0], encoding="utf-8") as handle:
            report = handle.read()
        github = GitHub(environ["GITHUB_TOKEN"], environ.get("GITHUB_API_URL") or GitHub.api_url,
                        opener or urllib.request.urlopen)
        action, comment = upsert(github, environ["GITHUB_REPOSITORY"], number, report)
    except (CommentError, OSError, ValueError) as err:
        sys.stderr.write(f"zeroadvisor: cannot comment: {err}\n")
        return 1
    sys.stdout.write(f"zeroadvisor: {action} comment {comment} on #{number}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

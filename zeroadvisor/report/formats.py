"""The output formats: a closed set, named once here (the renderers' layer is the lowest that needs it).

The command line and the Python API take the names as text; inputs/ parses them into an ``OutputFormat`` once,
and the commands and renderers compare members from there on. A ``StrEnum`` so that a member still prints,
joins and compares as the name a user typed (help text, messages, the JSON of the project configuration).
"""

from __future__ import annotations

from enum import StrEnum


class OutputFormat(StrEnum):
    TEXT = "text"
    JSON = "json"
    SARIF = "sarif"
    GITHUB = "github"
    MARKDOWN = "markdown"
    HTML = "html"

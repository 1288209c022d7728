"""How a GitHub Actions runner reads a step's output, to check that ours runs no workflow command.

Re-implemented from actions/runner src/Runner.Common/ActionCommand.cs: TryParseV2 takes a line
that starts with "::" after leading blanks (.NET TrimStart), TryParse takes "##[" anywhere in a line;
ActionCommandManager runs only registered commands. Lines split as StreamReader.ReadLine does.
"""

from __future__ import annotations

import re

# Runner commands (actions/runner ActionCommandManager registers these, plus stop-commands).
RUNNER_COMMANDS = {"error", "warning", "notice", "debug", "add-mask", "set-output", "save-state", "set-env",
                   "add-path", "add-matcher", "remove-matcher", "group", "endgroup", "echo", "stop-commands"}
_DOTNET_BLANKS = "".join(chr(c) for c in [*range(9, 14), 0x20, 0x85, 0xA0, 0x1680, *range(0x2000, 0x200B),
                                          0x2028, 0x2029, 0x202F, 0x205F, 0x3000])


def runner_command(line: str, commands: frozenset[str] | set[str] = frozenset()
                   ) -> tuple[str, dict[str, str], str] | None:
    """(command, properties, data) when a GitHub runner would run ``line`` as a workflow command (``commands``:
    registered beside the runner's own, as a stop-commands token is while the commands are stopped)."""
    known = RUNNER_COMMANDS | {c.lower() for c in commands}
    message = line.lstrip(_DOTNET_BLANKS)  # .NET TrimStart(): Char.IsWhiteSpace
    if message.startswith("::"):
        end = message.find("::", 2)
        if end >= 0:
            info = message[2:end]
            name, _, props = info.partition(" ")
            if name.lower() in known:
                properties = {}
                for pair in filter(None, props.strip().split(",")):
                    key, eq, value = pair.partition("=")
                    if eq and key and value:
                        properties[key] = (value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
                                           .replace("%2C", ",").replace("%25", "%"))
                data = message[end + 2:].replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")
                return name.lower(), properties, data
    at = line.find("##[")
    if at >= 0:
        close = line.find("]", at)
        if close >= 0 and line[at + 3:close].split(" ", 1)[0].lower() in known:
            return line[at + 3:close].split(" ", 1)[0].lower(), {}, line[close + 1:]
    return None


def runner_lines(text: str) -> list[str]:
    """Lines as the runner reads a process's output (StreamReader.ReadLine: CR, LF, CRLF)."""
    return re.split(r"\r\n|\r|\n", text)


def assert_inert(text: str) -> None:
    """Safe for a terminal and a CI log: printable lines, none of them a runner command."""
    for line in runner_lines(text):
        assert runner_command(line) is None, line
        assert line.isprintable(), ascii(line)


def executed(text: str) -> list[tuple[str, str]]:
    """The (command, data) a runner runs reading ``text`` as a step's output, stop-commands honoured as
    ActionCommandManager.TryProcessCommand does: ``::stop-commands::TOKEN`` registers TOKEN as a command and
    ignores every command until ``::TOKEN::`` (the stop and the resume are not in the list)."""
    ran: list[tuple[str, str]] = []
    token: str | None = None
    for line in runner_lines(text):
        command = runner_command(line, {token} if token else set())
        if command is None:
            continue
        name, _, data = command
        if token is not None:
            if name == token.lower():
                token = None
            continue
        if name == "stop-commands":
            token = data
            continue
        ran.append((name, data))
    return ran

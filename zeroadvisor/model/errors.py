"""The one error type of zeroadvisor.model: a bad model description or config.json."""

from __future__ import annotations

# Appended to every "cannot count this" message: the way out is always the same.
GIVE_PARAMETERS = "give `parameters:` in a model description instead"


class ModelError(ValueError):
    """A model description or Hugging Face config that cannot be used, with its location.

    ``str(err)`` is one line: ``file:line:column: message`` (the parts that are known).
    ``key`` names the offending config key when there is one, so that a caller that knows
    where that key sits in the file (description.py) can fill in ``line``/``column``.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        column: int | None = None,
        key: str | None = None,
    ) -> None:
        # One line, always: a multi-line message would break the linter's report format.
        self.message = " ".join(str(message).split())
        self.file = file
        self.line = line
        self.column = column
        self.key = key
        super().__init__(self.message)

    def located(
        self, file: str | None, line: int | None = None, column: int | None = None
    ) -> ModelError:
        """A copy with the location filled in where this error does not know it yet."""
        return ModelError(
            self.message,
            file=self.file or file,
            line=self.line if self.line is not None else line,
            column=self.column if self.column is not None else column,
            key=self.key,
        )

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
                if self.column is not None:
                    where += f":{self.column}"
            where += ": "
        return where + self.message

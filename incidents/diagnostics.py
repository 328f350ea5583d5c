"""What the incident loader reports: one `Diagnostic` per problem (file:line:column, message, hint), and the
exceptions that carry them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Diagnostic:
    """One problem in an incident file. line and column are 1-based; line 0 means the file as a whole."""

    path: str
    line: int
    column: int
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}:{self.column}" if self.line > 0 else self.path
        text = f"{where}: {self.message}"
        return f"{text} (hint: {self.hint})" if self.hint else text


class IncidentError(Exception):
    """An incident file could not be loaded; `diagnostics` says why, all at once."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(str(d) for d in diagnostics))


class UnknownIncidentError(IncidentError, LookupError):
    """No incident with that id in the library (and no file at that path). `matches`: close ids."""

    def __init__(self, name: str, matches: list[str], available: list[str]) -> None:
        self.name = name
        self.matches = matches
        if matches:
            hint = "did you mean " + " or ".join(matches) + "?"
        elif available:
            hint = "library incidents: " + ", ".join(available)
        else:
            hint = "the incident library is empty"
        super().__init__([Diagnostic(name, 0, 0, "no incident file or library id by that name", hint)])

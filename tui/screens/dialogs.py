"""Small modal dialogs: help, confirm, a choice, a note, the snippet menu, the player's name, a row in
full. Each fits an 80x24 terminal: one-line (compact) buttons, heights that give way to the screen."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from tui.actions import help_sections
from tui.text import bounded, editable, literal, one_line, template
from tui.widgets.safe_text import SafeTextArea

if TYPE_CHECKING:
    from game.session.saved_queries import SavedQuery
    from incidents.snippets import Snippet

MAX_DETAIL_CHARS = 1_000_000
"""The row detail shows values in full up to this many characters in all."""


def help_renderable(scopes: list[str]) -> Group:
    """The keys of `scopes` (the focused pane's, the screen's, then "app"), each as a user types it: a
    heading per scope, then a two-column grid whose second column wraps under itself. Drawn at once (a
    Markdown document of every key took seconds to lay out)."""
    parts: list[Any] = []
    for title, rows in help_sections(scopes):
        parts.append(Text(title, style="bold underline"))
        grid = Table.grid(padding=(0, 2), pad_edge=True)
        grid.add_column(no_wrap=True, style="bold", max_width=24)
        grid.add_column(ratio=1)
        for command in rows:
            grid.add_row(command.key_label, command.help)
        parts += [grid, Text("")]
    parts.append(Text("Every action is also in the command palette (ctrl+p). Esc closes this.", style="dim"))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """The keys of where the player is: the focused pane's first, then the screen's, then anywhere; from
    the same table the bindings come from."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,f1,q,question_mark", "dismiss", "Close")]

    def __init__(self, scopes: Sequence[str] = ("app",)) -> None:
        super().__init__()
        self.scopes = list(scopes)

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog", classes="dialog"), VerticalScroll(id="help-scroll"):
            yield Static(help_renderable(self.scopes), id="help-text")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    @property
    def text(self) -> str:
        """The help as plain text (for tests)."""
        import io

        from rich.console import Console

        console = Console(width=100, file=io.StringIO(), record=True)
        console.print(help_renderable(self.scopes))
        return console.export_text()

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """A yes/no question; Enter or y confirms, Escape or n declines."""

    BINDINGS: ClassVar[list[BindingType]] = [
        ("y,enter", "answer(True)", "Yes"),
        ("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Label(self.question, id="confirm-question")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Yes (y)", id="yes", variant="warning", compact=True)
                yield Button("No (n)", id="no", compact=True)

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class ChoiceScreen(ModalScreen[int | None]):
    """Pick one of a few lines; Enter takes the highlighted one (its index), Escape none."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, question: str, choices: Sequence[str]) -> None:
        super().__init__()
        self.question = question
        self.choices = list(choices)

    def compose(self) -> ComposeResult:
        with Vertical(id="choice-dialog", classes="dialog"):
            yield Label(self.question)
            yield OptionList(*[Option(Text(c), id=f"c{i}") for i, c in enumerate(self.choices)], id="choice-list")
            yield Label("Enter chooses · Escape cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(int((event.option.id or "c0")[1:]))

    def action_cancel(self) -> None:
        self.dismiss(None)


class NoteScreen(ModalScreen[str | None]):
    """Write the note for one hypothesis; ctrl+s saves, Escape discards."""

    BINDINGS: ClassVar[list[BindingType]] = [("ctrl+s", "save", "Save"), ("escape", "cancel", "Cancel")]

    def __init__(self, title: str, text: str = "") -> None:
        super().__init__()
        self.hypothesis_title = title
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog", classes="dialog"):
            yield Label(template("Note on: $title", title=literal(self.hypothesis_title, 200)))
            yield SafeTextArea(self.text, id="note-text", soft_wrap=True)
            yield Label("ctrl+s saves · Escape discards", classes="dialog-hint")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


MAX_PLAYER_CHARS = 40


def clean_player_name(text: str) -> str | None:
    """A player name as typed, trimmed, or None when it is empty, too long or has control characters."""
    name = " ".join(text.split())
    if not name or len(name) > MAX_PLAYER_CHARS or any(not c.isprintable() for c in name):
        return None
    return name


class QueryNameScreen(ModalScreen[str | None]):
    """Name the editor's query to save it (offered by F3 in every incident). Enter saves through `save`, which
    returns None when it worked or why not (said under the box, which stays open); Escape cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, sql: str, save: Callable[[str], str | None], max_chars: int) -> None:
        super().__init__()
        self.sql = sql
        self.save = save
        self.max_chars = max_chars

    def compose(self) -> ComposeResult:
        first = " ".join(self.sql.split())
        with Vertical(id="query-name-dialog", classes="dialog"):
            yield Label("Save this query as (F3 offers it in every incident):")
            yield Static(literal(first, 300), id="query-name-sql", markup=False)
            yield Input(max_length=self.max_chars, placeholder="a few words that say what it shows",
                        id="query-name")
            yield Static("", id="query-name-problem", markup=False)
            yield Label("Enter saves (the same name replaces it) · Escape cancels", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted, "#query-name")
    def _submitted(self, event: Input.Submitted) -> None:
        problem = self.save(event.value)
        if problem is None:
            self.dismiss(" ".join(event.value.split()))
        else:
            self.query_one("#query-name-problem", Static).update(one_line(problem, 300))

    def action_cancel(self) -> None:
        self.dismiss(None)


class PlayerNameScreen(ModalScreen[str | None]):
    """Ask who is playing (a browser tab of `servedrill serve` has no $USER of its own); Enter keeps the
    name, Escape keeps the suggested one."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Keep")]

    def __init__(self, suggested: str) -> None:
        super().__init__()
        self.suggested = suggested

    def compose(self) -> ComposeResult:
        with Vertical(id="player-dialog", classes="dialog"):
            yield Label("Your name: it goes on your sessions and on the game day's leaderboard.")
            yield Input(value=self.suggested, max_length=MAX_PLAYER_CHARS, id="player-name")
            yield Label("Enter to start · Escape keeps the suggested name", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    @on(Input.Submitted, "#player-name")
    def _submitted(self, event: Input.Submitted) -> None:
        name = clean_player_name(event.value)
        if name is None:
            self.notify(f"A name of 1 to {MAX_PLAYER_CHARS} printable characters, please.", severity="warning")
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


def detail_text(fields: Sequence[tuple[str, Any]]) -> str:
    """Each field's name on a line, then its value in full (newlines kept, control characters visible)."""
    parts = []
    for name, value in fields:
        if value is None:
            shown = "NULL"
        elif isinstance(value, float):
            shown = repr(value)
        elif isinstance(value, list | dict):
            import json

            shown = json.dumps(value, ensure_ascii=False)
        else:
            shown = str(value)
        parts.append(f"── {editable(str(name))}\n{editable(shown)}")
    return bounded("\n\n".join(parts), MAX_DETAIL_CHARS)


class RowDetailScreen(ModalScreen[None]):
    """One result row (or a query's error) in full: what the results table cuts. Read-only text that
    can be selected and copied; Escape closes."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape,enter", "dismiss", "Close")]

    def __init__(self, title: str, fields: Sequence[tuple[str, Any]], focus_field: int | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.fields = list(fields)
        self.focus_field = focus_field

    def compose(self) -> ComposeResult:
        with Vertical(id="detail-dialog", classes="dialog"):
            yield Label(literal(self.title_text, 200), id="detail-title")
            yield TextArea(detail_text(self.fields), id="detail-text", read_only=True, soft_wrap=True)
            yield Label("Escape closes · the text can be selected and copied", classes="dialog-hint")

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        if self.focus_field is not None and 0 < self.focus_field < len(self.fields):
            # the column the cursor was on: its heading at the top
            marker = f"── {editable(str(self.fields[self.focus_field][0]))}\n"
            head = detail_text(self.fields[: self.focus_field])
            line = (head + "\n\n").count("\n") if head else 0
            if area.text[len(head) + 2:].startswith(marker):
                area.move_cursor((line, 0))
                area.scroll_to(y=line, animate=False)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


SAVED_MARK = "★ "
"""Before a saved query's name in the snippet menu: the player's own, below the starting points."""


class SnippetScreen(ModalScreen[str | None]):
    """Pick a starting query or one of the player's saved queries; Enter puts it in the editor. Names are the
    player's text: shown literally (no markup)."""

    BINDINGS: ClassVar[list[BindingType]] = [("escape", "cancel", "Cancel")]

    def __init__(self, snippets: Sequence[Snippet], saved: Sequence[SavedQuery] = ()) -> None:
        super().__init__()
        self.snippets = list(snippets)
        self.saved = list(saved)

    def compose(self) -> ComposeResult:
        options: list[Option | None] = [Option(literal(s.title, 200), id=f"snippet:{i}")
                                        for i, s in enumerate(self.snippets)]
        if self.saved:
            options.append(None)  # a rule between the starting points and the player's own
            options += [Option(literal(SAVED_MARK + q.name, 82), id=f"saved:{i}") for i, q in enumerate(self.saved)]
        with Vertical(id="snippet-dialog", classes="dialog"):
            yield Label("Start from a snippet or a saved query (Enter inserts, Escape cancels; alt+s saves the "
                        "editor's query)")
            yield OptionList(*options, id="snippet-list", markup=False)

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        kind, _, index = (event.option.id or "").partition(":")
        self.dismiss(self.saved[int(index)].sql if kind == "saved" else self.snippets[int(index)].sql)

    def action_cancel(self) -> None:
        self.dismiss(None)

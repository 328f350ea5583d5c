"""Every key of the TUI in one table: screens take their bindings from it, the help screen lists it,
and the command palette offers its entries. Change a key here and all three follow."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One action. `keys` is Textual's comma-separated key list; the first key is the one shown.

    `scope` names where it works: a screen ("picker", "briefing", "workspace", "submit", "debrief")
    or a widget of the workspace ("editor", "board", "results")."""

    scope: str
    action: str
    keys: str
    title: str
    help: str
    show: bool = True
    priority: bool = False
    palette: bool = True

    @property
    def key_label(self) -> str:
        return " / ".join(k.strip() for k in self.keys.split(","))


SCOPE_TITLES: dict[str, str] = {
    "app": "Anywhere",
    "picker": "Incident picker",
    "briefing": "Briefing",
    "workspace": "Investigation",
    "editor": "SQL editor",
    "results": "Results",
    "board": "Hypothesis board (focus it with Tab or ctrl+b)",
    "submit": "Submit",
    "debrief": "Debrief",
}

COMMANDS: tuple[Command, ...] = (
    Command("app", "help", "f1,question_mark", "Help", "Show every key (this screen)."),
    Command("app", "quit", "ctrl+q", "Quit", "Leave; an unfinished session stays resumable.", palette=False),
    Command("app", "command_palette", "ctrl+p", "Palette", "Every action, searchable.", palette=False),
    Command("picker", "open", "enter", "Open", "Open the highlighted incident's briefing."),
    Command("picker", "focus_filter", "slash", "Filter", "Type to narrow the list by title, id or tag."),
    Command("briefing", "begin", "enter", "Start", "Start the investigation (or continue the session)."),
    Command("briefing", "begin_new", "n", "New session",
            "Start a fresh session although an unfinished one exists."),
    Command("briefing", "back", "escape", "Back", "Back to the incident list."),
    Command("workspace", "run_query", "f5,ctrl+r,ctrl+enter", "Run", "Run the SQL in the editor."),
    Command("workspace", "cancel_query", "escape", "Cancel", "Stop the running query.", show=False,
            priority=True),
    Command("workspace", "toggle_view", "f2", "Table/Plot", "Switch the result between table and plot."),
    Command("workspace", "snippets", "f3", "Snippets", "Insert a starting query."),
    Command("workspace", "show_updates", "f4", "Updates",
            "Show the updates feed: injects, the interviewer's messages, hints."),
    Command("workspace", "save_ranking", "ctrl+s", "Save ranking",
            "Record the board's order and confidences (they must sum to 100)."),
    Command("workspace", "hint", "f6", "Hint", "Reveal the next hint; it costs points."),
    Command("workspace", "briefing", "f7", "Briefing", "Read the page again, with the hints taken."),
    Command("workspace", "submit", "f8", "Submit", "Confirm ranking and confidences and submit."),
    Command("workspace", "export_transcript", "f9", "Export",
            "Write the session so far as a JSON transcript.", show=False),
    Command("workspace", "focus_editor", "ctrl+e", "Editor", "Focus the SQL editor.", show=False),
    Command("workspace", "focus_board", "ctrl+b", "Board", "Focus the hypothesis board.", show=False),
    Command("workspace", "focus_schema", "ctrl+t", "Schema", "Focus the schema and query list.", show=False),
    Command("editor", "history_previous", "ctrl+up", "Previous query",
            "Previous query from history (also up on the first line).", show=False, palette=False),
    Command("editor", "history_next", "ctrl+down", "Next query",
            "Next query from history (also down on the last line).", show=False, palette=False),
    Command("editor", "complete", "tab", "Complete",
            "Complete a table or column name (a menu when several match).", show=False, palette=False),
    Command("results", "next_column", "y", "Next column", "Plot the next numeric column.", show=False),
    Command("results", "row_detail", "enter", "Row detail",
            "Show every value of the highlighted row in full (the table cuts long values), or a failed "
            "query's whole error.", show=False, palette=False),
    Command("board", "move_up", "shift+up,K", "Move up", "Move the hypothesis up.", palette=False),
    Command("board", "move_down", "shift+down,J", "Move down", "Move the hypothesis down.", palette=False),
    Command("board", "more", "plus,equals_sign", "+5%", "More confidence in the hypothesis.", palette=False),
    Command("board", "less", "minus", "-5%", "Less confidence in the hypothesis.", palette=False),
    Command("board", "normalise", "N", "Normalise",
            "Scale confidences to sum to 100 and order the board by them.", palette=False),
    Command("board", "pin_supports", "s", "Pin supports",
            "Pin the result on screen as evidence for the hypothesis.", palette=False),
    Command("board", "pin_refutes", "x", "Pin refutes",
            "Pin the result on screen as evidence against the hypothesis.", palette=False),
    Command("board", "note", "n", "Note", "Write a note on the hypothesis.", palette=False),
    Command("submit", "normalise", "ctrl+n", "Normalise", "Scale confidences to sum to 100."),
    Command("submit", "confirm", "ctrl+s", "Submit", "Submit this ranking."),
    Command("submit", "cancel", "escape", "Back", "Back to the investigation."),
    Command("debrief", "goto('score')", "s", "Score details", "Jump to the score breakdown and its reasons."),
    Command("debrief", "goto('your-queries-against-the-fault-timeline')", "t", "Timeline",
            "Jump to your queries against the fault timeline."),
    Command("debrief", "goto('what-happened')", "w", "What happened", "Jump to the cause and causal chain.",
            show=False),
    Command("debrief", "export_markdown", "e", "Export Markdown",
            "Write the debrief as Markdown next to the transcript."),
    Command("debrief", "done", "escape", "Incidents", "Back to the incident list."),
)


def commands(scope: str) -> list[Command]:
    return [c for c in COMMANDS if c.scope == scope]


def bindings(scope: str) -> list[Any]:
    """Textual Bindings for one scope (imported here so this module stays importable without Textual)."""
    from textual.binding import Binding

    return [Binding(c.keys, c.action, c.title, show=c.show, priority=c.priority or _function_key(c),
                    tooltip=c.help) for c in commands(scope)]


def _function_key(command: Command) -> bool:
    # F-keys of a screen win over the focused widget's (TextArea binds F6 and F7 to selections), so
    # each works the same wherever the focus is
    return command.scope not in ("editor", "board", "results") and command.keys.split(",")[0].startswith("f")


def help_markdown() -> str:
    """Every key, grouped by where it works, as Markdown tables."""
    out = ["# Keys", ""]
    for scope, title in SCOPE_TITLES.items():
        rows = commands(scope)
        if not rows:
            continue
        out += [f"## {title}", "", "| Key | Does |", "|---|---|"]
        out += [f"| `{c.key_label}` | {c.help} |" for c in rows]
        out.append("")
    out += ["Every action is also in the command palette (ctrl+p).", ""]
    return "\n".join(out)

"""Every key of the TUI in one table: screens take their bindings from it, the help screen lists it,
and the command palette offers its entries. Change a key here and all three follow."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One action. `keys` is Textual's comma-separated key list; the first key is the one shown.

    `scope` names where it works: a screen ("picker", "briefing", "workspace", "submit", "debrief",
    "history", "past_debrief", "room": the facilitator's live room)
    or a widget of the workspace ("editor", "results", "plot", "board", "queries").

    `pinned`: always in the key bar, at its right end, whatever has focus (run, submit, help).
    `bound`: False for keys a widget brings itself (the plot's zoom and pan): listed, not bound here."""

    scope: str
    action: str
    keys: str
    title: str
    help: str
    show: bool = True
    priority: bool = False
    palette: bool = True
    pinned: bool = False
    bound: bool = True

    @property
    def key_label(self) -> str:
        """Every key of the command as a user types it: "F1 / ?"."""
        return " / ".join(dict.fromkeys(key_label(k, short=False) for k in self.keys.split(",")))


KEY_NAMES: dict[str, str] = {
    "question_mark": "?", "slash": "/", "plus": "+", "minus": "-", "equals_sign": "=", "escape": "Esc",
    "enter": "Enter", "tab": "Tab", "home": "Home", "end": "End", "up": "↑", "down": "↓", "left": "←",
    "right": "→", "pageup": "PgUp", "pagedown": "PgDn", "delete": "Del",
    # what most terminals send for ctrl+/ (kitty's protocol sends ctrl+slash): one key to the player
    "ctrl+underscore": "ctrl+/",
}


def key_label(key: str, short: bool = True) -> str:
    """A Textual key name as a user types it: f5 -> F5, question_mark -> ?, shift+up -> shift+↑,
    ctrl+s -> ^s (`short`, for the key bar) or ctrl+s (for help)."""
    key = key.strip()
    if key in KEY_NAMES:
        return KEY_NAMES[key]
    *mods, last = key.split("+")
    name = KEY_NAMES.get(last, last.upper() if last[:1] == "f" and last[1:].isdigit() else last)
    if short and mods == ["ctrl"]:
        return "^" + name
    return "+".join([*mods, name])


SCOPE_TITLES: dict[str, str] = {
    "app": "Anywhere",
    "picker": "Incident picker",
    "briefing": "Briefing",
    "workspace": "Investigation",
    "editor": "SQL editor (ctrl+e)",
    "results": "Results table (ctrl+o)",
    "plot": "Plot (ctrl+g)",
    "board": "Hypothesis board (ctrl+b)",
    "queries": "Query list (ctrl+l)",
    "schema": "Tables (ctrl+t)",
    "submit": "Submit",
    "debrief": "Debrief",
    "history": "Past sessions",
    "past_debrief": "Past debrief",
    "room": "Live room (facilitator)",
}

PANE_SCOPES = ("editor", "results", "plot", "board", "queries", "schema")
"""Scopes that are a pane of the workspace: their keys work while that pane has focus."""

COMMANDS: tuple[Command, ...] = (
    Command("app", "help", "f1,question_mark", "Help", "Show the keys of the screen you are on (this list).",
            pinned=True),
    Command("app", "quit", "ctrl+q", "Quit", "Leave; an unfinished session stays resumable.", palette=False),
    Command("app", "command_palette", "ctrl+p", "Palette", "Every action, searchable.", palette=False),
    Command("picker", "open", "enter", "Open", "Open the highlighted incident's briefing."),
    Command("picker", "focus_filter", "slash", "Filter",
            "Type to narrow the list by title, id or tag. The slash goes to the filter and selects what it "
            "holds, and is never typed into it.", priority=True),
    Command("picker", "random_incident", "f2", "Random", "Open the briefing of an incident drawn at random."),
    Command("picker", "incident_of_the_day", "f3", "Today",
            "Open the briefing of the incident of the day (the same for everyone on a date)."),
    Command("picker", "history", "f4", "History",
            "Your past sessions: incident, score, date and time taken; Enter there reopens a debrief."),
    Command("briefing", "begin", "enter", "Start", "Start the investigation (or continue the session)."),
    Command("briefing", "begin_new", "n", "New session",
            "Start a fresh session although an unfinished one exists."),
    Command("briefing", "back", "escape", "Back", "Back to the incident list."),
    Command("workspace", "run_query", "f5,ctrl+r,ctrl+enter", "Run", "Run the SQL in the editor.", pinned=True),
    Command("workspace", "cancel_query", "escape", "Cancel", "Stop the running query.", show=False,
            priority=True),
    Command("workspace", "submit", "f8", "Submit", "Confirm ranking and confidences and submit.", pinned=True),
    Command("workspace", "focus_editor", "ctrl+e", "Editor", "Go to the SQL editor."),
    Command("workspace", "focus_results", "ctrl+o", "Results",
            "Go to the results table (arrows move between cells, Enter shows the row in full)."),
    Command("workspace", "focus_plot", "ctrl+g", "Plot", "Go to the plot of the result."),
    Command("workspace", "focus_board", "ctrl+b", "Board", "Go to the hypothesis board."),
    Command("workspace", "focus_schema", "ctrl+t", "Tables", "Go to the tables and their columns."),
    Command("workspace", "focus_queries", "ctrl+l", "Queries", "Go to your queries so far (Enter recalls one)."),
    Command("workspace", "maximise", "ctrl+f", "Maximise",
            "Give the pane with focus the whole screen, or put it back (Esc also puts it back)."),
    Command("workspace", "toggle_view", "f2", "Table/Plot", "Switch the result between table and plot."),
    Command("workspace", "snippets", "f3", "Snippets", "Insert a starting query or one of your saved queries."),
    Command("workspace", "save_query", "alt+s", "Save query",
            "Save the editor's query under a name: F3 offers it in every incident you play.", show=False),
    Command("workspace", "show_updates", "f4", "Updates",
            "Show the updates feed: injects, the interviewer's messages, hints."),
    Command("workspace", "save_ranking", "ctrl+s", "Save ranking",
            "Record the board's order and confidences (they must sum to 100)."),
    Command("workspace", "hint", "f6", "Hint", "Reveal the next hint; it costs points."),
    Command("workspace", "briefing", "f7", "Briefing", "Read the page again, with the hints taken."),
    Command("workspace", "export_transcript", "f9", "Export",
            "Write the session so far as a JSON transcript.", show=False),
    Command("editor", "history_previous", "ctrl+up", "History",
            "Put the previous query from your history in the editor (only this key recalls).", palette=False),
    Command("editor", "history_next", "ctrl+down", "Next query",
            "The next query from your history, then back to what you were writing.", show=False, palette=False),
    Command("editor", "select_query", "alt+a", "Select all",
            "Select the whole query: what you type next replaces it (ctrl+a stays line start, as in a shell)."),
    Command("editor", "clear_query", "alt+n", "Clear",
            "Empty the editor for a new query (ctrl+z brings the old one back)."),
    Command("editor", "duplicate_line", "alt+d", "Duplicate line",
            "Copy the line (or the selected lines) below itself."),
    Command("editor", "comment_line", "ctrl+slash,ctrl+underscore", "Comment",
            "Comment the line (or the selected lines) out with --, or back in."),
    Command("editor", "complete", "tab", "Complete",
            "Complete a table or column name (a menu when several match).", palette=False),
    Command("results", "row_detail", "enter", "Row in full",
            "Show every value of the highlighted row in full (the table cuts long values), or a failed "
            "query's whole error.", palette=False),
    Command("results", "cell_detail", "v", "Cell in full", "Show the highlighted cell's value in full.",
            palette=False),
    Command("results", "rows_ends", "ctrl+home,ctrl+end", "First/last row", "Go to the first or the last row.",
            show=False, palette=False, bound=False),
    Command("results", "columns_ends", "home,end", "First/last column", "Go to the first or the last column.",
            show=False, palette=False, bound=False),
    Command("results", "next_column", "y", "Next column", "Plot the next numeric column.", show=False),
    Command("plot", "next_column", "y", "Next column", "Plot the next numeric column.", palette=False,
            bound=False),
    Command("plot", "zoom", "plus,minus", "Zoom", "Zoom in and out.", palette=False, bound=False),
    Command("plot", "pan", "left,right,up,down", "Pan", "Move along the axes.", palette=False, bound=False),
    Command("plot", "reset", "r", "Reset", "Back to the whole result.", palette=False, bound=False),
    Command("board", "move_up", "shift+up,K", "Move up", "Move the hypothesis up.", palette=False),
    Command("board", "move_down", "shift+down,J", "Move down", "Move the hypothesis down.", palette=False),
    Command("board", "more", "plus,equals_sign", "+5%", "More confidence in the hypothesis.", palette=False),
    Command("board", "less", "minus", "-5%", "Less confidence in the hypothesis.", palette=False),
    Command("board", "pin_supports", "s", "Pin supports",
            "Pin the result on screen as evidence for the hypothesis.", palette=False),
    Command("board", "pin_refutes", "x", "Pin refutes",
            "Pin the result on screen as evidence against the hypothesis.", palette=False),
    Command("board", "unpin", "u", "Unpin", "Take a pin off the hypothesis (asks which, if several).",
            palette=False),
    Command("board", "note", "n", "Note", "Write a note on the hypothesis (shows the whole note).",
            palette=False),
    Command("board", "normalise", "N", "Normalise",
            "Scale confidences to sum to 100 and order the board by them.", palette=False),
    Command("board", "first", "home", "First", "Go to the first hypothesis.", show=False, palette=False),
    Command("board", "last", "end", "Last", "Go to the last hypothesis.", show=False, palette=False),
    Command("queries", "recall", "enter", "Recall",
            "Put the query in the editor and show its result; focus stays in the list.", palette=False),
    Command("schema", "insert", "enter", "Insert name",
            "On a column: write its name into the editor at its cursor (the focus stays here); on a table: "
            "open or close it.", palette=False, bound=False),
    Command("submit", "confirm", "ctrl+s", "Submit", "Submit this ranking."),
    Command("submit", "normalise", "ctrl+n", "Normalise", "Scale confidences to sum to 100."),
    Command("submit", "cancel", "escape", "Back", "Back to the investigation."),
    Command("debrief", "goto('score')", "s", "Score details", "Jump to the score breakdown and its reasons."),
    Command("debrief", "goto('your-queries-against-the-fault-timeline')", "t", "Timeline",
            "Jump to your queries against the fault timeline."),
    Command("debrief", "goto('what-happened')", "w", "What happened", "Jump to the cause and causal chain.",
            show=False),
    Command("debrief", "mitigate", "m", "Mitigate",
            "Act on the fleet (an incident with a mitigation phase): rollback, set KNOB=V, drain vllm-N, ...; the "
            "simulation continues with your actions and the debrief gains their score.", show=False),
    Command("debrief", "export_markdown", "e", "Export Markdown",
            "Write the debrief as Markdown next to the transcript."),
    Command("debrief", "done", "escape", "Incidents", "Back to the incident list."),
    Command("history", "open_debrief", "enter", "Debrief",
            "Reopen the highlighted session's debrief (its queries re-run on every world, as at the end)."),
    Command("history", "back", "escape", "Incidents", "Back to the incident list."),
)


COMMANDS += (
    # the facilitator's live room (tui/screens/room.py, `servedrill gameday room PLAN`)
    Command("room", "start_round", "s", "Start",
            "Start round: the next round not played yet (its clock starts for every player); refused while one runs."),
    Command("room", "end_round", "e", "End",
            "End round: the running round ends (asks first); hand-ins are collected, held debriefs open, scores show."),
    Command("room", "broadcast", "b", "Broadcast", "A message to every player in the running round."),
    Command("room", "message_player", "m", "Message",
            "A message to the highlighted player's game only (up and down choose the player)."),
    Command("room", "hint_player", "h", "Hint",
            "Send the highlighted player the incident's next hint (asks first; it costs them points)."),
    Command("room", "next_round", "n", "Next",
            "Next round: end the running round (asks first) and start the next one."),
    Command("room", "refresh", "r", "Refresh", "Read the players' games again now (the room does so every 2 seconds).",
            show=False),
)


COMMANDS += (
    # a debrief reopened from the history reads the same, and Escape goes back to the history
    *(dataclasses.replace(c, scope="past_debrief") for c in COMMANDS if c.scope == "debrief" and c.action != "done"),
    Command("past_debrief", "done", "escape", "History", "Back to your past sessions."),
)


def commands(scope: str) -> list[Command]:
    return [c for c in COMMANDS if c.scope == scope]


def bindings(scope: str) -> list[Any]:
    """Textual Bindings for one scope (imported here so this module stays importable without Textual)."""
    from textual.binding import Binding

    return [Binding(c.keys, c.action, c.title, show=c.show, priority=c.priority or _function_key(c),
                    tooltip=c.help) for c in commands(scope) if c.bound]


def _function_key(command: Command) -> bool:
    # F-keys of a screen win over the focused widget's (TextArea binds F6 and F7 to selections), so
    # each works the same wherever the focus is
    return command.scope not in PANE_SCOPES and command.keys.split(",")[0].startswith("f")


def help_sections(current: list[str]) -> list[tuple[str, list[Command]]]:
    """(title, commands) per scope: the `current` scopes first (the pane with focus, the screen, then
    "app"), each once; the other screens' keys are left out (their own help lists them)."""
    out = []
    for scope in dict.fromkeys([*current, "app"]):
        rows = commands(scope)
        if rows:
            out.append((SCOPE_TITLES.get(scope, scope), rows))
    return out


def help_text(current: list[str], width: int = 100) -> str:
    """The keys of `current` scopes as plain text: a heading per scope, then "key  what it does" lines,
    the help wrapped to `width`."""
    import textwrap

    lines: list[str] = []
    for title, rows in help_sections(current):
        lines += [title, ""]
        keys = [c.key_label for c in rows]
        pad = min(24, max(len(k) for k in keys)) + 2
        for key, command in zip(keys, rows, strict=True):
            body = textwrap.wrap(command.help, max(20, width - pad)) or [""]
            first = key.ljust(pad) if len(key) < pad else key + "\n" + " " * pad
            lines.append(first + body[0])
            lines += [" " * pad + more for more in body[1:]]
        lines.append("")
    lines.append("Every action is also in the command palette (ctrl+p).")
    return "\n".join(lines)

"""The investigation workspace: schema and query list, SQL editor, results (table or plot), the
hypothesis board and a status line, on one screen.

Two layouts from one set of widgets. On a roomy terminal (WIDE_AT columns and TALL_AT rows) every pane
shows at once: the sidebar (tables, queries, updates), the editor over the result, the board below. On
anything smaller (80x24 first) the screen is `-compact`: the editor stays on top and one pane fills the
rest, chosen by a one-line pane bar or a key per pane (ctrl+o results, ctrl+g plot, ctrl+b board, ctrl+t
tables, ctrl+l queries, F4 updates; ctrl+e the editor). In either, ctrl+f gives the focused pane the
whole screen. Focus stays where the player put it: nothing but these keys moves it.

Every change goes through the game (`game.api`): queries run in a thread worker via `Game.run_query`, where
a statement that fails costs nothing; pins and notes are recorded at once, the ranking when the player
saves it or submits.

Updates (the incident's timed injects and what the interviewer sends through the session's inbox) are
polled twice a second and after each query (`Session.due_updates`); each one is a notification and an
entry in the Updates tab of the sidebar (F4), which a resumed session fills with those delivered before.

Why one module of ~770 lines: it is one Screen whose handlers share its state (the visible pane, the
running query, the draft timer), and Textual registers `@on` handlers from each class's own body, so
splitting it into mixins would make every part a Screen subclass of its own. What is not the screen's
wiring lives elsewhere already: widgets in tui/widgets/, board logic in tui/board.py, result views in
tui/resultview.py, dialogs in tui/screens/dialogs.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import ContentSwitcher, Static, Tab, Tabs

from game import api
from tui import screen_start
from tui.actions import PANE_SCOPES, bindings
from tui.app_api import GameApp, Play, game_app
from tui.board import Board, evidence_by_hypothesis, latest_notes
from tui.formatting import one_line
from tui.messages import QueryDone, QueryRefused, SchemaLoaded
from tui.plotting import Marker, epoch_seconds
from tui.resultview import ResultView, from_event, from_result
from tui.screens.dialogs import ChoiceScreen, ConfirmScreen, NoteScreen, QueryNameScreen, SnippetScreen
from tui.text import clean, literal, template
from tui.widgets.board import HypothesisBoard
from tui.widgets.keybar import KeyBar
from tui.widgets.notice_strip import NoticeStrip
from tui.widgets.pane_bar import PANES, PaneBar
from tui.widgets.query_log import QueryLog
from tui.widgets.results import ResultsPanel
from tui.widgets.schema import SchemaTree
from tui.widgets.sql_editor import CompletionMenu, SqlEditor
from tui.widgets.updates_feed import UpdatesFeed, update_title

if TYPE_CHECKING:
    from game.session import Session

MARKER_KINDS = ("deploy", "restart", "crash")
"""Change-log kinds marked on plots."""

UPDATE_POLL_S = 0.5
"""How often the workspace looks for due injects and the interviewer's items."""

DRAFT_DELAY_S = 0.5
"""The draft (board, editor) is written this long after the last change to it (debounced)."""

HEARTBEAT_S = 15.0
"""How often the workspace tells the session it still holds it (the game clock stops between holders; a
crash loses at most this much of it)."""

WIDE_AT = (112, 34)
"""Columns and rows from which every pane shows at once; below either, the compact layout."""

SIDE_PANES = {"schema": "pane-schema", "queries": "pane-queries", "updates": "pane-updates"}
"""Panes that live in the sidebar, and their page in its switcher."""

MARKERS_SQL = (
    "SELECT ts, kind, replica, component FROM events "
    f"WHERE kind IN ({', '.join(repr(k) for k in MARKER_KINDS)}) ORDER BY ts"
)


def _is_compact(width: int, height: int) -> bool:
    """The compact layout (one pane under the editor) for a screen this size."""
    return width < WIDE_AT[0] or height < WIDE_AT[1]


def markers_from_rows(rows: list[tuple[Any, ...]]) -> list[Marker]:
    """Plot markers from (ts, kind, replica, component) rows of the events table."""
    out = []
    for ts, kind, replica, component in rows:
        x = epoch_seconds(ts)
        if x is None:
            continue
        where = replica or component or "fleet"
        out.append(Marker(x, f"{kind} {where}"))
    return out


class WorkspaceScreen(Screen[None]):
    BINDINGS: ClassVar[list[Any]] = bindings("workspace")
    ALLOW_IN_MAXIMIZED_VIEW = "#status-line, #notices, KeyBar, #completion"
    AUTO_FOCUS = "#editor"
    """Focus the editor as the screen composes, before it is first drawn: keys typed as soon as the
    workspace shows go into it (Textual's default would focus the first tab, then on_mount's focus() call
    comes later)."""

    def __init__(self) -> None:
        super().__init__()
        self.running = False
        self.current: ResultView | None = None
        self.saved_at: float | None = None
        self.polls = 0  # looks for due updates so far (tests wait on it)
        self._draft_timer: Any = None
        self._draft_widgets: tuple[HypothesisBoard, SqlEditor] | None = None
        self.drafts_saved = 0  # draft writes so far (tests wait on it)
        self.pane = "results"
        """The pane the compact layout shows under the editor (see PANES); the sidebar's page when wide."""
        self.compact = False
        self.time_warnings = api.TimeWarnings()
        """The clock's warnings given so far (each once; game.api.rounds)."""
        self.timed_out = False
        """TIME UP of a round handed the board in (tests wait on it)."""
        self.timing_out = False

    @property
    def served(self) -> GameApp:
        return game_app(self.app)

    @property
    def play(self) -> Play:
        assert self.served.play is not None
        return self.served.play

    @property
    def session(self) -> Session:
        assert self.play.session is not None  # the workspace opens on a session
        return self.play.session

    # ------------------------------------------------------------ layout

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        screen_start.first_resume(self, event)

    def compose(self) -> ComposeResult:
        # the layout's classes before anything is styled: set in on_mount, each would restyle the whole
        # screen once more (84 of the 522 style applications from the picker to the workspace); Textual's
        # breakpoint classes too (tui.screen_start)
        width, height = self.app.size
        self.compact = _is_compact(width, height)
        screen_start.preset(self, {"-compact": self.compact, f"-pane-{self.pane}": True})
        # Widgets get their starting state in their constructors and apply it in their own on_mount:
        # a screen's on_mount can run before grandchildren composed by a child's compose() exist.
        session = self.session
        queries = [q.data for q in session.queries]
        last = queries[-1] if queries else None
        # what was not recorded when the session was last held: the board and the editor as they were
        draft = session.draft
        board = Board.initial(session.board, draft.get("board") or session.ranking)
        events = session.events
        yield Static("", id="status-line")
        yield NoticeStrip(id="notices")
        yield PaneBar(id="pane-bar")
        with Horizontal(id="work"):
            with Vertical(id="sidebar"):
                updates = session.updates
                yield Tabs(Tab("Tables", id="tab-schema"), Tab("Queries", id="tab-queries"),
                           Tab(_updates_label(len(updates)), id="tab-updates"), id="side-tabs")
                with ContentSwitcher(initial="pane-schema", id="side-switcher"):
                    with Vertical(id="pane-schema"):
                        yield SchemaTree(id="schema")
                        yield Static("Loading tables…", id="schema-desc")
                    with Vertical(id="pane-queries"):
                        yield QueryLog(queries, id="query-log")
                    with Vertical(id="pane-updates"):
                        yield UpdatesFeed(updates, id="updates-feed")
            with Vertical(id="main"):
                text = draft["editor"] if "editor" in draft else str(last.get("sql", "")) if last else ""
                editor = SqlEditor(text, id="editor",
                                   placeholder="Write SQL here · F5 runs it · F3 snippets · Tab completes")
                editor.set_history([str(q.get("sql", "")) for q in queries])
                if self.served.steady:
                    editor.cursor_blink = False
                yield editor
                yield ResultsPanel(from_event(last) if last else None, show_timing=not self.served.steady,
                                   id="results")
        yield HypothesisBoard(board, evidence_by_hypothesis(events), latest_notes(events), id="board")
        completion = CompletionMenu(id="completion")
        completion.display = False
        yield completion
        yield KeyBar("workspace")

    def on_mount(self) -> None:
        session = self.session
        queries = session.queries
        if queries:
            self.current = from_event(queries[-1].data)
        ranked = [e for e in session.events if e.kind == "rank"]
        self.saved_at = ranked[-1].time if ranked else None
        self._update_board_title()
        self._update_status()
        self.set_interval(1.0, self._update_status)
        self.set_interval(UPDATE_POLL_S, self.poll_updates)
        self.set_interval(HEARTBEAT_S, self._heartbeat)
        self._draft_widgets = (self.query_one(HypothesisBoard), self.query_one(SqlEditor))
        self.play.flush_draft = self.save_draft
        self._layout(self.app.size.width, self.app.size.height)
        self._set_pane(self.pane)
        self.call_after_refresh(self.poll_updates)
        self.set_focus(self.query_one(SqlEditor))
        self.served.release_typeahead()  # what was typed while the investigation opened
        self._load_schema()
        self._build_worlds()
        self.call_after_refresh(self.served.mark, "workspace")

    @property
    def editor_ready(self) -> bool:
        """The editor is on screen and has focus: typed keys reach it."""
        editors = self.query(SqlEditor)
        return self.app.screen is self and bool(editors) and self.focused is editors.first()

    @on(Tabs.TabActivated, "#side-tabs")
    def _switch_side(self, event: Tabs.TabActivated) -> None:
        pane = {"tab-queries": "queries", "tab-updates": "updates"}.get(event.tab.id or "", "schema")
        self.query_one("#side-switcher", ContentSwitcher).current = SIDE_PANES[pane]
        if self.pane in SIDE_PANES:
            self._set_pane(pane)

    # ------------------------------------------------------------ layout: compact or wide, panes, maximise

    def on_resize(self, event: events.Resize) -> None:
        self._layout(event.size.width, event.size.height)

    def _layout(self, width: int, height: int) -> None:
        self.compact = _is_compact(width, height)
        self.set_class(self.compact, "-compact")

    def _set_pane(self, pane: str) -> None:
        """Show `pane` (a key of PANES): under the editor when compact; when wide the sidebar's page or the
        result's mode follows. Moves no focus."""
        self.pane = pane
        for name in PANES:
            self.set_class(name == pane, f"-pane-{name}")
        if pane in SIDE_PANES:
            tab = f"tab-{pane}"
            tabs = self.query_one("#side-tabs", Tabs)
            if tabs.active != tab:
                tabs.active = tab
            self.query_one("#side-switcher", ContentSwitcher).current = SIDE_PANES[pane]
        results = self.query_one(ResultsPanel)
        if pane in ("results", "plot") and results.mode != ("plot" if pane == "plot" else "table"):
            results.toggle()
        self.query_one(PaneBar).active = pane

    def show_pane(self, pane: str) -> None:
        """Show `pane` and put the focus in it (a pane key, or a click on the pane bar)."""
        if self.maximized is not None:
            self.minimize()
        self._set_pane(pane)
        target = self._pane_widget(pane)
        if target is not None:
            self.call_after_refresh(target.focus)

    def action_show_pane(self, pane: str) -> None:
        if pane in PANES:
            self.show_pane(pane)

    def _pane_widget(self, pane: str) -> Widget | None:
        """The widget that takes the focus for `pane`."""
        if pane == "results":
            return self.query_one(ResultsPanel).table
        if pane == "plot":
            return self.query_one(ResultsPanel).plot.focus_target
        return {"board": lambda: self.query_one(HypothesisBoard), "schema": lambda: self.query_one(SchemaTree),
                "queries": lambda: self.query_one(QueryLog),
                "updates": lambda: self.query_one(UpdatesFeed)}[pane]()

    def _pane_of(self, widget: Widget) -> str | None:
        """The pane a focused widget belongs to (None for the editor: it shows over every pane but the
        board)."""
        for node in widget.ancestors_with_self:
            if isinstance(node, HypothesisBoard):
                return "board"
            if isinstance(node, ResultsPanel):
                return "plot" if node.mode == "plot" else "results"
            if node.id in ("pane-schema", "pane-queries", "pane-updates"):
                return {"pane-schema": "schema", "pane-queries": "queries", "pane-updates": "updates"}[node.id]
        return None

    def action_maximise(self) -> None:
        """The focused pane gets the whole screen (the status line and the key bar stay); again puts it
        back."""
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        if focused is None:
            return
        target: Widget = focused
        for node in focused.ancestors_with_self:
            # every node below the screen is a Widget (the sidebar is a container); the check narrows the type
            if isinstance(node, ResultsPanel | HypothesisBoard | SqlEditor) or (
                    isinstance(node, Widget) and node.id == "sidebar"):
                target = node
                break
        self.maximized = target

    def action_focus_results(self) -> None:
        self.show_pane("results")

    def action_focus_plot(self) -> None:
        self.show_pane("plot")

    def action_focus_queries(self) -> None:
        self.show_pane("queries")

    # ------------------------------------------------------------ updates (injects, the interviewer)

    def poll_updates(self) -> None:
        """Deliver what is due (timed injects, the interviewer's inbox) and show each one at once."""
        session = self.play.session if self.served.play is not None else None
        if session is None:
            return
        self.polls += 1
        try:
            updates = api.updates(session, self.served.clock())
            news = api.team_news(session)  # a team's game: what the other members did meanwhile
        except (api.SessionError, OSError) as exc:
            self.notice(f"Could not deliver an update: {exc}", key="updates", severity="error")
            return
        for update in updates:
            self._show_update(update)
        if news:
            self._show_team_news(news)

    def _show_team_news(self, news: list[Any]) -> None:
        """A team round: redraw what the other members changed in the shared game (their queries in the log,
        their pins and notes on the board, their saved ranking when this member has no unsaved changes), say
        the latest on the notice strip, and follow the team's hand-in to the held debrief."""
        session = self.session
        board = self.query_one(HypothesisBoard)
        log = self.query_one(QueryLog)
        events = session.events
        first = news[0].seq
        before = next((e.data.get("ranking") for e in reversed(events)
                       if e.kind in ("rank", "submit") and e.seq < first), None)
        for event in news:
            if event.kind == "query":
                log.add(event.data)
        # this member's board follows the team's ranking unless they are arranging one of their own
        untouched = board.board.same_as(before) if before else \
            board.board.ranking() == Board.initial(session.board, None).ranking()
        if any(e.kind in ("rank", "submit") for e in news) and untouched:
            board.board = Board.initial(session.board, session.ranking)  # nothing of this member's is lost
        self._reload_board_marks()
        self._update_board_title()
        self._update_status()
        more = f"  (+{len(news) - 1} more: Queries and the board show them)" if len(news) > 1 else ""
        self.notice(api.team_line(session, news[-1]) + more, key="team", title="Your team", timeout=15)
        self.call_after_refresh(self.served.mark, "team-news")
        if any(e.kind == "submit" for e in news):
            while self in self.app.screen_stack and self.app.screen is not self:
                self.app.pop_screen()  # a dialog open when the team handed in closes with the game
            self.served.show_debrief()

    def _show_update(self, update: Any, notify: bool = True) -> None:
        feed = self.query_one(UpdatesFeed)
        feed.add(update)
        self.query_one("#tab-updates", Tab).label = _updates_label(feed.count)
        self.query_one(PaneBar).updates = feed.count
        if notify:
            # the interviewer's or the incident's words, plain text, on the notice strip's one line; the
            # Updates pane (F4) holds it whole
            self.notice(clean(update.text.strip(), 500, multiline=True, lines=8) + "  · F4 reads it whole",
                        key="update", title=update_title(update),
                        severity="warning" if update.kind == "inject" else "information", timeout=30)
        if update.kind == "hint":
            self._update_status()
        self.call_after_refresh(self.served.mark, f"update-{update.kind}")

    def notice(self, text: str, *, key: str = "", severity: str = "information", title: str = "",
               timeout: float | None = 20.0) -> None:
        """Tell the player `text` (plain) in the notice strip under the status line: a line of its own,
        never over the results, the plot or a dialog (see tui.widgets.notice_strip)."""
        self.query_one(NoticeStrip).show(text, key=key, severity=severity, title=title, timeout=timeout)

    def action_show_updates(self) -> None:
        self.show_pane("updates")

    def focus_scope(self) -> str | None:
        """The actions-table scope of the focused pane ("editor", "results", ...), if it has one."""
        widget = self.focused
        if widget is None:
            return None
        if isinstance(widget, SqlEditor):
            return "editor"
        pane = self._pane_of(widget)
        return pane if pane in PANE_SCOPES else None

    def palette_panes(self) -> dict[str, Widget]:
        """Panes whose keys the command palette also offers, by actions-table scope."""
        return {"editor": self.query_one(SqlEditor)}

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        pane = self._pane_of(event.widget)
        if pane is not None and pane != self.pane and not isinstance(event.widget, SqlEditor):
            self._set_pane(pane)  # a click or Tab moved the focus into another pane
        scope = self.focus_scope()
        self.query_one(KeyBar).show_scopes(*([scope] if scope else []))

    # ------------------------------------------------------------ schema (worker)

    @work(thread=True, exclusive=True, group="schema", exit_on_error=False)
    def _load_schema(self) -> None:
        telemetry = self.play.telemetry
        assert telemetry is not None  # the workspace opens once the telemetry is ready
        try:
            catalog = api.catalog(telemetry)
        except Exception:
            catalog = []
        result = api.glance(telemetry, MARKERS_SQL)
        markers = markers_from_rows(result.rows) if result.ok else []
        self.post_message(SchemaLoaded(catalog, markers))

    def on_schema_loaded(self, message: SchemaLoaded) -> None:
        columns = self.query_one(SchemaTree).load(message.catalog)
        self.query_one(SqlEditor).set_catalog(columns)
        self.query_one("#schema-desc", Static).update(
            f"{len(columns)} tables · Enter on a column inserts it")
        self.query_one(ResultsPanel).set_markers(message.markers)

    @work(thread=True, exclusive=True, group="worlds", exit_on_error=False)
    def _build_worlds(self) -> None:
        """Start building every hypothesis's world in a background process (once per incident and seed
        for the app's lifetime), so scoring at the debrief finds them in the cache."""
        from pathlib import Path

        session = self.session
        stored = Path(session.header.incident_path) if session.header.incident_path else None
        path = stored if stored is not None and stored.is_file() else self.play.entry.path
        self.served.start_world_build(path, session.header.seed)

    @on(SchemaTree.Insert)
    def _insert_name(self, message: SchemaTree.Insert) -> None:
        # the focus stays in the tree (the editor shows beside or above it): the player moves it
        self.query_one(SqlEditor).insert(message.text)

    @on(SchemaTree.Described)
    def _describe(self, message: SchemaTree.Described) -> None:
        self.query_one("#schema-desc", Static).update(literal(message.text, 500, multiline=True, lines=6))

    # ------------------------------------------------------------ completion

    @on(SqlEditor.CompletionOffered)
    def _offer(self, message: SqlEditor.CompletionOffered) -> None:
        menu = self.query_one(CompletionMenu)
        menu.offer(message.completion.candidates[:50])
        x, y = self.query_one(SqlEditor).cursor_screen_offset
        menu.styles.offset = (max(0, x - len(message.completion.prefix)), y + 1)
        menu.display = True
        menu.highlighted = 0
        menu.focus()

    @on(CompletionMenu.Chosen)
    def _completed(self, message: CompletionMenu.Chosen) -> None:
        menu = self.query_one(CompletionMenu)
        editor = self.query_one(SqlEditor)
        if message.text is not None:
            editor.insert_completion(getattr(menu, "prefix", ""), message.text)
        menu.display = False
        editor.focus()

    # ------------------------------------------------------------ queries

    def action_run_query(self) -> None:
        if self.running:
            self.notice("A query is already running; Escape cancels it.", key="query", severity="warning",
                        timeout=5)
            return
        # F5 is a priority binding, handled before keys typed just before it reach the editor: read the
        # text from a callback queued behind those keys, so the query is what the player typed
        editor = self.query_one(SqlEditor)
        editor.call_later(self._run_editor_text, editor)

    def _run_editor_text(self, editor: SqlEditor) -> None:
        if self.running:
            return
        sql = editor.text
        if not sql.strip():
            self.notice("Type a query first (F3 offers starting points).", key="query", severity="warning",
                        timeout=8)
            return
        self.running = True
        self.query_one(NoticeStrip).withdraw("query")
        self.query_one(ResultsPanel).running(sql)
        self._update_status()
        self._run(sql)

    @work(thread=True, exclusive=True, group="query", exit_on_error=False)
    def _run(self, sql: str) -> None:
        try:
            ran = self.play.game.run_query(sql)
        except api.SessionError as exc:
            self.post_message(QueryRefused(str(exc)))
            return
        self.post_message(QueryDone(ran.event, from_result(ran.index or 0, ran.result)))

    def on_query_done(self, message: QueryDone) -> None:
        self.running = False
        view: ResultView = message.view
        self._show(view)
        if message.event is not None:
            self.query_one(QueryLog).add(message.event.data)
        self.query_one(SqlEditor).remember(view.sql)
        self._update_status()
        budget = self.session.incident.query_budget
        if message.event is not None and budget and len(self.session.queries) == budget:
            self.notice(f"That was query {budget} of your budget of {budget}; more queries cost points.",
                        key="budget", severity="warning", timeout=30)
        self.poll_updates()
        self.call_after_refresh(self.served.mark, "rows")

    def on_query_refused(self, message: QueryRefused) -> None:
        self.running = False
        self.notice(clean(message.error, 1000, multiline=True, lines=10), key="query", severity="error",
                    timeout=None)
        self._update_status()

    def _show(self, view: ResultView) -> None:
        self.current = view
        self.query_one(ResultsPanel).show(view)
        if self.compact and self.pane == "board":
            # the board's pane hides the result: say it is there, and leave the focus where it is
            self.query_one(HypothesisBoard).flash(f"{one_line(view.summary(False), 80)} · ctrl+o shows it",
                                                  error=not view.ok)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "cancel_query":
            # False lets Escape fall through to the focused widget. Asked at each key press; the
            # binding is not in the footer, so no refresh_bindings (a footer rebuild) per query.
            return self.running
        return True

    def action_cancel_query(self) -> None:
        if self.play.telemetry is not None and api.cancel(self.play.telemetry):
            self.query_one("#results-info", Static).update("Cancelling…")

    @on(QueryLog.Recalled)
    def _recall(self, message: QueryLog.Recalled) -> None:
        """A past query back in the editor and its kept rows in the results; the focus stays in the list."""
        data = next((q.data for q in self.session.queries if q.data.get("index") == message.index), None)
        if data is None:
            return
        self.query_one(SqlEditor).recall(str(data.get("sql", "")))
        self.current = from_event(data)
        self.query_one(ResultsPanel).show(self.current)

    def action_toggle_view(self) -> None:
        results = self.query_one(ResultsPanel)
        had_focus = self.focused is not None and self._pane_of(self.focused) in ("results", "plot")
        mode = results.toggle()
        pane = "plot" if mode == "plot" else "results"
        if self.compact or self.pane in ("results", "plot"):
            self._set_pane(pane)
        if had_focus:  # the focus was in the result: it follows the result to its other view
            target = self._pane_widget(pane)
            if target is not None:
                self.call_after_refresh(target.focus)

    def action_snippets(self) -> None:
        def insert(sql: str | None) -> None:
            if sql:
                editor = self.query_one(SqlEditor)
                editor.recall(sql)  # the snippet replaces the editor's text (ctrl+z brings it back)
                editor.focus()

        try:
            saved = api.saved_queries(self.session.header.player, self.served.data_root)
        except api.SessionError as exc:  # an unreadable file of saved queries: said, the snippets still offered
            saved = []
            self.notice(one_line(str(exc), 500), key="saved", severity="error", timeout=None)
        self.app.push_screen(SnippetScreen(api.snippets(self.session.incident), saved), insert)

    def action_save_query(self) -> None:
        sql = self.query_one(SqlEditor).text.strip()
        if not sql:
            self.notice("Type a query first: alt+s saves the editor's query.", key="saved", severity="warning",
                        timeout=5)
            return
        player, root = self.session.header.player, self.served.data_root

        def save(name: str) -> str | None:
            try:
                api.save_query(player, name, sql, root)
            except api.SessionError as exc:
                return str(exc)
            return None

        def saved(name: str | None) -> None:
            if name:
                self.notice(f"Saved as \u201c{one_line(name, 80)}\u201d: F3 offers it in every incident.",
                            key="saved", timeout=5)
            self.query_one(SqlEditor).focus()

        self.app.push_screen(QueryNameScreen(sql, save, api.SAVED_NAME_CHARS), saved)

    # ------------------------------------------------------------ board

    @on(HypothesisBoard.Changed)
    def _board_changed(self) -> None:
        self._update_board_title()
        self._draft_changed()

    @on(SqlEditor.Changed, "#editor")
    def _editor_changed(self) -> None:
        self._draft_changed()

    # ------------------------------------------------------------ draft (what is not recorded yet)

    def _draft_changed(self) -> None:
        """Write the draft DRAFT_DELAY_S after the last change (typing restarts the wait)."""
        if self._draft_timer is None:
            self._draft_timer = self.set_timer(DRAFT_DELAY_S, self.save_draft)
        else:
            self._draft_timer.reset()

    def save_draft(self) -> None:
        """Write the board and the editor's text to the session's draft now (resume shows them again)."""
        if self._draft_timer is not None:
            self._draft_timer.stop()
            self._draft_timer = None
        play = self.served.play
        if play is None or play.session is None or play.session.state != "investigating":
            return
        if self._draft_widgets is None:
            return
        board_widget, editor = self._draft_widgets  # kept: at unmount the screen no longer finds its children
        board = board_widget.board
        try:
            api.save_draft(play.session, board=[{"id": i.id, "confidence": i.confidence} for i in board.items],
                           editor=editor.text)
        except (api.SessionError, OSError):
            return
        self.drafts_saved += 1

    def _heartbeat(self) -> None:
        play = self.served.play
        if play is not None and play.session is not None:
            api.heartbeat(play.session)

    def on_unmount(self) -> None:
        play = self.served.play
        if play is not None and play.flush_draft == self.save_draft:
            play.flush_draft = None
            self.save_draft()

    def _update_board_title(self) -> None:
        board = self.query_one(HypothesisBoard)
        saved = board.board.same_as(self.session.ranking)
        if saved:
            state = "saved"
        elif self.session.ranking is None:
            state = "not saved yet (ctrl+s saves)"
        else:
            state = "[b]unsaved changes[/b] (ctrl+s saves)"
        problems = board.board.problems()
        strip = self.query_one(NoticeStrip)
        current = strip.current
        if not problems and current is not None and strip.has("ranking") and current.severity == "error":
            strip.withdraw("ranking")  # its cause is fixed: a stale "Not saved" goes
        # a problem quotes hypothesis titles (the incident file's words): a template variable, not markup
        warn = " · [b]$problem[/b]" if problems else ""
        board.border_title = template(f"Hypotheses · total {board.board.total}% · {state}{warn}",
                                      problem=one_line(problems[0], 120) if problems else "")
        board.set_hint("shift+↑↓ move · +/- confidence · s/x pin · u unpin · n note · N normalise")

    def action_save_ranking(self) -> None:
        board = self.query_one(HypothesisBoard).board
        problems = board.problems()
        if problems:
            # stays until the board is fixed (see _update_board_title) or saved
            self.notice(f"Not saved: {problems[0]}. Press N on the board to normalise.", key="ranking",
                        severity="error", timeout=None)
            return
        try:
            event = self.play.game.rank(board.ranking())
        except api.SessionError as exc:
            self.notice(one_line(str(exc), 500), key="ranking", severity="error", timeout=None)
            return
        self.saved_at = event.time
        self._update_board_title()
        self._update_status()
        self.notice("Ranking saved.", key="ranking", timeout=5)

    @on(HypothesisBoard.PinRequested)
    def _pin(self, message: HypothesisBoard.PinRequested) -> None:
        view = self.current
        board = self.query_one(HypothesisBoard)
        if view is None or not view.counted:
            board.flash("Nothing to pin: run or recall a query that ran (its result is what a pin attaches).",
                        error=True)
            return
        try:
            self.play.game.pin(view.index, message.hypothesis, message.stance)
        except api.SessionError as exc:
            board.flash(one_line(str(exc), 300), error=True)
            return
        self._reload_board_marks()
        shown = next(h for h in self.session.board if h.id == message.hypothesis)
        # said on the board itself: a toast would cover the Evidence and Note columns it changed
        board.flash(f"Pinned Q{view.index} as {message.stance} {one_line(shown.label, 4)}.")

    @on(HypothesisBoard.UnpinRequested)
    def _unpin(self, message: HypothesisBoard.UnpinRequested) -> None:
        """Take a pin off a hypothesis: the only one at once, else the player picks which."""
        board = self.query_one(HypothesisBoard)
        ev = board.evidence.get(message.hypothesis)
        pins = [(q, "supports") for q in (ev.supports if ev else [])] + \
               [(q, "refutes") for q in (ev.refutes if ev else [])]
        if not pins:
            board.flash("No pins on this hypothesis.", error=True)
            return
        unpin = getattr(self.session, "unpin", None)
        if unpin is None:
            board.flash("Removing a pin needs Session.unpin, which this game version lacks.", error=True)
            return

        def remove(choice: int | None) -> None:
            if choice is None:
                return
            query, stance = pins[choice]
            try:
                unpin(query, message.hypothesis, stance)
            except api.SessionError as exc:
                board.flash(one_line(str(exc), 300), error=True)
                return
            self._reload_board_marks()
            board.flash(f"Unpinned Q{query} ({stance}).")

        if len(pins) == 1:
            remove(0)
            return
        self.app.push_screen(ChoiceScreen("Take which pin off?",
                                          [f"Q{q} {stance}" for q, stance in pins]), remove)

    @on(HypothesisBoard.NoteRequested)
    def _note(self, message: HypothesisBoard.NoteRequested) -> None:
        existing = latest_notes(self.session.events).get(message.hypothesis, "")

        def save(text: str | None) -> None:
            if text is None or text == existing:
                return
            try:
                self.play.game.note(message.hypothesis, text)
            except api.SessionError as exc:
                self.notice(one_line(str(exc), 500), key="note", severity="error")
                return
            self._reload_board_marks()

        self.app.push_screen(NoteScreen(message.title, existing), save)

    def _reload_board_marks(self) -> None:
        board = self.query_one(HypothesisBoard)
        events = self.session.events
        board.evidence = evidence_by_hypothesis(events)
        board.notes = latest_notes(events)
        board.redraw()

    # ------------------------------------------------------------ hint, briefing, submit, export

    def action_hint(self) -> None:
        incident = self.session.incident
        taken = self.session.hints_taken
        if taken >= len(incident.hints):
            self.notice("No hints left." if incident.hints else "This incident has no hints.", key="hint",
                        severity="warning", timeout=8)
            return
        cost = incident.hints[taken].cost

        def take(yes: bool | None) -> None:
            if not yes:
                return
            try:
                event = self.play.game.hint()
            except api.SessionError as exc:
                self.notice(one_line(str(exc), 500), key="hint", severity="error")
                return
            self.notice(clean(event.data["text"], 2000, multiline=True, lines=40) + "  · F4 reads it whole",
                        key="hint", title=f"Hint {taken + 1} (-{event.data['cost']} points)", timeout=30)
            self._show_update(self.session.updates[-1], notify=False)
            self._update_status()

        self.app.push_screen(ConfirmScreen(f"Take hint {taken + 1} of {len(incident.hints)}? "
                                           f"It costs {cost} points."), take)

    def action_briefing(self) -> None:
        from tui.screens.briefing import BriefingScreen

        hints = [str(e.data.get("text", "")) for e in self.session.events if e.kind == "hint"]
        # the variant being played, its hypotheses in this session's board order
        entry = api.briefing_entry(self.play.entry, self.session.incident, self.session.board)
        self.app.push_screen(BriefingScreen(entry, review=True, hints=hints))

    def action_submit(self) -> None:
        from tui.screens.submit import SubmitScreen

        if self.running:
            self.notice("Wait for the running query (or cancel it with Escape) before submitting.",
                        key="query", severity="warning", timeout=8)
            return

        def done(submitted: bool | None) -> None:
            if submitted:
                self.served.show_debrief()

        board = self.query_one(HypothesisBoard).board.copy()
        self.app.push_screen(SubmitScreen(board), done)

    def action_export_transcript(self) -> None:
        path = self.served.export_transcript()
        if path is not None:
            self.notice(f"Transcript written to {path}", key="export", timeout=15)

    def action_focus_editor(self) -> None:
        if self.maximized is not None and not isinstance(self.maximized, SqlEditor):
            self.minimize()
        if self.compact and self.pane == "board":
            self._set_pane("results")  # the board pane is the one that hides the editor
        self.query_one(SqlEditor).focus()

    def action_focus_board(self) -> None:
        self.show_pane("board")

    def action_focus_schema(self) -> None:
        self.show_pane("schema")

    # ------------------------------------------------------------ status

    def _update_status(self) -> None:
        session = self.session
        incident = session.incident
        # the clock (game.api.rounds): the game clock against the incident's limit, or in a game-day round the
        # round's; warnings at 5 and 1 minute left go to the notice strip, TIME UP of a round hands in
        now = self.served.clock()
        clock = api.player_clock(session, now)
        parts = []
        parts.append(f"[b red]{clock.text()}[/]" if clock.urgent or clock.time_up else clock.text())
        used = len(session.queries)
        budget = incident.query_budget
        queries = f"queries {used}" + (f" / {budget}" if budget else "")
        parts.append(f"[b red]{queries}[/]" if budget and used > budget else queries)
        parts.append(f"hints {session.hints_taken} / {len(incident.hints)}")
        if self.running:
            parts.append("[b]● running[/b] (Esc cancels)")

        status = self.query_one("#status-line", Static)
        status.update(template("  ·  ".join(parts) + "  ·  [b]$title[/b]", title=one_line(incident.title, 60)))
        for due in self.time_warnings.due(clock):
            final = due.kind == "time_up" and clock.round is not None
            self.notice(due.text, key="clock", severity="error" if final else "warning",
                        timeout=None if final else 60)
        if clock.submits and clock.time_up and session.state == "investigating" and not self.timing_out:
            self.timing_out = True
            self.call_after_refresh(self._time_up, clock)  # once the screen is the app's (a resume after the end)

    def _time_up(self, clock: api.Clock) -> None:
        """TIME UP of a game-day round: hand in the board as it stands on screen, then the debrief (held until
        the round ends, as the round's plan says)."""
        self.timing_out = False
        if self.running:
            self.action_cancel_query()
        board = self.query_one(HypothesisBoard).board
        ranking = sorted(((i.id, float(i.confidence)) for i in board.items), key=lambda r: -r[1])
        try:
            if api.time_up(self.session, clock, ranking) is None:
                return
        except api.SessionError:
            # the board on screen does not add up (mid-edit): the last ranking saved, else an even split
            try:
                api.time_up(self.session, clock)
            except api.SessionError as exc:
                self.notice(f"TIME UP, but the hand-in failed: {exc}", key="clock", severity="error", timeout=None)
                return
        self.timed_out = True
        while self in self.app.screen_stack and self.app.screen is not self:
            self.app.pop_screen()  # a dialog open at TIME UP (submit, a note) closes with the round
        self.served.mark("time-up")
        self.served.show_debrief()


def _updates_label(count: int) -> str:
    return f"Updates {count}" if count else "Updates"

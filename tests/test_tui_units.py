"""The TUI's pure parts: library peek, board, plotting, completion, formatting, snippets, timeline, keys."""

from __future__ import annotations

import datetime as dt
import inspect
import itertools
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_tui_support import FIXTURE

from game.rules.library import default_index, filter_entries, read_entry, read_library
from game.session.hypotheses import Shown
from incidents.snippets import METRIC_PLACEHOLDER, snippets
from tui.actions import COMMANDS, SCOPE_TITLES, commands, help_sections, help_text
from tui.board import Board, BoardItem, evidence_by_hypothesis, latest_notes
from tui.completion import complete, word_before
from tui.formatting import cell_text, clock_text, duration_text, one_line
from tui.plotting import Marker, clock_ticks, epoch_seconds, markers_in_range, plot_spec
from tui.resultview import from_event
from tui.timeline import fault_strip, span_strip, timeline_text
from tui.widgets.keybar import key_label, keybar_markup, pinned_markup

pytest_plugins = ("test_tui_support",)  # the shared fixtures: tui_cache, tui_env

# ---------------------------------------------------------------- library


def test_read_entry_takes_the_display_fields_from_the_file() -> None:
    entry = read_entry(FIXTURE)
    assert entry.problem is None
    assert (entry.id, entry.difficulty, entry.query_budget, entry.time_limit_s) == ("tui-mini", 1, 12, 900.0)
    assert entry.briefing.reported_by == "Chat team (on-call)"
    assert entry.briefing.evidence == ("p90 time to first token went up for part of the traffic",)
    # the peek does not know the session's shuffled board, and file order must not show: none listed
    assert entry.hypotheses == ()


def test_read_entry_lists_a_broken_file_with_its_problem(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("id: x\ntitle: [unclosed\n")
    entry = read_entry(bad)
    assert entry.id == "broken" and entry.problem is not None and "line" in entry.problem
    listy = tmp_path / "listy.yaml"
    listy.write_text("- a\n- b\n")
    assert read_entry(listy).problem is not None
    assert read_entry(tmp_path / "missing.yaml").problem is not None


def test_library_filter_and_preselection(tmp_path: Path) -> None:
    other = tmp_path / "zz-other.yaml"
    other.write_text("id: zz-other\ntitle: Decode got slower\ntags: [decode, memory]\n")
    entries = read_library([other, FIXTURE, FIXTURE])
    assert [e.id for e in entries] == ["zz-other", "tui-mini"]  # duplicates dropped, order kept
    assert [e.id for e in filter_entries(entries, "DECODE")] == ["zz-other"]
    assert [e.id for e in filter_entries(entries, "replicas latency")] == ["tui-mini"]
    # a topic tag can name the cause: it is not shown, so it does not match either
    assert entries[1].shown_tags == ["latency"]
    assert filter_entries(entries, "hardware") == []
    assert filter_entries(entries, "  ") == entries
    assert default_index(entries, "tui-mini") == 1
    assert default_index(entries, str(FIXTURE)) == 1
    assert default_index(entries, None) == 0  # no one-slow-replica here: the first
    assert default_index(entries, "nope") == 0


def test_the_installed_library_preselects_the_default_incident() -> None:
    entries = read_library()
    assert entries, "the incident library is empty"
    if any(e.id == "one-slow-replica" for e in entries):
        assert entries[default_index(entries)].id == "one-slow-replica"


# ---------------------------------------------------------------- board

HYPS = [Shown("A", "c", "Gamma"), Shown("B", "a", "Alpha"), Shown("C", "b", "Beta")]
"""A session's board: labels in its shuffled order, which is not the ids' (file) order."""


def test_initial_board_is_an_even_split_in_board_order_that_never_rises() -> None:
    board = Board.initial(HYPS)
    assert [(i.label, i.id, i.confidence) for i in board.items] == [("A", "c", 34), ("B", "a", 33), ("C", "b", 33)]
    assert board.problems() == []
    assert board.items[0].name == "A  Gamma"


def test_initial_board_follows_a_saved_ranking_and_appends_the_rest_in_board_order() -> None:
    board = Board.initial(HYPS, [{"id": "b", "confidence": 80.0}, {"id": "a", "confidence": 20.0}])
    assert [(i.id, i.confidence) for i in board.items] == [("b", 80), ("a", 20), ("c", 0)]
    assert [i.label for i in board.items] == ["C", "B", "A"]
    board = Board.initial(HYPS, [{"id": "c", "confidence": 80.0}, {"id": "a", "confidence": 20.0}])
    assert board.same_as([{"id": "c", "confidence": 80.0}, {"id": "a", "confidence": 20.0}])
    board.adjust(2, 5)
    assert not board.same_as([{"id": "c", "confidence": 80.0}, {"id": "a", "confidence": 20.0}])
    assert not Board.initial(HYPS).same_as(None)


def test_move_and_adjust_stay_within_bounds() -> None:
    board = Board.initial(HYPS)
    assert board.move(0, -1) == 0
    assert board.move(0, +5) == 2
    assert [i.id for i in board.items] == ["a", "b", "c"]
    assert [i.label for i in board.items] == ["B", "C", "A"]  # labels travel with their hypotheses
    board.adjust(0, 500)
    board.adjust(1, -500)
    assert (board.items[0].confidence, board.items[1].confidence) == (100, 0)


def test_problems_name_the_sum_and_the_first_order_violation() -> None:
    board = Board([BoardItem("a", "Alpha", 20, "A"), BoardItem("b", "Beta", 50, "B"), BoardItem("c", "Gamma", 20, "C")])
    problems = board.problems()
    assert problems[0] == "confidences sum to 90%, not 100%"
    assert problems[1] == "B 'Beta' (50%) sits below A 'Alpha' (20%)"
    assert all(i.label for i in board.normalised().items) and all(i.label for i in board.copy().items)


@given(st.lists(st.integers(min_value=0, max_value=100), min_size=1, max_size=8))
def test_normalised_sums_to_100_and_is_ordered(confidences: list[int]) -> None:
    board = Board([BoardItem(str(i), f"h{i}", c) for i, c in enumerate(confidences)])
    out = board.normalised()
    assert out.total == 100
    assert out.problems() == []
    assert sorted(i.id for i in out.items) == sorted(i.id for i in board.items)
    if sum(confidences):
        # a hypothesis the player gave more than another never ends up with less
        given_conf = {i.id: i.confidence for i in board.items}
        got = {i.id: i.confidence for i in out.items}
        for x in given_conf:
            for y in given_conf:
                if given_conf[x] > given_conf[y]:
                    assert got[x] >= got[y]


def test_evidence_and_notes_from_events() -> None:
    class E:
        def __init__(self, kind: str, data: dict[str, object]) -> None:
            self.kind, self.data = kind, data

    events = [E("pin", {"query": 1, "hypothesis": "a", "stance": "supports"}),
              E("pin", {"query": 1, "hypothesis": "a", "stance": "supports"}),
              E("pin", {"query": 2, "hypothesis": "a", "stance": "refutes"}),
              E("note", {"hypothesis": "b", "text": "first"}),
              E("note", {"hypothesis": "b", "text": "second"}),
              E("query", {"index": 3})]
    evidence = evidence_by_hypothesis(events)
    assert (evidence["a"].supports, evidence["a"].refutes) == ([1], [2])
    assert latest_notes(events) == {"b": "second"}


# ---------------------------------------------------------------- plotting

T0 = dt.datetime(2025, 3, 4, 9, 0, 0)


def test_plot_spec_groups_by_a_text_column_and_sorts_by_time() -> None:
    rows = [(T0 + dt.timedelta(seconds=60), "vllm-1", 3.0), (T0, "vllm-1", 1.0), (T0, "vllm-0", 2.0)]
    spec = plot_spec(["t", "replica", "v"], ["TIMESTAMP", "VARCHAR", "DOUBLE"], rows)
    assert not isinstance(spec, str)
    assert (spec.time_column, spec.value_column, spec.group_column) == ("t", "v", "replica")
    assert [s.label for s in spec.series] == ["vllm-0", "vllm-1"]
    assert spec.series[1].y == [1.0, 3.0]
    assert spec.series[1].x[1] - spec.series[1].x[0] == 60.0


def test_plot_spec_says_why_it_cannot_plot() -> None:
    assert "time column" in plot_spec(["r", "v"], ["VARCHAR", "DOUBLE"], [("a", 1.0)])
    assert "numeric" in plot_spec(["t", "r"], ["TIMESTAMP", "VARCHAR"], [(T0, "a")])
    assert "no rows" in plot_spec(["t", "v"], ["TIMESTAMP", "DOUBLE"], [])


def test_plot_spec_picks_the_requested_numeric_column_and_skips_nulls() -> None:
    rows = [(T0, 1, 10.0), (T0 + dt.timedelta(seconds=1), None, 11.0)]
    spec = plot_spec(["t", "n", "v"], ["TIMESTAMP", "BIGINT", "DOUBLE"], rows, value_column="v")
    assert not isinstance(spec, str) and spec.value_column == "v" and spec.value_columns == ["n", "v"]
    first = plot_spec(["t", "n", "v"], ["TIMESTAMP", "BIGINT", "DOUBLE"], rows)
    assert not isinstance(first, str) and first.series[0].y == [1.0]


def test_plot_spec_reads_journalled_rows_without_types() -> None:
    # a session file keeps timestamps as ISO text and no column types
    rows = [["2025-03-04T09:00:10", "vllm-0", 1.5], ["2025-03-04T09:00:20", "vllm-0", 2.5]]
    view = from_event({"index": 4, "sql": "x", "ok": True, "row_count": 2,
                       "columns": ["ts", "replica", "value"], "rows": rows})
    assert not isinstance(view.plot, str)
    assert view.plot.series[0].x == [epoch_seconds(T0) + 10, epoch_seconds(T0) + 20]
    assert view.from_journal and "session file" in view.summary()


def test_plot_spec_leaves_out_a_grouping_column_with_too_many_values() -> None:
    rows = [(T0 + dt.timedelta(seconds=i), f"id{i}", float(i)) for i in range(20)]
    spec = plot_spec(["t", "id", "v"], ["TIMESTAMP", "VARCHAR", "DOUBLE"], rows, max_groups=8)
    assert not isinstance(spec, str) and spec.group_column is None and len(spec.series) == 1


@given(st.floats(min_value=0, max_value=2e9), st.floats(min_value=1, max_value=5e5))
def test_clock_ticks_are_round_inside_and_few(low: float, span: float) -> None:
    ticks = clock_ticks(low, low + span, max_ticks=6)
    assert 1 <= len(ticks) <= 7
    assert all(low <= t <= low + span for t in ticks)
    steps = {round(b - a, 6) for a, b in itertools.pairwise(ticks)}
    assert len(steps) <= 1
    if steps and min(steps) >= 60:
        assert all(t % 60 == 0 for t in ticks)


def test_markers_in_range_merges_same_second() -> None:
    markers = [Marker(10.0, "deploy api"), Marker(10.0, "restart vllm-1"), Marker(99.0, "late"),
               Marker(10.0, "deploy api")]
    merged = markers_in_range(markers, 0.0, 50.0)
    assert [(m.x, m.label) for m in merged] == [(10.0, "deploy api, restart vllm-1")]


# ---------------------------------------------------------------- completion

CATALOG = {"requests": ["replica", "prefill_s", "request_id"], "metrics": ["replica", "name", "value"]}


def test_completion_offers_tables_after_from_and_columns_elsewhere() -> None:
    assert complete("SELECT * FROM re", CATALOG).candidates == ("requests",)
    assert complete("SELECT * FROM ", CATALOG).candidates == ("metrics", "requests")
    assert complete("SELECT pre", CATALOG).candidates == ("prefill_s",)
    found = complete("SELECT re", CATALOG)
    assert found.candidates == ("replica", "request_id", "requests") and found.common == "re"
    assert complete("SELECT metrics.va", CATALOG).candidates == ("value",)
    assert complete("SELECT nosuch.va", CATALOG).candidates == ()
    assert complete("SELECT 1 + ", CATALOG).candidates == ()
    assert word_before("x = requests.rep") == "requests.rep"


def test_common_prefix_is_case_insensitive() -> None:
    found = complete("select REQ", CATALOG)
    assert found.candidates == ("request_id", "requests") and found.common == "request"


# ---------------------------------------------------------------- formatting

def test_cell_text() -> None:
    assert cell_text(None) == "NULL"
    assert cell_text(0.1234567891) == "0.123457"
    assert cell_text(dt.datetime(2025, 3, 4, 9, 0, 1)) == "2025-03-04 09:00:01"
    assert cell_text(dt.datetime(2025, 3, 4, 9, 0, 1, 500000)) == "2025-03-04 09:00:01.500"
    assert cell_text("a\nb") == "a b"
    assert len(cell_text("x" * 500)) == 60
    assert cell_text(True) == "true"


def test_durations_and_clocks() -> None:
    assert duration_text(0.0123) == "12 ms"
    assert duration_text(1.5) == "1.50 s"
    assert duration_text(125) == "2 min 05 s"
    assert clock_text(65) == "1:05"
    assert clock_text(3725) == "1:02:05"
    assert clock_text(-3) == "0:00"
    assert one_line("a  b\nc", 4) == "a b…"


# ---------------------------------------------------------------- snippets

def test_every_snippet_runs_and_the_latency_one_decomposes_latency(tui_cache: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from game.query.gateway import Gateway
    from game.rules.observe import decomposes_latency
    from incidents.loader import load_incident
    from telemetry_gen.cache import ensure_database

    monkeypatch.setenv("SERVEDRILL_CACHE", str(tui_cache))
    incident = load_incident(FIXTURE)
    info = ensure_database(incident, 0)
    with Gateway(Path(info.path)) as gateway:
        for snippet in snippets(incident.window.start, incident.window.duration_s):
            # the metric snippet waits for the player to name a metric; named, it runs and plots
            sql = snippet.sql.replace(METRIC_PLACEHOLDER, "vllm:num_requests_running")
            result = gateway.run(sql)
            assert result.ok, (snippet.key, result.error)
            assert result.row_count > 0, snippet.key
            if snippet.key == "metric":
                assert gateway.run(snippet.sql).row_count == 0  # unnamed, it shows nothing
            if snippet.key == "latency":
                assert decomposes_latency(result.reads)
            if snippet.key in ("percentiles", "metric"):
                assert not isinstance(plot_spec(result.columns, result.types, result.rows), str)


# ---------------------------------------------------------------- timeline

def test_strips_place_faults_and_spans_on_the_window() -> None:
    assert fault_strip([150.0], 300.0, width=10) == "·····▼····"
    assert fault_strip([300.0], 300.0, width=10).endswith("▼")
    assert span_strip((120.0, 300.0), 300.0, width=10) == "····██████"
    assert span_strip(None, 300.0, width=4) == "    "


def test_read_span_uses_ts_bounds() -> None:
    from tui.timeline import read_span

    reads = [{"table": "requests", "columns": ["x"], "filters": ["ts >= '2025-03-04 09:02:00'::TIMESTAMP"]}]
    assert read_span(reads, T0, 300.0) == (120.0, 300.0)
    assert read_span([{"table": "metrics", "columns": [], "filters": []}], T0, 300.0) == (0.0, 300.0)
    assert read_span([], T0, 300.0) is None


class _Ev:
    def __init__(self, kind: str, data: dict[str, object], time: float = 0.0) -> None:
        self.kind, self.data, self.time = kind, data, time


def _tiny_incident() -> object:
    from types import SimpleNamespace

    hyps = [SimpleNamespace(id="t", title="The true one", true=True),
            SimpleNamespace(id="r1", title="Rival one", true=False),
            SimpleNamespace(id="r2", title="Rival two", true=False)]
    window = SimpleNamespace(start=T0, duration_s=300.0)
    return SimpleNamespace(hypotheses=hyps, window=window, faults=[SimpleNamespace(at_s=120.0)])


def test_timeline_names_the_rivals_each_query_ruled_out_first_by_label() -> None:
    incident = _tiny_incident()
    board = [Shown("A", "r2", "Rival two"), Shown("B", "t", "The true one"), Shown("C", "r1", "Rival one")]
    events = [_Ev("start", {}, 0.0),
              _Ev("query", {"index": 1, "ok": True, "reads": [{"table": "requests", "filters": []}]}, 30.0),
              _Ev("query", {"index": 2, "ok": True, "reads": [{"table": "requests", "filters": []}]}, 65.0),
              _Ev("query", {"index": 3, "ok": False, "error": "boom"}, 70.0)]
    per_query = [{"index": 1, "ok": True, "rows": 2, "ruled_out": ["r1"], "new": ["r1"], "why": {}},
                 {"index": 2, "ok": True, "rows": 2, "ruled_out": ["r1", "r2"], "new": ["r2"], "why": {}},
                 {"index": 3, "ok": False, "rows": 0, "ruled_out": [], "new": [], "why": {}}]
    lines = timeline_text(incident, events, per_query, board, width=10).splitlines()
    assert lines[2] == "Q1 +0:30      ██████████  rules out C"
    assert lines[3] == "Q2 +1:05      ██████████  rules out A"  # r1 again is not news
    assert lines[4] == "Q3 +1:10      (failed: …"  # cut to the strip's width
    assert lines[-3:] == ["A  Rival two", "B  The true one  (true)", "C  Rival one"]
    # no board: titles, no legend, and no ids anywhere
    plain = timeline_text(incident, events, per_query, None, width=10)
    assert "rules out Rival one" in plain and "(true)" not in plain


def test_score_markup_shows_the_new_groups_and_the_rivals_ruled_out() -> None:
    from types import SimpleNamespace

    from tui.screens.debrief import progress_markup, score_markup

    comps = [SimpleNamespace(group="conclusion", points=-12.5, max=55.0),
             SimpleNamespace(group="evidence", points=17.5, max=35.0),
             SimpleNamespace(group="pins", points=5.0, max=10.0),
             SimpleNamespace(group="penalty", points=-2.0, max=0.0),
             SimpleNamespace(group="penalty", points=0.0, max=0.0)]
    report = SimpleNamespace(total=8.0, components=comps, rivals=["r1", "r2"], ruled_out={"r1": 1})
    line = score_markup(report)
    assert line == ("[b]Score 8.0 / 100[/b]   conclusion -12.5/55 · evidence 17.5/35 · pins 5.0/10 · "
                    "penalties -2.0   rivals ruled out 1/2")
    progress = progress_markup("kv-pressure", 2, 5)
    assert "world 3 of 5" in progress and "kv-pressure" not in progress  # no hypothesis id, even now


def test_the_submit_dialog_says_pins_count_both_ways() -> None:
    from tui.screens.submit import pins_text

    assert "no results" in pins_text([]) and "costs points" in pins_text([])
    pins = [_Ev("pin", {"query": 1, "hypothesis": "a", "stance": "supports"}),
            _Ev("pin", {"query": 1, "hypothesis": "a", "stance": "supports"}),  # the same pin again
            _Ev("pin", {"query": 2, "hypothesis": "b", "stance": "refutes"}), _Ev("query", {"index": 3})]
    assert pins_text(pins).startswith("You pinned 2 results.")


# ---------------------------------------------------------------- keys

def _scope_classes() -> dict[str, type]:
    from tui.app import ServedrillApp
    from tui.screens.briefing import BriefingScreen
    from tui.screens.debrief import DebriefScreen, PastDebriefScreen
    from tui.screens.history import HistoryScreen
    from tui.screens.picker import PickerScreen
    from tui.screens.room import RoomScreen
    from tui.screens.submit import SubmitScreen
    from tui.screens.workspace import WorkspaceScreen
    from tui.widgets.board import HypothesisBoard
    from tui.widgets.query_log import QueryLog
    from tui.widgets.results import ResultsPanel
    from tui.widgets.sql_editor import SqlEditor

    return {"app": ServedrillApp, "picker": PickerScreen, "briefing": BriefingScreen,
            "workspace": WorkspaceScreen, "submit": SubmitScreen, "debrief": DebriefScreen,
            "board": HypothesisBoard, "results": ResultsPanel, "editor": SqlEditor, "queries": QueryLog,
            "history": HistoryScreen, "past_debrief": PastDebriefScreen, "room": RoomScreen}


def test_every_command_has_an_action_method_and_a_scope_title() -> None:
    classes = _scope_classes()
    for command in COMMANDS:
        assert command.scope in SCOPE_TITLES
        if not command.bound:  # keys a widget brings itself (the plot's zoom, the tree's Enter)
            continue
        name, _, args = command.action.partition("(")
        method = getattr(classes[command.scope], f"action_{name}", None)
        assert method is not None and callable(method), f"{command.scope}: action_{name} missing"
        required = [p for p in inspect.signature(method).parameters.values()
                    if p.name != "self" and p.default is inspect.Parameter.empty]
        assert len(required) == (1 if args else 0), command.action


def test_no_key_means_two_things_in_one_scope() -> None:
    for scope in SCOPE_TITLES:
        keys = [k.strip() for c in commands(scope) for k in c.keys.split(",")]
        assert len(keys) == len(set(keys)), scope
    # a pane's keys must not shadow the workspace's own (the pane has focus, so it would win)
    workspace = {k.strip() for c in commands("workspace") for k in c.keys.split(",")}
    for scope in ("editor", "results", "board", "queries"):
        for command in commands(scope):
            assert not workspace & {k.strip() for k in command.keys.split(",")} or command.bound is False, \
                (scope, command.keys)


def test_help_lists_the_current_screen_first_with_keys_as_typed() -> None:
    sections = help_sections(["board", "workspace"])
    assert [title for title, _ in sections][:3] == [SCOPE_TITLES["board"], SCOPE_TITLES["workspace"],
                                                     SCOPE_TITLES["app"]]
    assert SCOPE_TITLES["picker"] not in [title for title, _ in sections]  # another screen's keys: not here
    text = help_text(["board", "workspace"])
    for command in commands("board") + commands("workspace") + commands("app"):
        assert command.help in " ".join(text.split())
    assert "question_mark" not in text and "equals_sign" not in text
    assert "F1 / ?" in text and "+ / =" in text and "shift+↑ / K" in text and "ctrl+s" in text


def test_key_bar_pins_run_submit_and_help_whatever_has_focus() -> None:
    for focused in ("editor", "results", "board", "queries", "plot", "schema"):
        pinned = pinned_markup([focused, "workspace", "app"])
        assert "F5" in pinned and "F8" in pinned and "Submit" in pinned and "F1" in pinned, focused
        rest = keybar_markup([focused, "workspace", "app"])
        assert "F8" not in rest and "Cancel" not in rest  # each key once; cancel is never in the bar
    assert key_label("ctrl+s") == "^s" and key_label("ctrl+s", short=False) == "ctrl+s"
    assert key_label("question_mark") == "?" and key_label("f10") == "F10" and key_label("shift+up") == "shift+↑"
    assert key_label("equals_sign") == "=" and key_label("escape") == "Esc"


def test_coverage_line_counts_incidents_solved_and_their_topics(tmp_path: Path) -> None:
    from game.rules.library import LibraryEntry
    from tui.screens.picker import SOLVED_SCORE, coverage_line

    entries = [LibraryEntry(tmp_path / "a.yaml", "a", "A", tags=("oom-at-peak", "moe")),
               LibraryEntry(tmp_path / "b.yaml", "b", "B", tags=("fallback",)),
               LibraryEntry(tmp_path / "c.yaml", "c", "C", tags=("fallback",))]
    before = coverage_line(entries, None, "ada")
    assert before.startswith("ada: solved … of 3 incidents")  # not "0" before the scores are read
    none = coverage_line(entries, {}, "ada")
    assert "solved 0 of 3 incidents" in none and "of the 3 topics the library covers" in none
    # incidents, not topics: a counts once although it covers two topics
    two = coverage_line(entries, {"a": SOLVED_SCORE, "b": SOLVED_SCORE, "c": SOLVED_SCORE - 1}, "ada")
    assert "solved 2 of 3 incidents (score 70+)" in two and "3 of the 3 topics" in two
    assert "servedrill list" not in two


def test_a_variant_incident_shows_placeholders_hidden_then_its_drawn_text() -> None:
    from game.rules.library import entry_for_incident, hide_placeholders, read_entry
    from incidents.loader import find_incident, load_incident

    shown = hide_placeholders("since {{throttle_at|hhmm}} on {{ slow }}, seen {{at + 300|hhmm}}")
    assert shown == "since … on …, seen …"
    path = find_incident("one-slow-replica")
    peek = read_entry(path)
    assert "{{" not in peek.briefing.since + " ".join(peek.briefing.evidence) and "…" in peek.briefing.since
    incident = load_incident(path, seed=1)
    shown = entry_for_incident(peek, incident)
    assert shown.briefing.since == incident.briefing.since and "{{" not in shown.briefing.since
    assert shown.hypotheses == ()  # no board given: none listed, never the file order


def test_the_briefing_lists_the_hypotheses_in_the_sessions_board_order_by_label() -> None:
    from game.rules.library import entry_for_incident
    from game.session.hypotheses import shown_hypotheses
    from incidents.loader import load_incident
    from tui.screens.briefing import alert_card

    incident = load_incident(FIXTURE)
    board = shown_hypotheses(incident, 0)
    entry = entry_for_incident(read_entry(FIXTURE), incident, board)
    assert entry.hypotheses == tuple((s.label, s.title) for s in board)
    assert [label for label, _ in entry.hypotheses] == ["A", "B", "C", "D"]
    assert [title for _, title in entry.hypotheses] != [h.title for h in incident.hypotheses]  # not file order
    content = alert_card(entry)
    card = content.plain
    positions = [card.index(s.title) for s in board]
    assert positions == sorted(positions) and f"A  {board[0].title}" in card
    label_at = card.index(f"A  {board[0].title}")
    assert any(span.start <= label_at < span.end and "b" in str(span.style) for span in content.spans)
    assert not [h.id for h in incident.hypotheses if h.id in card]  # ids stay internal


def test_picker_best_scores_are_the_totals_the_players_transcripts_recorded(tmp_path: Path) -> None:
    from test_tui_support import journal, submitted_events

    from game.session import Session, transcripts_dir
    from tui.screens.picker import scan_library

    out = transcripts_dir(tmp_path)
    for name, player, score in (("scored", "tester", {"total": 61.5}), ("unscored", "tester", None),
                                ("better-but-not-mine", "someone", {"total": 90.0}),
                                ("lower", "tester", {"total": 40.0})):
        path = journal(tmp_path / "sessions" / f"{name}.jsonl", submitted_events(), session_id=name,
                       player=player)
        with Session.resume(path) as session:
            session.export_transcript(out / f"{name}.json", None, score)
    _, best = scan_library(tmp_path, "tester")
    assert best == {"tui-mini": 61.5}

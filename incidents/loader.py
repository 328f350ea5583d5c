"""Load incident YAML files and report every problem with its line and column.

Whatever the input (empty, binary, invalid UTF-8, tabs, duplicate keys, alias bombs,
huge files, directories), the result is a list of `Diagnostic`s, never a traceback.

Parsing differs from plain `yaml.safe_load` on purpose:
- mapping keys are always the literal text (so `true:` and `no:` stay strings);
- only true/false are booleans (YAML 1.1's yes/no/on/off stay strings);
- timestamps stay strings for pydantic to parse;
- duplicate keys, merge keys (<<) and custom tags are errors; aliases are capped.
"""

from __future__ import annotations

import bisect
import contextlib
import difflib
import re
import threading
import types
import typing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb
import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from incidents.spec import (
    COLUMN_TYPES,
    ID_RE,
    NOISE_KINDS,
    SLUG_RE,
    TABLE_COLUMNS,
    Incident,
    Issue,
    ReplayArrival,
    authoring_issues,
    cross_check,
    did_you_mean,
    format_loc,
)
from incidents.traces import TraceProblem, read_trace, resolve_trace_path
from incidents.variants import VALIDATION_SEEDS, Problem, Resolution, describe, is_template, resolve

LIBRARY_DIR = Path(__file__).resolve().parent
TEMPLATE_PATH = LIBRARY_DIR / "template.yaml"
SCHEMA_COMMENT = "# yaml-language-server: $schema=./schema.json"

MAX_BYTES = 1 << 20
"""Largest incident file accepted, bytes: real incidents are a few KB."""
MAX_ALIASES = 16
MAX_NODES = 100_000
MAX_DEPTH = 64
_MAX_TAB_REPORTS = 5

_BOOL_TAG = "tag:yaml.org,2002:bool"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null"))


def _short_tag(tag: str) -> str:
    return tag.replace("tag:yaml.org,2002:", "!!")


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


class _Refused(Exception):
    def __init__(self, mark: yaml.Mark | None, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message
        self.hint = hint


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML-1.2-like scalars and a cap on aliases."""

    yaml_implicit_resolvers: typing.ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {
        first: [(tag, rx) for tag, rx in resolvers if tag not in (_BOOL_TAG, _TIMESTAMP_TAG)]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.alias_count = 0

    def fetch_flow_collection_start(self, token_class: Any) -> None:
        super().fetch_flow_collection_start(token_class)
        # the scanner's simple-key bookkeeping is quadratic in flow depth: stop before it matters
        if self.flow_level > MAX_DEPTH:
            raise _Refused(self.get_mark(), f"nesting deeper than {MAX_DEPTH} levels")

    def add_indent(self, column: int) -> bool:
        if len(self.indents) > MAX_DEPTH:
            raise _Refused(self.get_mark(), f"nesting deeper than {MAX_DEPTH} levels")
        return super().add_indent(column)

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                raise _Refused(
                    self.peek_event().start_mark,
                    f"more than {MAX_ALIASES} YAML aliases (*name); refusing a possible alias bomb",
                    "write the values out instead of using anchors and aliases",
                )
        return super().compose_node(parent, index)


_Loader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))

_CLoader: Any = None
if yaml.__with_libyaml__:
    from yaml.cyaml import CParser

    class _FastLoader(CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's parser with _Loader's scalar rules; libyaml caps nesting at 1000 levels itself."""

        yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _CLoader = _FastLoader


# ---------------------------------------------------------------- reading and parsing


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _read(path: Path) -> tuple[str | None, list[Diagnostic]]:
    name = str(path)

    def fail(message: str, hint: str | None = None) -> tuple[None, list[Diagnostic]]:
        return None, [Diagnostic(name, 0, 0, message, hint)]

    try:
        if not path.exists():
            return fail("no such file", "give a path to an incident .yaml file or a library incident id")
        if path.is_dir():
            return fail("is a directory, not an incident file", "point at one .yaml file inside it")
        if not path.is_file():
            return fail("not a regular file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            return fail(
                f"file is {size / 1e6:.1f} MB; incident files are limited to {MAX_BYTES // 1024} KiB",
                "an incident is a few KB of YAML; data belongs in the simulation, not the file",
            )
        with path.open("rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
    except OSError as exc:
        return fail(f"cannot read file: {exc.strerror or exc}")
    if len(raw) > MAX_BYTES:
        return fail(f"file is larger than {MAX_BYTES // 1024} KiB; incident files are limited to that")
    return _decode(raw, name)


def _decode(raw: bytes, name: str) -> tuple[str | None, list[Diagnostic]]:
    if not raw.strip():
        return None, [Diagnostic(name, 1, 1, "file is empty", "start from `servedrill new ID`")]
    if b"\x00" in raw:
        offset = raw.index(b"\x00")
        line, column = _line_col(raw[:offset].decode("utf-8", "replace"), offset)
        return None, [Diagnostic(name, line, column, "file looks binary (contains a NUL byte), not YAML text")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line, column = _line_col(before, len(before))
        return None, [
            Diagnostic(name, line, column, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x})", "save the file as UTF-8")
        ]
    return text, []


def _tab_diagnostics(text: str, name: str) -> list[Diagnostic]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        indent = line[: len(line) - len(line.lstrip(" \t"))]
        if "\t" in indent and line.strip():
            found.append(
                Diagnostic(
                    name,
                    number,
                    indent.index("\t") + 1,
                    "tab character in indentation; YAML allows only spaces for indentation",
                    "replace tabs with spaces",
                )
            )
    return found[:_MAX_TAB_REPORTS]


@dataclass
class _Parsed:
    data: Any
    value_marks: dict[tuple[str | int, ...], yaml.Mark]
    key_marks: dict[tuple[str | int, ...], yaml.Mark]
    diagnostics: list[Diagnostic]


class _Builder:
    """Turns a composed node tree into plain data, recording where every key and value sits."""

    def __init__(self, loader: Any, name: str, allow_shared: bool = True) -> None:
        self.loader = loader
        self.name = name
        self.value_marks: dict[tuple[str | int, ...], yaml.Mark] = {}
        self.key_marks: dict[tuple[str | int, ...], yaml.Mark] = {}
        self.diagnostics: list[Diagnostic] = []
        self.nodes = 0
        self.active: set[int] = set()
        # without the alias cap of _Loader, a node met twice (an alias) sends us to the slow path
        self.seen: set[int] | None = None if allow_shared else set()

    def diag(self, mark: yaml.Mark, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(self.name, mark.line + 1, mark.column + 1, message, hint))

    def build(self, node: Node, loc: tuple[str | int, ...]) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _Refused(
                node.start_mark,
                f"document expands to more than {MAX_NODES} values",
                "anchors and aliases repeat data; write it out",
            )
        if len(loc) > MAX_DEPTH:
            raise _Refused(node.start_mark, f"nesting deeper than {MAX_DEPTH} levels")
        self.value_marks[loc] = node.start_mark
        if self.seen is not None:
            if id(node) in self.seen:
                raise _Refused(node.start_mark, "alias")
            self.seen.add(id(node))
        if isinstance(node, ScalarNode):
            if node.tag not in _SCALAR_TAGS:
                raise _Refused(
                    node.start_mark,
                    f"unsupported YAML tag {_short_tag(node.tag)}",
                    "incident files use plain YAML values only",
                )
            return self.loader.construct_object(node, deep=True)
        if id(node) in self.active:
            raise _Refused(node.start_mark, "recursive alias: a value contains itself")
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, loc)
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ_TAG:
                    raise _Refused(node.start_mark, f"unsupported YAML tag {_short_tag(node.tag)}")
                return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
            raise _Refused(node.start_mark, "unsupported YAML node")
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, loc: tuple[str | int, ...]) -> dict[str, Any]:
        if node.tag != _MAP_TAG:
            raise _Refused(node.start_mark, f"unsupported YAML tag {_short_tag(node.tag)}")
        result: dict[str, Any] = {}
        first_seen: dict[str, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self.diag(key_node.start_mark, "YAML merge keys (<<) are not supported", "write the fields out")
                continue
            if not isinstance(key_node, ScalarNode):
                self.diag(key_node.start_mark, "a mapping key must be a plain name, not a list or mapping")
                continue
            key = key_node.value
            if key in first_seen:
                first = first_seen[key].line + 1
                self.diag(
                    key_node.start_mark,
                    f"duplicate key '{key}': also on line {first}; YAML would silently keep only this one",
                    f"delete one of lines {first} and {key_node.start_mark.line + 1}",
                )
            first_seen.setdefault(key, key_node.start_mark)
            self.key_marks[(*loc, key)] = key_node.start_mark
            result[key] = self.build(value_node, (*loc, key))
        return result


def _parse(text: str, name: str) -> tuple[_Parsed | None, list[Diagnostic]]:
    def at(mark: yaml.Mark | None, message: str, hint: str | None = None) -> list[Diagnostic]:
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return [Diagnostic(name, line, column, message, hint)]

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return None, at(None, f"text is larger than {MAX_BYTES // 1024} KiB; incident files are limited to that")
    tabs = _tab_diagnostics(text, name)
    if tabs:
        return None, tabs
    if _CLoader is not None:
        # libyaml is ~15x faster; on any trouble the Python parser below explains it, so the
        # diagnostics are the same with or without libyaml
        with contextlib.suppress(Exception):
            fast = _CLoader(text)
            try:
                root = fast.get_single_node()
                if root is not None:
                    builder = _Builder(fast, name, allow_shared=False)
                    return _finish(root, builder.build(root, ()), builder, name)
            finally:
                fast.dispose()
    loader: _Loader | None = None
    try:
        loader = _Loader(text)
        root = loader.get_single_node()
        if root is None:
            return None, at(None, "no YAML document: the file has only comments or blank lines")
        builder = _Builder(loader, name)
        data = builder.build(root, ())
    except _Refused as exc:
        return None, at(exc.mark, exc.message, exc.hint)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        return None, at(mark, f"YAML syntax error: {problem}{context}")
    except yaml.reader.ReaderError as exc:
        line, column = _line_col(text, exc.position)
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
        return None, [
            Diagnostic(
                name,
                line,
                column,
                f"control character U+{code:04X} is not allowed in YAML text",
                "delete it; only printable text and tabs/newlines are allowed",
            )
        ]
    except yaml.YAMLError as exc:
        return None, at(None, f"YAML error: {exc}")
    except RecursionError:
        return None, at(None, "nesting too deep to parse")
    finally:
        if loader is not None:
            loader.dispose()
    return _finish(root, data, builder, name)


def _finish(root: Node, data: Any, builder: _Builder, name: str) -> tuple[_Parsed | None, list[Diagnostic]]:
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({type(data).__name__})"
        mark = root.start_mark
        message = f"the top level must be a mapping of incident fields, found {kind}"
        hint = "start with `id: my-incident`; see the template"
        return None, [Diagnostic(name, mark.line + 1, mark.column + 1, message, hint)]
    return _Parsed(data, builder.value_marks, builder.key_marks, builder.diagnostics), []


# ---------------------------------------------------------------- pydantic errors -> diagnostics


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if len(members) == 1:
            return _unwrap(members[0])
    return tp


def _union_member(tp: Any, part: str) -> Any:
    for member in typing.get_args(tp):
        for meta in typing.get_args(member)[1:] if typing.get_origin(member) is typing.Annotated else ():
            if getattr(meta, "tag", None) == part:
                return _unwrap(member)
        inner = _unwrap(member)
        is_model = isinstance(inner, type) and issubclass(inner, BaseModel)
        if is_model and typing.get_args(getattr(inner.model_fields.get("kind"), "annotation", None)) == (part,):
            return inner
    return None


def _type_at(loc: tuple[str | int, ...]) -> Any:
    """The annotation reached by following a pydantic error loc from Incident (None if lost)."""
    tp: Any = Incident
    for part in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            by_key = _fields_by_key(tp)
            if not isinstance(part, str) or part not in by_key:
                return None
            tp = by_key[part].annotation
        elif origin in (list, tuple) and isinstance(part, int):
            tp = typing.get_args(tp)[0]
        elif origin is dict and isinstance(part, str):
            tp = typing.get_args(tp)[1]
        elif origin in (typing.Union, types.UnionType) and isinstance(part, str):
            member = _union_member(tp, part)
            if member is None:
                return None
            tp = member
        else:
            return None
    return _unwrap(tp)


def _fields_by_key(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A model's fields by the key written in YAML (the alias when there is one, e.g. `from`)."""
    return {info.alias or name: info for name, info in model.model_fields.items()}


def _model_fields_at(loc: tuple[str | int, ...]) -> dict[str, FieldInfo]:
    tp = _type_at(loc)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return _fields_by_key(tp)
    return {}


_TYPE_WORDS = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
    "tuple_type": "a list",
    "datetime_type": "a timestamp",
    "datetime_parsing": "an ISO-8601 timestamp",
    "datetime_from_date_parsing": "an ISO-8601 timestamp",
    "literal_error": "one of the listed values",
}

_PATTERN_WORDS = {
    SLUG_RE: "lowercase letters and digits in dash-separated words, e.g. kv-cache-thrash",
    ID_RE: "lowercase letters, digits, '-' and '_', starting with a letter or digit",
}


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {shown!r}"
    return repr(value)


class _Locator:
    """Maps locs (keys and indices into the data) to the line and column of the YAML node."""

    def __init__(self, parsed: _Parsed, name: str) -> None:
        self.parsed = parsed
        self.name = name

    def resolve(self, loc: tuple[str | int, ...]) -> tuple[tuple[str | int, ...], bool]:
        """(longest path of loc present in the data, whether loc's last part was found)."""
        cur = self.parsed.data
        path: tuple[str | int, ...] = ()
        last_found = False
        for part in loc:
            last_found = False
            in_dict = isinstance(cur, dict) and isinstance(part, str) and part in cur
            in_list = isinstance(cur, list) and type(part) is int and 0 <= part < len(cur)
            if not (in_dict or in_list):
                continue  # a union tag or a missing field
            cur = cur[part]
            path = (*path, part)
            last_found = True
        return path, last_found

    def value_at(self, path: tuple[str | int, ...]) -> Any:
        cur = self.parsed.data
        for part in path:
            cur = cur[part]
        return cur

    def diagnostic(
        self, path: tuple[str | int, ...], message: str, hint: str | None = None, on_key: bool = False
    ) -> Diagnostic:
        # a value substituted from a variable has no marks below the placeholder that produced it
        while path and path not in self.parsed.value_marks and path not in self.parsed.key_marks:
            path = path[:-1]
        value_mark = self.parsed.value_marks.get(path)
        key_mark = self.parsed.key_marks.get(path)
        # a block mapping or list starts on the line after its key: the key is where the eye goes
        below_key = key_mark is not None and value_mark is not None and value_mark.line != key_mark.line
        prefer_key = on_key or (below_key and isinstance(self.value_at(path), dict | list))
        mark = (key_mark or value_mark) if prefer_key else (value_mark or key_mark)
        if mark is None:
            return Diagnostic(self.name, 1, 1, message, hint)
        return Diagnostic(self.name, mark.line + 1, mark.column + 1, message, hint)

    def from_issue(self, issue: Issue) -> Diagnostic:
        path, found = self.resolve(issue.loc)
        if not found:
            return self.diagnostic(path, str(issue), on_key=True)
        text = f"{format_loc(issue.loc)}: {issue.message}" if issue.loc else issue.message
        return self.diagnostic(path, text, issue.hint, on_key=issue.on_key)

    def from_validation(self, error: ValidationError) -> list[Diagnostic]:
        grouped: dict[tuple[str | int, ...], list[dict[str, Any]]] = {}
        missing: dict[tuple[str | int, ...], list[tuple[str, str | None]]] = {}
        extras: dict[tuple[str | int, ...], list[str]] = {}
        out: list[Diagnostic] = []
        for err in error.errors(include_url=False):
            loc = tuple(err["loc"])
            path, _ = self.resolve(loc)
            kind = err["type"]
            if kind in ("missing", "union_tag_not_found"):
                missing.setdefault(path, []).append(self._missing_field(loc, err))
            elif kind == "extra_forbidden":
                out.append(self._extra(loc, path))
                extras.setdefault(path[:-1], []).append(str(loc[-1]))
            elif kind == "union_tag_invalid":
                out.append(self._bad_tag(path, err))
            else:
                grouped.setdefault(path, []).append(err)
        for path, all_names in missing.items():
            # a misspelt key is already reported with "did you mean" the missing one
            names = [
                (n, h) for n, h in all_names if not difflib.get_close_matches(n, extras.get(path, []), n=1, cutoff=0.6)
            ]
            if not names:
                continue
            where = format_loc(path) or "incident"
            if len(names) == 1:
                text, hint = f"{where}: missing required field '{names[0][0]}'", names[0][1]
            else:
                text, hint = f"{where}: missing required fields " + ", ".join(f"'{n}'" for n, _ in names), None
            out.append(self.diagnostic(path, text, hint, on_key=True))
        for path, errs in grouped.items():
            out.append(self._value_error(path, errs))
        return out

    @staticmethod
    def _missing_field(loc: tuple[str | int, ...], err: dict[str, Any]) -> tuple[str, str | None]:
        """(name of the missing field, a hint: what the field is for)."""
        if err["type"] == "union_tag_not_found":
            field = str(err.get("ctx", {}).get("discriminator", "kind")).strip("'")
            return field, "noise kinds: " + ", ".join(NOISE_KINDS)
        field = str(loc[-1])
        info = _model_fields_at(loc[:-1]).get(field)
        return field, info.description if info is not None else None

    def _extra(self, loc: tuple[str | int, ...], path: tuple[str | int, ...]) -> Diagnostic:
        key = str(loc[-1])
        allowed = list(_model_fields_at(loc[:-1]))
        hint = did_you_mean(key, allowed) or ("allowed: " + ", ".join(allowed) if allowed else None)
        parent = format_loc(path[:-1]) or "incident"
        return self.diagnostic(path, f"{parent}: unknown field '{key}'", hint, on_key=True)

    def _bad_tag(self, path: tuple[str | int, ...], err: dict[str, Any]) -> Diagnostic:
        ctx = err.get("ctx", {})
        tag = ctx.get("tag", "?")
        expected = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        kind_path = (*path, "kind")
        if kind_path in self.parsed.value_marks:
            path = kind_path
        hint = did_you_mean(tag, expected) or ("kinds: " + ", ".join(expected) if expected else None)
        return self.diagnostic(path, f"{format_loc(path)}: unknown kind '{tag}'", hint)

    def _value_error(self, path: tuple[str | int, ...], errs: list[dict[str, Any]]) -> Diagnostic:
        where = format_loc(path) or "incident"
        got = _describe(errs[0].get("input"))
        if len(errs) > 1:
            wanted = sorted({_TYPE_WORDS.get(e["type"], e["msg"]) for e in errs})
            return self.diagnostic(path, f"{where}: expected {' or '.join(wanted)}, got {got}")
        err = errs[0]
        kind, msg, ctx = err["type"], err["msg"], err.get("ctx", {})
        hint = None
        if kind == "literal_error":
            choices = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
            text = (
                f"{got} should be '{choices[0]}'"
                if len(choices) == 1
                else (f"{got} is not one of: {', '.join(choices)}")
            )
            hint = did_you_mean(str(err.get("input")), choices)
        elif kind == "string_pattern_mismatch":
            text = f"{got} is not a valid id"
            hint = _PATTERN_WORDS.get(str(ctx.get("pattern")))
        elif kind in ("value_error", "assertion_error"):
            text = str(ctx.get("error", msg.removeprefix("Value error, ")))
        elif kind in _TYPE_WORDS:
            text = f"expected {_TYPE_WORDS[kind]}, got {got}"
        else:
            text = f"{msg[:1].lower()}{msg[1:]}, got {got}"
        return self.diagnostic(path, f"{where}: {text}", hint)


# ---------------------------------------------------------------- SQL binding against empty tables


_schema_con: duckdb.DuckDBPyConnection | None = None
_schema_lock = threading.Lock()


def _schema_connection() -> duckdb.DuckDBPyConnection:
    """A shared in-memory database with empty telemetry tables (creating it costs ~60 ms, binding ~1 ms)."""
    global _schema_con
    if _schema_con is None:
        con = duckdb.connect(config={"enable_external_access": False})
        for table, columns in TABLE_COLUMNS.items():
            cols = ", ".join(f'"{c}" {COLUMN_TYPES.get(c, "VARCHAR")}' for c in columns)
            con.execute(f'CREATE TABLE "{table}" ({cols})')
        _schema_con = con
    return _schema_con


def _sql_problem(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[str | None, list[str] | None]:
    """(why `sql` would not run against the telemetry tables or None, its result's column names or None
    when they are unknown). Only names and syntax are judged."""
    try:
        statements = con.extract_statements(sql)
        if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
            return "must be exactly one SELECT statement", None
        columns = list(con.sql(sql).columns)
    except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException) as exc:
        return str(exc).split("\n\n")[0].replace("\n", "; "), None
    except duckdb.Error:
        return None, None  # a type or value problem that only real data can settle
    return None, columns


def _expect_column_issue(signal: dict[str, Any], index: int, columns: list[str]) -> Issue | None:
    """A signal's `expect.column` that its query's result does not have: without this, only --deep,
    which runs the query, would notice."""
    expect = signal.get("expect")
    column = expect.get("column") if isinstance(expect, dict) else None
    if not isinstance(column, str) or column in columns:
        return None
    hint = did_you_mean(column, columns) or "its columns: " + ", ".join(columns)
    return Issue(("signals", index, "expect", "column"), f"the query's result has no column '{column}'", hint)


def _sql_issues(data: dict[str, Any]) -> list[Issue]:
    """Parse and bind every SQL text in the incident against empty copies of the telemetry tables."""

    def as_list(x: Any) -> list[Any]:
        return x if isinstance(x, list) else []

    def as_dict(x: Any) -> dict[str, Any]:
        return x if isinstance(x, dict) else {}

    checks: list[tuple[tuple[str | int, ...], str]] = []
    signals = [as_dict(raw) for raw in as_list(data.get("signals"))]
    for i, raw in enumerate(as_list(data.get("symptoms"))):
        symptom = as_dict(raw)
        metric = as_dict(symptom.get("metric"))
        table = metric.get("table")
        if not isinstance(table, str) or table not in TABLE_COLUMNS:
            continue
        wheres = [(("symptoms", i, "metric", "where"), metric.get("where"))]
        wheres += [(("symptoms", i, side, "where"), as_dict(symptom.get(side)).get("where")) for side in "ab"]
        checks += [(loc, f'SELECT 1 FROM "{table}" WHERE ({w})') for loc, w in wheres if isinstance(w, str)]
    for i, signal in enumerate(signals):
        query = signal.get("query")
        if isinstance(query, str):
            checks.append((("signals", i, "query"), query))
    for j, sql in enumerate(as_list(as_dict(data.get("debrief")).get("settling_queries"))):
        if isinstance(sql, str):
            checks.append((("debrief", "settling_queries", j), sql))
    if not checks:
        return []
    issues = []
    with _schema_lock:
        con = _schema_connection()
        for loc, sql in checks:
            problem, columns = _sql_problem(con, sql)
            if problem:
                issues.append(Issue(loc, f"SQL does not run on the telemetry tables: {problem}"))
            elif columns is not None and loc[0] == "signals" and isinstance(loc[1], int):
                found = _expect_column_issue(signals[loc[1]], loc[1], columns)
                issues += [found] if found else []
    return issues


# ---------------------------------------------------------------- public API


@dataclass
class _Analysis:
    """What checking one text found. values: what the variables drew for the returned incident's seed."""

    incident: Incident | None
    diagnostics: list[Diagnostic]
    values: dict[str, Any] = field(default_factory=dict)
    template: bool = False


def _check_tree(parsed: _Parsed, data: dict[str, Any], name: str,
                authoring: bool = False) -> tuple[Incident | None, list[Diagnostic]]:
    """Model, cross-reference and SQL checks of one (resolved) tree, located through the file's marks;
    `authoring` adds the library's rules (spec.authoring_issues)."""
    locator = _Locator(replace(parsed, data=data), name)
    diagnostics: list[Diagnostic] = []
    incident = None
    try:
        incident = Incident.model_validate(data, context={"skip_cross_checks": True})
    except ValidationError as exc:
        diagnostics += locator.from_validation(exc)
    else:
        diagnostics += _read_traces(incident, name, locator)
    diagnostics += [locator.from_issue(issue) for issue in cross_check(data)]
    diagnostics += [locator.from_issue(issue) for issue in _sql_issues(data)]
    # a skeleton that misses most fields hears about those first, not that it claims nothing yet
    if authoring and (incident is not None or "symptoms" in data):
        diagnostics += [locator.from_issue(issue) for issue in authoring_issues(data)]
    return incident, diagnostics


def _read_traces(incident: Incident, name: str, locator: _Locator) -> list[Diagnostic]:
    """Read every trace the workload replays (relative to the incident file's folder) and attach its rows
    to the app's arrival; a bad path is reported at the incident's line, a bad row at the trace's."""
    apps = incident.workload.apps
    out: list[Diagnostic] = []
    for i, app in enumerate([] if isinstance(apps, str) else apps):
        arrival = app.arrival
        if not isinstance(arrival, ReplayArrival):
            continue
        loc: tuple[str | int, ...] = ("workload", "apps", i, "arrival", "path")
        source = Path(name)
        if not source.is_file():
            out.append(locator.from_issue(Issue(loc, "a replayed trace is read beside the incident file, and "
                                                "this incident is not a file", "save the incident next to its trace")))
            continue
        try:
            path = resolve_trace_path(source.parent, arrival.path)
        except ValueError as exc:
            out.append(locator.from_issue(Issue(loc, str(exc), "put the trace in the incident's folder")))
            continue
        rows = read_trace(path)
        if isinstance(rows, TraceProblem):
            shown = str(source.parent / arrival.path)
            out.append(Diagnostic(shown, rows.line, 1 if rows.line else 0, rows.message, rows.hint))
            continue
        arrival._rows = rows
    return out


def _line_starts(text: str) -> list[int]:
    return [0] + [m.end() for m in re.finditer("\n", text)]


def _problem_diagnostic(problem: Problem, parsed: _Parsed, text: str, starts: list[int], name: str) -> Diagnostic:
    """A variables problem at its file position: the placeholder itself when it can be found in the text."""
    message = problem.message if problem.loc[:1] == ("variables",) else f"{format_loc(problem.loc)}: {problem.message}"
    located = _Locator(parsed, name).diagnostic(problem.loc, message, problem.hint, on_key=problem.on_key)
    mark = parsed.value_marks.get(problem.loc)
    if problem.placeholder is None or mark is None or mark.line >= len(starts):
        return located
    # placeholders are written verbatim in every YAML scalar style, so the k-th one after the
    # value's start is the one at fault (block scalars start on the line of their indicator)
    at = starts[mark.line] + mark.column
    for _ in range(problem.occurrence + 1):
        at = text.find(problem.placeholder, at)
        if at < 0:
            return located
        at += 1
    line = bisect.bisect_right(starts, at - 1)
    return Diagnostic(name, line, at - 1 - starts[line - 1] + 1, message, problem.hint)


def _analyse_text(text: str, name: str, seed: int | None = None, authoring: bool = False) -> _Analysis:
    parsed, diagnostics = _parse(text, name)
    if parsed is None:
        return _Analysis(None, diagnostics)
    own = list(parsed.diagnostics)
    if not is_template(parsed.data):
        incident, found = _check_tree(parsed, parsed.data, name, authoring)
        unique = sorted(set(own + found), key=lambda d: (d.line, d.column, d.message))
        return _Analysis(incident if not unique else None, unique)
    seeds = VALIDATION_SEEDS if seed is None else (seed,)
    starts = _line_starts(text)
    runs: list[tuple[Resolution, Incident | None, set[Diagnostic]]] = []
    variable_problems: set[Diagnostic] = set()
    for s in seeds:
        resolution = resolve(parsed.data, s)
        problems = {_problem_diagnostic(p, parsed, text, starts, name) for p in resolution.problems}
        variable_problems |= problems
        # a value left with a broken placeholder fails its type and SQL checks too: say it once
        silenced = {(m.line + 1, m.column + 1) for loc in resolution.unresolved if (m := parsed.value_marks.get(loc))}
        incident, checked = _check_tree(parsed, resolution.data, name, authoring)
        runs.append((resolution, incident, problems | {d for d in checked if (d.line, d.column) not in silenced}))
    # with one seed, any problem past the variables may belong to this draw alone
    common = set.intersection(*(found for _, _, found in runs)) if len(runs) > 1 else variable_problems
    diagnostics = set(own) | common
    for resolution, _, found in runs:
        # a problem only some draws have: say which variant shows it
        suffix = f" [variant seed {resolution.seed}: {describe(resolution.values)}]"
        diagnostics |= {replace(d, message=d.message + suffix) for d in found - common}
    unique = sorted(diagnostics, key=lambda d: (d.line, d.column, d.message))
    first, incident, _ = runs[0]
    return _Analysis(incident if not unique else None, unique, first.values, template=True)


def _analyse(path: Path, seed: int | None = None, authoring: bool = False) -> _Analysis:
    try:
        text, diagnostics = _read(Path(path))
        if text is None:
            return _Analysis(None, diagnostics)
        return _analyse_text(text, str(path), seed, authoring)
    except Exception as exc:
        return _Analysis(None, [
            Diagnostic(
                str(path), 1, 1, f"internal error while checking the file: {exc!r}", "please report this with the file"
            )
        ])


def check_incident_file(path: Path | str, seed: int | None = None) -> list[Diagnostic]:
    """Every problem in the incident file at `path`, sorted by position; [] when it is valid.

    An incident with variables is checked as the variants of `seed`, or of every seed in
    VALIDATION_SEEDS when seed is None; a problem only some of them have names its seed. Besides what
    load_incident refuses, it applies the library's authoring rules (spec.authoring_issues: at least
    one symptom, one of them evidence).
    """
    return _analyse(Path(path), seed, authoring=True).diagnostics


def check_incident_text(text: str, name: str = "<text>", seed: int | None = None) -> list[Diagnostic]:
    """Like check_incident_file for YAML text; `name` stands in for the path in diagnostics."""
    try:
        return _analyse_text(text, name, seed, authoring=True).diagnostics
    except Exception as exc:
        return [Diagnostic(name, 1, 1, f"internal error while checking the text: {exc!r}")]


def load_incident(path: Path | str, seed: int | None = None) -> Incident:
    """Load and fully check an incident file; raise IncidentError listing every problem.

    An incident with variables comes back resolved for `seed` (the telemetry seed: one number
    picks both the variant and the simulated traffic). seed None checks the variants of
    VALIDATION_SEEDS and returns the first one (seed 0). A fixed incident ignores `seed`.
    """
    return load_variant(path, seed)[0]


def load_variant(path: Path | str, seed: int | None = None) -> tuple[Incident, dict[str, Any]]:
    """load_incident, plus what each variable drew for that seed ({} for a fixed incident)."""
    found = _analyse(Path(path), seed)
    if found.incident is None:
        raise IncidentError(found.diagnostics or [Diagnostic(str(path), 1, 1, "could not load the incident")])
    return found.incident, found.values


def load_incident_text(text: str, name: str = "<text>", seed: int | None = None) -> Incident:
    """load_incident for YAML text."""
    found = _analyse_text(text, name, seed)
    if found.incident is None:
        raise IncidentError(found.diagnostics or [Diagnostic(name, 1, 1, "could not load the incident")])
    return found.incident


def has_variables(path: Path | str) -> bool:
    """Whether the incident file declares variables (or uses placeholders); False when it does not parse."""
    try:
        text, _ = _read(Path(path))
        parsed = _parse(text, str(path))[0] if text is not None else None
    except Exception:
        return False
    return parsed is not None and is_template(parsed.data)


@dataclass(frozen=True)
class SourceMap:
    """Where the items of one incident file are, so a finding about "symptom ttft-up" (from `--deep`,
    which works on the loaded model) can name its file:line. Ids are never substituted by variables, so
    one map serves every variant."""

    path: str
    parsed: _Parsed | None

    def position(self, loc: tuple[str | int, ...]) -> tuple[int, int] | None:
        """(line, column), 1-based, of `loc`: keys and indices, where a list item may also be named by its
        id, e.g. ("symptoms", "ttft-up") or ("signals", "clock-drop", "expect"). The nearest enclosing
        item when a field is absent; None when the item itself is not in the file."""
        if self.parsed is None:
            return None
        path: list[str | int] = []
        cur: Any = self.parsed.data
        for part in loc:
            if isinstance(cur, list) and isinstance(part, str):
                index = next((i for i, item in enumerate(cur) if isinstance(item, dict) and item.get("id") == part),
                             None)
                if index is None:
                    return None if len(path) <= 1 else self._at(tuple(path))
                part = index
            in_dict = isinstance(cur, dict) and part in cur
            in_list = isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur)
            if in_dict or in_list:
                cur = cur[part]
                path.append(part)
            else:
                break
        return self._at(tuple(path)) if path else None

    def _at(self, path: tuple[str | int, ...]) -> tuple[int, int] | None:
        found = _Locator(self.parsed, self.path).diagnostic(path, "") if self.parsed is not None else None
        return (found.line, found.column) if found is not None else None

    def where(self, loc: tuple[str | int, ...]) -> str:
        """`path:line:column` of loc, or the path alone when it cannot be placed."""
        pos = self.position(loc)
        return f"{self.path}:{pos[0]}:{pos[1]}" if pos else self.path


def source_map(path: Path | str) -> SourceMap:
    """The SourceMap of an incident file; one that places nothing when the file does not parse."""
    try:
        text, _ = _read(Path(path))
        parsed = _parse(text, str(path))[0] if text is not None else None
    except Exception:
        parsed = None
    return SourceMap(str(path), parsed)


def iter_library(root: Path = LIBRARY_DIR) -> list[Path]:
    """Incident files in the library directory, sorted by name (the template is not one)."""
    return sorted(p for p in Path(root).glob("*.yaml") if p.name != TEMPLATE_PATH.name and p.is_file())


def find_incident(id_or_path: str, root: Path = LIBRARY_DIR) -> Path:
    """Path of an incident given a library id (file stem) or a path.

    Anything that exists or looks like a path (has a directory part or a .yaml/.yml suffix) is
    returned as a path, so load_incident can say precisely what is wrong with it. Otherwise
    an unknown id raises UnknownIncidentError listing close matches.
    """
    candidate = Path(id_or_path)
    library = {p.stem: p for p in iter_library(root)}
    if id_or_path in library and not candidate.exists():
        return library[id_or_path]
    if candidate.exists() or len(candidate.parts) > 1 or candidate.suffix in (".yaml", ".yml"):
        return candidate
    matches = difflib.get_close_matches(candidate.stem, list(library), n=3, cutoff=0.5)
    raise UnknownIncidentError(id_or_path, matches, sorted(library))


def render_template(incident_id: str) -> str:
    """The incident template with `incident_id` filled in; it validates as written.

    Raises ValueError when incident_id is not a slug (lowercase words joined by '-').
    """
    if not re.fullmatch(SLUG_RE, incident_id):
        raise ValueError(f"incident id {incident_id!r} is not a slug: {_PATTERN_WORDS[SLUG_RE]}")
    text = TEMPLATE_PATH.read_text(encoding="utf-8")
    return re.sub(r"^id: .*$", f"id: {incident_id}", text, count=1, flags=re.MULTILINE)

"""Hardened YAML reading for incident files (and gameday plans): the text, then plain data with the line and
column of every key and value. Whatever the input (empty, binary, invalid UTF-8, tabs, duplicate keys, alias
bombs, huge files, directories), the result is `Diagnostic`s, never a traceback.

Parsing differs from plain `yaml.safe_load` on purpose:
- mapping keys are always the literal text (so `true:` and `no:` stay strings);
- only true/false are booleans (YAML 1.1's yes/no/on/off stay strings);
- timestamps stay strings for pydantic to parse;
- duplicate keys, merge keys (<<) and custom tags are errors; aliases are capped.
"""

from __future__ import annotations

import contextlib
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from incidents.bounded_read import ReadRefused, read_bytes
from incidents.diagnostics import Diagnostic

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


class Refused(Exception):
    """The reader stops here: `message` (and `hint`) at `mark`, the position in the text."""

    def __init__(self, mark: yaml.Mark | None, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message
        self.hint = hint


class HardenedLoader(yaml.SafeLoader):
    """SafeLoader with YAML-1.2-like scalars and a cap on aliases."""

    # a class variable in PyYAML (add_implicit_resolver copies and writes it on the class), which types-PyYAML
    # declares as an instance variable; RUF012 wants the ClassVar, hence the targeted ignore
    yaml_implicit_resolvers: typing.ClassVar[dict[Any, list[tuple[str, re.Pattern[str]]]]] = {  # type: ignore[misc]
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
            raise Refused(self.get_mark(), f"nesting deeper than {MAX_DEPTH} levels")

    def add_indent(self, column: int) -> bool:
        if len(self.indents) > MAX_DEPTH:
            raise Refused(self.get_mark(), f"nesting deeper than {MAX_DEPTH} levels")
        return super().add_indent(column)

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        if self.check_event(yaml.AliasEvent):
            self.alias_count += 1
            if self.alias_count > MAX_ALIASES:
                raise Refused(
                    self.peek_event().start_mark,
                    f"more than {MAX_ALIASES} YAML aliases (*name); refusing a possible alias bomb",
                    "write the values out instead of using anchors and aliases",
                )
        return super().compose_node(parent, index)


HardenedLoader.add_implicit_resolver(_BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))

_FAST_LOADER: Any = None
if yaml.__with_libyaml__:
    from yaml._yaml import CParser  # what yaml.cyaml re-exports (the stubs declare it in yaml._yaml only)

    class _FastLoader(CParser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        """libyaml's parser with HardenedLoader's scalar rules; libyaml caps nesting at 1000 levels itself."""

        yaml_implicit_resolvers = HardenedLoader.yaml_implicit_resolvers

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)

    _FAST_LOADER = _FastLoader



def line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def read_file(path: Path) -> tuple[str | None, list[Diagnostic]]:
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
        # checked again on the file opened (it may have been swapped for a FIFO or grown since)
        raw = read_bytes(path, max_bytes=MAX_BYTES, what="incident file")
    except ReadRefused as exc:
        return fail(exc.problem)
    except OSError as exc:
        return fail(f"cannot read file: {exc.strerror or exc}")
    return decode(raw, name)


def decode(raw: bytes, name: str) -> tuple[str | None, list[Diagnostic]]:
    if not raw.strip():
        return None, [Diagnostic(name, 1, 1, "file is empty", "start from `servedrill new ID`")]
    if b"\x00" in raw:
        offset = raw.index(b"\x00")
        line, column = line_col(raw[:offset].decode("utf-8", "replace"), offset)
        return None, [Diagnostic(name, line, column, "file looks binary (contains a NUL byte), not YAML text")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = raw[: exc.start].decode("utf-8", "replace")
        line, column = line_col(before, len(before))
        return None, [
            Diagnostic(name, line, column, f"invalid UTF-8 (byte 0x{raw[exc.start]:02x})", "save the file as UTF-8")
        ]
    return text, []


def tab_diagnostics(text: str, name: str) -> list[Diagnostic]:
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
class ParsedYaml:
    data: Any
    value_marks: dict[tuple[str | int, ...], yaml.Mark]
    key_marks: dict[tuple[str | int, ...], yaml.Mark]
    diagnostics: list[Diagnostic]
    value_ends: dict[tuple[str | int, ...], yaml.Mark] = field(default_factory=dict)
    """Where each scalar value ends (a word inside a long text is looked for between its start and end)."""
    text: str = ""
    """The parsed text itself."""


class TreeBuilder:
    """Turns a composed node tree into plain data, recording where every key and value sits."""

    def __init__(self, loader: Any, name: str, allow_shared: bool = True) -> None:
        self.loader = loader
        self.name = name
        self.value_marks: dict[tuple[str | int, ...], yaml.Mark] = {}
        self.key_marks: dict[tuple[str | int, ...], yaml.Mark] = {}
        self.value_ends: dict[tuple[str | int, ...], yaml.Mark] = {}
        self.diagnostics: list[Diagnostic] = []
        self.nodes = 0
        self.active: set[int] = set()
        # without the alias cap of HardenedLoader, a node met twice (an alias) sends us to the slow path
        self.seen: set[int] | None = None if allow_shared else set()

    def diag(self, mark: yaml.Mark, message: str, hint: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(self.name, mark.line + 1, mark.column + 1, message, hint))

    def build(self, node: Node, loc: tuple[str | int, ...]) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise Refused(
                node.start_mark,
                f"document expands to more than {MAX_NODES} values",
                "anchors and aliases repeat data; write it out",
            )
        if len(loc) > MAX_DEPTH:
            raise Refused(node.start_mark, f"nesting deeper than {MAX_DEPTH} levels")
        self.value_marks[loc] = node.start_mark
        if self.seen is not None:
            if id(node) in self.seen:
                raise Refused(node.start_mark, "alias")
            self.seen.add(id(node))
        if isinstance(node, ScalarNode):
            self.value_ends[loc] = node.end_mark
            if node.tag not in _SCALAR_TAGS:
                raise Refused(
                    node.start_mark,
                    f"unsupported YAML tag {_short_tag(node.tag)}",
                    "incident files use plain YAML values only",
                )
            return self.loader.construct_object(node, deep=True)
        if id(node) in self.active:
            raise Refused(node.start_mark, "recursive alias: a value contains itself")
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self._mapping(node, loc)
            if isinstance(node, SequenceNode):
                if node.tag != _SEQ_TAG:
                    raise Refused(node.start_mark, f"unsupported YAML tag {_short_tag(node.tag)}")
                return [self.build(item, (*loc, i)) for i, item in enumerate(node.value)]
            raise Refused(node.start_mark, "unsupported YAML node")
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, loc: tuple[str | int, ...]) -> dict[str, Any]:
        if node.tag != _MAP_TAG:
            raise Refused(node.start_mark, f"unsupported YAML tag {_short_tag(node.tag)}")
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


def parse_yaml(text: str, name: str) -> tuple[ParsedYaml | None, list[Diagnostic]]:
    def at(mark: yaml.Mark | None, message: str, hint: str | None = None) -> list[Diagnostic]:
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        return [Diagnostic(name, line, column, message, hint)]

    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        return None, at(None, f"text is larger than {MAX_BYTES // 1024} KiB; incident files are limited to that")
    tabs = tab_diagnostics(text, name)
    if tabs:
        return None, tabs
    if _FAST_LOADER is not None:
        # libyaml is ~15x faster; on any trouble the Python parser below explains it, so the
        # diagnostics are the same with or without libyaml
        with contextlib.suppress(Exception):
            fast = _FAST_LOADER(text)
            try:
                root = fast.get_single_node()
                if root is not None:
                    builder = TreeBuilder(fast, name, allow_shared=False)
                    return _finish(root, builder.build(root, ()), builder, name, text)
            finally:
                fast.dispose()
    loader: HardenedLoader | None = None
    try:
        loader = HardenedLoader(text)
        root = loader.get_single_node()
        if root is None:
            return None, at(None, "no YAML document: the file has only comments or blank lines")
        builder = TreeBuilder(loader, name)
        data = builder.build(root, ())
    except Refused as exc:
        return None, at(exc.mark, exc.message, exc.hint)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        return None, at(mark, f"YAML syntax error: {problem}{context}")
    except yaml.reader.ReaderError as exc:
        line, column = line_col(text, exc.position)
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
    return _finish(root, data, builder, name, text)


def _finish(root: Node, data: Any, builder: TreeBuilder, name: str,
            text: str = "") -> tuple[ParsedYaml | None, list[Diagnostic]]:
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({type(data).__name__})"
        mark = root.start_mark
        message = f"the top level must be a mapping of incident fields, found {kind}"
        hint = "start with `id: my-incident`; see the template"
        return None, [Diagnostic(name, mark.line + 1, mark.column + 1, message, hint)]
    return ParsedYaml(data, builder.value_marks, builder.key_marks, builder.diagnostics, builder.value_ends, text), []


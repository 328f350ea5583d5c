"""pydantic's validation errors, and cross-reference issues, as `Diagnostic`s at the YAML line and column of
what they are about. Follows pydantic's error locs through the Incident model's annotations (unions by
their `kind` tag, aliases such as `from`), so it knows each field's description and allowed keys.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from incidents.diagnostics import Diagnostic
from incidents.leaks import normalise, word_spans
from incidents.spec import ID_RE, NOISE_KINDS, SLUG_RE, Incident, Issue, did_you_mean, format_loc
from incidents.yaml_reader import ParsedYaml


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


def _one_level_down(loc: tuple[str | int, ...], key: str) -> str | None:
    """A hint when `key`, unknown at `loc`, is a field of the mapping (or of each list entry) one field below:
    a `counts: true` written on a signal instead of on its `reveals` entry."""
    for name, info in _model_fields_at(loc).items():
        tp = _unwrap(info.annotation)
        many = typing.get_origin(tp) in (list, tuple)
        inner = _unwrap(typing.get_args(tp)[0]) if many and typing.get_args(tp) else tp
        if isinstance(inner, type) and issubclass(inner, BaseModel) and key in _fields_by_key(inner):
            where = f"each `{name}` entry" if many else f"`{name}`"
            return f"'{key}' belongs in {where}: did you mean {name}{'[]' if many else ''}.{key}?"
    return None


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

PATTERN_WORDS = {
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


class Locator:
    """Maps locs (keys and indices into the data) to the line and column of the YAML node."""

    def __init__(self, parsed: ParsedYaml, name: str) -> None:
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
        if issue.word is not None and (at := self.word_position(path, *issue.word)) is not None:
            return Diagnostic(self.name, at[0], at[1], text, issue.hint)
        return self.diagnostic(path, text, issue.hint, on_key=issue.on_key)

    def word_position(self, path: tuple[str | int, ...], word: str, occurrence: int) -> tuple[int, int] | None:
        """1-based (line, column) of the `occurrence`-th `word` (as incidents.leaks splits text) inside the
        scalar at `path`, or None when the source does not show it there (a value from a variable)."""
        start, end = self.parsed.value_marks.get(path), self.parsed.value_ends.get(path)
        lines = self.parsed.text.split("\n")
        if start is None or end is None or end.line >= len(lines):
            return None
        begin = sum(len(line) + 1 for line in lines[: start.line]) + start.column
        stop = sum(len(line) + 1 for line in lines[: end.line]) + end.column
        source = self.parsed.text[begin:stop]
        if len(normalise(source)) != len(source):
            return None  # lower-casing moved the offsets
        hits = [a for a, _, w in word_spans(source) if w == word]
        if occurrence >= len(hits):
            return None
        offset = begin + hits[occurrence]
        line = self.parsed.text.count("\n", 0, offset)
        return line + 1, offset - (self.parsed.text.rfind("\n", 0, offset) + 1) + 1

    def from_validation(self, error: ValidationError) -> list[Diagnostic]:
        grouped: dict[tuple[str | int, ...], list[dict[str, Any]]] = {}
        missing: dict[tuple[str | int, ...], list[tuple[str, str | None]]] = {}
        extras: dict[tuple[str | int, ...], list[str]] = {}
        out: list[Diagnostic] = []
        for details in error.errors(include_url=False):
            err: dict[str, Any] = dict(details)
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
        hint = did_you_mean(key, allowed) or _one_level_down(loc[:-1], key) \
            or ("allowed: " + ", ".join(allowed) if allowed else None)
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
            hint = PATTERN_WORDS.get(str(ctx.get("pattern")))
        elif kind in ("value_error", "assertion_error"):
            text = str(ctx.get("error", msg.removeprefix("Value error, ")))
        elif kind in _TYPE_WORDS:
            text = f"expected {_TYPE_WORDS[kind]}, got {got}"
        elif kind == "finite_number":
            text = f"expected a finite number, got {got}"
            hint = "write the number itself: no knob takes .inf or .nan (docs/authoring.md, 'Bounds')"
        else:
            text = f"{msg[:1].lower()}{msg[1:]}, got {got}"
        return self.diagnostic(path, f"{where}: {text}", hint)


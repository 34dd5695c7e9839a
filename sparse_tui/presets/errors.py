"""``PresetError``: one ``FILE: key: message`` line per problem of a preset."""

from __future__ import annotations

import re

from pydantic import ValidationError

from sparse_tui.base.numbers import fmt_plain
from sparse_tui.presets.fields import MAX_PROBLEM_LINES
from sparse_tui.presets.schema import KIND_SECTIONS, _esc, kind_classes


class PresetError(Exception):
    """One or more problems with a preset; ``lines`` holds one ``FILE: key: message`` line per problem, the first
    ``MAX_PROBLEM_LINES`` of them, then one line saying how many more there are."""

    def __init__(self, lines: list[str]):
        lines = [_esc(line) for line in lines]
        if len(lines) > MAX_PROBLEM_LINES:
            source = lines[0].split(": ", 1)[0]
            lines = lines[:MAX_PROBLEM_LINES] + [f"{source}: {len(lines) - MAX_PROBLEM_LINES} more problem(s) not"
                                                 " shown"]
        super().__init__("\n".join(lines))
        self.lines = lines


def _message(err: dict) -> str:
    """Turn one pydantic error into a short human message."""
    t = err["type"]
    ctx = err.get("ctx", {}) or {}
    table = {
        "greater_than": "must be > {gt}",
        "greater_than_equal": "must be >= {ge}",
        "less_than": "must be < {lt}",
        "less_than_equal": "must be <= {le}",
        "extra_forbidden": "unknown key",
        "missing": "required key is missing",
        "int_type": "must be an integer",
        "int_parsing": "must be an integer",
        "int_from_float": "must be an integer",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "string_type": "must be a string",
        "list_type": "must be a list",
        "dict_type": "must be a table",
        "model_type": "must be a table",
        "too_short": "must have at least {min_length} item(s)",
        "string_too_long": "must be at most {max_length} characters",
        "union_tag_invalid": "must be one of {expected_tags}",
        "union_tag_not_found": "needs a 'kind' key",
    }
    if t == "literal_error":
        return "must be one of " + str(ctx.get("expected", "")).replace("'", "")
    if t in table:
        try:
            return table[t].format(**{k: v if k == "expected_tags" else repr(v) if isinstance(v, str) else fmt_plain(v)
                                   for k, v in ctx.items()})
        except (KeyError, IndexError):
            return table[t]
    if t == "value_error":
        return str(ctx.get("error", err.get("msg", "")))
    return err.get("msg", t)


def _loc(err: dict, prefix: str) -> tuple[str, str]:
    """Key path of a pydantic error, dropping discriminator tags (task.recall.n_tokens -> task.n_tokens)."""
    loc = list(err["loc"])
    if len(loc) > 1 and loc[0] in KIND_SECTIONS and loc[1] in kind_classes(loc[0]):
        del loc[1]
    parts = [str(p) for p in loc]
    # Model validators raising "key: message" name the field inside their section.
    msg = _message(err)
    if err["type"] == "value_error" and ": " in msg:
        key, rest = msg.split(": ", 1)
        if re.fullmatch(r"[A-Za-z_.]+", key):
            parts = parts + [key]
            msg = rest
    path = ".".join(parts)
    if prefix:
        path = f"{prefix}.{path}" if path else prefix
    return path, msg


def format_validation_error(exc: ValidationError, source: str, prefix: str = "") -> list[str]:
    lines = []
    for err in exc.errors(include_url=False):
        path, msg = _loc(err, prefix)
        lines.append(f"{source}: {path}: {msg}" if path else f"{source}: {msg}")
    # de-duplicate while keeping order
    return list(dict.fromkeys(lines))

"""The preset form's model: fields from the pydantic schema, a draft of edits, validation, TOML save and diff.

No Textual here, so it is unit-testable. Every value is edited as TOML text (``1e-3``, ``"auto"``, ``[0, 1]``; a bare
word counts as a string, like ``--set``). An empty text means "not in the file" (the schema default applies).
Validation goes through ``presets.validate_preset_data``, so the messages are exactly the CLI's. Saving edits the file
with tomlkit and touches only the keys whose value changed: comments, order and number formatting survive.
"""

from __future__ import annotations

import copy
import difflib
import re
import tomllib
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomlkit

from sparse_tui.base.dotted import flatten
from sparse_tui.base.files import read_regular, write_file
from sparse_tui.presets.catalog import GROUPS, catalogue
from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.fields import MAX_PRESET_BYTES
from sparse_tui.presets.loading import parse_value, set_dotted, validate_preset_data
from sparse_tui.presets.schema import (
    KIND_SECTIONS,
    EvalConfig,
    PlateauConfig,
    Preset,
    TrainConfig,
    default_kind,
    kind_classes,
)

SECTIONS = ("task", "model", "train", "eval", "plateau")
PLAIN_CLASSES = {"train": TrainConfig, "eval": EvalConfig, "plateau": PlateauConfig}


@dataclass
class FieldSpec:
    """One editable key of a preset."""

    key: str  # dotted: train.lr, seeds, sweep.model.d_model
    type: str  # int, float, bool, str, list, choice
    default: Any
    help: str
    choices: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.key.split(".", 1)[1] if self.key.startswith("sweep.") else self.key.split(".")[-1]

    @property
    def default_text(self) -> str:
        return "" if self.default is None else to_text(self.default)


def _type_of(ann: Any) -> tuple[str, list[str]]:
    origin = typing.get_origin(ann)
    if origin is typing.Literal:
        return "choice", [str(a) for a in typing.get_args(ann)]
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            t, c = _type_of(args[0])
            return t + "?", c
    if ann is bool:
        return "bool", ["true", "false"]
    if ann in (int, float, str):
        return ann.__name__, []
    if origin in (list, tuple):
        return "list", []
    return "value", []


def section_fields(section: str, kind: str | None = None) -> list[FieldSpec]:
    """The fields of a section (for task/model: of the given kind), in schema order."""
    if section in KIND_SECTIONS:  # task kinds: the task registry (presets.TASKS)
        classes = kind_classes(section)
        cls = classes.get(kind, classes[default_kind(section)])
    else:
        cls = PLAIN_CLASSES[section]
    out = []
    for name, f in cls.model_fields.items():
        t, choices = _type_of(f.annotation)
        if name == "kind":
            t, choices = "choice", list(classes)
        desc = f.description or (cls.__doc__ or "").strip().split("\n")[0]
        default = f.default if f.default_factory is None else f.default_factory()
        out.append(FieldSpec(f"{section}.{name}", t, default, desc, choices))
    return out


# the preset's keys outside the sections: (type, default) as the form shows them
TOP_KEYS = {"name": ("str", ""), "description": ("str", ""), "seeds": ("list", [0]), "tags": ("list", [])}


def top_fields() -> list[FieldSpec]:
    fs = Preset.model_fields
    return [FieldSpec(k, t, default, fs[k].description or "") for k, (t, default) in TOP_KEYS.items()]


def to_text(value: Any) -> str:
    """A Python value as TOML value text."""
    doc = tomlkit.document()
    doc["v"] = value
    return tomlkit.dumps(doc).split("=", 1)[1].strip()


def parse_text(text: str) -> Any:
    return parse_value(text.strip())


def _toml_item(text: str) -> Any:
    """A tomlkit item that keeps how the user wrote the number (1e-3 stays 1e-3)."""
    try:
        return tomlkit.parse(f"v = {text.strip()}")["v"]
    except Exception:
        return tomlkit.item(parse_text(text))


_LINE = re.compile(r"^(?P<src>[^:]+): (?P<path>[A-Za-z_][\w.]*(?:\[\d+\])?): (?P<msg>.*)$")


@dataclass
class Validation:
    field_errors: dict[str, str]
    general: list[str]
    loaded: Any = None  # LoadedPreset when valid

    @property
    def ok(self) -> bool:
        return self.loaded is not None


class PresetDraft:
    """A preset file being edited."""

    def __init__(self, path: Path, overrides: list[str] | None = None):
        self.path = Path(path)
        self.text = read_regular(self.path, MAX_PRESET_BYTES, "a preset file").decode("utf-8")
        self.parse_error: str | None = None
        try:
            self.raw = tomllib.loads(self.text)
        except tomllib.TOMLDecodeError as e:
            self.raw = {}
            self.parse_error = f"{self.path.name}: TOML syntax error: {e}"
        except ValueError:  # Python's int() limit (4300 digits), past tomllib's own checks
            self.raw = {}
            self.parse_error = f"{self.path.name}: an integer of more than 4300 digits; no key takes one"
        self.doc = None
        self.original: dict[str, str] = self._texts_from_file()
        self.values: dict[str, str] = dict(self.original)
        for ov in overrides or []:
            if "=" in ov:
                k, v = ov.split("=", 1)
                self.values[k.strip()] = v.strip()

    # -- reading the file ---------------------------------------------------------------------------------------
    def _texts_from_file(self) -> dict[str, str]:
        out: dict[str, str] = {}
        try:
            doc = tomlkit.parse(self.text)
        except Exception:
            return out
        for k in TOP_KEYS:
            if k in doc:
                out[k] = doc[k].as_string().strip()
        for sec in SECTIONS:
            tbl = doc.get(sec)
            if isinstance(tbl, dict):
                for k, v in tbl.items():
                    if isinstance(v, dict):
                        continue
                    out[f"{sec}.{k}"] = v.as_string().strip() if hasattr(v, "as_string") else to_text(v)
        sweep = doc.get("sweep")
        if isinstance(sweep, dict):
            for k, v in flatten(dict(sweep.unwrap())).items():
                out[f"sweep.{k}"] = to_text(v)
        return out

    # -- the form's fields --------------------------------------------------------------------------------------
    def kind(self, section: str) -> str:
        t = self.values.get(f"{section}.kind", "").strip().strip("\"'")
        return t or default_kind(section)

    def fields(self) -> list[FieldSpec]:
        out = top_fields()
        for sec in SECTIONS:
            out += section_fields(sec, self.kind(sec) if sec in KIND_SECTIONS else None)
        for k in self.sweep_keys():
            out.append(FieldSpec(f"sweep.{k}", "list", None, f"Sweep values of {k} (runs = product of lists x seeds)."))
        return out

    def sweep_keys(self) -> list[str]:
        return [k.removeprefix("sweep.") for k in self.values if k.startswith("sweep.")]

    def set(self, key: str, text: str) -> None:
        self.values[key] = text

    @property
    def dirty(self) -> bool:
        return {k: v for k, v in self.values.items() if v.strip()} != {
            k: v for k, v in self.original.items() if v.strip()
        }

    # -- building the data --------------------------------------------------------------------------------------
    def to_raw(self) -> dict:
        raw = copy.deepcopy(self.raw)
        raw.pop("sweep", None)
        for key, text in self.values.items():
            if key.startswith("sweep."):
                continue
            if not text.strip():
                _del_dotted(raw, key)
            else:
                set_dotted(raw, key, parse_text(text))
        sweep = {k.removeprefix("sweep."): parse_text(t) for k, t in self.values.items()
                 if k.startswith("sweep.") and t.strip()}
        if sweep:
            raw["sweep"] = sweep
        for sec, allowed in self._kinds_changed().items():  # keys of another kind go when the kind changed
            if isinstance(raw.get(sec), dict):
                raw[sec] = {k: v for k, v in raw[sec].items() if k in allowed}
        return raw

    def _kinds_changed(self) -> dict[str, set[str]]:
        """The sections whose kind the edits changed, each with the keys its new kind has."""
        return {sec: {f.key.split(".")[1] for f in section_fields(sec, self.kind(sec))} for sec in KIND_SECTIONS
                if self.kind(sec) != (self.raw.get(sec) or {}).get("kind", default_kind(sec))}

    def validate(self) -> Validation:
        if self.parse_error:
            return Validation({}, [self.parse_error])
        keys = [f.key for f in self.fields()]
        try:
            loaded = validate_preset_data(self.to_raw(), self.path.name, path=self.path)
        except PresetError as e:
            fe: dict[str, str] = {}
            general: list[str] = []
            for line in e.lines:
                m = _LINE.match(line)
                if not m:
                    general.append(line)
                    continue
                path = re.sub(r"\[\d+\]$", "", m["path"])
                key = _match_key(path, keys)
                if key is None:
                    general.append(line)
                else:
                    msg = m["msg"]
                    if path != key and not key.startswith("sweep."):
                        msg = f"{path[len(key) + 1:]}: {msg}" if path.startswith(key + ".") else msg
                    fe.setdefault(key, msg)
            return Validation(fe, general)
        return Validation({}, [], loaded)

    def render(self) -> str:
        """The file text after applying the edits (only changed keys are touched)."""
        doc = tomlkit.parse(self.text) if not self.parse_error else tomlkit.document()
        for key in list(dict.fromkeys([*self.original, *self.values])):
            new = self.values.get(key, "").strip()
            old = self.original.get(key, "").strip()
            if new == old:
                continue
            if key.startswith("sweep."):
                sec, name = "sweep", key.removeprefix("sweep.")  # a sweep key keeps its dots: sweep.model.d_model
            else:
                parts = key.split(".")
                sec, name = (parts[0] if len(parts) > 1 else None), parts[-1]
            container = doc if sec is None else doc.get(sec)
            if not new:
                if container is not None and name in container:
                    del container[name]
                continue
            if container is None:
                doc[sec] = tomlkit.table()
                container = doc[sec]
            container[name] = _toml_item(new)
        for sec, allowed in self._kinds_changed().items():
            if sec in doc:
                for k in [k for k in doc[sec] if k not in allowed]:
                    del doc[sec][k]
        return tomlkit.dumps(doc)

    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.text.splitlines(keepends=True),
                                            self.render().splitlines(keepends=True), str(self.path.name), "(edited)"))

    def save(self, path: Path | None = None) -> Path:
        """Write the edited file (atomically) to ``path`` or the original path; the draft then tracks that file."""
        target = Path(path) if path is not None else self.path
        text = self.render()
        write_file(target, lambda fh: fh.write(text.encode("utf-8")), binary=True)  # files.py: the one writer
        self.__init__(target)
        return target


def _del_dotted(data: dict, key: str) -> None:
    *parents, last = key.split(".")
    node: Any = data
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def _match_key(path: str, keys: list[str]) -> str | None:
    if path in keys:
        return path
    return max((k for k in keys if path.startswith(k + ".")), key=len, default=None)  # the longest key above it


def list_presets(presets_dir: Path, extra: Path | None = None) -> list[tuple[str, list[Path]]]:
    """The console's preset list as (group, files), in ``catalog.GROUPS`` order: the user's own (``presets_dir``,
    and ``extra`` when it is none of the listed files) first, then the bundled presets by group."""
    groups: dict[str, list[Path]] = {}
    for item in catalogue(presets_dir):
        groups.setdefault(item.group, []).append(item.path)
    if extra is not None:
        extra = Path(extra)
        if not any(f.resolve() == extra.resolve() for files in groups.values() for f in files):
            groups.setdefault("yours", []).insert(0, extra)
    return [(g, groups[g]) for g in GROUPS if g in groups]

"""Loading a preset: the file, ``--set`` overrides, dotted keys and the sweep's expansion into runs."""

from __future__ import annotations

import copy
import errno
import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pydantic import ValidationError

from sparse_tui.base.dotted import flatten
from sparse_tui.base.files import ReadError, read_regular
from sparse_tui.presets.errors import PresetError, _loc, format_validation_error
from sparse_tui.presets.fields import MAX_PRESET_BYTES, MAX_RUNS, _show
from sparse_tui.presets.schema import KIND_SECTIONS, Preset, RunConfig, _esc, default_kind, kind_classes
from sparse_tui.science.repetition import REPEAT_KEYS, Schedule


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value as a TOML value (numbers, booleans, lists, quoted strings); bare words are strings.

    Raises ValueError for a value nested too deeply to parse."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        raise ValueError("value is nested too deeply") from None
    except ValueError as e:  # Python's int() limit (4300 digits): no key takes such a number
        if "4300" not in str(e) and "digits" not in str(e):
            raise
        raise ValueError("an integer of more than 4300 digits; no key takes one") from None


def _get_section_model(path: list[str], data: dict) -> bool:
    """Whether the dotted path names an existing field of the schema for this data (used for sweep keys)."""
    cfg: Any = RunConfig
    node = data
    for i, part in enumerate(path):
        fields = getattr(cfg, "model_fields", {})
        if part not in fields:
            return False
        if i == len(path) - 1:
            return True
        # descend into the section; for discriminated unions pick the member named by data's kind
        sub = node.get(part, {}) if isinstance(node, dict) else {}
        if part in KIND_SECTIONS:
            classes = kind_classes(part)
            cfg = classes.get(sub.get("kind") if isinstance(sub, dict) else None, classes[default_kind(part)])
        else:
            cfg = fields[part].annotation
        node = sub
    return False


def set_dotted(data: dict, key: str, value: Any, merge: bool = True) -> None:
    """Set a dotted key. A table set where a table of the same ``kind`` (or of no kind) already is, is merged into
    it: ``--set 'train={lr=0.05}'`` sets train.lr and keeps the other keys of [train], and a sweep over "train"
    with tables sweeps several keys together. A table of another kind replaces it (``model={kind="ode"}``: the
    keys of the toy model do not apply to an ODE run); so does any table with ``merge=False``."""
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    old = node.get(parts[-1])
    if merge and isinstance(value, dict) and isinstance(old, dict) and value.get("kind", old.get("kind")) == old.get(
            "kind"):
        value = _merged(old, value)
    node[parts[-1]] = value


def _merged(old: dict, new: dict) -> dict:
    out = dict(old)
    for k, v in new.items():
        out[k] = _merged(old[k], v) if isinstance(v, dict) and isinstance(old.get(k), dict) else v
    return out


def eval_steps(cfg: "RunConfig") -> list[int]:
    """Evaluation steps of a run: 0, every, 2 every, ... and always the last step."""
    every, steps = cfg.eval.every, cfg.train.steps
    out = list(range(0, steps + 1, every))
    if out[-1] != steps:
        out.append(steps)
    return out


@dataclass
class RunSpec:
    """One run of a preset: its resolved config, the flattened params and which of them were swept."""

    preset: str
    preset_path: str
    config: RunConfig
    swept: dict[str, Any] = field(default_factory=dict)
    edited: dict[str, Any] = field(default_factory=dict)  # keys set away from the preset file (--set, the form)

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def params(self) -> dict[str, Any]:
        return flatten(self.config.model_dump(mode="json", exclude={"name", "description", "tags"}))

    def label(self) -> str:
        """What tells this run apart from the preset file's runs: the keys edited away from the file (``--set``, the
        console's form), then the swept values, then the seed; e.g. ``steps=300 lr=0.01 seed=0``."""
        parts = [f"{k.split('.')[-1]}={v}" for k, v in self.edited.items() if k not in self.swept]
        parts += [f"{k.split('.')[-1]}={v}" for k, v in self.swept.items() if k != "seed"]
        parts.append(f"seed={self.seed}")
        return " ".join(parts)


@dataclass
class LoadedPreset:
    """A validated preset and the raw TOML data it came from (kept for sweep expansion)."""

    path: Path
    preset: Preset
    raw: dict
    file_raw: dict | None = None  # the file's data before --set (None: read the file when needed)

    @property
    def name(self) -> str:
        return self.preset.name or self.path.stem


def load_preset(path: str | Path, overrides: list[str] | None = None) -> LoadedPreset:
    """Load, override and validate a preset file, including every sweep point. Raises PresetError."""
    path = Path(path)
    src = path.name
    data = _read_preset_file(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PresetError([f"{src}: not a UTF-8 text file (byte {e.start}: {data[e.start:e.start + 1]!r})"]) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PresetError([f"{src}: TOML syntax error: {str(e).splitlines()[0]}"]) from None
    except RecursionError:
        raise PresetError([f"{src}: TOML nested too deeply"]) from None
    except ValueError:  # Python's int() limit (4300 digits), raised by tomllib past its own checks
        raise PresetError([f"{src}: an integer of more than 4300 digits; no key takes one"]) from None
    if not raw:
        raise PresetError([f"{src}: empty preset (no keys); a preset needs at least a [task] or [train] table"])
    loaded = validate_preset_data(raw, src, overrides, path=path)
    loaded.file_raw = raw
    return loaded


PRESET_FILE = "a preset file (a preset is a TOML file)"


def _read_preset_file(path: Path) -> bytes:
    """A preset file's bytes: a regular file (a FIFO, a device or a socket is refused before it is read, so that
    ``run /dev/zero`` or a FIFO nobody writes cannot hang or fill the memory) of at most ``MAX_PRESET_BYTES``,
    whose name can be stored (UTF-8). Raises PresetError."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise PresetError([f"{path}: the file name is not valid UTF-8 (run names and preset paths are stored as"
                           " UTF-8); rename the file"]) from None
    try:
        return read_regular(path, MAX_PRESET_BYTES, PRESET_FILE)  # base/files.py: the one reader of users' files
    except ReadError as e:
        if e.errno == errno.EFBIG:
            raise PresetError([f"{path}: more than {MAX_PRESET_BYTES >> 20} MiB; a preset is a small TOML file"]) \
                from None
        raise PresetError([str(e)]) from None


def validate_preset_data(
    raw: dict, src: str, overrides: list[str] | None = None, path: Path | None = None
) -> LoadedPreset:
    """Validate preset data already parsed from TOML (the TUI's form uses this too)."""
    raw = copy.deepcopy(raw)
    errors = _apply_overrides(raw, overrides or [])
    if errors:
        raise PresetError(errors)
    try:
        preset = Preset.model_validate(raw)
    except ValidationError as e:
        raise PresetError(format_validation_error(e, src)) from None
    except RecursionError:
        raise PresetError([f"{src}: nested too deeply"]) from None
    n_runs = len(preset.seeds)
    for values in preset.sweep.values():
        n_runs *= max(1, len(values))
    if n_runs > MAX_RUNS:
        sizes = " x ".join(str(len(v)) for v in preset.sweep.values())
        raise PresetError([f"{src}: sweep: {n_runs} runs ({sizes} x {len(preset.seeds)} seed(s)) is more than"
                           f" {MAX_RUNS}; split the sweep into several presets"])
    sweep = raw.get("sweep", {}) or {}
    base = {k: v for k, v in raw.items() if k not in ("sweep", "seeds")}
    errors = _sweep_errors(sweep, base, src)
    if errors:
        raise PresetError(list(dict.fromkeys(errors)))
    # Cross-field rules can fail only for some combinations (d_model x n_heads): check every point.
    loaded = LoadedPreset(path=path or Path(src), preset=preset, raw=raw)
    bad = []
    for combo in _combos(sweep):
        try:
            RunConfig.model_validate(_point(base, combo))
        except ValidationError as e:
            where = ", ".join(f"{k}={v}" for k, v in combo.items())
            bad += [f"{line} (sweep point {where})" for line in format_validation_error(e, src)]
    if bad:
        raise PresetError(list(dict.fromkeys(bad)))
    return loaded


def _apply_overrides(raw: dict, overrides: list[str]) -> list[str]:
    """Apply ``--set key=value`` overrides to ``raw`` in place; returns one line per override refused."""
    errors: list[str] = []
    for ov in overrides:
        if "=" not in ov:
            errors.append(f"--set {ov}: expected key=value")
            continue
        key, text = ov.split("=", 1)
        key = key.strip()
        if not key or any(not part for part in key.split(".")):
            errors.append(f"--set {_esc(ov)}: expected key=value with a dotted key like train.lr")
            continue
        if "\n" in text or "\r" in text:  # TOML would read the rest as more keys, or drop it
            errors.append(f"--set {_esc(key)}: the value has a line break; give one value per --set")
            continue
        try:
            value = parse_value(text.strip())
        except ValueError as e:
            errors.append(f"--set {_esc(key)}: {e}")
            continue
        if key.startswith("sweep.") and len(key) > len("sweep."):
            # --set sweep.train.lr=[1e-3,1e-2]: the sweep table's keys are dotted keys themselves
            if not isinstance(raw.get("sweep", {}), dict):
                raw["sweep"] = {}
            raw.setdefault("sweep", {})[key[len("sweep."):]] = value
        else:
            set_dotted(raw, key, value, merge=key != "sweep")  # --set 'sweep={}': no sweep (its keys are not settings)
    return errors


def _sweep_errors(sweep: dict, base: dict, src: str) -> list[str]:
    """The sweep's problems, one line each: every key must exist, every value list be non-empty and without
    repeats, every value valid at the preset's other settings."""
    errors: list[str] = []
    for key, values in sweep.items():
        if key in ("seed", "seeds"):
            errors.append(f"{src}: sweep.{key}: use the top-level 'seeds' list")
            continue
        if not _get_section_model(key.split("."), base) or key.split(".")[0] in ("name", "description", "tags"):
            errors.append(f"{src}: sweep.{key}: no such key")
            continue
        if not values:
            errors.append(f"{src}: sweep.{key}: must have at least 1 value")
            continue
        twice = _first_duplicate(values, schedules=key.split(".")[-1] in REPEAT_KEYS)
        if twice is not None:
            errors.append(f"{src}: sweep.{key}: value {_show(twice)} appears twice (two identical runs)")
            continue
        for i, v in enumerate(values):
            try:
                RunConfig.model_validate(_point(base, {key: v}))
            except ValidationError as e:
                for err in e.errors(include_url=False):
                    p, msg = _loc(err, "")
                    if p == key or p.endswith("." + key.split(".")[-1]) or p == key.split(".")[0]:
                        errors.append(f"{src}: sweep.{key}[{i}]: {msg}")
    return errors


def _first_duplicate(values: list, schedules: bool = False) -> Any:
    """The first value of a sweep list that appears twice (1e-2 and 0.01, 1 and 1.0 are the same value; true and 1
    are not; with ``schedules``, two spellings of one repetition schedule are too), else None."""
    seen = []
    for v in values:
        key = ("bool", v) if isinstance(v, bool) else ("num", v) if isinstance(v, (int, float)) else ("other", repr(v))
        if schedules and key[0] == "other":
            try:
                key = ("schedule", str(Schedule.model_validate(v)))
            except ValidationError:
                pass  # the point's own validation names what is wrong with it
        if key in seen:
            return v
        seen.append(key)
    return None


def _combos(sweep: dict[str, list[Any]]) -> list[dict[str, Any]]:
    keys = list(sweep)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(sweep[k] for k in keys))]


def _point(base: dict, combo: Mapping[str, Any]) -> dict:
    """A copy of ``base`` with the sweep values ``combo`` (dotted key -> value) set."""
    point = copy.deepcopy(base)
    for k, v in combo.items():
        set_dotted(point, k, v)
    return point


def expand(loaded: LoadedPreset) -> list[RunSpec]:
    """The runs of a preset: sweep product (in file order, last key fastest) times seeds (fastest)."""
    raw = loaded.raw
    base = {k: v for k, v in raw.items() if k not in ("sweep", "seeds")}
    if not base.get("name"):
        base["name"] = loaded.name
    specs = []
    edited = edited_keys(loaded)
    for combo in _combos(loaded.preset.sweep):
        for seed in loaded.preset.seeds:
            swept = {**combo, "seed": seed}
            specs.append(RunSpec(preset=loaded.name, preset_path=str(loaded.path),
                                 config=RunConfig.model_validate(_point(base, swept)), swept=swept,
                                 edited=dict(edited)))
    return specs


_NOT_EDITS = ("sweep", "seeds", "seed", "name", "description", "tags")


def edited_keys(loaded: LoadedPreset) -> dict[str, Any]:
    """Dotted keys whose value differs from the preset file's (set by ``--set`` or edited in the console's form),
    in file order; {} when the file cannot be read (a preset built in memory)."""
    base = loaded.file_raw
    if base is None:
        try:
            base = tomllib.loads(read_regular(loaded.path, MAX_PRESET_BYTES).decode("utf-8"))
        except (OSError, ValueError, RecursionError):  # UnicodeDecodeError and TOMLDecodeError are ValueErrors
            return {}
    old = flatten({k: v for k, v in base.items() if k not in _NOT_EDITS and isinstance(k, str)})
    new = flatten({k: v for k, v in loaded.raw.items() if k not in _NOT_EDITS and isinstance(k, str)})
    return {k: v for k, v in new.items() if k not in old or not _same_value(old[k], v)}


def _same_value(a: Any, b: Any) -> bool:
    """1e-3 and 0.001 are the same value; true and 1 are not."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b




def config_from_json(data: dict) -> RunConfig:
    """Rebuild a run's config from the JSON stored in the run store."""
    return RunConfig.model_validate(data)

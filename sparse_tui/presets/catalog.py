"""The preset catalogue: which file a preset name means, and the presets a user can pick from, grouped.

The presets ship inside the package: ``sparse_tui/bundled_presets`` is a link to the checkout's top-level
``presets/`` (the one copy of each file), and the wheel carries the same files there (pyproject.toml,
``package-data``), so ``bundled_dir()`` finds them with ``importlib.resources`` whether sparse-tui runs from a
checkout or from an installed wheel.

``resolve`` is the one rule for a preset argument (``run``, ``reproduce``, the console, ``presets copy``):

1. a file that exists is that file (a directory never is: a run folder ``./diversity_theory`` does not shadow the
   preset ``diversity_theory``);
2. else a bare name (``smoke``, ``smoke.toml``, ``presets/smoke.toml``) is the user's own ``./presets/NAME.toml``
   (or ``--presets-dir``);
3. else the bundled ``NAME.toml``.

``groups`` sorts presets for ``sparse-tui presets`` and the console's list: the user's own first, then checks,
theory, paper (CPU), paper (GPU) and blogs, each by the atlas entries that name it (``sparse_tui.atlas``).

Imports neither torch nor textual.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sparse_tui.base.files import ReadError, read_regular
from sparse_tui.presets.timing import Timing, timing

LOCAL_DIR = Path("presets")  # the user's own presets: ./presets, as the console and `run NAME` look for them

# The groups in the order they are listed; "yours" is the user's own folder, the others are bundled presets.
GROUPS = ("yours", "checks", "theory", "paper (CPU)", "paper (GPU)", "blogs")


class CatalogError(ValueError):
    """A preset name that names no file (one line)."""


def bundled_dir() -> Path:
    """The folder of the presets shipped with the package."""
    return Path(str(resources.files("sparse_tui") / "bundled_presets")).resolve()  # a checkout: its presets/


def is_bundled(path: Path) -> bool:
    """Whether ``path`` is (or would be) a file of the bundled folder (in a checkout: of its presets/)."""
    try:
        return Path(path).resolve().parent == bundled_dir().resolve()
    except OSError:
        return False


@dataclass(frozen=True)
class Resolved:
    path: Path
    origin: str  # "file" (the path given), "yours" (./presets/NAME.toml) or "bundled"

    def line(self) -> str:
        """One line saying which file a name stands for."""
        where = {"file": "the file given", "yours": "your own", "bundled": "bundled with sparse-tui"}[self.origin]
        return f"preset {self.path.stem}: {self.path} ({where})"


def _bare_name(ref: Path) -> str | None:
    """``smoke``, ``smoke.toml`` or ``presets/smoke.toml`` -> ``smoke``; None for any other path."""
    if ref.suffix not in ("", ".toml") or not ref.stem or ref.is_absolute():
        return None
    if len(ref.parts) == 1 or (len(ref.parts) == 2 and ref.parts[0] == "presets"):
        return ref.stem
    return None


def resolve(ref: str | Path, local_dir: Path | None = None) -> Resolved:
    """The file a preset argument names (the three rules of the module docstring). Raises ``CatalogError`` naming
    where it looked when a bare name fits no file; any other path is returned as given."""
    ref = Path(ref)
    if ref.exists() and not ref.is_dir():  # a file of any kind (the safe reader refuses a FIFO or a device)
        return Resolved(ref, "file")  # a directory never shadows a preset name (issue 42)
    name = _bare_name(ref)
    if name is None:  # a path: the loader says what is wrong with it (missing, a directory)
        return Resolved(ref, "file")
    local = Path(local_dir if local_dir is not None else LOCAL_DIR) / f"{name}.toml"
    if local.is_file():
        return Resolved(local, "bundled" if is_bundled(local) else "yours")
    bundled = bundled_dir() / f"{name}.toml"
    if bundled.is_file():
        return Resolved(bundled, "bundled")
    found = "is a directory, not a preset file" if ref.is_dir() else "file not found"
    raise CatalogError(f"{ref}: {found}, and no preset named {name!r} in {local.parent}/ or among the bundled "
                       "presets (sparse-tui presets lists them)")


def shadow_note(name: str, local_dir: Path | None = None) -> str:
    """What a bare ``name`` does not mean, said ("" when nothing is left aside): ``run NAME`` reads your
    ./presets/NAME.toml, else the bundled preset, never a ./NAME.toml in the working folder (``presets copy NAME .``
    writes one) nor the bundled preset your copy shadows."""
    try:
        used = resolve(name, local_dir)
    except CatalogError:
        return ""
    if used.origin == "file":
        return ""
    stem = used.path.stem
    here = Path(f"{stem}.toml")
    notes = []
    if here.is_file() and not same_file(here, used.path):
        notes.append(f"./{here} is not used: a bare name means ./presets/{here} else the bundled preset "
                     f"(run ./{here} to train that file)")
    bundled = bundled_dir() / f"{stem}.toml"
    if used.origin == "yours" and bundled.is_file() and not same_file(bundled, used.path):
        notes.append(f"your {used.path} shadows the bundled {stem}")
    return "; ".join(notes)


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


# ---------------------------------------------------------------------------------------------------------------
# The catalogue: every preset a user can pick, grouped, with its figure and measured CPU time
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    name: str
    path: Path
    group: str  # one of GROUPS
    figure: str  # the figures it reproduces (atlas), "" for none
    timing: Timing  # the measured time its header states, with load, machine and date (timing.py)


def _group_and_figure(name: str) -> tuple[str, str]:
    """A bundled preset's group and figures, from the atlas entries that name it: none -> checks; the same preset
    at both sizes (the reduced dynamics and the toy model need no GPU) -> theory; the paper's CPU or GPU size ->
    paper (CPU) / paper (GPU); a blog's -> blogs."""
    from sparse_tui import atlas

    hits = atlas.entries_of_preset(name)
    if not hits:
        return "checks", ""
    figure = ", ".join(dict.fromkeys(e.figure for e in hits))
    e = hits[0]
    if not e.source.startswith("arXiv"):
        return "blogs", figure
    if e.preset("cpu") == e.preset("gpu"):
        return "theory", figure
    return ("paper (CPU)" if e.preset("cpu") == name else "paper (GPU)"), figure


def catalogue(local_dir: Path | None = None) -> list[Item]:
    """The user's own presets (``local_dir``, default ./presets), then the bundled ones, in ``GROUPS`` order and by
    name within a group. A local folder that is the bundled one (a checkout) adds nothing of its own."""
    items = []
    local = Path(local_dir if local_dir is not None else LOCAL_DIR)
    bundled = bundled_dir()
    if local.is_dir() and not same_file(local, bundled):
        for p in sorted(local.glob("*.toml")):
            if not p.is_file():  # a FIFO, a device, a folder or a dangling link is no preset (stat: nothing opened)
                continue
            items.append(Item(p.stem, p, "yours", _group_and_figure(p.stem)[1], timing(p)))
    for p in sorted(bundled.glob("*.toml")):
        group, figure = _group_and_figure(p.stem)
        items.append(Item(p.stem, p, group, figure, timing(p)))
    return sorted(items, key=lambda i: (GROUPS.index(i.group), _natural(i.name)))


def _natural(name: str) -> list:
    """``paper_fig3`` before ``paper_fig11``."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def copy(name: str, dest: Path | None = None, local_dir: Path | None = None) -> Path:
    """Write an editable copy of preset ``name`` (resolved as ``resolve`` does) to ``dest`` (a folder, default
    ./presets, created when missing) as ``NAME.toml``; never overwrites. Copies presets only: a bundled or local
    preset's name, or a ``.toml`` file the validator accepts, read by the one safe reader (a regular file of at most
    ``MAX_PRESET_BYTES``; a FIFO or a device is refused, never waited on). Raises ``CatalogError``."""
    from sparse_tui.presets.errors import PresetError
    from sparse_tui.presets.fields import MAX_PRESET_BYTES
    from sparse_tui.presets.loading import load_preset

    if not str(name).strip():
        raise CatalogError("presets copy: give a preset name (sparse-tui presets lists them)")
    found = resolve(name, local_dir)
    src = found.path
    if found.origin == "file":  # a path, not a name: copied only if it is a preset
        if src.suffix != ".toml":
            raise CatalogError(f"{src}: not a preset (a .toml file); presets copy copies presets only")
        try:
            load_preset(src)
        except PresetError as e:
            raise CatalogError(f"{str(e).splitlines()[0]} (presets copy copies valid presets only)") from None
    folder = Path(dest) if dest is not None else LOCAL_DIR
    if folder.is_symlink() and not folder.exists():
        raise CatalogError(f"{folder}: a link to nothing (dangling), not a folder")
    if folder.exists() and not folder.is_dir():
        raise CatalogError(f"{folder}: not a folder")
    target = folder / f"{src.stem}.toml"
    if target.exists() or target.is_symlink():
        raise CatalogError(f"{target}: exists; not overwritten (edit it, or copy into another folder)")
    try:
        data = read_regular(src, MAX_PRESET_BYTES, "a preset file")
    except ReadError as e:
        raise CatalogError(str(e)) from None
    tmp = folder / f".{src.stem}.toml.{os.getpid()}.tmp"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.link(tmp, target)  # whole or not at all, and never over a file that appeared meanwhile
    except FileExistsError:
        raise CatalogError(f"{target}: exists; not overwritten") from None
    except OSError as e:
        raise CatalogError(f"{target}: cannot write: {e.strerror or e}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return target

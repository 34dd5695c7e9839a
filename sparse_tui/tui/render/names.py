"""Names and labels shortened to a width, by one rule (docs/TUI.md, "Runs"): a value is never cut.

``fit_label`` owns the rule; ``fit_names`` applies it to names shown together (the Runs table, its group rows,
``sparse-tui runs`` at 80 columns), and the charts' legends and grid titles, the atlas list and the heatmaps' labels
call it too. In order, until the text fits:

1. the words every shown name shares (the preset of one sweep, ``seed=0``) are left out (``fit_names``);
2. the words before the ``key=value`` pairs (the preset) are cut, alike for all runs of that preset (``blog_…``), or
   left out;
3. the keys give up letters, every value kept whole: ``t…=100000 lr=0.001 s…=1`` (as many letters as fit, alike for
   the names of a preset shown together: names that differ in any value stay told apart);
4. where not even one letter a key fits, the last pairs give way, and how many is said: ``train_size=100000 …+2``,
   never ``train_size=100…``;
5. one pair that does not fit alone keeps its value whole and gives up letters of its key: ``train…=100000``.

A trailing count in parentheses (``(n=3)``) stays. Text without pairs keeps whole words (a single word: a preset's
name, cut at its end). The detail line under the table shows the whole name."""

from __future__ import annotations

from typing import Collection, Iterable, Sequence

from sparse_tui.base.numbers import fmt_fit


def shared_words(names: Iterable[str]) -> set[str]:
    """The words every one of these names holds (the preset of one sweep, ``seed=0``): they tell no run apart."""
    sets = [set(n.split()) for n in names]
    return set.intersection(*sets) if len(sets) > 1 else set()


def _parts(name: str, drop: Collection[str]) -> tuple[str, list[str], str]:
    """A name's leading words that are no ``key=value`` pair (the preset), its pairs, and a trailing ``(n=3)``;
    without the words in ``drop``."""
    words = [w for w in name.split() if w not in drop] or name.split()
    note = words.pop() if len(words) > 1 and words[-1].startswith("(") and words[-1].endswith(")") else ""
    n = next((i for i, w in enumerate(words) if "=" in w), len(words))
    return " ".join(words[:n]), words[n:], note


def fit_names(names: Sequence[str], width: int) -> dict[str, str]:
    """Names shown together (one column), each fitted to ``width`` by ``fit_label`` so that they line up: when one
    does not fit, the words every name shares are left out of all, a preset is cut the same for all its runs (to
    what its longest pairs leave), and when one run's first pair must give up letters of its key, all of that
    preset's runs give up the same (to what their longest first value leaves)."""
    drop = shared_words(names) if any(len(n) > width for n in names) else set()
    parts = {n: _parts(n, drop) for n in names}
    widest: dict[str, int] = {}
    for head, pairs, _ in parts.values():
        widest[head] = max(widest.get(head, 0), len(" ".join(pairs)))
    room = {}  # per preset: the letters a key keeps when its runs' pairs fit only with keys cut (alike for all)
    for head, pairs, note in parts.values():
        w = width - len(note) - 1 if note and len(note) + 2 <= width else width
        if len(" ".join(pairs)) > w:  # 0: one of them does not fit even so, and all drop pairs instead
            room[head] = min(room.get(head, w), keys_fit(pairs, w))
    out = {n: fit_label(n, width, drop, widest[parts[n][0]], key_room=room.get(parts[n][0])) for n in names}
    cut = {parts[n][0] for n, text in out.items() if "…=" in text}  # presets whose first key gave up letters
    value = {h: max(len(p[0].partition("=")[2]) for hh, p, _ in parts.values() if hh == h and p) for h in cut}
    for n in names:
        if parts[n][0] in cut and parts[n][1]:
            out[n] = fit_label(n, width, drop, widest[parts[n][0]], value[parts[n][0]], room.get(parts[n][0]))
    return out


def _short_key(pair: str, k: int) -> str:
    """``train_size=100000`` with its key cut to ``k`` letters (``tr…=100000``); a key no longer than that whole."""
    key, _, value = pair.partition("=")
    return f"{key[:k]}…={value}" if len(key) > k + 1 else pair


def keys_fit(pairs: Sequence[str], width: int) -> int:
    """The most letters of each key (at least 1) with which every pair, its value whole, fits in ``width``; 0 when
    not even one letter a key fits."""
    longest = max((len(p.partition("=")[0]) for p in pairs), default=0)
    for k in range(longest, 0, -1):
        if len(" ".join(_short_key(p, k) for p in pairs)) <= width:
            return k
    return 0


def fit_label(name: str, width: int, drop: Collection[str] = (), widest: int = 0, value_room: int = 0,
              key_room: int | None = None) -> str:
    """``name`` in ``width`` columns by the module's rule: without the words in ``drop``; then with the words before
    the pairs (the preset) cut to what the pairs leave (``widest``: the longest pairs of that preset's shown runs,
    so that all are cut alike) or left out; then the last pairs dropped and counted (``d=128 …+2``); then one pair
    keeps its value and gives up letters of its key (``d_m…=128``; ``value_room``: as if its value were that long,
    so that names shown together give up alike; it also skips the step before). Never longer than ``width`` unless
    not even ``…`` fits."""
    head, pairs, note = _parts(name, drop)
    if note and len(note) + 2 <= width:
        return f"{fit_label(' '.join([head] + pairs), width - len(note) - 1, key_room=key_room)} {note}".lstrip()
    tail = " ".join(pairs)
    room = width - max(len(tail), widest) - 1  # for the preset, before the pairs
    if not tail or len(head) <= room:
        return cut_words(f"{head} {tail}".strip(), width)
    if room >= 4:  # a few letters of the preset, then every pair
        return f"{head[:room - 1]}… {tail}"
    if len(tail) <= width:
        return tail
    k = keys_fit(pairs, width) if key_room is None else min(key_room, keys_fit(pairs, width))
    if k:  # every value whole, the keys cut to k letters (``key_room``: alike with the names shown beside it)
        return " ".join(_short_key(p, k) for p in pairs)
    for k in range(len(pairs) - 1, 0, -1) if not value_room else ():  # the first k pairs whole, the rest counted
        text = f"{' '.join(pairs[:k])} …+{len(pairs) - k}"
        if len(text) <= width:
            return text
    more = f" …+{len(pairs) - 1}" if len(pairs) > 1 else ""
    key, _, value = pairs[0].partition("=")
    keep = width - len(more) - max(len(value), value_room) - 2  # letters of the key before "…="
    if keep >= 1:
        return f"{key[:keep]}…={value}{more}"
    for text in (f"…={value}{more}", f"…={value}", f"…+{len(pairs)}"):
        if len(text) <= width:
            return text
    return "…"


def cut_words(text: str, width: int) -> str:
    """``text`` in ``width`` columns: whole words, the rest given way to ``…`` (its spacing kept: aligned columns
    stay aligned); a single word too long (a preset's name) cut at its end."""
    if len(text) <= width:
        return text
    cut = text.rfind(" ", 0, max(0, width - 1))
    if cut > 0 and text[:cut].strip():
        return text[:cut].rstrip() + " …"
    return cut_end(text, width)


def fit_value(v: object, width: int) -> str:
    """A parameter value in a cell of ``width`` (the Runs table's hyperparameter columns): a number in fewer digits
    or a shorter form (``numbers.fmt_fit``: ``1e5``, ``21.5k``), never cut; a text by its end (``…former``)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return fmt_fit(v, width)
    text = str(v)
    return text if len(text) <= width else ("…" + text[-(width - 1):] if width > 1 else "…")


def cut_end(text: str, width: int) -> str:
    """``text`` cut at its end to ``width`` columns, the last one ``…`` (a word that is no value: a preset's name)."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"

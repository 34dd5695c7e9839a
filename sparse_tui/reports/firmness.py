"""How firm a verdict is, and what produced its runs (issue 42: a verdict flipped on another machine).

* ``firmness(store, entry, run_ids, word, verdict_of)``: a seed bootstrap of the verdict. Each draw takes as many
  seeds as the runs have, with replacement; the draw's distinct seeds (a run appears once however often its seed is
  drawn: the checks read per-seed rows, and a duplicate would change no mean the rule reads but the "every seed"
  clauses) give a report and a word. Every draw is weighted exactly (the probability that ``n`` draws of ``n`` seeds
  hit exactly a given ``k`` of them is k!·S(n, k) / nⁿ), so the flip rate is exact, not sampled: ``2ⁿ − 1`` reports.
  The word is ``fragile`` when the draws flip it more than ``FRAGILE`` (20 %) of the time, or when the entry's check
  reads post-plateau numbers (final accuracies, losses after emergence: chaotic in their last bits on another
  machine) from fewer than ``MIN_SEEDS`` (3) seeds; ``firm`` otherwise; ``deterministic`` for an integrated flow (one
  run per point, no seed: the same numbers on any machine, docs/REPRODUCTION.md "What is bit-stable"); ``one seed``
  where there is nothing to resample.
* ``environment(runs)``: what the stored runs record of their making (runner and ``trainer.library_versions``):
  torch and numpy versions, intra-op threads, stacked or sequential, device, commit, each the set of values seen.

No torch, no textual at import.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

FRAGILE = 0.2  # a bootstrap that flips the word more often than this marks the verdict fragile (issue 42's)
MIN_SEEDS = 3  # a verdict that reads post-plateau numbers needs at least this many seeds
MAX_SEEDS = 8  # 2^8 - 1 = 255 reports at most; more seeds are bootstrapped on their first MAX_SEEDS (said)
FIRMNESS = ("firm", "fragile", "deterministic", "one seed", "not measured")
# Entries whose check reads numbers after the plateau (final accuracies, perplexities, losses at the end of
# training, 60 % crossings), not only when the ability emerges (reports/verdict.py's CHECKS say which).
POST_PLATEAU = frozenset({
    "fig5_left", "fig5_right", "fig17", "blog3_V", "blog3_C", "blog3_nembd",
    "blog3_geometry", "euclidean", "euclidean_ordered", "blog6_nembd", "blog6_n80", "warmup", "fig5_late",
    "diversity", "diversity_linreg",
})


@dataclass(frozen=True)
class Firmness:
    word: str  # one of FIRMNESS
    flips: float | None = None  # the bootstrap's probability that the word changes
    seeds: int = 0  # the seeds resampled
    words: dict[str, float] = field(default_factory=dict)  # word -> its bootstrap probability
    why: str = ""

    def line(self) -> str:
        return f"firmness: {self.word} — {self.why}"

    def to_dict(self) -> dict[str, Any]:
        return {"firmness": self.word, "flips": None if self.flips is None else round(self.flips, 4),
                "seeds": self.seeds, "words": {k: round(v, 4) for k, v in self.words.items()}, "why": self.why}


def _surjections(n: int, k: int) -> int:
    """Maps of n draws onto exactly k given seeds (inclusion-exclusion)."""
    return sum((-1) ** j * math.comb(k, j) * (k - j) ** n for j in range(k + 1))


def subset_weights(n: int) -> dict[int, float]:
    """k -> the bootstrap probability that n draws of n seeds hit exactly one given set of k seeds."""
    return {k: _surjections(n, k) / n ** n for k in range(1, n + 1)}


def firmness(store: Any, entry: Any, run_ids: Sequence[str], word: str,
             verdict_of: Callable[[Sequence[str]], str]) -> Firmness:
    """The seed bootstrap of ``word``, the verdict of ``entry`` over ``run_ids``; ``verdict_of(ids)`` is the word
    of the entry's report over a subset of them (``reproduce.report(...).verdict.word``)."""
    by_seed: dict[Any, list[str]] = {}
    ode = True
    for rid in run_ids:
        rec = store.get(rid)  # a record without seed or config (a hand-made one) counts as one seed, not a flow
        by_seed.setdefault(getattr(rec, "seed", None), []).append(rid)
        ode = ode and (getattr(rec, "config", None) or {}).get("model", {}).get("kind") == "ode"
    if ode:
        return Firmness("deterministic", 0.0, len(by_seed), {word: 1.0},
                        "an integrated flow: no seed, no sampling (the same numbers on any machine)")
    seeds = sorted(by_seed, key=lambda s: (s is None, s))
    few = entry.key in POST_PLATEAU and len(seeds) < MIN_SEEDS
    if len(seeds) < 2:
        return Firmness("fragile" if few else "one seed", None, len(seeds), {word: 1.0},
                        "post-plateau numbers from one seed (at least 3 needed)" if few else "one seed: nothing to "
                        "resample")
    used = seeds[:MAX_SEEDS]
    n = len(used)
    w = subset_weights(n)
    words: dict[str, float] = {}
    for k in range(1, n + 1):
        for subset in itertools.combinations(used, k):
            ids = [rid for s in subset for rid in by_seed[s]]
            try:
                got = verdict_of(ids)
            except Exception as ex:  # noqa: BLE001 - a subset the report cannot read counts as a flip, said
                got = f"report failed ({type(ex).__name__})"
            words[got] = words.get(got, 0.0) + w[k]
    flips = 1.0 - words.get(word, 0.0)
    more = f" (the first {MAX_SEEDS} of {len(seeds)})" if len(seeds) > MAX_SEEDS else ""
    dist = ", ".join(f"{k} {v:.0%}" for k, v in sorted(words.items(), key=lambda kv: -kv[1]))
    why = f"a bootstrap over {n} seeds{more} gives {dist}"
    if few:
        return Firmness("fragile", flips, n, words, f"post-plateau numbers from {n} seeds (at least {MIN_SEEDS} "
                                                    f"needed); {why}")
    return Firmness("fragile" if flips > FRAGILE else "firm", flips, n, words,
                    why + f"; fragile above {FRAGILE:.0%} flips")


def static(entry: Any, configs: Sequence[Any]) -> Firmness:
    """What an entry's preset alone says of its verdict's firmness (no stored runs to bootstrap): ``deterministic``
    for an integrated flow, ``fragile`` when its check reads post-plateau numbers from fewer than ``MIN_SEEDS``
    seeds, else ``not measured``."""
    seeds = {c.seed for c in configs}
    if configs and all(c.model.kind == "ode" for c in configs):
        return Firmness("deterministic", 0.0, len(seeds), why="an integrated flow: no seed, no sampling")
    if entry.key in POST_PLATEAU and len(seeds) < MIN_SEEDS:
        return Firmness("fragile", None, len(seeds), why=f"post-plateau numbers from {len(seeds)} seed(s) (at least "
                                                         f"{MIN_SEEDS} needed)")
    return Firmness("not measured", None, len(seeds), why="no stored runs here to bootstrap (reproduce KEY does)")


def environment(runs: Sequence[Any]) -> dict[str, Any]:
    """What the stored ``runs`` (store records) say produced them: each field the sorted list of the values seen
    (a record made on one machine in one go has one of each); ``None`` where no run recorded it (a run trained
    before issue 42 has no threads, stack or commit)."""
    def seen(key: str) -> list[Any] | None:  # the run's device, else an entry of its recorded versions
        vals = {getattr(r, "device", None) if key == "device" else (getattr(r, "versions", None) or {}).get(key)
                for r in runs} - {None}
        return sorted(vals, key=str) or None

    stack = seen("stack")
    return {"torch": seen("torch"), "numpy": seen("numpy"), "threads": seen("threads"),
            "schedule": (None if stack is None else sorted({"sequential" if s == 1 else "stacked" for s in stack})),
            "stack_sizes": stack, "device": seen("device"), "commit": seen("commit"),
            "sparse_tui": seen("sparse_tui"), "platform": seen("platform"), "runs": len(runs)}


def environment_line(env: dict[str, Any]) -> str:
    """One line of ``environment``'s fields (a list of one value printed bare); the fields no run recorded are named
    once at the end ("not recorded: threads, schedule, commit"), not one "not recorded" each."""
    def cell(key: str, short: bool = False) -> str | None:
        vals = env.get(key)
        if not vals:
            return None
        vals = [str(x)[:10] if short else str(x) for x in vals]
        return vals[0] if len(vals) == 1 else "{" + ", ".join(vals) + "}"

    schedule = cell("schedule")
    fields = {"torch": f"torch {cell('torch')}", "numpy": f"numpy {cell('numpy')}",
              "threads": f"threads {cell('threads')}",
              "schedule": f"{schedule} (stacks of {cell('stack_sizes')})" if schedule else None,
              "device": f"device {cell('device')}", "commit": f"commit {cell('commit', short=True)}"}
    missing = [k for k in fields if cell(k) is None]
    line = ", ".join(text for k, text in fields.items() if k not in missing)
    return "; ".join(filter(None, [line, "not recorded: " + ", ".join(missing) if missing else ""]))

"""Blog 6, "Sparse attention 6 – In-context associative recall": the Goldilocks N, N = 80 made to work by
data × lr, and the warm-up hypothesis (entries blog6_nembd, blog6_n80, warmup: the curves kind's report and
figure, a claim each)."""

from __future__ import annotations

from sparse_tui.reports.base import Claim, _fmt, run_config


def _learned(store, run_id, level=0.5):
    acc = (store.get(run_id).final or {}).get("test/acc")
    return acc is not None and acc >= level, acc


def _check_blog6_nembd(store, rep):
    by: dict[int, list[bool]] = {}
    for r in rep.data.runs:
        by.setdefault(run_config(store.get(r["run_id"])).model.d_model, []).append(_learned(store, r["run_id"])[0])
    ns = sorted(by)
    ok = [n for n in ns if sum(by[n]) * 2 > len(by[n])]
    word = ("reproduced" if ok and ns[0] not in ok and ns[-1] not in ok
            else "in kind" if ok else "not reproduced")
    return word, f"N ending at test accuracy ≥ 0.5 in most seeds: {ok or 'none'} of {ns}"


def _check_blog6_n80(store, rep):
    cfgs = [(run_config(store.get(r["run_id"])), r["run_id"]) for r in rep.data.runs]
    rows = [(c.task.train_size, c.train.lr, *_learned(store, rid)) for c, rid in cfgs]
    least = (min(n for n, *_ in rows), max(lr for _, lr, *_ in rows))  # the least data at the largest lr
    base = [ok for n, lr, ok, _ in rows if (n, lr) == least]
    other = [ok for n, lr, ok, _ in rows if (n, lr) != least]
    word = "reproduced" if any(other) and not any(base) else "not reproduced"
    return word, "final test accuracy (data, lr): " + ", ".join(f"({n:g}, {lr:g}) {_fmt([a])}" for n, lr, _, a in rows)


def _check_warmup(store, rep):
    rows = [(run_config(store.get(r["run_id"])).train.warmup_steps, r["plateau"], *_learned(store, r["run_id"]))
            for r in rep.data.runs]
    warm = [(pl, ok) for w, pl, ok, _ in rows if w > 0]
    cold = [(pl, ok) for w, pl, ok, _ in rows if w == 0]
    word = ("reproduced" if any(ok for _, ok in warm) and not any(ok for _, ok in cold)
            else "in kind" if sum(pl is not None for pl, _ in warm) > sum(pl is not None for pl, _ in cold)
            else "not reproduced")
    return word, (f"with warm-up {sum(ok for _, ok in warm)} of {len(warm)} end learned, "
                  f"{sum(pl is not None for pl, _ in warm)} reach 0.5; without {sum(ok for _, ok in cold)} of "
                  f"{len(cold)} end learned, {sum(pl is not None for pl, _ in cold)} reach 0.5")


NEMBD = Claim("recall emerges only for a middle range of N", _check_blog6_nembd)
N80 = Claim("N = 80 learns with more data or a smaller lr", _check_blog6_n80)
WARMUP = Claim("a warm-up keeps large N stable while recall forms", _check_warmup)

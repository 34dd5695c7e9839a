"""The three task generators: statistics of the data, the documented decisions, seeding and devices."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_tui.presets.schema import RunConfig
from sparse_tui.tasks import make_task
from sparse_tui.tasks import recall as recall_mod
from sparse_tui.tasks.linreg import LinearRegression
from sparse_tui.tasks.nearest import NearestToken, nearest_index
from sparse_tui.tasks.recall import AssociativeRecall

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def task_of(seed: int = 0, device: str = "cpu", **task):
    return make_task(RunConfig.model_validate({"task": task, "seed": seed}), device)


def linreg(**kw):
    seed = kw.pop("seed", 0)
    return task_of(seed, kw.pop("device", "cpu"), kind="linreg", **kw)


def recall(**kw):
    seed = kw.pop("seed", 0)
    return task_of(seed, kw.pop("device", "cpu"), kind="recall", **kw)


def nearest(**kw):
    seed = kw.pop("seed", 0)
    return task_of(seed, kw.pop("device", "cpu"), kind="nearest", **kw)


def zero_model_loss(batch) -> float:
    return float(0.5 * (batch.y**2).sum(-1).mean())


# ------------------------------------------------------------------------------------------------------------------
# make_task
# ------------------------------------------------------------------------------------------------------------------


def test_make_task_dispatches_on_kind_and_sets_shapes():
    t = linreg(d=8, T=20, indicator=True)
    assert isinstance(t, LinearRegression)
    assert (t.kind, t.classification, t.seq_len, t.in_dim, t.out_dim, t.vocab_size) == ("linreg", False, 20, 9, 8, None)
    assert linreg(d=8, T=20).in_dim == 8
    r = recall(n_tokens=16, n_pairs=5)
    assert isinstance(r, AssociativeRecall)
    assert (r.kind, r.classification, r.seq_len) == ("recall", True, 11)
    assert (r.vocab_size, r.out_dim, r.in_dim) == (16, 16, None)
    n = nearest(vocab=12, context=4)
    assert isinstance(n, NearestToken)
    assert (n.kind, n.classification, n.seq_len) == ("nearest", True, 4)
    assert (n.vocab_size, n.out_dim, n.in_dim) == (12, 12, None)


# ------------------------------------------------------------------------------------------------------------------
# linreg
# ------------------------------------------------------------------------------------------------------------------


def test_linreg_token_and_w_star_statistics():
    d = 16
    t = linreg(d=d, T=64, B=1, position="last")
    b = t.train_batch(2000)
    assert b.x.shape == (2000, 64, d) and b.x.dtype == torch.float32
    tokens = b.x[~b.relevant]  # the irrelevant tokens: 2000 * 63 * 16 numbers
    assert abs(float(tokens.mean())) < 0.005
    assert float(tokens.var()) * d == pytest.approx(1.0, abs=0.02)
    assert float((b.x**2).sum(-1).mean()) == pytest.approx(1.0, abs=0.02)  # E||x||^2 = 1

    d = 64
    w = linreg(d=d, T=8, seed=3).w_star
    assert w.shape == (d, d)
    assert abs(float(w.mean())) < 0.01
    assert float(w.var()) * d == pytest.approx(1.0, abs=0.1)


@pytest.mark.parametrize("seed", [0, 1])
def test_linreg_zero_model_loss_is_one_half(seed):
    d = 64
    t = linreg(d=d, T=16, seed=seed)
    expected = 0.5 * float((t.w_star**2).sum()) / d  # E 0.5 ||W* x||^2 for this W*; 0.5 +- 2.2% over runs
    assert expected == pytest.approx(0.5, abs=0.05)
    for b in (t.test_batch(4000), t.train_batch(4000)):
        assert zero_model_loss(b) == pytest.approx(0.5, abs=0.05)
        assert zero_model_loss(b) == pytest.approx(expected, rel=0.03)  # std of the estimate ~0.3%


@pytest.mark.parametrize("position", ["last", "fixed", "random"])
@pytest.mark.parametrize("indicator", [False, True])
def test_linreg_relevant_tokens_and_targets(position, indicator):
    d, T, B, N = 6, 12, 3, 500
    t = linreg(d=d, T=T, B=B, p=0.3, position=position, indicator=indicator)
    b = t.train_batch(N)
    assert b.relevant.dtype == torch.bool and b.relevant.shape == (N, T)
    assert b.copy_q is None and b.copy_k is None
    assert (b.relevant.sum(1) == B).all()
    xs = b.x[..., :d]
    rel = xs[b.relevant].view(N, B, d)  # row-major: each row's B relevant tokens
    assert torch.equal(rel, rel[:, :1].expand(N, B, d))  # the B copies are one vector
    x_rel = rel[:, 0]
    torch.testing.assert_close(b.y, x_rel @ t.w_star.T)
    # irrelevant tokens are not copies of the relevant one
    assert not (xs[~b.relevant].view(N, T - B, d).unsqueeze(1) == x_rel[:, None, None]).all(-1).any()
    if indicator:
        assert b.x.shape == (N, T, d + 1)
        assert torch.equal(b.x[..., d], b.relevant.float())
    else:
        assert b.x.shape == (N, T, d)
    pos = b.relevant.nonzero()[:, 1].view(N, B)
    if position == "last":
        assert (pos == torch.arange(T - B, T)).all()
    elif position == "fixed":
        assert (pos == pos[:1]).all()  # the same B positions in every row ...
        assert torch.equal(pos[0], t.positions.sort().values)
        assert torch.equal(t.train_batch(10).relevant, b.relevant[:10])  # ... and every batch
        assert linreg(d=d, T=T, B=B, position="fixed").positions.tolist() == t.positions.tolist()  # same seed
    else:
        # resampled per sequence: 500 uniform draws from the C(12, 3) = 220 position sets hit 220 (1 - e^(-500/220))
        # ~= 197 distinct ones (std ~4)
        assert len({tuple(r) for r in pos.tolist()}) > 180
        # each position is equally likely: mean position (T-1)/2 = 5.5, std of the mean ~0.1
        assert float(pos.float().mean()) == pytest.approx((T - 1) / 2, abs=0.5)


def test_linreg_fixed_positions_differ_between_seeds_and_w_star_is_per_seed_d_and_T():
    a = linreg(d=4, T=256, B=4, position="fixed", seed=0)
    c = linreg(d=4, T=256, B=4, position="fixed", seed=1)
    assert a.positions.tolist() != c.positions.tolist()
    assert not torch.equal(a.w_star, c.w_star)
    # W* is drawn per (seed, d, T) (issue 18): another T is another draw ...
    assert not torch.equal(a.w_star, linreg(d=4, T=9, position="fixed", B=4, seed=0).w_star)
    # ... while B, p, the position rule and the indicator keep it (common random numbers along those sweeps)
    same = linreg(d=4, T=256, B=2, p=0.5, position="random", indicator=True, seed=0)
    assert torch.equal(a.w_star, same.w_star)


@pytest.mark.parametrize("T,B", [(2, 1), (3, 2), (5, 1), (64, 4)])
def test_linreg_fixed_position_is_never_the_readout_position(T, B):
    """The Transformer reads out at the last position, where the skip connection would solve the task without
    attention (issue 18): 'fixed' draws its positions among the first T - 1, for every seed."""
    seen = set()
    for seed in range(60):
        t = linreg(d=3, T=T, B=B, position="fixed", seed=seed)
        pos = t.positions.tolist()
        assert len(set(pos)) == B and all(0 <= q <= T - 2 for q in pos)
        seen.update(pos)
        b = t.train_batch(8)
        assert not b.relevant[:, T - 1].any()
        assert not t.test_batch(8).relevant[:, T - 1].any()
    assert seen == set(range(T - 1)) if T <= 5 else len(seen) > 20  # every allowed position is drawn


def test_linreg_fixed_position_needs_a_position_before_the_readout():
    from sparse_tui.presets.errors import PresetError
    from sparse_tui.presets.loading import validate_preset_data

    with pytest.raises(PresetError) as e:
        validate_preset_data({"task": {"kind": "linreg", "d": 2, "T": 4, "B": 4, "position": "fixed"},
                              "model": {"kind": "toy"}}, "p.toml")
    assert e.value.lines == ["p.toml: task.B: must be <= T - 1 with position 'fixed' (the last, readout position is "
                             "never drawn)"]
    validate_preset_data({"task": {"kind": "linreg", "d": 2, "T": 4, "B": 4, "position": "random"},
                          "model": {"kind": "toy"}}, "p.toml")  # other rules may use every position


def test_linreg_cross_sample_fraction_and_x_tilde():
    d, p, N = 8, 0.3, 4000
    t = linreg(d=d, T=10, B=2, p=p, position="random")
    assert float(t.x_tilde.norm()) == 1.0
    assert t.x_tilde.tolist() == [1.0] + [0.0] * (d - 1)  # e_1, paper App. A.2
    b = t.train_batch(N)
    x_rel = b.x[b.relevant].view(N, 2, d)[:, 0]
    is_tilde = (x_rel == t.x_tilde).all(-1)
    assert float(is_tilde.float().mean()) == pytest.approx(p, abs=0.03)  # std 0.007
    torch.testing.assert_close(b.y[is_tilde], (t.w_star @ t.x_tilde).expand(int(is_tilde.sum()), d))
    # p = 0: never x~ ; p = 1: always
    assert not (linreg(d=d, T=10, p=0.0).train_batch(500).x == t.x_tilde).all(-1).any()
    b1 = linreg(d=d, T=10, B=3, p=1.0).train_batch(200)
    assert (b1.x[b1.relevant] == t.x_tilde).all()


def test_linreg_random_x_tilde_is_a_seeded_unit_vector_and_changes_nothing_else():
    """x_tilde = "random": x~ on the unit sphere, from its own stream (seed, d), so W*, tokens and which sequences
    carry x~ are those of x_tilde = "e1" (common random numbers); Adam is not rotation invariant (App. A.2 fn. 3)."""
    d, N = 16, 2000
    e1, rnd = (linreg(d=d, T=10, p=0.3, position="random", x_tilde=x) for x in ("e1", "random"))
    assert float(rnd.x_tilde.norm()) == pytest.approx(1.0, abs=1e-6)
    assert int((rnd.x_tilde != 0).sum()) == d  # spread over every coordinate, unlike e_1
    assert torch.equal(rnd.x_tilde, linreg(d=d, T=32, p=0.3, x_tilde="random").x_tilde)  # per (seed, d): not T
    assert not torch.equal(rnd.x_tilde, linreg(d=d, T=10, p=0.3, seed=1, x_tilde="random").x_tilde)
    assert torch.equal(rnd.w_star, e1.w_star)
    a, b = e1.train_batch(N), rnd.train_batch(N)
    is_e1, is_rnd = (a.x == e1.x_tilde).all(-1), (b.x == rnd.x_tilde).all(-1)
    assert torch.equal(is_e1, is_rnd) and 0.25 < float(is_rnd.any(-1).float().mean()) < 0.35
    assert torch.equal(a.x[~is_e1], b.x[~is_rnd])  # every other token is the same
    torch.testing.assert_close(b.y[is_rnd.any(-1)], (rnd.w_star @ rnd.x_tilde).expand(int(is_rnd.any(-1).sum()), d))
    assert torch.equal(e1.test_batch(300).x, rnd.test_batch(300).x)  # the test set has no x~ either way


@pytest.mark.parametrize("position", ["last", "fixed", "random"])
def test_linreg_test_set_has_no_repetition(position):
    d, T, B = 8, 16, 4
    t = linreg(d=d, T=T, B=B, p=0.9, position=position, indicator=True)
    b = t.test_batch(1000)
    assert (b.relevant.sum(1) == 1).all()  # exactly one relevant position (App. D.1)
    assert not (b.x[..., :d] == t.x_tilde).all(-1).any()  # no x~ anywhere
    x_rel = b.x[..., :d][b.relevant]
    torch.testing.assert_close(b.y, x_rel @ t.w_star.T)
    assert torch.equal(b.x[..., d], b.relevant.float())
    pos = b.relevant.float().argmax(1)
    if position == "last":
        assert (pos == T - 1).all()  # y* = W* x_T
    elif position == "fixed":
        assert (pos == t.positions[0]).all()
    else:
        assert len(set(pos.tolist())) == T
    # E 0.5 ||W* x||^2 = 0.5 ||W*||_F^2 / d for this run's W* (~0.5, but d = 8 leaves it +-18% from 0.5)
    assert zero_model_loss(b) == pytest.approx(0.5 * float((t.w_star**2).sum()) / d, rel=0.08)

    # test_repetition keeps B copies, still without x~
    tr = linreg(d=d, T=T, B=B, p=0.9, position=position, test_repetition=True).test_batch(500)
    assert (tr.relevant.sum(1) == B).all()
    assert not (tr.x == t.x_tilde).all(-1).any()
    if position == "last":
        assert tr.relevant[:, T - B :].all()


def test_linreg_indicator_does_not_change_the_tokens():
    a = linreg(d=5, T=7, B=2, p=0.4, position="random", indicator=False, seed=4)
    c = linreg(d=5, T=7, B=2, p=0.4, position="random", indicator=True, seed=4)
    ba, bc = a.train_batch(64), c.train_batch(64)
    assert torch.equal(ba.x, bc.x[..., :5]) and torch.equal(ba.y, bc.y)
    assert torch.equal(a.test_batch(32).x, c.test_batch(32).x[..., :5])


def test_linreg_large_batch_generated_in_chunks_is_consistent():
    # T * d above the chunk budget is not needed to exercise chunking: several sequences per chunk vs one per chunk
    import sparse_tui.tasks.linreg as lin

    t = linreg(d=4, T=8, B=2, position="random", indicator=True)
    old = lin._CHUNK_ELEMENTS
    try:
        lin._CHUNK_ELEMENTS = 4 * 8 * 3  # 3 sequences per chunk
        b = t.test_batch(10)
    finally:
        lin._CHUNK_ELEMENTS = old
    assert (b.relevant.sum(1) == 1).all()
    torch.testing.assert_close(b.y, b.x[..., :4][b.relevant] @ t.w_star.T)
    assert float(b.x[..., :4][~b.relevant].abs().min()) > 0  # every token was filled


# ------------------------------------------------------------------------------------------------------------------
# recall
# ------------------------------------------------------------------------------------------------------------------


def decode(b, n_pairs):
    keys, vals, q = b.x[:, 0 : 2 * n_pairs : 2], b.x[:, 1 : 2 * n_pairs : 2], b.x[:, -1]
    return keys, vals, q, keys == q[:, None]


def check_recall_batch(b, V, P, injective=True):
    """Structural checks every recall batch must pass; returns the number of query slots per row. ``injective``:
    values = 'permutation' (distinct keys have distinct values); for 'uniform' only same key => same value."""
    N = len(b)
    assert b.x.shape == (N, 2 * P + 1) and b.x.dtype == torch.long and b.y.shape == (N,)
    assert int(b.x.min()) >= 0 and int(b.x.max()) < V
    keys, vals, q, match = decode(b, P)
    count = match.sum(1)
    assert (count >= 1).all()  # always answerable
    # target = the value bound to the query key, wherever the query pair appears
    assert (vals[match] == b.y.repeat_interleave(count)).all()
    # relevant = exactly the value positions of the query's pairs
    assert not b.relevant[:, 0::2].any()
    assert torch.equal(b.relevant[:, 1::2], match)
    # keys other than the query are distinct and differ from the query
    counts = torch.zeros(N, V, dtype=torch.long).scatter_add_(1, keys, torch.ones_like(keys))
    assert torch.equal(counts.gather(1, q[:, None]).squeeze(1), count)
    counts.scatter_(1, q[:, None], 0)
    assert int(counts.max()) <= 1
    # a mapping: same key => same value; injective (permutation): same key <=> same value, within each context
    same_k = keys[:, :, None] == keys[:, None, :]
    same_v = vals[:, :, None] == vals[:, None, :]
    assert not (same_k & ~same_v).any()
    if injective:
        assert torch.equal(same_k, same_v)
    # copy step: copy_q = first relevant value, copy_k its key
    first = match.float().argmax(1)
    assert torch.equal(b.copy_q, 2 * first + 1) and torch.equal(b.copy_k, b.copy_q - 1)
    rows = torch.arange(N)
    assert (b.x[rows, b.copy_q] == b.y).all() and (b.x[rows, b.copy_k] == q).all()
    return count


@pytest.mark.parametrize("B", [1.0, 2.5, 3.0])
def test_recall_in_context_repetition_mean_is_B(B):
    V, P, N = 32, 16, 4000
    b = recall(n_tokens=V, n_pairs=P, B=B).train_batch(N)
    count = check_recall_batch(b, V, P)
    if B == 1.0:
        assert (count == 1).all()
    else:
        # count - 1 ~ Binomial(P-1, (B-1)/(P-1)): std of the mean <= 0.02
        assert float(count.float().mean()) == pytest.approx(B, abs=0.1)
        assert int(count.max()) > 1


def test_recall_query_slot_is_uniform():
    P, N = 8, 4000
    b = recall(n_tokens=16, n_pairs=P, B=1.0).train_batch(N)
    slot_freq = torch.bincount(b.relevant[:, 1::2].float().argmax(1), minlength=P).float() / N
    assert float((slot_freq - 1 / P).abs().max()) < 0.03


def test_recall_mapping_is_a_fresh_permutation_per_sequence():
    V, P, N = 8, 8, 3000
    b = recall(n_tokens=V, n_pairs=P, B=1.0).train_batch(N)
    check_recall_batch(b, V, P)
    keys, vals, _, _ = decode(b, P)
    # with n_pairs = n_tokens every key appears once, so the context spells out the whole permutation
    assert (keys.sort(1).values == torch.arange(V)).all()
    perm = torch.empty(N, V, dtype=torch.long).scatter_(1, keys, vals)
    assert (perm.sort(1).values == torch.arange(V)).all()  # a bijection
    # a fresh permutation per sequence: 3000 draws from 8! = 40320 leave ~2890 distinct ones (birthday collisions)
    assert len({tuple(r) for r in perm.tolist()}) > 2800
    # uniform: P(key k -> value v) = 1/V
    freq = torch.zeros(V, V).index_put_((keys.flatten(), vals.flatten()), torch.ones(N * V), accumulate=True) / N
    assert float((freq - 1 / V).abs().max()) < 0.03


def test_recall_values_default_is_the_permutation_of_app_c1():
    """values = 'permutation' (the default): in a 32-pair context over 64 tokens all 32 values are distinct, where
    independent uniform values would repeat in all but ~1e-4 of contexts."""
    V, P, N = 64, 32, 2000
    t = recall(n_tokens=V, n_pairs=P, B=1.0)
    assert t.cfg.values == "permutation"
    b = t.train_batch(N)
    check_recall_batch(b, V, P)
    _, vals, _, _ = decode(b, P)
    assert (vals.sort(1).values.diff(dim=1) != 0).all()
    # same seed, explicit 'permutation': the same data (the default is that mode, not a different stream)
    assert torch.equal(recall(n_tokens=V, n_pairs=P, B=1.0, values="permutation").train_batch(N).x, b.x)


@pytest.mark.parametrize("B", [1.0, 3.0])
def test_recall_uniform_values_repeat_at_the_birthday_rate(B):
    """values = 'uniform': each key's value ~ U(vocabulary), independently. Among P values the expected number of
    equal pairs is C(P, 2) / V (7.75 for V = 64, P = 32) and P(all distinct) = prod_i (1 - i/V) ~ 5e-5."""
    V, P, N = 64, 32, 4000
    t = recall(n_tokens=V, n_pairs=P, B=B, values="uniform")
    b = t.train_batch(N)
    count = check_recall_batch(b, V, P, injective=False)
    keys, vals, _, match = decode(b, P)
    # count equal value pairs among the distinct keys of each context (a repeated query pair is one key)
    first = torch.ones_like(match)
    first[match] = False
    first.scatter_(1, match.float().argmax(1, keepdim=True), True)  # keep one slot of the query pair
    distinct = first.sum(1)
    v = vals.masked_fill(~first, -1)
    eq = (v[:, :, None] == v[:, None, :]) & (v[:, :, None] >= 0)
    pairs = (eq.sum((1, 2)) - distinct).float() / 2
    expected = (distinct * (distinct - 1) / 2).float() / V
    # mean over 4000 contexts: std of the mean ~ sqrt(7.75 / 4000) ~ 0.045
    assert float(pairs.mean()) == pytest.approx(float(expected.mean()), abs=0.2)
    assert float((pairs == 0).float().mean()) < 0.01  # all-distinct contexts are rare
    # marginal: every token is a value with probability 1/V; chi-square with V - 1 = 63 degrees of freedom (mean 63,
    # std 11.2; 120 is 5 std out)
    def chi2(t):
        obs = torch.bincount(t.flatten(), minlength=V).float()
        exp = t.numel() / V
        return float(((obs - exp) ** 2 / exp).sum())

    assert chi2(vals) < 120
    assert chi2(b.y) < 120  # the target is uniform too (bound to its key: check_recall_batch)
    if B == 3.0:
        assert int(count.max()) > 1
    # the test set (B = 1, p = 0) uses the same value rule
    tb = t.test_batch(1024)
    check_recall_batch(tb, V, P, injective=False)
    _, tvals, _, _ = decode(tb, P)
    assert float((tvals.sort(1).values.diff(dim=1) == 0).any(1).float().mean()) > 0.99


def test_recall_values_key_rejects_unknown_modes():
    from sparse_tui.presets.errors import PresetError
    from sparse_tui.presets.loading import validate_preset_data

    with pytest.raises(PresetError, match=r"x.toml: task.values: must be one of permutation or uniform$"):
        validate_preset_data({"task": {"kind": "recall", "values": "random"}}, "x.toml")


def test_recall_query_distribution_cross_sample_repetition():
    V, P, N, p = 16, 4, 4000, 0.3
    t = recall(n_tokens=V, n_pairs=P, p=p)
    rep = t.repeated_tokens
    assert rep.shape == (2,) and rep[0] != rep[1]
    b = t.train_batch(N)
    check_recall_batch(b, V, P)
    q = b.x[:, -1]
    is_rep = (q[:, None] == rep).any(1)
    assert float(is_rep.float().mean()) == pytest.approx(p + 2 * (1 - p) / V, abs=0.035)  # 0.3875, std 0.008
    assert float((q[is_rep] == rep[0]).float().mean()) == pytest.approx(0.5, abs=0.05)
    # the other tokens share the rest uniformly: (1-p)/V each
    other = torch.bincount(q[~is_rep], minlength=V).float() / N
    other[rep] = (1 - p) / V
    assert float((other - (1 - p) / V).abs().max()) < 0.02
    # the 2 repeated tokens come from the seed
    assert recall(n_tokens=V, n_pairs=P, p=p).repeated_tokens.tolist() == rep.tolist()  # same seed
    assert any(recall(n_tokens=V, n_pairs=P, seed=s).repeated_tokens.tolist() != rep.tolist() for s in (11, 12, 13))


def test_recall_test_set_has_no_repetition():
    V, P, N, p = 16, 6, 4000, 0.8
    t = recall(n_tokens=V, n_pairs=P, B=4.0, p=p)
    b = t.test_batch(N)
    count = check_recall_batch(b, V, P)
    assert (count == 1).all()  # B = 1: exactly one occurrence
    q = b.x[:, -1]
    # no p-bias: the repeated tokens are queried at the uniform rate 2/V = 0.125 (training: 0.825)
    assert float((q[:, None] == t.repeated_tokens).any(1).float().mean()) == pytest.approx(2 / V, abs=0.025)
    tr = t.train_batch(N)
    assert float((tr.x[:, -1, None] == t.repeated_tokens).any(1).float().mean()) == pytest.approx(
        p + 2 * (1 - p) / V, abs=0.03
    )


def test_recall_edge_cases():
    b = recall(n_tokens=4, n_pairs=1, B=1.0).train_batch(200)  # L = 3: [k v q], k == q
    check_recall_batch(b, 4, 1)
    assert (b.x[:, 0] == b.x[:, 2]).all()
    b = recall(n_tokens=6, n_pairs=6, B=6.0).train_batch(50)  # every slot holds the query pair
    assert (check_recall_batch(b, 6, 6) == 6).all()
    b = recall(n_tokens=6, n_pairs=6, B=2.0).train_batch(500)  # n_pairs = n_tokens with repetition
    check_recall_batch(b, 6, 6)


def test_recall_fixed_training_set():
    V, P, size = 16, 4, 50
    t = recall(n_tokens=V, n_pairs=P, B=2.0, p=0.5, train_size=size)
    assert t.train_set is not None and len(t.train_set) == size
    check_recall_batch(t.train_set, V, P)
    draws = [t.train_batch(100) for _ in range(20)]
    x = torch.cat([b.x for b in draws])
    assert torch.unique(x, dim=0).shape[0] == size  # only the 50 sequences, all of them drawn
    assert torch.equal(torch.unique(x, dim=0), torch.unique(t.train_set.x, dim=0))
    check_recall_batch(draws[0], V, P)  # y, relevant, copy_q, copy_k are indexed with x
    # drawn with replacement: a batch of 100 from 50 repeats sequences
    assert torch.unique(draws[0].x, dim=0).shape[0] < 100
    # the same seed gives the same training set; online sampling never repeats at this size
    assert torch.equal(recall(n_tokens=V, n_pairs=P, B=2.0, p=0.5, train_size=size).train_set.x, t.train_set.x)
    online = recall(n_tokens=V, n_pairs=P, B=2.0, p=0.5).train_batch(2000).x
    assert torch.unique(online, dim=0).shape[0] > 1900


def test_recall_chunked_generation(monkeypatch):
    monkeypatch.setattr(recall_mod, "_CHUNK", 7)
    t = recall(n_tokens=12, n_pairs=5, B=2.0, p=0.3, train_size=30)
    assert len(t.train_set) == 30
    check_recall_batch(t.train_set, 12, 5)
    b = t.test_batch(20)
    assert (check_recall_batch(b, 12, 5) == 1).all()


# ------------------------------------------------------------------------------------------------------------------
# nearest
# ------------------------------------------------------------------------------------------------------------------


def test_nearest_blog_example():
    assert nearest_index(torch.tensor([[1, 5, 10, 6]])).tolist() == [1]  # [1][5][10][6] -> [5]
    assert nearest_index(torch.tensor([[1, 5, 6]])).tolist() == [1]  # [1][5][6] -> [5]
    x = torch.tensor([[8, 4, 6], [4, 8, 6]])  # 4 and 8 are both 2 away from 6
    assert nearest_index(x, "lower").tolist() == [1, 0]
    assert nearest_index(x, "earlier").tolist() == [0, 0]


@pytest.mark.parametrize("tie_break", ["lower", "earlier"])
def test_nearest_target_is_closest_and_ties_follow_the_rule(tie_break):
    V, C, N = 10, 4, 3000
    t = nearest(vocab=V, context=C, tie_break=tie_break)
    b = t.train_batch(N)
    assert b.x.shape == (N, C) and b.x.dtype == torch.long and b.y.shape == (N,)
    assert int(b.x.min()) >= 0 and int(b.x.max()) < V
    assert (b.x.sort(1).values.diff(dim=1) > 0).all()  # distinct tokens
    last, cand = b.x[:, -1], b.x[:, :-1]
    dist = (cand - last[:, None]).abs()
    best = dist.min(1).values
    assert ((b.y - last).abs() == best).all()  # the target is a closest token
    assert (b.relevant.sum(1) == 1).all() and not b.relevant[:, -1].any()
    assert (b.x[b.relevant] == b.y).all()
    ties = (dist == best[:, None]).sum(1) == 2
    assert int(ties.sum()) > 100  # ties are common at V = 10
    tie_pos = (dist == best[:, None]).float()
    if tie_break == "lower":
        assert (b.y[ties] < last[ties]).all()
    else:
        assert (b.relevant.float().argmax(1)[ties] == tie_pos.argmax(1)[ties]).all()  # the earlier of the two
    # tokens are uniform over the vocabulary at every position
    freq = torch.bincount(b.x.flatten(), minlength=V).float() / (N * C)
    assert float((freq - 1 / V).abs().max()) < 0.02


def test_nearest_tie_rules_share_the_data_and_differ_only_on_ties():
    a = nearest(vocab=10, context=4, tie_break="lower", seed=5).train_batch(2000)
    e = nearest(vocab=10, context=4, tie_break="earlier", seed=5).train_batch(2000)
    assert torch.equal(a.x, e.x)
    differ = a.y != e.y
    assert 0 < int(differ.sum()) < 2000
    dist = (a.x[:, :-1] - a.x[:, -1:]).abs()
    n_closest = (dist == dist.min(1, keepdim=True).values).sum(1)
    assert (n_closest[differ] == 2).all()


# ------------------------------------------------------------------------------------------------------------------
# seeding, test-set caching, devices (all tasks)
# ------------------------------------------------------------------------------------------------------------------

KINDS = {
    "linreg": dict(kind="linreg", d=4, T=10, B=2, p=0.5, position="random", indicator=True),
    "recall": dict(kind="recall", n_tokens=16, n_pairs=4, B=2.0, p=0.5),
    "recall_fixed": dict(kind="recall", n_tokens=16, n_pairs=4, B=2.0, p=0.5, train_size=64),
    "nearest": dict(kind="nearest", vocab=20, context=5),
}


def fields(b):
    return [t for t in (b.x, b.y, b.relevant, b.copy_q, b.copy_k) if t is not None]


def same(b1, b2) -> bool:
    return all(torch.equal(u, v) for u, v in zip(fields(b1), fields(b2), strict=True))


@pytest.mark.parametrize("name", list(KINDS))
def test_same_seed_same_batches_different_seed_different(name):
    a, c, other = (task_of(s, "cpu", **KINDS[name]) for s in (7, 7, 8))
    for _ in range(3):
        ba, bc = a.train_batch(32), c.train_batch(32)
        assert same(ba, bc)
    assert not same(a.train_batch(32), a.train_batch(32))  # batches move on
    assert not same(task_of(7, "cpu", **KINDS[name]).train_batch(32), other.train_batch(32))
    assert same(a.test_batch(64), c.test_batch(64))
    assert not same(a.test_batch(64), other.test_batch(64))


@pytest.mark.parametrize("name", list(KINDS))
def test_test_batch_is_fixed_and_independent_of_training_draws(name):
    t = task_of(1, "cpu", **KINDS[name])
    first = t.test_batch(100)
    snapshot = [f.clone() for f in fields(first)]
    for _ in range(3):
        t.train_batch(50)
    again = t.test_batch(100)
    assert all(torch.equal(u, v) for u, v in zip(snapshot, fields(again), strict=True))
    assert same(again, task_of(1, "cpu", **KINDS[name]).test_batch(100))  # fresh task, no training draws
    assert not same(t.test_batch(100), task_of(1, "cpu", **KINDS[name]).train_batch(100))  # test != train
    assert len(t.test_batch(30)) == 30


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(KINDS))
def test_tensors_live_on_the_requested_device(name, device):
    t = task_of(0, device, **KINDS[name])
    assert t.device == torch.device(device)
    for b in (t.train_batch(16), t.test_batch(16)):
        for f in fields(b):
            assert f.device.type == torch.device(device).type
    if name == "linreg":
        assert t.w_star.device.type == t.x_tilde.device.type == torch.device(device).type
    if name.startswith("recall"):
        assert t.repeated_tokens.device.type == torch.device(device).type


def test_w_star_is_the_same_on_every_device():
    """The promise across devices: per-run constants (W*, x~, fixed positions, recall's repeated tokens) are drawn
    on a CPU generator and copied, so they are bit-for-bit the same on every device. What is *not* promised is
    that arithmetic on them agrees bit-for-bit: a reduction such as W*.var() sums in a different order on a GPU
    (parallel tree) than on a CPU, so it agrees to float32 rounding only (this assertion used equality to 1e-9 and
    failed on CUDA). Random batches come from per-device generators and differ between devices by design
    (tasks/_common.py: reproducibility is per device)."""
    dev = DEVICES[-1]
    a, cpu = linreg(d=8, T=4, seed=2, device=dev), linreg(d=8, T=4, seed=2)
    assert torch.equal(a.w_star.cpu(), cpu.w_star) and torch.equal(a.x_tilde.cpu(), cpu.x_tilde)
    assert torch.equal(a.w_star.cpu().var(), cpu.w_star.var())  # the same numbers, reduced on one device: equal
    assert math.isclose(float(a.w_star.var()), float(cpu.w_star.var()), rel_tol=1e-5)  # reduced on each device
    fixed = linreg(d=8, T=6, seed=2, device=dev, position="fixed", B=2)
    assert torch.equal(fixed.positions.cpu(), linreg(d=8, T=6, seed=2, position="fixed", B=2).positions)


@pytest.mark.parametrize("task", [
    {"kind": "recall", "n_tokens": 8, "n_pairs": 3, "B": 2.0, "p": 0.3},
    {"kind": "recall", "n_tokens": 8, "n_pairs": 3, "train_size": 50},
    {"kind": "nearest", "vocab": 8, "context": 4},
    {"kind": "linreg", "d": 4, "T": 8},
])
def test_training_batches_without_meta_are_the_same_draws(task):
    """The training step asks for x and y only (``meta=False``: no relevant mask, no probe positions computed):
    the same sequences and targets, and the stream ends in the same place."""
    from sparse_tui.presets.schema import RunConfig
    from sparse_tui.tasks import make_task

    cfg = RunConfig.model_validate({"task": task, "model": {"kind": "transformer"}})
    a, b = make_task(cfg, "cpu"), make_task(cfg, "cpu")
    for _ in range(3):
        full, lean = a.train_batch(16), b.train_batch(16, meta=False)
        assert torch.equal(full.x, lean.x) and torch.equal(full.y, lean.y)
        if task["kind"] != "linreg":
            assert lean.relevant is None and lean.copy_q is None
    assert torch.equal(a._train_gen.get_state(), b._train_gen.get_state())

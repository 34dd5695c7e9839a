"""model.readout_self_key = false: a strictly causal readout. In the last layer the read-out query (the last position)
gives its own position exactly 0 attention, on every kernel and with or without ``readout_only``; every other query
row keeps the mask it has by default. The deciding test of the blog "Sparse attention 3 – inefficiency of extracting
similar content"'s Euclidean-attention proposal (docs/REPRODUCTION.md) needs the current token out of its own keys.
The stacked model's equivalence is in tests/test_stack.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_models import assert_kernels_agree

from sparse_tui.models import build_model
from sparse_tui.models.transformer import Transformer
from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.presets.schema import TransformerModel
from sparse_tui.tasks import make_task

ROOT = Path(__file__).resolve().parent.parent
TASK = SimpleNamespace(seq_len=6, out_dim=5, vocab_size=7, in_dim=None)


def pair(causal: bool, attention: str, **kw) -> tuple[Transformer, Transformer]:
    """The same seeded model twice, float64: default readout and strictly causal readout."""
    args = dict(input="embedding", n_layers=2, n_heads=2, d_model=8, d_qk=3, mlp=True, mlp_factor=2,
                layernorm=True, causal=causal, attention=attention, init="torch")
    args.update(kw)
    models = []
    for self_key in (True, False):
        cfg = TransformerModel(**args, readout_self_key=self_key)
        models.append(Transformer(cfg, TASK, generator=torch.Generator().manual_seed(5)).double())
    return models[0], models[1]


X = torch.randint(0, 7, (4, 6), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("attention", ["dot", "euclidean"])
def test_the_readout_gives_its_own_position_exactly_zero(causal, attention):
    default, strict = pair(causal, attention)
    for readout_only in (True, False):
        default.readout_only = strict.readout_only = readout_only
        _, a_def = default(X)
        out, a = strict(X)
        assert a[-1].shape == a_def[-1].shape
        assert torch.equal(a[-1][:, :, -1, -1], torch.zeros(4, 2, dtype=torch.float64))  # exactly 0
        assert (a[-1][:, :, -1, :-1] > 0).all()  # every other position is still seen
        torch.testing.assert_close(a[-1][:, :, -1].sum(-1), torch.ones(4, 2, dtype=torch.float64))
        torch.testing.assert_close(a[0], a_def[0], rtol=0, atol=0)  # earlier layers: untouched
        # the other query rows of the last layer keep their mask (position 0 still sees itself)
        torch.testing.assert_close(a[-1][:, :, :-1], a_def[-1][:, :, :-1], rtol=0, atol=0)
        if readout_only:
            out_ref = out
        torch.testing.assert_close(out, out_ref, rtol=1e-12, atol=1e-12)
    assert not torch.allclose(default(X)[0], out)  # it changes the output


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("attention", ["dot", "euclidean"])
def test_every_kernel_gives_the_same_loss_and_gradients(causal, attention):
    """The hand-written probabilities path and the kernels of the stack of one that trains it (SDPA,
    _AttentionCore): one function."""
    _, model = pair(causal, attention)
    assert_kernels_agree(model, X)


def test_one_layer_readout_is_the_default_row_renormalised_over_the_other_positions():
    """One layer: the strict readout's weights are the default readout's weights on positions 0..L-2 divided by
    their sum (a softmax with one score removed)."""
    default, strict = pair(True, "euclidean", n_layers=1, mlp=False, layernorm=False, residual=False,
                           pos_enc="none")
    a_def, a = default(X)[1][0][:, :, -1], strict(X)[1][0][:, :, -1]
    want = a_def[..., :-1] / a_def[..., :-1].sum(-1, keepdim=True)
    torch.testing.assert_close(a[..., :-1], want, rtol=1e-12, atol=0)


def _specs(*sets: str):
    return expand(load_preset(ROOT / "presets" / "blog3_euclidean_ordered.toml",
                              ["train.device=cpu", "eval.test_size=64", *sets]))


def test_the_preset_field_reaches_the_model_and_separates_stacks():
    from sparse_tui.training.grouping import group_key

    on, off = (_specs(f"model.readout_self_key={v}", "sweep={}")[0].config for v in ("true", "false"))
    assert on.model.readout_self_key and not off.model.readout_self_key
    model = build_model(off, make_task(off, "cpu"))
    assert not model.cfg.readout_self_key and build_model(on, make_task(on, "cpu")).cfg.readout_self_key
    _, attn = model(make_task(off, "cpu").test_batch(8).x)
    assert torch.equal(attn[-1][:, :, -1, -1], torch.zeros(8, 1))
    assert group_key(on) != group_key(off)  # never one stack: the mask is the stack's


def test_the_default_is_todays_readout_and_a_bad_value_is_refused():
    assert _specs("sweep={}")[0].config.model.readout_self_key is True
    with pytest.raises(PresetError, match="model.readout_self_key"):
        _specs("model.readout_self_key=sometimes")


def test_the_nearest_report_says_whether_the_readout_sees_its_own_token(tmp_path):
    from sparse_tui.atlas import ENTRIES
    from sparse_tui.reports import library
    from sparse_tui.store import RunStore

    specs = [s for s in _specs() if s.seed == 0 and s.config.model.attention == "euclidean"]
    assert sorted(s.config.model.readout_self_key for s in specs) == [False, True]  # the preset sweeps it
    store = RunStore(tmp_path / "runs")
    _, ids = store.create_runs(specs)
    for spec, rid in zip(specs, ids):
        ppl = 16.0 if spec.config.model.readout_self_key else 1.5
        store.log_metrics_many(rid, [0, 100], {"test/ppl": [32.0, ppl]})
        store.finish(rid, "finished", step=100)
    rep = library.report(store, ENTRIES["euclidean_ordered"], ids)
    assert [(r["self_key"], r["final"]) for r in rep.data.runs] == [(True, 16.0), (False, 1.5)]
    lines = [ln.split() for ln in rep.text.splitlines() if ln.strip().startswith("euclidean ")]
    assert [ln[1] for ln in lines] == ["yes", "no"]

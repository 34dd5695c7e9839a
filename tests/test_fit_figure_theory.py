"""Issue 43: the published fit figure draws the theory's forecast (√d·T/B: slopes d +0.5, T +1, arXiv 2505.17863
App. A.3.2) beside the fitted law and the paper's law: a dash-dotted line per panel at the forecast slope, its slope
in each panel's title, and a legend entry."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tui.conftest import fill_store

from sparse_tui.reports import fitreport
from sparse_tui.store import RunStore


def test_fit_figure_draws_the_theory_forecast(tmp_path):
    pytest.importorskip("matplotlib")
    from sparse_tui.reports.figures import fit_figure

    fill_store(tmp_path / "runs").close()
    store = RunStore(tmp_path / "runs", create=False)
    rep = fitreport.fit_store(store, "d,T", preset="toy-sweep")
    fig = fit_figure.__wrapped__(rep)
    panels = [ax for ax in fig.axes if ax.get_xlabel() in ("d", "T")]
    assert len(panels) == 2
    for ax in panels:
        want = {"d": 0.5, "T": 1.0}[ax.get_xlabel()]
        lines = [ln for ln in ax.get_lines() if ln.get_linestyle() == "-."]
        assert lines, ax.get_xlabel()
        for ln in lines:  # the forecast's slope in log-log, one line per group of the other variable
            x, y = np.asarray(ln.get_xdata(), float), np.asarray(ln.get_ydata(), float)
            slope = (math.log(y[-1]) - math.log(y[0])) / (math.log(x[-1]) - math.log(x[0]))
            assert slope == pytest.approx(want)
        assert f"theory: slope {want:+.2f}" in ax.get_title(loc="left")
    texts = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
    assert any(t.startswith("theory forecast √d·T/B") and "d +0.5" in t and "T +1" in t for t in texts), texts
    store.close()

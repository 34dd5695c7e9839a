"""Issue 30 item 5: ``reproduce`` continues what it interrupted. On 3452e68 a rerun after Ctrl-C trained the
interrupted points again from step 0 as new runs (7 rows for 4 points; 34 for fig1c's 20) and left the interrupted
rows and their checkpoints behind. Now a point whose run was interrupted or failed is continued in its own row:
from its checkpoint when it has one, from step 0 otherwise; the store holds one row per point and seed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import StopAfter

from sparse_tui.lifecycle import runner
from sparse_tui.presets.loading import expand, load_preset
from sparse_tui.store import RunStore
from sparse_tui.training.checkpoint import has_checkpoint

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}

# fig3's CPU preset, made tiny: three points of a linreg Transformer, checkpoints every 10 steps
TINY_FIG3 = """\
name = "paper_fig3_linreg_cpu"
seeds = [0]
[task]
kind = "linreg"
d = 4
T = 8
[model]
kind = "transformer"
n_layers = 1
n_heads = 1
d_model = 16
[train]
lr = 1e-2
batch_size = 8
steps = 40
checkpoint_every = 10
device = "cpu"
[eval]
every = 5
test_size = 16
[sweep]
"task.d" = [4, 6, 8]
"""


def test_reproduce_continues_interrupted_points_in_their_own_rows(tmp_path: Path):
    presets = tmp_path / "presets"
    presets.mkdir()
    (presets / "paper_fig3_linreg_cpu.toml").write_text(TINY_FIG3)
    runs = tmp_path / "runs"
    store = RunStore(runs)
    # what an interrupted `reproduce fig3` leaves: its batch of the preset's runs, one finished, one interrupted at
    # step 22 with its checkpoint, one never started (no checkpoint)
    batch, ids = store.create_runs(expand(load_preset(presets / "paper_fig3_linreg_cpu.toml")))
    runner.work(store, batch, should_stop=StopAfter(41 + 22))
    runner.end_unstarted(store, batch, "interrupted", "never started")
    done, cut, fresh = (store.get(r) for r in ids)
    assert (done.status, cut.status, cut.step, fresh.status) == ("finished", "interrupted", 22, "interrupted")
    assert has_checkpoint(runs, cut.run_id) == 22 and has_checkpoint(runs, fresh.run_id) is None
    # the points the checkpoint continues from are not logged again: remove one to see that
    store.con.execute("DELETE FROM metrics WHERE run_id=? AND name='test/loss' AND step=0", (cut.run_id,))
    store.close()

    r = subprocess.run([sys.executable, "-m", "sparse_tui", "reproduce", "fig3", "--size", "cpu", "--presets-dir",
                        str(presets), "--runs-dir", str(runs)], capture_output=True, text=True, env=ENV, timeout=600)
    assert "Traceback" not in r.stderr, r.stderr
    assert ("fig3 (Fig. 3 left/middle): preset paper_fig3_linreg_cpu (cpu), 3 run(s): 1 already in the store, "
            "2 resumed in their own rows (1 from a checkpoint), 0 to train") in r.stderr, r.stderr
    store = RunStore(runs)
    recs = store.runs()
    assert sorted(x.run_id for x in recs) == sorted(ids)  # one row per point and seed, no new run
    assert all(x.status == "finished" and x.step == 40 for x in recs), [(x.status, x.step) for x in recs]
    steps = store.metrics(cut.run_id)["test/loss"][0]
    assert steps[0] == 5 and steps[-1] == 40  # continued from its checkpoint at 22, not from step 0
    assert store.metrics(fresh.run_id)["test/loss"][0][0] == 0  # retrained from step 0 in its own row
    assert not list((runs / "checkpoints").glob("*.pt"))  # finished: their checkpoints are removed

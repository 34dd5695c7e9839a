"""``sparse-tui doctor``: exits 0 on a healthy CPU, and 1 with the reason when a schedule falls back or fails."""

from __future__ import annotations

from typer.testing import CliRunner

from sparse_tui.cli import app


def test_doctor_on_cpu_exits_0_and_reports_every_schedule():
    res = CliRunner().invoke(app, ["doctor", "--device", "cpu"])
    assert res.exit_code == 0, res.output
    assert "torch " in res.output and "memory:" in res.output
    assert "ok   sequential" in res.output and "ok   stacked" in res.output
    assert "graphed   skipped" in res.output and "all checks passed" in res.output


def test_doctor_fails_when_the_stack_falls_back(monkeypatch):
    from sparse_tui.cli import checks as doctor
    from sparse_tui.training import loop

    real = loop.trial_step

    def no_stacks(prep, *a, **kw):
        if prep.M > 1:
            raise loop.StackFailed("RuntimeError: LSE is not correctly aligned (injected)")
        return real(prep, *a, **kw)

    monkeypatch.setattr(loop, "trial_step", no_stacks)
    monkeypatch.setattr(doctor, "_RUNS", doctor._RUNS[:2])  # two runs are enough here
    lines: list[str] = []
    assert doctor.diagnose("cpu", say=lines.append) == 1
    text = "\n".join(lines)
    assert "ok   sequential" in text and "FAIL stacked" in text and "fell back" in text and "injected" in text
    assert "1 check(s) failed" in text


def test_doctor_on_a_missing_device_fails_cleanly():
    import pytest
    import torch

    from sparse_tui.cli import checks as doctor

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    lines: list[str] = []
    assert doctor.diagnose("cuda", say=lines.append) == 1
    assert lines[0].startswith("FAIL device:")


def test_doctor_says_whether_a_ray_cluster_runs_here(tmp_path, monkeypatch):
    """Information only (the exit status is the training checks'): the Ray line names the cluster ``auto`` would
    join, or why there is none, or that Ray is not installed."""
    import socket
    from importlib import metadata

    from sparse_tui.cli import checks as doctor

    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    try:
        version = metadata.version("ray")
    except metadata.PackageNotFoundError:
        assert doctor.ray_line().startswith("ray: not installed (optional, for --executor ray: pip install")
        return
    assert doctor.ray_line() == (f"ray {version}; --executor ray: --ray-address auto: no Ray cluster runs on this "
                                 "machine (start one with 'ray start --head')")
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"127.0.0.1:{head.getsockname()[1]}"
        (tmp_path / "ray" / "ray_current_cluster").write_text(address)
        assert doctor.ray_line() == f"ray {version}; --executor ray (auto): the cluster at {address} answers"
    monkeypatch.setattr(metadata, "version", lambda name: (_ for _ in ()).throw(metadata.PackageNotFoundError(name)))
    assert doctor.ray_line() == 'ray: not installed (optional, for --executor ray: pip install "sparse-tui[ray]")'

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
    from sparse_tui import doctor
    from sparse_tui.training import loop

    real = loop.trial_step

    def no_stacks(stack, *a, **kw):
        if stack.M > 1:
            raise loop.StackFailed("RuntimeError: LSE is not correctly aligned (injected)")
        return real(stack, *a, **kw)

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

    from sparse_tui import doctor

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    lines: list[str] = []
    assert doctor.diagnose("cuda", say=lines.append) == 1
    assert lines[0].startswith("FAIL device:")

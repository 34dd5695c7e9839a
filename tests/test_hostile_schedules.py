"""Schedules (``task.p`` / ``task.B``) under hostile input (issue 45): NaN in the string form, a long number that
made the number pattern backtrack quadratically, schedules that can never act within the run, and sweep values that
are one schedule written twice. Each case is the issue's shortest reproduction."""

from __future__ import annotations

import pytest
from conftest import TINY_PRESET

from sparse_tui.presets.errors import PresetError
from sparse_tui.presets.loading import load_preset
from sparse_tui.science.repetition import Schedule


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY_PRESET.replace('metric = "test/acc"', 'metric = "test/loss"').replace(
        'mode = "above"', 'mode = "below"'))
    return p


def _refusal(path, *sets: str) -> str:
    with pytest.raises(PresetError) as e:
        load_preset(path, list(sets))
    return "\n".join(e.value.lines) if hasattr(e.value, "lines") else str(e.value)


def test_nan_in_a_schedule_string_is_refused(tiny):
    line = _refusal(tiny, 'task.B="nan -> 1 when plateau"')
    assert "task.B" in line and "nan" in line


@pytest.mark.parametrize("text", ["nan -> 1 when plateau", "0 -> nan when plateau", "steps 0:nan", "steps 0:1 5:NaN",
                                  "1 -> 0 when test/loss <= nan"])
def test_nan_is_refused_wherever_a_schedule_string_has_a_number(text):
    with pytest.raises(ValueError, match="nan"):
        Schedule.model_validate(text)


def test_a_30000_digit_number_is_refused_on_its_length(tiny):
    # Before: `\d+\.?\d*` split the digit run in n ways for each of n positions; 30,000 digits never returned.
    line = _refusal(tiny, f'task.p="steps 0:{"1" * 30000}x"')
    assert "task.p" in line and "too long to be a number" in line and len(line) < 400


def test_a_switch_past_train_steps_is_refused(tiny):
    line = _refusal(tiny, 'task.p="steps 0:0.9 20:0"')
    assert "task.p" in line and "at or past train.steps = 20" in line and "never acts" in line
    load_preset(tiny, ['task.p="steps 0:0.9 19:0"'])  # in force for step 20, the last


def test_stuck_beyond_the_runs_evaluations_is_refused(tiny):
    line = _refusal(tiny, 'task.p="0 -> 0.9 when stuck 99999999999999999999"')
    assert "task.p" in line and "stuck needs K >= 1 evaluations (and fewer than the run has)" in line
    line = _refusal(tiny, 'task.p="0 -> 0.9 when stuck 5"')  # 20 steps, every 5: 4 evaluations after the first
    assert "needs 5 evaluations after the first and the run has 4" in line
    load_preset(tiny, ['task.p="0 -> 0.9 when stuck 4"'])


@pytest.mark.parametrize("cond", ["test/loss <= 1e999", "test/loss >= inf", "test/loss < -inf"])
def test_an_infinite_threshold_is_refused(tiny, cond):
    line = _refusal(tiny, f'task.p="0.9 -> 0 when {cond}"')
    assert "task.p" in line and "finite" in line


def test_a_threshold_outside_its_metrics_range_is_refused(tiny):
    line = _refusal(tiny, 'task.p="0.9 -> 0 when test/acc >= 2"')
    assert "can never hold" in line and "[0, 1]" in line


def test_a_schedule_written_twice_in_a_sweep_is_a_duplicate(tmp_path):
    p = tmp_path / "sw.toml"
    p.write_text(TINY_PRESET.replace('name = "tiny"', 'name = "sw"') +
                 '\n[sweep]\n"task.p" = ["steps 0:0.9 10:0", "steps  0:0.90   10:0.0"]\n')
    line = _refusal(p)
    assert "sweep.task.p" in line and "appears twice" in line

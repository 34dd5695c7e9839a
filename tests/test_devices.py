"""The one device resolver (sparse_tui/base/devices.py): every part of the package resolves a device name through it."""

import pytest
import torch

from sparse_tui.base.devices import DeviceError, resolve
from sparse_tui.executors import ExecutorError, LocalExecutor, local


def test_names_resolve_to_torch_devices():
    assert resolve("cpu") == torch.device("cpu")
    assert resolve(torch.device("cpu")) == torch.device("cpu")
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve("auto").type == want and resolve(None).type == want


def test_a_device_that_is_not_here_is_one_line():
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        resolve("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="cuda:1 requested but CUDA is not available"):
            resolve("cuda:1")
    else:
        with pytest.raises(DeviceError, match=r"this machine has \d+ GPU"):
            resolve(f"cuda:{torch.cuda.device_count()}")


def test_the_tasks_and_the_preflight_ask_the_same_resolver(monkeypatch):
    from sparse_tui.presets.schema import RunConfig
    from sparse_tui.tasks import make_task

    cfg = RunConfig.model_validate({"task": {"kind": "linreg", "d": 2, "T": 4}, "train": {"steps": 1}})
    asked = []

    def spy(want):
        asked.append(want)
        return resolve(want)

    monkeypatch.setattr("sparse_tui.tasks.base.resolve", spy)
    monkeypatch.setattr(local, "resolve", spy)
    assert make_task(cfg, "auto").device == resolve("auto")
    with pytest.raises(ExecutorError, match="--device: unknown device 'tpu'"):
        LocalExecutor().preflight([type("S", (), {"config": cfg})()], device="tpu", source="preset")
    assert asked == ["auto", "tpu"]

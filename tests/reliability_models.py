"""Models that misbehave, for the contract tests (tests/test_contract_*.py)."""

from __future__ import annotations

import os
import sys
import signal
import time

import torch
from torch import nn


class Hang(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(0.05)


class NoneOut(nn.Module):
    def forward(self, x):
        return None


class StrOut(nn.Module):
    def forward(self, x):
        return "a string"


class ObjectOut(nn.Module):
    def forward(self, x):
        return {"x": x, "handle": object()}


class Raises(nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in forward")


class SlowLinear(nn.Linear):
    """A Linear whose forward sleeps: the process axis is still running when a signal comes."""

    def forward(self, x):
        time.sleep(3)
        return super().forward(x)


def hang():
    return Hang(), torch.ones(2, 3)


def none():
    return NoneOut(), torch.ones(2, 3)


def string():
    return StrOut(), torch.ones(2, 3)


def object_leaf():
    return ObjectOut(), torch.ones(2, 3)


def raises():
    return Raises(), torch.ones(2, 3)


def unbatched():
    return nn.Linear(3, 1), torch.ones(3)


def factory_raises():
    raise ValueError("the factory itself fails")


def slow():
    torch.manual_seed(0)
    return SlowLinear(3, 2), torch.ones(2, 3)


def linear():
    torch.manual_seed(0)
    return nn.Linear(3, 2).eval(), torch.ones(2, 3)


class _SignalsInItsFinaliser:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.3)  # the signal handler runs here, inside the finaliser, whose exceptions Python drops


class SignalInFinaliser(nn.Linear):
    """A Linear whose first forward drops an object whose ``__del__`` receives SIGTERM."""

    sent = False

    def forward(self, x):
        if not SignalInFinaliser.sent:
            SignalInFinaliser.sent = True
            _SignalsInItsFinaliser()
        return super().forward(x)


def signal_in_finaliser():
    torch.manual_seed(0)
    return SignalInFinaliser(3, 2), torch.ones(2, 3)


class ExitsInForward(nn.Module):
    """User code that ends the process from inside its forward."""

    def forward(self, x):
        sys.exit(0)


class RaisesBaseException(nn.Module):
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        raise self.kind()


def exits_in_forward():
    return ExitsInForward(), torch.ones(2, 3)


def exits_in_factory():
    sys.exit(1)


def generator_exit_in_forward():
    return RaisesBaseException(GeneratorExit), torch.ones(2, 3)


def keyboard_interrupt_in_forward():
    """A KeyboardInterrupt no signal caused (raised by the model's own code)."""
    return RaisesBaseException(KeyboardInterrupt), torch.ones(2, 3)


def hangs_in_factory():
    while True:
        time.sleep(0.05)


class Wanders(nn.Linear):
    """A Linear whose forward changes the working folder (to ``$SB_WANDER``)."""

    def forward(self, x):
        os.chdir(os.environ["SB_WANDER"])
        return super().forward(x)


def wanders_in_factory():
    """A factory that changes the working folder (to ``$SB_WANDER``) and leaves it there."""
    os.chdir(os.environ["SB_WANDER"])
    return linear()


def wanders_in_forward():
    torch.manual_seed(0)
    return Wanders(3, 2).eval(), torch.ones(2, 3)


class ClosesStdout(nn.Linear):
    """A Linear whose forward closes sys.stdout (a logging wrapper gone wrong)."""

    def forward(self, x):
        sys.stdout.close()
        return super().forward(x)


def closes_stdout():
    torch.manual_seed(0)
    return ClosesStdout(3, 2).eval(), torch.ones(2, 3)


class HardExit(nn.Linear):
    """A Linear whose forward ends the process at once, exit status 0 (``os._exit(0)``)."""

    def forward(self, x):
        os._exit(0)


def hard_exit_in_forward():
    return HardExit(3, 2).eval(), torch.ones(2, 3)


def on_meta_device():
    """A factory that builds the model on the meta device (shapes, no data) and never loads it."""
    with torch.device("meta"):
        model = nn.Linear(3, 2)
    return model.eval(), torch.ones(2, 3)


def starts_a_thread():
    """A factory that starts a non-daemon thread that never ends (a metrics reporter, say)."""
    import threading

    threading.Thread(target=lambda: time.sleep(3600), name="reporter").start()
    return linear()

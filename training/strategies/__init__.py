"""Distribution strategies behind one interface (:class:`training.strategies.base.Strategy`); a DAG picks one
by name through the ``strategy`` parameter."""

from __future__ import annotations

from training.strategies.base import Strategy


def get_strategy(name: str) -> Strategy:
    if name == "horovod":
        from training.strategies.horovod import HorovodStrategy

        return HorovodStrategy()
    if name == "downpour":
        from training.strategies.downpour import DownpourStrategy

        return DownpourStrategy()
    if name == "averaging":
        from training.strategies.averaging import AveragingStrategy

        return AveragingStrategy()
    raise ValueError(f"unknown strategy {name!r}")

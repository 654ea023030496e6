"""Distribution strategies behind one interface (:class:`training.strategies.base.Strategy`); a DAG picks one
by name through the ``strategy`` parameter. Each one's rules are in :mod:`training.strategy_rules`; this package
stays light (standard library only at import) because the Airflow side reads those rules."""

from __future__ import annotations

from training.strategies.base import Strategy
from training.strategy_rules import rules_of


def get_strategy(name: str) -> Strategy:
    """The class that trains with strategy ``name``, imported now (ValueError for an unknown name)."""
    return rules_of(name).trainer()

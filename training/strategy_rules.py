"""Each strategy's rules, declared once: its name, what it refuses, the settings it reads, how much of a shard one
of its steps needs, what the cost model needs to know of it, and the class that trains it.

Standard library only: validation (training.config) and the scaling study's plan read it on the Airflow side; the
training class is imported only where a run trains (``trainer()``). It stands above the settings table (its checks
raise the table's RunSpecError and read its defaults) and below the run specification. Adding a strategy is its name
in training.contract.STRATEGIES (the ``strategy`` setting's choices), one ``StrategyRules`` here and its class in
training/strategies/<name>.py.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from training.contract import AVERAGING, DOWNPOUR, HOROVOD, STRATEGIES
from training.settings import RunSettings, RunSpecError, shared_setting

# How a strategy's workers communicate, as the cost model (training.study.cost_model) prices it.
ALL_REDUCE = "all-reduce"  # every step, a ring all-reduce of the gradients among the workers
PARAMETER_SERVER = "parameter-server"  # pushes every n_push steps, fetches every n_fetch, through one server
ROUNDS = "rounds"  # the weights down and up once per round, rounds_per_epoch rounds per epoch


@dataclass(frozen=True)
class StrategyRules:
    """What the rest of Cloudburst may ask a strategy, without importing it."""

    name: str
    trains_with: str  # "module:Class" implementing training.strategies.base.Strategy
    communication: str  # ALL_REDUCE, PARAMETER_SERVER or ROUNDS
    # its workers fetch and push on a thread of their own while they compute, so its wire time hides behind the
    # compute by design (the cost model's overlap is 1, not fitted)
    asynchronous: bool = False
    pushes_and_fetches: bool = False  # reads n_push and n_fetch (a study varies n_push for it)
    keeps_weight_average: bool = False  # honours weight_average_decay
    refuse: Callable[[RunSettings], None] | None = None  # its own checks of a run; raises RunSpecError
    # the fewest examples a worker's shard may hold for one of its steps, and why
    examples_per_step: Callable[[RunSettings], tuple[int, str]] | None = None

    def check(self, spec: RunSettings) -> None:
        """Refuse a run this strategy cannot train, naming the setting (RunSpecError)."""
        if spec.weight_average_decay and not self.keeps_weight_average:
            keepers = " or ".join(rules.name for rules in RULES if rules.keeps_weight_average)
            raise RunSpecError(f"weight_average_decay={spec.weight_average_decay!r}: only the {keepers} strategy "
                               f"keeps a weight average, not {self.name}")
        if self.refuse is not None:
            self.refuse(spec)

    def examples_per_worker_needed(self, spec: RunSettings) -> tuple[int, str]:
        if self.examples_per_step is not None:
            return self.examples_per_step(spec)
        batch = spec.batch_size_per_worker
        return batch, f"batch_size_per_worker {batch}"

    def trainer(self) -> Any:  # a training.strategies.base.Strategy, which stands above the rules
        """An instance of the class that trains with this strategy (imports TensorFlow, Horovod or Spark)."""
        module, name = self.trains_with.split(":")
        return getattr(importlib.import_module(module), name)()


def _horovod_step(spec: RunSettings) -> tuple[int, str]:
    batch, passes = spec.batch_size_per_worker, spec.backward_passes_per_step
    return batch * passes, f"batch_size_per_worker {batch} × backward_passes_per_step {passes}"


def _averaging_step(spec: RunSettings) -> tuple[int, str]:
    batch, rounds = spec.batch_size_per_worker, spec.rounds_per_epoch
    # every round trains on its own 1/rounds_per_epoch of the shard
    return batch * rounds, f"batch_size_per_worker {batch} × rounds_per_epoch {rounds}"


def _refuse_for_downpour(spec: RunSettings) -> None:
    if spec.worker_optimizer != shared_setting("worker_optimizer").default:
        raise RunSpecError(f"worker_optimizer={spec.worker_optimizer!r}: Downpour's workers step with "
                           f"server_optimizer (now {spec.server_optimizer!r}); set that instead")
    batch_norm = spec.definition.batch_norm
    if batch_norm is not None and batch_norm(spec):
        raise RunSpecError("batch_norm=true: Downpour's parameter server holds trainable parameters only, and the "
                           "normalization statistics would stay with each worker; use horovod or averaging")


RULES: tuple[StrategyRules, ...] = (
    StrategyRules(HOROVOD, "training.strategies.horovod:HorovodStrategy", ALL_REDUCE,
                  keeps_weight_average=True, examples_per_step=_horovod_step),
    StrategyRules(DOWNPOUR, "training.strategies.downpour:DownpourStrategy", PARAMETER_SERVER,
                  asynchronous=True, pushes_and_fetches=True, refuse=_refuse_for_downpour),
    StrategyRules(AVERAGING, "training.strategies.averaging:AveragingStrategy", ROUNDS,
                  examples_per_step=_averaging_step),
)
_BY_NAME = {rules.name: rules for rules in RULES}
if tuple(_BY_NAME) != STRATEGIES:
    raise ImportError(f"training.strategy_rules declares {', '.join(_BY_NAME)}; training.contract.STRATEGIES "
                      f"names {', '.join(STRATEGIES)}: one StrategyRules per name, in that order")


def rules_of(name: str) -> StrategyRules:
    """The rules of the strategy called ``name``; ValueError for a name no strategy has."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown strategy {name!r}") from None

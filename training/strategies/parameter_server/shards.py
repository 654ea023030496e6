"""Parameter shards: contiguous slices of the flattened parameters, each updated on its own."""

from __future__ import annotations

import threading

import numpy as np

from training.config import OPTIMIZERS
from training.models.optimizers import ADAM_BETA_1, ADAM_BETA_2, ADAM_EPSILON, INITIAL_ACCUMULATOR, MOMENTUM


class NonFiniteError(ValueError):
    """A gradient, or the update it would make, holds NaN or ±Inf; nothing was applied."""


def shard_boundaries(total_size: int, num_shards: int) -> list[tuple[int, int]]:
    """[start, stop) of each shard; sizes differ by at most one."""
    if num_shards < 1 or num_shards > max(total_size, 1):
        raise ValueError(f"cannot split {total_size} parameters into {num_shards} shards")
    edges = np.linspace(0, total_size, num_shards + 1).round().astype(int)
    return [(int(start), int(stop)) for start, stop in zip(edges[:-1], edges[1:], strict=True)]


def clip_push(gradient: np.ndarray, steps: int, max_norm: float) -> tuple[np.ndarray, bool]:
    """Scale a pushed gradient down so that its L2 norm per accumulated step is at most ``max_norm`` (0: never);
    returns the float32 gradient and whether it was scaled. The norm is taken in float64: float32 squares of
    values above ~1.8e19 overflow."""
    if max_norm <= 0:
        return gradient, False
    wide = np.asarray(gradient, np.float64)
    norm, limit = float(np.linalg.norm(wide)), max_norm * steps
    if norm <= limit:
        return gradient, False
    return (wide * (limit / norm)).astype(np.float32), True


# Each optimizer's per-parameter state, saved in checkpoints under these names.
OPTIMIZER_STATE = {"adagrad": ("accumulator",), "sgd": (), "momentum": ("velocity",),
                   "adam": ("first_moment", "second_moment")}


class ParameterShard:
    """One slice of the parameters with its own optimizer state and version counter.

    Adagrad as in Downpour SGD: every parameter i keeps the sum of its squared gradients and steps by
    learning_rate · g_i / sqrt(initial_accumulator + Σ g_i²). Also plain SGD, SGD with momentum (velocity
    v ← 0.9·v + g, step learning_rate · v) and Adam (bias-corrected moments, Keras' β and ε), as Keras computes them.
    ``apply(gradient, scale)`` multiplies the step by ``scale`` (staleness-aware Downpour: 1 / staleness).
    An update whose result would not be finite in float32 is refused whole, so no push can freeze a parameter.
    """

    def __init__(self, initial: np.ndarray, optimizer: str = "adagrad", learning_rate: float = 0.01,
                 initial_accumulator: float = INITIAL_ACCUMULATOR) -> None:
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"server optimizer {optimizer!r}: must be one of {', '.join(OPTIMIZERS)}")
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        self.parameters = np.array(initial, dtype=np.float32).ravel()
        self.optimizer = optimizer
        self.learning_rate = np.float32(learning_rate)
        start = initial_accumulator if optimizer == "adagrad" else 0.0
        self.slots = {name: np.full_like(self.parameters, start) for name in OPTIMIZER_STATE[optimizer]}
        self.updates = 0  # Adam's bias correction counts the updates applied
        self.version = 0
        self._lock = threading.Lock()

    @property
    def accumulator(self) -> np.ndarray | None:
        """Adagrad's sum of squared gradients (None for the other optimizers)."""
        return self.slots.get("accumulator")

    def apply(self, gradient: np.ndarray, scale: float = 1.0, steps: int = 1) -> int:
        """Apply one pushed (accumulated) gradient, its step multiplied by ``scale``; returns the new version.
        ``steps`` > 1: the push is applied as that many optimizer steps, each with the mean gradient (gradient ÷
        steps) — the server then moves as far as the pushing worker did, where one Adagrad or Adam step of the
        sum moves about as far as one worker step (their step size does not grow with the gradient). The version
        still counts pushes. Raises NonFiniteError, changing nothing, if the gradient or the parameters or
        optimizer state it would produce hold NaN or ±Inf."""
        gradient = np.asarray(gradient, dtype=np.float32).ravel()
        if gradient.shape != self.parameters.shape:
            raise ValueError(f"gradient of {gradient.size} values for a shard of {self.parameters.size}")
        if not np.isfinite(gradient).all():
            raise NonFiniteError(f"gradient holds {np.count_nonzero(~np.isfinite(gradient))} NaN or ±Inf value(s)")
        if not 0 < scale <= 1:
            raise ValueError(f"a step's scale must be in (0, 1], got {scale}")
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"a push is applied as at least one step, got {steps!r}")
        with self._lock, np.errstate(over="ignore", invalid="ignore"):
            # Computed aside and committed only when finite: one overflowing square (|g| > ~1.8e19 in float32)
            # would otherwise turn an accumulator into inf and freeze its parameter for good.
            parameters, slots = self.parameters, self.slots
            mean = gradient if steps == 1 else gradient / np.float32(steps)
            for number in range(steps):
                slots, step = self._step(mean, slots, self.updates + number + 1)
                parameters = parameters - np.float32(scale) * step
            if not np.isfinite(parameters).all() or not all(np.isfinite(v).all() for v in slots.values()):
                raise NonFiniteError(f"the update would overflow float32 (parameters or {self.optimizer} state); "
                                     "refused, nothing changed (is max_push_norm 0 or very large?)")
            self.parameters, self.slots = parameters, slots
            self.updates += steps
            self.version += 1
            return self.version

    def _step(self, gradient: np.ndarray, slots: dict[str, np.ndarray], t: int
              ) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The optimizer state after ``gradient`` from ``slots``, and the step (to subtract); ``t`` counts this
        update (Adam's bias correction). Nothing is changed."""
        rate = self.learning_rate
        if self.optimizer == "adagrad":
            accumulator = slots["accumulator"] + gradient * gradient
            return {"accumulator": accumulator}, rate * gradient / np.sqrt(accumulator)
        if self.optimizer == "momentum":
            velocity = np.float32(MOMENTUM) * slots["velocity"] + gradient
            return {"velocity": velocity}, rate * velocity
        if self.optimizer == "adam":
            first = np.float32(ADAM_BETA_1) * slots["first_moment"] + np.float32(1 - ADAM_BETA_1) * gradient
            second = (np.float32(ADAM_BETA_2) * slots["second_moment"]
                      + np.float32(1 - ADAM_BETA_2) * gradient * gradient)
            corrected = rate * np.float32(np.sqrt(1 - ADAM_BETA_2**t) / (1 - ADAM_BETA_1**t))
            return {"first_moment": first, "second_moment": second}, \
                corrected * first / (np.sqrt(second) + np.float32(ADAM_EPSILON))
        return {}, rate * gradient

    def snapshot(self) -> tuple[np.ndarray, int]:
        """A consistent copy of the parameters and the version they belong to."""
        with self._lock:
            return self.parameters.copy(), self.version

    def state(self) -> dict[str, np.ndarray | int]:
        """Everything a checkpoint needs to resume this shard."""
        with self._lock:
            state: dict[str, np.ndarray | int] = {"parameters": self.parameters.copy(), "version": self.version,
                                                  **{name: values.copy() for name, values in self.slots.items()}}
            if self.optimizer == "adam":
                state["updates"] = self.updates
            return state

    def restore(self, state: dict[str, np.ndarray | int]) -> None:
        parameters = np.array(state["parameters"], dtype=np.float32)
        missing = [name for name in OPTIMIZER_STATE[self.optimizer] if name not in state]
        if missing:
            raise ValueError(f"checkpoint has no {', '.join(missing)}: it was written with another server optimizer "
                             f"than {self.optimizer}")
        slots = {name: np.array(state[name], dtype=np.float32) for name in OPTIMIZER_STATE[self.optimizer]}
        for name, values in (("parameters", parameters), *slots.items()):
            if not np.isfinite(values).all():
                raise NonFiniteError(f"checkpoint {name} hold NaN or ±Inf: resuming from them would serve them")
        with self._lock:
            self.parameters, self.slots, self.version = parameters, slots, int(state["version"])
            self.updates = int(state.get("updates", state["version"]))

"""Parameter shards: contiguous slices of the flattened parameters, each updated on its own."""

from __future__ import annotations

import threading

import numpy as np

from training.config import SERVER_OPTIMIZERS


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


class ParameterShard:
    """One slice of the parameters with its own optimizer state and version counter.

    Adagrad as in Downpour SGD: every parameter i keeps the sum of its squared gradients and steps by
    learning_rate · g_i / sqrt(initial_accumulator + Σ g_i²).
    An update whose result would not be finite in float32 is refused whole, so no push can freeze a parameter.
    """

    def __init__(self, initial: np.ndarray, optimizer: str = "adagrad", learning_rate: float = 0.01,
                 initial_accumulator: float = 0.1) -> None:
        if optimizer not in SERVER_OPTIMIZERS:
            raise ValueError(f"server optimizer {optimizer!r}: must be one of {', '.join(SERVER_OPTIMIZERS)}")
        if learning_rate <= 0:
            raise ValueError(f"learning_rate must be > 0, got {learning_rate}")
        self.parameters = np.array(initial, dtype=np.float32).ravel()
        self.optimizer = optimizer
        self.learning_rate = np.float32(learning_rate)
        self.accumulator = np.full_like(self.parameters, initial_accumulator) if optimizer == "adagrad" else None
        self.version = 0
        self._lock = threading.Lock()

    def apply(self, gradient: np.ndarray) -> int:
        """Apply one pushed (accumulated) gradient; returns the new version. Raises NonFiniteError, changing
        nothing, if the gradient or the parameters or accumulator it would produce hold NaN or ±Inf."""
        gradient = np.asarray(gradient, dtype=np.float32).ravel()
        if gradient.shape != self.parameters.shape:
            raise ValueError(f"gradient of {gradient.size} values for a shard of {self.parameters.size}")
        if not np.isfinite(gradient).all():
            raise NonFiniteError(f"gradient holds {np.count_nonzero(~np.isfinite(gradient))} NaN or ±Inf value(s)")
        with self._lock, np.errstate(over="ignore", invalid="ignore"):
            # Computed aside and committed only when finite: one overflowing square (|g| > ~1.8e19 in float32)
            # would otherwise turn an accumulator into inf and freeze its parameter for good.
            accumulator = None if self.accumulator is None else self.accumulator + gradient * gradient
            step = self.learning_rate * gradient
            parameters = self.parameters - (step if accumulator is None else step / np.sqrt(accumulator))
            if not np.isfinite(parameters).all() or (accumulator is not None and not np.isfinite(accumulator).all()):
                raise NonFiniteError("the update would overflow float32 (parameters or Adagrad accumulator); "
                                     "refused, nothing changed (is max_push_norm 0 or very large?)")
            self.parameters, self.accumulator = parameters, accumulator
            self.version += 1
            return self.version

    def snapshot(self) -> tuple[np.ndarray, int]:
        """A consistent copy of the parameters and the version they belong to."""
        with self._lock:
            return self.parameters.copy(), self.version

    def state(self) -> dict[str, np.ndarray | int]:
        """Everything a checkpoint needs to resume this shard."""
        with self._lock:
            state: dict[str, np.ndarray | int] = {"parameters": self.parameters.copy(), "version": self.version}
            if self.accumulator is not None:
                state["accumulator"] = self.accumulator.copy()
            return state

    def restore(self, state: dict[str, np.ndarray | int]) -> None:
        parameters = np.array(state["parameters"], dtype=np.float32)
        accumulator = None if self.accumulator is None else np.array(state["accumulator"], dtype=np.float32)
        for name, values in (("parameters", parameters), ("accumulator", accumulator)):
            if values is not None and not np.isfinite(values).all():
                raise NonFiniteError(f"checkpoint {name} hold NaN or ±Inf: resuming from them would serve them")
        with self._lock:
            self.parameters, self.accumulator, self.version = parameters, accumulator, int(state["version"])

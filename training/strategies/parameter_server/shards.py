"""Parameter shards: contiguous slices of the flattened parameters, each updated on its own."""

from __future__ import annotations

import threading

import numpy as np

from training.config import SERVER_OPTIMIZERS


def shard_boundaries(total_size: int, num_shards: int) -> list[tuple[int, int]]:
    """[start, stop) of each shard; sizes differ by at most one."""
    if num_shards < 1 or num_shards > max(total_size, 1):
        raise ValueError(f"cannot split {total_size} parameters into {num_shards} shards")
    edges = np.linspace(0, total_size, num_shards + 1).round().astype(int)
    return [(int(start), int(stop)) for start, stop in zip(edges[:-1], edges[1:], strict=True)]


class ParameterShard:
    """One slice of the parameters with its own optimizer state and version counter.

    Adagrad as in Downpour SGD: every parameter i keeps the sum of its squared gradients and steps by
    learning_rate · g_i / sqrt(initial_accumulator + Σ g_i²).
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
        """Apply one pushed (accumulated) gradient; returns the new version."""
        gradient = np.asarray(gradient, dtype=np.float32).ravel()
        if gradient.shape != self.parameters.shape:
            raise ValueError(f"gradient of {gradient.size} values for a shard of {self.parameters.size}")
        with self._lock:
            if self.accumulator is not None:
                self.accumulator += gradient * gradient
                self.parameters -= self.learning_rate * gradient / np.sqrt(self.accumulator)
            else:
                self.parameters -= self.learning_rate * gradient
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
        with self._lock:
            self.parameters = np.array(state["parameters"], dtype=np.float32)
            self.version = int(state["version"])
            if self.accumulator is not None:
                self.accumulator = np.array(state["accumulator"], dtype=np.float32)

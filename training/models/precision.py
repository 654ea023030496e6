"""Compute precision of training: the run's ``precision`` setting applied to a workload's model and loss, the same
way for every strategy (they build models through :func:`with_precision`).

Keras' mixed precision keeps the weights float32 and computes each layer in bfloat16. The model's outputs are
then bfloat16; the loss is taken on them cast to float32, as Keras' guide has the last layer do, so a softmax over
many classes keeps its precision — the builders themselves stay as they are.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from training.machine_speed import bf16_hardware
from training.settings import RunSpecError

FLOAT32 = "float32"


def check_hardware(precision: str) -> None:
    """Refuse bfloat16 on a CPU that would emulate it (slower than float32, not what the setting promises)."""
    if precision != FLOAT32 and not bf16_hardware():
        raise RunSpecError(f"precision={precision}: this CPU has neither AMX nor AVX512-BF16 (no amx_bf16 or "
                           f"avx512_bf16 flag in /proc/cpuinfo); train with precision={FLOAT32}")


def with_precision(trainable: Any, precision: str) -> Any:
    """``trainable`` (a workloads.base.Trainable, not imported: the workloads package imports this module) whose
    ``build_model`` builds under ``precision``'s Keras policy (set each time: a Spark worker process is reused by
    later tasks) and whose loss reads float32 outputs."""
    changes: dict[str, Any] = {"build_model": built_under(precision, trainable.build_model)}
    if precision != FLOAT32:
        changes["loss"] = float32_outputs(trainable.make_loss)
    return dataclasses.replace(trainable, **changes)


def built_under(policy: str, build_model: Any) -> Any:
    """``build_model`` that builds under Keras' ``policy`` and leaves the process's policy float32."""

    def build() -> Any:
        import tensorflow as tf

        check_hardware(policy)  # where the model trains: evaluating float32 weights needs no bfloat16
        tf.keras.mixed_precision.set_global_policy(policy)
        try:
            return build_model()
        finally:  # a model loaded later in this process (evaluation, a checkpoint) is float32 again
            tf.keras.mixed_precision.set_global_policy(FLOAT32)

    return build


def float32_outputs(make_loss: Any) -> Any:
    """A loss factory whose loss casts the model's outputs to float32 first. The workload's loss object is made once
    and kept (speaker verification ramps its margin on it)."""
    made: dict[str, Any] = {}

    def make() -> Any:
        import tensorflow as tf

        if "loss" not in made:
            inner = make_loss()

            def loss(y_true: Any, y_pred: Any) -> Any:
                return inner(y_true, tf.cast(y_pred, tf.float32))

            made["loss"] = loss
        return made["loss"]

    return make

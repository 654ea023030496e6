"""Workloads: what to train (model, loss, optimizer) and how to read its data, independent of any strategy.

A strategy asks the workload for a model and for arrays; it never knows which model it trains.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from training import sharding
from training.datasets import mnist, speech_features

if TYPE_CHECKING:
    from training.config import RunSpec


@dataclass(frozen=True)
class Workload:
    """The strategy-facing description of one workload."""

    name: str
    num_classes: int
    build_model: Callable[[], object]
    make_optimizer: Callable[[float], object]
    load_shard: Callable[[str, int, int], tuple[np.ndarray, np.ndarray]]  # (shards URI, rank, workers)
    load_test: Callable[[str], tuple[np.ndarray, np.ndarray]]
    loss: str = "sparse_categorical_crossentropy_from_logits"

    def make_loss(self) -> object:
        import tensorflow as tf

        return tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def _mnist_model() -> object:
    from training.models.cnn import simard_cnn

    return simard_cnn()


def _adam(learning_rate: float) -> object:
    import tensorflow as tf

    # Keras 2's legacy optimizers are the ones Horovod 0.28 wraps reliably (TF ≥ 2.11 changed the new ones).
    return tf.keras.optimizers.legacy.Adam(learning_rate)


def _images_as_inputs(images: np.ndarray) -> np.ndarray:
    """uint8 (n, 28, 28) → the model's input layout (n, 28, 28, 1); scaling to [0, 1] happens in the model feed."""
    return images[..., np.newaxis]


def _mnist_shard(shards_uri: str, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    batch = sharding.read_worker_images(shards_uri, rank, workers)
    return _images_as_inputs(batch.images), batch.labels.astype(np.int32)


def _mnist_test(dataset_uri: str) -> tuple[np.ndarray, np.ndarray]:
    batch = mnist.read_split(dataset_uri, "test")
    order = np.argsort(batch.index, kind="stable")  # a fixed order, whatever order Spark wrote the parts in
    return _images_as_inputs(batch.images[order]), batch.labels[order].astype(np.int32)


def _features_shard(shards_uri: str, rank: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    batch = sharding.read_worker_images(shards_uri, rank, workers)
    return batch.images, batch.labels.astype(np.int32)


def _features_test(dataset_uri: str) -> tuple[np.ndarray, np.ndarray]:
    batch = speech_features.read_split(dataset_uri, "test")
    return batch.images, batch.labels.astype(np.int32)


def _keyword_spotter(spec: RunSpec) -> Workload:
    from training import storage
    from training.audio.features import feature_shape

    # The classes are those the data holds: the 35-word task on v0.01 (30 words) has 30, not 35.
    class_names = storage.require_manifest(spec.augmented_uri(), speech_features.DATASET_KIND)["class_names"]

    def build_model() -> object:
        from training.models.densenet_bilstm import densenet_bilstm

        return densenet_bilstm(feature_shape(spec.features), len(class_names))

    return Workload(
        name="kws_densenet_bilstm",
        num_classes=len(class_names),
        build_model=build_model,
        make_optimizer=_adam,
        load_shard=_features_shard,
        load_test=_features_test,
    )


MNIST_ELASTIC_CNN = Workload(
    name="mnist_elastic_cnn",
    num_classes=mnist.NUM_CLASSES,
    build_model=_mnist_model,
    make_optimizer=_adam,
    load_shard=_mnist_shard,
    load_test=_mnist_test,
)


def workload_for(spec: RunSpec) -> Workload:
    """The workload a run trains; keyword spotting's classes and input shape follow its features dataset."""
    if spec.workload == "mnist_elastic_cnn":
        return MNIST_ELASTIC_CNN
    if spec.workload == "kws_densenet_bilstm":
        return _keyword_spotter(spec)
    raise ValueError(f"unknown workload {spec.workload!r}")

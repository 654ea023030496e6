"""Elastic deformation on the fly: the same transformation as the stored copies (checked against the NumPy
implementation on the same random fields), deterministic per seed, fresh per batch, and wired into MNIST."""

from __future__ import annotations

import numpy as np
import pytest

from training.config import RunSpec
from training.workloads.mnist_elastic_cnn import elastic
from training.workloads.mnist_elastic_cnn.elastic_online import deform_with_fields, make_elastic_augmenter

tf = pytest.importorskip("tensorflow")


def digits(count: int = 5, seed: int = 0) -> np.ndarray:
    """uint8 (n, 28, 28): bright strokes (a bar and a ring) at random places, like handwriting's contrast."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:28, :28]
    images = np.zeros((count, 28, 28), np.uint8)
    for image in images:
        centre_row, centre_col = rng.integers(9, 19, 2)
        radius = np.hypot(rows - centre_row, cols - centre_col)
        image[(radius > 4) & (radius < 7)] = 255
        image[3:25, rng.integers(4, 24)] = 200
    return images


@pytest.mark.parametrize(("alpha", "sigma"), [(34.0, 4.0), (8.0, 2.0), (60.0, 6.0)])
def test_it_deforms_exactly_as_the_stored_copies_do_given_the_same_random_fields(alpha, sigma):
    images = digits()
    index, copy = np.arange(len(images)), np.ones(len(images), np.int64)
    fields = elastic.uniform_fields(7, index, copy, (28, 28))
    expected = elastic.elastic_deform(images, index, copy, seed=7, alpha=alpha, sigma=sigma)
    deformed = deform_with_fields(tf.constant(images[..., None] / 255.0, tf.float32), tf.constant(fields), alpha,
                                  sigma).numpy()[..., 0]
    assert deformed.shape == images.shape
    # NumPy rounds to uint8; float32 sums in another order may tip a pixel that sits on .5 by one level.
    difference = np.abs(np.rint(deformed * 255) - expected.astype(np.float64))
    assert difference.max() <= 1 and (difference > 0).mean() < 0.01
    assert np.abs(expected.astype(np.int64) - images).sum() > 0  # it did move pixels


def test_a_batch_is_deterministic_per_seed_and_fresh_for_another_batch():
    augment = make_elastic_augmenter(34.0, 4.0)
    images = tf.constant(digits()[..., None] / 255.0, tf.float32)
    first = augment(images, tf.constant([3, 0], tf.int64)).numpy()
    assert np.array_equal(first, augment(images, tf.constant([3, 0], tf.int64)).numpy())
    other_batch = augment(images, tf.constant([3, 1], tf.int64)).numpy()
    other_worker = augment(images, tf.constant([4, 0], tf.int64)).numpy()
    assert not np.allclose(first, other_batch) and not np.allclose(first, other_worker)
    assert first.dtype == np.float32 and first.shape == images.shape
    assert first.min() >= 0 and first.max() <= 1.0 + 1e-6
    # a deformation moves ink, it does not create it: total intensity stays within a few percent on average
    assert abs(first.sum() / images.numpy().sum() - 1) < 0.1


def test_alpha_zero_changes_nothing_and_nonsense_parameters_are_refused():
    images = tf.constant(digits()[..., None] / 255.0, tf.float32)
    assert np.array_equal(make_elastic_augmenter(0.0, 4.0)(images, tf.constant([1, 2], tf.int64)).numpy(),
                          images.numpy())
    for alpha, sigma in [(-1.0, 4.0), (34.0, 0.0), (float("nan"), 4.0), (34.0, float("inf"))]:
        with pytest.raises(ValueError, match="must be"):
            make_elastic_augmenter(alpha, sigma)


def test_the_mnist_workload_deforms_batches_only_when_asked_and_through_the_input_pipeline():
    from training.strategies.input_pipeline import training_dataset
    from training.workload_registry import workload_for

    assert workload_for(RunSpec(workload="mnist_elastic_cnn")).augment_batch is None
    workload = workload_for(RunSpec(workload="mnist_elastic_cnn", online_elastic=True))
    assert workload.augment_batch is not None
    images, labels = digits(8)[..., None], np.arange(8, dtype=np.int32)
    plain = training_dataset(images, labels, 4, seed=0)
    deformed = training_dataset(images, labels, 4, seed=0, augment=workload.augment_batch, augment_seed=(0, 0))
    (plain_batch, plain_labels), (deformed_batch, deformed_labels) = next(iter(plain)), next(iter(deformed))
    assert np.array_equal(plain_labels, deformed_labels)  # same examples, same order
    assert not np.allclose(plain_batch.numpy(), deformed_batch.numpy())


def test_a_fraction_deforms_that_share_of_a_batch_and_leaves_the_rest_exactly_as_stored():
    images = tf.constant(np.repeat(digits(4), 50, axis=0)[..., None] / 255.0, tf.float32)  # 200 images
    seed = tf.constant([5, 9], tf.int64)
    everything = make_elastic_augmenter(34.0, 4.0)(images, seed).numpy()
    for fraction, low, high in [(0.25, 30, 70), (0.5, 75, 125), (0.9, 160, 195)]:
        partly = make_elastic_augmenter(34.0, 4.0, fraction)(images, seed).numpy()
        untouched = np.all(partly == images.numpy(), axis=(1, 2, 3))
        deformed = ~untouched
        assert low <= deformed.sum() <= high, (fraction, deformed.sum())
        # the deformed ones are deformed exactly as with fraction 1: the choice does not change the fields
        assert np.array_equal(partly[deformed], everything[deformed])
        assert np.array_equal(partly, make_elastic_augmenter(34.0, 4.0, fraction)(images, seed).numpy())
    assert np.array_equal(make_elastic_augmenter(34.0, 4.0, 0.0)(images, seed).numpy(), images.numpy())
    for fraction in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="between 0 and 1"):
            make_elastic_augmenter(34.0, 4.0, fraction)


def test_elastic_fraction_is_a_setting_that_needs_online_elastic():
    from training.settings import RunSpecError
    from training.workload_registry import workload_for

    RunSpec(workload="mnist_elastic_cnn", online_elastic=True, elastic_fraction=0.5).validate()
    with pytest.raises(RunSpecError, match="elastic_fraction=0.5: only applies with online_elastic"):
        RunSpec(workload="mnist_elastic_cnn", elastic_fraction=0.5).validate()
    with pytest.raises(RunSpecError, match="elastic_fraction"):
        RunSpec(workload="mnist_elastic_cnn", online_elastic=True, elastic_fraction=1.5).validate()
    workload = workload_for(RunSpec(workload="mnist_elastic_cnn", online_elastic=True, elastic_fraction=0.0))
    images = tf.constant(digits()[..., None] / 255.0, tf.float32)
    assert np.array_equal(workload.augment_batch(images, tf.constant([1, 1], tf.int64)).numpy(), images.numpy())


def test_an_affine_matrix_rotates_and_scales_about_the_centre_on_top_of_the_elastic_field():
    images = digits(3)
    as_input = tf.constant(images[..., None] / 255.0, tf.float32)
    still = tf.zeros((3, 2, 28, 28), tf.float32)
    quarter_turn = tf.constant([[[0.0, -1.0], [1.0, 0.0]]] * 3)  # pixel (r, c) is read at (27 − c, r)
    turned = np.rint(deform_with_fields(as_input, still, 34.0, 4.0, quarter_turn).numpy()[..., 0] * 255)
    assert np.array_equal(turned, images[:, ::-1, :].transpose(0, 2, 1).astype(np.float64))
    identity = tf.eye(2, batch_shape=[3])
    fields = tf.constant(elastic.uniform_fields(7, np.arange(3), np.ones(3, np.int64), (28, 28)))
    assert np.allclose(deform_with_fields(as_input, fields, 34.0, 4.0, identity).numpy(),
                       deform_with_fields(as_input, fields, 34.0, 4.0).numpy(), atol=1e-5)
    # scale 2 on an odd-sized image: pixel (r, c) is read at (13 + 2(r − 13), 13 + 2(c − 13)), zero outside
    odd = np.arange(27 * 27, dtype=np.float32).reshape(1, 27, 27) / (27 * 27)
    doubled = deform_with_fields(tf.constant(odd[..., None]), tf.zeros((1, 2, 27, 27)), 34.0, 4.0,
                                 tf.constant([[[2.0, 0.0], [0.0, 2.0]]])).numpy()[0, ..., 0]
    inside = np.arange(7, 20)
    assert np.allclose(doubled[np.ix_(inside, inside)], odd[0][np.ix_(13 + 2 * (inside - 13), 13 + 2 * (inside - 13))],
                       atol=1e-5)
    assert np.all(doubled[:6] == 0) and np.all(doubled[:, 21:] == 0)


def test_random_rotations_and_scales_stay_within_their_bounds_and_fill_them():
    from training.workloads.mnist_elastic_cnn.elastic_online import random_affine

    matrices = random_affine(tf.constant(2000), tf.constant([1, 2], tf.int64), 15.0, 0.1).numpy()
    angles = np.degrees(np.arctan2(matrices[:, 1, 0], matrices[:, 0, 0]))
    scales = np.linalg.norm(matrices, axis=1)  # column j of R(θ)·diag(s) has length s_j
    assert np.abs(angles).max() <= 15.0 + 1e-4 and np.abs(angles).max() > 14.5
    assert scales.min() >= 0.9 - 1e-5 and scales.max() <= 1.1 + 1e-5 and scales.min() < 0.91 and scales.max() > 1.09
    assert abs(np.corrcoef(scales[:, 0], scales[:, 1])[0, 1]) < 0.1  # rows and columns drawn apart
    assert np.array_equal(matrices, random_affine(tf.constant(2000), tf.constant([1, 2], tf.int64), 15.0, 0.1).numpy())


def test_rotation_and_scaling_apply_to_the_deformed_share_only_and_leave_its_elastic_field_as_it_was():
    images = tf.constant(np.repeat(digits(4), 25, axis=0)[..., None] / 255.0, tf.float32)  # 100 images
    seed = tf.constant([5, 9], tf.int64)
    elastic_only = make_elastic_augmenter(34.0, 4.0, 0.5)(images, seed).numpy()
    with_affine = make_elastic_augmenter(34.0, 4.0, 0.5, rotation_degrees=15.0, scale_jitter=0.15)(images, seed)
    untouched = np.all(elastic_only == images.numpy(), axis=(1, 2, 3))
    assert np.array_equal(np.all(with_affine.numpy() == images.numpy(), axis=(1, 2, 3)), untouched)
    assert not np.allclose(with_affine.numpy()[~untouched], elastic_only[~untouched])
    # affine alone (α = 0) still moves the chosen images
    affine_only = make_elastic_augmenter(0.0, 4.0, 1.0, rotation_degrees=15.0)(images, seed).numpy()
    assert not np.allclose(affine_only, images.numpy())
    for keyword, value in [("rotation_degrees", -1.0), ("rotation_degrees", 181.0), ("rotation_degrees", float("nan")),
                           ("scale_jitter", -0.1), ("scale_jitter", 0.6), ("scale_jitter", float("nan"))]:
        with pytest.raises(ValueError, match=f"{keyword}=.*must be between"):
            make_elastic_augmenter(34.0, 4.0, **{keyword: value})


def test_a_shift_moves_each_chosen_image_as_a_whole_within_its_bound_and_leaves_the_others():
    from training.workloads.mnist_elastic_cnn.elastic_online import random_shifts

    shifts = random_shifts(tf.constant(2000), tf.constant([3, 4], tf.int64), 2.5).numpy()
    assert np.abs(shifts).max() <= 2.5 and np.abs(shifts).max() > 2.45
    assert abs(np.corrcoef(shifts[:, 0], shifts[:, 1])[0, 1]) < 0.1  # rows and columns drawn apart
    # A whole-pixel shift alone moves the content exactly: reading at p + (2, −3) moves it up 2 and right 3.
    image = tf.constant(digits(1)[..., None] / 255.0, tf.float32)
    moved = deform_with_fields(image, tf.zeros([1, 2, 28, 28]), 0.0, 4.0, shifts=tf.constant([[2.0, -3.0]]))
    assert np.allclose(moved.numpy()[0, :-2, 3:, 0], image.numpy()[0, 2:, :-3, 0], atol=1e-6)
    # Through the augmenter (α = 0, shift only): the chosen half moves, its centre of mass by at most the bound.
    images = tf.constant(np.repeat(digits(4), 25, axis=0)[..., None] / 255.0, tf.float32)
    shifted = make_elastic_augmenter(0.0, 4.0, 0.5, shift_pixels=2.0)(images, tf.constant([5, 9], tf.int64)).numpy()
    untouched = np.all(shifted == images.numpy(), axis=(1, 2, 3))
    assert 25 < untouched.sum() < 75
    rows = np.arange(28)[None, :, None]

    def centre_row(batch: np.ndarray) -> np.ndarray:
        return (batch[..., 0] * rows).sum(axis=(1, 2)) / batch[..., 0].sum(axis=(1, 2))

    movement = np.abs(centre_row(shifted) - centre_row(images.numpy()))[~untouched]
    assert movement.max() <= 2.0 + 0.05 and movement.max() > 1.0
    for value in (-0.5, 8.5, float("nan")):
        with pytest.raises(ValueError, match="shift_pixels=.*must be between"):
            make_elastic_augmenter(34.0, 4.0, shift_pixels=value)


def test_rotation_scaling_and_shift_are_settings_that_need_online_elastic():
    from training.settings import RunSpecError
    from training.workload_registry import workload_for

    spec = RunSpec(workload="mnist_elastic_cnn", online_elastic=True, rotation_degrees=15.0, scale_jitter=0.15)
    spec.validate()
    for name, value in [("rotation_degrees", 15.0), ("scale_jitter", 0.15), ("shift_pixels", 2.0)]:
        with pytest.raises(RunSpecError, match=f"{name}={value}: only applies with online_elastic"):
            RunSpec(workload="mnist_elastic_cnn", **{name: value}).validate()
    for name, value in [("rotation_degrees", 200.0), ("scale_jitter", 0.9), ("rotation_degrees", -5.0),
                        ("shift_pixels", 9.0), ("shift_pixels", -1.0)]:
        with pytest.raises(RunSpecError, match=name):
            RunSpec(workload="mnist_elastic_cnn", online_elastic=True, **{name: value}).validate()
    augment = workload_for(spec).augment_batch
    images = tf.constant(digits()[..., None] / 255.0, tf.float32)
    plain_elastic = workload_for(RunSpec(workload="mnist_elastic_cnn", online_elastic=True)).augment_batch
    seed = tf.constant([1, 1], tf.int64)
    assert not np.allclose(augment(images, seed).numpy(), plain_elastic(images, seed).numpy())

"""Elastic deformation of the first 64 real MNIST training images, checked against a scipy reference."""

from __future__ import annotations

import re

import numpy as np
import pytest
from idx_files import read_idx_head
from scipy import ndimage

from training.workloads.mnist_elastic_cnn import elastic

COUNT = 64
SHAPE = (28, 28)


@pytest.fixture(scope="module")
def images(mnist_source) -> np.ndarray:
    return read_idx_head(mnist_source / "train-images-idx3-ubyte.gz", COUNT)


@pytest.fixture(scope="module")
def index() -> np.ndarray:
    return np.arange(COUNT, dtype=np.int64)


def copies(number: int, count: int = COUNT) -> np.ndarray:
    return np.full(count, number, dtype=np.int16)


def scipy_reference(image: np.ndarray, fields: np.ndarray, alpha: float, sigma: float) -> np.ndarray:
    """One image deformed the textbook way: scipy smoothing, then bilinear sampling with zeros outside."""
    rows, columns = np.mgrid[0 : SHAPE[0], 0 : SHAPE[1]].astype(np.float64)
    row_shift = alpha * ndimage.gaussian_filter(fields[0].astype(np.float64), sigma, mode="reflect")
    column_shift = alpha * ndimage.gaussian_filter(fields[1].astype(np.float64), sigma, mode="reflect")
    sampled = ndimage.map_coordinates(image.astype(np.float64), [rows + row_shift, columns + column_shift],
                                      order=1, mode="grid-constant", cval=0.0)
    return np.clip(np.rint(sampled), 0, 255)


# --- Determinism -------------------------------------------------------------------------------------------


def test_alpha_zero_returns_the_input_unchanged(images, index):
    deformed = elastic.elastic_deform(images, index, copies(1), seed=0, alpha=0.0)
    assert np.array_equal(deformed, images)
    assert deformed is not images


def test_same_seed_gives_identical_bytes(images, index):
    first = elastic.elastic_deform(images, index, copies(1), seed=11)
    second = elastic.elastic_deform(images.copy(), index.copy(), copies(1), seed=11)
    assert first.tobytes() == second.tobytes()
    assert not np.array_equal(first, images)


def test_different_seeds_copies_or_indices_give_different_deformations(images, index):
    reference = elastic.elastic_deform(images, index, copies(1), seed=11)
    other_seed = elastic.elastic_deform(images, index, copies(1), seed=12)
    other_copy = elastic.elastic_deform(images, index, copies(2), seed=11)
    other_index = elastic.elastic_deform(images, index + COUNT, copies(1), seed=11)
    for other in (other_seed, other_copy, other_index):
        differing_images = np.any(other != reference, axis=(1, 2))
        assert differing_images.all()


def test_each_example_is_deformed_the_same_whatever_batch_computes_it(images, index):
    whole_batch = elastic.elastic_deform(images, index, copies(3), seed=5)
    order = np.random.default_rng(0).permutation(COUNT)
    for first_part, second_part in ((order[:1], order[1:]), (order[:37], order[37:])):
        split = np.empty_like(whole_batch)
        # The second part first, each in shuffled order: only (seed, index, copy) may matter.
        split[second_part] = elastic.elastic_deform(images[second_part], index[second_part],
                                                    copies(3, len(second_part)), seed=5)
        split[first_part] = elastic.elastic_deform(images[first_part], index[first_part],
                                                   copies(3, len(first_part)), seed=5)
        assert np.array_equal(split, whole_batch)


def test_displacements_are_bit_identical_whatever_the_batch_size_and_position():
    """BLAS picks other kernels for other matrix sizes and for the rows a block or thread split leaves over: the
    fields of an example must not change by one bit with its batch (a Spark partition vs the whole split)."""
    count = 3000
    index, copy = np.arange(count, dtype=np.int64), copies(2, count)
    whole = elastic.displacement_fields(7, index, copy, SHAPE, 34.0, 4.0)
    for start, size in ((0, 1), (5, 7), (17, 33), (100, 200), (1000, 1999)):
        part = elastic.displacement_fields(7, index[start:start + size], copy[start:start + size], SHAPE, 34.0, 4.0)
        assert part.tobytes() == whole[start:start + size].tobytes(), (start, size)


def test_uniform_fields_of_one_example_do_not_depend_on_its_batch(index):
    whole_batch = elastic.uniform_fields(9, index, copies(1), SHAPE)
    alone = elastic.uniform_fields(9, index[40:41], copies(1, 1), SHAPE)
    assert np.array_equal(alone[0], whole_batch[40])


# --- Output and displacement -------------------------------------------------------------------------------


def test_output_keeps_dtype_and_shape_and_stays_within_each_images_range(images, index):
    deformed = elastic.elastic_deform(images, index, copies(1), seed=2, alpha=34.0, sigma=4.0)
    assert deformed.dtype == np.uint8 and deformed.shape == images.shape
    # Bilinear sampling with zero padding mixes pixel values and zeros: it cannot leave [0, max of the image].
    assert np.all(deformed.max(axis=(1, 2)) <= images.max(axis=(1, 2)))
    assert np.all(deformed.max(axis=(1, 2)) > 0)


def test_mean_displacement_grows_with_alpha_in_proportion(index):
    means = [
        np.abs(elastic.displacement_fields(4, index, copies(1), SHAPE, alpha, 4.0)).mean()
        for alpha in (1.0, 8.0, 34.0)
    ]
    assert means[0] > 0 and means[0] < means[1] < means[2]
    assert means[1] == pytest.approx(8 * means[0], rel=1e-4)
    assert means[2] == pytest.approx(34 * means[0], rel=1e-4)


@pytest.mark.parametrize("sigma", [1.0, 4.0, 8.0])  # 8: the kernel (radius 32) is wider than the image
def test_smoothing_equals_scipy_gaussian_filter_with_reflect_boundary(index, sigma):
    fields = elastic.uniform_fields(6, index, copies(1), SHAPE)
    smoothed = elastic.displacement_fields(6, index, copies(1), SHAPE, alpha=1.0, sigma=sigma)
    reference = np.stack([
        [ndimage.gaussian_filter(field.astype(np.float64), sigma, mode="reflect") for field in example]
        for example in fields
    ])
    np.testing.assert_allclose(smoothed, reference, atol=1e-6)


def test_deformation_matches_a_per_image_scipy_reference_within_one_grey_level(images, index):
    alpha, sigma, seed = 34.0, 4.0, 3
    deformed = elastic.elastic_deform(images, index, copies(1), seed=seed, alpha=alpha, sigma=sigma)
    fields = elastic.uniform_fields(seed, index, copies(1), SHAPE)
    reference = np.stack([
        scipy_reference(image, field, alpha, sigma) for image, field in zip(images, fields, strict=True)
    ])
    difference = np.abs(deformed.astype(np.float64) - reference)
    assert difference.max() <= 1
    assert (difference > 0).mean() < 0.001  # off by one only where rounding sits on a .5 boundary


def test_uniform_fields_are_uniform_on_minus_one_to_one(index):
    fields = elastic.uniform_fields(123, index, copies(1), SHAPE)
    assert fields.shape == (COUNT, 2, *SHAPE) and fields.dtype == np.float32
    assert fields.min() >= -1.0 and fields.max() < 1.0
    assert abs(fields.mean()) < 0.01
    assert fields.std() == pytest.approx(1 / np.sqrt(3), abs=0.005)
    # Both halves of [-1, 1) and each field on its own are used evenly.
    assert np.mean(fields < 0) == pytest.approx(0.5, abs=0.01)
    assert abs(fields[:, 0].mean()) < 0.02 and abs(fields[:, 1].mean()) < 0.02


# --- Parameter validation ----------------------------------------------------------------------------------


VALID = {"alpha": elastic.DEFAULT_ALPHA, "sigma": elastic.DEFAULT_SIGMA, "copies": 1, "seed": 0}


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        pytest.param({"alpha": -1.0}, "alpha must be a finite number ≥ 0, got -1.0", id="alpha<0"),
        pytest.param({"alpha": float("nan")}, "alpha must be a finite number ≥ 0, got nan", id="alpha-nan"),
        pytest.param({"sigma": 0.0}, "sigma must be a finite number > 0, got 0.0", id="sigma=0"),
        pytest.param({"sigma": -2.5}, "sigma must be a finite number > 0, got -2.5", id="sigma<0"),
        pytest.param({"copies": 1.5}, "copies must be an integer ≥ 0, got 1.5", id="copies-fractional"),
        pytest.param({"copies": -1}, "copies must be an integer ≥ 0, got -1", id="copies<0"),
        pytest.param({"seed": -3}, "seed must be an integer in [0, 2**63), got -3", id="seed<0"),
        pytest.param({"seed": 2**63}, f"seed must be an integer in [0, 2**63), got {2**63}", id="seed=2**63"),
    ],
)
def test_validate_parameters_rejects_bad_values_naming_them(bad, expected):
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        elastic.validate_parameters(**{**VALID, **bad})


def test_validate_parameters_accepts_the_boundaries():
    elastic.validate_parameters(alpha=0.0, sigma=1e-3, copies=0, seed=0)
    elastic.validate_parameters(alpha=34.0, sigma=4.0, copies=3, seed=2**63 - 1)


def test_elastic_deform_rejects_a_negative_seed_before_any_work(images, index):
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*63\), got -1"):
        elastic.elastic_deform(images, index, copies(1), seed=-1)

"""Gaussian elastic deformation (Simard, Steinkraus & Platt 2003), vectorised over a batch of images.

Per image: two displacement fields drawn uniform(−1, 1), each smoothed by a Gaussian of standard deviation
``sigma`` and scaled by ``alpha``, then the image is resampled at the displaced coordinates with bilinear
interpolation (zero outside the image). The random fields come from a counter-based hash of
(seed, example index, copy, pixel), so the result for one example never depends on which batch, partition
or retry computed it: re-runs write identical bytes.
"""

from __future__ import annotations

import functools

import numpy as np

from training.workloads.mnist_elastic_cnn import DEFAULT_ALPHA, DEFAULT_SIGMA

GAUSSIAN_TRUNCATE = 4.0  # kernel radius in sigmas, as scipy.ndimage.gaussian_filter

_MIX1 = np.uint32(0x7FEB352D)
_MIX2 = np.uint32(0x846CA68B)
_GOLDEN32 = np.uint32(0x9E3779B9)


def validate_parameters(alpha: float, sigma: float, copies: int | None = None, seed: int | None = None) -> None:
    """Reject parameter values that make no sense, naming the value."""
    if not np.isfinite(alpha) or alpha < 0:
        raise ValueError(f"alpha must be a finite number ≥ 0, got {alpha}")
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"sigma must be a finite number > 0, got {sigma}")
    if copies is not None and (int(copies) != copies or copies < 0):
        raise ValueError(f"copies must be an integer ≥ 0, got {copies}")
    if seed is not None and (int(seed) != seed or not 0 <= seed < 2**63):
        raise ValueError(f"seed must be an integer in [0, 2**63), got {seed}")


@functools.lru_cache(maxsize=16)
def gaussian_smoothing_matrix(size: int, sigma: float) -> np.ndarray:
    """Matrix M with ``M @ v`` equal to a 1-D Gaussian filter of v with scipy's 'reflect' boundary."""
    radius = int(GAUSSIAN_TRUNCATE * sigma + 0.5)
    offsets = np.arange(-radius, radius + 1)
    weights = np.exp(-0.5 * (offsets / sigma) ** 2)
    weights /= weights.sum()
    matrix = np.zeros((size, size))
    for row in range(size):
        # 'reflect' mirrors about the edge (d c b a | a b c d | d c b a): period 2·size.
        source = (row + offsets) % (2 * size)
        source = np.where(source >= size, 2 * size - 1 - source, source)
        np.add.at(matrix[row], source, weights)
    matrix.setflags(write=False)
    return matrix


def _example_keys(seed: int, index: np.ndarray, copy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two independent 32-bit keys per example from a splitmix64-style mix of (seed, index, copy)."""
    with np.errstate(over="ignore"):  # multiplication modulo 2**64 is the point
        mixed = np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15)
        mixed = mixed ^ (index.astype(np.uint64) << np.uint64(16)) ^ copy.astype(np.uint64)
        for multiplier in (0xBF58476D1CE4E5B9, 0x94D049BB133111EB):
            mixed = mixed ^ (mixed >> np.uint64(31))
            mixed = mixed * np.uint64(multiplier)
        mixed = mixed ^ (mixed >> np.uint64(29))
    return (mixed & np.uint64(0xFFFFFFFF)).astype(np.uint32), (mixed >> np.uint64(32)).astype(np.uint32)


def uniform_fields(seed: int, index: np.ndarray, copy: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Two uniform(−1, 1) float32 fields per example, shape (n, 2, h, w), from a counter-based hash."""
    key_low, key_high = _example_keys(seed, np.asarray(index), np.asarray(copy))
    counters = np.arange(2 * shape[0] * shape[1], dtype=np.uint32) * _GOLDEN32
    with np.errstate(over="ignore"):
        bits = key_low[:, None] ^ counters[None, :]
        # lowbias32 (Wellons) finaliser, then the second key folded in with one more round.
        bits ^= bits >> np.uint32(16)
        bits *= _MIX1
        bits ^= bits >> np.uint32(15)
        bits *= _MIX2
        bits ^= bits >> np.uint32(16)
        bits ^= key_high[:, None]
        bits *= _MIX1
        bits ^= bits >> np.uint32(15)
    fields = (bits >> np.uint32(8)).astype(np.float32)  # 24 bits: exact in float32
    fields *= np.float32(2.0**-23)
    fields -= np.float32(1.0)
    return fields.reshape(len(key_low), 2, *shape)


def displacement_fields(
    seed: int, index: np.ndarray, copy: np.ndarray, shape: tuple[int, int], alpha: float, sigma: float
) -> np.ndarray:
    """Smoothed, scaled displacements (n, 2, h, w): [:, 0] along rows, [:, 1] along columns."""
    height, width = shape
    fields = uniform_fields(seed, index, copy, shape)
    count = len(fields)
    row_smoother = gaussian_smoothing_matrix(height, sigma).astype(np.float32)
    column_smoother = (gaussian_smoothing_matrix(width, sigma).T * alpha).astype(np.float32)
    # Separable filter as two stacked matrix products: numpy calls BLAS once per (h, w) field, always with the
    # same shapes, so a field's bits never depend on its batch. One GEMM over the whole batch (n·2·h rows) did:
    # BLAS takes other kernels for the rows a block or thread split leaves over, and its float32 sums then differ
    # in the last bit, which can flip a pixel's rounding between a Spark partition and the whole set.
    stacked = fields.reshape(count * 2, height, width)
    smoothed = np.matmul(row_smoother, np.matmul(stacked, column_smoother))
    return smoothed.reshape(count, 2, height, width)


def bilinear_resample(images: np.ndarray, row_displacement: np.ndarray, column_displacement: np.ndarray) -> np.ndarray:
    """Sample each image at (row + dy, col + dx) bilinearly, zero outside; returns rounded uint8."""
    count, height, width = images.shape
    rows = row_displacement + np.arange(height, dtype=np.float32)[:, None]
    cols = column_displacement + np.arange(width, dtype=np.float32)[None, :]
    # Beyond one pixel outside, every neighbour is padding: clipping there changes no result.
    np.clip(rows, -1, height, out=rows)
    np.clip(cols, -1, width, out=cols)
    row0 = np.floor(rows)
    col0 = np.floor(cols)
    rows -= row0
    cols -= col0
    padded_width = width + 3  # one zero column before, two after (the +1 neighbour of the last clip value)
    padded = np.zeros((count, height + 3, padded_width), np.float32)
    padded[:, 1 : height + 1, 1 : width + 1] = images
    image_offsets = np.arange(count, dtype=np.int32) * np.int32((height + 3) * padded_width)
    top_left = (row0.astype(np.int32) + 1) * padded_width + col0.astype(np.int32) + 1 + image_offsets[:, None, None]
    flat = padded.ravel()
    value = flat[top_left]
    right = flat[top_left + 1]
    below = flat[top_left + padded_width]
    below_right = flat[top_left + padded_width + 1]
    right -= value
    right *= cols
    value += right
    below_right -= below
    below_right *= cols
    below += below_right
    below -= value
    below *= rows
    value += below
    np.rint(value, out=value)
    np.clip(value, 0, 255, out=value)
    return value.astype(np.uint8)


def elastic_deform(
    images: np.ndarray,
    index: np.ndarray,
    copy: np.ndarray,
    seed: int,
    alpha: float = DEFAULT_ALPHA,
    sigma: float = DEFAULT_SIGMA,
) -> np.ndarray:
    """Deform a batch of uint8 images (n, h, w); example i uses the stream of (seed, index[i], copy[i])."""
    validate_parameters(alpha, sigma, seed=seed)
    images = np.asarray(images)
    if images.ndim != 3 or images.dtype != np.uint8:
        raise ValueError(f"expected uint8 images of shape (n, h, w), got {images.dtype} {images.shape}")
    if len(index) != len(images) or len(copy) != len(images):
        raise ValueError(f"index ({len(index)}) and copy ({len(copy)}) must match the {len(images)} images")
    if alpha == 0 or len(images) == 0:
        return images.copy()
    displacements = displacement_fields(seed, index, copy, images.shape[1:], alpha, sigma)
    return bilinear_resample(images, displacements[:, 0], displacements[:, 1])

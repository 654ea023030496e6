"""Elastic deformation on the fly, inside the training input pipeline (TensorFlow): every batch is deformed afresh,
as Simard, Steinkraus & Platt (2003) did, instead of reading the same few stored copies every epoch.

The same transformation as :mod:`.elastic` (uniform(−1, 1) fields, smoothed by the same Gaussian
matrices with scipy's 'reflect' boundary, scaled by α, bilinear resampling with zero outside), on float model inputs
and with TensorFlow's stateless random numbers: the input pipeline seeds each batch by run seed, worker and batch
number, so a batch's deformation never depends on which process or retry drew it.

Optionally each deformed image is also rotated and scaled at random about its centre (an affine distortion, as
Cireşan et al. 2010 combined with Simard's elastic one) and moved by a random shift: both are added to the same
displacement field, so the image is still resampled once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from training.workloads.mnist_elastic_cnn import MAX_ROTATION_DEGREES, MAX_SCALE_JITTER, MAX_SHIFT_PIXELS
from training.workloads.mnist_elastic_cnn.elastic import gaussian_smoothing_matrix, validate_parameters


def deform_with_fields(images: Any, fields: Any, alpha: float, sigma: float, affine: Any = None,
                       shifts: Any = None) -> Any:
    """Deform float images (n, h, w, 1) by uniform(−1, 1) fields (n, 2, h, w): [:, 0] moves rows, [:, 1] columns.

    ``affine`` (n, 2, 2), optional: output pixel p (row, column) is read at c + A·(p − c) plus its elastic
    displacement, c the image centre; the identity leaves the image as the elastic field alone makes it.
    ``shifts`` (n, 2), optional: pixels (rows, columns) added to every displacement of an image, so its content
    moves by −shift as a whole; zero leaves it where it was.
    """
    import tensorflow as tf

    height, width = int(images.shape[1]), int(images.shape[2])
    row_smoother = tf.constant(gaussian_smoothing_matrix(height, sigma), tf.float32)
    column_smoother = tf.constant(gaussian_smoothing_matrix(width, sigma).T * alpha, tf.float32)
    displacements = tf.matmul(row_smoother, tf.matmul(fields, column_smoother))  # (n, 2, h, w)
    if affine is not None:
        row_offset = tf.range(height, dtype=tf.float32)[None, :, None] - (height - 1) / 2
        column_offset = tf.range(width, dtype=tf.float32)[None, None, :] - (width - 1) / 2
        affine = tf.cast(affine, tf.float32)[:, :, :, None, None]  # broadcast over (h, w)
        row_shift = (affine[:, 0, 0] - 1) * row_offset + affine[:, 0, 1] * column_offset
        column_shift = affine[:, 1, 0] * row_offset + (affine[:, 1, 1] - 1) * column_offset
        displacements += tf.stack([row_shift, column_shift], axis=1)
    if shifts is not None:
        displacements += tf.cast(shifts, tf.float32)[:, :, None, None]
    rows = tf.clip_by_value(displacements[:, 0] + tf.range(height, dtype=tf.float32)[:, None], -1.0, float(height))
    cols = tf.clip_by_value(displacements[:, 1] + tf.range(width, dtype=tf.float32)[None, :], -1.0, float(width))
    row0, col0 = tf.floor(rows), tf.floor(cols)
    row_weight, col_weight = rows - row0, cols - col0
    # One zero row/column before the image, two after: every neighbour of a clipped coordinate is inside. Flat
    # indices into the padded batch: tf.gather on them is 4× faster than gather_nd with batch_dims (measured).
    padded_height, padded_width = height + 3, width + 3
    padded = tf.reshape(tf.pad(images[..., 0], [[0, 0], [1, 2], [1, 2]]), [-1])
    image_offsets = tf.range(tf.shape(images)[0]) * (padded_height * padded_width)
    top_left = ((tf.cast(row0, tf.int32) + 1) * padded_width + tf.cast(col0, tf.int32) + 1
                + image_offsets[:, None, None])

    def pixel(row_offset: int, column_offset: int) -> Any:
        return tf.gather(padded, top_left + row_offset * padded_width + column_offset)

    upper = pixel(0, 0) + col_weight * (pixel(0, 1) - pixel(0, 0))
    lower = pixel(1, 0) + col_weight * (pixel(1, 1) - pixel(1, 0))
    return (upper + row_weight * (lower - upper))[..., None]


def random_affine(count: Any, seed: Any, rotation_degrees: float, scale_jitter: float) -> Any:
    """(count, 2, 2) matrices R(θ)·diag(s_row, s_column): θ uniform in ±rotation_degrees, each s uniform in
    1 ± scale_jitter (rows and columns apart, so a digit may also get narrower or taller)."""
    import math

    import tensorflow as tf

    angle_seed, scale_seed = (tf.random.experimental.stateless_fold_in(seed, salt) for salt in (101, 102))
    limit = math.radians(rotation_degrees)
    angle = tf.random.stateless_uniform(tf.reshape(count, [1]), angle_seed, minval=-limit, maxval=limit)
    scales = tf.random.stateless_uniform(tf.stack([count, 2]), scale_seed, minval=1.0 - scale_jitter,
                                         maxval=1.0 + scale_jitter)
    cosine, sine = tf.cos(angle), tf.sin(angle)
    rotation = tf.reshape(tf.stack([cosine, -sine, sine, cosine], axis=1), [-1, 2, 2])
    return rotation * scales[:, None, :]  # R · diag(s): column j of R times s_j


def random_shifts(count: Any, seed: Any, shift_pixels: float) -> Any:
    """(count, 2) shifts in pixels, rows and columns drawn apart, each uniform in ±shift_pixels."""
    import tensorflow as tf

    shift_seed = tf.random.experimental.stateless_fold_in(seed, 103)
    return tf.random.stateless_uniform(tf.stack([count, 2]), shift_seed, minval=-shift_pixels, maxval=shift_pixels)


def make_elastic_augmenter(alpha: float, sigma: float, fraction: float = 1.0, rotation_degrees: float = 0.0,
                           scale_jitter: float = 0.0, shift_pixels: float = 0.0) -> Callable[[Any, Any], Any]:
    """``augment(images, seed)`` for the input pipeline: images (n, h, w, 1) float, seed int64[2] (stateless).

    ``fraction`` is the share of each batch that is deformed, image by image at random; the rest pass unchanged
    (their field is zero, and a zero displacement resamples every pixel exactly where it was). A deformed image is
    also rotated by up to ±``rotation_degrees``, scaled by 1 ± ``scale_jitter`` and moved by up to ±``shift_pixels``
    (rows and columns apart) when those are above 0; the elastic fields are drawn as without them.
    """
    validate_parameters(alpha, sigma)
    if not 0.0 <= fraction <= 1.0:  # also refuses NaN
        raise ValueError(f"fraction={fraction!r}: must be between 0 and 1")
    if not 0.0 <= rotation_degrees <= MAX_ROTATION_DEGREES:
        raise ValueError(f"rotation_degrees={rotation_degrees!r}: must be between 0 and {MAX_ROTATION_DEGREES:g}")
    if not 0.0 <= scale_jitter <= MAX_SCALE_JITTER:
        raise ValueError(f"scale_jitter={scale_jitter!r}: must be between 0 and {MAX_SCALE_JITTER:g}")
    if not 0.0 <= shift_pixels <= MAX_SHIFT_PIXELS:
        raise ValueError(f"shift_pixels={shift_pixels!r}: must be between 0 and {MAX_SHIFT_PIXELS:g}")
    with_affine = rotation_degrees > 0 or scale_jitter > 0
    with_shift = shift_pixels > 0

    def augment(images: Any, seed: Any) -> Any:
        import tensorflow as tf

        if (alpha == 0 and not with_affine and not with_shift) or fraction == 0:
            return images
        count = tf.shape(images)[0]
        fields = tf.random.stateless_uniform(tf.stack([count, 2, images.shape[1], images.shape[2]]), seed,
                                             minval=-1.0, maxval=1.0)
        affine = random_affine(count, seed, rotation_degrees, scale_jitter) if with_affine else None
        shifts = random_shifts(count, seed, shift_pixels) if with_shift else None
        if fraction < 1.0:  # which images: a seed split off the batch's own, so the fields stay as before
            choice_seed = tf.random.experimental.stateless_split(seed, 1)[0]
            chosen = tf.cast(tf.random.stateless_uniform(tf.reshape(count, [1]), choice_seed) < fraction,
                             fields.dtype)
            fields *= chosen[:, None, None, None]
            if affine is not None:  # the others get the identity
                affine = tf.eye(2) + (affine - tf.eye(2)) * chosen[:, None, None]
            if shifts is not None:  # and no shift
                shifts *= chosen[:, None]
        return deform_with_fields(images, fields, alpha, sigma, affine, shifts)

    return augment

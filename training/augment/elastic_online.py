"""Elastic deformation on the fly, inside the training input pipeline (TensorFlow): every batch is deformed afresh,
as Simard, Steinkraus & Platt (2003) did, instead of reading the same few stored copies every epoch.

The same transformation as :mod:`training.augment.elastic` (uniform(−1, 1) fields, smoothed by the same Gaussian
matrices with scipy's 'reflect' boundary, scaled by α, bilinear resampling with zero outside), on float model inputs
and with TensorFlow's stateless random numbers: the input pipeline seeds each batch by run seed, worker and batch
number, so a batch's deformation never depends on which process or retry drew it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from training.augment.elastic import gaussian_smoothing_matrix, validate_parameters


def deform_with_fields(images: Any, fields: Any, alpha: float, sigma: float) -> Any:
    """Deform float images (n, h, w, 1) by uniform(−1, 1) fields (n, 2, h, w): [:, 0] moves rows, [:, 1] columns."""
    import tensorflow as tf

    height, width = int(images.shape[1]), int(images.shape[2])
    row_smoother = tf.constant(gaussian_smoothing_matrix(height, sigma), tf.float32)
    column_smoother = tf.constant(gaussian_smoothing_matrix(width, sigma).T * alpha, tf.float32)
    displacements = tf.matmul(row_smoother, tf.matmul(fields, column_smoother))  # (n, 2, h, w)
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


def make_elastic_augmenter(alpha: float, sigma: float, fraction: float = 1.0) -> Callable[[Any, Any], Any]:
    """``augment(images, seed)`` for the input pipeline: images (n, h, w, 1) float, seed int64[2] (stateless).

    ``fraction`` is the share of each batch that is deformed, image by image at random; the rest pass unchanged
    (their field is zero, and a zero displacement resamples every pixel exactly where it was).
    """
    validate_parameters(alpha, sigma)
    if not 0.0 <= fraction <= 1.0:  # also refuses NaN
        raise ValueError(f"fraction={fraction!r}: must be between 0 and 1")

    def augment(images: Any, seed: Any) -> Any:
        import tensorflow as tf

        if alpha == 0 or fraction == 0:
            return images
        count = tf.shape(images)[0]
        fields = tf.random.stateless_uniform(tf.stack([count, 2, images.shape[1], images.shape[2]]), seed,
                                             minval=-1.0, maxval=1.0)
        if fraction < 1.0:  # which images: a seed split off the batch's own, so the fields stay as before
            choice_seed = tf.random.experimental.stateless_split(seed, 1)[0]
            chosen = tf.random.stateless_uniform(tf.reshape(count, [1]), choice_seed) < fraction
            fields *= tf.cast(chosen, fields.dtype)[:, None, None, None]
        return deform_with_fields(images, fields, alpha, sigma)

    return augment

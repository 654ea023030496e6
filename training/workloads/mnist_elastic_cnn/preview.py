"""A PNG grid of original images beside their elastic deformations (README, MLflow artifact)."""

from __future__ import annotations

import io

import numpy as np

from training.datasets.image_records import ImageBatch
from training.workloads.mnist_elastic_cnn.elastic import elastic_deform


def deformation_grid(originals: ImageBatch, seed: int, alpha: float, sigma: float, columns: int = 5) -> bytes:
    """One row per original: the original, then ``columns - 1`` deformed copies (copy numbers 1, 2, …)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = len(originals)
    figure, axes = plt.subplots(rows, columns, figsize=(1.3 * columns, 1.3 * rows + 0.5), squeeze=False)
    for copy_number in range(columns):
        if copy_number == 0:
            images = originals.images
        else:
            copy = np.full(rows, copy_number, np.int16)
            images = elastic_deform(originals.images, originals.index, copy, seed, alpha, sigma)
        for row in range(rows):
            axis = axes[row][copy_number]
            axis.imshow(images[row], cmap="gray_r", vmin=0, vmax=255)
            axis.set_xticks([])
            axis.set_yticks([])
            if row == 0:
                axis.set_title("original" if copy_number == 0 else f"copy {copy_number}", fontsize=9)
    figure.suptitle(f"Elastic deformation α={alpha:g}, σ={sigma:g}, seed {seed}", fontsize=10)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    plt.close(figure)
    return buffer.getvalue()

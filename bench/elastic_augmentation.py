"""Elastic augmentation throughput on one core: Cloudburst's vectorised version vs the per-image SciPy baseline.

Both run on the same real MNIST images, interleaved over several rounds; medians are printed with the ratio.
The baseline is the usual implementation: two ``gaussian_filter`` and one ``map_coordinates(order=1)`` per image.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from results import publish_run, recorded_as, table  # noqa: E402
from scipy.ndimage import gaussian_filter, map_coordinates  # noqa: E402

from training.workloads.mnist_elastic_cnn import DEFAULT_ALPHA, DEFAULT_SIGMA, VENDORED_MNIST, idx  # noqa: E402
from training.workloads.mnist_elastic_cnn.augment_job import DEFORM_BLOCK  # noqa: E402
from training.workloads.mnist_elastic_cnn.elastic import elastic_deform  # noqa: E402

RUNS = {"bench-elastic-augmentation": ("make bench", [])}


def scipy_per_image(images: np.ndarray, rng: np.random.Generator, alpha: float, sigma: float) -> np.ndarray:
    height, width = images.shape[1:]
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    out = np.empty_like(images)
    for i, image in enumerate(images):
        dy = gaussian_filter(rng.uniform(-1, 1, (height, width)), sigma, mode="reflect") * alpha
        dx = gaussian_filter(rng.uniform(-1, 1, (height, width)), sigma, mode="reflect") * alpha
        warped = map_coordinates(image.astype(np.float32), [rows + dy, cols + dx], order=1)
        out[i] = np.clip(np.rint(warped), 0, 255)
    return out


def vectorised(images: np.ndarray, seed: int, alpha: float, sigma: float) -> np.ndarray:
    index = np.arange(len(images), dtype=np.int64)
    copy = np.ones(len(images), np.int16)
    out = np.empty_like(images)
    for start in range(0, len(images), DEFORM_BLOCK):
        block = slice(start, start + DEFORM_BLOCK)
        out[block] = elastic_deform(images[block], index[block], copy[block], seed, alpha, sigma)
    return out


def result_tables(baseline_rates: list[float], vectorised_rates: list[float], images: int) -> tuple[dict, dict]:
    """(values, tables) for docs/results: the medians and their ratio; "rates" (the two contenders' medians) and
    "rounds" (each round's rates and ratio)."""
    baseline, ours = statistics.median(baseline_rates), statistics.median(vectorised_rates)
    values = {"images": images, "rounds": len(baseline_rates), "alpha": DEFAULT_ALPHA, "sigma": DEFAULT_SIGMA,
              "scipy_images_per_second": baseline, "vectorised_images_per_second": ours, "ratio": ours / baseline}
    rates = table([("implementation", "implementation", "text"), ("images/s (median)", "images_per_second", "int"),
                   ("× SciPy", "ratio", "x")],
                  [{"implementation": "SciPy per image (baseline)", "images_per_second": baseline, "ratio": 1.0},
                   {"implementation": "Cloudburst vectorised", "images_per_second": ours, "ratio": ours / baseline}])
    rounds = table([("round", "round", "int"), ("SciPy images/s", "scipy", "int"),
                    ("vectorised images/s", "vectorised", "int"), ("ratio", "ratio", "x")],
                   [{"round": number, "scipy": b, "vectorised": v, "ratio": v / b}
                    for number, (b, v) in enumerate(zip(baseline_rates, vectorised_rates, strict=True), 1)])
    return values, {"rates": rates, "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False)
    parser.add_argument("--images", type=int, default=4096, help="images per round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: %(default)s)")
    args = parser.parse_args()
    run = recorded_as(parser, args, RUNS)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})  # one core, for both contenders
    images = idx.load(str(VENDORED_MNIST))[0]["train"].images[: args.images]
    baseline_rates, vectorised_rates = [], []
    rng = np.random.default_rng(0)
    vectorised(images[:256], 0, DEFAULT_ALPHA, DEFAULT_SIGMA)  # warm-up (smoothing matrix cache)
    for round_number in range(args.rounds):
        started = time.perf_counter()
        scipy_per_image(images, rng, DEFAULT_ALPHA, DEFAULT_SIGMA)
        baseline_rates.append(len(images) / (time.perf_counter() - started))
        started = time.perf_counter()
        vectorised(images, round_number, DEFAULT_ALPHA, DEFAULT_SIGMA)
        vectorised_rates.append(len(images) / (time.perf_counter() - started))
    baseline, ours = statistics.median(baseline_rates), statistics.median(vectorised_rates)
    ratios = [v / b for v, b in zip(vectorised_rates, baseline_rates, strict=True)]
    print(f"elastic deformation, {len(images)} MNIST images × {args.rounds} rounds, one core, "
          f"α={DEFAULT_ALPHA:g} σ={DEFAULT_SIGMA:g}")
    print(f"  scipy per-image baseline : {baseline:10,.0f} images/s (median)")
    print(f"  cloudburst vectorised    : {ours:10,.0f} images/s (median)")
    print(f"  ratio                    : {ours / baseline:10.2f}x  (per-round ratios "
          f"{', '.join(f'{r:.2f}' for r in ratios)}; target >= 5x)")
    publish_run(run, *result_tables(baseline_rates, vectorised_rates, len(images)))


if __name__ == "__main__":
    main()

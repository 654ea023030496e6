"""MNIST elastic CNN: a Simard-style CNN on MNIST enlarged with Gaussian elastic deformations (Simard, Steinkraus &
Platt 2003). ingest (IDX → Parquet) → augment (elastic copies) → shard → train → evaluate.

Standard library only (the Airflow environment imports it): the definition, its settings and the numbers they and
the heavy modules share. The rest of the workload lives beside it, each imported only where it runs: ``idx`` (the
IDX files → Parquet), ``elastic`` (stored copies, NumPy), ``augment_job`` (the augment step, Spark), ``preview``
(a PNG of deformations), ``elastic_online`` (on the fly, TensorFlow), ``model`` (the CNN) and ``trainable``
(readers and the model builder for the strategies).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from training.contract import AUGMENT, EVALUATE, INGEST, REPO_ROOT, SHARD, TRAIN
from training.settings import AUGMENTATION, DATA, TRAINING, RunSpecError, Setting, shown
from training.workload_definition import WorkloadDefinition

if TYPE_CHECKING:
    from training.config import RunSpec

NAME = "mnist_elastic_cnn"
VENDORED_MNIST = REPO_ROOT / "data" / "mnist"  # the four IDX files, gzipped, with their SHA256SUMS
IMAGE_SHAPE = (28, 28)  # every MNIST image: rows, columns
NUM_CLASSES = 10  # the digits 0–9

# Elastic deformation (Simard et al. 2003): the defaults of alpha and sigma, for the settings and the functions.
DEFAULT_ALPHA = 34.0  # displacement scale in pixels
DEFAULT_SIGMA = 4.0  # the Gaussian's standard deviation in pixels
# On the fly only: the bounds of the random rotation, scaling and shift added to the same displacement field.
MAX_ROTATION_DEGREES = 180.0
MAX_SCALE_JITTER = 0.5  # beyond ±50 % a digit leaves the 28 × 28 frame or shrinks to a few pixels
# The digits sit in a 20 × 20 box centred in 28 × 28 (4 pixels to each edge): shifted by 8, a fifth of the box is
# already outside the frame.
MAX_SHIFT_PIXELS = 8.0
# The limits name the dataset (raw-train<N>-test<M>): bounded, so that name is too.
MAX_IMAGE_LIMIT = 10_000_000

SETTINGS = (
    Setting("train_limit", int, 0, "Training images (0 = all)",
            "Keep only the first N training images: quick runs and tests. 0 uses all 50,000 (the training file's "
            "other 10,000 are the validation split).", DATA, minimum=0, maximum=MAX_IMAGE_LIMIT),
    Setting("test_limit", int, 0, "Validation and test images (0 = all)",
            "Keep only the first N images of the validation split (which measures accuracy while training: "
            "time to target, the learning curves) and of the test split (read once, by evaluate). 0 keeps "
            "10,000 of each.", DATA, minimum=0, maximum=MAX_IMAGE_LIMIT),
    Setting("alpha", float, DEFAULT_ALPHA, "α (displacement scale, pixels)",
            "Scale of the smoothed random displacement field (Simard et al. 2003 use 34).", AUGMENTATION,
            minimum=0, maximum=1000),
    Setting("sigma", float, DEFAULT_SIGMA, "σ (smoothing, pixels)",
            "Standard deviation of the Gaussian that smooths the displacement field (Simard et al.: 4).",
            AUGMENTATION, minimum=0, exclusive_minimum=True, maximum=100),
    Setting("online_elastic", bool, False, "Elastic deformation on the fly",
            "Deform every training batch afresh while training (same α and σ), as Simard et al. did, so no epoch "
            "sees the same distortion twice; the stored copies (augment_copies) are deformed again too. Costs about "
            "4.6 ms per 128-image batch (measured; a step is about 28 ms on 2 cores).", AUGMENTATION,
            training_only=True),
    Setting("elastic_fraction", float, 1.0, "Share of each batch deformed on the fly",
            "With online_elastic: the share of each training batch deformed, image by image at random; the rest are "
            "seen as stored. 1 deforms every image (Simard et al.); less keeps undeformed digits, like the test "
            "set's, in every batch.", AUGMENTATION, minimum=0, maximum=1, training_only=True),
    Setting("rotation_degrees", float, 0.0, "Random rotation on the fly (± degrees)",
            "With online_elastic: each deformed image is also rotated about its centre by an angle drawn uniformly "
            "in ± this many degrees (Cireşan et al. 2010 used 15 with elastic deformation). 0: no rotation.",
            AUGMENTATION, minimum=0, maximum=MAX_ROTATION_DEGREES, training_only=True),
    Setting("scale_jitter", float, 0.0, "Random scaling on the fly (± share)",
            "With online_elastic: each deformed image is also scaled about its centre by 1 ± up to this share, rows "
            "and columns apart (Cireşan et al. 2010: 0.15). 0: no scaling.", AUGMENTATION, minimum=0,
            maximum=MAX_SCALE_JITTER, training_only=True),
    Setting("shift_pixels", float, 0.0, "Random shift on the fly (± pixels)",
            "With online_elastic: each deformed image is also moved as a whole by up to ± this many pixels, rows "
            "and columns apart (uniform, sub-pixel), since the elastic field only moves strokes locally. 0: no "
            "shift.", AUGMENTATION, minimum=0, maximum=MAX_SHIFT_PIXELS, training_only=True),
    Setting("convolutions_per_stage", int, 1, "Convolutions per stage",
            "3×3 convolutions before each of the CNN's two poolings (32 then 64 filters). 1 is the fast model "
            "(225,034 parameters); 2 is the deeper one, measured 2.8–3.5× slower per image on 2 cores.",
            TRAINING, minimum=1, maximum=3, training_only=True),
    Setting("dense_units", int, 128, "Dense units", "Units of the CNN's fully connected layer.", TRAINING,
            minimum=16, maximum=4096, training_only=True),
    Setting("batch_norm", bool, False, "Batch normalization",
            "Batch normalization between every convolution and its ReLU, the convolutions without bias. Horovod "
            "averages the ranks' normalization statistics at the end; Downpour refuses it (its server holds "
            "trainable parameters only). The deeper model trains faster with it on CPU, since TensorFlow's bias "
            "gradient is slow there: the full preset ran at about 2,150 images/s with it against 1,750 without (2 "
            "cores, measured).", TRAINING, training_only=True),
)
# Settings of the on-the-fly deformation: stored copies take none of them, so setting one without it is refused.
ONLINE_ELASTIC_ONLY = ("elastic_fraction", "rotation_degrees", "scale_jitter", "shift_pixels")


def raw_uri(spec: RunSpec) -> str:
    """The ingested MNIST with its validation split (``raw-val``: a dataset ingested before there was one keeps
    its name, ``raw``, and is left alone); a slice (first N images) gets its own name."""
    suffix = f"-train{spec.train_limit}-test{spec.test_limit}" if spec.train_limit or spec.test_limit else ""
    return f"{spec.resolved_data_root().rstrip('/')}/mnist/raw-val{suffix}"


def elastic_uri(spec: RunSpec) -> str:
    """Beside the raw dataset: ``…/raw`` becomes ``…/elastic-k1-a34-s4-seed0``."""
    parent, name = raw_uri(spec).rsplit("/", 1)
    stem = name.replace("raw", "elastic", 1)
    return f"{parent}/{stem}-k{spec.augment_copies}-a{spec.alpha:g}-s{spec.sigma:g}-seed{spec.seed}"


def check(spec: RunSpec) -> None:
    if not spec.online_elastic:
        for setting in SETTINGS:
            if setting.name in ONLINE_ELASTIC_ONLY and getattr(spec, setting.name) != setting.default:
                raise RunSpecError(f"{setting.name}={getattr(spec, setting.name)!r}: only applies with "
                                   "online_elastic=true")
    if spec.train_limit and spec.train_limit < spec.total_workers:
        raise RunSpecError(f"train_limit={spec.train_limit!r}: must give every one of the {spec.total_workers} "
                           "workers at least one example")


def uses_batch_norm(spec: RunSpec) -> bool:
    return spec.batch_norm


def check_source(spec: RunSpec) -> None:
    source = spec.resolved_data_source()
    if source.startswith("hdfs://"):  # a landing zone: whether the files are there yet is the sensor's to wait for
        if not urlparse(source).hostname:
            raise RunSpecError(f"data_source={shown(source)}: an hdfs URI needs a namenode host, e.g. "
                               "hdfs://namenode:8020/landing/mnist")
        return
    if not source.startswith(("http://", "https://")) and not Path(source).is_dir():
        raise RunSpecError(f"data_source={shown(source)}: no such directory (give a directory, an hdfs:// "
                           "directory or an http(s) URL)")


DEFINITION = WorkloadDefinition(
    name=NAME,
    title="MNIST elastic CNN",
    study_training_examples=60_000, study_seconds_per_example=0.0004,  # the default study, 2026-12-02
    description="MNIST with elastic deformation: ingest → augment → shard → train → evaluate",
    steps=(INGEST, AUGMENT, SHARD, TRAIN, EVALUATE),
    raw_uri=raw_uri,
    train_uri=elastic_uri,
    ingest="training.workloads.mnist_elastic_cnn.trainable:ingest",
    trainable="training.workloads.mnist_elastic_cnn.trainable:trainable",
    default_source=str(VENDORED_MNIST),
    settings=SETTINGS,
    source_help="MNIST: a directory holding the four IDX files (.gz or raw) with an optional SHA256SUMS — local or "
                "an hdfs:// landing zone the DAG waits for — or an http(s) base URL; empty: the copy vendored in the "
                "repository (offline).",
    check=check,
    batch_norm=uses_batch_norm,  # Downpour refuses it (training.strategy_rules)
    check_source=check_source,
    assets={INGEST: ("mnist_raw", "x-cloudburst://datasets/mnist/raw"),
            AUGMENT: ("mnist_elastic", "x-cloudburst://datasets/mnist/elastic"),
            SHARD: ("mnist_shards", "x-cloudburst://datasets/mnist/shards"),
            TRAIN: ("mnist_elastic_cnn_model", "x-cloudburst://models/mnist_elastic_cnn")},
    tags=("mnist",),
    step_jobs={AUGMENT: "training.workloads.mnist_elastic_cnn.augment_job"},
    # "full": for accuracy, not speed — the deeper CNN (two 3×3 convolutions a stage, 256 dense units) with batch
    # normalization (330,538 parameters), every batch's images deformed afresh with probability ½ (no stored
    # copies), each of those also rotated by up to ±10° and scaled by 1 ± 0.1, 70 epochs of the 50,000 training
    # images and Adam's rate along a half cosine to 0 (learning_rate_decay applies under Horovod; 1 × 1 is plain
    # Keras). Batch normalization and no shift were chosen on the validation split (README "The full preset");
    # measured: 99.57 % test accuracy. Simard et al. 2003 reached 99.6 % with elastic deformations.
    presets={"full": {"augment_copies": 0, "online_elastic": True, "elastic_fraction": 0.5, "epochs": 70,
                      "learning_rate_decay": "cosine", "evaluations_per_epoch": 1,
                      "convolutions_per_stage": 2, "dense_units": 256, "batch_norm": True,
                      "rotation_degrees": 10.0, "scale_jitter": 0.1, "shift_pixels": 0.0}},
)

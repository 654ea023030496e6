"""cloudburst: the command line for Cloudburst's pipeline steps.

    cloudburst ingest mnist       validate the MNIST IDX files and publish them as Parquet
    cloudburst ingest speech      check and label a Speech Commands corpus (or a synthetic one) → Parquet clips
    cloudburst synth-speech       synthesise a Speech Commands corpus offline (espeak-ng, flite, festival)
    cloudburst features           log-mel/MFCC features + augmented copies of the training clips (Spark job)
    cloudburst augment            add elastic deformations of every training image (Spark job)
    cloudburst shard              split the training set into N stratified shards (Spark job)
    cloudburst preview            write a PNG of originals beside their deformations
    cloudburst train              train on the shards with a strategy, record the run in MLflow (Spark job)
    cloudburst evaluate           test a trained run, add accuracy, figures and the model to its MLflow run

Datasets are URIs: a local path, file:///…, or hdfs://namenode:8020/…; the default root is ./var/datasets
(override with CLOUDBURST_DATA_ROOT). Every step publishes atomically and re-running it is a no-op.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from training import VENDORED_MNIST, dataset_names, storage
from training.console import configure_logging

log = logging.getLogger("cloudburst")


def _ingest_mnist(args: argparse.Namespace) -> None:
    from training.datasets import mnist

    sources = args.source or [str(mnist.VENDORED_SOURCE)]
    destination = args.dest or dataset_names.raw_mnist(storage.data_root(), args.train_limit, args.test_limit)
    manifest, created = mnist.ingest(sources if len(sources) > 1 else sources[0], destination, args.overwrite,
                                     args.train_limit, args.test_limit)
    splits = manifest["splits"]
    verb = "published" if created else "already complete, nothing to do:"
    log.info("%s %s (train %d, test %d images, data_version %s)", verb, manifest["uri"],
             splits["train"]["rows"], splits["test"]["rows"], manifest["data_version"])


DEFAULT_REPETITIONS = 2  # utterances of each keyword per synthetic speaker


def synthetic_corpus_dir(data_root: str, speakers: int, seed: int) -> Path:
    """Where the synthetic corpus for a data root lives: beside the datasets when they are local files (so tests
    and other roots stay apart), else under the checkout's var/ (the TTS engines write local files)."""
    from training.datasets.speech_synthesis import default_corpus_dir

    default = default_corpus_dir(speakers, DEFAULT_REPETITIONS, seed)
    if data_root.startswith("file://"):
        return Path(storage.resolve(data_root).path) / "corpora" / default.name
    return default


def _ingest_speech(args: argparse.Namespace) -> None:
    from training.config import SYNTHETIC_SOURCE, RunSpec
    from training.datasets import speech_ingest

    spec = RunSpec(workload="kws_densenet_bilstm", data_source=args.source, speakers=args.speakers,
                   kws_task=args.task, resample=args.resample, seed=args.seed, data_sha256=args.sha256,
                   data_root=args.data_root or "").validate()
    source = spec.resolved_data_source()
    if source == SYNTHETIC_SOURCE:
        from training.datasets.speech_synthesis import synthesize_corpus

        corpus = synthetic_corpus_dir(spec.resolved_data_root(), spec.speakers, spec.seed)
        report = synthesize_corpus(corpus, speakers=spec.speakers, repetitions=DEFAULT_REPETITIONS, seed=spec.seed)
        log.info("synthetic corpus %s: %d utterances of %d speakers", corpus, report["utterances"], report["speakers"])
        source = str(corpus)
    destination = args.dest or spec.raw_uri()
    manifest, created = speech_ingest.ingest(source, destination, spec.kws_task, spec.resample, spec.seed,
                                             spec.data_sha256, args.overwrite)
    verb = "published" if created else "already complete, nothing to do:"
    splits = manifest["splits"]
    log.info("%s %s (train %d, validation %d, test %d clips; %d files skipped — see ingest_report.json; "
             "data_version %s)", verb, manifest["uri"], splits["train"]["rows"], splits["validation"]["rows"],
             splits["test"]["rows"], manifest["skipped"], manifest["data_version"])


def _synth_speech(args: argparse.Namespace) -> None:
    from training.datasets import speech_synthesis

    speech_synthesis.run(args)


def _features(args: argparse.Namespace) -> None:
    from training.jobs import features

    features.run(args, master=args.master)


def _augment(args: argparse.Namespace) -> None:
    from training.jobs import augment

    augment.run(args, master=args.master)


def _shard(args: argparse.Namespace) -> None:
    from training.jobs import shard

    shard.run(args, master=args.master)


def _preview(args: argparse.Namespace) -> None:
    from training.augment import elastic
    from training.augment.preview import deformation_grid
    from training.datasets import mnist

    elastic.validate_parameters(args.alpha, args.sigma, seed=args.seed)
    batch = mnist.read_split(args.source, "train")
    originals = type(batch)(*(column[: args.rows] for column in (batch.images, batch.labels, batch.index, batch.copy)))
    Path(args.out).write_bytes(deformation_grid(originals, args.seed, args.alpha, args.sigma, args.columns))
    log.info("wrote %s", args.out)


def _train(args: argparse.Namespace) -> None:
    from training.config import RunSpec
    from training.jobs.train import check_inputs, train_and_stop

    spec = RunSpec.from_args(args)
    check_inputs(spec)  # before the JVM starts
    train_and_stop(spec, args.master)


def _evaluate(args: argparse.Namespace) -> None:
    from training.config import RunSpec
    from training.jobs.evaluate import evaluate_run, summary

    spec = RunSpec.from_args(args)
    print(summary(spec, evaluate_run(spec)), flush=True)


def build_parser() -> argparse.ArgumentParser:
    from training.augment import elastic
    from training.jobs import augment, shard
    from training.jobs.spark_session import DEFAULT_MASTER

    parser = argparse.ArgumentParser(prog="cloudburst", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    ingest = commands.add_parser("ingest", help="validate a raw dataset and publish it as Parquet")
    datasets = ingest.add_subparsers(dest="dataset", required=True, metavar="DATASET")
    ingest_mnist = datasets.add_parser(
        "mnist", help="MNIST from IDX files (.gz or raw)",
        description="Validate the four MNIST IDX files (magic, dimensions, length, labels 0–9, gzip framing, "
                    "sha256 against SHA256SUMS or, for a URL, the canonical MNIST content) and publish "
                    "train/test as Parquet. Nothing is written if any check fails.")
    ingest_mnist.add_argument("--source", action="append",
                              help="a directory, an http(s) base URL, or (repeat 4×) the four file paths "
                                   f"(default: the vendored copy in {VENDORED_MNIST})")
    ingest_mnist.add_argument("--dest", default=None,
                              help=f"output URI (default: {augment.default_raw_dataset()}, -train<N>-test<M> "
                                   "appended for a slice)")
    ingest_mnist.add_argument("--train-limit", type=int, default=0, help="keep the first N training images (0: all)")
    ingest_mnist.add_argument("--test-limit", type=int, default=0, help="keep the first N test images (0: all)")
    ingest_mnist.add_argument("--overwrite", action="store_true", help="replace a different dataset at --dest")
    ingest_mnist.set_defaults(handler=_ingest_mnist)

    ingest_speech = datasets.add_parser(
        "speech", help="Speech Commands (v0.01/v0.02 layout) or a synthetic corpus → labelled 1 s clips",
        description="Check every clip (16-bit PCM mono 16 kHz; bad files are skipped and listed with the reason "
                    "in ingest_report.json), split by validation_list.txt/testing_list.txt or the sha1 rule, "
                    "label for the 12- or 35-class task and publish Parquet clips plus the background noise. "
                    "Archives are extracted safely (no absolute paths, '..', links or members outside).")
    ingest_speech.add_argument("--source", default="synthetic",
                               help="'synthetic' (synthesise offline first), a corpus directory, a .tar.gz, or an "
                                    "http(s) URL of one (default: %(default)s)")
    ingest_speech.add_argument("--sha256", default="", help="expected sha256 of a .tar.gz source")
    ingest_speech.add_argument("--speakers", type=int, default=100,
                               help="synthetic speakers (default: %(default)s)")
    ingest_speech.add_argument("--task", type=int, default=12, choices=(12, 35),
                               help="12: ten keywords + _silence_ + _unknown_; 35: every word (default: 12)")
    ingest_speech.add_argument("--resample", action="store_true",
                               help="resample clips at other rates to 16 kHz instead of skipping them")
    ingest_speech.add_argument("--seed", type=int, default=0,
                               help="seeds synthesis and the sampling of _unknown_/_silence_ (default: 0)")
    ingest_speech.add_argument("--data-root", default=None, help="dataset root (default: $CLOUDBURST_DATA_ROOT "
                                                                 "or ./var/datasets)")
    ingest_speech.add_argument("--dest", default=None,
                               help="output URI (default: <data root>/speech_commands/<source>/clips-task<T>)")
    ingest_speech.add_argument("--overwrite", action="store_true", help="replace a different dataset at --dest")
    ingest_speech.set_defaults(handler=_ingest_speech)

    from training.datasets import speech_synthesis

    synth = commands.add_parser(
        "synth-speech", help="synthesise a Speech Commands-layout corpus offline",
        description="Write <word>/<speaker>_nohash_<n>.wav (1 s, 16 kHz mono 16-bit), _background_noise_/ and the "
                    "split lists, with Debian's offline TTS engines (espeak-ng with per-speaker voice variants, "
                    "flite, festival) and a per-speaker vocal-tract warp. Deterministic for a seed; parallel over "
                    "cores; a complete corpus is not synthesised again.")
    speech_synthesis.add_arguments(synth)
    synth.set_defaults(handler=_synth_speech)

    spark_help = f"Spark master (default: spark-submit's, else $CLOUDBURST_SPARK_MASTER or {DEFAULT_MASTER})"

    def spark_command(name: str, help_text: str, description: str, add_arguments, handler) -> None:
        """A subcommand that runs a Spark job: its own arguments plus --master."""
        command = commands.add_parser(name, help=help_text, description=description)
        add_arguments(command)
        command.add_argument("--master", default=None, help=spark_help)
        command.set_defaults(handler=handler)

    spark_command(
        "augment", "elastic deformation of the training images (Spark job)",
        "Add --copies Gaussian elastic deformations (Simard et al. 2003) of every training image; originals are "
        "kept and the test split is copied unchanged. Deterministic per (seed, example, copy): a re-run writes "
        "identical bytes.", augment.add_arguments, _augment)
    from training.jobs import features

    spark_command(
        "features", "keyword-spotting features and augmented training copies (Spark job)",
        "Compute log-mel (40 bands, 25 ms window, 10 ms hop) or MFCC features of every clip with tf.signal, plus "
        "--copies augmented copies of each training clip (random time shift of ±100 ms, background noise at a "
        "random SNR); validation and test are never augmented.", features.add_arguments, _features)
    spark_command(
        "shard", "stratified, deterministic shards of the training split (Spark job)",
        "Deal the training split into N = nodes × workers-per-node shards, stratified by label (per class, shard "
        "sizes differ by at most one), shuffled with a seed. Each shard is one Parquet file a worker reads with "
        "pyarrow alone.", shard.add_arguments, _shard)

    preview = commands.add_parser("preview", help="PNG grid of originals beside their deformations")
    preview.add_argument("--source", default=augment.default_raw_dataset(), help="image dataset (default: %(default)s)")
    preview.add_argument("--out", default="elastic-preview.png", help="PNG path (default: %(default)s)")
    preview.add_argument("--rows", type=int, default=6, help="originals shown (default: %(default)s)")
    preview.add_argument("--columns", type=int, default=6, help="original + copies per row (default: %(default)s)")
    preview.add_argument("--alpha", type=float, default=elastic.DEFAULT_ALPHA, help="α (default: %(default)s)")
    preview.add_argument("--sigma", type=float, default=elastic.DEFAULT_SIGMA, help="σ (default: %(default)s)")
    preview.add_argument("--seed", type=int, default=0, help="seed (default: %(default)s)")
    preview.set_defaults(handler=_preview)

    from training.config import RunSpec

    spark_command(
        "train", "train with a strategy on the shards and record the run in MLflow (Spark job)",
        "Train the workload with the strategy on nodes × workers-per-node workers, reading the shards that "
        "'cloudburst shard' made for the same settings. Checkpoints every epoch under "
        "<data root>/runs/<workload>/<run name>/: re-running resumes, a finished run is a no-op.",
        RunSpec.add_arguments, _train)
    evaluate = commands.add_parser(
        "evaluate", help="test accuracy, confusion matrix and the model of a trained run → its MLflow run",
        description="Evaluate the run trained with the same settings (same --run-name) and print a summary.")
    RunSpec.add_arguments(evaluate)
    evaluate.set_defaults(handler=_evaluate)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        args.handler(args)
    except (storage.DatasetError, ValueError, FileNotFoundError) as error:  # e.g. a TTS engine not installed
        log.error("%s", error)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

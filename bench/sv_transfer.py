"""Transfer that knows voices, for speaker model A: a trunk pretrained as a speaker classifier on a separate, larger
pool of synthetic speakers, fine-tuned on the corpus's sv_train speakers — against training from scratch, against
a from-scratch control on the pooled data (pool + sv_train, as many examples as pretraining and fine-tuning
together, so a gain is transfer and not more data), and beside the keyword-spotter source the pipeline offers.

What it runs (plain Keras on both cores, outside the pipeline, with the pipeline's model A, trial lists and
scoring, as `make bench-sv` does):
1. the corpus (the demo's: 300 speakers, seed 0) and its sv_train / sv_dev / sv_eval speakers and trials;
2. the pretraining pool: another synthetic corpus (500 speakers, two takes of each word, as the corpus) from
   another seed — a pool of 1,000 speakers saying each word once stayed at chance for 3 pretraining epochs (too
   few clips a speaker for that budget, it seems). Its speakers are drawn from generators keyed by (seed, speaker
   number), so none is a speaker of the corpus — by construction, and checked here: no shared speaker id, no
   shared clip (sha1 of the samples); every pool speaker is a pretraining class, none is in a trial;
3. model A from scratch on sv_train; model A pretrained on the pool; model A from the pool's trunk and embedding
   layer (head alone for one epoch, then every layer at a quarter of the rate); model A from scratch on pool +
   sv_train; model A from a keyword spotter trained on the sv_train clips (head alone, then the upper three trunk
   units at a quarter of the rate — the pipeline's `transfer_from` stages; with --kws-epochs, about 13 min more);
4. after every epoch, the development EER (raw cosine, sv_dev trials: the clock); at the end, every model on the
   sv_eval trials (S-norm against the sv_train cohort), EER with its 95 % bootstrap interval over speakers, and
   each model's EER minus scratch's (and the pool transfer's minus the pooled control's) with the paired interval.

Targets (issue 42, point 3): the pool transfer reaches scratch's final development EER in ≤ 50 % of scratch's
epochs, and its evaluation EER is at least as good as scratch's; the seconds include the pretraining.

    .venv/training/bin/python bench/sv_transfer.py [--pool-speakers 500] [--epochs 8] [--kws-epochs 4]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from results import publish_run, recorded_as, table
from speaker_verification import (
    DevEqualErrorRate,
    build_embedder,
    fit,
    read_corpus,
    speaker_sets_and_trials,
    summarise,
    train_spotter,
)

from training import REPO_ROOT

BENCH_ROOT = REPO_ROOT / "var" / "bench" / "sv-transfer"
RUNS = {"bench-sv-transfer": ("make bench-sv-transfer", [])}
FINE_TUNE_RATE_FACTOR = 0.25  # the pipeline's (training.workloads.speaker_verification.transfer)
KWS_FINE_TUNED_UNITS = 3  # bilstm, to_sequence, block3: the pipeline's fine_tune stage
SCRATCH, POOL_ONLY, POOL_TRANSFER, POOLED_CONTROL, KWS_TRANSFER = (
    "scratch", "pool_pretrained_only", "pool_transfer", "pooled_control", "kws_transfer")
TITLES = {SCRATCH: "from scratch (sv_train)", POOL_ONLY: "pool-pretrained, not fine-tuned",
          POOL_TRANSFER: "pool transfer (pretrained on the pool, fine-tuned on sv_train)",
          POOLED_CONTROL: "from scratch on pool + sv_train (control)",
          KWS_TRANSFER: "keyword-spotter transfer (the pipeline's option)"}
CONDITIONS = ("all", "different_word", "same_word", "hard")


class BenchError(Exception):
    """A refused setting or corpus: one line, nothing trained."""


def check_arguments(args: argparse.Namespace) -> None:
    """Settings the comparison cannot be fair or finish with are refused before anything is synthesised."""
    if args.pool_seed == args.seed:
        raise BenchError(f"--pool-seed {args.pool_seed} is the corpus's seed: the pool must come from other "
                         "generators (another seed), so that no pool speaker is a corpus speaker")
    for name in ("speakers", "pool_speakers", "epochs", "pretrain_epochs", "batch_size", "repetitions",
                 "pool_repetitions", "resamples"):
        if getattr(args, name) < 1:
            raise BenchError(f"--{name.replace('_', '-')} must be ≥ 1, got {getattr(args, name)}")
    if args.epochs < 2:
        raise BenchError(f"--epochs {args.epochs}: transfers need one head-only epoch and at least one to fine-tune")
    if not 0 < args.learning_rate < 1:
        raise BenchError(f"--learning-rate must be in (0, 1), got {args.learning_rate}")


def check_pool_disjoint(corpus: dict[str, Any], pool: dict[str, Any]) -> None:
    """No pool speaker is a corpus speaker and no pool clip is a corpus clip (by the sha1 of its samples)."""
    shared_speakers = sorted(set(map(str, corpus["speaker"])) & set(map(str, pool["speaker"])))
    if shared_speakers:
        raise BenchError(f"the pretraining pool shares {len(shared_speakers)} speakers with the corpus (e.g. "
                         f"{shared_speakers[0]}): it would have heard trial speakers")
    shared_clips = set(corpus["digest"]) & set(pool["digest"])
    if shared_clips:
        raise BenchError(f"the pretraining pool shares {len(shared_clips)} clips with the corpus (sha1 "
                         f"{sorted(shared_clips)[0][:12]}…)")


def pooled_labels(pool_speakers: np.ndarray, train_speakers: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Class labels for the pool's clips and the sv_train clips in one classifier (pool speakers first), and the
    number of classes."""
    pool_names = sorted(set(map(str, pool_speakers)))
    train_names = sorted(set(map(str, train_speakers)))
    label = {name: index for index, name in enumerate([*pool_names, *train_names])}
    return (np.array([label[str(s)] for s in pool_speakers], np.int32),
            np.array([label[str(s)] for s in train_speakers], np.int32), len(label))


def matched_epochs(examples: int, pooled_examples_per_epoch: int) -> int:
    """Epochs of the pooled control that see about as many examples as pretraining plus fine-tuning (at least 1)."""
    return max(1, round(examples / pooled_examples_per_epoch))


def transfer_from_pool(pretrained: Any, features: np.ndarray, labels: np.ndarray, classes: int,
                       args: argparse.Namespace, dev_eer: DevEqualErrorRate) -> tuple[Any, list[dict[str, float]]]:
    """Model A with the pool model's trunk and embedding layer: the head alone for one epoch, then every layer at
    a quarter of the rate (the source already knows voices, so nothing stays frozen)."""
    from training.workloads.speaker_verification.speaker_embedding import (
        EMBEDDING_LAYER,
        freeze_trunk,
        transfer_trunk,
        trunk_units,
    )

    model = build_embedder("log_mel", features.shape[1:], classes, args.seed)
    transfer_trunk(pretrained, model)
    model.get_layer(EMBEDDING_LAYER).set_weights(pretrained.get_layer(EMBEDDING_LAYER).get_weights())
    freeze_trunk(model, trainable_blocks=0)
    model.get_layer(EMBEDDING_LAYER).trainable = False
    rows = fit(model, features, labels, 1, args.batch_size, args.learning_rate, dev_eer)
    freeze_trunk(model, trainable_blocks=len(trunk_units(model)))
    model.get_layer(EMBEDDING_LAYER).trainable = True
    rows += fit(model, features, labels, args.epochs - 1, args.batch_size,
                args.learning_rate * FINE_TUNE_RATE_FACTOR, dev_eer, first_epoch=1)
    return model, rows


def transfer_from_spotter(features: np.ndarray, labels: np.ndarray, words: np.ndarray, classes: int,
                          args: argparse.Namespace, dev_eer: DevEqualErrorRate) -> tuple[Any, list, dict]:
    """The pipeline's keyword-spotter source: a spotter trained on the sv_train clips with their words as labels,
    its trunk into model A, the head alone, then the upper three trunk units at a quarter of the rate."""
    from training.workloads.speaker_verification.speaker_embedding import freeze_trunk, transfer_trunk

    spotter, seconds, history = train_spotter(features, words, args)
    source = {"epochs": args.kws_epochs, "seconds": seconds,
              "examples": len(features) * args.kws_epochs,
              "training_accuracy": float(history.history["accuracy"][-1])}
    model = build_embedder("log_mel", features.shape[1:], classes, args.seed)
    transfer_trunk(spotter, model)
    freeze_trunk(model, trainable_blocks=0)
    rows = fit(model, features, labels, 1, args.batch_size, args.learning_rate, dev_eer)
    freeze_trunk(model, trainable_blocks=KWS_FINE_TUNED_UNITS)
    rows += fit(model, features, labels, args.epochs - 1, args.batch_size,
                args.learning_rate * FINE_TUNE_RATE_FACTOR, dev_eer, first_epoch=1)
    return model, rows, source


def variant_summary(rows: list[dict[str, float]], target: float, examples_per_epoch: int,
                    source: dict[str, Any] | None, scratch_epochs: int) -> dict[str, Any]:
    """One variant's clock: epochs and seconds to ``target`` (scratch's final development EER) on its own, and
    with its source's training (pretraining, the spotter) counted; whether the epochs are ≤ half of scratch's."""
    summary = summarise(rows, target)
    source_seconds = source["seconds"] if source else 0.0
    source_examples = source["examples"] if source else 0
    reached = summary["epochs_to_target"]
    summary.update({
        "source_seconds": source_seconds,
        "examples": examples_per_epoch * len(rows) + source_examples,
        "seconds_with_source": summary["seconds"] + source_seconds,
        "seconds_to_target_with_source": None if reached is None else summary["seconds_to_target"] + source_seconds,
        "epochs_within_half": reached is not None and reached <= scratch_epochs / 2})
    return summary


def eval_differences(report: Any, evaluation: Any, pairs: list[tuple[str, str]], resamples: int, seed: int
                     ) -> dict[str, dict[str, dict[str, float]]]:
    """EER(first) − EER(second) on the sv_eval trials per condition, with the paired 95 % bootstrap interval over
    speakers; keyed "first − second"."""
    from training.evaluation import verification

    def eer(labels: np.ndarray, scores: np.ndarray) -> float:
        return verification.equal_error_rate(labels, scores).value

    labels, speakers = evaluation.label, np.asarray(evaluation.model_speaker)
    result: dict[str, dict[str, dict[str, float]]] = {}
    for first, second in pairs:
        by_condition = {}
        for condition in CONDITIONS:
            mask = evaluation.condition(condition)
            if not ((labels[mask] == 1).any() and (labels[mask] == 0).any()):
                continue
            difference, low, high = verification.paired_bootstrap_difference(
                labels[mask], report.evaluation_scores[first][mask], report.evaluation_scores[second][mask],
                speakers[mask], eer, resamples, seed)
            by_condition[condition] = {"difference": difference, "ci_low": low, "ci_high": high}
        result[f"{first} − {second}"] = by_condition
    return result


def verdict(low: float, high: float) -> str:
    return "better (excludes 0)" if high < 0 else "worse (excludes 0)" if low > 0 else "includes 0"


def result_tables(values: dict[str, Any]) -> dict[str, Any]:
    """The tables the docs show: the clock (development EER), the evaluation, the paired differences, the curves."""
    variants = values["variants"]
    clock = table([("model A", "title", "text"), ("epochs on sv_train", "epochs", "int"),
                   ("final dev EER", "final_dev_eer", "pct"), ("epochs to scratch's final dev EER",
                                                                 "epochs_to_target", "int"),
                   ("s to it", "seconds_to_target", "s"), ("source's s", "source_seconds", "s"),
                   ("s to it, source counted", "seconds_to_target_with_source", "s"),
                   ("examples seen", "examples", "int")],
                  [{"title": TITLES[name], "epochs": len(v["rows"]), **v} for name, v in variants.items()])
    evaluation = table([("model A", "title", "text"), ("condition", "condition", "text"), ("EER", "eer", "pct"),
                        ("95 % CI low", "eer_ci_low", "pct"), ("95 % CI high", "eer_ci_high", "pct"),
                        ("minDCF.01", "min_dcf_p01", "num")],
                       [{"title": TITLES[name], "condition": condition, **metrics}
                        for name, by_condition in values["evaluation"].items()
                        for condition, metrics in by_condition.items()])
    differences = table([("difference", "pair", "text"), ("condition", "condition", "text"),
                         ("EER difference", "difference", "pct"), ("95 % CI low", "ci_low", "pct"),
                         ("95 % CI high", "ci_high", "pct"), ("interval", "verdict", "text")],
                        [{"pair": pair, "condition": condition, **d, "verdict": verdict(d["ci_low"], d["ci_high"])}
                         for pair, by_condition in values["differences"].items()
                         for condition, d in by_condition.items()])
    curve_rows = []
    for name, variant in variants.items():
        for row in variant["rows"]:
            curve_rows.append({"title": TITLES[name], "epoch": row["epoch"], "dev_eer": row["dev_eer"],
                               "accuracy": row["accuracy"], "seconds": row["seconds"]})
    curves = table([("model A", "title", "text"), ("epoch", "epoch", "int"), ("dev EER", "dev_eer", "pct"),
                    ("training accuracy", "accuracy", "pct"), ("s", "seconds", "s")], curve_rows)
    return {"clock": clock, "evaluation": evaluation, "differences": differences, "curves": curves}


def curves_png(variants: dict[str, dict[str, Any]], target: float) -> bytes:
    """Development EER against seconds of training, the source's seconds counted (a pretrained model starts
    later), with scratch's final EER as a line."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.5))
    for name, variant in variants.items():
        # The pool transfer's line starts with its pretraining epochs (the pool model on the same dev trials).
        rows = [*variant.get("pretraining_rows", []), *variant["rows"]]
        start = 0.0 if "pretraining_rows" in variant else variant["source_seconds"]
        seconds = start + np.cumsum([row["seconds"] for row in rows])
        axis.plot(seconds / 60, [100 * row["dev_eer"] for row in rows], marker="o", label=TITLES[name])
    axis.axhline(100 * target, color="grey", linestyle="--", linewidth=1, label="scratch's final dev EER")
    axis.set(xlabel="minutes of training (source's counted)", ylabel="development EER (%)",
             title="Model A: development EER while training")
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, default=300, help="the corpus's synthetic speakers (default 300)")
    parser.add_argument("--repetitions", type=int, default=2, help="the corpus's takes of each word (default 2)")
    parser.add_argument("--pool-speakers", type=int, default=500,
                        help="speakers of the pretraining pool (default 500)")
    parser.add_argument("--pool-repetitions", type=int, default=2, help="the pool's takes of each word (default 2)")
    parser.add_argument("--pool-seed", type=int, default=1, help="the pool's seed; not the corpus's (default 1)")
    parser.add_argument("--epochs", type=int, default=8, help="epochs on sv_train of every model (default 8)")
    parser.add_argument("--pretrain-epochs", type=int, default=8, help="epochs of pretraining on the pool "
                        "(default 8: with 4 the pool model had only begun to learn, dev EER 18.7 %%)")
    parser.add_argument("--kws-epochs", type=int, default=0,
                        help="epochs of a keyword spotter whose trunk is a further source, as the pipeline's "
                             "transfer_from offers (default 0: left out; make bench-sv measures it; 4 adds ~13 min)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.002)
    parser.add_argument("--enrollment", type=int, default=3, help="enrollment utterances per speaker (default 3)")
    parser.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (default 200)")
    parser.add_argument("--seed", type=int, default=0, help="the corpus's seed and the models' (default 0)")
    parser.add_argument("--output", type=Path, default=BENCH_ROOT / "transfer.json")
    return parser


def main(argv: list[str] | None = None) -> int:
    argument_parser = parser()
    args = argument_parser.parse_args(argv)
    try:
        check_arguments(args)
    except BenchError as error:
        print(f"bench-sv-transfer: {error}", file=sys.stderr)
        return 2
    run = recorded_as(argument_parser, args, RUNS)
    try:
        values = measure(args)
    except BenchError as error:
        print(f"bench-sv-transfer: {error}", file=sys.stderr)
        return 2
    publish_run(run, values, result_tables(values))
    return 0


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import tensorflow as tf

    from training.speech.audio.features import compute_features
    from training.speech.synthesis.corpus import default_corpus_dir, synthesize_corpus
    from training.workloads.speaker_verification import report as sv
    from training.workloads.speaker_verification.speaker_embedding import embedding_model

    started = time.perf_counter()
    corpora = {}
    for name, speakers, repetitions, seed in (("corpus", args.speakers, args.repetitions, args.seed),
                                              ("pool", args.pool_speakers, args.pool_repetitions, args.pool_seed)):
        directory = default_corpus_dir(speakers, repetitions, seed)
        synthesize_corpus(directory, speakers=speakers, repetitions=repetitions, seed=seed)
        corpora[name] = read_corpus(directory)
        print(f"{name} {directory.name}: {len(corpora[name]['audio'])} clips of "
              f"{len(set(corpora[name]['speaker']))} speakers ({time.perf_counter() - started:.0f} s)", flush=True)
    corpus, pool = corpora["corpus"], corpora["pool"]
    check_pool_disjoint(corpus, pool)

    in_set, development, evaluation = speaker_sets_and_trials(corpus, args.enrollment, args.seed)
    print("speakers per set: " + ", ".join(f"{name} {len(members)}" for name, members in in_set.items())
          + f"; pool {len(set(pool['speaker']))} (none in a trial)", flush=True)

    tf.config.threading.set_intra_op_parallelism_threads(2)
    features = compute_features(corpus["audio"], "log_mel").astype(np.float32)
    pool_features = compute_features(pool["audio"], "log_mel").astype(np.float32)
    del corpus["audio"], pool["audio"]
    train_rows = np.flatnonzero(np.isin(corpus["speaker"], in_set["sv_train"]))
    train_label = {speaker: label for label, speaker in enumerate(in_set["sv_train"])}
    labels = np.array([train_label[s] for s in corpus["speaker"][train_rows]], np.int32)
    train_features, classes = features[train_rows], len(in_set["sv_train"])
    dev_eer = DevEqualErrorRate(features, development)
    models: dict[str, Any] = {}
    rows: dict[str, list[dict[str, float]]] = {}
    sources: dict[str, dict[str, Any]] = {}

    print(f"\n{TITLES[SCRATCH]}: {args.epochs} epochs of {len(train_rows)} clips", flush=True)
    models[SCRATCH] = build_embedder("log_mel", features.shape[1:], classes, args.seed)
    rows[SCRATCH] = fit(models[SCRATCH], train_features, labels, args.epochs, args.batch_size, args.learning_rate,
                        dev_eer)

    pool_labels, train_pooled_labels, pooled_classes = pooled_labels(pool["speaker"], corpus["speaker"][train_rows])
    print(f"\npretraining on the pool: {args.pretrain_epochs} epochs of {len(pool_features)} clips, "
          f"{len(set(pool_labels))} speakers", flush=True)
    pretrained = build_embedder("log_mel", features.shape[1:], len(set(pool_labels)), args.seed)
    pretraining = fit(pretrained, pool_features, pool_labels, args.pretrain_epochs, args.batch_size,
                      args.learning_rate, dev_eer)
    sources[POOL_TRANSFER] = {"epochs": args.pretrain_epochs, "rows": pretraining,
                              "seconds": sum(row["seconds"] for row in pretraining),
                              "examples": len(pool_features) * args.pretrain_epochs}
    models[POOL_ONLY] = pretrained

    print(f"\n{TITLES[POOL_TRANSFER]}", flush=True)
    models[POOL_TRANSFER], rows[POOL_TRANSFER] = transfer_from_pool(pretrained, train_features, labels, classes, args,
                                                                    dev_eer)

    pooled_features = np.concatenate([pool_features, train_features])
    pooled = np.concatenate([pool_labels, train_pooled_labels])
    del pool_features
    epochs = matched_epochs(sources[POOL_TRANSFER]["examples"] + len(train_rows) * args.epochs, len(pooled))
    print(f"\n{TITLES[POOLED_CONTROL]}: {epochs} epochs of {len(pooled)} clips, {pooled_classes} speakers", flush=True)
    models[POOLED_CONTROL] = build_embedder("log_mel", features.shape[1:], pooled_classes, args.seed)
    rows[POOLED_CONTROL] = fit(models[POOLED_CONTROL], pooled_features, pooled, epochs, args.batch_size,
                               args.learning_rate, dev_eer)
    del pooled_features

    if args.kws_epochs:
        print(f"\n{TITLES[KWS_TRANSFER]}: a keyword spotter, {args.kws_epochs} epochs", flush=True)
        models[KWS_TRANSFER], rows[KWS_TRANSFER], sources[KWS_TRANSFER] = transfer_from_spotter(
            train_features, labels, corpus["word"][train_rows], classes, args, dev_eer)

    target = rows[SCRATCH][-1]["dev_eer"]
    examples_per_epoch = {POOLED_CONTROL: len(pooled)}
    variants = {name: variant_summary(rows[name], target, examples_per_epoch.get(name, len(train_rows)),
                                      sources.get(name), args.epochs) for name in rows}
    variants = {name: variants[name] for name in (SCRATCH, POOL_TRANSFER, POOLED_CONTROL, KWS_TRANSFER)
                if name in variants}
    variants[POOL_TRANSFER]["pretraining_rows"] = pretraining

    print("\nscoring every model on the sv_eval trials", flush=True)
    embeddings = {name: embedding_model(model).predict(features, batch_size=256, verbose=0)
                  for name, model in models.items()}
    report = sv.evaluate_systems(embeddings, corpus["speaker"], in_set["sv_train"], development, evaluation,
                                 resamples=args.resamples, seed=args.seed)
    pairs = [(name, SCRATCH) for name in models if name != SCRATCH] + [(POOL_TRANSFER, POOLED_CONTROL)]
    values = {
        "speakers_per_set": {name: len(members) for name, members in in_set.items()},
        "pool": {"speakers": len(set(pool_labels)), "clips": len(pool_labels), "seed": args.pool_seed},
        "scratch_final_dev_eer": target, "variants": variants,
        "evaluation": {name: {condition: {metric: report.metrics[name][condition][metric]
                                          for metric in ("eer", "eer_ci_low", "eer_ci_high", "min_dcf_p01")}
                              for condition in CONDITIONS if condition in report.metrics[name]}
                       for name in models},
        "differences": eval_differences(report, evaluation, pairs, args.resamples, args.seed),
        "trial_counts": {condition: report.counts[condition] for condition in CONDITIONS},
        "seconds": time.perf_counter() - started}
    print_summary(values)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"arguments": {k: str(v) if isinstance(v, Path) else v
                                                     for k, v in vars(args).items()}, **values},
                                      indent=2, default=float))
    (args.output.parent / "dev_eer_curves.png").write_bytes(curves_png(variants, target))
    print(f"wrote {args.output} and dev_eer_curves.png ({values['seconds']:.0f} s in all)")
    return values


def print_summary(values: dict[str, Any]) -> None:
    target = 100 * values["scratch_final_dev_eer"]
    print(f"\nclock: scratch's final development EER {target:.2f} %")
    for name, variant in values["variants"].items():
        reached = "not reached" if variant["epochs_to_target"] is None else (
            f"epoch {variant['epochs_to_target']}, {variant['seconds_to_target']:.0f} s "
            f"({variant['seconds_to_target_with_source']:.0f} s with its source)")
        print(f"  {TITLES[name]:64s} final dev EER {100 * variant['final_dev_eer']:5.2f} %, target {reached}")
    print("\nsv_eval, all trials:")
    for name, by_condition in values["evaluation"].items():
        m = by_condition["all"]
        print(f"  {TITLES[name]:64s} EER {100 * m['eer']:5.2f} % [{100 * m['eer_ci_low']:5.2f}, "
              f"{100 * m['eer_ci_high']:5.2f}]")
    for pair, by_condition in values["differences"].items():
        d = by_condition["all"]
        print(f"  {pair:40s} {100 * d['difference']:+.2f} points [{100 * d['ci_low']:+.2f}, "
              f"{100 * d['ci_high']:+.2f}] ({verdict(d['ci_low'], d['ci_high'])})")


if __name__ == "__main__":
    sys.exit(main())

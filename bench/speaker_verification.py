"""Speaker verification on the synthetic corpus, measured in one run: embedding model A (DenseNet-BiLSTM trunk on
log-mel) and B (TDNN on MFCC), their equal-weight and logistic-regression fusion, per trial condition, with 95 %
bootstrap intervals over speakers.

What it runs (plain Keras on both cores, outside the pipeline, with the pipeline's models, trial lists, scoring,
fusion and transfer helpers — training/workloads/speaker_verification/ runs the same through every strategy):
1. the synthetic corpus (≥ 300 speakers, every word said ``--repetitions`` times), read and checked like ingestion;
2. speakers split into sv_train / sv_dev / sv_eval by Speech Commands' sha1 rule (training.speech.trials);
3. log-mel and MFCC maps of every clip; A and B trained as speaker classifiers on sv_train with the additive
   angular margin softmax (scale 30, margin ramped 0 → 0.2);
4. embeddings of every clip; the pipeline's trials on sv_dev (fusion/calibration training) and sv_eval (reported):
   same word, different word, hard (non-targets of the same voice: one family or one recorded donor), all; S-norm
   against the sv_train cohort;
5. EER, minDCF at P_target 0.01/0.05, actual DCF, Cllr per system and condition; fused − best single EER with its
   paired interval. Targets (issue 14): fusion EER below the best single model's, the interval of the difference
   excluding 0 at least on different-word trials.

    .venv/training/bin/python bench/speaker_verification.py [--speakers 300] [--epochs 12]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from results import publish_run, recorded_as, table

from training import REPO_ROOT

BENCH_ROOT = REPO_ROOT / "var" / "bench" / "speaker-verification"
SYSTEMS = {"model_a_densenet_bilstm": "log_mel", "model_b_tdnn": "mfcc"}
RUNS = {"bench-sv": ("make bench-sv", [])}
METRICS = ("eer", "eer_ci_low", "eer_ci_high", "min_dcf_p01", "min_dcf_p05", "act_dcf_p05", "cllr")


def read_corpus(root: Path) -> dict[str, Any]:
    """Every clip of a synthetic corpus, checked as ingestion checks it: PCM (n, 16000) int16 and, per clip, its
    speaker, word, voice family and the sha1 of its samples."""
    from training.speech import ingest as speech_ingest
    from training.speech.speech_commands import speaker_of

    scan = speech_ingest.scan_corpus(root, resample=False, source=str(root))
    if scan.skipped:
        print(f"  {len(scan.skipped)} files skipped (first: {scan.skipped[0]})")
    rows = [(path, word, pcm) for word, clips in sorted(scan.clips.items()) for path, pcm in clips]
    speakers = np.array([speaker_of(path) for path, _, _ in rows], dtype=object)
    missing = sorted({str(speaker) for speaker in speakers} - set(scan.families))
    if missing:
        raise SystemExit(f"{root}: no voice family recorded for {len(missing)} speakers (e.g. {missing[0]})")
    audio = np.stack([pcm for _, _, pcm in rows]).astype(np.int16)
    return {"audio": audio, "speaker": speakers, "word": np.array([word for _, word, _ in rows], dtype=object),
            "family": np.array([scan.families[str(speaker)] for speaker in speakers], dtype=object),
            "digest": np.array([hashlib.sha1(pcm.tobytes()).hexdigest() for _, _, pcm in rows], dtype=object)}


def speaker_sets_and_trials(corpus: dict[str, Any], enrollment: int, seed: int
                            ) -> tuple[dict[str, list[str]], Any, Any]:
    """The corpus's speakers per set by the pipeline's rule, and its sv_dev and sv_eval trials made by the
    pipeline's own maker (speaker_clips.trial_sets): (speakers per set, development trials, evaluation trials)."""
    from training.speech import trials as trial_lists
    from training.workloads.speaker_verification import speaker_clips

    families = {str(s): str(f) for s, f in zip(corpus["speaker"], corpus["family"], strict=True)}
    assignment = trial_lists.assign_speaker_sets(sorted(families), families)
    in_set = {name: sorted(s for s, set_name in assignment.items() if set_name == name)
              for name in trial_lists.SPEAKER_SETS}
    clips = trial_lists.Clips(speaker=corpus["speaker"], word=corpus["word"], family=corpus["family"],
                              digest=corpus["digest"])
    trials = speaker_clips.trial_sets(clips, assignment, enrollment, seed)
    return in_set, trials["sv_dev"], trials["sv_eval"]


class DevEqualErrorRate:
    """After every epoch: the EER of raw cosine scores on the development trials (the transfer comparison's clock;
    the reported figures use the evaluation trials)."""

    def __init__(self, features: np.ndarray, trials: Any) -> None:
        self.trials = trials
        self.rows = np.unique(np.concatenate([trials.test_clip, *trials.enrollment.values()]))
        self.features = features[self.rows]

    def __call__(self, model: Any) -> float:
        from training.evaluation import scoring, verification
        from training.workloads.speaker_verification.speaker_embedding import embedding_model

        embeddings = np.zeros((int(self.rows.max()) + 1, model.get_layer("embedding").units), np.float32)
        embeddings[self.rows] = embedding_model(model).predict(self.features, batch_size=256, verbose=0)
        speakers = sorted(self.trials.enrollment)
        models = np.stack([scoring.enroll(embeddings[self.trials.enrollment[s]]) for s in speakers])
        row = {speaker: number for number, speaker in enumerate(speakers)}
        scores = scoring.cosine_scores(models, embeddings, [row[s] for s in self.trials.model_speaker],
                                       self.trials.test_clip)
        natural = self.trials.condition("all")
        return verification.equal_error_rate(self.trials.label[natural], scores[natural]).value


def fit(model: Any, features: np.ndarray, labels: np.ndarray, epochs: int, batch: int, learning_rate: float,
        dev_eer: DevEqualErrorRate, first_epoch: int = 0, loss: Any = None) -> list[dict[str, float]]:
    """Train with the AAM softmax (margin ramped by the overall epoch number) and record each epoch's training
    accuracy, wall seconds and development EER."""
    import tensorflow as tf

    from training.workloads.speaker_verification.angular_margin import AdditiveAngularMarginLoss, ramped_margin

    loss = loss or AdditiveAngularMarginLoss(margin=0.0)
    model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate), loss=loss,
                  metrics=[tf.keras.metrics.SparseCategoricalAccuracy(name="accuracy")])
    rows = []
    for epoch in range(first_epoch, first_epoch + epochs):
        loss.set_margin(ramped_margin(epoch))
        started = time.perf_counter()
        history = model.fit(features, labels, batch_size=batch, epochs=1, shuffle=True, verbose=0)
        seconds = time.perf_counter() - started
        rows.append({"epoch": epoch + 1, "seconds": seconds, "loss": float(history.history["loss"][0]),
                     "accuracy": float(history.history["accuracy"][0]), "dev_eer": dev_eer(model)})
        print(f"    epoch {epoch + 1}: {seconds:5.0f} s, accuracy {rows[-1]['accuracy']:.3f}, dev EER "
              f"{100 * rows[-1]['dev_eer']:.2f} %", flush=True)
    return rows


def build_embedder(kind: str, input_shape: tuple[int, ...], speakers: int, seed: int) -> Any:
    import tensorflow as tf

    from training.workloads.speaker_verification.speaker_embedding import densenet_bilstm_embedder, tdnn_embedder

    tf.keras.utils.set_random_seed(seed)
    build = densenet_bilstm_embedder if kind == "log_mel" else tdnn_embedder
    return build(input_shape, num_speakers=speakers)


def train_spotter(features: np.ndarray, words: np.ndarray, args: argparse.Namespace) -> tuple[Any, float, Any]:
    """A keyword spotter (the clips' words as labels) trained ``args.kws_epochs`` epochs: (model, seconds, history)."""
    import tensorflow as tf

    from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

    word_names = sorted(set(words))
    word_labels = np.array([word_names.index(word) for word in words], np.int32)
    tf.keras.utils.set_random_seed(args.seed)
    spotter = densenet_bilstm(features.shape[1:], len(word_names))
    spotter.compile(optimizer=tf.keras.optimizers.Adam(args.learning_rate),
                    loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    started = time.perf_counter()
    history = spotter.fit(features, word_labels, batch_size=args.batch_size, epochs=args.kws_epochs, verbose=2)
    return spotter, time.perf_counter() - started, history


def transfer_comparison(features: np.ndarray, labels: np.ndarray, words: np.ndarray, speakers: int,
                        scratch: list[dict[str, float]], args: argparse.Namespace, dev_eer: DevEqualErrorRate
                        ) -> dict[str, Any]:
    """A keyword spotter (35 words) trained on the sv_train speakers' clips, its trunk moved into model A, then
    (a) trunk frozen, head only, and (b) two stages: head only, then the upper blocks at a quarter of the rate;
    epochs and seconds of each to reach the from-scratch model's final development EER."""
    from training.workloads.speaker_verification.speaker_embedding import freeze_trunk, transfer_trunk

    spotter, spotter_seconds, history = train_spotter(features, words, args)
    target = scratch[-1]["dev_eer"]
    result: dict[str, Any] = {"keyword_spotter": {"epochs": args.kws_epochs, "seconds": spotter_seconds,
                                                  "training_accuracy": float(history.history["accuracy"][-1])},
                              "scratch_final_dev_eer": target,
                              "scratch": summarise(scratch, target)}
    for variant in ("frozen", "fine_tuned"):
        print(f"  transfer, {variant}", flush=True)
        model = build_embedder("log_mel", features.shape[1:], speakers, args.seed)
        copied = transfer_trunk(spotter, model)
        freeze_trunk(model, trainable_blocks=0)
        if variant == "frozen":
            rows = fit(model, features, labels, args.epochs, args.batch_size, args.learning_rate, dev_eer)
        else:
            head_epochs = max(1, args.epochs // 4)
            rows = fit(model, features, labels, head_epochs, args.batch_size, args.learning_rate, dev_eer)
            freeze_trunk(model, trainable_blocks=3)  # bilstm, to_sequence, block3
            rows += fit(model, features, labels, args.epochs - head_epochs, args.batch_size,
                        args.learning_rate / 4, dev_eer, first_epoch=head_epochs)
        result[variant] = {**summarise(rows, target), "copied_layers": len(copied)}
    return result


def summarise(rows: list[dict[str, float]], target: float) -> dict[str, Any]:
    """The epoch rows, and the first epoch (and the seconds until then) whose development EER is ≤ ``target``."""
    reached = next((row["epoch"] for row in rows if row["dev_eer"] <= target), None)
    seconds = None if reached is None else sum(row["seconds"] for row in rows[: int(reached)])
    return {"rows": rows, "epochs_to_target": reached, "seconds_to_target": seconds,
            "final_dev_eer": rows[-1]["dev_eer"], "seconds": sum(row["seconds"] for row in rows)}


def result_tables(metrics: dict[str, dict[str, dict[str, float]]], differences: dict[str, dict[str, float]],
                  counts: dict[str, Any], models: dict[str, dict[str, Any]], transfer: dict[str, Any],
                  speakers_per_set: dict[str, int]) -> tuple[dict, dict]:
    """(values, tables) for docs/results from the report (``VerificationReport``'s metrics, differences, counts),
    the models and the transfer comparison. values: speakers_per_set, trial_counts, systems per system
    (model_a_densenet_bilstm, model_b_tdnn, equal_weight_fusion, logistic_fusion) per condition (same_word,
    different_word, hard, all): eer, eer_ci_low, eer_ci_high, min_dcf_p01, min_dcf_p05, act_dcf_p05, cllr;
    fusion_minus_best per condition: difference, ci_low, ci_high; models per model: parameters, train_seconds,
    train_examples_per_second; transfer (when run) per variant (scratch, frozen, fine_tuned): final_dev_eer,
    epochs_to_target, seconds_to_target, and scratch_final_dev_eer. tables: "systems", "differences" and, with
    the transfer, "transfer", as printed."""
    values: dict[str, Any] = {
        "speakers_per_set": dict(speakers_per_set), "trial_counts": counts,
        "systems": {system: {condition: {name: m.get(name) for name in METRICS} for condition, m in by.items()}
                    for system, by in metrics.items()},
        "fusion_minus_best": {condition: {name: d[name] for name in ("difference", "ci_low", "ci_high")}
                              for condition, d in differences.items()},
        "models": {name: {field: model[field] for field in ("parameters", "train_seconds",
                                                            "train_examples_per_second")}
                   for name, model in models.items()}}
    systems = table([("system", "system", "text"), ("condition", "condition", "text"), ("EER", "eer", "pct"),
                     ("95 % CI low", "eer_ci_low", "pct"), ("95 % CI high", "eer_ci_high", "pct"),
                     ("minDCF.01", "min_dcf_p01", "num"), ("minDCF.05", "min_dcf_p05", "num"),
                     ("actDCF.05", "act_dcf_p05", "num"), ("Cllr", "cllr", "num")],
                    [{"system": system, "condition": condition, **{name: m.get(name) for name in METRICS}}
                     for system, by in metrics.items() for condition, m in by.items()])
    verdicts = [{"condition": condition, **values["fusion_minus_best"][condition],
                 "verdict": "excludes 0" if d["ci_high"] < 0 or d["ci_low"] > 0 else "includes 0"}
                for condition, d in differences.items()]
    tables = {"systems": systems, "differences": table(
        [("condition", "condition", "text"), ("fused − best single EER", "difference", "pct"),
         ("95 % CI low", "ci_low", "pct"), ("95 % CI high", "ci_high", "pct"), ("interval", "verdict", "text")],
        verdicts)}
    if transfer:
        variants = ("scratch", "frozen", "fine_tuned")
        values["transfer"] = {"scratch_final_dev_eer": transfer["scratch_final_dev_eer"],
                              **{variant: {field: transfer[variant][field] for field in
                                           ("final_dev_eer", "epochs_to_target", "seconds_to_target")}
                                 for variant in variants}}
        tables["transfer"] = table(
            [("variant", "variant", "text"), ("final dev EER", "final_dev_eer", "pct"),
             ("epochs to target", "epochs_to_target", "int"), ("s to target", "seconds_to_target", "s")],
            [{"variant": variant, **values["transfer"][variant]} for variant in variants])
    return values, tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--speakers", type=int, default=300, help="synthetic speakers (default 300)")
    parser.add_argument("--repetitions", type=int, default=2, help="utterances of each word per speaker (default 2)")
    parser.add_argument("--epochs", type=int, default=8, help="training epochs of each model (default 8)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=0.002)
    parser.add_argument("--enrollment", type=int, default=3, help="enrollment utterances per speaker (default 3)")
    parser.add_argument("--resamples", type=int, default=200, help="bootstrap resamples (default 200)")
    parser.add_argument("--kws-epochs", type=int, default=4,
                        help="epochs of the keyword spotter whose trunk model A transfers (0: no transfer runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=BENCH_ROOT / "fusion.json")
    args = parser.parse_args(argv)
    run = recorded_as(parser, args, RUNS)

    import tensorflow as tf

    from training.speech.audio.features import compute_features
    from training.speech.synthesis.corpus import default_corpus_dir, synthesize_corpus
    from training.workloads.speaker_verification import report as sv
    from training.workloads.speaker_verification.speaker_embedding import embedding_model, parameter_count

    started = time.perf_counter()
    corpus_dir = default_corpus_dir(args.speakers, args.repetitions, args.seed)
    synthesize_corpus(corpus_dir, speakers=args.speakers, repetitions=args.repetitions, seed=args.seed)
    corpus = read_corpus(corpus_dir)
    print(f"corpus {corpus_dir}: {len(corpus['audio'])} clips of {len(set(corpus['speaker']))} speakers "
          f"({time.perf_counter() - started:.0f} s)", flush=True)
    in_set, development, evaluation = speaker_sets_and_trials(corpus, args.enrollment, args.seed)
    print("speakers per set: " + ", ".join(f"{name} {len(members)}" for name, members in in_set.items()))
    print(f"trials: dev {development.counts()['all']}, eval {evaluation.counts()}", flush=True)

    train_rows = np.flatnonzero(np.isin(corpus["speaker"], in_set["sv_train"]))
    speaker_label = {speaker: label for label, speaker in enumerate(in_set["sv_train"])}
    labels = np.array([speaker_label[s] for s in corpus["speaker"][train_rows]], np.int32)
    embeddings: dict[str, np.ndarray] = {}
    embedders: dict[str, Any] = {}
    models: dict[str, dict[str, Any]] = {}
    tf.config.threading.set_intra_op_parallelism_threads(2)
    transfer: dict[str, Any] = {}
    for name, kind in SYSTEMS.items():
        feature_started = time.perf_counter()
        features = compute_features(corpus["audio"], kind).astype(np.float32)
        print(f"{name}: {kind} features in {time.perf_counter() - feature_started:.0f} s", flush=True)
        dev_eer = DevEqualErrorRate(features, development)
        model = build_embedder(kind, features.shape[1:], len(in_set["sv_train"]), args.seed)
        history = fit(model, features[train_rows], labels, args.epochs, args.batch_size, args.learning_rate, dev_eer)
        seconds = sum(row["seconds"] for row in history)
        embedders[name] = embedding_model(model)
        embeddings[name] = embedders[name].predict(features, batch_size=256, verbose=0)
        models[name] = {"features": kind, "parameters": parameter_count(model), "train_seconds": seconds,
                        "history": history,
                        "train_examples_per_second": len(train_rows) * args.epochs / seconds}
        print(f"{name}: {models[name]['parameters']:,} parameters, {seconds:.0f} s, final training accuracy "
              f"{history[-1]['accuracy']:.3f}", flush=True)
        if kind == "log_mel" and args.kws_epochs:
            transfer = transfer_comparison(features[train_rows], labels, corpus["word"][train_rows],
                                           len(in_set["sv_train"]), history, args, dev_eer)
        del features

    report = sv.evaluate_systems(embeddings, corpus["speaker"], in_set["sv_train"], development, evaluation,
                                 resamples=args.resamples, seed=args.seed)
    print_table(report)
    print_transfer(transfer)
    BENCH_ROOT.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    result = {"arguments": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
              "speakers_per_set": {name: len(members) for name, members in in_set.items()}, "models": models,
              "transfer": transfer,
              **report.to_mapping(), "seconds": time.perf_counter() - started}
    args.output.write_text(json.dumps(result, indent=2, default=float))
    (args.output.parent / "det_different_word.png").write_bytes(
        sv.det_curves_png(report, evaluation, "different_word", "sv_eval, different word"))
    (args.output.parent / "score_histograms.png").write_bytes(sv.score_histograms_png(report, "sv_eval, all"))
    save_verification_system(args, report, embedders, embeddings, corpus["speaker"], in_set["sv_train"])
    print(f"wrote {args.output} ({time.perf_counter() - started:.0f} s in all)")
    publish_run(run, *result_tables(report.metrics, report.differences, report.counts, models, transfer,
                                    result["speakers_per_set"]))


def save_verification_system(args: argparse.Namespace, report: Any, embedders: dict[str, Any],
                             embeddings: dict[str, np.ndarray], clip_speakers: np.ndarray,
                             cohort_speakers: list[str]) -> None:
    """The measured system (both embedders, their sv_train cohorts, the logistic fusion) for `cloudburst verify`."""
    from training.evaluation import scoring
    from training.workloads.speaker_verification import report as sv
    from training.workloads.speaker_verification.verification_system import VerificationSystem, save_system

    fusion = report.fusion[sv.FUSION]
    system = VerificationSystem(
        embedders=embedders, features=dict(SYSTEMS),
        cohorts={name: sv.speaker_cohort(embeddings[name], clip_speakers, cohort_speakers) for name in SYSTEMS},
        fusion=scoring.LinearFusion(tuple(fusion["weights"]), fusion["offset"], fusion["prior"]),
        names=tuple(SYSTEMS),
        thresholds={"eer_all": report.metrics[sv.FUSION]["all"]["eer_threshold"]})
    recipe = {key: str(value) for key, value in sorted(vars(args).items())}
    save_system(str(args.output.parent / "system"), system, recipe, overwrite=True)
    print(f"saved the fused system to {args.output.parent / 'system'} (cloudburst verify --system …)")


def print_table(report: Any) -> None:
    print(f"\n{'system':28s} {'condition':15s} {'EER % [95 % CI]':24s} {'minDCF.01':>9s} {'minDCF.05':>9s} "
          f"{'actDCF.05':>9s} {'Cllr':>6s}")
    for system, by_condition in report.metrics.items():
        for condition, m in by_condition.items():
            interval = f"{100 * m['eer']:5.2f} [{100 * m['eer_ci_low']:5.2f}, {100 * m['eer_ci_high']:5.2f}]"
            print(f"{system:28s} {condition:15s} {interval:24s} {m['min_dcf_p01']:9.3f} {m['min_dcf_p05']:9.3f} "
                  f"{m['act_dcf_p05']:9.3f} {m['cllr']:6.3f}")
    for condition, d in report.differences.items():
        verdict = "excludes 0" if d["ci_high"] < 0 or d["ci_low"] > 0 else "includes 0"
        print(f"fused − best single EER, {condition}: {100 * d['difference']:+.2f} points "
              f"[{100 * d['ci_low']:+.2f}, {100 * d['ci_high']:+.2f}] ({verdict})")
    print(f"trial counts: {report.counts}")


def print_transfer(transfer: dict[str, Any]) -> None:
    if not transfer:
        return
    target = 100 * transfer["scratch_final_dev_eer"]
    print(f"\ntransfer (target: the from-scratch model's final dev EER, {target:.2f} %)")
    for variant in ("scratch", "frozen", "fine_tuned"):
        row = transfer[variant]
        reached = "not reached" if row["epochs_to_target"] is None else \
            f"epoch {row['epochs_to_target']}, {row['seconds_to_target']:.0f} s"
        print(f"  {variant:11s} final dev EER {100 * row['final_dev_eer']:5.2f} %, target {reached}")


if __name__ == "__main__":
    sys.exit(main())

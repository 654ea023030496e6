"""Step ``evaluate``: evaluate a trained run on the test split — the one time it is read — and add the results to its
MLflow run (no Spark).

    python -m training.jobs.evaluate --workload mnist_elastic_cnn --run-name my-run [the run's other settings]

Logs test accuracy, per-class accuracy, a confusion-matrix figure and the model; writes evaluation.json into
the run directory (a second call is a no-op) and prints a short summary.
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from training import storage, tracking
from training.config import RunSpec, RunSpecError
from training.contract import EVALUATION_FILE, RESULT_FILE, TEST_SPLIT, VALIDATION_SPLIT
from training.evaluation.classification import accuracy, confusion_matrix, per_class_accuracy
from training.evaluation.figures import confusion_matrix_png
from training.models.model_files import load_run_model
from training.strategies.evaluation_clock import model_inputs, predicted_classes

log = logging.getLogger(__name__)



def evaluate_run(spec: RunSpec) -> dict[str, Any]:
    """Evaluate the run's final model; returns the evaluation record (metrics + MLflow run id)."""
    spec.validate()
    run_uri = spec.run_uri()
    done = storage.read_json(storage.join(run_uri, EVALUATION_FILE))
    if done is not None:
        log.info("run %s already evaluated: nothing to do", spec.run_name)
        return done
    record = storage.read_json(storage.join(run_uri, RESULT_FILE))
    if record is None or not record.get("mlflow_run_id"):
        raise RunSpecError(f"run_name={spec.run_name!r}: no finished training at {run_uri}; train it first")
    from training.jobs.train import require_evaluation_examples

    require_evaluation_examples(storage.require_manifest(spec.augmented_uri()))
    workload = spec.trainable()
    images, labels = workload.load_split(spec.augmented_uri(), TEST_SPLIT)  # the one read of the test split
    model = load_run_model(record)
    predictions = predicted_classes(model, images)
    confusion = confusion_matrix(labels, predictions, workload.num_classes)
    per_class = per_class_accuracy(confusion)
    class_names = list(workload.class_names) or [str(label) for label in range(workload.num_classes)]
    metrics = {"test_accuracy": accuracy(confusion), "model_parameters": float(model.count_params())}
    metrics.update({f"test_accuracy_class_{name}": float(value)
                    for name, value in zip(class_names, per_class, strict=True)})
    artifacts: dict[str, bytes] = {}
    if workload.evaluate_further is not None:
        further_metrics, artifacts = workload.evaluate_further(model, predictions)
        metrics.update(further_metrics)
    figure = confusion_matrix_png(confusion, class_names,
                                  f"{spec.workload} · {spec.strategy} {spec.config} · "
                                  f"test accuracy {metrics['test_accuracy']:.2%}")
    tracking.log_evaluation(
        spec, record["mlflow_run_id"], metrics,
        {"confusion_matrix.png": figure,
         "confusion_matrix.json": json.dumps({"class_names": class_names, "counts": confusion.tolist()}).encode(),
         "per_class_accuracy.json": json.dumps(dict(zip(class_names, per_class.tolist(), strict=True))).encode(),
         **artifacts},
        model=model,
        example_inputs=model_inputs(images[:4]).numpy(),
        training_finished_at=record.get("finished_at"),
    )
    evaluation = {"mlflow_run_id": record["mlflow_run_id"], "metrics": metrics,
                  "wall_seconds": record["result"]["wall_seconds"],
                  "time_to_target_seconds": record["result"]["time_to_target_seconds"]}
    storage.write_json(storage.join(run_uri, EVALUATION_FILE), evaluation)
    return evaluation


def summary(spec: RunSpec, evaluation: dict[str, Any]) -> str:
    """The few lines a user wants at the end of a run."""
    run = tracking.tracked_run(spec, evaluation["mlflow_run_id"])
    metrics, tags = run.data.metrics, run.data.tags
    target = evaluation.get("time_to_target_seconds")
    splits = storage.require_manifest(spec.augmented_uri())["splits"]
    lines = [
        f"workload {spec.workload}, strategy {spec.strategy}, {spec.config} "
        f"(nodes × workers_per_node = {spec.total_workers} workers), {spec.epochs} epochs",
        f"test accuracy     {evaluation['metrics']['test_accuracy']:.2%} on the {splits[TEST_SPLIT]['rows']:,} "
        "test examples, read once, after training"
        + (f"  ({int(evaluation['metrics']['model_parameters']):,} model parameters)"
           if "model_parameters" in evaluation["metrics"] else ""),
        f"training wall     {evaluation['wall_seconds']:.1f} s"
        + (f"  (time to {spec.target_accuracy:.1%} validation accuracy: {target:.1f} s)" if target else
           f"  ({spec.target_accuracy:.1%} validation accuracy not reached)"),
    ]
    scores = evaluation["metrics"]
    if "test_accuracy_held_out_families" in scores:
        lines.append(f"held-out families {scores['test_accuracy_held_out_families']:.2%} test accuracy on voice "
                     f"families never trained on; {scores.get('test_accuracy_training_families', float('nan')):.2%} "
                     "on new speakers of the trained families")
    if "open_set_false_accept_rate" in scores:
        lines.append(f"false accepts     {scores['open_set_false_accept_rate']:.2%} of the test speakers' clips of "
                     "words never trained on taken for a keyword (open set)")
    if "closed_set_false_accept_rate" in scores:
        lines.append(f"{'':18}{scores['closed_set_false_accept_rate']:.2%} of their other non-keyword clips, words "
                     "trained on as _unknown_ (closed set)")
    if "keyword_threshold" in scores:
        lines.append(f"keyword threshold {scores['keyword_threshold']:.3f} (chosen on validation for at most "
                     f"{spec.open_set_false_accept_target:g} % open-set false accepts): test accuracy "
                     f"{scores['test_accuracy_at_threshold']:.2%}")
        lines.append(f"{'':18}false accepts at it {scores['open_set_false_accept_rate_at_threshold']:.2%} open set, "
                     f"{scores.get('closed_set_false_accept_rate_at_threshold', float('nan')):.2%} closed set")
    record = storage.read_json(storage.join(spec.run_uri(), RESULT_FILE)) or {}
    lines.append(f"per epoch         val_accuracy on the {splits[VALIDATION_SPLIT]['rows']:,} validation examples "
                 "(what time to target and every choice of settings read)")
    for row in record.get("result", {}).get("epochs", []):  # every strategy writes the same rows
        loss = f"{row['train_loss']:.4f}" if row.get("train_loss") is not None else "   –  "
        lines.append(f"    epoch {row['epoch']:>3}: loss {loss}  val_accuracy {row['val_accuracy']:.4f}  "
                     f"{row['epoch_seconds']:6.1f} s  {row['samples_per_second']:7.0f} samples/s")
    if spec.total_workers == 1:
        lines.append("speedup           this run is a 1-worker baseline: runs of more workers with the same settings "
                     "compare against it")
    elif tags.get(tracking.SPEEDUP_WITHHELD_TAG):
        lines.append(f"speedup           not shown: {tags[tracking.SPEEDUP_WITHHELD_TAG]}")
    elif "speedup" in metrics:
        baseline_tags = tracking.client(spec.resolved_tracking_uri()).get_run(tags["baseline_run_id"]).data.tags
        to_target = metrics.get("time_to_target_speedup")
        to_target_text = (f"time to target {to_target:.2f}x" if to_target is not None and math.isfinite(to_target)
                          else f"no time-to-target ratio: {spec.target_accuracy:.1%} not reached by one run or both")
        lines.append(f"speedup           {metrics['speedup']:.2f}x over 1 worker × "
                     f"{baseline_tags.get('threads_per_worker', '?')} threads, this run {spec.total_workers} × "
                     f"{tags.get('threads_per_worker', '?')} (scaling efficiency {metrics['scaling_efficiency']:.0%}; "
                     f"{to_target_text})")
    else:
        lines.append("speedup           no comparable 1-worker run yet (run once with nodes=1, workers_per_node=1)")
    lines.append(f"MLflow run        {evaluation['mlflow_run_id']} in experiment {spec.workload} "
                 f"({spec.resolved_tracking_uri()})")
    return "\n".join(lines)


def run_step(spec: RunSpec, overwrite: bool = False) -> str:
    """The pipeline step: evaluate (a no-op when done) and print the run's summary."""
    print(summary(spec, evaluate_run(spec)), flush=True)
    return spec.run_uri()


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=False, argv=argv)


if __name__ == "__main__":
    main()

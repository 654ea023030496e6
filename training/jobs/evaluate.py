"""Evaluate a trained run on the test split and add the results to its MLflow run (no Spark needed).

    python -m training.jobs.evaluate --workload mnist_elastic_cnn --run-name my-run [the run's other settings]

Logs test accuracy, per-class accuracy, a confusion-matrix figure and the model; writes evaluation.json into
the run directory (a second call is a no-op) and prints a short summary.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from training import storage, tracking
from training.config import RunSpec, RunSpecError
from training.console import configure_logging
from training.evaluation.classification import accuracy, confusion_matrix, per_class_accuracy
from training.evaluation.figures import confusion_matrix_png
from training.jobs.train import RESULT_FILE
from training.strategies.checkpoints import load_model
from training.strategies.evaluation_clock import model_inputs, predicted_classes
from training.workloads import workload_for

log = logging.getLogger(__name__)

EVALUATION_FILE = "evaluation.json"


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
    workload = workload_for(spec)
    images, labels = workload.load_test(spec.augmented_uri())
    model = load_model(record["result"]["model_uri"])
    confusion = confusion_matrix(labels, predicted_classes(model, images), workload.num_classes)
    per_class = per_class_accuracy(confusion)
    class_names = (storage.require_manifest(spec.augmented_uri()).get("class_names")
                   or [str(label) for label in range(workload.num_classes)])
    metrics = {"test_accuracy": accuracy(confusion), "model_parameters": float(model.count_params())}
    metrics.update({f"test_accuracy_class_{name}": float(value)
                    for name, value in zip(class_names, per_class, strict=True)})
    figure = confusion_matrix_png(confusion, class_names,
                                  f"{spec.workload} · {spec.strategy} {spec.config} · "
                                  f"test accuracy {metrics['test_accuracy']:.2%}")
    tracking.log_evaluation(
        spec, record["mlflow_run_id"], metrics,
        {"confusion_matrix.png": figure,
         "confusion_matrix.json": json.dumps({"class_names": class_names, "counts": confusion.tolist()}).encode(),
         "per_class_accuracy.json": json.dumps(dict(zip(class_names, per_class.tolist(), strict=True))).encode()},
        model=model,
        example_inputs=model_inputs(images[:4]).numpy(),
    )
    evaluation = {"mlflow_run_id": record["mlflow_run_id"], "metrics": metrics,
                  "wall_seconds": record["result"]["wall_seconds"],
                  "time_to_target_seconds": record["result"]["time_to_target_seconds"]}
    storage.write_json(storage.join(run_uri, EVALUATION_FILE), evaluation)
    return evaluation


def summary(spec: RunSpec, evaluation: dict[str, Any]) -> str:
    """The few lines a user wants at the end of a run."""
    mlflow_client = tracking.client(spec.resolved_tracking_uri())
    run = mlflow_client.get_run(evaluation["mlflow_run_id"])
    metrics, tags = run.data.metrics, run.data.tags
    target = evaluation.get("time_to_target_seconds")
    lines = [
        f"workload {spec.workload}, strategy {spec.strategy}, {spec.config} "
        f"(nodes × workers_per_node = {spec.total_workers} workers), {spec.epochs} epochs",
        f"test accuracy     {evaluation['metrics']['test_accuracy']:.2%}"
        + (f"  ({int(evaluation['metrics']['model_parameters']):,} model parameters)"
           if "model_parameters" in evaluation["metrics"] else ""),
        f"training wall     {evaluation['wall_seconds']:.1f} s"
        + (f"  (time to {spec.target_accuracy:.1%}: {target:.1f} s)" if target else
           f"  ({spec.target_accuracy:.1%} not reached)"),
    ]
    if "speedup" in metrics and spec.total_workers > 1:
        baseline_tags = mlflow_client.get_run(tags["baseline_run_id"]).data.tags
        lines.append(f"speedup           {metrics['speedup']:.2f}x over 1 worker × "
                     f"{baseline_tags.get('threads_per_worker', '?')} threads, this run {spec.total_workers} × "
                     f"{tags.get('threads_per_worker', '?')} (scaling efficiency {metrics['scaling_efficiency']:.0%}; "
                     f"time to target {metrics.get('time_to_target_speedup', float('nan')):.2f}x)")
    else:
        lines.append("speedup           no comparable 1-worker run yet (run once with nodes=1, workers_per_node=1)")
    lines.append(f"MLflow run        {evaluation['mlflow_run_id']} in experiment {spec.workload} "
                 f"({spec.resolved_tracking_uri()})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    RunSpec.add_arguments(parser)
    configure_logging()
    spec = RunSpec.from_args(parser.parse_args(argv))
    print(summary(spec, evaluate_run(spec)), flush=True)


if __name__ == "__main__":
    main()

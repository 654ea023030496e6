"""Step ``evaluate`` of speaker verification: models A and B, their equal-weight and logistic-regression fusion on
the sv_eval trials — EER and minDCF (P_target 0.01, 0.05) with their thresholds and 95 % intervals by bootstrap over
speakers, actual DCF and Cllr of the calibrated scores, per condition (same word, different word, hard = same voice
family, all) — and the fused system with 1, 3 and 5 enrollment utterances. Logged as one MLflow run of the system
beside the two models' training runs, with DET curves and score histograms; prints a summary.

    python -m training.workloads.speaker_verification.evaluate_trials --workload speaker_verification --run-name my-run
"""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import numpy as np

from training import storage, tracking
from training.config import RunSpec, RunSpecError
from training.contract import EVALUATION_FILE, RESULT_FILE
from training.workloads.speaker_verification import ENROLLMENT_CHOICES, MODEL_A, MODEL_FEATURES, MODEL_TITLES

log = logging.getLogger(__name__)

HEADLINE_CONDITION = "different_word"  # text-independent: the condition the shared eer/min_dcf metrics report


def enrollment_sweep(inputs: Any, fusion: Any, enrollment_utterances: int) -> dict[str, float]:
    """EER of the fused system on sv_eval trials made with each other number of enrollment utterances (the same
    fusion, the evaluation list's own seed; a choice some speaker has too few clips for is left out)."""
    from training.evaluation import verification
    from training.speech import trials as trial_lists
    from training.speech.synthesis.voices import voice_keys
    from training.workloads.speaker_verification import report as sv

    sets = {speaker for speaker in inputs.evaluation.enrollment}
    names = list(MODEL_FEATURES)
    cohorts = {name: sv.speaker_cohort(inputs.embeddings[name], inputs.clip_speakers, inputs.cohort_speakers)
               for name in names}
    metrics: dict[str, float] = {}
    for utterances in ENROLLMENT_CHOICES:
        if utterances == enrollment_utterances:
            continue
        try:
            trials = trial_lists.make_trials(inputs.clips, sorted(sets), utterances, inputs.evaluation.seed,
                                             voice_keys=voice_keys())
        except trial_lists.TrialError as error:
            log.info("no sweep point for %d enrollment utterances: %s", utterances, error)
            continue
        matrix = np.stack([sv.score_trials(inputs.embeddings[name], trials, cohorts[name]).normalised
                           for name in names], axis=1)
        llrs = fusion.llr(matrix)
        for condition in ("different_word", "all"):
            mask = trials.condition(condition)
            labels = trials.label[mask]
            if (labels == 1).any() and (labels == 0).any():
                metrics[f"eer_{sv.FUSION}_{condition}_enroll{utterances}"] = \
                    verification.equal_error_rate(labels, llrs[mask]).value
    return metrics


def held_out_family_metrics(spec: RunSpec, report: Any, evaluation: Any) -> dict[str, float]:
    """With held_out_families: the EER of every system on the trials of enrolled speakers whose voice family no
    model was trained on (``eer_<system>_held_out_families``), beside the same over the other speakers."""
    from training.evaluation import verification
    from training.speech import trials as trial_lists
    from training.speech.corpus_settings import held_out_families

    held_out = held_out_families(spec)
    if not held_out:
        return {}
    families = storage.require_manifest(spec.raw_uri()).get("voice_families") or {}
    unseen = np.array([trial_lists.is_held_out(families.get(speaker, ""), held_out)
                       for speaker in evaluation.model_speaker], bool)
    everything = evaluation.condition("all")
    metrics: dict[str, float] = {}
    for name, kind in (("held_out_families", unseen), ("training_families", ~unseen)):
        mask = everything & kind
        labels = report.evaluation_labels[mask]
        if not ((labels == 1).any() and (labels == 0).any()):
            continue
        for system, scores in report.evaluation_scores.items():
            metrics[f"eer_{system}_{name}"] = verification.equal_error_rate(labels, scores[mask]).value
        metrics[f"trials_{name}_targets"] = float((labels == 1).sum())
    return metrics


def evaluate_run(spec: RunSpec) -> dict[str, Any]:
    """Measure the system on sv_eval and log it; returns the evaluation record (a second call returns it again)."""
    from training.workloads.speaker_verification import report as sv
    from training.workloads.speaker_verification.fuse import scoring_inputs, system_uri
    from training.workloads.speaker_verification.score import branch_record
    from training.workloads.speaker_verification.verification_system import SYSTEM_KIND

    whole = spec.whole_run()
    done = storage.read_json(storage.join(whole.run_uri(), EVALUATION_FILE))
    if done is not None:
        log.info("run %s already evaluated: nothing to do", spec.run_name)
        return done
    if storage.read_manifest(system_uri(whole)) is None:
        raise RunSpecError(f"run_name={spec.run_name!r}: no fused system at {system_uri(whole)}; run the fuse step "
                           "first")
    system = storage.require_manifest(system_uri(whole), SYSTEM_KIND)
    inputs = scoring_inputs(whole)
    report = sv.evaluate_systems(inputs.embeddings, inputs.clip_speakers, inputs.cohort_speakers, inputs.development,
                                 inputs.evaluation, resamples=whole.bootstrap_resamples, seed=whole.seed)
    fused = report.fusion[sv.FUSION]
    from training.evaluation.scoring import LinearFusion

    fusion = LinearFusion(tuple(fused["weights"]), float(fused["offset"]), float(fused["prior"]))
    metrics = report.flat_metrics()
    metrics.update(enrollment_sweep(inputs, fusion, whole.enrollment_utterances))
    metrics.update(held_out_family_metrics(whole, report, inputs.evaluation))
    headline = report.metrics[sv.FUSION].get(HEADLINE_CONDITION) or report.metrics[sv.FUSION]["all"]
    metrics |= {"eer": headline["eer"], "min_dcf": headline["min_dcf_p01"], "min_dcf_p05": headline["min_dcf_p05"]}

    tags: dict[str, str] = {"kind": "verification_system", "headline_condition": HEADLINE_CONDITION,
                            "system_uri": system["uri"]}
    models: dict[str, Any] = {}
    mlflow_client = tracking.client(whole.resolved_tracking_uri())
    for model in MODEL_FEATURES:
        record = branch_record(whole, model)
        branch_run = mlflow_client.get_run(record["mlflow_run_id"]).data
        branch_metrics = branch_run.metrics
        tags[f"{model}_run_id"] = record["mlflow_run_id"]
        stage_seconds = stage_training_seconds(record)
        if stage_seconds:  # model A transferred from a source: one run per stage, the record is the last one's
            tags[f"{model}_stages"] = " → ".join(stage_seconds)
        models[model] = {"mlflow_run_id": record["mlflow_run_id"], "features": MODEL_FEATURES[model],
                         **{name: branch_metrics[name] for name in
                            ("model_parameters", "test_accuracy", "training_seconds", "wall_seconds", "speedup",
                             "samples_per_second_mean", "time_to_target_seconds") if name in branch_metrics},
                         **({"speedup_withheld": branch_run.tags[tracking.SPEEDUP_WITHHELD_TAG]}
                            if tracking.SPEEDUP_WITHHELD_TAG in branch_run.tags else {}),
                         **({"stage_training_seconds": stage_seconds,
                             "training_seconds_all_stages": sum(stage_seconds.values())} if stage_seconds else {})}
        for name, value in models[model].items():
            if isinstance(value, float):
                metrics[f"{model}_{name}"] = value
    parameters = [models[model].get("model_parameters") for model in MODEL_FEATURES]
    if all(parameters):
        metrics["parameter_ratio_b_to_a"] = parameters[1] / parameters[0]

    artifacts = verification_artifacts(whole, report, inputs.evaluation)
    run_id = tracking.log_system_run(whole, f"system-{whole.strategy}-{whole.config}-{whole.run_name}", metrics,
                                     tags, artifacts)
    evaluation = {"mlflow_run_id": run_id, "metrics": metrics, "models": models, "system_uri": system["uri"],
                  "counts": report.counts, "tags": tags}
    storage.write_json(storage.join(whole.run_uri(), EVALUATION_FILE), evaluation)
    return evaluation


def verification_artifacts(spec: RunSpec, report: Any, evaluation: Any) -> dict[str, bytes]:
    """DET curves per condition (both models and both fusions on one plot), score histograms, the report and the
    trial lists' seeds and counts."""
    from training.workloads.speaker_verification import report as sv

    title = f"{spec.workload} · {spec.strategy} {spec.config}"
    artifacts = {f"det_{condition}.png": sv.det_curves_png(report, evaluation, condition, f"{title} · {condition}")
                 for condition in report.counts if report.metrics[sv.FUSION].get(condition)}
    artifacts["score_histograms.png"] = sv.score_histograms_png(report, f"{title} · all sv_eval trials")
    artifacts["verification_report.json"] = json.dumps(report.to_mapping(), indent=2).encode()
    artifacts["trials.json"] = json.dumps({"sv_eval": {"seed": evaluation.seed,
                                                       "enrollment_utterances": evaluation.enrollment_utterances,
                                                       "counts": evaluation.counts()}}, indent=2).encode()
    return artifacts


def stage_training_seconds(record: dict[str, Any]) -> dict[str, float]:
    """Each stage's training clock, by stage name, for a model trained in stages (none otherwise): the model's
    record is its last stage's, so its own training_seconds leaves the earlier stages out."""
    seconds = {}
    for stage in record.get("stages") or []:
        result = (storage.read_json(storage.join(stage, RESULT_FILE)) or {}).get("result") or {}
        seconds[stage.rsplit("/", 1)[-1]] = float(result.get("training_seconds", math.nan))
    return seconds


def summary(spec: RunSpec, evaluation: dict[str, Any]) -> str:
    """EER and minDCF per model and fused, the fusion's gain, each model's size and speedup."""
    from training.workloads.speaker_verification import report as sv

    metrics = evaluation["metrics"]
    systems = [*MODEL_FEATURES, sv.EQUAL_WEIGHT, sv.FUSION]
    titles = {**MODEL_TITLES, sv.EQUAL_WEIGHT: "equal-weight fusion", sv.FUSION: "logistic fusion"}
    lines = [f"workload {spec.workload}, strategy {spec.strategy}, {spec.config} per model, {spec.epochs} epochs; "
             f"sv_eval trials ({HEADLINE_CONDITION}): {evaluation['counts'][HEADLINE_CONDITION]}"]
    for system in systems:
        eer = metrics.get(f"eer_{system}_{HEADLINE_CONDITION}")
        if eer is None:
            continue
        low, high = metrics[f"eer_ci_low_{system}_{HEADLINE_CONDITION}"], \
            metrics[f"eer_ci_high_{system}_{HEADLINE_CONDITION}"]
        lines.append(f"  {titles[system]:32s} EER {100 * eer:5.2f} % [{100 * low:5.2f}, {100 * high:5.2f}]  "
                     f"minDCF.01 {metrics[f'min_dcf_p01_{system}_{HEADLINE_CONDITION}']:.3f}  "
                     f"hard {_percent(metrics.get(f'eer_{system}_hard'))}")
    gain = metrics.get(f"fusion_eer_gain_{HEADLINE_CONDITION}_difference")
    if gain is not None:
        low = metrics[f"fusion_eer_gain_{HEADLINE_CONDITION}_ci_low"]
        high = metrics[f"fusion_eer_gain_{HEADLINE_CONDITION}_ci_high"]
        verdict = "excludes 0" if high < 0 or low > 0 else "includes 0"
        lines.append(f"fusion − best single EER {100 * gain:+.2f} points [{100 * low:+.2f}, {100 * high:+.2f}] "
                     f"({verdict})")
    if f"eer_{sv.FUSION}_held_out_families" in metrics:
        lines.append(f"held-out families fused EER {_percent(metrics[f'eer_{sv.FUSION}_held_out_families'])} on "
                     f"speakers of voice families no model trained on ({spec.held_out_families}); "
                     f"{_percent(metrics.get(f'eer_{sv.FUSION}_training_families'))} on the others (all trials)")
    sweep = [f"{n}: {100 * metrics[f'eer_{sv.FUSION}_{HEADLINE_CONDITION}_enroll{n}']:.2f} %"
             for n in ENROLLMENT_CHOICES if f"eer_{sv.FUSION}_{HEADLINE_CONDITION}_enroll{n}" in metrics]
    if sweep:
        lines.append(f"fused EER by enrollment utterances: {', '.join(sweep)} (the run's: "
                     f"{spec.enrollment_utterances})")
    for model, facts in evaluation["models"].items():
        speed = ("a 1-worker baseline" if spec.total_workers == 1 else
                 f"no speedup shown: {facts['speedup_withheld']}" if "speedup_withheld" in facts else
                 f"speedup {facts['speedup']:.2f}x (wall time) over its 1-worker run" if "speedup" in facts else
                 "no 1-worker run to compare with yet")
        clock = (f"training {facts.get('training_seconds', math.nan):.0f} s ({facts.get('wall_seconds', math.nan):.0f}"
                 " s wall, with start-up and the per-epoch dev EER)")
        if "stage_training_seconds" in facts:
            stages = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in facts["stage_training_seconds"].items())
            clock = (f"training {facts['training_seconds_all_stages']:.0f} s over its stages ({stages}; the "
                     "source's own training not counted)")
        lines.append(f"  {model}: {int(facts.get('model_parameters', 0)):,} parameters, speaker accuracy "
                     f"{100 * facts.get('test_accuracy', math.nan):.1f} % on held-out test clips, {clock}, {speed} "
                     f"(MLflow run {facts['mlflow_run_id']})")
    stages = evaluation.get("tags", {}).get(f"{MODEL_A}_stages")
    how = f"trained in stages {stages} from {spec.transfer_from}" if stages else \
        "from scratch (transfer_from is empty)"
    lines.append(f"transfer          model A {how}")
    lines.append(f"system            {evaluation['system_uri']} (cloudburst verify --system …)")
    lines.append(f"MLflow run        {evaluation['mlflow_run_id']} in experiment {spec.workload} "
                 f"({spec.resolved_tracking_uri()})")
    return "\n".join(lines)


def _percent(value: float | None) -> str:
    return "  –  " if value is None else f"{100 * value:5.2f} %"


def run_step(spec: RunSpec, overwrite: bool = False) -> str:
    print(summary(spec, evaluate_run(spec)), flush=True)
    return spec.whole_run().run_uri()


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=False, argv=argv)


if __name__ == "__main__":
    main()

"""Step ``fuse`` of speaker verification: S-norm of each model's cosine scores against a cohort of training
speakers, and the prior-weighted logistic-regression fusion of both (calibrated log-likelihood ratios) trained on
the sv_dev trials only; published with both embedders as a verification system (``<run>/system``) that
``cloudburst verify`` loads.

    python -m training.workloads.speaker_verification.fuse --workload speaker_verification --run-name my-run
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from training import storage
from training.config import RunSpec
from training.contract import REPO_ROOT
from training.workloads.speaker_verification import MODEL_FEATURES

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoringInputs:
    """What scoring reads: every clip's embeddings per model, the clip table, the trials, the cohort speakers."""

    embeddings: dict[str, np.ndarray]
    clip_speakers: np.ndarray
    clips: Any  # training.speech.trials.Clips
    development: Any  # Trials of sv_dev
    evaluation: Any  # Trials of sv_eval
    cohort_speakers: list[str]


def scoring_inputs(spec: RunSpec) -> ScoringInputs:
    from training.workloads.speaker_verification.score import read_embeddings
    from training.workloads.speaker_verification.speaker_clips import read_clip_table, read_trials

    whole = spec.whole_run()
    clips_uri = whole.raw_uri()
    clips, _ = read_clip_table(clips_uri)
    sets = storage.require_manifest(clips_uri)["speaker_sets"]
    embeddings = {model: read_embeddings(whole, model) for model in MODEL_FEATURES}
    for model, vectors in embeddings.items():
        if len(vectors) != len(clips):
            raise storage.DatasetError(f"{model}: {len(vectors)} embeddings for {len(clips)} clips: score the run "
                                       "again")
    return ScoringInputs(embeddings=embeddings, clip_speakers=clips.speaker, clips=clips,
                         development=read_trials(clips_uri, "sv_dev"), evaluation=read_trials(clips_uri, "sv_eval"),
                         cohort_speakers=sorted(s for s, name in sets.items() if name == "sv_train"))


def system_uri(spec: RunSpec) -> str:
    """Beside the run when its data root is local; a system is saved to local files (Keras), so under var/ else."""
    run_uri = spec.whole_run().run_uri()
    if run_uri.startswith("file://"):
        return storage.join(run_uri, "system")
    return str(REPO_ROOT / "var" / "systems" / spec.workload / spec.run_name)


def fuse(spec: RunSpec, overwrite: bool = False) -> dict[str, Any]:
    """Train the fusion on sv_dev and publish the system; returns its manifest."""
    from training.evaluation import scoring, verification
    from training.models.model_files import load_run_model
    from training.workloads.speaker_verification import report as sv
    from training.workloads.speaker_verification.score import branch_record
    from training.workloads.speaker_verification.speaker_embedding import embedding_model
    from training.workloads.speaker_verification.verification_system import VerificationSystem, save_system

    inputs = scoring_inputs(spec)
    names = tuple(MODEL_FEATURES)
    cohorts = {name: sv.speaker_cohort(inputs.embeddings[name], inputs.clip_speakers, inputs.cohort_speakers)
               for name in names}
    development = inputs.development
    natural = development.condition("all")  # the dev trials' natural mix, as in sv.evaluate_systems
    matrix = np.stack([sv.score_trials(inputs.embeddings[name], development, cohorts[name]).normalised[natural]
                       for name in names], axis=1)
    fusion = scoring.train_fusion(matrix, development.label[natural], sv.FUSION_PRIOR)
    dev_eer = verification.equal_error_rate(development.label[natural], fusion.llr(matrix))
    records = {name: branch_record(spec, name) for name in names}
    system = VerificationSystem(
        embedders={name: embedding_model(load_run_model(records[name])) for name in names},
        features=dict(MODEL_FEATURES), cohorts=cohorts, fusion=fusion, names=names,
        thresholds={"eer_sv_dev": dev_eer.threshold})
    recipe = {"models": {name: records[name]["result"]["model_uri"] for name in names},
              "trials": development.clips_fingerprint, "prior": sv.FUSION_PRIOR}
    manifest, created = save_system(system_uri(spec), system, recipe, overwrite=overwrite)
    weights = ", ".join(f"{name} {weight:.3f}" for name, weight in zip(names, fusion.weights, strict=True))
    log.info("fusion trained on %d sv_dev trials: weights %s, offset %.3f; dev EER %.2f%% at LLR %.3f; system %s %s",
             int(natural.sum()), weights, fusion.offset, 100 * dev_eer.value, dev_eer.threshold,
             "published at" if created else "already at", manifest["uri"])
    return manifest


def run_step(spec: RunSpec, overwrite: bool = False) -> str:
    return fuse(spec, overwrite)["uri"]


def main(argv: list[str] | None = None) -> None:
    from training.jobs.command_line import job_main

    job_main(__doc__, run_step, spark=False, argv=argv)


if __name__ == "__main__":
    main()

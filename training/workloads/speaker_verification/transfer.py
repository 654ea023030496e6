"""Transfer learning for model A: its DenseNet-BiLSTM trunk starts from a trained source's — a keyword spotter's,
or a speaker model A's pretrained on a separate pool of speakers (a trunk that already knows voices).

The train step of model A with ``transfer_from`` set trains in stages, each a run of its own (checkpoints, MLflow
run) below the model's run directory, through the run's strategy:

1. ``spotter`` — only when ``transfer_from`` is 'auto' and no keyword-spotting run fits: a keyword spotter trained on
   the same shards, the sv_train speakers' clips, with their words as labels (so it has heard no other speaker);
2. ``head`` — model A with the source's trunk (and, from a speaker model, its embedding layer) copied by layer name
   and frozen: only the head learns;
3. ``fine_tune`` — from the head stage's model at a quarter of the learning rate: from a keyword spotter, the upper
   three trunk units (BiLSTM, to-sequence, block 3) learn too; from a speaker model, every layer does (its trunk
   was trained for this task). The margin ramp goes on where the head stage left it.

A source fits when it is a finished run that heard no sv_dev or sv_eval speaker of this run's corpus (one that did
would flatter the figures): a kws_densenet_bilstm run on log-mel features with ``training_speakers=sv_train`` and
the same held-out families — what the speaker_verification DAG gets when the keyword spotter's model asset
triggers it — or a speaker_verification model A run of another corpus (the pretraining pool: e.g. the synthetic
corpus of another seed, whose speakers are drawn from other generators), whose sv_train speakers are none of this
corpus's trial speakers. Anything else is refused in one line before any training starts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from training import storage
from training.contract import RESULT_FILE, RUN_SPEC_FILE
from training.settings import RunSpecError
from training.workloads.speaker_verification import FINE_TUNE, HEAD, MODEL_A, MODEL_FEATURES, SPOTTER

if TYPE_CHECKING:
    from training.config import RunSpec

log = logging.getLogger(__name__)

KEYWORD_SPOTTING = "kws_densenet_bilstm"
SPEAKER_VERIFICATION = "speaker_verification"
FINE_TUNED_UNITS = 3  # from a spotter: bilstm, to_sequence, block3 (speaker_embedding.trunk_units, top first)
FINE_TUNE_RATE_FACTOR = 0.25
AUTO_CANDIDATES = 50  # newest keyword-spotting runs 'auto' looks at


def training_stages(spec: RunSpec) -> list[RunSpec]:
    """The runs the train step trains for ``spec``, in order: the run itself, or model A's transfer stages."""
    if not spec.embedding_model:  # refused here, before Spark, rather than inside a training task
        raise RunSpecError(f"workload {spec.workload} trains one embedding model at a time: give --embedding-model "
                           f"({', '.join(MODEL_FEATURES)}) with its --features (the DAG trains both as branches)")
    if spec.embedding_model != MODEL_A or not spec.transfer_from or spec.transfer_stage:
        if spec.transfer_from and not spec.transfer_stage:
            resolve_source(spec)  # model B checks it too: whichever branch trains first refuses a bad one
        return [spec]
    stages = []
    source_run = resolve_source(spec)
    if source_run is None:
        spotter = spec.with_changes(transfer_stage=SPOTTER, epochs=spec.transfer_spotter_epochs)
        stages.append(spotter)
        source_run = spotter.run_uri()
        log.info("transfer_from=auto: no finished keyword spotter on log-mel trained only on sv_train speakers; "
                 "training one first (%d epochs)", spec.transfer_spotter_epochs)
    else:
        kind = "speaker model A" if _knows_voices(source_run) else "keyword spotter"
        log.info("model A starts from the %s at %s", kind, source_run)
    stages.append(spec.with_changes(transfer_stage=HEAD, epochs=spec.transfer_head_epochs, transfer_from=source_run))
    stages.append(spec.with_changes(transfer_stage=FINE_TUNE, epochs=spec.epochs - spec.transfer_head_epochs,
                                    learning_rate=spec.learning_rate * FINE_TUNE_RATE_FACTOR,
                                    transfer_from=source_run))
    return stages


def resolve_source(spec: RunSpec) -> str | None:
    """The run directory of the source ``transfer_from`` names — a keyword spotter or a speaker model A — checked,
    or None for 'auto' when no keyword spotter fits."""
    reference = spec.transfer_from
    if reference == "auto":
        for candidate in _finished_keyword_spotting_runs(spec):
            try:
                return check_source(spec, candidate, reference)
            except RunSpecError as why:
                log.info("transfer_from=auto: not %s: %s", candidate.run_uri(), why)
        return None
    if len(reference) == 32 and all(character in "0123456789abcdef" for character in reference):
        return check_source(spec, _spec_of_mlflow_run(spec, reference), reference)
    recorded = storage.read_json(storage.join(storage.to_uri(reference), RUN_SPEC_FILE))
    if recorded is None:
        raise RunSpecError(f"transfer_from={reference!r}: no {RUN_SPEC_FILE} there: not a Cloudburst run directory")
    return check_source(spec, _spec_from(recorded, reference), reference)


def check_source(spec: RunSpec, source: RunSpec, reference: str) -> str:
    """Refuse a run that is no finished source for model A — a log-mel keyword spotter or a speaker model A — or
    that heard a trial speaker of this run's corpus; returns its run directory."""
    if source.workload == SPEAKER_VERIFICATION:
        return _check_speaker_source(spec, source, reference)
    from training.speech import ingest as speech_ingest

    if source.workload != KEYWORD_SPOTTING:
        raise RunSpecError(f"transfer_from={reference!r}: a {source.workload} run, not a keyword spotter "
                           f"({KEYWORD_SPOTTING}) or a speaker model A ({SPEAKER_VERIFICATION}, {MODEL_A})")
    if source.features != MODEL_FEATURES[MODEL_A]:
        raise RunSpecError(f"transfer_from={reference!r}: the keyword spotter read {source.features} features, model "
                           f"A reads {MODEL_FEATURES[MODEL_A]}: mismatched feature kinds")
    _require_finished(source, reference)
    heard = speech_ingest.split_speakers(source.raw_uri(), "train")
    _refuse_trial_speakers(spec, heard, reference, "the keyword spotter",
                           "train it with training_speakers=sv_train (and this run's held_out_families), or use "
                           "'auto' to train one on the sv_train clips")
    return source.run_uri()


def _check_speaker_source(spec: RunSpec, source: RunSpec, reference: str) -> str:
    """A speaker model A of another corpus (the pretraining pool): finished, and its training speakers (its
    corpus's sv_train) none of this corpus's sv_dev or sv_eval speakers."""
    if source.embedding_model != MODEL_A:
        raise RunSpecError(f"transfer_from={reference!r}: a speaker_verification run of "
                           f"{source.embedding_model or 'no embedding model'}, not of {MODEL_A} (model A's trunk is "
                           "the one that transfers)")
    _require_finished(source, reference)
    sets = storage.read_manifest(source.raw_uri())
    if sets is None or not isinstance(sets.get("speaker_sets"), dict):
        raise RunSpecError(f"transfer_from={reference!r}: its corpus {source.raw_uri()} is gone or records no speaker "
                           "sets: which speakers it heard cannot be checked")
    heard = sorted(speaker for speaker, name in sets["speaker_sets"].items() if name == "sv_train")
    _refuse_trial_speakers(spec, heard, reference, "the speaker model",
                           "pretrain it on a corpus of other speakers (e.g. the synthetic corpus of another seed)")
    return source.run_uri()


def _require_finished(source: RunSpec, reference: str) -> None:
    record = storage.read_json(storage.join(source.run_uri(), RESULT_FILE))
    if record is None or not record.get("mlflow_run_id"):
        raise RunSpecError(f"transfer_from={reference!r}: {source.run_uri()} holds no finished training")


def _refuse_trial_speakers(spec: RunSpec, heard: list[str], reference: str, what: str, remedy: str) -> None:
    sets = storage.require_manifest(spec.raw_uri()).get("speaker_sets") or {}
    # Speakers this corpus has no set for (left out for too few clips, or of another corpus) are in no trial.
    trial_speakers = sorted(speaker for speaker in heard if sets.get(speaker) in ("sv_dev", "sv_eval"))
    if trial_speakers:
        in_eval = [speaker for speaker in trial_speakers if sets.get(speaker) == "sv_eval"]
        raise RunSpecError(f"transfer_from={reference!r}: {what} was trained on {len(trial_speakers)} "
                           f"speakers outside sv_train ({len(in_eval)} of them in sv_eval, e.g. "
                           f"{(in_eval or trial_speakers)[0]}): its trunk has heard speakers it would be evaluated "
                           f"on; {remedy}")


def source_knows_voices(spec: RunSpec) -> bool:
    """Whether this transfer's source (``transfer_from``, a checked run directory) is a speaker model."""
    return _knows_voices(spec.transfer_from)


def _knows_voices(run: str) -> bool:
    recorded = storage.read_json(storage.join(storage.to_uri(run), RUN_SPEC_FILE)) or {}
    # The spotter 'auto' trains is a stage of a speaker_verification run, but a keyword spotter all the same.
    return recorded.get("workload") == SPEAKER_VERIFICATION and recorded.get("transfer_stage") != SPOTTER


def _spec_from(values: dict[str, Any], reference: str) -> RunSpec:
    from training.config import SETTINGS, RunSpec

    try:
        return RunSpec.from_mapping({name: value for name, value in values.items() if name in SETTINGS})
    except RunSpecError as error:
        raise RunSpecError(f"transfer_from={reference!r}: its run settings do not read back ({error})") from None


def _spec_of_mlflow_run(spec: RunSpec, run_id: str) -> RunSpec:
    from training import tracking

    try:
        run = tracking.client(spec.resolved_tracking_uri()).get_run(run_id)
    except Exception as error:  # MLflow raises its own exception types for an unknown id
        raise RunSpecError(f"transfer_from={run_id!r}: no such MLflow run in {spec.resolved_tracking_uri()} "
                           f"({str(error).splitlines()[0][:120]})") from None
    return _spec_from(dict(run.data.params), run_id)


def _finished_keyword_spotting_runs(spec: RunSpec) -> list[RunSpec]:
    """The newest finished keyword-spotting runs of this MLflow store, newest first."""
    from training import tracking

    mlflow_client = tracking.client(spec.resolved_tracking_uri())
    experiment = mlflow_client.get_experiment_by_name(KEYWORD_SPOTTING)
    if experiment is None:
        return []
    runs = mlflow_client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'",
                                     order_by=["attributes.start_time DESC"], max_results=AUTO_CANDIDATES)
    specs = []
    for run in runs:
        try:
            specs.append(_spec_from(dict(run.data.params), run.info.run_id))
        except RunSpecError as why:
            log.info("transfer_from=auto: skipping MLflow run %s: %s", run.info.run_id, why)
    return specs


def stage_model(spec: RunSpec, num_speakers: int) -> Any:
    """Model A for a transfer stage: the source's trunk (and a speaker source's embedding layer), frozen (head), or
    the head stage's model with its upper units — every unit, from a speaker source — unfrozen (fine_tune). Compile
    after (Keras reads ``trainable`` then)."""
    import training.workloads.speaker_verification.speaker_embedding as speaker_embedding
    from training.models.model_files import load_run_model
    from training.speech.audio.features import feature_shape

    model = speaker_embedding.densenet_bilstm_embedder(feature_shape(spec.features), num_speakers=num_speakers)
    knows_voices = source_knows_voices(spec)
    embedding = model.get_layer(speaker_embedding.EMBEDDING_LAYER)
    if spec.transfer_stage == HEAD:
        source = load_run_model(_run_record(spec.transfer_from))
        speaker_embedding.transfer_trunk(source, model)
        speaker_embedding.freeze_trunk(model, trainable_blocks=0)
        if knows_voices:  # the embedding it learned is the speaker space; only the new speakers' cosines learn
            embedding.set_weights(source.get_layer(speaker_embedding.EMBEDDING_LAYER).get_weights())
            embedding.trainable = False
    elif spec.transfer_stage == FINE_TUNE:
        head_run = spec.with_changes(transfer_stage=HEAD).run_uri()
        model.set_weights(load_run_model(_run_record(head_run)).get_weights())
        units = len(speaker_embedding.trunk_units(model)) if knows_voices else FINE_TUNED_UNITS
        speaker_embedding.freeze_trunk(model, trainable_blocks=units)
    return model


def margin_epoch_offset(spec: RunSpec) -> int:
    """Fine-tuning continues the margin ramp where the head stage left it."""
    return spec.transfer_head_epochs if spec.transfer_stage == FINE_TUNE else 0


def _run_record(run_uri: str) -> dict[str, Any]:
    record = storage.read_json(storage.join(run_uri, RESULT_FILE))
    if record is None:
        raise RunSpecError(f"{run_uri}: no finished training to start from")
    return record

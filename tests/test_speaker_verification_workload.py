"""The speaker-verification workload end to end on a small WAV corpus: ingest with speakers as labels (speaker sets,
trial lists, the clip table), its refusals, the run specification's branches, the trainable (classes, the angular
margin ramped per epoch), and with real Spark: features → shards → a real strategy for each embedding model, then
score → fuse → evaluate."""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from wav_files import wav_bytes

from training import storage
from training.config import RunSpec, RunSpecError
from training.speech import ingest as speech_ingest
from training.speech import trials as trial_lists
from training.workloads.speaker_verification import speaker_clips

WORDS = ("yes", "no", "up")
CLIPS_PER_SPEAKER = 6  # two takes of each word
ENROLLMENT = 3


def speaker_ids(count: int) -> list[str]:
    """Eight hex characters, like Speech Commands' ids; the sha1 rule puts the first ten in sv_train ×4 (0-3),
    sv_eval ×3 (4, 8, 9) and sv_dev ×3 (5-7); 36 of them give 21 / 9 / 6."""
    return [hashlib.sha1(f"sv speaker {number}".encode()).hexdigest()[:8] for number in range(count)]


def clip_audio(speaker_number: int, take: int) -> np.ndarray:
    """One second of a speaker's own tone plus noise seeded by (speaker, take): every clip's bytes differ."""
    rng = np.random.default_rng([speaker_number, take])
    t = np.arange(16_000) / 16_000
    voice = 6000 * np.sin(2 * np.pi * (150 + 23 * speaker_number) * t) * (1 + 0.3 * np.sin(2 * np.pi * 3 * t))
    return np.clip(voice + rng.normal(0, 1500, t.shape), -32768, 32767).astype(np.int16)


def make_speaker_corpus(root: Path, speakers: list[str], clips: Mapping[str, int] | None = None,
                        duplicates: bool = False) -> Path:
    """A Speech Commands-layout corpus: ``<word>/<speaker>_nohash_<n>.wav``, CLIPS_PER_SPEAKER clips per speaker
    (fewer for those in ``clips``), spread over WORDS. With ``duplicates`` every speaker's last clip repeats the
    bytes of its first (another word), so trials must keep such pairs apart."""
    clips = clips or {}
    for number, speaker in enumerate(speakers):
        count = clips.get(speaker, CLIPS_PER_SPEAKER)
        for take in range(count):
            word = WORDS[take % len(WORDS)]
            (root / word).mkdir(parents=True, exist_ok=True)
            samples = clip_audio(number, 0 if duplicates and take == count - 1 else take)
            (root / word / f"{speaker}_nohash_{take // len(WORDS)}.wav").write_bytes(wav_bytes(samples))
    return root


def assert_nothing_published(destination: Path) -> None:
    assert not destination.exists(), sorted(str(path) for path in destination.rglob("*"))
    assert not destination.parent.exists() or not any(destination.parent.iterdir()), \
        list(destination.parent.iterdir())


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """36 speakers × 6 clips, each speaker with one pair of byte-identical clips."""
    return make_speaker_corpus(tmp_path_factory.mktemp("sv-corpus"), speaker_ids(36), duplicates=True)


# --- Ingest ----------------------------------------------------------------------------------------------------


def test_ingest_makes_disjoint_speaker_sets_classifier_splits_of_training_speakers_and_trials_within_each_set(
        corpus, tmp_path):
    destination = str(tmp_path / "clips")
    manifest, created = speaker_clips.ingest(str(corpus), destination, enrollment_utterances=ENROLLMENT, seed=4)
    assert created
    speakers = speaker_ids(36)
    sets = manifest["speaker_sets"]
    assert sorted(sets) == sorted(speakers)  # each speaker in exactly one set
    members = {name: {s for s, set_name in sets.items() if set_name == name} for name in trial_lists.SPEAKER_SETS}
    assert {name: len(group) for name, group in members.items()} == {"sv_train": 21, "sv_dev": 6, "sv_eval": 9}
    assert manifest["clips"] == 36 * CLIPS_PER_SPEAKER

    training_classes = manifest["training_classes"]
    class_names = manifest["class_names"]
    assert training_classes == 21 and len(class_names) == 36 and sorted(class_names) == sorted(speakers)
    assert set(class_names[:training_classes]) == members["sv_train"]

    split_speakers: dict[str, list[str]] = {}
    for split in ("train", "test", "validation", "sv_dev", "sv_eval"):
        _, table = speech_ingest.read_clips(destination, split)
        labels = table.column("label").to_numpy()
        split_speakers[split] = table.column("speaker").to_pylist()
        assert [class_names[label] for label in labels] == split_speakers[split], split  # labels index class_names
        if split in ("train", "validation", "test"):  # the training speakers' clips: trained, validated, tested
            assert set(split_speakers[split]) <= members["sv_train"], split
            assert (labels < training_classes).all() and len(labels), split
    assert sum(len(split_speakers[split]) for split in ("train", "validation", "test")) == 21 * CLIPS_PER_SPEAKER
    for set_name in speaker_clips.TRIAL_SETS:  # every clip of a dev/eval speaker, in its own split only
        assert sorted(split_speakers[set_name]) == sorted(s for s in members[set_name] for _ in
                                                          range(CLIPS_PER_SPEAKER)), set_name

    clips, paths = speaker_clips.read_clip_table(destination)
    assert len(clips) == len(paths) == manifest["clips"] and paths == sorted(paths)
    trials = {set_name: speaker_clips.read_trials(destination, set_name) for set_name in speaker_clips.TRIAL_SETS}
    trial_lists.check_disjoint(sets, trials, clips)
    for set_name, set_trials in trials.items():
        assert set(set_trials.enrollment) == members[set_name]
        assert set(set_trials.model_speaker.tolist()) == members[set_name]
        assert set(clips.speaker[set_trials.test_clip].tolist()) <= members[set_name]
        assert (set_trials.label == 1).any() and (set_trials.label == 0).any()
        assert all(len(rows) == ENROLLMENT for rows in set_trials.enrollment.values())
        assert set_trials.seed == manifest["trials"][set_name]["seed"]
        for model, row in zip(set_trials.model_speaker, set_trials.test_clip, strict=True):
            enrolled = set_trials.enrollment[model]
            assert row not in enrolled
            assert clips.digest[row] not in set(clips.digest[enrolled].tolist()), (set_name, model, row)
    assert len(set(clips.digest.tolist())) == 36 * (CLIPS_PER_SPEAKER - 1)  # the duplicates are really there

    again, created_again = speaker_clips.ingest(str(corpus), destination, enrollment_utterances=ENROLLMENT, seed=4)
    assert not created_again and again["data_version"] == manifest["data_version"]


# --- Refusals ----------------------------------------------------------------------------------------------------


def test_too_few_speakers_for_the_speaker_sets_is_a_one_line_error_and_nothing_is_published(tmp_path):
    corpus = make_speaker_corpus(tmp_path / "corpus", speaker_ids(6))  # sv_eval and sv_dev get one each
    destination = tmp_path / "out" / "clips"
    with pytest.raises(storage.DatasetError, match="too few speakers per set") as raised:
        speaker_clips.ingest(str(corpus), str(destination))
    message = str(raised.value)
    assert "\n" not in message and "sv_dev 1 < 2" in message and "sv_eval 1 < 2" in message
    assert_nothing_published(destination)


def test_speakers_with_too_few_clips_are_left_out_and_listed_in_the_ingest_report(tmp_path):
    speakers = speaker_ids(36)
    short = {speakers[0]: ENROLLMENT, speakers[4]: ENROLLMENT - 1}  # one of sv_train, one of sv_eval
    corpus = make_speaker_corpus(tmp_path / "corpus", speakers, clips=short)
    manifest, created = speaker_clips.ingest(str(corpus), str(tmp_path / "clips"), enrollment_utterances=ENROLLMENT)
    assert created
    report = storage.read_json(storage.join(manifest["uri"], speech_ingest.REPORT_NAME))
    assert report["speakers_left_out_for_too_few_clips"] == sorted(short)
    assert not set(short) & set(manifest["speaker_sets"]) and not set(short) & set(manifest["class_names"])
    assert manifest["clips"] == 34 * CLIPS_PER_SPEAKER
    clips, _ = speaker_clips.read_clip_table(manifest["uri"])
    assert not set(short) & set(clips.speaker.tolist())


def test_leaving_out_speakers_with_too_few_clips_can_leave_too_few_speakers_which_the_error_mentions(tmp_path):
    speakers = speaker_ids(10)  # sv_eval: 4, 8 and 9
    corpus = make_speaker_corpus(tmp_path / "corpus", speakers, clips={speakers[8]: 2, speakers[9]: 3})
    destination = tmp_path / "out" / "clips"
    with pytest.raises(storage.DatasetError, match="too few speakers per set") as raised:
        speaker_clips.ingest(str(corpus), str(destination), enrollment_utterances=ENROLLMENT)
    message = str(raised.value)
    assert "\n" not in message and "sv_eval 1 < 2" in message
    assert "2 speakers were left out for having too few clips" in message
    assert_nothing_published(destination)


def test_held_out_families_on_a_corpus_without_voice_families_is_refused_before_publishing(tmp_path):
    corpus = make_speaker_corpus(tmp_path / "corpus", speaker_ids(10))
    destination = tmp_path / "out" / "clips"
    with pytest.raises(storage.DatasetError, match="held_out_families needs a corpus that records") as raised:
        speaker_clips.ingest(str(corpus), str(destination), held_out_families=("pico",))
    assert "\n" not in str(raised.value)
    assert_nothing_published(destination)


# --- Run specification -------------------------------------------------------------------------------------------


def test_an_embedding_model_with_the_other_feature_kind_is_refused_naming_its_own():
    spec = RunSpec(workload="speaker_verification", embedding_model="model_b")
    assert spec.features == "log_mel"
    with pytest.raises(RunSpecError, match="mfcc") as raised:
        spec.validate()
    assert "\n" not in str(raised.value)
    RunSpec(workload="speaker_verification", embedding_model="model_b", features="mfcc").validate()
    RunSpec(workload="speaker_verification", embedding_model="model_a").validate()


def test_each_branch_has_its_own_features_shards_and_run_directory_and_whole_run_undoes_it(tmp_path):
    from training.jobs.command_line import job_parser

    spec = RunSpec(workload="speaker_verification", run_name="sv-run", data_root=str(tmp_path / "root"))
    branches = {model: spec.for_branch(model) for model in ("model_a", "model_b")}
    assert {model: (branch.embedding_model, branch.features) for model, branch in branches.items()} == \
        {"model_a": ("model_a", "log_mel"), "model_b": ("model_b", "mfcc")}
    for uri in ("augmented_uri", "shards_uri", "run_uri"):
        values = {getattr(branch, uri)() for branch in branches.values()}
        assert len(values) == 2, uri
    for model, branch in branches.items():
        branch.validate()
        assert branch.run_uri() == f"{spec.run_uri()}/{model}"
        assert branch.raw_uri() == spec.raw_uri()  # one clips dataset for both
        assert branch.whole_run() == spec and branch.whole_run().run_uri() == spec.run_uri()
        parsed = job_parser("", spark=True).parse_args(branch.to_args())
        assert RunSpec.from_args(parsed) == branch
    assert spec.whole_run() == spec
    parser = argparse.ArgumentParser()
    RunSpec.add_arguments(parser)
    assert RunSpec.from_args(parser.parse_args(spec.to_args())) == spec
    with pytest.raises(RunSpecError, match="no branch 'model_c'.*model_a, model_b"):
        spec.for_branch("model_c")


# --- Trainable ---------------------------------------------------------------------------------------------------


def test_the_trainable_classifies_the_training_speakers_and_ramps_the_margin_of_its_one_loss(corpus, tmp_path):
    from training.workload_registry import workload_for
    from training.workloads.speaker_verification import trainable
    from training.workloads.speaker_verification.angular_margin import AdditiveAngularMarginLoss, ramped_margin

    spec = RunSpec(workload="speaker_verification", data_source=str(corpus), data_root=str(tmp_path / "root"))
    manifest, created = trainable.ingest(spec)
    assert created and manifest["uri"] == storage.to_uri(spec.raw_uri())
    workload = workload_for(spec.for_branch("model_b"))
    assert workload.num_classes == manifest["training_classes"] == 21
    assert workload.class_names == tuple(manifest["class_names"][:21])
    loss = workload.make_loss()
    assert isinstance(loss, AdditiveAngularMarginLoss) and workload.make_loss() is loss
    assert float(loss.margin.numpy()) == 0.0
    for epoch in (5, 0, 1, 2, 3, 4, 7):
        workload.start_epoch(epoch)
        assert float(loss.margin.numpy()) == pytest.approx(ramped_margin(epoch, ramp_epochs=4), abs=1e-7), epoch
    workload.start_epoch(0)
    assert float(workload.make_loss().margin.numpy()) == 0.0
    workload.start_epoch(4)
    assert float(workload.make_loss().margin.numpy()) == pytest.approx(0.2)
    assert workload.build_model().output_shape == (None, 21)


def test_the_trainable_needs_an_embedding_model():
    from training.workload_registry import workload_for

    with pytest.raises(RunSpecError, match="embedding_model"):
        workload_for(RunSpec(workload="speaker_verification"))


# --- With Spark: features, shards, a real strategy, then score → fuse → evaluate ---------------------------------


@pytest.mark.spark
def test_both_models_train_through_a_strategy_and_score_fuse_evaluate_publish_once(spark, corpus, tmp_path):
    from training.contract import EVALUATION_FILE, RESULT_FILE
    from training.jobs.shard import shard_dataset
    from training.jobs.train import train_run
    from training.speech.features_job import features_dataset
    from training.workloads.speaker_verification import evaluate_trials, fuse, score, trainable

    spec = RunSpec(workload="speaker_verification", strategy="averaging", nodes=1, workers_per_node=2, epochs=1,
                   batch_size_per_worker=8, rounds_per_epoch=1, evaluations_per_epoch=1, bootstrap_resamples=20,
                   run_name="sv-test", data_source=str(corpus), data_root=str(tmp_path / "root"),
                   tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    clips = trainable.ingest(spec)[0]
    for model, kind in (("model_b", "mfcc"), ("model_a", "log_mel")):
        branch = spec.for_branch(model)
        features = features_dataset(spark, branch.raw_uri(), branch.augmented_uri(), branch.features,
                                    copies=branch.augment_copies, seed=branch.seed)[0]
        assert features["features"] == kind
        assert {split: features["splits"][split]["rows"] for split in score.EMBEDDING_SPLITS} == \
            {split: clips["splits"][split]["rows"] for split in score.EMBEDDING_SPLITS}
        shards = shard_dataset(spark, features["uri"], branch.shards_uri(), branch.total_workers, seed=branch.seed)[0]
        assert sum(shard["rows"] for shard in shards["shards"]) == clips["splits"]["train"]["rows"]
        record = train_run(spark, branch)
        assert record["mlflow_run_id"] and len(record["result"]["epochs"]) == 1
        assert np.isfinite(record["result"]["epochs"][-1]["train_loss"])
        assert 0 <= record["result"]["epochs"][-1]["dev_eer"] <= 1  # the time-to-EER clock, every epoch
        assert storage.read_json(storage.join(branch.run_uri(), RESULT_FILE)) is not None

        embeddings = score.score_model(spec, model)
        assert embeddings["clips"] == clips["clips"] and embeddings["model"] == model
        vectors = score.read_embeddings(spec, model)
        assert vectors.shape == (clips["clips"], embeddings["embedding_dim"]) and np.isfinite(vectors).all()
        assert (np.linalg.norm(vectors, axis=1) > 0).all()
        assert storage.read_json(storage.join(branch.run_uri(), EVALUATION_FILE))["metrics"]["training_speakers"] \
            == clips["training_classes"]

    assert score.run_step(spec) == spec.run_uri()  # both published already: nothing to do
    system_uri = fuse.run_step(spec)
    assert storage.read_manifest(system_uri) is not None
    evaluation = evaluate_trials.evaluate_run(spec)
    assert {"eer", "eer_logistic_fusion_all", "min_dcf"} <= set(evaluation["metrics"])
    assert all(np.isfinite(evaluation["metrics"][name]) for name in ("eer", "eer_logistic_fusion_all", "min_dcf"))
    # After one epoch accepting nothing may be cheapest at a low P_target: that operating point's threshold is +inf.
    assert all(value == np.inf and "min_dcf" in name and name.endswith(("_same_word", "_different_word", "_hard",
                                                                         "_all")) and "threshold" in name
               for name, value in evaluation["metrics"].items() if not np.isfinite(value))
    assert set(evaluation["models"]) == {"model_a", "model_b"}
    assert evaluation["system_uri"] == system_uri
    recorded = storage.read_json(storage.join(spec.run_uri(), EVALUATION_FILE))
    assert json.loads(json.dumps(evaluation)) == recorded
    assert evaluate_trials.evaluate_run(spec) == recorded  # a second call returns the same record
    summary = evaluate_trials.summary(spec, recorded)
    assert "logistic fusion" in summary and system_uri in summary and recorded["mlflow_run_id"] in summary
    for facts in recorded["models"].values():  # the training clock and the wall time, each named as what it is
        assert 0 < facts["training_seconds"] < facts["wall_seconds"]
        assert f"training {facts['training_seconds']:.0f} s ({facts['wall_seconds']:.0f} s wall" in summary
    assert evaluate_trials.evaluate_run(spec.for_branch("model_a")) == recorded  # from a branch's spec too


def test_a_model_trained_in_stages_shows_the_training_clock_of_every_stage(tmp_path):
    """A transferred model A's record is its last stage's: the summary adds up every stage, and says the source's
    own training is not in it."""
    from training.contract import RESULT_FILE
    from training.workloads.speaker_verification import evaluate_trials

    stages = [storage.to_uri(str(tmp_path / "model_a" / name)) for name in ("head", "fine_tune")]
    for stage, seconds in zip(stages, (21.7, 353.2), strict=True):
        storage.write_json(storage.join(stage, RESULT_FILE), {"result": {"training_seconds": seconds}})
    seconds = evaluate_trials.stage_training_seconds({"stages": stages})
    assert seconds == {"head": 21.7, "fine_tune": 353.2}
    assert evaluate_trials.stage_training_seconds({"stages": []}) == {}
    facts = {"mlflow_run_id": "a", "training_seconds": 353.2, "wall_seconds": 435.0,
             "stage_training_seconds": seconds, "training_seconds_all_stages": sum(seconds.values())}
    evaluation = {"metrics": {}, "counts": {"different_word": {"targets": 1}}, "models": {"model_a": facts},
                  "tags": {"model_a_stages": "head → fine_tune"}, "system_uri": "file:///s", "mlflow_run_id": "r"}
    text = evaluate_trials.summary(RunSpec(workload="speaker_verification", transfer_from="/pool/model_a"),
                                   evaluation)
    assert ("training 375 s over its stages (head 22 s, fine_tune 353 s; the source's own training not counted)"
            in text)
    assert "training 353 s (435 s wall" not in text  # the last stage's clock alone is not shown as the model's
    assert "model A trained in stages head → fine_tune from /pool/model_a" in text


def prepare_branch(spark, spec: RunSpec, model: str) -> RunSpec:
    """Ingest, then one model's features and shards (no augmented copies): its branch spec, ready to train."""
    from training.jobs.shard import shard_dataset
    from training.speech.features_job import features_dataset
    from training.workloads.speaker_verification import trainable

    trainable.ingest(spec)
    branch = spec.for_branch(model)
    features_dataset(spark, branch.raw_uri(), branch.augmented_uri(), branch.features, copies=0, seed=0)
    shard_dataset(spark, branch.augmented_uri(), branch.shards_uri(), branch.total_workers, seed=0)
    return branch


# --- Transfer from a keyword spotter ------------------------------------------------------------------------------


def test_transfer_from_refuses_what_is_not_a_keyword_spotter_trained_on_sv_train_only(corpus, tmp_path):
    """Each a one-line RunSpecError before any training: a run directory that is no run, a run of another workload,
    an unknown MLflow run id, a keyword spotter on other features, one that heard sv_eval speakers."""
    from training.contract import RESULT_FILE, RUN_SPEC_FILE
    from training.jobs.train import training_stages
    from training.workloads.speaker_verification import trainable

    root = tmp_path / "root"
    spec = RunSpec(workload="speaker_verification", data_source=str(corpus), data_root=str(root), epochs=3,
                   tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    trainable.ingest(spec)

    def stages_with(reference: str) -> list[RunSpec]:
        return training_stages(spec.with_changes(transfer_from=reference).for_branch("model_a").validate())

    with pytest.raises(RunSpecError, match="not a Cloudburst run directory"):
        stages_with(str(tmp_path / "nowhere"))
    with pytest.raises(RunSpecError, match="no such MLflow run"):
        stages_with("0" * 32)
    # A keyword spotter ingested from the same corpus by its own split rule: its training speakers include sv_eval's.
    spotter = RunSpec(workload="kws_densenet_bilstm", data_source=str(corpus), data_root=str(root), kws_task=35,
                      run_name="spotter")
    speech_ingest.ingest(str(corpus), spotter.raw_uri(), task=35)
    for candidate, message in ((spotter.with_changes(features="mfcc"), "mismatched feature kinds"),
                               (spotter, "outside sv_train .* in sv_eval")):
        storage.write_json(storage.join(candidate.run_uri(), RUN_SPEC_FILE), candidate.to_mapping())
        storage.write_json(storage.join(candidate.run_uri(), RESULT_FILE),
                           {"mlflow_run_id": "x", "result": {"model_uri": "nowhere"}})
        with pytest.raises(RunSpecError, match=message):
            stages_with(candidate.run_uri())
    other = spec.for_branch("model_b").with_changes(run_name="other")
    storage.write_json(storage.join(other.run_uri(), RUN_SPEC_FILE), other.to_mapping())
    with pytest.raises(RunSpecError, match="a speaker_verification run of model_b, not of model_a"):
        stages_with(other.run_uri())
    # Model B checks the reference too (whichever branch trains first refuses it), and trains in one stage.
    with pytest.raises(RunSpecError, match="outside sv_train"):
        training_stages(spec.with_changes(transfer_from=spotter.run_uri()).for_branch("model_b"))
    assert training_stages(spec.for_branch("model_b")) == [spec.for_branch("model_b")]
    # The same corpus ingested with training_speakers=sv_train (what the DAG's asset schedule expects): its
    # training speakers are sv_train speakers only, and model A starts from it in two stages.
    fitting = spotter.with_changes(training_speakers="sv_train", run_name="fitting")
    speech_ingest.ingest(str(corpus), fitting.raw_uri(), task=35, training_speakers="sv_train")
    sets = storage.require_manifest(spec.raw_uri())["speaker_sets"]
    heard = speech_ingest.split_speakers(fitting.raw_uri(), "train")
    assert heard and {sets[speaker] for speaker in heard} == {"sv_train"}
    assert speech_ingest.split_speakers(fitting.raw_uri(), "test") == speech_ingest.split_speakers(
        spotter.raw_uri(), "test")  # validation and test are the same either way
    storage.write_json(storage.join(fitting.run_uri(), RUN_SPEC_FILE), fitting.to_mapping())
    storage.write_json(storage.join(fitting.run_uri(), RESULT_FILE),
                       {"mlflow_run_id": "x", "result": {"model_uri": "nowhere"}})
    stages = stages_with(fitting.run_uri())
    assert [(stage.transfer_stage, stage.transfer_from) for stage in stages] == [
        ("head", fitting.run_uri()), ("fine_tune", fitting.run_uri())]
    with pytest.raises(ValueError, match="training_speakers must be one of all, sv_train"):
        speech_ingest.ingest(str(corpus), str(tmp_path / "never"), training_speakers="sv_eval")
    assert not (tmp_path / "never").exists()


def test_transfer_from_a_speaker_model_pretrained_on_other_speakers_and_its_refusals(corpus, tmp_path, caplog):
    """A finished speaker model A of another corpus (a pool of other speakers) is a source: two stages. Refused in
    one line before any training: its model B, an unfinished run, a corpus that is gone, and a pool whose sv_train
    holds one of this corpus's sv_eval speakers."""
    from training.contract import RESULT_FILE, RUN_SPEC_FILE
    from training.jobs.train import training_stages
    from training.workloads.speaker_verification import trainable

    root = tmp_path / "root"
    spec = RunSpec(workload="speaker_verification", data_source=str(corpus), data_root=str(root), epochs=3,
                   tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    trainable.ingest(spec)
    pool_corpus = make_speaker_corpus(tmp_path / "pool", speaker_ids(72)[36:])  # none of the corpus's speakers
    pool = RunSpec(workload="speaker_verification", data_source=str(pool_corpus), data_root=str(root), epochs=3,
                   run_name="pool")
    trainable.ingest(pool)

    def published(source: RunSpec, finished: bool = True) -> str:
        storage.write_json(storage.join(source.run_uri(), RUN_SPEC_FILE), source.to_mapping())
        if finished:
            storage.write_json(storage.join(source.run_uri(), RESULT_FILE),
                               {"mlflow_run_id": "x", "result": {"model_uri": "nowhere"}})
        return source.run_uri()

    def stages_with(reference: str) -> list[RunSpec]:
        return training_stages(spec.with_changes(transfer_from=reference).for_branch("model_a").validate())

    source = published(pool.for_branch("model_a"))
    with caplog.at_level(logging.INFO, logger="training.workloads.speaker_verification.transfer"):
        assert [(stage.transfer_stage, stage.transfer_from) for stage in stages_with(source)] == [
            ("head", source), ("fine_tune", source)]
    assert f"model A starts from the speaker model A at {source}" in caplog.text  # not "the keyword spotter"
    from training.workloads.speaker_verification.transfer import source_knows_voices

    assert source_knows_voices(stages_with(source)[0])
    with pytest.raises(RunSpecError, match="a speaker_verification run of model_b, not of model_a"):
        stages_with(published(pool.for_branch("model_b")))
    with pytest.raises(RunSpecError, match="holds no finished training"):
        stages_with(published(pool.for_branch("model_a").with_changes(run_name="unfinished"), finished=False))
    gone = pool.with_changes(data_source=str(tmp_path / "gone"), run_name="gone").for_branch("model_a")
    with pytest.raises(RunSpecError, match="is gone or records no speaker sets"):
        stages_with(published(gone))
    sets = storage.require_manifest(spec.raw_uri())["speaker_sets"]
    evaluated = sorted(speaker for speaker, name in sets.items() if name == "sv_eval")
    overlapping = pool.with_changes(data_source=str(tmp_path / "overlapping"), run_name="overlap")
    storage.write_json(storage.join(overlapping.raw_uri(), storage.MANIFEST_NAME),
                       {"speaker_sets": {evaluated[0]: "sv_train", "0000beef": "sv_train"}})
    with pytest.raises(RunSpecError, match=rf"the speaker model was trained on 1 speakers outside sv_train \(1 of "
                                           rf"them in sv_eval, e\.g\. {evaluated[0]}\)"):
        stages_with(published(overlapping.for_branch("model_a")))


@pytest.mark.spark
def test_auto_transfer_trains_a_spotter_then_the_head_on_its_frozen_trunk_then_fine_tunes_the_upper_units(
        spark, corpus, tmp_path):
    from training.jobs.train import train_run, training_stages
    from training.models.model_files import load_run_model
    from training.workloads.speaker_verification.speaker_embedding import trunk_units

    spec = RunSpec(workload="speaker_verification", strategy="averaging", nodes=1, workers_per_node=2, epochs=2,
                   batch_size_per_worker=8, rounds_per_epoch=1, evaluations_per_epoch=1, transfer_from="auto",
                   transfer_head_epochs=1, transfer_spotter_epochs=1, run_name="sv-transfer",
                   data_source=str(corpus), data_root=str(tmp_path / "root"),
                   tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    branch = prepare_branch(spark, spec, "model_a")
    stages = training_stages(branch)  # no keyword-spotting run in this store: one is trained first
    assert [(stage.transfer_stage, stage.epochs) for stage in stages] == [("spotter", 1), ("head", 1),
                                                                          ("fine_tune", 1)]
    assert stages[2].learning_rate == pytest.approx(branch.learning_rate / 4)
    models = {}
    for stage in stages:
        record = train_run(spark, stage)
        models[stage.transfer_stage] = load_run_model(record)
    assert models["spotter"].output_shape[-1] == len(WORDS)  # a keyword spotter: the words are its classes

    def weights(model, names):
        return [weight for name in names for weight in model.get_layer(name).get_weights()]

    units = trunk_units(models["head"])  # top first: bilstm, to_sequence, block3, … stem
    trunk = [name for names in units.values() for name in names]
    lower = [name for names in list(units.values())[3:] for name in names]
    upper = [name for names in list(units.values())[:3] for name in names]
    for mine, theirs in zip(weights(models["head"], trunk), weights(models["spotter"], trunk), strict=True):
        np.testing.assert_array_equal(mine, theirs)  # transferred, and frozen while the head learned
    for mine, theirs in zip(weights(models["fine_tune"], lower), weights(models["head"], lower), strict=True):
        np.testing.assert_array_equal(mine, theirs)  # still frozen
    assert any(not np.array_equal(mine, theirs) for mine, theirs in
               zip(weights(models["fine_tune"], upper), weights(models["head"], upper), strict=True))


@pytest.mark.spark
def test_a_speaker_model_pretrained_on_a_pool_gives_trunk_and_embedding_then_every_layer_fine_tunes(
        spark, corpus, tmp_path):
    from training.jobs.train import train_run, training_stages
    from training.models.model_files import load_run_model
    from training.workloads.speaker_verification.speaker_embedding import EMBEDDING_LAYER, trunk_units

    settings = {"strategy": "averaging", "nodes": 1, "workers_per_node": 2, "batch_size_per_worker": 8,
                "rounds_per_epoch": 1, "evaluations_per_epoch": 1, "data_root": str(tmp_path / "root"),
                "tracking_uri": f"sqlite:///{tmp_path}/mlflow.db"}
    pool_corpus = make_speaker_corpus(tmp_path / "pool", speaker_ids(72)[36:])
    pool = RunSpec(workload="speaker_verification", epochs=1, run_name="pool", data_source=str(pool_corpus),
                   **settings)
    pool_branch = prepare_branch(spark, pool, "model_a")
    pretrained = load_run_model(train_run(spark, pool_branch))
    spec = RunSpec(workload="speaker_verification", epochs=2, transfer_from=pool_branch.run_uri(),
                   transfer_head_epochs=1, run_name="from-pool", data_source=str(corpus), **settings)
    stages = training_stages(prepare_branch(spark, spec, "model_a"))
    assert [(stage.transfer_stage, stage.epochs) for stage in stages] == [("head", 1), ("fine_tune", 1)]
    models = {stage.transfer_stage: load_run_model(train_run(spark, stage)) for stage in stages}

    def weights(model, names):
        return [weight for name in names for weight in model.get_layer(name).get_weights()]

    units = list(trunk_units(models["head"]).values())  # top first: bilstm, to_sequence, block3, … stem
    copied = [name for names in units for name in names] + [EMBEDDING_LAYER]
    for mine, theirs in zip(weights(models["head"], copied), weights(pretrained, copied), strict=True):
        np.testing.assert_array_equal(mine, theirs)  # transferred, and frozen while the head learned
    for unit in (units[0], units[-1]):  # the top and the bottom unit both learn when fine-tuning
        assert any(not np.array_equal(mine, theirs) for mine, theirs in
                   zip(weights(models["fine_tune"], unit), weights(models["head"], unit), strict=True)), unit


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["downpour", "horovod"])
def test_a_speaker_model_trains_under_the_other_strategies_too(spark, corpus, tmp_path, strategy):
    """Averaging trains both models above; Downpour (the margin in the workers' own step function) and Horovod
    (the margin in a Keras callback) train model B with its angular-margin loss as well."""
    from training.jobs.train import train_run

    spec = RunSpec(workload="speaker_verification", strategy=strategy, nodes=1, workers_per_node=2, epochs=2,
                   batch_size_per_worker=8, evaluations_per_epoch=1, n_push=2, n_fetch=2, run_name=f"sv-{strategy}",
                   data_source=str(corpus), data_root=str(tmp_path / "root"),
                   tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    branch = prepare_branch(spark, spec, "model_b")
    record = train_run(spark, branch)
    epochs = record["result"]["epochs"]
    assert len(epochs) == 2 and all(np.isfinite(row["train_loss"]) for row in epochs)
    assert record["mlflow_run_id"] and record["result"]["total_workers"] == 2
    # The development EER after each epoch, measured on the model of that epoch's end, is a learning curve in MLflow.
    assert all(0 <= row["dev_eer"] <= 1 for row in epochs)
    import mlflow

    history = mlflow.MlflowClient(spec.tracking_uri).get_metric_history(record["mlflow_run_id"], "dev_eer")
    assert sorted((point.step, point.value) for point in history) == [(1, epochs[0]["dev_eer"]),
                                                                     (2, epochs[1]["dev_eer"])]


def test_training_without_an_embedding_model_is_refused_before_spark():
    from training.jobs.train import training_stages

    with pytest.raises(RunSpecError, match="one embedding model at a time"):
        training_stages(RunSpec(workload="speaker_verification"))

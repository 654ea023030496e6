"""The keyword-spotting data path with real Spark: clips → features (+ augmented copies) → shards → a worker's
arrays, and the DenseNet-BiLSTM trained through a real strategy on them."""

from __future__ import annotations

import numpy as np
import pytest
from test_speech_ingest import make_corpus

from training import sharding, storage
from training.config import RunSpec, RunSpecError
from training.jobs.shard import shard_dataset
from training.speech import feature_records
from training.speech import ingest as speech_ingest
from training.speech.audio.features import compute_features, feature_shape
from training.speech.features_job import features_dataset

pytestmark = pytest.mark.spark


@pytest.fixture
def clips(tmp_path) -> str:
    corpus = make_corpus(tmp_path / "corpus", words=("yes", "no", "up", "down", "cat", "dog"), bad=False)
    manifest, _ = speech_ingest.ingest(str(corpus), str(tmp_path / "clips"), task=12)
    return manifest["uri"]


def test_features_keep_every_clip_augment_only_training_and_match_the_direct_computation(spark, clips, tmp_path):
    manifest, created = features_dataset(spark, clips, str(tmp_path / "features"), "log_mel", copies=2, seed=5)
    assert created
    source = storage.require_manifest(clips)
    assert manifest["image_shape"] == list(feature_shape("log_mel")) and manifest["image_dtype"] == "float16"
    assert manifest["splits"]["train"]["rows"] == 3 * source["splits"]["train"]["rows"]
    for split in ("validation", "test"):
        assert manifest["splits"][split]["class_histogram"] == source["splits"][split]["class_histogram"]
    batch = feature_records.read_split(manifest["uri"], "train")
    audio, table = speech_ingest.read_clips(clips, "train")
    originals = batch.images[batch.copy == 0]
    expected = compute_features(audio[np.argsort(table.column("index").to_numpy())], "log_mel")
    np.testing.assert_allclose(originals.astype(np.float32), expected, atol=0.02, rtol=0.01)
    copies = batch.images[batch.copy == 1].astype(np.float32)
    assert np.abs(copies - originals.astype(np.float32)).mean() > 0.1, "the augmented copy equals the original"
    assert storage.resolve(manifest["uri"]).fs.exists(f"{storage.resolve(manifest['uri']).path}/preview.png")
    again, created_again = features_dataset(spark, clips, str(tmp_path / "features"), "log_mel", copies=2, seed=5)
    assert not created_again and again["data_version"] == manifest["data_version"]
    elsewhere, _ = features_dataset(spark, clips, str(tmp_path / "features-again"), "log_mel", copies=2, seed=5)
    assert elsewhere["files"] == manifest["files"], "a re-run must write identical bytes"


def test_features_shard_like_images_and_feed_a_real_strategy(spark, clips, tmp_path):
    from training.strategies.averaging import AveragingStrategy
    from training.strategies.base import EvaluationSet

    spec = RunSpec(workload="kws_densenet_bilstm", strategy="averaging", nodes=1, workers_per_node=2, epochs=1,
                   batch_size_per_worker=16, augment_copies=1, features="mfcc", evaluations_per_epoch=1,
                   rounds_per_epoch=1, run_name="kws-test", data_root=str(tmp_path / "root"))
    features = features_dataset(spark, clips, spec.augmented_uri(), "mfcc", copies=1, seed=0)[0]
    shards = shard_dataset(spark, features["uri"], spec.shards_uri(), 2, seed=0)[0]
    assert shards["image_dtype"] == "float16" and shards["class_names"] == features["class_names"]
    assert sum(shard["rows"] for shard in shards["shards"]) == features["splits"]["train"]["rows"]
    batch = sharding.read_worker_images(shards["uri"], 0, 2)
    assert batch.images.shape[1:] == tuple(feature_shape("mfcc")) and batch.images.dtype == np.float16
    result = AveragingStrategy().train(spec, shards["uri"], EvaluationSet(features["uri"], "test"), spec.run_uri(),
                                       spark)
    assert result.total_workers == 2 and len(result.epochs) == 1
    assert np.isfinite(result.epochs[-1]["train_loss"])


def test_the_model_has_as_many_classes_as_the_data(spark, tmp_path):
    """The 35-word task on a corpus with fewer words (v0.01 has 30) trains and evaluates on the words it has."""
    from training.workload_registry import workload_for

    spec = RunSpec(workload="kws_densenet_bilstm", kws_task=35, augment_copies=0, data_root=str(tmp_path / "root"),
                   data_source=str(make_corpus(tmp_path / "corpus", bad=False)))
    clips = speech_ingest.ingest(spec.resolved_data_source(), spec.raw_uri(), task=35)[0]
    features_dataset(spark, spec.raw_uri(), spec.augmented_uri(), spec.features, copies=0)
    workload = workload_for(spec)
    assert workload.num_classes == len(clips["class_names"]) == 5
    assert workload.build_model().output_shape == (None, 5)


def _corpus_with_lists(root, testing: str) -> str:
    """A corpus whose lists put every clip in test ("all") or none ("none"); validation stays empty."""
    corpus = make_corpus(root, words=("yes", "no", "up", "cat"), bad=False)
    clips = sorted(str(path.relative_to(corpus)) for path in corpus.glob("*/*.wav")
                   if not path.parent.name.startswith("_"))
    (corpus / "testing_list.txt").write_text("".join(f"{clip}\n" for clip in clips) if testing == "all" else "")
    (corpus / "validation_list.txt").write_text("")
    return str(corpus)


def test_an_evaluation_only_corpus_gets_features_but_training_on_it_is_refused_by_name(spark, tmp_path):
    clips = speech_ingest.ingest(_corpus_with_lists(tmp_path / "corpus", "all"), str(tmp_path / "clips"))[0]
    assert clips["splits"]["train"]["rows"] == 0 and clips["splits"]["test"]["rows"] > 0
    features = features_dataset(spark, clips["uri"], str(tmp_path / "features"), "log_mel", copies=1)[0]
    assert features["splits"]["test"]["rows"] == clips["splits"]["test"]["rows"]
    with pytest.raises(ValueError, match="no training examples"):
        shard_dataset(spark, features["uri"], str(tmp_path / "shards"), 1)
    assert storage.read_manifest(str(tmp_path / "shards")) is None


def test_training_on_a_corpus_without_validation_or_test_clips_is_refused_before_any_work(spark, tmp_path):
    from training.jobs.train import require_evaluation_examples

    clips = speech_ingest.ingest(_corpus_with_lists(tmp_path / "corpus", "none"), str(tmp_path / "clips"))[0]
    features = features_dataset(spark, clips["uri"], str(tmp_path / "features"), "log_mel", copies=0)[0]
    with pytest.raises(RunSpecError, match="the validation split is empty"):
        require_evaluation_examples(features)
    with_validation = {**features, "splits": {**features["splits"], "validation": {"rows": 5}}}
    with pytest.raises(RunSpecError, match="the test split is empty"):
        require_evaluation_examples(with_validation)

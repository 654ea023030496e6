"""A saved verification system and `cloudburst verify`: save/load round trip, the decision against the scores
computed step by step, and bad audio or a bad system refused in one line."""

from __future__ import annotations

import json
import wave
from pathlib import Path

import numpy as np
import pytest

from training import cli
from training.evaluation import scoring, verification
from training.evaluation.verification_system import (
    VerificationSystem,
    load_system,
    read_clip,
    save_system,
    verify,
)

RATE = 16_000


def write_wav(path: Path, samples: np.ndarray, rate: int = RATE, channels: int = 1) -> Path:
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(channels)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(np.asarray(samples, np.int16).tobytes())
    return path


def voice(seed: int, pitch: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    time = np.arange(RATE) / RATE
    tone = sum(np.sin(2 * np.pi * pitch * harmonic * time) / harmonic for harmonic in range(1, 6))
    return (3000 * tone + 300 * rng.normal(size=RATE)).astype(np.int16)


@pytest.fixture(scope="module")
def system_dir(tmp_path_factory):
    import tensorflow as tf

    from training.models.speaker_embedding import embedding_model, tdnn_embedder

    tf.keras.utils.set_random_seed(0)
    embedder = embedding_model(tdnn_embedder(num_speakers=6))
    cohort = np.random.default_rng(1).normal(size=(10, 128))
    system = VerificationSystem(embedders={"b": embedder}, features={"b": "mfcc"}, cohorts={"b": cohort},
                                fusion=scoring.LinearFusion((1.5,), -0.5, 0.05), names=("b",))
    destination = tmp_path_factory.mktemp("systems") / "system"
    manifest, created = save_system(str(destination), system, {"test": 1})
    assert created and manifest["models"] == ["b"]
    assert save_system(str(destination), system, {"test": 1})[1] is False  # the same recipe: nothing rewritten
    return destination, system


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    root = tmp_path_factory.mktemp("wavs")
    return {"enroll": [write_wav(root / f"a{n}.wav", voice(n, 140)) for n in range(3)],
            "same": write_wav(root / "a_test.wav", voice(9, 140)),
            "other": write_wav(root / "b_test.wav", voice(10, 330)),
            "8k": write_wav(root / "rate.wav", voice(3, 140)[:8000], rate=8000),
            "stereo": write_wav(root / "stereo.wav", np.repeat(voice(4, 140), 2), channels=2),
            "silent": write_wav(root / "silent.wav", np.zeros(RATE)),
            "text": (root / "notes.wav").write_text("not audio") and root / "notes.wav"}


def test_the_decision_is_the_fused_s_norm_score_of_the_enrolled_mean(system_dir, clips):
    from training.audio.features import compute_features

    destination, saved = system_dir
    loaded = load_system(str(destination))
    enrollment = [read_clip(path) for path in clips["enroll"]]
    test = read_clip(clips["same"])
    decision = verify(loaded, enrollment, test, p_target=0.05)
    embeddings = saved.embedders["b"].predict(compute_features(np.stack([*enrollment, test]), "mfcc"), verbose=0)
    model, tests = scoring.enroll(embeddings[:3])[None, :], embeddings[3:]
    raw = scoring.cosine_scores(model, tests, [0], [0])
    cohort = saved.cohorts["b"]
    expected = scoring.symmetric_normalisation(raw, scoring.cohort_statistics(model, cohort),
                                               scoring.cohort_statistics(tests, cohort), [0], [0])[0]
    assert decision.scores["b"] == pytest.approx(expected, abs=1e-4)  # the cohort is stored as float32
    assert decision.llr == pytest.approx(1.5 * decision.scores["b"] - 0.5)
    assert decision.threshold == pytest.approx(verification.bayes_threshold(0.05))
    assert decision.accepted == (decision.llr >= decision.threshold)


def test_cloudburst_verify_prints_scores_and_a_decision(system_dir, clips, capsys):
    destination, _ = system_dir
    arguments = ["verify", "--system", str(destination), "--enroll", *map(str, clips["enroll"]), "--json"]
    assert cli.main([*arguments, "--test", str(clips["same"])]) == 0
    same = json.loads(capsys.readouterr().out)
    assert cli.main([*arguments, "--test", str(clips["other"])]) == 0
    other = json.loads(capsys.readouterr().out)
    assert set(same) == {"scores", "llr", "threshold", "p_target", "accepted"}
    assert same["scores"] != other["scores"]


@pytest.mark.parametrize(("clip", "reason"), [("8k", "8000 Hz"), ("stereo", "channel"), ("silent", "silence"),
                                              ("text", "notes.wav"), ("missing", "cannot be read")])
def test_bad_audio_is_refused_in_one_line_before_the_system_loads(system_dir, clips, clip, reason, caplog,
                                                                   tmp_path):
    path = clips.get(clip, tmp_path / "missing.wav")
    status = cli.main(["verify", "--system", str(tmp_path / "no-system"), "--enroll", *map(str, clips["enroll"]),
                       "--test", str(path)])
    [error] = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert status == 2 and len(error.splitlines()) == 1 and reason in error, error
    assert "no-system" not in error  # the audio is checked first


def test_a_directory_that_is_no_system_and_a_bad_operating_point_are_refused(clips, caplog, tmp_path):
    base = ["verify", "--enroll", str(clips["enroll"][0]), "--test", str(clips["same"])]
    assert cli.main([*base, "--system", str(tmp_path)]) == 2
    assert "not a saved verification system" in caplog.text
    caplog.clear()
    assert cli.main([*base, "--system", str(tmp_path), "--p-target", "1.5"]) == 2
    assert "p_target" in caplog.text


def test_a_system_must_be_whole(system_dir):
    _, system = system_dir
    broken = VerificationSystem(embedders=system.embedders, features=system.features, cohorts={},
                                fusion=system.fusion, names=system.names)
    with pytest.raises(ValueError, match="cohort for every model"):
        save_system("/tmp/never-written", broken, {})
    from training.models.speaker_embedding import tdnn_embedder

    classifier = VerificationSystem(embedders={"b": tdnn_embedder(num_speakers=6)}, features=system.features,
                                    cohorts=system.cohorts, fusion=system.fusion, names=system.names)
    with pytest.raises(ValueError, match="not the classifier"):
        save_system("/tmp/never-written", classifier, {})
    with pytest.raises(ValueError, match="2 weights for 1 models"):
        save_system("/tmp/never-written", VerificationSystem(
            embedders=system.embedders, features=system.features, cohorts=system.cohorts,
            fusion=scoring.LinearFusion((1.0, 1.0), 0.0, 0.5), names=system.names), {})

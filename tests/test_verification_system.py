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
from training.workloads.speaker_verification.verification_system import (
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

    from training.workloads.speaker_verification.speaker_embedding import embedding_model, tdnn_embedder

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
    from training.speech.audio.features import compute_features

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
    assert set(same) == {"scores", "llr", "threshold", "p_target", "accepted", "test_in_enrollment"}
    assert same["test_in_enrollment"] == []
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
    from training.workloads.speaker_verification.speaker_embedding import tdnn_embedder

    classifier = VerificationSystem(embedders={"b": tdnn_embedder(num_speakers=6)}, features=system.features,
                                    cohorts=system.cohorts, fusion=system.fusion, names=system.names)
    with pytest.raises(ValueError, match="not the classifier"):
        save_system("/tmp/never-written", classifier, {})
    with pytest.raises(ValueError, match="2 weights for 1 models"):
        save_system("/tmp/never-written", VerificationSystem(
            embedders=system.embedders, features=system.features, cohorts=system.cohorts,
            fusion=scoring.LinearFusion((1.0, 1.0), 0.0, 0.5), names=system.names), {})


# A system as a hostile or careless hand leaves it: each refused at load, in one line naming the system's file.
def copy_system(system_dir, destination: Path) -> Path:
    import shutil

    shutil.copytree(system_dir[0], destination)
    return destination


def edit_manifest(root: Path, change) -> None:
    manifest_path = root / "_manifest.json"
    manifest = json.loads(manifest_path.read_text())
    change(manifest)
    manifest_path.write_text(json.dumps(manifest))


def refusal(root: Path, clips, caplog, extra: tuple[str, ...] = ()) -> str:
    caplog.clear()
    status = cli.main(["verify", "--system", str(root), "--enroll", *map(str, clips["enroll"]),
                       "--test", str(clips["same"]), *extra])
    errors = [record.getMessage() for record in caplog.records if record.levelname == "ERROR"]
    assert status == 2 and len(errors) == 1 and len(errors[0].splitlines()) == 1, (status, errors)
    return errors[0]


def test_a_hostile_h5_embedder_never_runs_its_code(system_dir, clips, caplog, tmp_path):
    from tests.test_model_files import hostile_h5

    marker = tmp_path / "marker"
    # In place of the published weights: the digest refuses it before anything parses it.
    root = copy_system(system_dir, tmp_path / "swapped")
    hostile_h5(root / "embedder-b.npz", marker)
    assert "embedder-b.npz: its sha256 is not the one recorded" in refusal(root, clips, caplog)
    # A system of the old format, whose embedder-b.keras is an H5 file with a Lambda: refused by its format.
    old = copy_system(system_dir, tmp_path / "format-1")
    (old / "embedder-b.npz").unlink()
    hostile_h5(old / "embedder-b.keras", marker)
    edit_manifest(old, lambda manifest: manifest.update(system_format=1))
    assert "can carry code" in refusal(old, clips, caplog)
    assert not marker.exists()


def test_weights_swapped_in_from_another_system_are_refused(system_dir, clips, caplog, tmp_path):
    import tensorflow as tf

    from training.workloads.speaker_verification.speaker_embedding import embedding_model, tdnn_embedder

    tf.keras.utils.set_random_seed(7)
    other = save_system(str(tmp_path / "other"), VerificationSystem(
        embedders={"b": embedding_model(tdnn_embedder(num_speakers=6))}, features={"b": "mfcc"},
        cohorts=system_dir[1].cohorts, fusion=system_dir[1].fusion, names=("b",)), {"other": 1})[0]
    root = copy_system(system_dir, tmp_path / "system")
    (root / "embedder-b.npz").write_bytes((tmp_path / "other" / "embedder-b.npz").read_bytes())
    assert other["files"]["embedder-b.npz"] != json.loads((root / "_manifest.json").read_text())["files"][
        "embedder-b.npz"]
    assert "embedder-b.npz: its sha256 is not the one recorded" in refusal(root, clips, caplog)


def _truncate(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize(("damage", "reason"), [
    (lambda root: _truncate(root / "embedder-b.npz", 500), "embedder-b.npz: its sha256"),
    (lambda root: (root / "embedder-b.npz").unlink(), "embedder-b.npz is missing"),
    (lambda root: (root / "cohort-b.npy").unlink(), "cohort-b.npy is missing"),
    (lambda root: _truncate(root / "_manifest.json", 145), "_manifest.json: damaged, not valid JSON"),
    (lambda root: edit_manifest(root, lambda m: m.pop("fusion")), "no 'fusion'"),
    (lambda root: edit_manifest(root, lambda m: m["fusion"].update(weights=[float("nan")])), "finite weight"),
    (lambda root: edit_manifest(root, lambda m: m["fusion"].update(offset=float("inf"))), "finite offset"),
    (lambda root: edit_manifest(root, lambda m: m["fusion"].update(prior=1.5)), "prior between 0 and 1"),
    (lambda root: edit_manifest(root, lambda m: m["fusion"].update(weights=[1.0, 2.0])), "one finite weight"),
    (lambda root: edit_manifest(root, lambda m: m.update(models=[], fusion={"weights": [], "offset": 10.0,
                                                                             "prior": 0.5})), "one or more"),
    (lambda root: edit_manifest(root, lambda m: m.update(models=["b", "b"])), "distinct"),
    (lambda root: edit_manifest(root, lambda m: m.update(models=["../b"])), "model names"),
    (lambda root: edit_manifest(root, lambda m: m.update(features={"b": "mfcc", "a": "log_mel"})), "'features'"),
    (lambda root: edit_manifest(root, lambda m: m["features"].update(b="raw")), "feature kind"),
    (lambda root: edit_manifest(root, lambda m: m.update(cohort_top=0)), "cohort_top"),
    (lambda root: edit_manifest(root, lambda m: m.update(thresholds={"eer": "low"})), "thresholds"),
    (lambda root: edit_manifest(root, lambda m: m["files"].pop("cohort-b.npy")), "lists other files"),
    (lambda root: (root / "embedder-c.npz").write_bytes(b"extra"), "embedder-c.npz is not part"),
    (lambda root: root.chmod(0o777), "writable by every user"),
    (lambda root: (root / "cohort-b.npy").chmod(0o666), "writable by every user"),
    (lambda root: edit_manifest(root, lambda m: m["embedders"]["b"]["architecture"].update(builder="os:system")),
     "'os:system' is not in training.models"),
])
def test_a_damaged_or_inconsistent_system_is_refused_in_one_line(system_dir, clips, caplog, tmp_path, damage,
                                                                   reason):
    root = copy_system(system_dir, tmp_path / "system")
    damage(root)
    message = refusal(root, clips, caplog)
    assert reason in message, message


@pytest.mark.parametrize(("cohort", "reason"), [
    (np.array([{"pickled": 1}], dtype=object), "not a readable cohort"),
    (np.zeros((4, 7), np.float32), "embedder's size"),
    (np.full((4, 128), np.nan, np.float32), "finite vectors"),
    (np.zeros(128, np.float32), "found shape"),
])
def test_a_cohort_that_is_not_finite_vectors_of_the_embedders_size_is_refused(system_dir, clips, caplog, tmp_path,
                                                                               cohort, reason):
    import hashlib

    root = copy_system(system_dir, tmp_path / "system")
    np.save(root / "cohort-b.npy", cohort, allow_pickle=True)
    digest = hashlib.sha256((root / "cohort-b.npy").read_bytes()).hexdigest()
    edit_manifest(root, lambda manifest: manifest["files"].update({"cohort-b.npy": digest}))
    assert reason in refusal(root, clips, caplog)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("role", ["test", "enroll"])
def test_a_fifo_or_device_named_wav_is_refused_without_blocking(system_dir, clips, caplog, tmp_path, role):
    import os

    fifo = tmp_path / "fifo.wav"
    os.mkfifo(fifo)
    device = tmp_path / "zero.wav"
    device.symlink_to("/dev/zero")
    for path, kind in ((fifo, "a FIFO"), (device, "a character device")):
        caplog.clear()
        enroll = [str(path)] if role == "enroll" else list(map(str, clips["enroll"]))
        test = str(path) if role == "test" else str(clips["same"])
        assert cli.main(["verify", "--system", str(system_dir[0]), "--enroll", *enroll, "--test", test]) == 2
        assert f"{path}: {kind}, not a regular file" in caplog.text


def test_a_wav_longer_than_the_cap_is_refused_before_it_is_read(system_dir, clips, caplog, tmp_path):
    from training.workloads.speaker_verification.verification_system import MAX_CLIP_BYTES

    long_clip = write_wav(tmp_path / "ten-minutes.wav", np.tile(voice(1, 140), 600))
    assert long_clip.stat().st_size > MAX_CLIP_BYTES
    caplog.clear()
    assert cli.main(["verify", "--system", str(system_dir[0]), "--enroll", *map(str, clips["enroll"]),
                     "--test", str(long_clip)]) == 2
    assert "more than the 4,194,304 a WAV file may hold" in caplog.text


def test_a_test_clip_that_is_an_enrollment_clip_is_flagged(system_dir, clips, capsys):
    arguments = ["verify", "--system", str(system_dir[0]), "--enroll", *map(str, clips["enroll"]),
                 "--test", str(clips["enroll"][1])]
    assert cli.main([*arguments, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["test_in_enrollment"] == [1]
    assert cli.main(arguments) == 0
    assert "the test clip is enrollment clip 2" in capsys.readouterr().out


def test_a_non_finite_score_is_refused_rather_than_printed_as_invalid_json(system_dir, clips):
    _, system = system_dir
    broken = VerificationSystem(embedders=system.embedders, features=system.features, cohorts=system.cohorts,
                                fusion=scoring.LinearFusion((float("inf"),), 0.0, 0.5), names=system.names)
    with pytest.raises(ValueError, match="no finite score"):
        verify(broken, [read_clip(path) for path in clips["enroll"]], read_clip(clips["other"]))


HOSTILE_VALUES = [None, True, -1, 1e308, float("nan"), "x" * 300, [], {}, [None], {"a": 1}, "../../etc/passwd"]
VALID_AMONG_THEM = {"cohort_top": (None,), "thresholds": (None, [], {}, {"a": 1}), "offset": (-1, 1e308)}


def hostile_manifests(root: Path, key: str, in_fusion: bool = False):
    """The manifest with ``key`` (of the fusion, or of the manifest) set to each hostile value in turn, skipping the
    ones valid there; yields the value."""
    original = (root / "_manifest.json").read_text()
    for value in HOSTILE_VALUES:
        if any(value is valid or value == valid for valid in VALID_AMONG_THEM.get(key, ())):
            continue
        (root / "_manifest.json").write_text(original)
        edit_manifest(root, lambda manifest, value=value: (manifest["fusion"] if in_fusion else manifest).update(
            {key: value}))
        yield value


@pytest.mark.parametrize("key", ["models", "features", "embedders", "fusion", "cohort_top", "thresholds", "files",
                                 "system_format", "kind"])
def test_any_manifest_entry_of_any_wrong_type_is_refused_as_a_system_error(system_dir, tmp_path, key):
    """The class behind the issue's cases: whatever a manifest entry holds, loading ends in one line naming the
    system — never another exception, never a system that decides."""
    from training import storage as storage_module

    root = copy_system(system_dir, tmp_path / "system")
    for value in hostile_manifests(root, key):
        with pytest.raises(storage_module.DatasetError) as refusal:
            load_system(str(root))
        assert str(root) in str(refusal.value) and len(str(refusal.value).splitlines()) == 1, (value, refusal.value)


@pytest.mark.parametrize("key", ["weights", "offset", "prior"])
def test_any_fusion_entry_of_any_wrong_type_is_refused(system_dir, tmp_path, key):
    from training import storage as storage_module

    root = copy_system(system_dir, tmp_path / "system")
    for value in hostile_manifests(root, key, in_fusion=True):
        with pytest.raises(storage_module.DatasetError, match="fusion") as refusal:
            load_system(str(root))
        assert len(str(refusal.value).splitlines()) == 1, (value, refusal.value)

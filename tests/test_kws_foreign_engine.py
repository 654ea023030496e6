"""bench/kws_foreign_engine.py: keyword spotting checked on SAM, an engine the synthetic corpus never uses — its
scoring against hand-computed cases, its speakers, the pinned sam-js tarball's digest, SAM itself through Node.js
(fetched from npm once into var/tools), and a published run read through the checked loader."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from training import storage
from training.config import RunSpec
from training.contract import EVALUATION_FILE, RESULT_FILE, RUN_SPEC_FILE
from training.speech.speech_commands import ALL_WORDS, KEYWORDS, OPEN_SET_WORDS, UNKNOWN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
foreign = importlib.import_module("kws_foreign_engine")

CLASSES = ["_silence_", UNKNOWN, *KEYWORDS]


def one_hot(names: list[str], confidence: float = 0.9) -> np.ndarray:
    """Probabilities putting ``confidence`` on each named class and the rest evenly on the others."""
    rows = np.full((len(names), len(CLASSES)), (1 - confidence) / (len(CLASSES) - 1))
    rows[np.arange(len(names)), [CLASSES.index(name) for name in names]] = confidence
    return rows


def test_scores_keywords_and_open_and_closed_set_false_accepts_by_argmax_and_at_the_threshold():
    words = ["yes", "yes", "no", "dog", "dog", "bed", "bed", "bed"]
    voices = ["sam", "elf", "sam", "sam", "elf", "sam", "elf", "elf"]
    predicted = ["yes", "no", "no", "go", UNKNOWN, "yes", UNKNOWN, "_silence_"]
    probabilities = one_hot(predicted)
    probabilities[0] = one_hot(["yes"], 0.5)[0]  # a right keyword below the threshold: rejected there
    probabilities[3] = one_hot(["go"], 0.6)[0]  # an open-set accept below it: rejected there
    figures = foreign.score(probabilities, words, voices, CLASSES, threshold=0.8)
    assert (figures["keyword_clips"], figures["open_set_clips"], figures["closed_set_clips"]) == (3, 2, 3)
    assert figures["keyword_accuracy"] == pytest.approx(2 / 3)
    assert figures["open_set_false_accept_rate"] == pytest.approx(1 / 2)
    assert figures["closed_set_false_accept_rate"] == pytest.approx(1 / 3)  # silence is a reject, not an accept
    assert figures["keyword_accuracy_at_threshold"] == pytest.approx(1 / 3)
    assert figures["open_set_false_accept_rate_at_threshold"] == 0.0
    assert figures["voices"]["sam"]["keyword_accuracy"] == 1.0 and figures["voices"]["elf"]["keyword_accuracy"] == 0
    assert figures["voices"]["sam"]["open_set_false_accept_rate"] == 1.0
    assert figures["keywords"]["yes"] == {"accuracy": 0.5, "mistaken_for": "no 50 %"}
    assert np.isnan(figures["keywords"]["up"]["accuracy"]) and figures["keywords"]["up"]["mistaken_for"] == "—"


def test_sam_speakers_are_seeded_distinct_and_cover_every_voice_within_sam_s_ranges():
    speakers = foreign.sam_speakers(3)
    assert len(speakers) == 3 * len(foreign.SAM_VOICES) and foreign.sam_speakers(3) == speakers
    assert len({speaker.speaker.speaker_id for speaker in speakers}) == len(speakers)
    assert {speaker.voice for speaker in speakers} == set(foreign.SAM_VOICES)
    assert len({tuple(speaker.settings.values()) for speaker in speakers}) == len(speakers)
    for speaker in speakers:
        assert all(0 <= value <= 255 for value in speaker.settings.values())
        assert abs(speaker.settings["speed"] - speaker.voice.speed) <= 0.1 * speaker.voice.speed + 1
        assert 0.9 <= speaker.speaker.warp <= 1.1 and speaker.speaker.engine == "sam"
    assert foreign.sam_speakers(3, seed=1) != speakers


def test_the_plan_says_every_word_and_keywords_and_open_set_words_twice():
    plan = foreign.utterance_plan()
    assert {word for word, _ in plan} == set(ALL_WORDS)
    assert all(sum(word == said for said, _ in plan) == (2 if word in KEYWORDS + OPEN_SET_WORDS else 1)
               for word in ALL_WORDS)


def test_a_tarball_other_than_the_pinned_one_is_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"^x\.tgz: sha512 .*not sam-js 0\.3\.1's recorded .*delete it"):
        foreign.check_integrity(b"not sam-js", "x.tgz")


def test_sam_speaks_through_node_and_its_words_become_one_second_clips_as_the_corpus_shapes_them():
    samples = foreign.render([{"text": "yes", "speed": 72, "pitch": 64, "mouth": 128, "throat": 128},
                              {"text": "left", "speed": 100, "pitch": 32, "mouth": 200, "throat": 150}])
    for said in samples:
        assert 0.1 * foreign.SAM_RATE < len(said) < 1.5 * foreign.SAM_RATE
        assert -1 <= said.min() < -0.1 and 0.1 < said.max() <= 1  # centred on 128, loud
    clips, words, voices = foreign.sam_clips(1)
    per_speaker = len(foreign.utterance_plan())
    assert clips.shape == (per_speaker * len(foreign.SAM_VOICES), 16_000) and clips.dtype == np.int16
    assert words[:per_speaker] == [word for word, _ in foreign.utterance_plan()]
    assert voices[0] == "sam" and voices[-1] == "extra-terrestrial"
    assert np.abs(clips).max(axis=1).min() > 1000  # every clip says something
    again, _, _ = foreign.sam_clips(1)
    assert np.array_equal(clips, again)  # seeded


def published_run(tmp_path, threshold: float = 0.5) -> RunSpec:
    """A keyword-spotting run as the pipeline leaves it: spec, an (untrained) model published and recorded, an
    evaluation with its threshold and the features' class names."""
    from training.models import model_files
    from training.speech.audio.features import feature_shape
    from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

    spec = RunSpec.from_mapping({"workload": "kws_densenet_bilstm", "data_root": str(tmp_path / "data"),
                                 "run_name": "tiny"})
    storage.publish(spec.augmented_uri(), "features", {}, lambda staging: {"class_names": CLASSES})
    model_uri = model_files.save_run_model(spec.run_uri(), densenet_bilstm(feature_shape(spec.features), len(CLASSES)))
    version = model_files.model_manifest(model_uri)["data_version"]
    run = storage.resolve(spec.run_uri()).path
    Path(run, RUN_SPEC_FILE).write_text(spec.to_json())
    Path(run, RESULT_FILE).write_text(json.dumps({"mlflow_run_id": "r1", "model_version": version,
                                                  "result": {"model_uri": model_uri}}))
    metrics = {"keyword_threshold": threshold, "open_set_false_accept_rate": 0.25,
               **{f"test_accuracy_class_{word}": 0.9 for word in KEYWORDS}}
    Path(run, EVALUATION_FILE).write_text(json.dumps({"mlflow_run_id": "r1", "metrics": metrics}))
    return spec


def test_a_published_run_is_scored_through_the_checked_loader_and_a_replaced_model_is_refused(tmp_path):
    from training.models import model_files

    spec = published_run(tmp_path)
    clips = np.random.default_rng(0).integers(-3000, 3000, (4, 16_000)).astype(np.int16)
    words, voices = ["yes", "dog", "bed", "no"], ["sam"] * 4
    figures = foreign.evaluate_run(spec.run_uri(), clips, words, voices)
    assert figures["run"] == "tiny" and figures["corpus_keyword_accuracy"] == pytest.approx(0.9)
    assert figures["keyword_threshold"] == 0.5 and 0 <= figures["keyword_accuracy"] <= 1
    values, tables = foreign.result_tables([figures])
    assert values["tiny"]["open_set_clips"] == 1 and set(tables) == {"runs", "keywords_tiny", "voices_tiny"}

    weights = Path(storage.resolve(spec.run_uri()).path, "model", "weights.npz")
    content = bytearray(weights.read_bytes())
    content[len(content) // 2] ^= 0xFF
    weights.write_bytes(bytes(content))  # the published model's file changed since
    with pytest.raises(model_files.ModelFileError, match="weights.npz"):
        foreign.evaluate_run(spec.run_uri(), clips, words, voices)


@pytest.mark.parametrize(("change", "message"), [
    ({"evaluation": None}, "no trained and evaluated run there"),
    ({"evaluation": {"mlflow_run_id": "other", "metrics": {}}}, "its evaluation is of another training run"),
    ({"evaluation": {"mlflow_run_id": "r1", "metrics": {}}}, "holds no keyword threshold in"),
    ({"evaluation": {"mlflow_run_id": "r1", "metrics": [1]}}, "holds no keyword threshold in"),
    ({"evaluation": {"mlflow_run_id": "r1", "metrics": {"keyword_threshold": "0.5"}}}, "no keyword threshold in"),
    ({"evaluation": {"mlflow_run_id": "r1", "metrics": {"keyword_threshold": 1.5}}}, "no keyword threshold in"),
    ({"evaluation": {"mlflow_run_id": "r1", "metrics": {"keyword_threshold": 0.5}}}, "no per-keyword test accuracy"),
])
def test_a_run_that_is_not_a_finished_evaluated_keyword_spotter_is_refused_in_one_line(tmp_path, change, message):
    spec = published_run(tmp_path)
    evaluation = Path(storage.resolve(spec.run_uri()).path, EVALUATION_FILE)
    if change["evaluation"] is None:
        evaluation.unlink()
    else:
        evaluation.write_text(json.dumps(change["evaluation"]))
    with pytest.raises(SystemExit, match=message):
        foreign.evaluate_run(spec.run_uri(), np.zeros((1, 16_000), np.int16), ["yes"], ["sam"])


@pytest.mark.parametrize(("arguments", "message"), [
    (["--run", ""], "give a run directory"),
    (["--speakers-per-voice", "0"], "invalid choice"),
    (["--run", "DAMAGED"], r"^kws_foreign_engine: file://.*result\.json: damaged, not valid JSON"),
    (["--run", "MISSING"], "no trained and evaluated run there"),
])
def test_bad_arguments_and_damaged_runs_end_in_one_line(tmp_path, monkeypatch, capsys, arguments, message):
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / RESULT_FILE).write_text("not json")
    (tmp_path / "damaged" / EVALUATION_FILE).write_text("{}")
    arguments = [{"DAMAGED": str(tmp_path / "damaged"), "MISSING": str(tmp_path / "missing")}.get(argument, argument)
                 for argument in arguments]
    monkeypatch.setattr(foreign, "sam_clips", lambda per_voice: (np.zeros((1, 16_000), np.int16), ["yes"], ["sam"]))
    with pytest.raises(SystemExit) as stopped:
        foreign.main(arguments)
    shown = str(stopped.value.code) if stopped.value.code not in (None, 2) else capsys.readouterr().err.strip()
    assert re.search(message, shown.splitlines()[-1]), shown  # argparse's usage lines, then its one-line error

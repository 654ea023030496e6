"""Keyword spotting on voices of an engine the synthetic corpus never uses: SAM, checked after training.

Every voice the keyword spotter trains and is tested on comes from the corpus's seven engines (espeak-ng, espeak,
MBROLA, pico, festival, flite, RHVoice). Leaving one engine out (bench/kws_generalisation.py) still leaves the
others, which share phone sets, letter-to-sound rules and, through MBROLA and CMU ARCTIC, recorded donors with it.
This bench checks trained runs on a synthesiser that shares none of that: SAM, the Software Automatic Mouth (1982),
a formant synthesiser with its own letter-to-sound rules, run from the sam-js port (fetched from npm at a pinned
version, its tarball checked against the recorded sha512 before use). SAM's six documented voices, each spoken by
several speakers with speed, pitch, mouth and throat moved a little, pass through the corpus's own clip shaping
(training.speech.synthesis.acoustics.shape_clip: vocal-tract warp, room, channel, offset, level, noise floor), so
the engine is the only thing new.

For each run: keyword accuracy (a keyword's clip classified as that keyword), the share of clips of the open-set
words (never trained on) and of the other non-keywords (trained on as _unknown_: closed set) taken for a keyword,
per SAM voice, and the same at the run's keyword threshold (chosen on its validation split). Nothing is trained or
chosen here: the clips are read once, after training, like a test split. Beside them, the run's own keyword
accuracy on its test speakers (the corpus's engines).

    .venv/training/bin/python bench/kws_foreign_engine.py [--run RUN_DIRECTORY …] [--speakers-per-voice 5]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from results import key, publish_run, recorded_as, table

from training import REPO_ROOT, storage
from training.speech.speech_commands import ALL_WORDS, KEYWORDS, OPEN_SET_WORDS, UNKNOWN

SAM_VERSION = "0.3.1"
# npm's "integrity" of sam-js 0.3.1 (npm view sam-js@0.3.1 dist.integrity): the tarball is checked against it.
SAM_INTEGRITY = "sha512-X4GUr8Q/T8RgtjnPOssSwYDknxot69PgEAVvwsJ4kB8Lz8wytuHB6n1JqsXLmpdKGD8YR9tqKptm07jmw83eWQ=="
SAM_LIBRARY = "package/dist/samjs.common.min.js"
SAM_TARBALL = REPO_ROOT / "var" / "tools" / f"sam-js-{SAM_VERSION}.tgz"
SAM_RATE = 22_050  # SAM's output: unsigned 8-bit samples at 22,050 Hz
RENDERER = Path(__file__).with_name("sam_render.js")
TOOL_TIMEOUT_SECONDS = 300
WORKLOAD = "kws_densenet_bilstm"
# The runs `make demo-kws-full` and `make demo-kws` (1x2) train; the make target checks both.
DEFAULT_RUNS = ("demo-full-horovod-1x2", "demo-horovod-1x2")
RUNS = {"bench-kws-foreign-engine": ("make bench-kws-foreign-engine", [])}
KEYWORD_REPETITIONS = 2  # keywords and open-set words twice per speaker (SAM's speed moved a little), others once
SPEAKER_STREAM, UTTERANCE_STREAM, ACOUSTICS_STREAM = 101, 102, 103  # not the corpus's streams (1–5)


@dataclass(frozen=True)
class SamVoice:
    """One of SAM's documented voice settings (its 1982 manual's table)."""

    name: str
    speed: int
    pitch: int  # lower is higher
    throat: int
    mouth: int


SAM_VOICES = (SamVoice("sam", 72, 64, 128, 128), SamVoice("elf", 72, 64, 110, 160),
              SamVoice("little robot", 92, 60, 190, 190), SamVoice("stuffy guy", 82, 72, 110, 105),
              SamVoice("little old lady", 82, 32, 145, 145), SamVoice("extra-terrestrial", 100, 64, 150, 200))


@dataclass(frozen=True)
class SamSpeaker:
    speaker: Any  # training.speech.synthesis.speakers.Speaker: what shape_clip reads (warp, room, channel)
    voice: SamVoice
    settings: dict[str, int]  # SAM's speed, pitch, mouth, throat for this speaker


def sam_speakers(per_voice: int, seed: int = 0) -> list[SamSpeaker]:
    """``per_voice`` speakers of each SAM voice: its settings moved by up to ±10 % (speed, pitch) and ±10 (mouth,
    throat), a vocal-tract warp, room and channel drawn as the corpus draws its speakers'."""
    from training.speech.audio import acoustics
    from training.speech.synthesis.speakers import TELEPHONE_EVERY, Speaker
    from training.speech.synthesis.voices import Voice

    speakers = []
    for voice_number, voice in enumerate(SAM_VOICES):
        for offset in range(per_voice):
            number = voice_number * per_voice + offset
            rng = np.random.default_rng([SPEAKER_STREAM, seed, number])
            settings = {"speed": round(voice.speed * rng.uniform(0.9, 1.1)),
                        "pitch": round(voice.pitch * rng.uniform(0.9, 1.1)),
                        "mouth": int(np.clip(voice.mouth + rng.integers(-10, 11), 0, 255)),
                        "throat": int(np.clip(voice.throat + rng.integers(-10, 11), 0, 255))}
            surroundings = np.random.default_rng([ACOUSTICS_STREAM, seed, number])
            room = acoustics.random_room(surroundings)
            channel = acoustics.random_channel(surroundings, telephone=number % TELEPHONE_EVERY == TELEPHONE_EVERY // 2)
            warp = round(float(rng.uniform(0.9, 1.1)), 4)
            speaker = Speaker(number, f"sam{number:05d}", Voice("sam", voice.name), warp, float(settings["speed"]),
                              float(settings["pitch"]), room=room, channel=channel)
            speakers.append(SamSpeaker(speaker, voice, settings))
    return speakers


def utterance_plan() -> list[tuple[str, int]]:
    """(word, repetition) per speaker: keywords and open-set words twice, the other words once."""
    return [(word, repetition) for word in ALL_WORDS
            for repetition in range(KEYWORD_REPETITIONS if word in KEYWORDS or word in OPEN_SET_WORDS else 1)]


# SAM ---------------------------------------------------------------------------------------------------------------
def sam_tarball() -> Path:
    """sam-js's npm tarball, fetched once into var/tools and checked against SAM_INTEGRITY on every use."""
    if not SAM_TARBALL.exists():
        if shutil.which("npm") is None or shutil.which("node") is None:
            raise SystemExit("SAM runs on Node.js: node and npm are not installed (make setup installs them)")
        SAM_TARBALL.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="sam-js-") as scratch:
            fetched = subprocess.run(["npm", "pack", f"sam-js@{SAM_VERSION}", "--pack-destination", scratch,
                                      "--silent"], capture_output=True, text=True, timeout=TOOL_TIMEOUT_SECONDS)
            packed = Path(scratch) / f"sam-js-{SAM_VERSION}.tgz"
            if fetched.returncode != 0 or not packed.exists():
                raise SystemExit(f"npm pack sam-js@{SAM_VERSION} failed: {fetched.stderr.strip()[-300:]}")
            check_integrity(packed.read_bytes(), str(packed))
            shutil.move(str(packed), SAM_TARBALL)
    return SAM_TARBALL


def check_integrity(content: bytes, shown: str) -> None:
    algorithm, expected = SAM_INTEGRITY.split("-", 1)
    found = base64.b64encode(hashlib.new(algorithm, content).digest()).decode()
    if found != expected:
        raise SystemExit(f"{shown}: {algorithm} {found[:16]}…, not sam-js {SAM_VERSION}'s recorded {expected[:16]}…; "
                         f"delete it and run again")


def render(requests: list[dict[str, Any]]) -> list[np.ndarray]:
    """SAM's samples (float, −1…1, 22,050 Hz) for each request ({"text", "speed", "pitch", "mouth", "throat"})."""
    tarball = sam_tarball()
    content = tarball.read_bytes()
    check_integrity(content, str(tarball))
    with tempfile.TemporaryDirectory(prefix="sam-js-") as scratch:
        with tarfile.open(tarball) as archive:  # only the one file, by name: nothing else is unpacked
            member = archive.getmember(SAM_LIBRARY)
            library = Path(scratch) / "samjs.common.min.js"
            library.write_bytes(archive.extractfile(member).read())
        job = json.dumps({"library": str(library), "requests": requests})
        result = subprocess.run(["node", str(RENDERER)], input=job, capture_output=True, text=True,
                                timeout=TOOL_TIMEOUT_SECONDS)
    lines = result.stdout.splitlines()
    if result.returncode != 0 or len(lines) != len(requests):
        raise SystemExit(f"SAM failed (exit {result.returncode}): {result.stderr.strip()[-300:]}")
    samples = []
    for request, line in zip(requests, lines, strict=True):
        if not line:
            raise SystemExit(f"SAM could not say {request['text']!r}")
        raw = np.frombuffer(base64.b64decode(line), np.uint8)
        samples.append((raw.astype(np.float64) - 128.0) / 128.0)
    return samples


def sam_clips(per_voice: int, seed: int = 0) -> tuple[np.ndarray, list[str], list[str]]:
    """(int16 clips (n, 16,000), word of each, SAM voice of each): every speaker's utterance plan, shaped into 1 s
    clips as the corpus shapes its engines' output."""
    from training.speech.synthesis.acoustics import shape_clip
    from training.speech.synthesis.speakers import word_key

    speakers, plan = sam_speakers(per_voice, seed), utterance_plan()
    requests, owners = [], []
    for sam_speaker in speakers:
        for word, repetition in plan:
            rng = np.random.default_rng([UTTERANCE_STREAM, seed, sam_speaker.speaker.number, word_key(word),
                                         repetition])
            speed = sam_speaker.settings["speed"] + (int(rng.integers(-4, 5)) if repetition else 0)
            requests.append({"text": word, **sam_speaker.settings, "speed": speed})
            owners.append((sam_speaker, word, repetition, rng))
    clips = []
    for samples, (sam_speaker, word, repetition, rng) in zip(render(requests), owners, strict=True):
        surroundings = np.random.default_rng([ACOUSTICS_STREAM, seed, sam_speaker.speaker.number, word_key(word),
                                              repetition])
        clips.append(shape_clip(samples, SAM_RATE, sam_speaker.speaker, rng, surroundings))
    return np.stack(clips), [word for _, word, _, _ in owners], [s.voice.name for s, _, _, _ in owners]


# Scoring -----------------------------------------------------------------------------------------------------------
def score(probabilities: np.ndarray, words: list[str], voices: list[str], class_names: list[str],
          threshold: float) -> dict[str, Any]:
    """Keyword accuracy and open-/closed-set false accepts, by argmax and at ``threshold``, overall and per voice."""
    from training.workloads.kws_densenet_bilstm.metrics import false_accepts, thresholded_predictions

    words_array, voices_array = np.array(words), np.array(voices)
    labels = np.array([class_names.index(word) if word in KEYWORDS else class_names.index(UNKNOWN) for word in words])
    keyword = np.isin(words_array, KEYWORDS)
    open_set = np.isin(words_array, OPEN_SET_WORDS)
    closed_set = ~keyword & ~open_set
    figures: dict[str, Any] = {"keyword_clips": int(keyword.sum()), "open_set_clips": int(open_set.sum()),
                               "closed_set_clips": int(closed_set.sum()), "keyword_threshold": threshold}
    per_voice: dict[str, dict[str, float]] = {name: {} for name in dict.fromkeys(voices)}
    predictions = {"": np.argmax(probabilities, axis=1),
                   "_at_threshold": thresholded_predictions(probabilities, class_names, threshold)}
    for suffix, predicted in predictions.items():
        figures["keyword_accuracy" + suffix] = _share(predicted[keyword] == labels[keyword])
        figures["open_set_false_accept_rate" + suffix] = false_accepts(predicted[open_set], class_names)[0]
        figures["closed_set_false_accept_rate" + suffix] = false_accepts(predicted[closed_set], class_names)[0]
        for name, voice_figures in per_voice.items():
            mine = voices_array == name
            voice_figures["keyword_accuracy" + suffix] = _share(predicted[mine & keyword] == labels[mine & keyword])
            voice_figures["open_set_false_accept_rate" + suffix] = false_accepts(predicted[mine & open_set],
                                                                                 class_names)[0]
    figures["voices"] = per_voice
    argmax = predictions[""]
    figures["keywords"] = {word: {"accuracy": _share(argmax[words_array == word] == class_names.index(word)),
                                  "mistaken_for": _commonest_mistake(class_names, argmax[words_array == word],
                                                                     class_names.index(word))}
                           for word in KEYWORDS}
    return figures


def _share(hits: np.ndarray) -> float:
    """The share of True among ``hits``; NaN for none (a run's class or voice with no such clips)."""
    return float(np.mean(hits)) if hits.size else float("nan")


def _commonest_mistake(class_names: list[str], predicted: np.ndarray, label: int) -> str:
    """The class a keyword's clips were most often wrongly taken for, with its share of them (or "—")."""
    counts = np.bincount(predicted, minlength=len(class_names)).astype(float)
    total, counts[label] = counts.sum(), 0
    wrong = int(np.argmax(counts))
    return f"{class_names[wrong]} {100 * counts[wrong] / total:.0f} %" if counts[wrong] else "—"


@dataclass(frozen=True)
class CheckedRun:
    """A finished, evaluated 12-class keyword-spotting run, its model read through the checked loader."""

    spec: Any
    model: Any
    class_names: list[str]
    threshold: float
    metrics: dict[str, Any]


def checked_run(run_uri: str) -> CheckedRun:
    """The run at ``run_uri``, checked before any clip is made: its record, evaluation and spec, and its model
    against the version its record kept. Anything else ends in one line (SystemExit)."""
    from training.config import RunSpec
    from training.contract import EVALUATION_FILE, RESULT_FILE, RUN_SPEC_FILE
    from training.models import model_files

    record = storage.read_json(storage.join(run_uri, RESULT_FILE))
    evaluation = storage.read_json(storage.join(run_uri, EVALUATION_FILE))
    if record is None or evaluation is None:  # read_json: None when absent, a JSON object otherwise
        raise SystemExit(f"{run_uri}: no trained and evaluated run there (make demo-kws-full and make demo-kws make "
                         f"the default ones)")
    if evaluation.get("mlflow_run_id") != record.get("mlflow_run_id"):
        raise SystemExit(f"{run_uri}: its evaluation is of another training run; evaluate it again")
    spec = RunSpec.from_mapping(storage.read_json(storage.join(run_uri, RUN_SPEC_FILE)) or {})
    if spec.workload != WORKLOAD or spec.kws_task != 12:
        raise SystemExit(f"{run_uri}: not a 12-class {WORKLOAD} run")
    metrics = evaluation.get("metrics")
    threshold = metrics.get("keyword_threshold") if isinstance(metrics, dict) else None
    if type(threshold) not in (int, float) or not 0 <= threshold <= 1:
        raise SystemExit(f"{run_uri}: its evaluation holds no keyword threshold in [0, 1] (evaluated before the "
                         f"threshold existed?); evaluate it again")
    if not all(isinstance(metrics.get(f"test_accuracy_class_{word}"), int | float) for word in KEYWORDS):
        raise SystemExit(f"{run_uri}: its evaluation holds no per-keyword test accuracy; evaluate it again")
    class_names = list(storage.require_manifest(spec.augmented_uri())["class_names"])
    return CheckedRun(spec, model_files.load_run_model(record), class_names, float(threshold), metrics)


def score_run(run: CheckedRun, clips: np.ndarray, words: list[str], voices: list[str]) -> dict[str, Any]:
    """A checked run's figures on the SAM clips, beside its own keyword accuracy on its test speakers."""
    from training.speech.audio.features import compute_features
    from training.strategies.evaluation_clock import class_probabilities

    # float16, as the features job stores them: the model sees what it saw on its test split
    features = compute_features(clips, run.spec.features).astype(np.float16)
    figures = score(class_probabilities(run.model, features), words, voices, run.class_names, run.threshold)
    figures["run"] = run.spec.run_name
    figures["corpus_keyword_accuracy"] = float(np.mean([run.metrics[f"test_accuracy_class_{word}"]
                                                        for word in KEYWORDS]))
    figures["corpus_open_set_false_accept_rate"] = run.metrics.get("open_set_false_accept_rate")
    return figures


def evaluate_run(run_uri: str, clips: np.ndarray, words: list[str], voices: list[str]) -> dict[str, Any]:
    return score_run(checked_run(run_uri), clips, words, voices)


def result_tables(runs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    values = {key(run["run"]): run for run in runs}
    columns = [("run", "run", "text"), ("keyword acc., its test speakers", "corpus_keyword_accuracy", "pct1"),
               ("keyword acc., SAM", "keyword_accuracy", "pct1"),
               ("open-set FA, SAM", "open_set_false_accept_rate", "pct1"),
               ("closed-set FA, SAM", "closed_set_false_accept_rate", "pct1"),
               ("threshold", "keyword_threshold", "num"),
               ("at it: keyword acc., SAM", "keyword_accuracy_at_threshold", "pct1"),
               ("at it: open-set FA, SAM", "open_set_false_accept_rate_at_threshold", "pct1")]
    tables = {"runs": table(columns, runs)}
    voice_columns = [("SAM voice", "voice", "text"), ("keyword acc.", "keyword_accuracy", "pct1"),
                     ("open-set FA", "open_set_false_accept_rate", "pct1"),
                     ("at the threshold: keyword acc.", "keyword_accuracy_at_threshold", "pct1"),
                     ("open-set FA", "open_set_false_accept_rate_at_threshold", "pct1")]
    keyword_columns = [("keyword", "word", "text"), ("accuracy, SAM", "accuracy", "pct1"),
                       ("most often mistaken for", "mistaken_for", "text")]
    for run in runs:
        tables[f"keywords_{key(run['run'])}"] = table(keyword_columns, [{"word": word, **figures} for word, figures
                                                                        in run["keywords"].items()])
        tables[f"voices_{key(run['run'])}"] = table(voice_columns, [{"voice": name, **figures}
                                                                     for name, figures in run["voices"].items()])
    return values, tables


def print_tables(tables: dict[str, Any]) -> None:
    for name, content in tables.items():
        print(f"\n{name}")
        titles = [title for title, _, _ in content["columns"]]
        print("  " + " | ".join(titles))
        for row in content["rows"]:
            cells = []
            for _, field, form in content["columns"]:
                value = row.get(field)
                cells.append(f"{100 * value:.1f} %" if form.startswith("pct") and isinstance(value, float)
                             else f"{value:.4g}" if isinstance(value, float) else str(value))
            print("  " + " | ".join(cells))


def _run_directory(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("give a run directory (a path, file:// or hdfs:// URI), not an empty string")
    return text


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parse.add_argument("--run", action="append", metavar="RUN_DIRECTORY", type=_run_directory,
                       help="a finished, evaluated 12-class keyword-spotting run's directory (repeatable; default: "
                            "the runs of make demo-kws-full and make demo-kws 1x2)")
    parse.add_argument("--speakers-per-voice", type=int, default=5, choices=range(1, 51), metavar="1-50",
                       help="SAM speakers per voice (6 voices; default 5: 30 speakers, 1,500 clips)")
    return parse


def main(argv: list[str] | None = None) -> None:
    from training.config import RunSpec
    from training.models.model_files import ModelFileError
    from training.settings import RunSpecError

    parse = parser()
    args = parse.parse_args(argv)
    run_uris = args.run or [RunSpec.from_mapping({"workload": WORKLOAD, "run_name": name}).run_uri()
                            for name in DEFAULT_RUNS]

    try:  # every run checked before SAM speaks: a bad one ends at once, in one line
        checked = [checked_run(storage.to_uri(uri)) for uri in run_uris]
    except (storage.DatasetError, ModelFileError, RunSpecError, ValueError) as error:
        raise SystemExit(f"kws_foreign_engine: {error}") from None
    clips, words, voices = sam_clips(args.speakers_per_voice)
    print(f"SAM {SAM_VERSION}: {len(clips)} clips, {len(SAM_VOICES)} voices × {args.speakers_per_voice} speakers",
          flush=True)
    runs = [score_run(run, clips, words, voices) for run in checked]
    values, tables = result_tables(runs)
    print_tables(tables)
    publish_run(recorded_as(parse, args, RUNS), values, tables)


if __name__ == "__main__":
    sys.exit(main())

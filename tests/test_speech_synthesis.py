"""Synthetic Speech Commands corpus: layout, clip format, split lists, determinism, idempotency, speaker variety,
voice families and the respelling table.

Real engines on a tiny corpus: speakers 0–10 are eleven families that cover all seven engines.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import signal
import subprocess
import time
import wave
from pathlib import Path

import numpy as np
import psutil
import pytest

from training import storage
from training.speech.speech_commands import ALL_WORDS, BACKGROUND_NOISE, check_clip, which_set
from training.speech.synthesis import engines
from training.speech.synthesis.acoustics import trim_silence
from training.speech.synthesis.cli import add_arguments, run
from training.speech.synthesis.corpus import (
    DATASET_KIND,
    LEGACY_REPORT_NAME,
    VARIANTS_PER_ROOT,
    _espeak_roots,
    default_corpus_dir,
    speaker_families,
    synthesize_corpus,
)
from training.speech.synthesis.engines import ENGINE_PROGRAMS, EngineNotFoundError, festival, mbrola
from training.speech.synthesis.pool import SynthesisWorkerError
from training.speech.synthesis.speakers import make_speaker, speaker_ids
from training.speech.synthesis.voices import (
    ESPEAK,
    ESPEAK_NG,
    FESTIVAL,
    MBROLA,
    RESPELLINGS,
    VOICE_GROUPS,
    Voice,
    all_voices,
    speaker_voice,
    text_for,
)
from training.storage import DatasetError
from training.strategies.signal_handlers import restored_signal_handlers

RECIPE = {"speakers": 11, "words": ("yes", "no", "marvin"), "repetitions": 2, "seed": 0}
ENGINES = ("espeak", "espeak-ng", "festival", "flite", "mbrola", "pico", "rhvoice")
CLIP_NAME = re.compile(r"^[0-9a-f]{8}_nohash_\d+\.wav$")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict, list[tuple[int, int]]]:
    """(directory, report, progress calls) of one tiny corpus built with two processes."""
    destination = tmp_path_factory.mktemp("synthetic") / "corpus"
    calls: list[tuple[int, int]] = []
    report = synthesize_corpus(destination, **RECIPE, processes=2, progress=lambda done, total: calls.append(
        (done, total)))
    return destination, report, calls


def clips_of(directory: Path) -> dict[str, bytes]:
    """Relative path → bytes of every word clip."""
    return {path.relative_to(directory).as_posix(): path.read_bytes()
            for path in sorted(directory.glob("*/*.wav")) if path.parent.name != BACKGROUND_NOISE}


def samples_of(data: bytes) -> np.ndarray:
    with wave.open(io.BytesIO(data)) as reader:
        return np.frombuffer(reader.readframes(reader.getnframes()), dtype="<i2").astype(np.float64) / 32768


def test_layout_and_file_names_match_speech_commands(corpus):
    directory, report, _ = corpus
    clips = clips_of(directory)
    assert all(CLIP_NAME.match(Path(name).name) for name in clips)
    speakers = {Path(name).name.split("_nohash_")[0] for name in clips}
    assert len(speakers) == 11
    # Keywords get `repetitions` utterances per speaker, other words one.
    expected = {f"{word}/{speaker}_nohash_{n}.wav" for speaker in speakers
                for word, count in (("yes", 2), ("no", 2), ("marvin", 1)) for n in range(count)}
    assert set(clips) == expected
    assert report["utterances"] == len(expected) == 55
    assert set(report["engines"]) == set(ENGINES) and sum(report["engines"].values()) == 11
    assert (directory / storage.MANIFEST_NAME).exists()
    assert report["kind"] == DATASET_KIND and report["recipe"]["speakers"] == 11
    assert not list(directory.parent.glob(".corpus.tmp-*"))


def test_every_clip_is_one_second_16khz_mono_16bit(corpus):
    for name, data in clips_of(corpus[0]).items():
        wav = check_clip(data)
        assert wav.frames == 16_000, name


def test_split_lists_follow_which_set_and_name_existing_files(corpus):
    directory = corpus[0]
    clips = clips_of(directory)
    lists = {split: (directory / f"{split}_list.txt").read_text().splitlines() for split in ("validation", "testing")}
    for split, names in lists.items():
        assert set(names) <= set(clips)
        assert set(names) == {name for name in clips if which_set(name) == split}
    assert lists["validation"] or lists["testing"]  # this seed's speakers do not all land in training


def test_background_noise_holds_long_wavs(corpus):
    noises = sorted((corpus[0] / BACKGROUND_NOISE).glob("*.wav"))
    assert len(noises) >= 5
    for path in noises:
        data = path.read_bytes()
        assert check_clip(data).frames > 16_000 * 20, path.name
        assert np.sqrt(np.mean(samples_of(data) ** 2)) > 0.01, path.name


def test_clips_are_not_silent(corpus):
    for name, data in clips_of(corpus[0]).items():
        samples = samples_of(data)
        loudest_100ms = np.sqrt(np.mean(samples[: 16_000 // 1600 * 1600].reshape(-1, 1600) ** 2, axis=1)).max()
        assert loudest_100ms > 0.01, name
        assert np.count_nonzero(samples) > 15_000, name  # even the padding holds a faint room noise


def timbre(samples: np.ndarray) -> np.ndarray:
    """Level-free long-term log spectrum of the loud frames: a crude voice fingerprint."""
    frames = np.lib.stride_tricks.sliding_window_view(samples, 512)[::160] * np.hanning(512)
    power = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    energy = power.sum(axis=1)
    spectrum = np.log(power[energy > energy.max() * 1e-3].mean(axis=0) + 1e-12)
    return spectrum - spectrum.mean()


def test_different_speakers_of_the_same_word_sound_different(corpus):
    clips = clips_of(corpus[0])
    speakers = sorted({Path(name).name.split("_nohash_")[0] for name in clips})
    prints = {(speaker, n): timbre(samples_of(clips[f"yes/{speaker}_nohash_{n}.wav"])) for speaker in speakers
              for n in (0, 1)}

    def distance(a, b):
        return float(np.sqrt(np.mean((prints[a] - prints[b]) ** 2)))

    between = [distance((a, 0), (b, 0)) for i, a in enumerate(speakers) for b in speakers[i + 1 :]]
    within = [distance((speaker, 0), (speaker, 1)) for speaker in speakers]
    assert min(between) > 1.0
    assert np.mean(within) < np.mean(between)


def test_families_are_recorded_per_speaker_and_read_back_by_speaker_families(corpus):
    directory, report, _ = corpus
    entries = report["speaker_voices"]
    assert [entry["family"] for entry in entries] == [speaker_voice(n).family for n in range(11)]
    assert all(entry["family"] == f"{entry['engine']}/{entry['voice']}" for entry in entries)
    assert report["families"] == {family: 1 for family in sorted(entry["family"] for entry in entries)}
    expected = {entry["speaker"]: entry["family"] for entry in entries}
    assert speaker_families(report) == speaker_families(directory) == speaker_families(str(directory)) == expected
    clip_speakers = {Path(name).name.split("_nohash_")[0] for name in clips_of(directory)}
    assert set(expected) == clip_speakers


def test_a_small_corpus_covers_several_families_and_english_and_foreign_voices(corpus):
    entries = corpus[1]["speaker_voices"]
    assert len({entry["family"] for entry in entries}) == 11
    languages = {entry["language"] for entry in entries}
    assert "en" in languages and len(languages) >= 3
    assert any(entry["room"] is None for entry in entries) and any(entry["room"] for entry in entries)
    assert [entry["channel"]["telephone"] for entry in entries].count(True) == 1  # speaker 4, by the rotation


def test_the_rotation_spreads_speakers_over_many_families_with_english_leading():
    voices = [speaker_voice(number) for number in range(200)]
    assert len({voice.family for voice in voices[:100]}) >= 60
    assert {voice.family for voice in voices} == {voice.family for voice in all_voices()}
    english = sum(voice.language == "en" for voice in voices) / len(voices)
    assert 0.6 <= english <= 0.75
    groups = [next(group.name for group in VOICE_GROUPS if voice in group.voices)
              for voice in voices]
    assert len(set(groups[:7])) == 7  # a few speakers already span several groups
    assert set(groups[:15]) == {group.name for group in VOICE_GROUPS}


def test_speaker_families_of_a_corpus_from_before_families_uses_engine_and_voice(tmp_path):
    old = {"speaker_voices": [{"speaker": "0123abcd", "engine": "espeak-ng", "voice": "en-gb", "warp": 1.0},
                              {"speaker": "4567cdef", "engine": "flite", "voice": "slt", "warp": 1.0}]}
    assert speaker_families(old) == {"0123abcd": "espeak-ng/en-gb", "4567cdef": "flite/slt"}
    with pytest.raises(DatasetError, match="no complete dataset"):
        speaker_families(tmp_path)
    with pytest.raises(DatasetError, match="not a synthetic Speech Commands corpus"):
        speaker_families({"kind": "something else"})


# --- The respellings -----------------------------------------------------------------------------------------

FOREIGN_LANGUAGES = sorted({voice.language for voice in all_voices()} - {"en"})


def test_every_word_has_a_respelling_in_every_language_a_voice_reads():
    assert FOREIGN_LANGUAGES  # the rotation does include foreign voices
    assert set(RESPELLINGS) == set(FOREIGN_LANGUAGES)
    for language in FOREIGN_LANGUAGES:
        table = RESPELLINGS[language]
        assert set(table) == set(ALL_WORDS), language
        assert all(spelling and " " not in spelling and '"' not in spelling for spelling in table.values())
        assert table["three"] != table["tree"], language  # two different Speech Commands words stay apart


@pytest.mark.parametrize("language", FOREIGN_LANGUAGES)
def test_espeak_ng_reads_every_respelling_in_its_own_language(language):
    # espeak-ng marks a word it reads with English rules instead, e.g. "(en)sˈɛvən(de)": the accent would be lost.
    respellings = RESPELLINGS[language]
    text = ", ".join(respellings[word] for word in ALL_WORDS)
    phonemes = subprocess.run(["espeak-ng", "-q", "-v", language, "--ipa", text], capture_output=True, text=True,
                              check=True).stdout
    assert "(en)" not in phonemes


CHECKED_VOICES = [voice for voice in all_voices()
                  if voice.engine in (MBROLA, FESTIVAL)]


@pytest.mark.parametrize("voice", CHECKED_VOICES, ids=lambda voice: voice.family)
def test_every_mbrola_and_festival_voice_says_every_word_without_missing_sounds(voice, tmp_path):
    # MBROLA and festival's diphone voices turn a sound pair they lack into silence; the engine wrappers raise then.
    texts = [text_for(voice, word) + "." for word in ALL_WORDS]
    if voice.engine == MBROLA:
        audio = [mbrola(voice, text, 170, 50) for text in texts]
    else:
        audio = festival(voice, [(text, 1.0) for text in texts], 120.0, tmp_path)
    for word, (rate, samples) in zip(ALL_WORDS, audio, strict=True):
        assert trim_silence(samples, rate).size > rate // 10, (voice.family, word)


def test_a_festival_crash_on_one_question_costs_that_question_its_intonation_not_the_corpus(tmp_path):
    """festival's Italian pc_diphone dies of SIGSEGV on "dog?" at a duration stretch of 1.11 (speaker 843 of the
    seed-1 corpus): the batch is said request by request, that one as a statement, the others as asked."""
    voice = next(voice for voice in all_voices() if voice.family == "festival/pc_diphone")
    requests = [("cat.", 1.0), ("dog?", 1.1089), ("left!", 1.0)]
    audio = festival(voice, requests, 91.3, tmp_path)
    assert [rate for rate, _ in audio] == [audio[0][0]] * 3
    assert all(trim_silence(samples, rate).size > rate // 10 for rate, samples in audio)
    for name in ("statement", "left"):
        (tmp_path / name).mkdir()
    statement = festival(voice, [("dog.", 1.1089)], 91.3, tmp_path / "statement")
    np.testing.assert_array_equal(audio[1][1], statement[0][1])  # "dog?" became "dog."
    alone = festival(voice, [("left!", 1.0)], 91.3, tmp_path / "left")
    np.testing.assert_array_equal(audio[2][1], alone[0][1])  # the others kept their own ending


def test_progress_reports_every_utterance_up_to_the_total(corpus):
    calls = corpus[2]
    assert calls[-1] == (55, 55)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_same_seed_gives_identical_bytes_whatever_the_process_count(corpus, tmp_path):
    again = synthesize_corpus(tmp_path / "again", **RECIPE, processes=1)
    assert clips_of(tmp_path / "again") == clips_of(corpus[0])
    for name in ("validation_list.txt", "testing_list.txt"):
        assert (tmp_path / "again" / name).read_bytes() == (corpus[0] / name).read_bytes()
    noise = sorted((corpus[0] / BACKGROUND_NOISE).glob("*.wav"))
    assert [(tmp_path / "again" / BACKGROUND_NOISE / path.name).read_bytes() for path in noise] == \
        [path.read_bytes() for path in noise]
    assert again["speaker_voices"] == corpus[1]["speaker_voices"]


def test_a_large_roster_spreads_its_espeak_variants_over_roots_espeak_can_list(tmp_path):
    # 800 speakers hold ~270 espeak-ng variants: in one data directory espeak-ng (N_VOICES_LIST = 350) reported the
    # later ones as missing and the corpus failed. Each root is checked by synthesising its last variant.
    roster = [make_speaker(0, number, speaker_id) for number, speaker_id in enumerate(speaker_ids(0, 800))]
    voices = {speaker.voice for speaker in roster} | {Voice(ESPEAK_NG, "en-us")}
    roots = _espeak_roots(tmp_path, roster, 0, voices)
    espeak_speakers = [speaker for speaker in roster if speaker.engine in (ESPEAK_NG, ESPEAK)]
    assert len([one for one in espeak_speakers if one.engine == ESPEAK_NG]) > 2 * VARIANTS_PER_ROOT
    for speaker in espeak_speakers:
        assert (next(roots[speaker.variant_name].glob("*-data")) / "voices" / "!v" / speaker.variant_name).is_file()
    for root in set(roots.values()):
        assert len(list(next(root.glob("*-data")).joinpath("voices", "!v").iterdir())) <= VARIANTS_PER_ROOT


def test_another_seed_gives_other_speakers_and_sounds(tmp_path):
    first = clips_of_corpus(tmp_path / "seed0", seed=0)
    second = clips_of_corpus(tmp_path / "seed1", seed=1)
    assert set(first).isdisjoint(second)  # other speaker ids
    assert sorted(first.values()) != sorted(second.values())


def clips_of_corpus(destination: Path, seed: int) -> dict[str, bytes]:
    synthesize_corpus(destination, speakers=1, words=("go",), repetitions=1, seed=seed, processes=1)
    return clips_of(destination)


def test_a_second_call_returns_the_report_without_rewriting(corpus):
    directory, report, _ = corpus
    before = {path: path.stat().st_mtime_ns for path in directory.rglob("*")}
    assert synthesize_corpus(directory, **RECIPE, processes=2) == report
    assert {path: path.stat().st_mtime_ns for path in directory.rglob("*")} == before


def test_a_different_recipe_at_the_same_destination_is_an_error_unless_overwrite(tmp_path):
    destination = tmp_path / "corpus"
    synthesize_corpus(destination, speakers=1, words=("go",), repetitions=1, processes=1)
    with pytest.raises(DatasetError, match="different dataset.*speakers"):
        synthesize_corpus(destination, speakers=2, words=("go",), repetitions=1, processes=1)
    report = synthesize_corpus(destination, speakers=2, words=("go",), repetitions=1, processes=1, overwrite=True)
    assert report["speakers"] == 2 and len(clips_of(destination)) == 2
    assert sorted(path.name for path in tmp_path.iterdir()) == ["corpus"]  # no staging or retired copies left


def test_a_directory_that_is_not_a_corpus_is_left_alone(tmp_path):
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not a complete synthetic corpus"):
        synthesize_corpus(tmp_path / "corpus", speakers=1, words=("go",), repetitions=1, processes=1)
    assert (tmp_path / "corpus" / "notes.txt").read_text() == "mine"


def test_a_corpus_from_before_manifests_is_replaced_without_overwrite(tmp_path):
    earlier = tmp_path / "corpus"
    (earlier / "go").mkdir(parents=True)
    (earlier / "go" / "old_nohash_0.wav").write_bytes(b"old")
    (earlier / LEGACY_REPORT_NAME).write_text("{}")
    report = synthesize_corpus(earlier, speakers=1, words=("go",), repetitions=1, processes=1)
    assert report["utterances"] == 1
    assert not (earlier / "go" / "old_nohash_0.wav").exists()
    assert not (earlier / LEGACY_REPORT_NAME).exists()


def test_a_failure_leaves_no_corpus_and_no_temporary_directory(tmp_path):
    def interrupt(done: int, total: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        synthesize_corpus(tmp_path / "corpus", speakers=2, words=("go",), repetitions=1, processes=1,
                          progress=interrupt)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("arguments", "message"), [
    ({"speakers": 0}, "speakers.*0"),
    ({"repetitions": 0}, "repetitions.*0"),
    ({"seed": -1}, "seed.*-1"),
    ({"processes": 0}, "processes.*0"),
    ({"task_timeout_seconds": 0}, "task_timeout_seconds.*0"),
    ({"words": ()}, "words is empty"),
    ({"words": ("yes", "Yes")}, "'Yes'.*lowercase"),
    ({"words": ("stop!",)}, "'stop!'"),
    ({"words": "yes"}, "not the string 'yes'"),
    ({"words": ("yes", "yes")}, "more than once: yes"),
])
def test_bad_arguments_are_rejected_naming_the_value(tmp_path, arguments, message):
    with pytest.raises(ValueError, match=message):
        synthesize_corpus(tmp_path / "corpus", **{"speakers": 1, "words": ("go",), "repetitions": 1, **arguments})
    assert not (tmp_path / "corpus").exists()


def test_a_missing_engine_says_make_setup_installs_it(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    with pytest.raises(EngineNotFoundError, match="espeak-ng.*make setup"):
        synthesize_corpus(tmp_path / "corpus", speakers=1, words=("go",), repetitions=1, processes=1)
    assert not (tmp_path / "corpus").exists()


def test_a_missing_voice_names_its_debian_package(tmp_path, monkeypatch):
    monkeypatch.setattr(engines, "RHVOICE_VOICES", tmp_path / "no-voices")  # RHVoice would fall back
    with pytest.raises(EngineNotFoundError, match=r"rhvoice/bdl: voice not installed.*rhvoice-english"):
        synthesize_corpus(tmp_path / "corpus", speakers=3, words=("go",), repetitions=1, processes=1)
    assert not (tmp_path / "corpus").exists()


def test_the_command_line_glue_builds_the_default_layout(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser, speakers=200)
    args = parser.parse_args(["--dest", str(tmp_path / "cli"), "--speakers", "1", "--words", "go, stop",
                              "--repetitions", "1", "--processes", "1"])
    assert run(args) == tmp_path / "cli"
    assert sorted(path.parent.name for path in (tmp_path / "cli").glob("*/*_nohash_0.wav")) == ["go", "stop"]
    assert "2 utterances" in capsys.readouterr().out
    assert default_corpus_dir(100, 2, 0).name == "speech-commands-synthetic-v2-s100-r2-seed0"


# --- Worker processes ----------------------------------------------------------------------------------------

WORKER_RECIPE = {"speakers": 5, "words": ("go",), "repetitions": 1, "seed": 0, "processes": 2}
FAKED_SPEAKER = 4  # festival/kal_diphone: a program that, unlike espeak-ng, runs in the workers only


def fake_engine(tmp_path: Path, monkeypatch, script: str) -> tuple[str, str]:
    """Put a shell script named as speaker FAKED_SPEAKER's engine first on PATH (the workers inherit it); returns
    that speaker's id and family."""
    voice = speaker_voice(FAKED_SPEAKER)
    (program,) = ENGINE_PROGRAMS[voice.engine]
    assert program != "espeak-ng" and all(speaker_voice(number).engine != voice.engine
                                          for number in range(FAKED_SPEAKER))
    bin_dir = tmp_path / "fake-bin"
    bin_dir.mkdir()
    (bin_dir / program).write_text(f"#!/bin/sh\n{script}\n")
    (bin_dir / program).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return speaker_ids(0, WORKER_RECIPE["speakers"])[FAKED_SPEAKER], voice.family


def synthesis_workers() -> list[psutil.Process]:
    """This process's spawned multiprocessing children that are still there."""
    workers = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "multiprocessing.spawn" in " ".join(child.cmdline()):
                workers.append(child)
        except psutil.Error:
            pass  # gone meanwhile
    return workers


def assert_nothing_left(tmp_path: Path) -> None:
    assert not (tmp_path / "corpus").exists()
    assert not list(tmp_path.glob(".corpus.tmp-*"))
    assert synthesis_workers() == []


def test_workers_finish_and_end_while_this_process_ignores_sigterm(tmp_path):
    # A Horovod run used to leave a SIGTERM handler that only sets an event: forked pool workers inherited it,
    # outlived Pool.terminate() and the pool's join() hung the test run. Spawned workers inherit no handlers.
    with restored_signal_handlers():
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
        for attempt in range(2):
            assert synthesize_corpus(tmp_path / f"corpus-{attempt}", **WORKER_RECIPE)["utterances"] == 5
    assert synthesis_workers() == []


def test_a_worker_that_dies_fails_the_corpus_at_once_naming_its_speaker(tmp_path, monkeypatch):
    speaker_id, family = fake_engine(tmp_path, monkeypatch, 'kill -KILL "$PPID"')  # $PPID: the engine's worker
    started = time.monotonic()
    with pytest.raises(SynthesisWorkerError, match=rf"^speaker {speaker_id} \(number {FAKED_SPEAKER}, "
                                                   rf"{re.escape(family)}\): its synthesis worker \(pid \d+\) died "
                                                   r"\(killed by SIGKILL\)"):
        synthesize_corpus(tmp_path / "corpus", **WORKER_RECIPE)
    assert time.monotonic() - started < 60  # no task timeout involved
    assert_nothing_left(tmp_path)


def test_a_stuck_worker_fails_the_corpus_after_the_task_timeout_naming_its_speaker(tmp_path, monkeypatch):
    # The fake engine waits for its worker to go away, so nothing outlives the test.
    speaker_id, family = fake_engine(tmp_path, monkeypatch, 'while kill -0 "$PPID" 2>/dev/null; do sleep 0.1; done')
    started = time.monotonic()
    with pytest.raises(SynthesisWorkerError, match=rf"^speaker {speaker_id} \(number {FAKED_SPEAKER}, "
                                                   rf"{re.escape(family)}\): no result after 20 s, so its "
                                                   "synthesis worker"):
        synthesize_corpus(tmp_path / "corpus", **WORKER_RECIPE, task_timeout_seconds=20)
    assert 20 <= time.monotonic() - started < 90
    assert_nothing_left(tmp_path)


def test_an_engine_error_in_a_worker_is_raised_here_and_names_the_speaker(tmp_path, monkeypatch):
    speaker_id, _ = fake_engine(tmp_path, monkeypatch, 'echo "no such voice" >&2; exit 7')
    with pytest.raises(RuntimeError, match=r"^festival \(kal_diphone\): .*exited with 7: no such voice") as raised:
        synthesize_corpus(tmp_path / "corpus", **WORKER_RECIPE)
    assert any(f"synthesis worker for speaker {speaker_id}" in note for note in raised.value.__notes__)
    assert_nothing_left(tmp_path)

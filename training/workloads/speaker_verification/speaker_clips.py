"""A Speech Commands-layout corpus with speakers as labels, for speaker verification: clips, speaker sets and the
trial lists, published as one dataset so that every later step reads the same speakers and trials.

Speakers go to sv_train / sv_dev / sv_eval by Speech Commands' sha1 rule on the speaker id (held-out voice families
to sv_eval only; training.speech.trials). Splits:

- ``train`` and ``test``: the sv_train speakers' clips, about one in ten of each speaker's clips in ``test`` (by the
  sha1 of its path) — the speaker classifier's training data and the held-out clips its accuracy is measured on;
- ``validation``: empty (the classifier is not tuned on anything else);
- ``sv_dev`` and ``sv_eval``: every clip of those speakers, for the trials.

Labels index ``class_names``, every speaker of the corpus with the sv_train speakers first: the classifier's classes
are the first ``training_classes``. ``index`` numbers every clip of the corpus once (sorted by path), the row of the
clip table the trials index (``clips.json``: speaker, word, voice family and the sha1 of the audio of every clip);
``trials/sv_dev.json`` and ``trials/sv_eval.json`` hold the trial lists with their seed.
"""

from __future__ import annotations

import hashlib
import logging
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from training import storage
from training.speech import ingest as speech_ingest
from training.speech import speech_commands as layout
from training.speech import trials as trial_lists
from training.speech.constants import SPEAKER_CLIPS_LAYOUT
from training.speech.synthesis import voices as synthetic_voices

log = logging.getLogger(__name__)

DATASET_KIND = speech_ingest.DATASET_KIND  # speech clips, read by the features step like any other
SPLIT_OF_SET = {"sv_dev": "sv_dev", "sv_eval": "sv_eval"}
TRIAL_SETS = ("sv_dev", "sv_eval")
# Of each training speaker's clips, about this share is held out of training (by the sha1 of the path, stable as
# clips are added), half for validation — the classifier accuracy training measures as it goes — half for test,
# read once at the end.
HELD_OUT_SHARE_PERCENT = 10
UNRECORDED_FAMILY = "unrecorded"  # a real corpus records no voice families: every speaker is of this one
CLIPS_FILE = "clips.json"
LAYOUT_VERSION = SPEAKER_CLIPS_LAYOUT


def trials_file(set_name: str) -> str:
    return f"trials/{set_name}.json"


def trial_sets(clips: trial_lists.Clips, assignment: dict[str, str], enrollment_utterances: int,
               seed: int) -> dict[str, trial_lists.Trials]:
    """The sv_dev and sv_eval trial lists of a clip table whose speakers ``assignment`` puts in sets, checked
    disjoint: sv_dev with ``seed``, sv_eval with ``seed`` + 1, and the voice catalogue's donor map, so that "hard"
    pairs the same voice across engines. The benches call this too, so that they score the pipeline's trials."""
    voice_keys = synthetic_voices.voice_keys()
    trials = {set_name: trial_lists.make_trials(clips, [s for s, name in assignment.items() if name == set_name],
                                                enrollment_utterances, seed + number, voice_keys=voice_keys)
              for number, set_name in enumerate(TRIAL_SETS)}
    trial_lists.check_disjoint(assignment, trials, clips)
    return trials


def classifier_split(relative: str) -> str:
    """An sv_train speaker's clip's split: "train", or, for about HELD_OUT_SHARE_PERCENT % chosen by the sha1 of
    the path, "validation" or "test" (another digit of the same hash, so the two halves are independent of it)."""
    value = int(hashlib.sha1(relative.encode()).hexdigest(), 16)
    if value % 100 >= HELD_OUT_SHARE_PERCENT:
        return "train"
    return "validation" if value // 100 % 2 == 0 else "test"


def ingest(source: str, destination: str, enrollment_utterances: int = 3, seed: int = 0, resample: bool = False,
           expected_sha256: str = "", overwrite: bool = False, held_out_families: tuple[str, ...] = (),
           limits: layout.ArchiveLimits | None = None) -> tuple[dict[str, Any], bool]:
    """Check a corpus, label its clips by speaker, make the speaker sets and trial lists, and publish them
    atomically; (manifest, created). Speakers with fewer than ``enrollment_utterances`` + 1 clips are left out (and
    listed in the report); too few speakers left for a set is an error naming the counts."""
    limits = limits or layout.ArchiveLimits(layout.MAX_MEMBER_BYTES, layout.MAX_EXTRACTED_BYTES,
                                            layout.MAX_ARCHIVE_MEMBERS)
    with tempfile.TemporaryDirectory(prefix="cloudburst-speakers-") as workdir:
        root, description, skipped = speech_ingest.open_source(source, expected_sha256, Path(workdir), limits)
        log.info("reading clips below %s", root)
        scan = speech_ingest.scan_corpus(root, resample, skipped, source, limits.member_bytes)
    held_out = tuple(sorted(set(held_out_families)))
    speech_ingest._check_families(held_out, scan.families, source)
    corpus = _corpus_table(scan)
    if not corpus:
        raise storage.DatasetError(f"{source}: no usable clips ({len(scan.skipped)} files skipped)")
    clips_per_speaker = Counter(speaker for _, _, speaker, _ in corpus)
    too_few = sorted(speaker for speaker, count in clips_per_speaker.items() if count < enrollment_utterances + 1)
    if too_few:
        log.warning("%s: %d speakers have fewer than enrollment_utterances + 1 = %d clips and are left out (e.g. %s)",
                    source, len(too_few), enrollment_utterances + 1, too_few[0])
        left_out = set(too_few)
        corpus = [row for row in corpus if row[2] not in left_out]
    families = {speaker: scan.families.get(speaker, UNRECORDED_FAMILY) for _, _, speaker, _ in corpus}
    try:
        assignment = trial_lists.assign_speaker_sets(sorted(families), families, held_out)
    except trial_lists.TrialError as error:
        left_out = f"; {len(too_few)} speakers were left out for having too few clips" if too_few else ""
        raise storage.DatasetError(f"{source}: {error}{left_out}") from None

    training_speakers = sorted(speaker for speaker, name in assignment.items() if name == "sv_train")
    others = sorted(speaker for speaker, name in assignment.items() if name != "sv_train")
    class_names = training_speakers + others
    label_of = {speaker: label for label, speaker in enumerate(class_names)}
    clips = trial_lists.Clips(speaker=np.array([row[2] for row in corpus], object),
                              word=np.array([row[1] for row in corpus], object),
                              family=np.array([families[row[2]] for row in corpus], object),
                              digest=np.array([trial_lists.pcm_digest(row[3]) for row in corpus], object))
    trials = trial_sets(clips, assignment, enrollment_utterances, seed)

    rows = {split: speech_ingest.SplitRows() for split in ("train", "validation", "test", *TRIAL_SETS)}
    indices: dict[str, list[int]] = {split: [] for split in rows}
    for index, (relative, word, speaker, pcm) in enumerate(corpus):
        set_name = assignment[speaker]
        split = set_name if set_name != "sv_train" else classifier_split(relative)
        rows[split].add(label_of[speaker], word, speaker, relative, pcm)
        indices[split].append(index)
    for split in ("train", "validation", "test"):
        if not rows[split].labels:
            raise storage.DatasetError(f"{source}: the sv_train speakers have no {split} clips; use more speakers "
                                       "or more clips per speaker")
    recipe = {"source_content": scan.content.hexdigest(), "labels": "speaker", "resample": resample, "seed": seed,
              "enrollment_utterances": enrollment_utterances, "held_out_families": list(held_out),
              "layout": LAYOUT_VERSION}
    counts = {set_name: trials[set_name].counts() for set_name in TRIAL_SETS}
    report = {"source": source, "clips_read": sum(len(c) for c in scan.clips.values()), "skipped": scan.skipped,
              "speakers_left_out_for_too_few_clips": too_few, "resampled": scan.resampled, "trimmed": scan.trimmed,
              "speakers_per_set": dict(Counter(assignment.values())), "trial_counts": counts,
              "split_rule": "sha1 of the speaker id (Speech Commands' which_set): sv_dev where it puts validation, "
                            "sv_eval where it puts testing; held-out families to sv_eval"}

    def write(staging: storage.Location) -> dict[str, Any]:
        speech_ingest.write_splits(staging, rows, scan.noises, len(class_names), indices)
        storage.write_json(storage.join(staging.uri, speech_ingest.REPORT_NAME), report)
        storage.write_json(storage.join(staging.uri, CLIPS_FILE),
                           {"speaker": clips.speaker.tolist(), "word": clips.word.tolist(),
                            "family": clips.family.tolist(), "digest": clips.digest.tolist(),
                            "path": [row[0] for row in corpus]})
        for set_name, set_trials in trials.items():
            storage.write_json(storage.join(staging.uri, trials_file(set_name)), set_trials.to_json())
        return {
            "source": description,
            "task": "speakers",
            "class_names": class_names,
            "training_classes": len(training_speakers),
            "speaker_sets": dict(sorted(assignment.items())),
            "sample_rate": layout.SAMPLE_RATE,
            "clip_samples": speech_ingest.CLIP_SAMPLES,
            "clips": len(corpus),
            "splits": {split: {"rows": len(split_rows.labels), "speakers": len(set(split_rows.speakers)),
                               "class_histogram": np.bincount(np.asarray(split_rows.labels, np.int64),
                                                              minlength=len(class_names)).tolist()}
                       for split, split_rows in rows.items()},
            "voice_families": dict(sorted(families.items())),
            "held_out_families": list(held_out),
            "trials": {set_name: {"file": trials_file(set_name), "seed": set_trials.seed,
                                  "enrollment_utterances": enrollment_utterances, "counts": counts[set_name]}
                       for set_name, set_trials in trials.items()},
            "noise_files": [name for name, _ in scan.noises],
            "skipped": len(scan.skipped),
        }

    return storage.publish(destination, DATASET_KIND, recipe, write, overwrite=overwrite)


def _corpus_table(scan: speech_ingest.Scan) -> list[tuple[str, str, str, np.ndarray]]:
    """(path, word, speaker, pcm) of every word clip, sorted by path: the clip table's order."""
    rows = [(relative, word, layout.speaker_of(relative), pcm)
            for word, word_clips in scan.clips.items() for relative, pcm in word_clips]
    return sorted(rows, key=lambda row: row[0])


def read_clip_table(dataset: str) -> tuple[trial_lists.Clips, list[str]]:
    """The clip table the trials index (and each clip's path)."""
    content = storage.read_json(storage.join(dataset, CLIPS_FILE))
    if content is None:
        raise storage.DatasetError(f"{dataset}: no {CLIPS_FILE}: not a speaker-verification clips dataset (ingest "
                                   "it with the speaker_verification workload)")
    clips = trial_lists.Clips(speaker=np.array(content["speaker"], object), word=np.array(content["word"], object),
                              family=np.array(content["family"], object), digest=np.array(content["digest"], object))
    return clips, content["path"]


def read_trials(dataset: str, set_name: str) -> trial_lists.Trials:
    if set_name not in TRIAL_SETS:
        raise ValueError(f"trial set {set_name!r}: must be one of {', '.join(TRIAL_SETS)}")
    content = storage.read_json(storage.join(dataset, trials_file(set_name)))
    if content is None:
        raise storage.DatasetError(f"{dataset}: no {trials_file(set_name)}: ingest it with the speaker_verification "
                                   "workload")
    return trial_lists.Trials.from_json(content)

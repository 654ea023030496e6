"""How many speaker-verification trials a synthetic corpus of a given size yields, per condition, without
synthesising it: the same speaker ids, voices (the catalogue's rotation), utterance plan, speaker sets and trial
rule as `synth-speech` → ingest, every clip's audio taken as distinct. It answers which corpus size gives enough
same-word targets and hard non-targets for the conditions' EERs to mean something (issue 42: ≥ 1,000 and ≥ 30,000).

    .venv/training/bin/python bench/sv_trial_counts.py [--sizes 300x2 600x5 …] [--json PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from results import key, publish_run, recorded_as, table

from training.speech import trials as trial_lists
from training.speech.speech_commands import ALL_WORDS
from training.speech.synthesis.speakers import speaker_ids, utterance_plan
from training.speech.synthesis.voices import speaker_voice, voice_keys

DEFAULT_SIZES = ("300x2", "300x4", "300x8", "600x2", "600x4", "600x5", "800x4", "1000x4")
AIMS = {"same_word_targets": 1_000, "hard_non_targets": 30_000}
RUNS = {"bench-sv-trials": ("make bench-sv-trials", [])}


def trial_counts(speakers: int, repetitions: int, seed: int = 0, enrollment_utterances: int = 3) -> dict[str, int]:
    """sv_eval's speakers, clips per speaker and targets/non-targets per condition for one corpus size."""
    ids = speaker_ids(seed, speakers)
    family = {speaker: speaker_voice(number).family for number, speaker in enumerate(ids)}
    plan = utterance_plan(ALL_WORDS, repetitions)
    rows = [(speaker, word, family[speaker], hashlib.sha1(f"{speaker}/{word}/{take}".encode()).hexdigest())
            for speaker in ids for word, take in plan]
    clips = trial_lists.Clips(*(np.array(column, object) for column in zip(*rows, strict=True)))
    assignment = trial_lists.assign_speaker_sets(ids, family)
    evaluation = [speaker for speaker, name in assignment.items() if name == "sv_eval"]
    # seed + 1: sv_eval's trial seed in ingestion (training.workloads.speaker_verification.speaker_clips), so counts
    # match the real lists
    counts = trial_lists.make_trials(clips, evaluation, enrollment_utterances, seed + 1,
                                     voice_keys=voice_keys()).counts()
    return {"speakers": speakers, "repetitions": repetitions, "clips": len(rows), "sv_eval_speakers": len(evaluation),
            "same_word_targets": counts["same_word"]["targets"], "hard_non_targets": counts["hard"]["non_targets"],
            "different_word_targets": counts["different_word"]["targets"],
            "different_word_non_targets": counts["different_word"]["non_targets"]}


def meets_aims(row: dict[str, int]) -> bool:
    return all(row[name] >= least for name, least in AIMS.items())


def result_tables(rows: list[dict[str, int]]) -> tuple[dict, dict]:
    """(values, tables) for docs/results: each size's counts under its key (600x5), the aims, the smallest corpus
    (by clips) that meets both; the table "sizes" as printed."""
    sizes = {key(f"{row['speakers']}x{row['repetitions']}"): dict(row) for row in rows}
    meeting = [row for row in rows if meets_aims(row)]
    smallest = min(meeting, key=lambda row: row["clips"]) if meeting else None
    values = {"aims": dict(AIMS), "sizes": sizes, "smallest_meeting_aims":
              None if smallest is None else key(f"{smallest['speakers']}x{smallest['repetitions']}")}
    columns = [("speakers", "speakers", "int"), ("repetitions", "repetitions", "int"), ("clips", "clips", "int"),
               ("sv_eval speakers", "sv_eval_speakers", "int"), ("same-word targets", "same_word_targets", "int"),
               ("hard non-targets", "hard_non_targets", "int"),
               ("different-word targets", "different_word_targets", "int"),
               ("different-word non-targets", "different_word_non_targets", "int"),
               ("both aims met", "aims_met", "text")]
    return values, {"sizes": table(columns, [{**row, "aims_met": "yes" if meets_aims(row) else "no"}
                                             for row in rows])}


def _size(text: str) -> tuple[int, int]:
    try:
        speakers, repetitions = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: write SPEAKERSxREPETITIONS, e.g. 600x5") from None
    if speakers < 10 or repetitions < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: at least 10 speakers and 1 repetition")
    return speakers, repetitions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", type=_size, default=[_size(size) for size in DEFAULT_SIZES],
                        metavar="SPEAKERSxREPETITIONS", help="corpus sizes (default: %(default)s)".replace(
                            "%(default)s", " ".join(DEFAULT_SIZES)))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    run = recorded_as(parser, args, RUNS)
    rows = [trial_counts(speakers, repetitions) for speakers, repetitions in args.sizes]
    print("| speakers × repetitions | clips | sv_eval speakers | same-word targets | hard non-targets | "
          "different-word targets / non-targets |")
    print("| --- | --- | --- | --- | --- | --- |")
    for row in rows:
        met = meets_aims(row)
        print(f"| {row['speakers']} × {row['repetitions']} | {row['clips']:,} | {row['sv_eval_speakers']} | "
              f"{row['same_word_targets']:,} | {row['hard_non_targets']:,} | {row['different_word_targets']:,} / "
              f"{row['different_word_non_targets']:,} |{' both aims met' if met else ''}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    publish_run(run, *result_tables(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

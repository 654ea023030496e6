"""``cloudburst synth-speech``: the command's arguments and its run."""

from __future__ import annotations

import argparse
from pathlib import Path

from training import REPO_ROOT
from training.speech.speech_commands import ALL_WORDS
from training.speech.synthesis.corpus import GENERATOR_VERSION, default_corpus_dir, synthesize_corpus


def add_arguments(parser: argparse.ArgumentParser, speakers: int) -> None:
    """synth-speech's flags; `speakers` is the default corpus size (the keyword-spotting workload's setting)."""
    parser.add_argument("--dest", default=None,
                        help="output directory (default: "
                             f"{REPO_ROOT / 'var' / 'corpora'}/speech-commands-synthetic-v{GENERATOR_VERSION}"
                             "-s<speakers>-r<repetitions>-seed<seed>)")
    parser.add_argument("--speakers", type=int, default=speakers, help="synthetic speakers (default: %(default)s)")
    parser.add_argument("--words", default=None,
                        help=f"comma-separated words (default: all {len(ALL_WORDS)} Speech Commands v0.02 words)")
    parser.add_argument("--repetitions", type=int, default=2,
                        help="utterances per speaker of each keyword; other words get one (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default: %(default)s)")
    parser.add_argument("--processes", type=int, default=None, help="worker processes (default: one per core)")
    parser.add_argument("--overwrite", action="store_true", help="replace a different corpus at --dest")


def run(args: argparse.Namespace) -> Path:
    """Synthesize the corpus the arguments describe and print a one-line summary; returns its directory."""
    destination = Path(args.dest) if args.dest else default_corpus_dir(args.speakers, args.repetitions, args.seed)
    words = tuple(word.strip() for word in args.words.split(",") if word.strip()) if args.words else ALL_WORDS
    report = synthesize_corpus(destination, speakers=args.speakers, words=words, repetitions=args.repetitions,
                               seed=args.seed, processes=args.processes, overwrite=args.overwrite)
    print(f"{report['utterances']} utterances from {report['speakers']} speakers "
          f"({len(report['families'])} voice families, engines {report['engines']}) in {report['seconds']:.1f} s, "
          f"{report['utterances_per_second']:.1f} utt/s "
          f"→ {destination}", flush=True)
    # The names held_out_families takes, with their speaker counts.
    print("voice families: " + ", ".join(f"{family} ({count})" for family, count in sorted(report["families"].items())),
          flush=True)
    return destination

"""Speaker-verification trials on a Speech Commands-layout corpus: speaker sets, enrollment and trial lists.

Speakers go to sv_train / sv_dev / sv_eval by Speech Commands' own sha1 rule on the speaker id, except that speakers
of held-out voice families go to sv_eval only. Within a set each speaker enrolls with a few of its clips; its other
clips are its target trials, and the other speakers' test clips are non-target trials. Non-targets are sampled per
condition (same word, different word, hard = the same voice, all), each condition a uniform sample of its own
non-target pairs, so that the small conditions keep enough of them. No trial pairs a model with byte-identical audio.
"The same voice" is one voice family, or families made from one recorded donor (e.g. CMU ARCTIC's SLT in flite,
festival and RHVoice): make_trials takes the family → voice key map (training.speech.synthesis.voices.voice_keys).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from types import MappingProxyType
from typing import Any

import numpy as np

from training.speech import speech_commands as layout

SPEAKER_SETS = ("sv_train", "sv_dev", "sv_eval")
CONDITIONS = ("same_word", "different_word", "hard", "all")
DEFAULT_MINIMUM_PER_SET = MappingProxyType({"sv_train": 2, "sv_dev": 2, "sv_eval": 2})
TRIALS_FORMAT = 2  # 2: same_voice (one family or one recorded donor) instead of same_family
# which_set's buckets, in its order: the first (validation) is dev, the second (testing) is eval.
_SET_OF_SPLIT = {"validation": "sv_dev", "testing": "sv_eval", "training": "sv_train"}
# Separate random streams per speaker, so enrollment and non-target sampling never share draws.
_ENROLLMENT_STREAM, _NONTARGET_STREAM = 0, 1
_LARGEST_KEY = np.iinfo(np.int64).max


class TrialError(ValueError):
    """Speaker sets or trials cannot be made as asked, or a trial list breaks a rule (speakers crossing sets,
    byte-identical audio in a trial)."""


# --- Speaker sets --------------------------------------------------------------------------------------------


def speaker_set(speaker: str, dev_percentage: float = 15.0, eval_percentage: float = 25.0) -> str:
    """sv_dev, sv_eval or sv_train for a speaker id, by Speech Commands' which_set: dev where it puts validation,
    eval where it puts testing."""
    _check_percentages(dev_percentage, eval_percentage)
    clip = f"{speaker}_nohash_0.wav"
    # which_set hashes the id it parses back out of a clip name; an id that does not parse back would hash as another.
    if not isinstance(speaker, str) or not speaker or layout.speaker_of(clip) != speaker:
        raise TrialError(f"speaker id {speaker!r} is not a clip-name prefix (empty, or holds '/' or '_nohash_')")
    return _SET_OF_SPLIT[layout.which_set(clip, dev_percentage, eval_percentage)]


def _check_percentages(dev_percentage: float, eval_percentage: float) -> None:
    if not (0 <= dev_percentage and 0 <= eval_percentage and dev_percentage + eval_percentage <= 100):
        raise TrialError(f"dev_percentage {dev_percentage} and eval_percentage {eval_percentage} must be ≥ 0 and "
                         f"add up to at most 100")


def is_held_out(family: str, held_out: Sequence[str]) -> bool:
    """An entry names one family (``pico/en-GB``) or every family of an engine (``pico``), as in speech_ingest."""
    return any(family == entry or family.startswith(f"{entry}/") for entry in held_out)


def assign_speaker_sets(speakers: Sequence[str], families: Mapping[str, str], held_out_families: Sequence[str] = (),
                        dev_percentage: float = 15.0, eval_percentage: float = 25.0,
                        minimum_per_set: Mapping[str, int] | None = None) -> dict[str, str]:
    """Speaker → speaker set (sorted by speaker): held-out families' speakers to sv_eval, the rest by speaker_set.
    Raises TrialError when a set would hold fewer speakers than ``minimum_per_set`` (default: 2 each)."""
    minimums = _minimums(minimum_per_set)
    held_out = tuple(sorted({entry for entry in held_out_families if entry}))
    names = sorted(set(speakers))
    known = sorted({families[name] for name in names if name in families})
    unknown = [entry for entry in held_out if not any(is_held_out(family, (entry,)) for family in known)]
    if unknown:  # a typo would otherwise hold nothing out, silently
        raise TrialError(f"held_out_families: {', '.join(unknown)} is no family or engine of these speakers; their "
                         f"families: {', '.join(known) or 'none recorded'}")
    held = {name for name in names if name in families and is_held_out(families[name], held_out)}
    assignment = {name: "sv_eval" if name in held else speaker_set(name, dev_percentage, eval_percentage)
                  for name in names}
    sizes = Counter(assignment.values())
    short = [f"{name} {sizes[name]} < {minimums[name]}" for name in SPEAKER_SETS if sizes[name] < minimums[name]]
    if short:
        raise TrialError(f"too few speakers per set ({', '.join(short)}) from {len(names)} speakers "
                         f"(sv_train {sizes['sv_train']}, sv_dev {sizes['sv_dev']}, sv_eval {sizes['sv_eval']}; "
                         f"{len(held)} held out to sv_eval): use more speakers, or change dev_percentage/"
                         f"eval_percentage ({dev_percentage}/{eval_percentage}) or minimum_per_set")
    return assignment


def _minimums(minimum_per_set: Mapping[str, int] | None) -> dict[str, int]:
    given = dict(minimum_per_set or {})
    unknown = sorted(set(given) - set(SPEAKER_SETS))
    if unknown:
        raise TrialError(f"minimum_per_set: unknown set {', '.join(unknown)}; the sets are {', '.join(SPEAKER_SETS)}")
    if any(int(value) != value or value < 0 for value in given.values()):
        raise TrialError(f"minimum_per_set: counts must be whole numbers ≥ 0, got {given}")
    return {**DEFAULT_MINIMUM_PER_SET, **given}


# --- Clips ---------------------------------------------------------------------------------------------------


def pcm_digest(pcm: bytes | np.ndarray) -> str:
    """The sha1 hex of a clip's PCM bytes (int16 samples as little-endian bytes): equal digests, identical audio."""
    if isinstance(pcm, np.ndarray):
        if pcm.dtype != np.int16:
            raise TrialError(f"pcm_digest takes int16 samples or raw bytes, got an array of {pcm.dtype}")
        pcm = np.ascontiguousarray(pcm, "<i2").tobytes()
    return hashlib.sha1(pcm).hexdigest()


@dataclass(frozen=True, eq=False)
class Clips:
    """The clip table trials index into: one row per clip, columns of str."""

    speaker: np.ndarray
    word: np.ndarray
    family: np.ndarray  # the speaker's voice family, e.g. "espeak-ng/de"
    digest: np.ndarray  # pcm_digest of the clip's audio

    def __post_init__(self) -> None:
        for name in ("speaker", "word", "family", "digest"):
            column = np.asarray(getattr(self, name), dtype=object)
            if column.ndim != 1:
                raise TrialError(f"Clips.{name} must be one-dimensional, got shape {column.shape}")
            stray = next((value for value in column if not isinstance(value, str)), None)
            if stray is not None:
                raise TrialError(f"Clips.{name} must hold str, found {type(stray).__name__} {stray!r}")
            object.__setattr__(self, name, column)
        lengths = {name: len(getattr(self, name)) for name in ("speaker", "word", "family", "digest")}
        if len(set(lengths.values())) > 1:
            raise TrialError("Clips columns differ in length: " + ", ".join(f"{k} {v}" for k, v in lengths.items()))
        family_of: dict[str, str] = {}
        for speaker, family in zip(self.speaker, self.family, strict=True):
            if family_of.setdefault(speaker, family) != family:
                raise TrialError(f"speaker {speaker} has clips of two voice families ({family_of[speaker]}, "
                                 f"{family}); a speaker has one")

    def __len__(self) -> int:
        return len(self.speaker)

    @cached_property
    def fingerprint(self) -> str:
        """sha1 of the whole table: trials made from it name it, so they are never read against another table."""
        columns = [self.speaker.tolist(), self.word.tolist(), self.family.tolist(), self.digest.tolist()]
        return hashlib.sha1(json.dumps(columns).encode()).hexdigest()


def _codes(values: np.ndarray) -> np.ndarray:
    """Integer codes in the sorted order of the values, so they compare as the strings do."""
    return np.unique(values, return_inverse=True)[1].astype(np.int64)


# --- Trials --------------------------------------------------------------------------------------------------


def _condition_pools(label: np.ndarray, same_word: np.ndarray, same_voice: np.ndarray) -> np.ndarray:
    """(trials, CONDITIONS) bool: the conditions each trial may belong to, by its flags."""
    return np.stack([same_word, ~same_word, (label == 1) | same_voice, np.ones_like(same_word)], axis=1)


@dataclass(frozen=True, eq=False)
class Trials:
    """Trial i compares speaker ``model_speaker[i]``'s enrolled model with row ``test_clip[i]`` of the clip table.
    Sorted by model speaker, then test clip. ``in_condition[i, c]``: whether condition CONDITIONS[c] evaluates
    trial i — every target its flags allow; the non-targets sampled for that condition."""

    model_speaker: np.ndarray  # speaker ids (str)
    test_clip: np.ndarray  # rows of Clips (int64)
    label: np.ndarray  # 1 target, 0 non-target (int64)
    same_word: np.ndarray  # the test clip's word is among the model's enrollment words
    same_voice: np.ndarray  # the model's and the test clip's speakers share a voice family or a recorded donor
    in_condition: np.ndarray  # (trials, len(CONDITIONS)) bool
    enrollment: dict[str, np.ndarray]  # speaker → its enrollment clips (rows of Clips, ascending)
    seed: int
    enrollment_utterances: int
    max_nontarget: int  # non-targets sampled per condition, at most
    clips_fingerprint: str  # Clips.fingerprint of the table ``test_clip`` and ``enrollment`` index

    def __post_init__(self) -> None:
        for name, dtype in (("model_speaker", object), ("test_clip", np.int64), ("label", np.int64),
                            ("same_word", bool), ("same_voice", bool), ("in_condition", bool)):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=dtype))
        object.__setattr__(self, "enrollment", {speaker: np.asarray(clips, np.int64)
                                                for speaker, clips in self.enrollment.items()})
        count = len(self.model_speaker)
        if not all(len(getattr(self, name)) == count for name in ("test_clip", "label", "same_word", "same_voice")):
            raise TrialError("Trials: model_speaker, test_clip, label, same_word and same_voice need one entry per "
                             "trial")
        if self.in_condition.shape != (count, len(CONDITIONS)):
            raise TrialError(f"Trials: in_condition must have shape ({count}, {len(CONDITIONS)}), got "
                             f"{self.in_condition.shape}")
        if not np.isin(self.label, (0, 1)).all():
            raise TrialError("Trials: labels must be 0 (non-target) or 1 (target)")
        pools = _condition_pools(self.label, self.same_word, self.same_voice)
        targets = self.label == 1
        if (self.in_condition & ~pools).any() or (self.in_condition[targets] != pools[targets]).any():
            raise TrialError("Trials: in_condition disagrees with the labels and flags (a trial outside its "
                             "conditions, or a target left out of one)")

    def condition(self, name: str) -> np.ndarray:
        """Which trials condition ``name`` (one of CONDITIONS) evaluates, as a bool mask."""
        if name not in CONDITIONS:
            raise TrialError(f"unknown condition {name!r}; the conditions are {', '.join(CONDITIONS)}")
        return self.in_condition[:, CONDITIONS.index(name)].copy()

    def counts(self) -> dict[str, dict[str, int]]:
        """Targets and non-targets per condition."""
        return {name: {"targets": int(np.sum(self.condition(name) & (self.label == 1))),
                       "non_targets": int(np.sum(self.condition(name) & (self.label == 0)))} for name in CONDITIONS}

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready mapping (flags as 0/1) that from_json turns back into equal trials."""
        return {
            "format": TRIALS_FORMAT, "seed": self.seed, "enrollment_utterances": self.enrollment_utterances,
            "max_nontarget": self.max_nontarget, "clips_fingerprint": self.clips_fingerprint,
            "enrollment": {speaker: clips.tolist() for speaker, clips in self.enrollment.items()},
            "model_speaker": self.model_speaker.tolist(), "test_clip": self.test_clip.tolist(),
            "label": self.label.tolist(),
            "same_word": self.same_word.astype(np.int8).tolist(),
            "same_voice": self.same_voice.astype(np.int8).tolist(),
            "in_condition": {name: self.in_condition[:, column].astype(np.int8).tolist()
                             for column, name in enumerate(CONDITIONS)},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Trials:
        """Trials from to_json's mapping (as read back from a JSON file)."""
        if data.get("format") != TRIALS_FORMAT:
            raise TrialError(f"trial list format {data.get('format')!r}, expected {TRIALS_FORMAT}: make the trials "
                             f"again with this version")
        if sorted(data["in_condition"]) != sorted(CONDITIONS):  # JSON writers may sort the keys
            raise TrialError(f"trial list conditions {list(data['in_condition'])}, expected {list(CONDITIONS)}")
        in_condition = np.stack([np.asarray(data["in_condition"][name], bool) for name in CONDITIONS], axis=1)
        return cls(model_speaker=np.asarray(data["model_speaker"], object),
                   test_clip=np.asarray(data["test_clip"], np.int64),
                   label=np.asarray(data["label"], np.int64), same_word=np.asarray(data["same_word"], bool),
                   same_voice=np.asarray(data["same_voice"], bool),
                   in_condition=in_condition.reshape(len(data["model_speaker"]), len(CONDITIONS)),
                   enrollment={speaker: np.asarray(clips, np.int64) for speaker, clips in data["enrollment"].items()},
                   seed=int(data["seed"]), enrollment_utterances=int(data["enrollment_utterances"]),
                   max_nontarget=int(data["max_nontarget"]), clips_fingerprint=str(data["clips_fingerprint"]))


def _speaker_rng(seed: int, speaker: str, stream: int) -> np.random.Generator:
    # Seeded by the speaker itself, not its position, so adding speakers does not change another speaker's draws.
    return np.random.default_rng([seed, int(hashlib.sha1(speaker.encode()).hexdigest(), 16), stream])


class _SmallestKeys:
    """The ``limit`` pairs with the smallest random keys among all offered, in O(limit) memory: with independent
    uniform keys, a uniform sample without replacement of every pair offered."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (keys, models, tests)
        self.held = 0
        self.threshold = _LARGEST_KEY  # once ``limit`` are held, a larger key can never get in

    def offer(self, keys: np.ndarray, model: int, tests: np.ndarray) -> None:
        keep = keys <= self.threshold
        if keep.any():
            self.parts.append((keys[keep], np.full(int(keep.sum()), model, np.int64), tests[keep]))
            self.held += int(keep.sum())
            if self.held > 2 * self.limit:  # truncating only now and then keeps the work linear overall
                self._truncate()

    def _truncate(self) -> None:
        keys, models, tests = (np.concatenate(column) for column in zip(*self.parts, strict=True))
        if len(keys) > self.limit:
            kept = np.argpartition(keys, self.limit - 1)[: self.limit]
            keys, models, tests = keys[kept], models[kept], tests[kept]
        self.parts, self.held = [(keys, models, tests)], len(keys)
        if self.held == self.limit:
            self.threshold = int(keys.max())

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(models, tests) of the pairs kept."""
        if not self.parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        self._truncate()
        return self.parts[0][1], self.parts[0][2]


def make_trials(clips: Clips, speakers: Sequence[str], enrollment_utterances: int = 3, seed: int = 0,
                max_nontarget: int = 100_000, voice_keys: Mapping[str, str] | None = None) -> Trials:
    """Enrollment and trials for ``speakers`` (one speaker set): every target trial, and per condition a uniform
    sample of at most ``max_nontarget`` non-target pairs (all of them when fewer). ``voice_keys``: family → voice
    key; families of one key are the same voice for the hard condition (a family missing from it is its own voice).
    Raises TrialError when a speaker has fewer than ``enrollment_utterances`` + 1 clips."""
    for name, value, least in (("enrollment_utterances", enrollment_utterances, 1), ("seed", seed, 0),
                               ("max_nontarget", max_nontarget, 1)):
        if int(value) != value or value < least:
            raise TrialError(f"{name} must be a whole number ≥ {least}, got {value}")
    names = sorted(set(speakers))
    if len(names) < 2:
        raise TrialError(f"trials need at least 2 speakers (for non-targets), got {len(names)}")
    key_of = voice_keys or {}
    voice = np.array([key_of.get(family, family) for family in clips.family], object)
    word_code, voice_code, digest_code = _codes(clips.word), _codes(voice), _codes(clips.digest)
    rows_of: dict[str, list[int]] = {name: [] for name in names}
    for row, speaker in enumerate(clips.speaker):
        if speaker in rows_of:
            rows_of[speaker].append(row)
    short = [f"{name} has {len(rows_of[name])}" for name in names if len(rows_of[name]) < enrollment_utterances + 1]
    if short:
        raise TrialError(f"too few clips: {', '.join(short[:5])}{' …' if len(short) > 5 else ''} ({len(short)} "
                         f"speakers); each needs enrollment_utterances + 1 = {enrollment_utterances + 1}: lower "
                         f"enrollment_utterances or leave those speakers out")

    enrollment: dict[str, np.ndarray] = {}
    test_rows: list[np.ndarray] = []
    for name in names:
        rows = np.asarray(rows_of[name], np.int64)
        # Candidates in an order of their own (word, audio), not the table's: a table listed in another order, or
        # with other speakers' clips added, gives the same choice.
        rows = rows[np.lexsort((rows, digest_code[rows], word_code[rows]))]
        chosen = _speaker_rng(seed, name, _ENROLLMENT_STREAM).choice(len(rows), enrollment_utterances, replace=False)
        enrollment[name] = np.sort(rows[chosen])
        test_rows.append(np.setdiff1d(rows, enrollment[name]))
    test = np.sort(np.concatenate(test_rows))  # every test clip of these speakers, by row
    model_of_speaker = {name: number for number, name in enumerate(names)}
    owner = np.array([model_of_speaker[speaker] for speaker in clips.speaker[test]], np.int64)
    model_voice = np.array([voice_code[enrollment[name][0]] for name in names], np.int64)
    test_word, test_voice, test_digest = word_code[test], voice_code[test], digest_code[test]

    target_models, target_tests = [], []
    samples = {condition: _SmallestKeys(max_nontarget) for condition in CONDITIONS}
    for number, name in enumerate(names):
        enrolled = enrollment[name]
        allowed = ~np.isin(test_digest, digest_code[enrolled])  # never a model against its own audio
        own = owner == number
        targets = np.flatnonzero(own & allowed)
        target_models.append(np.full(len(targets), number, np.int64))
        target_tests.append(targets)
        non_target = ~own & allowed
        same_word = np.isin(test_word, word_code[enrolled])
        keys = _speaker_rng(seed, name, _NONTARGET_STREAM).integers(_LARGEST_KEY, size=len(test))
        pools = {"same_word": non_target & same_word, "different_word": non_target & ~same_word,
                 "hard": non_target & (test_voice == model_voice[number]), "all": non_target}
        for condition, pool in pools.items():
            samples[condition].offer(keys[pool], number, np.flatnonzero(pool))

    # One code per (model, test position): sorting the codes sorts trials by model, then by clip row.
    sampled: dict[str, np.ndarray] = {}
    for condition, sample in samples.items():
        sampled_models, sampled_positions = sample.pairs()
        sampled[condition] = sampled_models * len(test) + sampled_positions
    target_codes = np.concatenate(target_models) * len(test) + np.concatenate(target_tests)
    codes = np.unique(np.concatenate([target_codes, *sampled.values()]))
    models, positions = np.divmod(codes, len(test))
    label = np.isin(codes, target_codes).astype(np.int64)
    word_table = np.zeros((len(names), int(word_code.max()) + 1), bool)
    for number, name in enumerate(names):
        word_table[number, word_code[enrollment[name]]] = True
    same_word = word_table[models, test_word[positions]]
    same_voice = model_voice[models] == test_voice[positions]
    in_condition = _condition_pools(label, same_word, same_voice) & (label == 1)[:, None]
    for column, condition in enumerate(CONDITIONS):
        in_condition[np.searchsorted(codes, sampled[condition]), column] = True
    return Trials(model_speaker=np.asarray(names, object)[models], test_clip=test[positions], label=label,
                  same_word=same_word, same_voice=same_voice, in_condition=in_condition, enrollment=enrollment,
                  seed=seed, enrollment_utterances=enrollment_utterances, max_nontarget=max_nontarget,
                  clips_fingerprint=clips.fingerprint)


# --- Checks --------------------------------------------------------------------------------------------------


def check_disjoint(assignment: Mapping[str, str], trials_by_set: Mapping[str, Trials], clips: Clips) -> None:
    """Raises TrialError if a speaker of one set's trials or enrollment is in another set's, or is assigned to
    another set, or if a trial pairs a model with byte-identical audio of its enrollment."""
    seen_in: dict[str, str] = {}
    for set_name, trials in sorted(trials_by_set.items()):
        if set_name not in SPEAKER_SETS:
            raise TrialError(f"unknown speaker set {set_name!r}; the sets are {', '.join(SPEAKER_SETS)}")
        if trials.clips_fingerprint != clips.fingerprint:
            raise TrialError(f"the {set_name} trials were made from another clip table (fingerprint "
                             f"{trials.clips_fingerprint[:12]}, this one {clips.fingerprint[:12]}): make them again")
        enrolled_rows = np.concatenate([np.zeros(0, np.int64), *trials.enrollment.values()])
        involved = (set(trials.enrollment) | set(trials.model_speaker.tolist())
                    | set(clips.speaker[trials.test_clip].tolist())
                    | set(clips.speaker[enrolled_rows].tolist()))
        for speaker in sorted(involved):
            if seen_in.setdefault(speaker, set_name) != set_name:
                raise TrialError(f"speaker {speaker} is in both the {seen_in[speaker]} and the {set_name} trials")
            if assignment.get(speaker) != set_name:
                raise TrialError(f"speaker {speaker} is in the {set_name} trials but assigned to "
                                 f"{assignment.get(speaker, 'no set')}")
        enrolled_audio = {(speaker, clips.digest[row]) for speaker, rows in trials.enrollment.items() for row in rows}
        for number, (model, row) in enumerate(zip(trials.model_speaker, trials.test_clip, strict=True)):
            if (model, clips.digest[row]) in enrolled_audio:
                raise TrialError(f"{set_name} trial {number} pairs speaker {model}'s model with clip {row}, "
                                 f"byte-identical to one of its enrollment clips")

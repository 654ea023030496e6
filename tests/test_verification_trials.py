"""Speaker sets, enrollment and verification trials on small synthetic clip tables, checked by brute force."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence

import numpy as np
import pytest

from training.speech import trials as sv
from training.speech.speech_commands import MAX_NUM_WAVS_PER_CLASS, which_set
from training.speech.trials import CONDITIONS, Clips, TrialError, Trials

FAMILIES = ("espeak-ng/de", "espeak-ng/en", "pico/en-GB", "pico/fr-FR")
WORDS = ("yes", "no", "up", "down", "left", "right")


def speaker_ids(count: int, prefix: str = "") -> list[str]:
    """Eight hex characters, like Speech Commands' ids."""
    return [hashlib.sha1(f"{prefix}speaker {number}".encode()).hexdigest()[:8] for number in range(count)]


def family_of(speaker: str) -> str:
    return FAMILIES[int(speaker, 16) % len(FAMILIES)]


def synthetic_clips(speakers: Sequence[str], repetitions: int = 2, words: Sequence[str] = WORDS) -> Clips:
    """Every speaker says every word ``repetitions`` times; every clip's audio is distinct."""
    rows = [(speaker, word, family_of(speaker), hashlib.sha1(f"{speaker}/{word}/{take}".encode()).hexdigest())
            for speaker in speakers for word in words for take in range(repetitions)]
    return Clips(*(np.array(column, dtype=object) for column in zip(*rows, strict=True)))


def sha1_set(speaker: str, dev_percentage: float, eval_percentage: float) -> str:
    """Speech Commands' rule, written out independently."""
    hashed = int(hashlib.sha1(speaker.encode()).hexdigest(), 16)
    percentage = (hashed % (2**27)) * (100.0 / (2**27 - 1))
    if percentage < dev_percentage:
        return "sv_dev"
    return "sv_eval" if percentage < dev_percentage + eval_percentage else "sv_train"


def pairs(trials: Trials) -> set[tuple[str, int]]:
    return set(zip(trials.model_speaker.tolist(), trials.test_clip.tolist(), strict=True))


# --- Speaker sets --------------------------------------------------------------------------------------------


def test_speaker_sets_follow_the_speech_commands_sha1_rule():
    speakers = speaker_ids(200)
    assert MAX_NUM_WAVS_PER_CLASS == 2**27 - 1
    for speaker in speakers:
        assert sv.speaker_set(speaker) == sv.speaker_set(speaker) == sha1_set(speaker, 15.0, 25.0)
        # At Speech Commands' own 10/10 split, the sets are its validation / testing / training buckets.
        expected = {"validation": "sv_dev", "testing": "sv_eval", "training": "sv_train"}
        assert sv.speaker_set(speaker, 10.0, 10.0) == expected[which_set(f"yes/{speaker}_nohash_3.wav")]
    assert {sv.speaker_set(speaker) for speaker in speakers} == set(sv.SPEAKER_SETS)
    with pytest.raises(TrialError, match="not a clip-name prefix"):
        sv.speaker_set("a/b")
    with pytest.raises(TrialError, match="add up to at most 100"):
        sv.speaker_set("0a7c2a8d", 60.0, 50.0)


def test_held_out_families_go_to_sv_eval_only_by_family_or_whole_engine():
    speakers = speaker_ids(80)
    families = {speaker: family_of(speaker) for speaker in speakers}
    for held_out, is_held in (("pico/en-GB", lambda family: family == "pico/en-GB"),
                              ("espeak-ng", lambda family: family.startswith("espeak-ng/"))):
        assignment = sv.assign_speaker_sets(speakers, families, held_out_families=[held_out])
        assert list(assignment) == sorted(speakers)
        for speaker, speaker_set in assignment.items():
            if is_held(families[speaker]):
                assert speaker_set == "sv_eval"
            else:
                assert speaker_set == sv.speaker_set(speaker)
        assert any(is_held(families[speaker]) for speaker in speakers)
    # "espeak" is not a whole engine name: holding it out would hold out nothing, so it is refused.
    with pytest.raises(TrialError, match="espeak is no family or engine"):
        sv.assign_speaker_sets(speakers, families, held_out_families=["espeak"])


def test_too_few_speakers_per_set_raise_a_one_line_error_saying_what_to_change():
    speakers = speaker_ids(4)
    with pytest.raises(TrialError) as raised:
        sv.assign_speaker_sets(speakers, {speaker: family_of(speaker) for speaker in speakers})
    message = str(raised.value)
    assert "\n" not in message
    assert "from 4 speakers" in message and "use more speakers" in message
    sizes = {name: sum(sv.speaker_set(speaker) == name for speaker in speakers) for name in sv.SPEAKER_SETS}
    short = [f"{name} {size} < 2" for name, size in sizes.items() if size < 2]
    assert short and all(part in message for part in short)
    assignment = sv.assign_speaker_sets(speakers, {}, minimum_per_set={"sv_train": 0, "sv_dev": 0, "sv_eval": 0})
    assert len(assignment) == 4


def test_no_speaker_crosses_sets_over_a_300_speaker_population():
    speakers = speaker_ids(300)
    clips = synthetic_clips(speakers, repetitions=1)
    assignment = sv.assign_speaker_sets(speakers, {speaker: family_of(speaker) for speaker in speakers},
                                        held_out_families=["pico/fr-FR"])
    trials_by_set = {name: sv.make_trials(clips, [s for s, assigned in assignment.items() if assigned == name],
                                          max_nontarget=2_000) for name in ("sv_dev", "sv_eval")}
    sv.check_disjoint(assignment, trials_by_set, clips)
    involved = {name: set(trials.model_speaker) | set(clips.speaker[trials.test_clip]) | set(trials.enrollment)
                for name, trials in trials_by_set.items()}
    assert not involved["sv_dev"] & involved["sv_eval"]
    for name, speakers_in_trials in involved.items():
        assert {assignment[speaker] for speaker in speakers_in_trials} == {name}
    with pytest.raises(TrialError, match="in the sv_eval trials but assigned to sv_dev"):
        sv.check_disjoint(assignment, {"sv_eval": trials_by_set["sv_dev"]}, clips)
    with pytest.raises(TrialError, match="in both the sv_dev and the sv_eval trials"):
        sv.check_disjoint(assignment, {"sv_dev": trials_by_set["sv_dev"], "sv_eval": trials_by_set["sv_dev"]}, clips)


# --- Enrollment and targets ----------------------------------------------------------------------------------


def test_trials_are_deterministic_for_a_seed_and_differ_for_another():
    clips = synthetic_clips(speaker_ids(8))
    speakers = sorted(set(clips.speaker))
    first, again = (sv.make_trials(clips, speakers, seed=1, max_nontarget=40) for _ in range(2))
    assert first.to_json() == again.to_json()
    other = sv.make_trials(clips, speakers, seed=2, max_nontarget=40)
    assert any((first.enrollment[s] != other.enrollment[s]).any() for s in speakers)
    assert pairs(first) != pairs(other)


def test_adding_a_speaker_leaves_the_other_speakers_enrollment_unchanged():
    speakers = speaker_ids(6)
    clips = synthetic_clips(speakers)
    before = sv.make_trials(clips, speakers)
    newcomer = speaker_ids(1, prefix="new ")
    # The newcomer's clips come first, so every other clip's row moves: compare the enrolled audio, not the rows.
    bigger = synthetic_clips(newcomer + speakers)
    after = sv.make_trials(bigger, newcomer + speakers)
    for speaker in speakers:
        assert clips.digest[before.enrollment[speaker]].tolist() == bigger.digest[after.enrollment[speaker]].tolist()


def test_target_trials_are_exactly_the_non_enrollment_clips_of_each_speaker():
    clips = synthetic_clips(speaker_ids(5), repetitions=3)
    trials = sv.make_trials(clips, sorted(set(clips.speaker)), enrollment_utterances=4)
    for speaker, enrolled in trials.enrollment.items():
        assert len(enrolled) == 4 and set(clips.speaker[enrolled]) == {speaker}
        own = set(np.flatnonzero(clips.speaker == speaker).tolist())
        targets = set(trials.test_clip[(trials.model_speaker == speaker) & (trials.label == 1)].tolist())
        assert targets == own - set(enrolled.tolist())
    assert (clips.speaker[trials.test_clip] == trials.model_speaker).tolist() == (trials.label == 1).tolist()


def test_no_trial_pairs_byte_identical_audio_even_with_duplicated_clips():
    speakers = speaker_ids(4)
    clips = synthetic_clips(speakers)
    digest = clips.digest.copy()
    first, second = (np.flatnonzero(clips.speaker == speaker) for speaker in speakers[:2])
    digest[first[1::2]] = digest[first[0::2]]  # the first speaker's two takes of each word are the same audio
    digest[second] = digest[first]  # and the second speaker's clips copy the first speaker's
    clips = dataclasses.replace(clips, digest=digest)
    trials = sv.make_trials(clips, speakers, enrollment_utterances=3)
    enrolled_audio = {speaker: set(clips.digest[rows].tolist()) for speaker, rows in trials.enrollment.items()}
    assert all(clips.digest[row] not in enrolled_audio[model] for model, row in pairs(trials))
    # Test clips that copy a model's enrollment audio, of the model itself or of another speaker: all left out.
    enrolled_rows = set(np.concatenate(list(trials.enrollment.values())).tolist())
    copies = {(model, row) for model in speakers for row in range(len(clips))
              if clips.digest[row] in enrolled_audio[model] and row not in enrolled_rows}
    assert {clips.speaker[row] == model for model, row in copies} == {True, False}
    assert not copies & pairs(trials)
    sv.check_disjoint(dict.fromkeys(speakers, "sv_eval"), {"sv_eval": trials}, clips)
    # A trial list that does pair identical audio is refused: add back a target trial against an enrolled take's twin.
    model, row = min((model, row) for model, row in copies if clips.speaker[row] == model)
    at = int(np.searchsorted(trials.model_speaker, model))
    bad = dataclasses.replace(
        trials, model_speaker=np.insert(trials.model_speaker, at, model),
        test_clip=np.insert(trials.test_clip, at, row), label=np.insert(trials.label, at, 1),
        same_word=np.insert(trials.same_word, at, True), same_voice=np.insert(trials.same_voice, at, True),
        in_condition=np.insert(trials.in_condition, at, [True, False, True, True], axis=0))
    with pytest.raises(TrialError, match="byte-identical"):
        sv.check_disjoint(dict.fromkeys(speakers, "sv_eval"), {"sv_eval": bad}, clips)


def test_a_speaker_with_too_few_clips_is_named():
    clips = synthetic_clips(speaker_ids(3), repetitions=1, words=WORDS[:3])
    with pytest.raises(TrialError, match=rf"{clips.speaker[0]} has 3.*enrollment_utterances \+ 1 = 4"):
        sv.make_trials(clips, sorted(set(clips.speaker)), enrollment_utterances=3)
    with pytest.raises(TrialError, match="missing1 has 0"):
        sv.make_trials(clips, [clips.speaker[0], "missing1"], enrollment_utterances=2)


# --- Non-targets and conditions ------------------------------------------------------------------------------


def available_non_targets(clips: Clips, trials: Trials) -> dict[str, set[tuple[str, int]]]:
    """Every allowed non-target pair of each condition, by brute force over models × test clips."""
    enrolled_rows = set(np.concatenate(list(trials.enrollment.values())).tolist())
    family = dict(zip(clips.speaker, clips.family, strict=True))
    available: dict[str, set[tuple[str, int]]] = {condition: set() for condition in CONDITIONS}
    for model, rows in trials.enrollment.items():
        words, audio = set(clips.word[rows]), set(clips.digest[rows])
        for row in range(len(clips)):
            speaker = clips.speaker[row]
            if speaker == model or speaker not in trials.enrollment or row in enrolled_rows:
                continue
            if clips.digest[row] in audio:
                continue
            same_word = clips.word[row] in words
            available["all"].add((model, row))
            available["same_word" if same_word else "different_word"].add((model, row))
            if family[speaker] == family[model]:
                available["hard"].add((model, row))
    return available


def test_same_word_and_same_voice_flags_match_a_brute_force_recomputation():
    clips = synthetic_clips(speaker_ids(7))
    trials = sv.make_trials(clips, sorted(set(clips.speaker)), enrollment_utterances=2, max_nontarget=10_000)
    family = dict(zip(clips.speaker, clips.family, strict=True))
    for model, row, same_word, same_voice in zip(trials.model_speaker, trials.test_clip, trials.same_word,
                                                 trials.same_voice, strict=True):
        assert same_word == (clips.word[row] in set(clips.word[trials.enrollment[model]]))
        assert same_voice == (family[model] == family[clips.speaker[row]])
    # Nothing was sampled away, so each condition is its definition by the flags.
    targets = trials.label == 1
    assert (trials.condition("same_word") == trials.same_word).all()
    assert (trials.condition("different_word") == ~trials.same_word).all()
    assert (trials.condition("hard") == (targets | trials.same_voice)).all()
    assert trials.condition("all").all()
    with pytest.raises(TrialError, match="unknown condition"):
        trials.condition("easy")


def test_non_targets_are_capped_per_condition_and_keep_all_they_can():
    clips = synthetic_clips(speaker_ids(12), repetitions=3)
    speakers = sorted(set(clips.speaker))
    everything = sv.make_trials(clips, speakers, max_nontarget=10**6)
    available = available_non_targets(clips, everything)
    assert pairs(everything) - {(m, r) for m, r in pairs(everything) if clips.speaker[r] == m} == available["all"]
    sizes = {condition: len(pool) for condition, pool in available.items()}
    smallest, next_smallest = sorted(sizes.values())[:2]
    assert smallest < next_smallest
    cap = (smallest + next_smallest) // 2  # the smallest condition keeps all it has, every other one is capped
    capped = sv.make_trials(clips, speakers, max_nontarget=cap)
    for condition, pool in available.items():
        mask = capped.condition(condition) & (capped.label == 0)
        chosen = set(zip(capped.model_speaker[mask].tolist(), capped.test_clip[mask].tolist(), strict=True))
        assert len(chosen) == min(cap, len(pool)) and chosen <= pool
    counts = capped.counts()
    assert sorted(counts[condition]["non_targets"] for condition in CONDITIONS) == [smallest, cap, cap, cap]
    assert all(counts[condition]["non_targets"] <= cap for condition in CONDITIONS)
    assert all(counts[condition]["targets"] == everything.counts()[condition]["targets"] for condition in CONDITIONS)


def test_json_round_trip_is_exact():
    clips = synthetic_clips(speaker_ids(6))
    trials = sv.make_trials(clips, sorted(set(clips.speaker)), seed=7, max_nontarget=30)
    loaded = Trials.from_json(json.loads(json.dumps(trials.to_json())))
    assert loaded.to_json() == trials.to_json()
    assert (loaded.seed, loaded.enrollment_utterances, loaded.max_nontarget) == (7, 3, 30)
    for name in ("model_speaker", "test_clip", "label", "same_word", "same_voice", "in_condition"):
        original, again = getattr(trials, name), getattr(loaded, name)
        assert original.dtype == again.dtype and np.array_equal(original, again)
    assert list(loaded.enrollment) == list(trials.enrollment)
    assert all(np.array_equal(loaded.enrollment[s], trials.enrollment[s]) for s in trials.enrollment)
    with pytest.raises(TrialError, match="format"):
        Trials.from_json({**trials.to_json(), "format": 0})


# --- Clip table ----------------------------------------------------------------------------------------------


def test_clip_table_checks_its_columns_and_digests_pcm_bytes():
    with pytest.raises(TrialError, match="differ in length: speaker 2, word 2, family 1, digest 2"):
        Clips(np.array(["a", "b"]), np.array(["yes", "no"]), np.array(["pico/en-GB"]), np.array(["0", "1"]))
    with pytest.raises(TrialError, match="speaker a has clips of two voice families"):
        Clips(np.array(["a", "a"]), np.array(["yes", "no"]), np.array(["pico/en-GB", "pico/fr-FR"]),
              np.array(["0", "1"]))
    samples = np.array([1, -2], np.int16)
    assert sv.pcm_digest(samples) == sv.pcm_digest(b"\x01\x00\xfe\xff") == hashlib.sha1(b"\x01\x00\xfe\xff").hexdigest()
    other = synthetic_clips(speaker_ids(3))
    trials = sv.make_trials(other, sorted(set(other.speaker)))
    with pytest.raises(TrialError, match="another clip table"):
        sv.check_disjoint(dict.fromkeys(trials.enrollment, "sv_dev"), {"sv_dev": trials}, synthetic_clips(["ab"]))


def test_hard_trials_pair_the_voices_of_one_recorded_donor_across_engines():
    # Speakers of flite/slt, festival's SLT and RHVoice's slt: three families, one recorded donor (CMU ARCTIC SLT);
    # rhvoice/bdl is another donor.
    from training.speech.synthesis.voices import voice_keys

    families = ["flite/slt", "festival/cmu_us_slt_arctic_hts", "rhvoice/slt", "rhvoice/bdl"]
    speakers = speaker_ids(8, prefix="donor")
    family = {speaker: families[number % len(families)] for number, speaker in enumerate(speakers)}
    rows = [(speaker, word, family[speaker], hashlib.sha1(f"{speaker}/{word}/{take}".encode()).hexdigest())
            for speaker in speakers for word in WORDS for take in range(2)]
    clips = Clips(*(np.array(column, dtype=object) for column in zip(*rows, strict=True)))
    by_family = sv.make_trials(clips, speakers, max_nontarget=10_000)
    by_voice = sv.make_trials(clips, speakers, max_nontarget=10_000, voice_keys=voice_keys())
    slt = {"flite/slt", "festival/cmu_us_slt_arctic_hts", "rhvoice/slt"}
    for trials, alike in ((by_family, lambda a, b: a == b), (by_voice, lambda a, b: a == b or {a, b} <= slt)):
        hard = trials.condition("hard") & (trials.label == 0)
        pairs = [(family[model], family[clips.speaker[row]])
                 for model, row in zip(trials.model_speaker[hard], trials.test_clip[hard], strict=True)]
        assert pairs and all(alike(a, b) for a, b in pairs)
        # every such pair is in: nothing was sampled away at this size
        expected = sum(alike(family[model], family[clips.speaker[row]])
                       for model, row in zip(trials.model_speaker, trials.test_clip, strict=True)
                       if model != clips.speaker[row])
        assert len(pairs) == expected
    cross_engine = sum(a != b for a, b in ((family[m], family[clips.speaker[r]]) for m, r in zip(
        by_voice.model_speaker[by_voice.condition("hard") & (by_voice.label == 0)],
        by_voice.test_clip[by_voice.condition("hard") & (by_voice.label == 0)], strict=True)))
    assert cross_engine > 0
    assert by_voice.counts()["hard"]["non_targets"] > by_family.counts()["hard"]["non_targets"]
    # Targets and the other conditions do not depend on the voice map.
    for condition in ("same_word", "different_word", "all"):
        assert by_voice.counts()[condition] == by_family.counts()[condition]


def test_the_trial_sets_the_pipeline_and_the_benches_score_pair_one_donor_across_engines():
    # speaker_clips.trial_sets is the one maker of sv_dev/sv_eval for ingestion and for bench-sv/bench-sv-transfer:
    # its hard non-targets include flite's SLT against festival's SLT, and each set has its own seed.
    from training.workloads.speaker_verification.speaker_clips import trial_sets

    families = ["flite/slt", "festival/cmu_us_slt_arctic_hts", "rhvoice/bdl"]
    speakers = speaker_ids(12, prefix="set")
    family = {speaker: families[number % len(families)] for number, speaker in enumerate(speakers)}
    rows = [(speaker, word, family[speaker], hashlib.sha1(f"{speaker}/{word}/{take}".encode()).hexdigest())
            for speaker in speakers for word in WORDS for take in range(2)]
    clips = Clips(*(np.array(column, dtype=object) for column in zip(*rows, strict=True)))
    assignment = {speaker: ("sv_dev", "sv_eval")[number % 2] for number, speaker in enumerate(speakers)}
    trials = trial_sets(clips, assignment, enrollment_utterances=3, seed=5)
    assert sorted(trials) == ["sv_dev", "sv_eval"]
    assert (trials["sv_dev"].seed, trials["sv_eval"].seed) == (5, 6)
    for set_name, set_trials in trials.items():
        assert set(set_trials.enrollment) == {s for s, name in assignment.items() if name == set_name}
        hard = set_trials.condition("hard") & (set_trials.label == 0)
        pairs = {(family[model], family[clips.speaker[row]])
                 for model, row in zip(set_trials.model_speaker[hard], set_trials.test_clip[hard], strict=True)}
        assert ("flite/slt", "festival/cmu_us_slt_arctic_hts") in pairs
        assert not any("rhvoice/bdl" in pair and pair[0] != pair[1] for pair in pairs)


def test_the_voice_catalogue_names_each_shared_donor_in_several_engines():
    from collections import defaultdict

    from training.speech.synthesis.voices import all_voices, voice_keys

    engines_of = defaultdict(set)
    for voice in all_voices():
        if voice.donor:
            engines_of[voice.donor].add(voice.engine)
    # a donor named for one engine only would be a typo: it joins nothing
    assert engines_of and all(len(engines) >= 2 for engines in engines_of.values()), dict(engines_of)
    keys = voice_keys()
    assert keys["flite/kal16"] == keys["festival/kal_diphone"] != keys["flite/awb"]
    assert keys["mbrola/us1"] == keys["festival/us1_mbrola"] != keys["mbrola/us2"]
    assert keys["espeak-ng/de"] == "espeak-ng/de"  # no donor: the family is the voice

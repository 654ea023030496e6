"""A synthetic Speech Commands corpus, made offline with the Debian TTS engines, in many voice families.

No real speech corpus is reachable here, so this writes one in Speech Commands' exact layout (see
``speech_commands``): ``<word>/<speaker>_nohash_<n>.wav`` (1 s, 16 kHz, mono, 16-bit), ``_background_noise_/``,
``validation_list.txt`` and ``testing_list.txt`` by the dataset's own ``which_set`` rule, published atomically by
``storage.publish``: its ``_manifest.json``, written last, holds the synthesis report and marks a complete corpus.

A model trained on one engine's voices fails on voices it never heard, so every speaker belongs to a voice *family*
(engine + base voice or language, e.g. ``espeak-ng/en-us``, ``espeak-ng/de``, ``mbrola/us2``, ``pico/en-GB``,
``festival/rab_diphone``, ``flite/slt``, ``rhvoice/bdl``; ``speaker_families`` reads them back from a corpus).
Speakers go round ``VOICE_GROUPS`` by a fixed weighted rotation (about two thirds English, one third foreign
accents; the first seven speakers are in seven different groups, the first fifteen in all eleven), and within a
group round its voices. Sources:
 - espeak-ng (formant synthesis): English accents, and German, French, Spanish, Italian, Dutch, Brazilian
   Portuguese, Polish, Swedish, Finnish and Czech voices saying the English words from ``RESPELLINGS`` (each word
   spelled in that language so the voice keeps its own accent instead of switching to English); each speaker has its
   own *variant file* (formants, pitch, breath, roughness, flutter, sometimes a Klatt glottal source);
 - espeak 1.48 (the older engine, other phoneme data and rules): its English accents, with variant files too;
 - MBROLA diphone voices through espeak-ng: en1, us1, us2 (English); de1, de2, de5, fr1, fr4, it3, it4, nl2, pl1,
   sw1, sw2 (respelled);
 - SVOX Pico (pico2wave): en-US, en-GB; de-DE, es-ES, fr-FR, it-IT (respelled); pitch and speed through its markup;
 - festival: kal, ked, rab, don diphones, the HTS voice slt, festival's own MBROLA front end (us1/us2/us3/en1);
   Spanish el, Italian lp/pc, Finnish hy_fi_mv and Czech dita/machac (respelled);
 - flite: kal16, awb, rms, slt;
 - RHVoice (HTS, through its C library: its test program reloads the voice for every utterance): alan, bdl, clb,
   slt, evgeniy-eng, lyubov (its English voices, the last two with a Russian accent).
Left out: MBROLA es1/es2/mx2/es3, br1/br4, nl3 and us3 through espeak-ng (it asks them for diphones they lack,
leaving silent gaps: us3 has none for the vowel of "on" and "off"; festival drives us3 fine); festival suo_fi_lj
(no diphones for word-final voiced consonants), festvox-ru (240 MB), the Catalan HTS voice (another respelling
table for the slowest voice), the Hindi voice (Devanagari respellings); the MBROLA "-en" voices (English through a
foreign voice: the respelled voices cover those accents); RHVoice's non-English voices. Debian packages no
clustergen voices, and festival's only other HTS voice is the Catalan one.

Each speaker also gets a vocal-tract warp (the engine's output resampled by 0.9–1.1 and read as 16 kHz again, which
moves formants and pitch together), a tempo and pitch, and from ``training.speech.audio.acoustics`` a room (RT60
0.1–0.9 s, or dry) and a microphone/channel (colour, band limits; one speaker in nine a telephone line), varied a
little per utterance. Each utterance gets tempo/pitch jitter and intonation (the trailing punctuation), is trimmed,
reverberated, placed at a random offset in the 1 s window, passed through the channel, scaled to a random peak level
and gets a faint noise floor.

espeak-ng and espeak only read variants from ``<data>/voices/!v/`` (an unknown one is silently ignored), so the
variant files go into a private mirror of each system data directory (symbolic links plus our ``voices/!v``) passed
with ``--path``.

Every random draw comes from a generator keyed on (seed, speaker number, word, repetition), so the same arguments
give byte-identical files whatever the process count or scheduling (for the same engine and voice package versions,
which the report records), and a corpus of fewer words holds the very same clips for the words it has. The work runs
in spawned worker processes (a fresh interpreter each, so nothing the caller changed, such as the signal handlers a
Horovod run leaves behind, reaches them); a worker that dies or takes longer than ``TASK_TIMEOUT_SECONDS`` on one
speaker fails the corpus with an error naming that speaker.
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import io
import json
import logging
import multiprocessing
import os
import pickle
import re
import shutil
import struct
import subprocess
import tempfile
import time
import traceback
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from multiprocessing.connection import Connection, wait
from pathlib import Path
from signal import Signals
from typing import Any, NamedTuple

import numpy as np
from scipy import signal

from training import REPO_ROOT, storage
from training.speech.audio import acoustics
from training.speech.audio.acoustics import Channel, Room
from training.speech.constants import SPEECH_GENERATOR_VERSION
from training.speech.speech_commands import ALL_WORDS, BACKGROUND_NOISE, KEYWORDS, SAMPLE_RATE, which_set
from training.storage import DatasetError

log = logging.getLogger(__name__)

GENERATOR_VERSION = SPEECH_GENERATOR_VERSION  # bumped in training.speech.constants
DATASET_KIND = "speech_commands_synthetic"
LEGACY_REPORT_NAME = "_synthesis.json"  # what marked a complete corpus before they went through storage.publish
# One speaker's (or background noise's) work; the slowest, a festival HTS speaker of all 35 words with two
# repetitions, takes about 3 s.
TASK_TIMEOUT_SECONDS = 300.0
VALIDATION_PERCENTAGE = 10.0
TESTING_PERCENTAGE = 10.0
CLIP_SAMPLES = SAMPLE_RATE  # 1 s
MAX_WORD_SAMPLES = int(0.95 * SAMPLE_RATE)  # longer words are sped up to fit, leaving room for an offset

ESPEAK_NG, ESPEAK, MBROLA, PICO, FESTIVAL, FLITE, RHVOICE = (
    "espeak-ng", "espeak", "mbrola", "pico", "festival", "flite", "rhvoice")
ENGINE_PROGRAMS = {ESPEAK_NG: ("espeak-ng",), ESPEAK: ("espeak",), MBROLA: ("espeak-ng", "mbrola"),
                   PICO: ("pico2wave",), FESTIVAL: ("festival",), FLITE: ("flite",), RHVOICE: ()}
PROGRAM_PACKAGES = {"espeak-ng": "espeak-ng", "espeak": "espeak", "mbrola": "mbrola", "pico2wave": "libttspico-utils",
                    "festival": "festival", "flite": "flite"}
RHVOICE_LIBRARY, RHVOICE_PACKAGE = "libRHVoice.so.5", "librhvoice5"  # RHVoice runs in-process (class RHVoice)
SLOW_ENGINES = (FESTIVAL, RHVOICE)  # both load their voice first (festival: about 0.3 s; RHVoice: 0.15 s)
MBROLA_DATA, RHVOICE_VOICES, FESTIVAL_VOICES_DIR = (Path("/usr/share/mbrola"), Path("/usr/share/RHVoice/voices"),
                                                    Path("/usr/share/festival/voices"))
# What a speaker adds after the word: it changes the intonation (flite and festival mostly ignore it).
ENDINGS, ENDING_WEIGHTS = (".", "!", ",", "?"), (0.5, 0.25, 0.15, 0.1)
# Babble is made of words outside the Speech Commands vocabulary, so it never says a keyword.
BABBLE_WORDS = ("the", "and", "we", "could", "maybe", "tomorrow", "kitchen", "really", "people", "later", "coffee",
                "because", "window", "little", "after", "never", "about", "water", "morning", "think", "paper",
                "table", "always", "garden", "music", "friday", "station", "hello", "thanks", "please", "money",
                "over", "there", "where", "number", "today", "evening", "dinner", "market", "letter")
BABBLE_TALKERS = 6
BABBLE_ACCENTS = ("en-us", "en-us", "en-us", "en-gb", "en-gb-x-rp", "en-gb-scotland", "en-gb-x-gbclan",
                  "en-gb-x-gbcwmd", "en-029", "en-us-nyc")
# name → seconds; Speech Commands' own noises are about a minute each.
BACKGROUND_SECONDS = {"white_noise": 60, "pink_noise": 60, "brown_noise": 45, "running_tap": 60, "mains_hum": 30,
                      "babble": 40}
# Streams of the per-purpose random generators (the first key), so no two purposes ever share draws.
SPEAKER_STREAM, UTTERANCE_STREAM, NOISE_STREAM, SPEAKER_ACOUSTICS_STREAM, UTTERANCE_ACOUSTICS_STREAM = 1, 2, 3, 4, 5
WORD_PATTERN = re.compile(r"^[a-z]+$")
TELEPHONE_EVERY = 9  # one speaker in nine (numbers 4, 13, 22, …) speaks through a telephone line


class EngineNotFoundError(FileNotFoundError):
    """A TTS engine or voice is missing; the message says which Debian package installs it."""


class SynthesisWorkerError(RuntimeError):
    """A synthesis worker died, or did not finish its job in time; the message names the speaker (or noise)."""


# --- Voices --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Voice:
    """A base voice of one engine: what a speaker's family is named after."""

    engine: str
    name: str  # the engine's own name: an espeak accent or language, MBROLA voice, pico language, festival voice …
    language: str = "en"  # "en": says the word as written; else the RESPELLINGS column it reads
    gender: str = "male"  # for engines that take a target mean F0 (flite, festival)
    package: str = ""  # the Debian package with its data, for error messages ("" when the engine's own)
    encoding: str = "utf-8"  # what festival's foreign voices read (Latin-1, Latin-2)
    # The recorded person a voice is made from, where engines share one (DONORS): their voices sound alike although
    # their families differ, so speaker verification's "hard" trials pair them (training.speech.trials).
    donor: str = ""

    @property
    def family(self) -> str:
        return f"{self.engine}/{self.name}"

    @property
    def voice_key(self) -> str:
        """What makes two speakers' voices alike: their shared donor, else their family."""
        return f"donor/{self.donor}" if self.donor else self.family


@dataclass(frozen=True)
class VoiceGroup:
    """Voices that share an engine and whether they speak English natively; ``weight``: speakers per 100."""

    name: str
    weight: int
    voices: tuple[Voice, ...]


def _voices(engine: str, names: str, **settings: Any) -> tuple[Voice, ...]:
    return tuple(Voice(engine, name, **settings) for name in names.split())


# Recorded donors that several engines' voices share: CMU ARCTIC's SLT (flite, festival's HTS voice, RHVoice), the
# KAL diphones (flite's kal16 is festival's kal_diphone rebuilt), and the MBROLA databases festival drives with its
# own front end as espeak-ng does with its own.
SLT, KAL, US1, US2, EN1 = "cmu_arctic_slt", "kal", "mbrola_us1", "mbrola_us2", "mbrola_en1"

# Order matters twice: the rotation breaks weight ties by it, and a group's speakers take its voices in turn.
VOICE_GROUPS = (
    # en-us three times and en-gb twice: most Speech Commands speakers are American.
    VoiceGroup("espeak-ng English", 20, _voices(ESPEAK_NG, "en-us en-gb en-us en-gb-x-rp en-029 en-us en-gb-scotland "
                                                           "en-us-nyc en-gb-x-gbclan en-gb en-gb-x-gbcwmd")),
    VoiceGroup("rhvoice", 12, (Voice(RHVOICE, "bdl", package="rhvoice-english"),
                               Voice(RHVOICE, "clb", package="rhvoice-english"),
                               Voice(RHVOICE, "alan", package="rhvoice-english"),
                               Voice(RHVOICE, "slt", package="rhvoice-english", donor=SLT),
                               Voice(RHVOICE, "evgeniy-eng", package="rhvoice-english"),
                               Voice(RHVOICE, "lyubov", package="rhvoice-english"))),
    VoiceGroup("espeak-ng foreign", 14, tuple(Voice(ESPEAK_NG, language, language=language)
                                              for language in ("de", "fr", "es", "it", "nl", "pt-br", "pl", "sv",
                                                               "fi", "cs"))),
    VoiceGroup("festival English", 9, (
        Voice(FESTIVAL, "kal_diphone", package="festvox-kallpc16k", donor=KAL),
        Voice(FESTIVAL, "cmu_us_slt_arctic_hts", gender="female", package="festvox-us-slt-hts", donor=SLT),
        Voice(FESTIVAL, "rab_diphone", package="festvox-rablpc16k"),
        Voice(FESTIVAL, "us1_mbrola", gender="female", package="festvox-us1", donor=US1),
        Voice(FESTIVAL, "ked_diphone", package="festvox-kdlpc16k"),
        Voice(FESTIVAL, "us2_mbrola", package="festvox-us2", donor=US2),
        Voice(FESTIVAL, "don_diphone", package="festvox-don"),
        Voice(FESTIVAL, "us3_mbrola", package="festvox-us3"),
        Voice(FESTIVAL, "en1_mbrola", package="festvox-en1", donor=EN1))),
    VoiceGroup("flite", 8, (Voice(FLITE, "slt", gender="female", donor=SLT), Voice(FLITE, "kal16", donor=KAL),
                            Voice(FLITE, "awb"), Voice(FLITE, "rms"))),
    VoiceGroup("mbrola foreign", 10, (
        Voice(MBROLA, "de2", language="de", package="mbrola-de2"),
        Voice(MBROLA, "fr4", language="fr", package="mbrola-fr4"),
        Voice(MBROLA, "it3", language="it", package="mbrola-it3"),
        Voice(MBROLA, "sw2", language="sv", package="mbrola-sw2"),
        Voice(MBROLA, "nl2", language="nl", package="mbrola-nl2"),
        Voice(MBROLA, "de1", language="de", package="mbrola-de1"),
        Voice(MBROLA, "pl1", language="pl", package="mbrola-pl1"),
        Voice(MBROLA, "fr1", language="fr", package="mbrola-fr1"),
        Voice(MBROLA, "it4", language="it", package="mbrola-it4"),
        Voice(MBROLA, "sw1", language="sv", package="mbrola-sw1"),
        Voice(MBROLA, "de5", language="de", package="mbrola-de5"))),
    VoiceGroup("espeak English", 6, _voices(ESPEAK, "en-us en en-sc en-uk-rp en-uk-north en-uk-wmids en-wi")),
    VoiceGroup("mbrola English", 6, (Voice(MBROLA, "us2", package="mbrola-us2", donor=US2),
                                     Voice(MBROLA, "us1", package="mbrola-us1", donor=US1),
                                     Voice(MBROLA, "en1", package="mbrola-en1", donor=EN1))),
    VoiceGroup("festival foreign", 6, (
        Voice(FESTIVAL, "el_diphone", language="es", package="festvox-ellpc11k", encoding="latin-1"),
        Voice(FESTIVAL, "czech_dita", language="cs", gender="female", package="festvox-czech-dita",
              encoding="iso-8859-2"),
        Voice(FESTIVAL, "pc_diphone", language="it", package="festvox-itapc16k", encoding="latin-1"),
        Voice(FESTIVAL, "hy_fi_mv_diphone", language="fi", package="festvox-suopuhe-mv", encoding="latin-1"),
        Voice(FESTIVAL, "czech_machac", language="cs", package="festvox-czech-machac", encoding="iso-8859-2"),
        Voice(FESTIVAL, "lp_diphone", language="it", gender="female", package="festvox-italp16k",
              encoding="latin-1"))),
    VoiceGroup("pico English", 5, _voices(PICO, "en-US en-GB", package="libttspico-data")),
    VoiceGroup("pico foreign", 4, tuple(Voice(PICO, name, language=name[:2], package="libttspico-data")
                                        for name in ("de-DE", "fr-FR", "es-ES", "it-IT"))),
)

# Each Speech Commands word as a speaker of that language would write what they say, so that the voice reads it with
# its own sounds (and espeak-ng does not switch to English for a word it knows). Checked with
# `espeak-ng -v <language> -x <respelling>` against the English phonemes; what differs is the accent (German
# "wann" [van] for "one", Spanish "estop", Polish "fri" for "three"), while "three" and "tree" stay apart.
RESPELLING_TABLE = """
word      de         fr         es       it       nl          pt-br    pl       sv        fi       cs
bed       bett       bède       bed      bed      bet         béd      bed      bedd      bed      bed
bird      börd       beurde     berd     berd     burd        bérd     berd     börd      böörd    bérd
cat       kätt       kète       kat      chet     ket         két      ket      katt      kät      ket
dog       dogg       dogue      dog      dog      dok         dóg      dog      dågg      dog      dog
down      daun       daoune     daun     daun     daun        dáun     dałn     daon      daun     daun
eight     eht        eyte       eit      eit      eet         eit      ejt      ejt       eit      ejt
five      feiw       faïve      faiv     faiv     fajf        faiv     fajw     fajv      faiv     fajv
four      for        fore       for      for      foor        fór      for      får       foor     fór
go        goh        go         gou      gou      gooh        gou      goł      gåu       gou      gou
happy     häppi      happi      japi     eppi     heppie      répi     hepi     häppi     häppi    hepy
house     haus       haousse    jaus     aus      haus        ráus     hałs     haos      haus     haus
left      left       lefte      left     left     left        léft     left     läft      left     left
marvin    marwinn    marvine    marvin   marvìn   marvin      márvin   marwin   marvin    marvin   marvin
nine      nein       naïne      nain     nain     najn        nain     najn     najn      nain     najn
no        noh        no         nou      nou      noo         nou      noł      nåu       nou      nou
off       off        offe       of       of       of          óf       of       off       of       of
on        onn        onne       on       on       on          ón       on       ånn       on       on
one       wann       ouane      uan      uan      wan         uán      łan      vann      vann     van
right     reit       raïte      rait     rait     rajt        rait     rajt     rajt      rait     rajt
seven     sewen      sévenne    seven    seven    sevven      séven    sewen    sevven    seven    seven
sheila    schiela    chila      chila    scila    sjiela      xíla     szila    schila    siila    šíla
six       sicks      sikse      siks     sics     siks        siks     syks     sicks     siks     siks
stop      stopp      stop       estop    stop     stop        stóp     stop     stopp     stop     stop
three     sri        sri        sri      sri      srie        fri      fri      sri       srii     srí
tree      trie       tri        tri      tri      trie        tri      tri      tri       trii     trí
two       tuh        tou        tu       tu       toe         tu       tu       to        tuu      tú
up        app        eup        ap       ap       ap          áp       ap       app       ap       ap
wow       wau        ouaou      uau      uau      wauw        uau      łał      vao       vau      vau
yes       jess       yèsse      yes      ies      jes         iés      jes      jess      jes      jes
zero      sieroh     ziro       siro     ziro     zieroo      zírou    ziroł    siro      siirou   zírou
backward  bäckwörd   bakouarde  bakuard  becuord  bekwurd     békuârd  bekłerd  bäckvörd  bäkvörd  bekvord
follow    folloh     folo       folou    folou    follo       fálou    foloł    fallo     falou    folou
forward   forwörd    forouarde  foruard  foruord  forwurd     fóruârd  forłerd  fårvörd   forvörd  forvord
learn     lörn       leurne     lern     lern     lurn        lérn     lern     lörn      löörn    lérn
visual    wischuell  vijouel    visual   vìgiual  viezjoewel  víjual   wiżuel   vischuel  visuuel  vižual
"""


def _parse_respellings(table: str) -> dict[str, dict[str, str]]:
    """language → English word → respelling, from the table's columns."""
    header, *rows = (line.split() for line in table.strip().splitlines())
    respellings: dict[str, dict[str, str]] = {language: {} for language in header[1:]}
    for word, *spellings in rows:
        if len(spellings) != len(header) - 1:
            raise ValueError(f"RESPELLING_TABLE: the row of {word!r} has {len(spellings)} spellings, "
                             f"expected {len(header) - 1}")
        for language, spelling in zip(header[1:], spellings, strict=True):
            respellings[language][word] = spelling
    return respellings


RESPELLINGS = _parse_respellings(RESPELLING_TABLE)


def text_for(voice: Voice, word: str) -> str:
    """What ``voice`` is given to say ``word``: the respelling in its language (the word itself if it has none)."""
    return word if voice.language == "en" else RESPELLINGS[voice.language].get(word, word)


def _group_rotation() -> tuple[int, ...]:
    """One cycle of group indices, each group as often as its weight and spread evenly (smooth weighted
    round-robin: every prefix is close to the weights), so even a few speakers span several groups."""
    weights = [group.weight for group in VOICE_GROUPS]
    total = sum(weights)
    credit = [0] * len(weights)
    cycle = []
    for _ in range(total):
        credit = [have + weight for have, weight in zip(credit, weights, strict=True)]
        chosen = max(range(len(weights)), key=lambda index: credit[index])  # ties: the earlier group
        credit[chosen] -= total
        cycle.append(chosen)
    return tuple(cycle)


GROUP_ROTATION = _group_rotation()


def speaker_voice(number: int) -> Voice:
    """The voice of speaker ``number``: its group by the fixed rotation, then that group's voices in turn."""
    rounds, position = divmod(number, len(GROUP_ROTATION))
    group_index = GROUP_ROTATION[position]
    group = VOICE_GROUPS[group_index]
    turn = rounds * group.weight + GROUP_ROTATION[:position].count(group_index)
    return group.voices[turn % len(group.voices)]


def all_voices() -> list[Voice]:
    """Every voice some speaker can get, each once, in ``VOICE_GROUPS`` order."""
    return list(dict.fromkeys(voice for group in VOICE_GROUPS for voice in group.voices))


def voice_keys() -> dict[str, str]:
    """Voice family → what makes voices alike (Voice.voice_key): families of one recorded donor share a key."""
    return {voice.family: voice.voice_key for voice in all_voices()}


# --- Speakers ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Speaker:
    """One synthetic speaker: voice, and the per-speaker settings its utterances start from."""

    number: int
    speaker_id: str  # 8 lowercase hex characters, like Speech Commands' ids
    voice: Voice
    warp: float  # vocal-tract warp: > 1 lowers formants and pitch
    tempo: float  # espeak(-ng)/mbrola: words per minute; flite/festival: duration stretch; pico/rhvoice: rate %
    pitch: float  # espeak(-ng)/mbrola: -p (0–99); flite/festival: target mean F0 in Hz; pico/rhvoice: pitch %
    variant: str = ""  # espeak-ng/espeak: the variant file's text
    room: Room | None = None  # None: dry (a close microphone)
    channel: Channel = field(default_factory=Channel)

    @property
    def engine(self) -> str:
        return self.voice.engine

    @property
    def family(self) -> str:
        return self.voice.family

    @property
    def variant_name(self) -> str:
        return f"cb-{self.speaker_id}"


def speaker_ids(seed: int, count: int) -> list[str]:
    """Distinct 8-hex-character ids for speakers 0..count-1 (a hash of seed and number; re-hashed on a clash)."""
    ids: list[str] = []
    taken: set[str] = set()
    for number in range(count):
        attempt = 0
        while True:
            key = f"cloudburst-synthetic-speaker:{seed}:{number}" + (f":{attempt}" if attempt else "")
            candidate = hashlib.sha1(key.encode()).hexdigest()[:8]
            if candidate not in taken:
                break
            attempt += 1
        taken.add(candidate)
        ids.append(candidate)
    return ids


def make_speaker(seed: int, number: int, speaker_id: str) -> Speaker:
    """Speaker ``number``: its voice by the fixed rotation, everything else drawn from the seed."""
    voice = speaker_voice(number)
    rng = np.random.default_rng([SPEAKER_STREAM, seed, number])
    warp = round(float(rng.uniform(0.9, 1.1)), 4)
    surroundings = np.random.default_rng([SPEAKER_ACOUSTICS_STREAM, seed, number])
    room = acoustics.random_room(surroundings)
    # Telephone speech by a fixed rotation, not a draw, so that even a small corpus has some (period coprime with
    # the voice rotation's, so every voice group gets telephone speakers).
    channel = acoustics.random_channel(surroundings, telephone=number % TELEPHONE_EVERY == TELEPHONE_EVERY // 2)

    def speaker(tempo: float, pitch: float, variant: str = "") -> Speaker:
        return Speaker(number, speaker_id, voice, warp, round(tempo, 3), round(pitch, 1), variant, room, channel)

    if voice.engine in (ESPEAK_NG, ESPEAK):
        klatt_models = 5 if voice.engine == ESPEAK_NG else 3  # espeak 1.48 knows fewer glottal sources
        return speaker(float(rng.uniform(140, 195)), 50.0,
                       espeak_variant(rng, f"cb-{speaker_id}", klatt_models=klatt_models))
    if voice.engine == MBROLA:  # diphones: only pitch and tempo move (and the warp)
        return speaker(float(rng.uniform(130, 185)), float(rng.integers(25, 76)))
    if voice.engine in (PICO, RHVOICE):  # percentages of the voice's own rate and pitch
        return speaker(float(rng.uniform(85, 120)), float(rng.uniform(75, 130)))
    return speaker(float(rng.uniform(0.85, 1.2)), _f0_mean(rng, voice.gender))  # flite, festival


def _f0_mean(rng: np.random.Generator, gender: str) -> float:
    return float(rng.uniform(150, 230) if gender == "female" else rng.uniform(85, 140))


def espeak_variant(rng: np.random.Generator, name: str, klatt_models: int = 5) -> str:
    """The text of an espeak-ng/espeak variant file: a random but plausible male or female voice quality."""
    female = rng.random() < 0.5
    if female:
        base_pitch = rng.uniform(145, 235)
        pitch_range = base_pitch + rng.uniform(40, 110)
        formant_scale = rng.uniform(1.05, 1.2)
    else:
        base_pitch = rng.uniform(70, 130)
        pitch_range = base_pitch + rng.uniform(25, 70)
        formant_scale = rng.uniform(0.9, 1.03)
    lines = ["language variant", f"name {name}", f"gender {'female' if female else 'male'}",
             f"pitch {base_pitch:.0f} {pitch_range:.0f}"]
    for formant in range(9):
        # Each formant moves a little on its own, F1/F2 the most (they carry the vowel colour).
        spread = 0.06 if formant in (1, 2) else 0.03
        frequency = 100 * formant_scale * rng.uniform(1 - spread, 1 + spread)
        strength = rng.uniform(70, 125)
        width = rng.uniform(90, 160) if female else rng.uniform(80, 130)
        freq_add = rng.uniform(-60, 60) if formant in (1, 2) else 0.0
        lines.append(f"formant {formant} {frequency:.0f} {strength:.0f} {width:.0f} {freq_add:.0f}")
    lines.append(f"flutter {rng.uniform(0, 20):.0f}")
    lines.append(f"roughness {rng.integers(0, 6)}")
    lines.append(f"consonants {rng.uniform(80, 125):.0f}")
    lines.append(f"voicing {rng.uniform(85, 130):.0f}")
    lines.append(f"tone 600 {rng.uniform(140, 200):.0f} 1200 {rng.uniform(110, 160):.0f} "
                 f"2000 {rng.uniform(80, 140):.0f}")
    if rng.random() < 0.4:  # breathiness, mostly on vowels
        level = rng.uniform(1, 4)
        lines.append("breath 0 " + " ".join(f"{level * weight:.0f}" for weight in (0.7, 1, 1, 1, 1, 1, 0.7)))
    if rng.random() < 0.3:  # a small room
        lines.append(f"echo {rng.uniform(60, 140):.0f} {rng.uniform(4, 14):.0f}")
    if rng.random() < 0.3:  # another glottal source model: a clearly different timbre
        lines.append(f"klatt {rng.integers(1, klatt_models + 1)}")
    return "\n".join(lines) + "\n"


def word_key(word: str) -> int:
    """A stable number for a word (not its position in the list), so subsets of words share clips."""
    return int(hashlib.sha1(word.encode()).hexdigest()[:8], 16)


def utterance_rng(seed: int, speaker_number: int, word: str, repetition: int,
                  stream: int = UTTERANCE_STREAM) -> np.random.Generator:
    return np.random.default_rng([stream, seed, speaker_number, word_key(word), repetition])


def utterance_plan(words: Sequence[str], repetitions: int) -> list[tuple[str, int]]:
    """(word, repetition) for one speaker: keywords ``repetitions`` times, other words once."""
    return [(word, repetition) for word in words for repetition in range(repetitions if word in KEYWORDS else 1)]


# --- Engines -------------------------------------------------------------------------------------------------


def _binary(program: str) -> str:
    path = shutil.which(program)
    if path is None:
        raise EngineNotFoundError(
            f"{program}: not found on PATH; `make setup` installs it (infra/setup.sh installs the Debian package "
            f"{PROGRAM_PACKAGES[program]})")
    return path


def _run(command: list[str], what: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    result = subprocess.run(command, input=stdin, capture_output=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{what}: {' '.join(command)} exited with {result.returncode}: "
                           f"{result.stderr.decode(errors='replace').strip()[-500:]}")
    return result


def voice_is_installed(voice: Voice) -> bool:
    """Whether the voice's data is where its engine looks (engines that fall back silently need this checked)."""
    if voice.engine == MBROLA:
        return any(path.is_file() for path in (MBROLA_DATA / voice.name, MBROLA_DATA / voice.name / voice.name,
                                               MBROLA_DATA / "voices" / voice.name))
    if voice.engine == RHVOICE:
        return (RHVOICE_VOICES / voice.name).is_dir()
    if voice.engine == FESTIVAL:
        return any(FESTIVAL_VOICES_DIR.glob(f"*/{voice.name}"))
    return True


def require_voices(voices: set[Voice]) -> None:
    """Every program and voice the corpus needs, or EngineNotFoundError naming the Debian package to install."""
    for program in sorted({program for voice in voices for program in ENGINE_PROGRAMS[voice.engine]}):
        _binary(program)
    if any(voice.engine == RHVOICE for voice in voices):
        RHVoice().close()
    for voice in sorted(voices, key=lambda voice: voice.family):
        if not voice_is_installed(voice):
            raise EngineNotFoundError(f"{voice.family}: voice not installed; `make setup` installs it "
                                      f"(infra/setup.sh installs the Debian package {voice.package})")


def espeak_data_dir(program: str = "espeak-ng") -> Path:
    """The system data directory of espeak-ng (or espeak), as ``<program> --version`` reports it."""
    output = _run([_binary(program), "--version"], f"{program} --version").stdout.decode()
    match = re.search(r"Data at:\s*(\S+)", output)
    if not match or not (Path(match.group(1)) / "phontab").exists():
        raise RuntimeError(f"{program} --version does not name a usable data directory: {output.strip()!r}")
    return Path(match.group(1))


def make_espeak_root(root: Path, variants: dict[str, str], program: str = "espeak-ng") -> Path:
    """A directory to pass as ``<program> --path``: links to the system data plus our variants in voices/!v."""
    system = espeak_data_dir(program)
    data = root / system.name  # espeak-ng-data or espeak-data
    (data / "voices" / "!v").mkdir(parents=True)
    for entry in system.iterdir():
        if entry.name != "voices":
            (data / entry.name).symlink_to(entry)
    for entry in (system / "voices").iterdir():
        if entry.name != "!v":
            (data / "voices" / entry.name).symlink_to(entry)
    for name, text in variants.items():
        (data / "voices" / "!v" / name).write_text(text)
    return root


def espeak(espeak_root: Path, accent: str, variant_name: str, text: str, words_per_minute: int,
           pitch: int, program: str = "espeak-ng") -> tuple[int, np.ndarray]:
    """(sample rate, samples in [-1, 1]) of espeak-ng (or espeak) speaking ``text``."""
    command = [_binary(program), f"--path={espeak_root}", "-v", f"{accent}+{variant_name}",
               "-s", str(words_per_minute), "-p", str(pitch), "--stdout", text]
    return decode_wav(_run(command, f"{program} ({accent}+{variant_name}, {text!r})").stdout)


def check_variants_are_used(espeak_root: Path, accent: str, variant_name: str, program: str = "espeak-ng") -> None:
    """espeak(-ng) falls back to its default voice, silently, when it cannot find a variant: fail loudly instead."""
    ours = espeak(espeak_root, accent, variant_name, "yes.", 175, 50, program)[1]
    plain = decode_wav(_run([_binary(program), "-v", accent, "--stdout", "yes."], program).stdout)[1]
    if ours.shape == plain.shape and np.array_equal(ours, plain):
        raise RuntimeError(f"{program} ignored the variant file {variant_name} under {espeak_root}/*-data/voices/!v "
                           "(a changed data layout in this version?)")


def mbrola(voice: Voice, text: str, words_per_minute: int, pitch: int) -> tuple[int, np.ndarray]:
    """An MBROLA voice speaking ``text``, with espeak-ng as its front end (text → phonemes and prosody)."""
    command = [_binary(ESPEAK_NG), "-v", f"mb-{voice.name}", "-s", str(words_per_minute), "-p", str(pitch),
               "--stdout", text]
    result = _run(command, f"mbrola ({voice.name}, {text!r})")
    # A phoneme pair the voice has no diphone for becomes silence, mid-word: not a clip to keep.
    missing = [line for line in result.stderr.decode(errors="replace").splitlines() if "unknown" in line]
    if missing:
        raise RuntimeError(f"mbrola ({voice.name}, {text!r}): missing diphones ({'; '.join(missing)}); change its "
                           f"respelling ({voice.language}) in RESPELLING_TABLE or leave the voice out")
    return decode_wav(result.stdout)


def pico(voice: Voice, text: str, speed_percent: float, pitch_percent: float,
         scratch: Path) -> tuple[int, np.ndarray]:
    """SVOX Pico speaking ``text``, its speed and pitch set by its markup (100: the voice's own)."""
    out = scratch / "pico.wav"  # pico2wave needs a name ending in .wav
    markup = f"<pitch level='{pitch_percent:.0f}'><speed level='{speed_percent:.0f}'>{text}</speed></pitch>"
    _run([_binary("pico2wave"), "-l", voice.name, "-w", str(out), markup], f"pico2wave ({voice.name}, {text!r})")
    return decode_wav(out.read_bytes())


class _RHVoiceCallbacks(ctypes.Structure):
    _fields_ = [("set_sample_rate", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)),
                ("play_speech", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_uint,
                                                 ctypes.c_void_p))] + \
        [(name, ctypes.c_void_p) for name in ("process_mark", "word_starts", "word_ends", "sentence_starts",
                                              "sentence_ends", "play_audio", "done")]


class _RHVoiceInitParams(ctypes.Structure):
    _fields_ = [("data_path", ctypes.c_char_p), ("config_path", ctypes.c_char_p),
                ("resource_paths", ctypes.POINTER(ctypes.c_char_p)), ("callbacks", _RHVoiceCallbacks),
                ("options", ctypes.c_uint)]


class _RHVoiceSynthParams(ctypes.Structure):
    _fields_ = [("voice_profile", ctypes.c_char_p)] + \
        [(name, ctypes.c_double) for name in ("absolute_rate", "absolute_pitch", "absolute_volume", "relative_rate",
                                              "relative_pitch", "relative_volume")] + \
        [("punctuation_mode", ctypes.c_int), ("punctuation_list", ctypes.c_char_p), ("capitals_mode", ctypes.c_int),
         ("flags", ctypes.c_int)]


class RHVoice:
    """RHVoice through its C library (RHVoice.h), loaded once per speaker: a voice then takes about 15 ms an
    utterance, where the RHVoice-test program loads it again for each one (about 150 ms)."""

    def __init__(self) -> None:
        try:
            self._library = ctypes.CDLL(RHVOICE_LIBRARY)
        except OSError as error:
            raise EngineNotFoundError(f"{RHVOICE_LIBRARY}: cannot load it ({error}); `make setup` installs it "
                                      f"(infra/setup.sh installs the Debian package {RHVOICE_PACKAGE})") from None
        library = self._library
        library.RHVoice_new_tts_engine.restype = ctypes.c_void_p
        library.RHVoice_new_tts_engine.argtypes = [ctypes.POINTER(_RHVoiceInitParams)]
        library.RHVoice_new_message.restype = ctypes.c_void_p
        library.RHVoice_new_message.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint, ctypes.c_int,
                                                ctypes.POINTER(_RHVoiceSynthParams), ctypes.c_void_p]
        library.RHVoice_speak.argtypes = [ctypes.c_void_p]
        library.RHVoice_delete_message.argtypes = [ctypes.c_void_p]
        library.RHVoice_delete_tts_engine.argtypes = [ctypes.c_void_p]
        self._rate = 0
        self._chunks: list[np.ndarray] = []

        def set_sample_rate(rate: int, user_data: int | None) -> int:
            self._rate = rate
            return 1

        def play_speech(samples: Any, count: int, user_data: int | None) -> int:
            self._chunks.append(np.ctypeslib.as_array(samples, (count,)).copy())
            return 1

        fields = dict(_RHVoiceCallbacks._fields_)
        # The library keeps these function pointers: they must live as long as the engine.
        self._callbacks = _RHVoiceCallbacks(fields["set_sample_rate"](set_sample_rate),
                                            fields["play_speech"](play_speech))
        params = _RHVoiceInitParams(None, None, None, self._callbacks, 0)  # NULL paths: the library's defaults
        self._engine = library.RHVoice_new_tts_engine(ctypes.byref(params))
        if not self._engine:
            raise RuntimeError("RHVoice: the library could not start (is its data under /usr/share/RHVoice?)")

    def say(self, voice: Voice, text: str, rate_percent: float, pitch_percent: float) -> tuple[int, np.ndarray]:
        """(sample rate, samples in [-1, 1]) of ``voice`` speaking ``text`` (rate and pitch: % of its own)."""
        params = _RHVoiceSynthParams(voice.name.encode(), 0.0, 0.0, 0.0, rate_percent / 100, pitch_percent / 100,
                                     1.0, 0, None, 0, 0)
        data = text.encode()
        self._chunks = []
        message = self._library.RHVoice_new_message(self._engine, data, len(data), 0, ctypes.byref(params), None)
        if not message:
            raise RuntimeError(f"RHVoice ({voice.name}, {text!r}): the library refused the message")
        try:
            spoke = self._library.RHVoice_speak(message)
        finally:
            self._library.RHVoice_delete_message(message)
        if not spoke or not self._chunks:
            raise RuntimeError(f"RHVoice ({voice.name}, {text!r}): no speech; is the voice installed? (`make setup` "
                               f"installs {voice.package})")
        return self._rate, np.concatenate(self._chunks).astype(np.float64) / 32768.0

    def close(self) -> None:
        if self._engine:
            self._library.RHVoice_delete_tts_engine(self._engine)
            self._engine = None

    def __enter__(self) -> RHVoice:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def flite(voice: str, text: str, duration_stretch: float, f0_mean: float, scratch: Path) -> tuple[int, np.ndarray]:
    out = scratch / "flite.wav"
    _run([_binary(FLITE), "-voice", voice, "--setf", f"duration_stretch={duration_stretch:.4f}",
          "--setf", f"int_f0_target_mean={f0_mean:.1f}", "-t", text, "-o", str(out)], f"flite ({voice}, {text!r})")
    return decode_wav(out.read_bytes())


def festival(voice: Voice, requests: list[tuple[str, float]], f0_mean: float,
             scratch: Path) -> list[tuple[int, np.ndarray]]:
    """Synthesize (text, duration stretch) requests in one festival process (its start-up dominates)."""
    f0_std = 0.14 * f0_mean
    script = [f"(voice_{voice.name})",
              f"(set! int_lr_params '((target_f0_mean {f0_mean:.1f}) (target_f0_std {f0_std:.1f}) "
              "(model_f0_mean 170) (model_f0_std 34)))"]  # the diphone voices' own model values; HTS ignores it
    for index, (text, stretch) in enumerate(requests):
        script.append(f"(Parameter.set 'Duration_Stretch {stretch:.4f})")
        script.append(f"(utt.save.wave (utt.synth (Utterance Text \"{text}\")) \"{scratch / f'{index}.wav'}\" 'riff)")
    script_path = scratch / "synthesize.scm"
    # festival reads bytes: its foreign voices expect their language's 8-bit character set.
    script_path.write_bytes(("\n".join(script) + "\n").encode(voice.encoding))
    result = _run([_binary(FESTIVAL), "--batch", str(script_path)], f"festival ({voice.name})")
    missing = [line for line in result.stderr.decode(errors="replace").splitlines() if "default diphone" in line]
    if missing:
        raise RuntimeError(f"festival ({voice.name}): missing diphones ({'; '.join(missing)}) in "
                           f"{[text for text, _ in requests]}; change the respellings ({voice.language}) in "
                           "RESPELLING_TABLE or leave the voice out")
    results = []
    for index in range(len(requests)):
        path = scratch / f"{index}.wav"
        if not path.exists():
            raise RuntimeError(f"festival ({voice.name}) wrote no audio for {requests[index][0]!r}; is its voice "
                               f"installed? (`make setup` installs {voice.package})")
        results.append(decode_wav(path.read_bytes()))
    return results


def package_versions(voices: set[Voice]) -> dict[str, str]:
    """The Debian package version of every engine and voice used: byte-identical corpora across machines need the
    same ones ("unknown" where dpkg does not know the package)."""
    packages = {PROGRAM_PACKAGES[program] for voice in voices for program in ENGINE_PROGRAMS[voice.engine]}
    packages |= {voice.package for voice in voices if voice.package}
    packages |= {RHVOICE_PACKAGE for voice in voices if voice.engine == RHVOICE}
    versions = dict.fromkeys(sorted(packages), "unknown")
    if shutil.which("dpkg-query"):
        listed = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Version}\\n", *versions], capture_output=True,
                                text=True, check=False).stdout
        for line in listed.splitlines():
            name, _, version = line.partition(" ")
            if name in versions and version:
                versions[name] = version
    return versions


# --- Audio ---------------------------------------------------------------------------------------------------


def decode_wav(data: bytes) -> tuple[int, np.ndarray]:
    """(rate, mono float samples) of 16-bit PCM WAV bytes; tolerates espeak-ng's streaming header (size 0x7ffff000)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise RuntimeError(f"TTS output is not a WAV file (starts with {data[:12]!r})")
    position, rate, channels = 12, None, 1
    while position + 8 <= len(data):
        chunk_id, size = struct.unpack_from("<4sI", data, position)
        body = position + 8
        if chunk_id == b"fmt ":
            audio_format, channels, rate, _, _, bits = struct.unpack_from("<HHIIHH", data, body)
            if audio_format != 1 or bits != 16:
                raise RuntimeError(f"TTS output is not 16-bit PCM (format {audio_format}, {bits} bits)")
        elif chunk_id == b"data":
            if rate is None:
                raise RuntimeError("TTS output has its data chunk before the fmt chunk")
            end = min(len(data), body + size)
            end -= (end - body) % (2 * channels)
            samples = np.frombuffer(data[body:end], dtype="<i2").reshape(-1, channels)[:, 0]
            return rate, samples.astype(np.float64) / 32768.0
        position = body + size + (size % 2)
    raise RuntimeError("TTS output has no data chunk")


def encode_wav(samples: np.ndarray) -> bytes:
    """16 kHz mono 16-bit PCM WAV bytes (the plain 44-byte header Speech Commands uses)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as writer:
        writer.setnchannels(1)
        writer.setsampwidth(2)
        writer.setframerate(SAMPLE_RATE)
        writer.writeframes(samples.astype("<i2").tobytes())
    return buffer.getvalue()


def to_int16(samples: np.ndarray) -> np.ndarray:
    return np.clip(np.round(samples * 32767.0), -32768, 32767).astype(np.int16)


def trim_silence(samples: np.ndarray, rate: int, floor_db: float = -40.0) -> np.ndarray:
    """The samples from the first to the last 10 ms frame within ``floor_db`` of the loudest frame (+1 frame)."""
    frame = max(1, rate // 100)
    frames = len(samples) // frame
    if frames == 0:
        return samples
    energy = np.sqrt(np.mean(samples[: frames * frame].reshape(frames, frame) ** 2, axis=1))
    loud = np.flatnonzero(energy > energy.max() * 10 ** (floor_db / 20))
    if energy.max() == 0 or loud.size == 0:
        return samples[:0]
    start, stop = max(0, loud[0] - 1) * frame, min(frames, loud[-1] + 2) * frame
    return samples[start:stop]


def resample(samples: np.ndarray, ratio: float) -> np.ndarray:
    """Polyphase resampling by ``ratio`` (output length / input length), approximated by a small fraction."""
    fraction = Fraction(ratio).limit_denominator(512)
    return signal.resample_poly(samples, fraction.numerator, fraction.denominator)


def shape_clip(samples: np.ndarray, rate: int, speaker: Speaker, rng: np.random.Generator,
               surroundings: np.random.Generator) -> np.ndarray:
    """TTS output → a 1 s, 16 kHz int16 clip: trim, warp (+ jitter) to 16 kHz, reverberate in the speaker's room,
    place at a random offset, pass through the speaker's channel, scale to a random level, add a noise floor.

    ``rng`` draws the utterance's own variation, ``surroundings`` its room and channel (both keyed on the utterance).
    """
    speech = trim_silence(samples, rate)
    if speech.size < rate // 50:
        raise RuntimeError("the engine produced (almost) no sound")
    ratio = SAMPLE_RATE / rate * speaker.warp * rng.uniform(0.98, 1.02)
    # Too long for the window: speed it up (raising the pitch a little) rather than cut the word.
    ratio = min(ratio, (MAX_WORD_SAMPLES - 2) / speech.size)
    word = resample(speech, ratio)[:MAX_WORD_SAMPLES]
    ramp = min(80, word.size // 4)  # 5 ms fades: trimming may cut mid-waveform
    word[:ramp] *= np.linspace(0, 1, ramp)
    word[word.size - ramp :] *= np.linspace(1, 0, ramp)
    offset = int(rng.integers(0, CLIP_SAMPLES - word.size + 1))
    heard = word
    if speaker.room is not None:
        # The reverberation tail may run past the window, as a word near the end of a real clip does.
        heard = acoustics.reverberate(word, acoustics.vary_room(speaker.room, surroundings), surroundings,
                                      SAMPLE_RATE)
        if heard.size > CLIP_SAMPLES - offset:
            heard = heard[: CLIP_SAMPLES - offset]
            heard[heard.size - 80 :] *= np.linspace(1, 0, 80)  # no click where the window cuts the tail
    clip = np.zeros(CLIP_SAMPLES)
    clip[offset : offset + heard.size] = heard
    clip = acoustics.apply_channel(clip, acoustics.vary_channel(speaker.channel, surroundings), SAMPLE_RATE)
    peak_db = rng.uniform(-20, -1)
    clip *= 10 ** (peak_db / 20) / max(np.abs(clip).max(), 1e-9)
    # After the channel: the recorder's own noise floor, so no clip is pure digital silence.
    clip += room_noise(rng, CLIP_SAMPLES, level_db=rng.uniform(-72, -55))
    return to_int16(clip)


def room_noise(rng: np.random.Generator, samples: int, level_db: float) -> np.ndarray:
    """Gaussian noise, low-passed by a random one-pole filter (white … brownish), at ``level_db`` RMS."""
    pole = rng.uniform(0.0, 0.97)
    noise = signal.lfilter([1 - pole], [1, -pole], rng.standard_normal(samples))
    return noise * (10 ** (level_db / 20) / max(np.sqrt(np.mean(noise**2)), 1e-12))


# --- Background noise ----------------------------------------------------------------------------------------


def _normalise(samples: np.ndarray, rms_db: float, peak: float = 0.95) -> np.ndarray:
    samples = samples - samples.mean()
    samples = samples * (10 ** (rms_db / 20) / max(np.sqrt(np.mean(samples**2)), 1e-12))
    return np.clip(samples, -peak, peak)


def _spectral_noise(rng: np.random.Generator, samples: int, exponent: float) -> np.ndarray:
    """Gaussian noise whose power falls as 1/f**exponent (0 white, 1 pink, 2 brown), above 20 Hz."""
    spectrum = np.fft.rfft(rng.standard_normal(samples))
    frequencies = np.fft.rfftfreq(samples, 1 / SAMPLE_RATE)
    spectrum *= np.where(frequencies > 20, np.maximum(frequencies, 20) ** (-exponent / 2), 0.0)
    return np.fft.irfft(spectrum, samples)


def _slow_envelope(rng: np.random.Generator, samples: int, hertz: float) -> np.ndarray:
    """A smooth random curve around 0 (std ~1) that changes on the scale of 1/hertz seconds."""
    knots = rng.standard_normal(int(samples / SAMPLE_RATE * hertz) + 2)
    curve = np.interp(np.arange(samples), np.linspace(0, samples, knots.size), knots)
    return curve


def running_tap(rng: np.random.Generator, samples: int) -> np.ndarray:
    """Band-limited noise (water hiss) with slow swells and short gurgles."""
    band = signal.butter(4, [rng.uniform(300, 700), rng.uniform(3000, 5000)], btype="bandpass", fs=SAMPLE_RATE,
                         output="sos")
    hiss = signal.sosfilt(band, rng.standard_normal(samples))
    swell = 1 + 0.25 * _slow_envelope(rng, samples, 0.5)
    gurgle = 1 + 0.3 * np.clip(_slow_envelope(rng, samples, 12.0), 0, None)
    return hiss * swell * gurgle


def mains_hum(rng: np.random.Generator, samples: int) -> np.ndarray:
    """50 or 60 Hz and its harmonics, random phases and falling levels, a slow wobble and a little hiss."""
    fundamental = float(rng.choice([50.0, 60.0]))
    t = np.arange(samples) / SAMPLE_RATE
    hum = sum(rng.uniform(0.3, 1.0) / harmonic * np.sin(2 * np.pi * fundamental * harmonic * t + rng.uniform(0, 6.3))
              for harmonic in range(1, 9))
    return hum * (1 + 0.1 * _slow_envelope(rng, samples, 0.3)) + 0.02 * rng.standard_normal(samples)


def babble(rng: np.random.Generator, samples: int, espeak_root: Path, voices: int) -> np.ndarray:
    """Several synthetic talkers (espeak-ng babble variants) saying non-keyword words at once, overlapping."""
    mix = np.zeros(samples)
    for talker in range(voices):
        text = " ".join(rng.choice(BABBLE_WORDS, size=60)) + "."
        accent = str(rng.choice(BABBLE_ACCENTS))
        rate, speech = espeak(espeak_root, accent, f"cb-babble-{talker}", text, int(rng.uniform(150, 200)), 50)
        speech = resample(speech, SAMPLE_RATE / rate * rng.uniform(0.9, 1.1))
        stream = np.tile(speech, samples // max(speech.size, 1) + 2)
        start = int(rng.integers(0, speech.size))
        mix += rng.uniform(0.5, 1.0) * stream[start : start + samples]
    return mix


def babble_variants(seed: int, voices: int) -> dict[str, str]:
    rng = np.random.default_rng([NOISE_STREAM, seed, 1000])
    return {f"cb-babble-{talker}": espeak_variant(rng, f"cb-babble-{talker}") for talker in range(voices)}


def background_noise(name: str, seed: int, espeak_root: Path) -> np.ndarray:
    """One of BACKGROUND_SECONDS' noises as int16 samples."""
    rng = np.random.default_rng([NOISE_STREAM, seed, list(BACKGROUND_SECONDS).index(name)])
    samples = BACKGROUND_SECONDS[name] * SAMPLE_RATE
    makers: dict[str, Callable[[], np.ndarray]] = {
        "white_noise": lambda: rng.standard_normal(samples),
        "pink_noise": lambda: _spectral_noise(rng, samples, 1.0),
        "brown_noise": lambda: _spectral_noise(rng, samples, 2.0),
        "running_tap": lambda: running_tap(rng, samples),
        "mains_hum": lambda: mains_hum(rng, samples),
        "babble": lambda: babble(rng, samples, espeak_root, BABBLE_TALKERS),
    }
    return to_int16(_normalise(makers[name](), rms_db=rng.uniform(-22, -14)))


# --- Work units (run in pool workers) ------------------------------------------------------------------------


@dataclass(frozen=True)
class _SpeakerJob:
    speaker: Speaker
    plan: tuple[tuple[str, int], ...]
    seed: int
    staging: Path
    espeak_roots: dict[str, Path]  # program (espeak-ng, espeak) → its --path with our variants


@dataclass(frozen=True)
class _NoiseJob:
    name: str
    seed: int
    staging: Path
    espeak_roots: dict[str, Path]


def _engine_audio(job: _SpeakerJob, rngs: list[np.random.Generator], scratch: Path) -> list[tuple[int, np.ndarray]]:
    """Raw TTS output for every utterance of the job, drawing each utterance's engine jitter from its own rng."""
    speaker, voice = job.speaker, job.speaker.voice
    texts = [text_for(voice, word) + str(rng.choice(ENDINGS, p=ENDING_WEIGHTS))
             for (word, _), rng in zip(job.plan, rngs, strict=True)]
    tempo_jitter = [float(rng.uniform(0.92, 1.08)) for rng in rngs]
    if voice.engine in (ESPEAK_NG, ESPEAK, MBROLA):
        pitch_jitter = [int(rng.integers(-8, 9)) for rng in rngs]
        if voice.engine == MBROLA:
            return [mbrola(voice, text, round(speaker.tempo * tempo), int(speaker.pitch) + pitch)
                    for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
        return [espeak(job.espeak_roots[voice.engine], voice.name, speaker.variant_name, text,
                       round(speaker.tempo * tempo), int(speaker.pitch) + pitch, voice.engine)
                for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
    if voice.engine in (PICO, RHVOICE):
        pitch_jitter = [float(rng.uniform(0.95, 1.05)) for rng in rngs]
        settings = [(text, speaker.tempo * tempo, speaker.pitch * pitch)
                    for text, tempo, pitch in zip(texts, tempo_jitter, pitch_jitter, strict=True)]
        if voice.engine == PICO:
            return [pico(voice, text, tempo, pitch, scratch) for text, tempo, pitch in settings]
        with RHVoice() as engine:
            return [engine.say(voice, text, tempo, pitch) for text, tempo, pitch in settings]
    if voice.engine == FLITE:
        return [flite(voice.name, text, speaker.tempo * tempo, speaker.pitch, scratch)
                for text, tempo in zip(texts, tempo_jitter, strict=True)]
    requests = [(text, speaker.tempo * tempo) for text, tempo in zip(texts, tempo_jitter, strict=True)]
    return festival(voice, requests, speaker.pitch, scratch)


def _synthesize_speaker(job: _SpeakerJob) -> tuple[int, list[str]]:
    """Write one speaker's clips into the staging directory; returns (speaker number, relative paths)."""
    speaker = job.speaker
    rngs = [utterance_rng(job.seed, speaker.number, word, repetition) for word, repetition in job.plan]
    with tempfile.TemporaryDirectory(prefix="cloudburst-tts-") as scratch:
        audio = _engine_audio(job, rngs, Path(scratch))
    written = []
    for (word, repetition), rng, (rate, samples) in zip(job.plan, rngs, audio, strict=True):
        relative = f"{word}/{speaker.speaker_id}_nohash_{repetition}.wav"
        surroundings = utterance_rng(job.seed, speaker.number, word, repetition, UTTERANCE_ACOUSTICS_STREAM)
        try:
            clip = shape_clip(samples, rate, speaker, rng, surroundings)
        except RuntimeError as error:
            raise RuntimeError(f"{relative} ({speaker.family}): {error}") from error
        (job.staging / relative).write_bytes(encode_wav(clip))
        written.append(relative)
    return speaker.number, written


def _write_noise(job: _NoiseJob) -> tuple[int, list[str]]:
    relative = f"{BACKGROUND_NOISE}/{job.name}.wav"
    (job.staging / relative).write_bytes(encode_wav(background_noise(job.name, job.seed,
                                                                     job.espeak_roots[ESPEAK_NG])))
    return -1, [relative]


def _do(job: _SpeakerJob | _NoiseJob) -> tuple[int, list[str]]:
    return _synthesize_speaker(job) if isinstance(job, _SpeakerJob) else _write_noise(job)


def _describe(job: _SpeakerJob | _NoiseJob) -> str:
    if isinstance(job, _SpeakerJob):
        speaker = job.speaker
        return f"speaker {speaker.speaker_id} (number {speaker.number}, {speaker.family})"
    return f"background noise {job.name}"


def _serve_jobs(connection: Connection) -> None:
    """A worker's life: run each job that arrives on ``connection``, send back its result or its exception."""
    while True:
        try:
            job = connection.recv()
        except (EOFError, KeyboardInterrupt):
            return  # the parent closed its end (all done) or is going away; Ctrl-C is the parent's to handle
        try:
            reply = ("done", _do(job))
        except BaseException as error:
            sent = error
            try:
                pickle.loads(pickle.dumps(error))
            except Exception:  # an exception type that does not survive pickling: send its text instead
                sent = RuntimeError(f"{type(error).__name__}: {error}")
            sent.add_note(f"(raised in the synthesis worker for {_describe(job)}; worker traceback:\n"
                          f"{traceback.format_exc().rstrip()})")
            reply = ("failed", sent)
        connection.send(reply)


# --- The corpus ----------------------------------------------------------------------------------------------


def default_corpus_dir(speakers: int, repetitions: int, seed: int) -> Path:
    return (REPO_ROOT / "var" / "corpora"
            / f"speech-commands-synthetic-v{GENERATOR_VERSION}-s{speakers}-r{repetitions}-seed{seed}")


def _recipe(speakers: int, words: Sequence[str], repetitions: int, seed: int) -> dict[str, Any]:
    return {"generator_version": GENERATOR_VERSION, "speakers": speakers, "words": list(words),
            "repetitions": repetitions, "seed": seed}


def _validate(speakers: int, words: Sequence[str], repetitions: int, seed: int, processes: int | None,
              task_timeout_seconds: float) -> None:
    def require_int(name: str, value: Any, minimum: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
            raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")

    require_int("speakers", speakers, 1)
    require_int("repetitions", repetitions, 1)
    require_int("seed", seed, 0)
    if processes is not None:
        require_int("processes", processes, 1)
    if isinstance(task_timeout_seconds, bool) or not isinstance(task_timeout_seconds, int | float) \
            or not task_timeout_seconds > 0:
        raise ValueError(f"task_timeout_seconds must be a number of seconds > 0, got {task_timeout_seconds!r}")
    if isinstance(words, str):
        raise ValueError(f"words must be a sequence of words, not the string {words!r} (split it first)")
    if len(words) == 0:
        raise ValueError("words is empty: name at least one word")
    for word in words:
        if not isinstance(word, str) or not WORD_PATTERN.match(word):
            raise ValueError(f"word {word!r}: words must be lowercase ASCII letters only (a-z)")
    repeated = sorted({word for word in words if list(words).count(word) > 1})
    if repeated:
        raise ValueError(f"words listed more than once: {', '.join(repeated)}")


def _holds_other_content(destination: Path) -> bool:
    """Whether publishing at ``destination`` would replace something that is not one of our corpora."""
    if not destination.exists():
        return False
    if not destination.is_dir():
        return True
    return any(destination.iterdir()) and not (destination / LEGACY_REPORT_NAME).is_file()


def synthesize_corpus(
    destination: str | Path,
    speakers: int = 100,
    words: Sequence[str] = ALL_WORDS,
    repetitions: int = 2,
    seed: int = 0,
    processes: int | None = None,
    overwrite: bool = False,
    progress: Callable[[int, int], None] | None = None,
    task_timeout_seconds: float = TASK_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Write a synthetic Speech Commands corpus at ``destination`` (atomically, with ``storage.publish``) and return
    its manifest, which holds the synthesis report.

    A complete corpus of the same recipe already there is returned untouched; a different one is an error unless
    ``overwrite``. ``progress(done, total)`` is called in this process as utterances finish. With more than one
    process, a speaker without a result after ``task_timeout_seconds`` fails the corpus (SynthesisWorkerError).
    """
    _validate(speakers, words, repetitions, seed, processes, task_timeout_seconds)
    speakers, repetitions, seed, words = int(speakers), int(repetitions), int(seed), tuple(words)  # JSON-able
    destination = Path(destination).expanduser().resolve()
    recipe = _recipe(speakers, words, repetitions, seed)
    # storage.publish replaces a directory without a manifest (an interrupted dataset); this one may be the user's.
    if storage.read_manifest(str(destination)) is None and not overwrite and _holds_other_content(destination):
        raise DatasetError(f"{destination}: exists and is not a complete synthetic corpus (no "
                           f"{storage.MANIFEST_NAME}); choose another destination or pass overwrite=True "
                           "(--overwrite) to replace it")

    roster = [make_speaker(seed, number, speaker_id) for number, speaker_id in enumerate(speaker_ids(seed, speakers))]
    voices = {speaker.voice for speaker in roster} | {Voice(ESPEAK_NG, "en-us")}  # espeak-ng also makes the babble
    plan = tuple(utterance_plan(words, repetitions))

    def write(staging_location: storage.Location) -> dict[str, Any]:
        require_voices(voices)
        staging = Path(staging_location.path)  # a local directory: the TTS engines write files
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="cloudburst-espeak-") as espeak_scratch:
            espeak_roots = {}
            for program in sorted({voice.engine for voice in voices} & {ESPEAK_NG, ESPEAK}):
                variants = {speaker.variant_name: speaker.variant for speaker in roster if speaker.engine == program}
                if program == ESPEAK_NG:
                    variants |= babble_variants(seed, BABBLE_TALKERS)
                espeak_roots[program] = make_espeak_root(Path(espeak_scratch) / program, variants, program)
                check_variants_are_used(espeak_roots[program], "en-us", next(iter(variants)), program)
            for directory in (*words, BACKGROUND_NOISE):
                (staging / directory).mkdir()
            speaker_jobs = [_SpeakerJob(speaker, plan, seed, staging, espeak_roots) for speaker in roster]
            noise_jobs = [_NoiseJob(name, seed, staging, espeak_roots) for name in BACKGROUND_SECONDS]
            # Slowest first (festival and RHVoice speakers, then the noises), so no long job starts last and idles
            # other cores.
            jobs = [job for job in speaker_jobs if job.speaker.engine in SLOW_ENGINES] + noise_jobs + \
                [job for job in speaker_jobs if job.speaker.engine not in SLOW_ENGINES]
            worker_count = min(processes or os.cpu_count() or 1, len(jobs))
            clips = _run_jobs(jobs, worker_count, len(plan) * speakers, progress, task_timeout_seconds)
        _write_lists(staging, clips)
        (staging / "README.txt").write_text(_readme(recipe))
        return _report(roster, clips, time.perf_counter() - started, voices, worker_count)

    manifest, created = storage.publish(str(destination), DATASET_KIND, recipe, write, overwrite=overwrite)
    if not created:
        log.info("%s: already complete, nothing to do", destination)
    return manifest


def _run_jobs(jobs: list[_SpeakerJob | _NoiseJob], processes: int, total: int,
              progress: Callable[[int, int], None] | None, task_timeout_seconds: float) -> list[str]:
    """Run every job (in worker processes unless one process), report progress; returns the clips' relative paths."""
    clips: list[str] = []
    next_log = 0.1

    def finished(number: int, written: list[str]) -> None:
        nonlocal next_log
        if number < 0:
            return  # background noise
        clips.extend(written)
        if progress is not None:
            progress(len(clips), total)
        if len(clips) / total >= next_log - 1e-9 or len(clips) == total:
            log.info("synthesized %d/%d utterances (%.0f %%)", len(clips), total, 100 * len(clips) / total)
            next_log = np.floor(len(clips) / total * 10 + 1e-9) / 10 + 0.1

    if processes == 1:
        for job in jobs:
            finished(*_do(job))
    else:
        _run_in_workers(jobs, processes, task_timeout_seconds, finished)
    return sorted(clips)


class _Worker(NamedTuple):
    process: multiprocessing.process.BaseProcess
    connection: Connection  # this end of the worker's pipe


def _run_in_workers(jobs: list[_SpeakerJob | _NoiseJob], processes: int, task_timeout_seconds: float,
                    finished: Callable[[int, list[str]], None]) -> None:
    """Run the jobs on ``processes`` spawned workers, one job per worker at a time, passing results to ``finished``.

    A worker that dies, or a job without a result after ``task_timeout_seconds``, raises SynthesisWorkerError
    naming the job's speaker; a job's own exception is raised here. Every worker has ended when this returns.
    """
    # spawn, not fork: a forked worker would inherit this process's signal handlers (after a Horovod run, ones
    # that ignore SIGTERM), its threads' held locks and its open sockets.
    context = multiprocessing.get_context("spawn")
    waiting = list(reversed(jobs))
    workers: list[_Worker] = []
    running: dict[_Worker, tuple[_SpeakerJob | _NoiseJob, float]] = {}  # worker → (its job, deadline)

    def hand_out(worker: _Worker) -> None:
        if waiting:
            job = waiting.pop()
            worker.connection.send(job)
            running[worker] = (job, time.monotonic() + task_timeout_seconds)

    try:
        for _ in range(processes):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve_jobs, args=(theirs,), name="cloudburst-synthesis", daemon=True)
            process.start()
            theirs.close()
            workers.append(_Worker(process, ours))
        for worker in workers:
            hand_out(worker)
        while running:
            nearest = min(deadline for _, deadline in running.values())
            wait([worker.connection for worker in running] + [worker.process.sentinel for worker in running],
                 timeout=max(0.0, nearest - time.monotonic()))
            for worker, (job, deadline) in list(running.items()):
                if worker.connection.poll():
                    try:
                        outcome, value = worker.connection.recv()
                    except EOFError:
                        raise _worker_died(worker, job) from None
                    del running[worker]
                    if outcome == "failed":
                        raise value
                    finished(*value)
                    hand_out(worker)
                elif not worker.process.is_alive():
                    raise _worker_died(worker, job)
                elif time.monotonic() >= deadline:
                    raise SynthesisWorkerError(
                        f"{_describe(job)}: no result after {task_timeout_seconds:g} s, so its synthesis worker "
                        f"(pid {worker.process.pid}) was stopped; is a TTS engine stuck?")
    finally:
        _stop_workers(workers, busy=set(running))


def _worker_died(worker: _Worker, job: _SpeakerJob | _NoiseJob) -> SynthesisWorkerError:
    worker.process.join(5)
    code = worker.process.exitcode
    how = f"exit code {code}"
    if code is not None and code < 0:
        try:
            how = f"killed by {Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    return SynthesisWorkerError(f"{_describe(job)}: its synthesis worker (pid {worker.process.pid}) died ({how}) "
                                "before finishing; SIGKILL is often the kernel's out-of-memory killer")


def _stop_workers(workers: list[_Worker], busy: set[_Worker]) -> None:
    """End every worker: idle ones leave when their pipe closes, busy (possibly stuck) ones are killed."""
    for worker in workers:
        worker.connection.close()
        if worker in busy:
            worker.process.kill()
    deadline = time.monotonic() + 5
    for worker in workers:
        worker.process.join(max(0.0, deadline - time.monotonic()))
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()
        worker.process.close()


def _write_lists(staging: Path, clips: list[str]) -> None:
    """validation_list.txt and testing_list.txt by Speech Commands' own rule (training is everything else)."""
    for split, name in (("validation", "validation_list.txt"), ("testing", "testing_list.txt")):
        chosen = [clip for clip in clips if which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE) == split]
        (staging / name).write_text("".join(f"{clip}\n" for clip in chosen))


def _report(roster: list[Speaker], clips: list[str], seconds: float, voices: set[Voice],
            processes: int) -> dict[str, Any]:
    """The manifest's content fields (the recipe, file list and creation time are storage.publish's)."""
    splits = {"training": 0, "validation": 0, "testing": 0}
    for clip in clips:
        splits[which_set(clip, VALIDATION_PERCENTAGE, TESTING_PERCENTAGE)] += 1
    engine_counts: dict[str, int] = {}
    family_counts: dict[str, int] = {}
    for speaker in roster:
        engine_counts[speaker.engine] = engine_counts.get(speaker.engine, 0) + 1
        family_counts[speaker.family] = family_counts.get(speaker.family, 0) + 1
    return {
        "speakers": len(roster),
        "utterances": len(clips),
        "seconds": round(seconds, 2),
        "utterances_per_second": round(len(clips) / seconds, 1),
        "processes": processes,
        "engines": dict(sorted(engine_counts.items())),
        "families": dict(sorted(family_counts.items())),
        "engine_versions": package_versions(voices),
        "splits": splits,
        "sample_rate": SAMPLE_RATE,
        "background_noise": {f"{name}.wav": seconds for name, seconds in BACKGROUND_SECONDS.items()},
        "speaker_voices": [_speaker_entry(speaker) for speaker in roster],
    }


def _speaker_entry(speaker: Speaker) -> dict[str, Any]:
    channel = speaker.channel
    return {"speaker": speaker.speaker_id, "family": speaker.family, "engine": speaker.engine,
            "voice": speaker.voice.name, "language": speaker.voice.language, "warp": speaker.warp,
            "room": None if speaker.room is None else {"rt60_seconds": speaker.room.rt60_seconds,
                                                       "direct_to_reverberant_db":
                                                           speaker.room.direct_to_reverberant_db},
            "channel": {"telephone": channel.telephone, "high_pass_hz": channel.high_pass_hz,
                        "low_pass_hz": channel.low_pass_hz,
                        "colour": [[bell.centre_hz, bell.gain_db, bell.q] for bell in channel.colour]}}


def speaker_families(corpus: dict[str, Any] | str | Path) -> dict[str, str]:
    """Speaker id → voice family (e.g. ``espeak-ng/de``, ``mbrola/us2``) of a synthetic corpus, given its manifest
    (what ``synthesize_corpus`` returns) or its directory."""
    if isinstance(corpus, dict):
        manifest, where = corpus, "the manifest"
    else:
        where = str(corpus)
        manifest = storage.require_manifest(where, DATASET_KIND)
    if "speaker_voices" not in manifest:
        raise DatasetError(f"{where}: no speaker_voices in its manifest: not a synthetic Speech Commands corpus")
    # Version 1 corpora recorded no family; theirs was always engine/voice.
    return {entry["speaker"]: entry.get("family") or f"{entry['engine']}/{entry['voice']}"
            for entry in manifest["speaker_voices"]}


def _readme(recipe: dict[str, Any]) -> str:
    return (
        "Synthetic Speech Commands corpus, generated offline by Cloudburst "
        "(training/speech/synthesis.py).\n"
        f"Recipe: {json.dumps(recipe, sort_keys=True)}\n"
        "Voices are TTS engines (espeak-ng, espeak, MBROLA, Pico, festival, flite, RHVoice) in many voice families, "
        "English and foreign-accented, with per-speaker variants, a vocal-tract warp, a room and a microphone/"
        "channel: distinguishable speakers, but far less varied than real people. The manifest's speaker_voices "
        "name each speaker's family.\n"
        f"Layout as Speech Commands: <word>/<speaker>_nohash_<n>.wav, {BACKGROUND_NOISE}/, validation_list.txt, "
        f"testing_list.txt; {storage.MANIFEST_NAME} (with the synthesis report) is written last.\n"
    )


# --- Command line --------------------------------------------------------------------------------------------


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

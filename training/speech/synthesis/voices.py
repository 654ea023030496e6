"""The voice catalogue and the respellings, as data: every engine's voices in groups (a speaker's family), the
rotation that deals them to speakers, and each Speech Commands word as a speaker of each language would write it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ESPEAK_NG, ESPEAK, MBROLA, PICO, FESTIVAL, FLITE, RHVOICE = (
    "espeak-ng", "espeak", "mbrola", "pico", "festival", "flite", "rhvoice")


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

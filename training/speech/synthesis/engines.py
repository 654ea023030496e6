"""The TTS engines: each one run as a subprocess (espeak-ng, espeak, MBROLA, pico, flite, festival) or in-process
(RHVoice, through ctypes), its output read back as samples; what is installed and in which package version."""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from training.speech.synthesis.acoustics import decode_wav
from training.speech.synthesis.voices import ESPEAK, ESPEAK_NG, FESTIVAL, FLITE, MBROLA, PICO, RHVOICE, Voice

ENGINE_PROGRAMS = {ESPEAK_NG: ("espeak-ng",), ESPEAK: ("espeak",), MBROLA: ("espeak-ng", "mbrola"),
                   PICO: ("pico2wave",), FESTIVAL: ("festival",), FLITE: ("flite",), RHVOICE: ()}
PROGRAM_PACKAGES = {"espeak-ng": "espeak-ng", "espeak": "espeak", "mbrola": "mbrola", "pico2wave": "libttspico-utils",
                    "festival": "festival", "flite": "flite"}
RHVOICE_LIBRARY, RHVOICE_PACKAGE = "libRHVoice.so.5", "librhvoice5"  # RHVoice runs in-process (class RHVoice)
SLOW_ENGINES = (FESTIVAL, RHVOICE)  # both load their voice first (festival: about 0.3 s; RHVoice: 0.15 s)
MBROLA_DATA, RHVOICE_VOICES, FESTIVAL_VOICES_DIR = (Path("/usr/share/mbrola"), Path("/usr/share/RHVoice/voices"),
                                                    Path("/usr/share/festival/voices"))


class EngineNotFoundError(FileNotFoundError):
    """A TTS engine or voice is missing; the message says which Debian package installs it."""


class EngineCrashedError(RuntimeError):
    """A TTS program was killed by a signal (e.g. a segmentation fault) rather than exiting with an error."""


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
        error = EngineCrashedError if result.returncode < 0 else RuntimeError
        raise error(f"{what}: {' '.join(command)} exited with {result.returncode}: "
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
    """Synthesize (text, duration stretch) requests in one festival process (its start-up dominates).

    festival's Italian diphone voices crash (SIGSEGV) on some questions and exclamations at some duration stretches
    (e.g. pc_diphone on "dog?" at 1.11): after a crash each request is said alone, and one that still crashes is
    said as a statement. Deterministic, so a corpus's recipe still makes the same clips."""
    try:
        return _festival_batch(voice, requests, f0_mean, scratch)
    except EngineCrashedError:
        if len(requests) > 1:
            alone = []
            for index, request in enumerate(requests):
                (scratch / f"alone-{index}").mkdir(exist_ok=True)
                alone += festival(voice, [request], f0_mean, scratch / f"alone-{index}")
            return alone
        text, stretch = requests[0]
        statement = text.rstrip("?!,.") + "."
        if statement == text:
            raise
        return _festival_batch(voice, [(statement, stretch)], f0_mean, scratch)


def _festival_batch(voice: Voice, requests: list[tuple[str, float]], f0_mean: float,
                    scratch: Path) -> list[tuple[int, np.ndarray]]:
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

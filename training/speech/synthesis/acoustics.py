"""An utterance's audio from the engine's output to a 1 s clip: decode, trim, the speaker's vocal-tract warp,
room and channel (training.speech.audio.acoustics), an offset in the window, room noise and a level."""

from __future__ import annotations

import io
import struct
import wave
from fractions import Fraction

import numpy as np
from scipy import signal

from training.speech.audio import acoustics
from training.speech.speech_commands import SAMPLE_RATE
from training.speech.synthesis.speakers import Speaker

CLIP_SAMPLES = SAMPLE_RATE  # 1 s
MAX_WORD_SAMPLES = int(0.95 * SAMPLE_RATE)  # longer words are sped up to fit, leaving room for an offset


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

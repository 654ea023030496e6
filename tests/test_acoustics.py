"""Room, microphone and channel simulation: measured decay times, band limits, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from training.speech.audio import acoustics
from training.speech.audio.acoustics import Channel, PeakingFilter, Room

RATE = 16_000


def band_energy_fraction(samples: np.ndarray, low_hz: float, high_hz: float) -> float:
    power = np.abs(np.fft.rfft(samples)) ** 2
    frequencies = np.fft.rfftfreq(len(samples), 1 / RATE)
    return float(power[(frequencies >= low_hz) & (frequencies < high_hz)].sum() / power.sum())


def test_reverberation_time_of_an_exact_exponential_decay():
    t = np.arange(RATE) / RATE
    decay = np.exp(-np.log(1000) * t / 0.5)  # energy falls 60 dB in 0.5 s
    assert acoustics.reverberation_time(decay, RATE) == pytest.approx(0.5, rel=0.02)


@pytest.mark.parametrize("rt60", [0.1, 0.3, 0.6, 0.9])
@pytest.mark.parametrize("direct_to_reverberant_db", [-2.0, 0.0])
def test_a_room_impulse_response_decays_in_the_asked_rt60(rt60, direct_to_reverberant_db):
    # (A loud direct sound would put the -5 dB point on the direct path's step: T20 then measures early decay.)
    measured = []
    for seed in range(10):
        response = acoustics.room_impulse_response(Room(rt60, direct_to_reverberant_db),
                                                   np.random.default_rng(seed), RATE)
        assert response[0] == 1.0  # the direct path
        measured.append(acoustics.reverberation_time(response, RATE))
    assert np.mean(measured) == pytest.approx(rt60, rel=0.05)
    assert max(abs(value / rt60 - 1) for value in measured) < 0.25  # each noise realisation


@pytest.mark.parametrize("direct_to_reverberant_db", [-2.0, 6.0, 12.0])
def test_a_room_impulse_response_has_the_asked_direct_to_reverberant_ratio(direct_to_reverberant_db):
    response = acoustics.room_impulse_response(Room(0.4, direct_to_reverberant_db), np.random.default_rng(3), RATE)
    measured = 10 * np.log10(response[0] ** 2 / np.sum(response[1:] ** 2))
    assert measured == pytest.approx(direct_to_reverberant_db, abs=0.1)


def test_reverberation_lengthens_a_click_by_the_decay():
    click = np.zeros(RATE // 10)
    click[0] = 1.0
    wet = acoustics.reverberate(click, Room(0.5, 0.0), np.random.default_rng(1), RATE)
    assert len(wet) == len(click) + int(0.5 * RATE) - 1
    assert np.sqrt(np.mean(wet[RATE // 10 : RATE // 5] ** 2)) > 1e-3  # still ringing 100–200 ms later


def test_the_telephone_channel_removes_the_energy_above_4_khz():
    rng = np.random.default_rng(0)
    white = rng.standard_normal(RATE)
    assert band_energy_fraction(white, 4000, 8001) > 0.45
    phone = acoustics.apply_channel(white * 0.3, Channel(telephone=True), RATE)
    assert len(phone) == len(white)
    assert band_energy_fraction(phone, 4000, 8001) < 1e-4
    assert band_energy_fraction(phone, 0, 250) < 0.01  # and below 300 Hz
    assert band_energy_fraction(phone, 300, 3400) > 0.95


def test_band_limits_and_colour_shape_the_spectrum():
    white = np.random.default_rng(0).standard_normal(RATE)
    low_passed = acoustics.apply_channel(white, Channel(low_pass_hz=4000.0), RATE)
    assert band_energy_fraction(low_passed, 5000, 8001) < 0.01
    high_passed = acoustics.apply_channel(white, Channel(high_pass_hz=300.0), RATE)
    assert band_energy_fraction(high_passed, 0, 100) < 0.1 * band_energy_fraction(white, 0, 100)
    boosted = acoustics.apply_channel(white, Channel(colour=(PeakingFilter(1000.0, 6.0, 1.0),)), RATE)
    gain_db = 10 * np.log10(band_energy_fraction(boosted, 900, 1100) / band_energy_fraction(white, 900, 1100)
                            * np.sum(boosted**2) / np.sum(white**2))
    assert gain_db == pytest.approx(6.0, abs=0.7)


def test_mu_law_keeps_the_signal_within_a_quantisation_step():
    ramp = np.linspace(-1, 1, 1001)
    assert np.max(np.abs(acoustics.mu_law_round_trip(ramp) - ramp)) < 0.035
    assert len(np.unique(acoustics.mu_law_round_trip(ramp))) <= 256


def test_drawn_conditions_are_deterministic_and_within_their_ranges():
    def draw(seed: int):
        rng = np.random.default_rng(seed)
        room, channel = acoustics.random_room(rng), acoustics.random_channel(rng, telephone=seed % 3 == 0)
        varied = (acoustics.vary_room(room, rng) if room else None, acoustics.vary_channel(channel, rng))
        signal_in = rng.standard_normal(RATE // 4)
        out = acoustics.apply_channel(acoustics.reverberate(signal_in, room, rng, RATE) if room else signal_in,
                                      channel, RATE)
        return room, channel, varied, out

    for seed in range(40):
        first, second = draw(seed), draw(seed)
        assert first[:3] == second[:3]
        assert np.array_equal(first[3], second[3])
    rooms = [acoustics.random_room(np.random.default_rng(seed)) for seed in range(400)]
    assert 0.15 < sum(room is None for room in rooms) / len(rooms) < 0.35
    assert all(0.1 <= room.rt60_seconds <= 0.9 for room in rooms if room)
    channels = [acoustics.random_channel(np.random.default_rng(seed), telephone=seed % 2 == 0) for seed in range(400)]
    assert [channel.telephone for channel in channels] == [seed % 2 == 0 for seed in range(400)]
    assert not any(channel.low_pass_hz for channel in channels if channel.telephone)
    wide_band = [channel for channel in channels if not channel.telephone]
    assert 0.25 < sum(channel.low_pass_hz is not None for channel in wide_band) / len(wide_band) < 0.45
    assert all(1 <= len(channel.colour) <= 3 and all(abs(bell.gain_db) <= 5 for bell in channel.colour)
               for channel in channels)

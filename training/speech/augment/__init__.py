"""Augmentation of speech: waveforms (offline copies) and feature maps (online, per batch)."""

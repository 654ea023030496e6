"""Elastic deformation's defaults and bounds, declared once. Standard library only: the MNIST workload's settings
(read on the Airflow side) take them, and the NumPy and TensorFlow implementations (elastic.py, elastic_online.py)
import them from here."""

from __future__ import annotations

DEFAULT_ALPHA = 34.0  # displacement scale in pixels (Simard et al. 2003)
DEFAULT_SIGMA = 4.0  # the Gaussian's standard deviation in pixels (Simard et al.: 4)

# On the fly only: the random rotation, scaling and shift added to the same displacement field.
MAX_ROTATION_DEGREES = 180.0
MAX_SCALE_JITTER = 0.5  # beyond ±50 % a digit leaves the 28 × 28 frame or shrinks to a few pixels
# MNIST's digits sit in a 20 × 20 box centred in 28 × 28 (4 pixels to each edge): shifted by 8, a fifth of the box
# is already outside the frame.
MAX_SHIFT_PIXELS = 8.0

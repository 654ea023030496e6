"""Evaluation as small pure functions (labels and predictions in, numbers out) plus the figures people look at."""

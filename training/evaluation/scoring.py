"""From embeddings to verification scores: enrollment, cosine scoring, score normalisation, fusion and calibration.

Pure NumPy functions (scikit-learn's ``LogisticRegression`` for fusion), in the order a verification system uses
them: a speaker's model is the mean of its L2-normalised enrollment embeddings; a trial's raw score is the cosine
between a model and a test embedding; S-norm / AS-norm (adaptive, top-k cohort) normalise each score against a
cohort of training speakers; logistic regression, trained on development trials only, fuses several systems' scores
into one calibrated log-likelihood ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def l2_normalised(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    vectors = np.asarray(vectors, np.float64)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def enroll(embeddings: np.ndarray) -> np.ndarray:
    """A speaker model: the L2-normalised mean of L2-normalised enrollment embeddings (n, d) → (d,)."""
    embeddings = np.asarray(embeddings)
    if embeddings.ndim != 2 or len(embeddings) == 0:
        raise ValueError(f"enrollment needs at least one embedding of shape (n, d), got {embeddings.shape}")
    return l2_normalised(l2_normalised(embeddings).mean(axis=0))


def cosine_scores(models: np.ndarray, tests: np.ndarray, model_of_trial: np.ndarray,
                  test_of_trial: np.ndarray) -> np.ndarray:
    """The cosine of each trial's model and test embedding; trials name rows of ``models`` and ``tests``."""
    models, tests = l2_normalised(models), l2_normalised(tests)
    return np.einsum("ij,ij->i", models[np.asarray(model_of_trial)], tests[np.asarray(test_of_trial)])


def cohort_statistics(embeddings: np.ndarray, cohort: np.ndarray, top: int | None = None) -> tuple[np.ndarray,
                                                                                                   np.ndarray]:
    """(mean, standard deviation) of each embedding's cosines with the cohort, over all of it or over the ``top``
    most similar cohort members only (adaptive normalisation)."""
    similarity = l2_normalised(embeddings) @ l2_normalised(cohort).T
    if top is not None:
        if not 1 <= top <= similarity.shape[1]:
            raise ValueError(f"top must be in [1, {similarity.shape[1]}] (the cohort's size), got {top}")
        similarity = -np.partition(-similarity, top - 1, axis=1)[:, :top]
    return similarity.mean(axis=1), np.maximum(similarity.std(axis=1), 1e-6)


def symmetric_normalisation(scores: np.ndarray, model_statistics: tuple[np.ndarray, np.ndarray],
                            test_statistics: tuple[np.ndarray, np.ndarray], model_of_trial: np.ndarray,
                            test_of_trial: np.ndarray) -> np.ndarray:
    """S-norm: the mean of the score z-normalised by the model's and by the test's cohort statistics."""
    model_mean, model_std = (part[np.asarray(model_of_trial)] for part in model_statistics)
    test_mean, test_std = (part[np.asarray(test_of_trial)] for part in test_statistics)
    return 0.5 * ((scores - model_mean) / model_std + (scores - test_mean) / test_std)


def logit(probability: float) -> float:
    return float(np.log(probability / (1 - probability)))


@dataclass(frozen=True)
class LinearFusion:
    """LLR = offset + Σ weights · scores: a calibrated fusion of several systems (one system: its calibration)."""

    weights: tuple[float, ...]
    offset: float
    prior: float  # the target prior the fusion was trained at

    def llr(self, scores: np.ndarray) -> np.ndarray:
        scores = np.asarray(scores, np.float64).reshape(len(scores), -1)
        if scores.shape[1] != len(self.weights):
            raise ValueError(f"{scores.shape[1]} score columns for a fusion of {len(self.weights)} systems")
        return scores @ np.asarray(self.weights) + self.offset

    def to_mapping(self) -> dict[str, object]:
        return {"weights": list(self.weights), "offset": self.offset, "prior": self.prior}


def train_fusion(scores: np.ndarray, labels: np.ndarray, prior: float = 0.5,
                 regularisation: float = 1e-4) -> LinearFusion:
    """Prior-weighted linear logistic regression (as in the BOSARIS toolkit) on development trials: targets and
    non-targets weigh ``prior`` and ``1 − prior`` in all, so the output is a log-likelihood ratio once logit(prior)
    is taken off — calibrated for any operating point, not only the training prior."""
    from sklearn.linear_model import LogisticRegression

    scores = np.asarray(scores, np.float64).reshape(len(scores), -1)
    labels = np.asarray(labels)
    targets, non_targets = int(np.sum(labels == 1)), int(np.sum(labels == 0))
    if targets == 0 or non_targets == 0 or targets + non_targets != len(labels):
        raise ValueError("fusion needs target (1) and non-target (0) development trials, and labels of 0 or 1 only")
    if not 0 < prior < 1:
        raise ValueError(f"prior must be in (0, 1), got {prior}")
    sample_weight = np.where(labels == 1, prior / targets, (1 - prior) / non_targets) * len(labels)
    model = LogisticRegression(C=1 / regularisation, max_iter=1000)
    model.fit(scores, labels, sample_weight=sample_weight)
    return LinearFusion(tuple(float(weight) for weight in model.coef_[0]),
                        float(model.intercept_[0]) - logit(prior), prior)


def equal_weight_fusion(development_scores: np.ndarray) -> LinearFusion:
    """The baseline: every system's scores z-normalised on the development trials, then averaged (uncalibrated)."""
    scores = np.asarray(development_scores, np.float64).reshape(len(development_scores), -1)
    means, stds = scores.mean(axis=0), np.maximum(scores.std(axis=0), 1e-12)
    systems = scores.shape[1]
    weights = tuple(float(1 / (systems * std)) for std in stds)
    return LinearFusion(weights, float(-np.sum(means / stds) / systems), 0.5)

"""Write the sample CSV the package ships (cloudburst_csv_classifier/data/wine.csv): scikit-learn's bundled copy of
the UCI Wine data set (Aeberhard & Forina; 178 wines from three cultivars, 13 chemical measurements each), so the
example runs offline. Deterministic: the same scikit-learn data gives the same bytes.

    .venv/training/bin/python examples/csv_classifier/make_sample_csv.py
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent / "cloudburst_csv_classifier" / "data" / "wine.csv"


def sample_csv() -> str:
    from sklearn.datasets import load_wine

    wine = load_wine()
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow([*wine.feature_names, "class"])
    for features, target in zip(wine.data, wine.target, strict=True):
        # Python's shortest exact form of each float, and the cultivar's name as the label
        writer.writerow([*map(repr, features.tolist()), wine.target_names[target]])
    return text.getvalue()


if __name__ == "__main__":
    SAMPLE.write_text(sample_csv())
    print(f"wrote {SAMPLE}")

"""A user's CSV file → checked arrays and a deterministic train/validation/test split.

Each problem is one line naming the file, and the line and column where it can be fixed. Pure functions of the
file's bytes and a seed (NumPy and the standard library only).
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass

import numpy as np

from training.local_files import read_regular_file
from training.storage import DatasetError

MAX_CSV_BYTES = 256 * 1024 * 1024  # read whole into memory: a table for a small dense model, not a data lake
MAX_CLASSES = 128  # the shared row format's int8 label
VALIDATION_SHARE = 0.2  # of each class
TEST_SHARE = 0.2
# One row of each class in each split, and more in training than in either of the others.
MIN_ROWS_PER_CLASS = 5
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Table:
    """The CSV's rows: features (rows, columns) float32, labels (rows,) as indices into ``class_names``."""

    feature_names: tuple[str, ...]
    class_names: tuple[str, ...]
    features: np.ndarray
    labels: np.ndarray


def _class_order(values: set[str]) -> list[str]:
    """Class names sorted as numbers when they all are (2 before 10), else as text."""
    try:
        return sorted(values, key=float)
    except ValueError:
        return sorted(values)


def read_csv(path: str) -> bytes:
    """The file's bytes: a regular file (never a FIFO or a device: they would hang or never end), size-capped."""
    return read_regular_file(path, MAX_CSV_BYTES, "CSV file")


def parse_table(raw: bytes, path: str, label_column: str) -> Table:
    """Parse and check a CSV file's bytes (a header row, numeric feature columns, ``label_column``); DatasetError
    naming ``path`` on the first problem."""
    try:
        text = raw.decode("utf-8-sig")  # a spreadsheet's byte-order mark is not part of the first column's name
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: not UTF-8 text (byte {error.start}); save the CSV as UTF-8") from None
    rows = csv.reader(io.StringIO(text, newline=""))
    header = [name.strip() for name in next(rows, [])]
    if not any(header):
        raise DatasetError(f"{path}: empty; a CSV needs a header row naming its columns, then one row per example")
    if len(set(header)) != len(header):
        duplicate = next(name for name in header if header.count(name) > 1)
        raise DatasetError(f"{path}: column {duplicate!r} appears twice in the header")
    if label_column not in header:
        shown_columns = ", ".join(repr(name) for name in header[:8]) + (", …" if len(header) > 8 else "")
        raise DatasetError(f"{path}: no label column {label_column!r} (the header has {shown_columns}); set "
                           "label_column to the column that holds the classes")
    if len(header) < 2:
        raise DatasetError(f"{path}: only the label column {label_column!r}; a classifier needs feature columns")
    label_at = header.index(label_column)
    feature_names = tuple(name for name in header if name != label_column)
    features, labels = [], []
    for line, row in enumerate(rows, start=2):
        if not row:
            continue  # a blank line, e.g. at the end
        if len(row) != len(header):
            raise DatasetError(f"{path}, line {line}: {len(row)} fields, the header has {len(header)}")
        label = row[label_at].strip()
        if not label:
            raise DatasetError(f"{path}, line {line}: the label column {label_column!r} is empty")
        values = [_number(path, line, name, text) for name, text in zip(header, row, strict=True)
                  if name != label_column]
        features.append(values)
        labels.append(label)
    if not labels:
        raise DatasetError(f"{path}: a header and no rows")
    class_names = _class_order(set(labels))
    if len(class_names) < 2:
        raise DatasetError(f"{path}: every row has the label {class_names[0]!r}; a classifier needs two classes "
                           "or more")
    if len(class_names) > MAX_CLASSES:
        raise DatasetError(f"{path}: {len(class_names)} distinct labels in {label_column!r}, more than the "
                           f"{MAX_CLASSES} classes this workload takes (is it the right label column?)")
    index = {name: position for position, name in enumerate(class_names)}
    label_array = np.array([index[label] for label in labels], np.int8)
    counts = np.bincount(label_array, minlength=len(class_names))
    if counts.min() < MIN_ROWS_PER_CLASS:
        scarce = class_names[int(counts.argmin())]
        raise DatasetError(f"{path}: class {scarce!r} has {counts.min()} row(s); every class needs at least "
                           f"{MIN_ROWS_PER_CLASS} (some for each of train, validation and test)")
    return Table(feature_names, tuple(class_names), np.array(features, np.float32), label_array)


def _number(path: str, line: int, column: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DatasetError(f"{path}, line {line}, column {column!r}: {text[:40]!r} is not a number (feature "
                           "columns must be numeric; encode categories as numbers or drop the column)") from None
    if not math.isfinite(value) or abs(value) > np.finfo(np.float32).max:
        raise DatasetError(f"{path}, line {line}, column {column!r}: {text[:40]!r} is not a finite float32; "
                           "fill or drop missing values before ingesting")
    return value


def split_rows(labels: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Row numbers of each split, stratified: each class's rows shuffled with ``seed``, then cut 60/20/20 (at least
    one row of each class in validation and test); each split in file order."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {split: [] for split in SPLITS}
    for label in range(int(labels.max()) + 1):
        rows = rng.permutation(np.flatnonzero(labels == label))
        validation = max(1, round(len(rows) * VALIDATION_SHARE))
        test = max(1, round(len(rows) * TEST_SHARE))
        parts["validation"].append(rows[:validation])
        parts["test"].append(rows[validation:validation + test])
        parts["train"].append(rows[validation + test:])
    return {split: np.sort(np.concatenate(chosen)) for split, chosen in parts.items()}

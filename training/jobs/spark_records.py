"""What every Spark job that writes a dataset shares: the Spark schema of the index/copy/label/image rows
(training.datasets.image_records), Parquet writing with stable part names, and per-split statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from training import storage

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

SPARK_IMAGE_SCHEMA = "index long, copy short, label byte, image binary"  # up to 128 classes (MNIST)


def spark_label_type(num_classes: int | None) -> str:
    """Spark's name for image_records.label_type: byte up to 128 classes, short beyond."""
    from training.datasets.image_records import label_type

    return "short" if label_type(num_classes).bit_width == 16 else "byte"


def spark_image_schema(num_classes: int | None) -> str:
    return f"index long, copy short, label {spark_label_type(num_classes)}, image binary"


def write_parquet(frame: DataFrame, staging: storage.Location, name: str) -> None:
    """Write a DataFrame below the staging area, then give the part files stable names."""
    frame.write.mode("error").parquet(storage.join(staging.uri, name))
    normalise_part_names(staging, name)


def normalise_part_names(staging: storage.Location, name: str) -> None:
    """Spark names parts ``part-00003-<uuid>-c000…``; keep the task number only, so re-runs publish the same file
names (and, by storage.file_digest, the same content ids)."""
    directory = f"{staging.path}/{name}"
    for path in staging.fs.ls(directory, detail=False):
        base = path.rsplit("/", 1)[1]
        if base.startswith("part-") and base.endswith(".parquet"):
            staging.fs.mv(path, f"{directory}/part-{base.split('-')[1]}.parquet")
        elif base.startswith(("_", ".")):
            staging.fs.rm(path)


def split_statistics(frame: DataFrame, num_classes: int) -> dict[str, Any]:
    """Rows and the class histogram (index = label) of one split."""
    histogram = [0] * num_classes
    for row in frame.groupBy("label").count().collect():
        histogram[int(row["label"])] = int(row["count"])
    return {"rows": sum(histogram), "class_histogram": histogram}

"""Each workload's training step against this machine's own peak, measured side by side in one run.

For every model the strategies train (MNIST's CNN as the demo and the full preset train it, the keyword spotter,
speaker models A and B), with each workload's default batch size, optimizer and loss:
  FLOP per example   the forward pass as TensorFlow's profiler counts it, plus what it cannot see: the LSTM's
                     matrix products run inside a while loop, counted by hand (2 · 4u(d + u) per step and
                     direction); a training step is taken as 3 × the forward pass (forward, and two products per
                     layer backward)
  step samples/s     the training function Keras' fit calls every step (what Horovod and the averaging workers
                     run), fed one batch already in memory: the model alone
  fed samples/s      the same step fed by the strategies' input pipeline (shuffle, batch, the workload's online
                     augmentation): what a 1 × 1 run gets
  of peak            step GFLOP/s over TensorFlow's own 2048² matrix product on the same threads, float32 and
                     bfloat16 (bfloat16 only where the CPU has it: AMX or AVX512-BF16, read from /proc/cpuinfo)
Then where the slowest model's step goes, from TensorFlow's profiler: op time by kind (LSTM recurrence,
convolutions, normalisation, concatenation and slicing, matrix products, the optimizer, elementwise), the
executor's time between ops, and the Python side of each step.

Each rate is the median of --repeats timed windows of at least --window-seconds each, after warm-up steps that
trace and compile. Results are saved as JSON under var/bench/roofline/.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from results import key, publish_run, recorded_as, table

from training import REPO_ROOT

OUT = REPO_ROOT / "var" / "bench" / "roofline"
PEAK_MATRIX = 2048
# Speaker models are classifiers of the demo's training speakers (make demo-sv: 176 of 300); the head's size moves
# their FLOP by under 1 %.
DEMO_SPEAKER_CLASSES = 176
TRAINING_OVER_FORWARD = 3
RUNS = {"bench-roofline": ("make bench-roofline", [])}


@dataclass
class Contender:
    label: str
    workload: str
    settings: dict[str, Any] = field(default_factory=dict)


CONTENDERS = (
    Contender("MNIST CNN (demo)", "mnist_elastic_cnn"),
    Contender("MNIST CNN (full preset)", "mnist_elastic_cnn", {"preset": "full"}),
    Contender("keyword spotter", "kws_densenet_bilstm"),
    Contender("speaker model A", "speaker_verification", {"embedding_model": "model_a", "features": "log_mel"}),
    Contender("speaker model B", "speaker_verification", {"embedding_model": "model_b", "features": "mfcc"}),
)


def run_spec(contender: Contender) -> Any:
    from training.config import RunSpec, preset_values

    settings = dict(contender.settings)
    preset = settings.pop("preset", "")
    values = {**(preset_values(contender.workload, preset) if preset else {}), **settings}
    return RunSpec.from_json({"workload": contender.workload, **values})


def model_parts(spec: Any) -> tuple[Any, Any, Any, tuple[int, ...], str]:
    """(model builder, loss, online augmentation or None, one example's stored shape, its stored dtype) as the
    workload trains them, without its data: the class counts are the demos'."""
    import tensorflow as tf

    if spec.workload == "mnist_elastic_cnn":
        from training.workloads.mnist_elastic_cnn.trainable import trainable

        workload = trainable(spec)
        return (workload.build_model, tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                workload.augment_batch, (28, 28, 1), "uint8")
    from training.speech.audio.features import feature_shape

    shape = feature_shape(spec.features)
    if spec.workload == "kws_densenet_bilstm":
        from training.speech.augment.spectrogram import make_augmenter, parse_augmentations
        from training.workloads.kws_densenet_bilstm.model import densenet_bilstm

        return (lambda: densenet_bilstm(shape, spec.kws_task),
                tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                make_augmenter(parse_augmentations(spec.online_augmentation), spec.features), shape, "float16")
    from training.workloads.speaker_verification.angular_margin import AdditiveAngularMarginLoss
    from training.workloads.speaker_verification.speaker_embedding import densenet_bilstm_embedder, tdnn_embedder

    build = densenet_bilstm_embedder if spec.embedding_model == "model_a" else tdnn_embedder
    return (lambda: build(shape, num_speakers=DEMO_SPEAKER_CLASSES), AdditiveAngularMarginLoss(), None, shape,
            "float16")


def forward_flop(model: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    """(TensorFlow's count of one example's forward pass, the LSTM products it misses, counted by hand)."""
    import tensorflow as tf

    concrete = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec((1, *shape), tf.float32))
    options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
    options["output"] = "none"
    counted = tf.compat.v1.profiler.profile(graph=concrete.graph, options=options).total_float_ops
    by_hand = 0
    for layer in model.layers:  # a Bidirectional wrapper's directions were never called on their own
        directions = [layer.forward_layer, layer.backward_layer] if hasattr(layer, "forward_layer") else [layer]
        steps, inputs = layer.input_shape[1:3] if len(layer.input_shape) == 3 else (0, 0)
        for lstm in directions:
            if isinstance(lstm, tf.keras.layers.LSTM):
                by_hand += steps * 2 * 4 * lstm.units * (inputs + lstm.units)
    return int(counted), by_hand


def synthetic_examples(shape: tuple[int, ...], dtype: str, count: int, classes: int) -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    if dtype == "uint8":
        examples = rng.integers(0, 256, (count, *shape), dtype=np.uint8)
    else:
        examples = rng.standard_normal((count, *shape)).astype(dtype)
    return examples, rng.integers(0, classes, count).astype(np.int32)


def timed_rate(step: Any, batch_size: int, repeats: int, window_seconds: float) -> float:
    """Median samples/s over ``repeats`` windows of whole steps lasting at least ``window_seconds``."""
    rates = []
    for _ in range(repeats):
        steps, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < window_seconds:
            step()
            steps += 1
        rates.append(steps * batch_size / elapsed)
    return statistics.median(rates)


def matmul_peak(dtype: str, repeats: int, window_seconds: float) -> float:
    """GFLOP/s of TensorFlow's own square matrix product, the same threads as the models."""
    import tensorflow as tf

    left = tf.random.normal((PEAK_MATRIX, PEAK_MATRIX), dtype=tf.float32)
    left, right = tf.cast(left, dtype), tf.cast(tf.transpose(left), dtype)
    product = tf.function(lambda: tf.reduce_sum(tf.cast(tf.linalg.matmul(left, right)[:1, :1], tf.float32)))
    product()
    rate = timed_rate(lambda: product().numpy(), 1, repeats, window_seconds)
    return rate * 2 * PEAK_MATRIX**3 / 1e9


def measure(contender: Contender, precision: str, repeats: int, window_seconds: float,
            profile_dir: str | None = None) -> dict[str, Any]:
    import tensorflow as tf

    from training.models.optimizers import make_optimizer
    from training.models.precision import FLOAT32, built_under, float32_outputs
    from training.strategies.input_pipeline import training_dataset

    spec = run_spec(contender)
    tf.keras.utils.set_random_seed(spec.seed)
    build, loss, augment, shape, dtype = model_parts(spec)
    counted, by_hand = forward_flop(built_under(FLOAT32, build)(), shape)  # FLOP are counted in float32
    model = built_under(precision, build)()
    if precision != FLOAT32:
        loss = float32_outputs(lambda: loss)()
    model.compile(optimizer=make_optimizer(spec.worker_optimizer, spec.learning_rate), loss=loss,
                  metrics=["accuracy"])
    batch = spec.batch_size_per_worker
    classes = int(model.output_shape[-1])
    examples, labels = synthetic_examples(shape, dtype, batch * 40, classes)
    train_function = model.make_train_function()

    from training.strategies.evaluation_clock import model_inputs

    one_batch = iter(tf.data.Dataset.from_tensors((model_inputs(examples[:batch]), labels[:batch])).repeat())
    for _ in range(3):
        train_function(one_batch)
    step_rate = timed_rate(lambda: train_function(one_batch), batch, repeats, window_seconds)
    fed = iter(training_dataset(examples, labels, batch, seed=spec.seed, augment=augment,
                                augment_seed=(spec.seed, 0)))
    for _ in range(3):
        train_function(fed)
    fed_rate = timed_rate(lambda: train_function(fed), batch, repeats, window_seconds)
    result = {
        "label": contender.label, "workload": contender.workload, "settings": contender.settings,
        "precision": precision,
        "parameters": int(model.count_params()), "batch": batch,
        "forward_flop_counted": counted, "forward_flop_by_hand": by_hand,
        "training_flop_per_example": TRAINING_OVER_FORWARD * (counted + by_hand),
        "step_samples_per_second": step_rate, "fed_samples_per_second": fed_rate,
    }
    if profile_dir:
        result["profile"] = profile_step(train_function, one_batch, profile_dir)
    return result


# Op kinds of the profile, first match wins: the node's name (its layer) or the op's type.
OP_KINDS = (
    ("LSTM recurrence", re.compile(r"while", re.IGNORECASE), None),
    ("optimizer", re.compile(r"(^|/)(Adam|Adagrad|SGD)(/|$)|ResourceApply"), None),
    ("normalisation", None, re.compile(r"BatchNorm|LayerNorm|Moments|SquaredDifference|Rsqrt")),
    ("convolutions", None, re.compile(r"Conv|Pool")),
    ("concatenation and slicing", None, re.compile(r"Concat|Slice|Split|Pack|Unpack|Transpose")),
    ("matrix products", None, re.compile(r"MatMul|BatchMatMul")),
)


def op_kind(node: str, op: str) -> str:
    for kind, by_node, by_op in OP_KINDS:
        if (by_node and by_node.search(node)) or (by_op and by_op.search(op)):
            return kind
    return "elementwise and other"


def profile_step(train_function: Any, batches: Any, directory: str, steps: int = 10) -> dict[str, Any]:
    """Where ``steps`` training steps go, from TensorFlow's profiler (host trace, XPlane)."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    tf.profiler.experimental.start(directory)
    started = time.perf_counter()
    for _ in range(steps):
        train_function(batches)
    wall = time.perf_counter() - started
    tf.profiler.experimental.stop()
    space = xplane_pb2.XSpace()
    with open(sorted(glob.glob(f"{directory}/**/*.xplane.pb", recursive=True))[-1], "rb") as trace:
        space.ParseFromString(trace.read())
    kinds: collections.Counter[str] = collections.Counter()
    executor = function_runs = 0
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                seconds = event.duration_ps / 1e12
                if name == "ExecutorState::Process":
                    executor += seconds
                elif name == "KernelAndDeviceFunc::Run":
                    function_runs += seconds
                elif ":" in name and not name.startswith(("Eager", "ExecutorState")):
                    node, op = name.rsplit(":", 1)
                    kinds[op_kind(node, op)] += seconds
    op_seconds = sum(kinds.values())
    return {
        "steps": steps, "wall_seconds": wall,
        "op_seconds_by_kind": dict(kinds.most_common()),
        "executor_between_ops_seconds": max(executor - op_seconds, 0.0),
        "python_per_step_seconds": max(wall - function_runs, 0.0) / steps,
        "function_seconds_per_step": function_runs / steps,
    }


def print_table(results: list[dict[str, Any]], peaks: dict[str, float]) -> None:
    print(f"\nthis machine, {os.cpu_count()} cores, same threads: fp32 matmul {peaks['float32']:.0f} GFLOP/s"
          + (f", bf16 {peaks['bfloat16']:.0f} GFLOP/s" if "bfloat16" in peaks else ", no bf16 hardware"))
    header = (f"{'model':26} {'precision':>14} {'params':>8} {'MFLOP/ex':>9} {'batch':>5} {'step/s':>8} {'fed/s':>8} "
              f"{'GFLOP/s':>8} "
              f"{'of fp32':>7} {'of bf16':>7}")
    print(header)
    print("-" * len(header))
    for row in results:
        gflops = row["step_samples_per_second"] * row["training_flop_per_example"] / 1e9
        bf16 = f"{gflops / peaks['bfloat16']:7.0%}" if "bfloat16" in peaks else f"{'-':>7}"
        print(f"{row['label']:26} {row['precision']:>14} {row['parameters']:8,} "
              f"{row['training_flop_per_example'] / 1e6:9.1f} "
              f"{row['batch']:5} {row['step_samples_per_second']:8,.0f} {row['fed_samples_per_second']:8,.0f} "
              f"{gflops:8.1f} {gflops / peaks['float32']:7.0%} {bf16}")
    by_hand = [row for row in results if row["forward_flop_by_hand"] and row["precision"] == "float32"]
    print("MFLOP/ex: a training step per example, 3 × the forward pass" + ("" if not by_hand else
          "; LSTM products counted by hand: " + ", ".join(f"{row['label']} {row['forward_flop_by_hand'] / 1e6:.1f} of "
                      f"{(row['forward_flop_by_hand'] + row['forward_flop_counted']) / 1e6:.1f} MFLOP forward"
                                                          for row in by_hand)))
    for row in results:
        if row["precision"] != "float32":
            base = next(other for other in results
                        if other["label"] == row["label"] and other["precision"] == "float32")
            step = row["step_samples_per_second"] / base["step_samples_per_second"]
            fed = row["fed_samples_per_second"] / base["fed_samples_per_second"]
            print(f"{row['label']}: {row['precision']} step {step:.2f}× float32's, fed {fed:.2f}×")


def print_profile(row: dict[str, Any]) -> None:
    profile = row["profile"]
    steps = profile["steps"]
    threads = sum(profile["op_seconds_by_kind"].values()) + profile["executor_between_ops_seconds"]
    print(f"\nwhere {row['label']}'s step goes ({steps} steps profiled, {profile['wall_seconds'] / steps * 1e3:.0f} "
          f"ms a step under the profiler; thread time summed over TensorFlow's threads):")
    for kind, seconds in profile["op_seconds_by_kind"].items():
        print(f"  {kind:28} {seconds / steps * 1e3:7.1f} ms  {seconds / threads:5.1%}")
    between = profile["executor_between_ops_seconds"]
    pipeline_ms = (row["batch"] / row["fed_samples_per_second"] - row["batch"] / row["step_samples_per_second"]) * 1e3
    print(f"  {'executor, between ops':28} {between / steps * 1e3:7.1f} ms  {between / threads:5.1%}")
    print(f"  Python, outside the step function: {profile['python_per_step_seconds'] * 1e3:.1f} ms a step; "
          f"input pipeline: {pipeline_ms:.1f} "
          "ms a step more when fed by it")


def result_tables(results: list[dict[str, Any]], peaks: dict[str, float], threads: int,
                  profiled: dict[str, Any] | None = None) -> tuple[dict, dict]:
    """(values, tables) for docs/results from ``measure``'s rows. values: threads, peaks_gflops (float32 and, with
    the hardware, bfloat16); models per model (``key`` of its label: mnist_cnn_demo, keyword_spotter,
    speaker_model_a, …) per precision (float32, mixed_bfloat16): parameters, batch, training_mflop_per_example,
    step_samples_per_second, fed_samples_per_second, gflops, of_fp32, of_bf16; against_float32 per model per
    other precision: step and fed (its rate over float32's); with the profile, profile: model, ms_per_step,
    python_ms_per_step, pipeline_ms_per_step. tables: "models" (as printed) and "profile" (where the slowest
    model's step goes)."""
    rows = []
    for row in results:
        gflops = row["step_samples_per_second"] * row["training_flop_per_example"] / 1e9
        rows.append({"model": row["label"], "precision": row["precision"], "parameters": row["parameters"],
                     "training_mflop_per_example": row["training_flop_per_example"] / 1e6, "batch": row["batch"],
                     "step_samples_per_second": row["step_samples_per_second"],
                     "fed_samples_per_second": row["fed_samples_per_second"], "gflops": gflops,
                     "of_fp32": gflops / peaks["float32"],
                     "of_bf16": gflops / peaks["bfloat16"] if "bfloat16" in peaks else None})
    models: dict[str, dict[str, Any]] = {}
    for row in rows:
        models.setdefault(key(row["model"]), {})[row["precision"]] = {
            field: value for field, value in row.items() if field not in ("model", "precision")}
    against = {}
    for row in results:
        if row["precision"] != "float32":
            base = next(other for other in results
                        if other["label"] == row["label"] and other["precision"] == "float32")
            against.setdefault(key(row["label"]), {})[row["precision"]] = {
                "step": row["step_samples_per_second"] / base["step_samples_per_second"],
                "fed": row["fed_samples_per_second"] / base["fed_samples_per_second"]}
    values: dict[str, Any] = {"threads": threads, "peaks_gflops": dict(peaks), "models": models,
                              "against_float32": against}
    tables = {"models": table(
        [("model", "model", "text"), ("precision", "precision", "text"), ("params", "parameters", "int"),
         ("MFLOP/ex", "training_mflop_per_example", "num"), ("batch", "batch", "int"),
         ("step/s", "step_samples_per_second", "int"), ("fed/s", "fed_samples_per_second", "int"),
         ("GFLOP/s", "gflops", "num"), ("of fp32", "of_fp32", "pct1"), ("of bf16", "of_bf16", "pct1")], rows)}
    if profiled:
        profile = profiled["profile"]
        steps = profile["steps"]
        threads_seconds = sum(profile["op_seconds_by_kind"].values()) + profile["executor_between_ops_seconds"]
        kinds = [*profile["op_seconds_by_kind"].items(), ("executor, between ops",
                                                         profile["executor_between_ops_seconds"])]
        pipeline_ms = (profiled["batch"] / profiled["fed_samples_per_second"]
                       - profiled["batch"] / profiled["step_samples_per_second"]) * 1e3
        values["profile"] = {"model": profiled["label"], "ms_per_step": profile["wall_seconds"] / steps * 1e3,
                             "python_ms_per_step": profile["python_per_step_seconds"] * 1e3,
                             "pipeline_ms_per_step": pipeline_ms}
        tables["profile"] = table(
            [("where the step goes", "kind", "text"), ("ms a step", "ms_per_step", "num"), ("share", "share", "pct1")],
            [{"kind": kind, "ms_per_step": seconds / steps * 1e3, "share": seconds / threads_seconds}
             for kind, seconds in kinds])
    return values, tables


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--models", default=",".join(contender.label for contender in CONTENDERS),
                        help="comma-separated labels of the models to measure (default: all)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="TensorFlow intra-op threads (default: every core, as the 1 × 1 runs use)")
    parser.add_argument("--repeats", type=int, default=3, help="timed windows per rate; the median is kept")
    parser.add_argument("--window-seconds", type=float, default=4.0, help="shortest timed window")
    parser.add_argument("--no-profile", action="store_true", help="skip the profile of the slowest model")
    parser.add_argument("--float32-only", action="store_true", help="skip mixed_bfloat16 where the CPU has it")
    args = parser.parse_args(argv)
    labels = [contender.label for contender in CONTENDERS]
    unknown = [name for name in args.models.split(",") if name not in labels]
    if unknown:
        parser.error(f"--models: {', '.join(map(repr, unknown))} not among {', '.join(labels)}")
    if args.repeats < 1 or args.threads < 1 or args.window_seconds <= 0:
        parser.error("--repeats and --threads must be ≥ 1, --window-seconds > 0")
    run = recorded_as(parser, args, RUNS)
    chosen = [contender for contender in CONTENDERS if contender.label in args.models.split(",")]
    import tensorflow as tf

    from training.strategies.placement import configure_tensorflow_threads

    configure_tensorflow_threads(args.threads)
    tf.get_logger().setLevel("ERROR")
    from training.machine_speed import bf16_hardware
    from training.settings import PRECISIONS

    peaks = {"float32": matmul_peak("float32", args.repeats, args.window_seconds)}
    precisions = PRECISIONS if bf16_hardware() and not args.float32_only else PRECISIONS[:1]
    if bf16_hardware():
        peaks["bfloat16"] = matmul_peak("bfloat16", args.repeats, args.window_seconds)
    results = []
    for contender in chosen:
        for precision in precisions:  # side by side, model by model
            print(f"measuring {contender.label}, {precision} …", file=sys.stderr, flush=True)
            results.append(measure(contender, precision, args.repeats, args.window_seconds))
    float32 = [row for row in results if row["precision"] == "float32"]
    slowest = min(float32, key=lambda row: row["step_samples_per_second"] * row["training_flop_per_example"])
    if not args.no_profile:
        with tempfile.TemporaryDirectory(prefix="cloudburst-profile-") as directory:
            contender = next(contender for contender in chosen if contender.label == slowest["label"])
            slowest["profile"] = measure(contender, "float32", 1, 0.5, directory)["profile"]
    print_table(results, peaks)
    if not args.no_profile:
        print_profile(slowest)
    OUT.mkdir(parents=True, exist_ok=True)
    saved = OUT / f"{time.strftime('%Y%m%d-%H%M%S')}.json"
    saved.write_text(json.dumps({"threads": args.threads, "cores": os.cpu_count(), "peaks_gflops": peaks,
                                 "models": results}, indent=2))
    print(f"\nsaved {saved.relative_to(REPO_ROOT)}")
    publish_run(run, *result_tables(results, peaks, args.threads, None if args.no_profile else slowest))


if __name__ == "__main__":
    main()

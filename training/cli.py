"""cloudburst: the command line for Cloudburst's pipeline steps.

Each pipeline step takes the run settings as flags (`cloudburst settings` explains them), derives its inputs and
outputs from them, publishes atomically and is a no-op when re-run; the Airflow DAGs run the same steps with the
same flags. `cloudburst <command> --help` describes a command.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from training import workload_registry as workloads
from training.config import SETTINGS, RunSpec, all_settings, before_training, workload_defaults, workload_settings
from training.console import configure_logging
from training.contract import SPARK_STEPS, STEPS
from training.jobs.command_line import JOB_USAGE, add_job_arguments, run_reporting_errors
from training.settings import DATASET_SCHEMES, TRACKING_SCHEMES, shown, uri_problem

log = logging.getLogger("cloudburst")

STEP_HELP = {
    "ingest": "validate the workload's raw data and publish it as Parquet (no Spark)",
    "augment": "MNIST: add elastic deformations of every training image (Spark job)",
    "features": "speech: log-mel/MFCC features and augmented training copies (Spark job)",
    "shard": "stratified shards of the training split, one per worker (Spark job)",
    "train": "train with a strategy on the shards, record the run in MLflow (Spark job)",
    "score": "speaker verification: embeddings of every clip with each trained model",
    "fuse": "speaker verification: S-norm and score fusion on sv_dev; saves the system",
    "evaluate": "test a trained run: accuracy (or EER, minDCF), figures, model → MLflow",
}


def _run_step(args: argparse.Namespace) -> None:
    import importlib

    spec = RunSpec.from_args(args).validate()
    if args.step not in spec.definition.steps:
        raise ValueError(f"workload {spec.workload} has no {args.step!r} step (its steps: "
                         f"{' → '.join(spec.definition.steps)})")
    run_step = importlib.import_module(spec.definition.job_module(args.step)).run_step
    run_step(spec, overwrite=args.overwrite)


def _settings(args: argparse.Namespace) -> None:
    """Print the settings table (what the DAG form and every --flag are generated from)."""
    if args.markdown:
        from training.settings_reference import markdown

        print(markdown(args.workload), end="")
        return
    entries = workload_settings(args.workload) if args.workload else all_settings()
    defaults = workload_defaults(args.workload) if args.workload else {}
    for entry in entries:
        default = defaults.get(entry.name, entry.default)
        bounds = []
        if entry.choices is not None:
            bounds.append("one of " + ", ".join(str(choice) if choice != "" else "empty" for choice in entry.choices))
        if entry.minimum is not None:
            bounds.append(("> " if entry.exclusive_minimum else "≥ ") + f"{entry.minimum:g}")
        if entry.maximum is not None:
            bounds.append(f"≤ {entry.maximum:g}")
        shown_default = entry.format(default) or (f"empty: {entry.empty_means}" if entry.empty_means else "(automatic)")
        print(f"{entry.flag:28} {entry.type.__name__:5} default {shown_default}"
              + (f"; {', '.join(bounds)}" if bounds else "")
              + f"  [{entry.section}{'; internal: set by the pipeline' if entry.internal else ''}]")
        print(f"{'':28} {entry.title}: {entry.description}")
    for name, values in (workloads.definition(args.workload).presets.items() if args.workload else ()):
        print(f"--preset {name:19} " + ", ".join(f"{key}={value}" for key, value in values.items()))


def _synth_speech(args: argparse.Namespace) -> None:
    from training.speech.synthesis import cli as synthesis_cli

    synthesis_cli.run(args)


def _preview(args: argparse.Namespace) -> None:
    from training.datasets import image_records
    from training.workloads.mnist_elastic_cnn import elastic
    from training.workloads.mnist_elastic_cnn.preview import deformation_grid

    elastic.validate_parameters(args.alpha, args.sigma, seed=args.seed)
    batch = image_records.read_split(args.source, "train")
    originals = type(batch)(*(column[: args.rows] for column in (batch.images, batch.labels, batch.index, batch.copy)))
    Path(args.out).write_bytes(deformation_grid(originals, args.seed, args.alpha, args.sigma, args.columns))
    log.info("wrote %s", args.out)


def _verify(args: argparse.Namespace) -> None:
    import json

    from training.evaluation.verification import bayes_threshold
    from training.workloads.speaker_verification.verification_system import load_system, read_clip, verify

    bayes_threshold(args.p_target)  # a bad operating point fails before anything is read
    enrollment = [read_clip(path, args.resample) for path in args.enroll]
    test = read_clip(args.test, args.resample)
    decision = verify(load_system(args.system), enrollment, test, args.p_target)
    if args.json:
        print(json.dumps({"scores": decision.scores, "llr": decision.llr, "threshold": decision.threshold,
                          "p_target": decision.p_target, "accepted": decision.accepted,
                          "test_in_enrollment": list(decision.test_in_enrollment)}, allow_nan=False))
        return
    for index in decision.test_in_enrollment:
        print(f"note: the test clip is enrollment clip {index + 1} ({args.enroll[index]}): a clip scored against "
              "itself says nothing about the speaker")
    for name, score in decision.scores.items():
        print(f"{name:28s} S-norm score {score:+.3f}")
    verdict = "same speaker (accept)" if decision.accepted else "different speaker (reject)"
    print(f"{'fused':28s} LLR {decision.llr:+.3f}; threshold {decision.threshold:+.3f} at P_target "
          f"{decision.p_target:g} → {verdict}")


def _advise(args: argparse.Namespace) -> None:
    from training.study import record, report, study_model

    study = record.advise_study(args.study, args.tracking_uri, args.goal, args.time_limit)
    print(f"study run {study.study_run_id} ({study.workload})")
    print(report.table_text(study.rows))
    print(f"\nceiling check: {report.ceiling_verdict(study.rows)}")
    # fitted again from the rows, so a study recorded before a change to the model is read with today's
    print(f"cost model: {study_model.fit_study(study.rows).note}")
    print(f"recommended for {report.GOALS[study.advice.goal]}: {study.advice.reason}")
    if study.champion_version:  # registered by the study itself, for the goal it was closed with
        goal = report.GOALS.get(study.champion_goal, study.champion_goal)
        print(f"model registry: the study registered its choice for {goal} as "
              f"version {study.champion_version} of {study.workload!r}, alias {record.CHAMPION_ALIAS!r} (load it "
              f"as models:/{study.workload}@{record.CHAMPION_ALIAS} while no later study has moved the alias)")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; ``argv`` (default: sys.argv's) only picks the workload whose settings a step's --help lists."""
    # allow_abbrev=False everywhere: a prefix must never pass for a flag (--workers for --workers-per-node)
    parser = argparse.ArgumentParser(prog="cloudburst", description=__doc__, allow_abbrev=False,
                                     formatter_class=_CommandsFormatter)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    asked = _workload_in(sys.argv[1:] if argv is None else argv)

    for step in STEPS:
        workload = asked or help_workload(step)
        command = commands.add_parser(step, help=STEP_HELP[step], description=_step_description(step, workload),
                                      allow_abbrev=False, usage=JOB_USAGE,
                                      formatter_class=_formatter(argparse.HelpFormatter, 34))
        add_job_arguments(command, spark=step in SPARK_STEPS, workload=workload, step=step)
        command.set_defaults(handler=_run_step, step=step)

    settings = commands.add_parser(
        "settings", help="the run settings: defaults, bounds and help (--markdown: a reference)", allow_abbrev=False,
        description="List every run setting (the flags of every step, the DAG Params of the same names): type, "
                    "default, bounds and help, with its trigger-form section. --workload: only the shared settings "
                    "and that workload's own, with its defaults and presets. --markdown: the settings reference in "
                    "Markdown, a table per form section (what the settings page of the docs is generated from).")
    settings.add_argument("--workload", choices=workloads.names(), default=None,
                          help="only the settings of this workload, with its defaults")
    settings.add_argument("--markdown", action="store_true", help="print the reference as Markdown tables")
    settings.set_defaults(handler=_settings)

    from training.speech.synthesis import cli as synthesis_cli
    from training.speech.synthesis.engines import ENGINE_PROGRAMS

    engines = ", ".join(ENGINE_PROGRAMS)
    synth = commands.add_parser(
        "synth-speech", help=f"offline TTS corpus: {engines}", allow_abbrev=False,
        description="Write <word>/<speaker>_nohash_<n>.wav (1 s, 16 kHz mono 16-bit), _background_noise_/ and the "
                    f"split lists, with Debian's offline TTS engines ({engines}) in many voice families, "
                    "per-speaker voice variants and a vocal-tract warp. Deterministic for a seed; parallel over "
                    "cores; a complete corpus is not synthesised again.")
    synthesis_cli.add_arguments(synth, speakers=RunSpec(workload="kws_densenet_bilstm").speakers)
    synth.set_defaults(handler=_synth_speech)

    mnist_defaults = RunSpec(workload="mnist_elastic_cnn")  # preview shows what this workload's augment step does
    preview = commands.add_parser(
        "preview", help="PNG of MNIST images beside their elastic deformations (to choose α, σ)",
        allow_abbrev=False,
        description="Write a PNG grid: in each row an MNIST training image, then copies of it deformed as the "
                    "augment step would with --alpha, --sigma and --seed, to see what those values do before "
                    "augmenting a dataset with them.")
    preview.add_argument("--source", default=None, type=_uri_argument(DATASET_SCHEMES),
                         help="image dataset URI (default: the ingested MNIST under the data root)")
    preview.add_argument("--out", default="elastic-preview.png", help="PNG path (default: %(default)s)")
    preview.add_argument("--rows", type=int, default=6, help="originals shown (default: %(default)s)")
    preview.add_argument("--columns", type=int, default=6, help="original + copies per row (default: %(default)s)")
    preview.add_argument("--alpha", type=float, default=mnist_defaults.alpha, help="α (default: %(default)s)")
    preview.add_argument("--sigma", type=float, default=mnist_defaults.sigma, help="σ (default: %(default)s)")
    preview.add_argument("--seed", type=int, default=mnist_defaults.seed, help="seed (default: %(default)s)")
    preview.set_defaults(handler=_preview)

    verify = commands.add_parser(
        "verify", help="speaker verification: enroll from WAV files, verify another WAV against them",
        allow_abbrev=False,
        description="Enroll a speaker from one or more WAV files (mono 16-bit PCM, 16 kHz, cut or padded to 1 s, "
                    "checked as ingestion checks clips) and score a test WAV against the enrolled model with a "
                    "trained verification system (embedding models, their cohorts and the fusion): each model's "
                    "S-norm score, the fused log-likelihood ratio and the decision at the Bayes threshold of "
                    "--p-target (C_miss = C_fa = 1). Each clip's first second is scored; a WAV file over 4 MiB, or "
                    "anything but a regular file, is refused unread. The system is checked before it scores: every "
                    "file against the sha256 its manifest recorded, finite fusion weights, and a directory only its "
                    "owner can change; its models are weights rebuilt by Cloudburst's own code, so no file in it can "
                    "run code. `make bench-sv` saves a system under var/bench/speaker-verification/system.")
    verify.add_argument("--system", required=True, help="directory of a saved verification system")
    verify.add_argument("--enroll", nargs="+", required=True, metavar="WAV",
                        help="enrollment clips of the claimed speaker (3 is what the system was measured with)")
    verify.add_argument("--test", required=True, metavar="WAV", help="the clip to verify")
    verify.add_argument("--p-target", type=float, default=0.01,
                        help="prior of a target trial for the decision (default: %(default)s)")
    verify.add_argument("--resample", action="store_true", help="resample clips recorded at other rates")
    verify.add_argument("--json", action="store_true", help="print the result as one JSON object")
    verify.set_defaults(handler=_verify)

    from training.study.report import DEFAULT_GOAL, GOALS

    advise = commands.add_parser(
        "advise", help="a scaling study's table and the configuration to run for a goal", allow_abbrev=False,
        description="Read a scaling study back from MLflow (the scaling_study DAG's parent run: its plan, every "
                    "configuration's nested run), judge it as the DAG did — speedup and efficiency against the "
                    "study's 1-worker baseline, the share of each strategy's own ceiling (communication off) — "
                    "and print the table and the recommended configuration with its runner-up. Goals: "
                    + "; ".join(f"{name}: {text}" for name, text in GOALS.items()) + ".")
    advise.add_argument("--study", required=True, metavar="RUN_ID",
                        help="the study's parent MLflow run id, or 'latest' for the newest study in the store")
    advise.add_argument("--goal", choices=tuple(GOALS), default=DEFAULT_GOAL,
                        help="what to optimise (default: %(default)s)")
    advise.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help="cheapest_under_time_limit: the longest training time allowed")
    advise.add_argument("--tracking-uri", default="", type=_uri_argument(TRACKING_SCHEMES, optional=True),
                        help="MLflow store (default: $MLFLOW_TRACKING_URI or SQLite under ./var/mlflow)")
    advise.set_defaults(handler=_advise)
    return parser


def _uri_argument(schemes: tuple[str, ...], optional: bool = False) -> Callable[[str], str]:
    """An argument checked as URI settings are: its scheme one of ``schemes``, its host and port well formed; an
    ``optional`` one may be empty (its default)."""

    def uri(value: str) -> str:
        if optional and value == "":
            return value
        problem = uri_problem(value, schemes)
        if problem:
            raise argparse.ArgumentTypeError(f"{shown(value)}: {problem}")
        return value

    return uri


class _CommandsFormatter(argparse.RawDescriptionHelpFormatter):
    """The top-level help: every command and its help on one line, synth-speech too (argparse measures the
    commands two columns short of where it indents them)."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            self._action_max_length = max(self._action_max_length,
                                          4 + max(len(name) for name in action.choices) + 2)


def _formatter(base: type[argparse.HelpFormatter], position: int) -> Callable[[str], argparse.HelpFormatter]:
    """``base`` with the help column at most ``position``: a flag and its help share one line."""
    return lambda prog: base(prog, max_help_position=position)


def help_workload(step: str) -> str:
    """The workload whose settings a step's --help lists when none is asked for: the default workload if it has
    the step, else the first workload that has it (augment: MNIST; score: speaker verification)."""
    default = SETTINGS["workload"].default
    if step in workloads.definition(default).steps:
        return default
    return next((name for name, definition in workloads.registry().items() if step in definition.steps), default)


def _workload_in(argv: list[str]) -> str | None:
    """The registered workload ``--workload X`` (or ``--workload=X``) names in ``argv``, else None."""
    found = None
    for index, argument in enumerate(argv):
        if argument == "--":
            break
        if argument == "--workload" and index + 1 < len(argv):
            found = argv[index + 1]
        elif argument.startswith("--workload="):
            found = argument.partition("=")[2]
    return found if found in workloads.names() else None


def _step_description(step: str, workload: str) -> str:
    users = [name for name, definition in workloads.registry().items() if step in definition.steps]
    listed = f"Listed: {workload}'s settings"
    if before_training(workload, step):
        listed += " that this step reads (`cloudburst train --help` has the training ones)"
    return (f"{STEP_HELP[step]}. Workloads with this step: {', '.join(users)}. {listed}. Every step accepts every "
            f"setting; `cloudburst settings --workload {workload}` explains each.")


def main(argv: list[str] | None = None) -> int:
    args = build_parser(argv).parse_args(argv)
    configure_logging(args.verbose)
    if args.handler is _preview and args.source is None:
        args.source = RunSpec(workload="mnist_elastic_cnn").raw_uri()
    return run_reporting_errors(lambda: args.handler(args))


if __name__ == "__main__":
    sys.exit(main())

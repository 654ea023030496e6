"""A scaling study's plan: its settings (declared once, like the run settings), the grid they expand to — one
baseline, one ceiling per strategy and shape, one run per configuration and repetition — and the estimate the
budget is checked against before anything runs. Standard library only: the Airflow environment imports it."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from training import workload_registry as workloads
from training.config import RunSpec, json_values, setting, workload_defaults
from training.settings import (
    DEFAULT_WORKLOAD,
    LINK_RATE_PATTERN,
    RUN_NAME_HELP,
    RUN_NAME_MAX_LENGTH,
    RUN_NAME_PATTERN,
    STRATEGIES,
    RunSpecError,
    Setting,
    shown,
    shown_names,
)
from training.strategy_rules import rules_of
from training.strict_json import loads_object

GRID = "Grid"
STUDY = "Study"

# The settings the grid owns: a run's value comes from its configuration, never from run_settings.
GRID_OWNED = ("strategy", "nodes", "workers_per_node", "n_push", "threads_per_worker", "communication",
              "link_rate", "run_name", "existing_shards")

BASELINE, CEILING, RUN = "baseline", "ceiling", "run"
# The baseline's strategy in every study: a single Horovod rank is plain Keras on all the cores (a single Downpour
# worker would still talk to its parameter server: 1.27 GB in a 3-epoch MNIST run, measured 2026-12-02).
BASELINE_STRATEGY = "horovod"

_INTEGER_LIST = r"[0-9]+(,[0-9]+)*"
_LINK_RATE_LIST = rf"({LINK_RATE_PATTERN})(,({LINK_RATE_PATTERN}))*"
_STRATEGY_LIST = rf"({'|'.join(STRATEGIES)})(,({'|'.join(STRATEGIES)}))*"
WIDEST_LINK_RATE = "99999mbit"  # the longest rate LINK_RATE_PATTERN takes
MAX_REPETITIONS = 9
MAX_VARIANTS = 8
# Airflow maps a task over at most this many items ([core] max_map_length, default 1024): a study's train and
# evaluate tasks map over its runs, so a plan with more is refused before anything runs.
MAX_MAPPED_RUNS = 1024
# The settings every configuration of the default study shares (`make study`: full MNIST, one elastic copy, 4 epochs,
# six runs; about 24 min estimated); the DAG's run_settings Param starts from them.
DEFAULT_RUN_SETTINGS = {"epochs": 4}


def run_label(strategy: str, nodes: int, per_node: int, threads: int, n_push: int, variant: int, variants: int,
              link: str, links: int) -> str:
    """A run's label: its strategy and shape, with n_push (downpour), its variant and its link rate when the study
    has several."""
    suffix = (f"-p{n_push}" if rules_of(strategy).pushes_and_fetches else "") + (
        f"-v{variant}" if variants > 1 else "") + (f"-{link}" if links > 1 else "")
    return f"{strategy}-{nodes}x{per_node}-t{threads}{suffix}"


def ceiling_label(strategy: str, nodes: int, per_node: int, threads: int) -> str:
    return f"ceiling-{strategy}-{nodes}x{per_node}-t{threads}"


def configuration_run_name(study: str, label: str, repetition: int) -> str:
    return f"{study}-{label}-r{repetition}"


def _longest_run_name_suffix() -> int:
    """How many characters a configuration's run name adds to its study's name at most: every grid value at the
    widest its run setting allows (the grid's values are checked against those bounds before names are made)."""
    nodes, per_node, threads, n_push = (int(setting(name).maximum)
                                        for name in ("nodes", "workers_per_node", "threads_per_worker", "n_push"))
    labels = [ceiling_label(strategy, nodes, per_node, threads) for strategy in STRATEGIES]
    labels += [run_label(strategy, nodes, per_node, threads, n_push, MAX_VARIANTS - 1, MAX_VARIANTS,
                         WIDEST_LINK_RATE, 2) for strategy in STRATEGIES]
    return max(len(configuration_run_name("", label, MAX_REPETITIONS)) for label in labels)


# A study's name prefixes every configuration's run name, which must stay within the run-name cap.
STUDY_NAME_MAX_LENGTH = RUN_NAME_MAX_LENGTH - _longest_run_name_suffix()

STUDY_SETTINGS: tuple[Setting, ...] = (
    Setting("workload", str, DEFAULT_WORKLOAD, "Workload", "What every configuration trains.", STUDY,
            choices=tuple(workloads.names())),
    Setting("strategies", str, "horovod,downpour", "Strategies",
            f"Comma-separated: {', '.join(STRATEGIES)}. Each is run at every shape of the grid.", GRID,
            pattern=_STRATEGY_LIST, pattern_help=f"must be a comma-separated list of {', '.join(STRATEGIES)}"),
    Setting("nodes", str, "1", "Nodes", "Comma-separated node counts, e.g. 1,2 (the cluster must have them).",
            GRID, pattern=_INTEGER_LIST, pattern_help="must be comma-separated whole numbers, e.g. 1,2"),
    Setting("workers_per_node", str, "2", "Workers per node",
            "Comma-separated workers per node, e.g. 1,2. With threads_per_worker this is claim (a): k workers × 1 "
            "thread against 1 worker × k threads on the same cores.", GRID, pattern=_INTEGER_LIST,
            pattern_help="must be comma-separated whole numbers, e.g. 1,2"),
    Setting("threads_per_worker", str, "0", "Threads per worker",
            "Comma-separated TensorFlow threads per worker; 0 = the node's cores ÷ workers per node.", GRID,
            pattern=_INTEGER_LIST, pattern_help="must be comma-separated whole numbers, e.g. 0,1"),
    Setting("n_push", str, "4,16", "Downpour n_push values",
            "Comma-separated n_push values, used by downpour only (every n_push steps a worker pushes).", GRID,
            pattern=_INTEGER_LIST, pattern_help="must be comma-separated whole numbers, e.g. 1,4,16"),
    Setting("link_rates", str, "", "Link profiles (namespace cluster only)",
            "Comma-separated link rates, e.g. 10gbit,1gbit,100mbit: every configuration that communicates runs at "
            "each, the cluster's links re-shaped before it trains (the baseline and ceilings, which send nothing, "
            "run once, at the first). Needs the namespace cluster (make cluster-up) and spark_master yarn in "
            "run_settings. Empty: the links stay as they are.", GRID, optional=True, pattern=_LINK_RATE_LIST,
            pattern_help="must be comma-separated rates from 1mbit to 100gbit, e.g. 10gbit,100mbit"),
    Setting("repetitions", int, 2, "Repetitions",
            "Runs per configuration; the study reports their median, and their spread is the noise a run may "
            "exceed its ceiling by (1 repetition: the ceiling check is not judged).", GRID,
            minimum=1, maximum=MAX_REPETITIONS),
    Setting("budget_minutes", float, 45.0, "Budget (minutes)",
            "The study refuses to start when its estimated duration exceeds this, and says the estimate.", STUDY,
            minimum=0, exclusive_minimum=True, maximum=7 * 24 * 60),
    Setting("study_name", str, "", "Study name (optional)",
            f"Names the MLflow parent run and prefixes every configuration's run name: up to {STUDY_NAME_MAX_LENGTH} "
            "letters, digits and _ . -, a letter or digit first. Empty: from the DAG run id.",
            STUDY, optional=True, pattern=RUN_NAME_PATTERN, pattern_help=RUN_NAME_HELP,
            max_length=STUDY_NAME_MAX_LENGTH),
)
_STUDY = {entry.name: entry for entry in STUDY_SETTINGS}

# What the budget estimate is built from, measured on this 2-core machine (the default study, the DAG tests):
# a configuration's fixed cost (shard step when new, Spark and worker start-up, evaluation), and one core's
# training time per example for each workload (WorkloadDefinition.study_*); a run is assumed to use every core.
FIXED_SECONDS_PER_RUN = 50.0  # the default study, 2026-12-02: train task 105 s for 70 s of training; evaluate 10 s
PREPARATION_SECONDS = 120.0  # ingest + augment once
CORES = 2


@dataclass(frozen=True)
class Configuration:
    """One training run of the study: its role (baseline, ceiling or run), a label that names it, its repetition
    and its complete run settings."""

    role: str
    label: str
    repetition: int
    settings: dict[str, Any]
    variant: str = ""  # the variant's settings as text ("" for none)

    def to_mapping(self) -> dict[str, Any]:
        return {"role": self.role, "label": self.label, "repetition": self.repetition, "settings": self.settings,
                "variant": self.variant}


@dataclass(frozen=True)
class StudyPlan:
    name: str
    workload: str
    grid: dict[str, Any]
    base: dict[str, Any]  # the run settings every configuration shares
    configurations: tuple[Configuration, ...]
    estimate_minutes: float

    @property
    def shard_settings(self) -> list[dict[str, Any]]:
        """One run mapping per distinct shard set: runs with the same total workers share their shards."""
        distinct: dict[str, dict[str, Any]] = {}
        for configuration in self.configurations:
            spec = RunSpec.from_mapping(configuration.settings)
            distinct.setdefault(spec.shards_uri(), configuration.settings)
        return list(distinct.values())

    def to_mapping(self) -> dict[str, Any]:
        return {"name": self.name, "workload": self.workload, "grid": self.grid, "base": self.base,
                "configurations": [c.to_mapping() for c in self.configurations],
                "estimate_minutes": self.estimate_minutes, "prepare": self.base,
                "shards": self.shard_settings, "runs": [c.settings for c in self.configurations]}


def parse_list(name: str, text: str) -> tuple[Any, ...]:
    """A grid setting's comma-separated text → its distinct values in order (strategy names, link rates, or whole
    numbers within the bounds of the run setting of the same name)."""
    _STUDY[name].check(text)
    items = [item.strip() for item in text.split(",") if item.strip()]
    values: list[Any] = []
    for item in items:
        value: Any = item if name in ("strategies", "link_rates") else int(item)
        if not isinstance(value, str):
            _check_grid_value(name, text, value)
        if value not in values:
            values.append(value)
    return tuple(values)


def _check_grid_value(name: str, text: str, value: int) -> None:
    bounds = setting(name)
    if value < bounds.minimum:
        raise RunSpecError(f"{name}={shown(text)}: every value must be ≥ {bounds.minimum:g}")
    if value > bounds.maximum:
        raise RunSpecError(f"{name}={shown(text)}: every value must be ≤ {bounds.maximum:g}")


def study_conf(text: str) -> dict[str, Any]:
    """A study's settings given as JSON text (STUDY_CONF): one object, read strictly (no key twice, bounded)."""
    return loads_object(text, "STUDY_CONF")


def study_values(values: dict[str, Any]) -> dict[str, Any]:
    """The study settings from Params or JSON (None or missing → default), each of its JSON type, and checked."""
    unknown = sorted(map(str, set(values) - set(_STUDY) - {"run_settings", "variants"}))
    if unknown:
        raise RunSpecError(f"unknown study setting(s) {shown_names(unknown)}; known: {', '.join(_STUDY)}, "
                           "run_settings, variants")
    checked: dict[str, Any] = {}
    for name, entry in _STUDY.items():
        value = values.get(name)
        checked[name] = entry.default if value is None else entry.from_json(value)
        entry.check(checked[name])
    return checked


def run_settings_of(values: dict[str, Any]) -> dict[str, Any]:
    """The study's run_settings: a JSON object of run settings (each of its JSON type), none of the grid's."""
    run_settings = values.get("run_settings")
    if run_settings is None:
        return {}
    if not isinstance(run_settings, dict):
        raise RunSpecError(f"run_settings={shown(run_settings)}: must be a JSON object of run settings, e.g. "
                           '{"epochs": 3}')
    owned = sorted(set(run_settings) & set(GRID_OWNED))
    if owned:
        raise RunSpecError(f"run_settings sets {', '.join(owned)}: the grid decides these; use the study's own "
                           "settings (strategies, nodes, workers_per_node, threads_per_worker, n_push)")
    return json_values(run_settings)


def plan_study(values: dict[str, Any], study_name: str = "study") -> StudyPlan:
    """Expand the study's settings into its configurations and estimate their duration; RunSpecError, in one
    line, for any bad value, any configuration the workload cannot run, or an estimate over the budget."""
    checked = study_values(values)
    workload = checked["workload"]
    name = checked["study_name"] or study_name
    _STUDY["study_name"].check(name)  # a name from the DAG run id too
    if workloads.definition(workload).branches:
        raise RunSpecError(f"workload={workload!r}: its branches train several models per run, which a study "
                           f"cannot compare one configuration at a time; its own DAG trains them")
    run_settings = run_settings_of(values)
    base = RunSpec(**{**run_settings, "workload": workload, "run_name": name}).validate().to_mapping()
    grid = {key: parse_list(key, checked[key])
            for key in ("strategies", "nodes", "workers_per_node", "threads_per_worker", "n_push", "link_rates")}
    if grid["link_rates"] and base["spark_master"] != "yarn":
        raise RunSpecError(f"link_rates={checked['link_rates']!r} shape the namespace cluster's links: set "
                           '"spark_master": "yarn" in run_settings and bring the cluster up (make cluster-up)')
    variants = parse_variants(values.get("variants"))
    # taken lazily, one past the limit: a grid of millions is refused without being built
    configurations = list(itertools.islice(expand(name, base, grid, checked["repetitions"], variants),
                                           MAX_MAPPED_RUNS + 1))
    if len(configurations) > MAX_MAPPED_RUNS:
        raise RunSpecError(f"the study has more than {MAX_MAPPED_RUNS:,} runs, the most Airflow maps one task over "
                           "(its max_map_length): shrink the grid, the variants or the repetitions")
    for configuration in configurations:
        RunSpec.from_json(configuration.settings).validate()
    estimate = estimate_minutes(workload, base, configurations)
    if estimate > checked["budget_minutes"]:
        raise RunSpecError(f"the study's {len(configurations)} runs are estimated at {estimate:.0f} min, over its "
                           f"budget_minutes={checked['budget_minutes']:g}: raise the budget or shrink the grid")
    return StudyPlan(name, workload, {**{k: list(v) for k, v in grid.items()}, "repetitions": checked["repetitions"],
                                      "budget_minutes": checked["budget_minutes"]},
                     base, tuple(configurations), round(estimate, 1))


def parse_variants(variants: Any) -> list[dict[str, Any]]:
    """The study's variants: a list of run-setting overrides each run is repeated with (server optimizer,
    staleness-aware steps, learning-rate decay, …); none → one variant without overrides."""
    if variants in (None, [], {}):
        return [{}]
    if not isinstance(variants, list) or not all(isinstance(v, dict) for v in variants):
        raise RunSpecError(f"variants={shown(variants)}: must be a list of objects of run settings, e.g. "
                           '[{}, {"server_optimizer": "adam", "server_learning_rate": 0.001}]')
    if len(variants) > MAX_VARIANTS:
        raise RunSpecError(f"variants: {len(variants):,} given, at most {MAX_VARIANTS}")
    for variant in variants:
        owned = sorted(set(variant) & set(GRID_OWNED))
        if owned:
            raise RunSpecError(f"a variant sets {', '.join(owned)}: the grid decides these")
    return [json_values(variant) for variant in variants]


def variant_text(variant: dict[str, Any]) -> str:
    return " ".join(f"{key}={value}" for key, value in variant.items())


def expand(name: str, base: dict[str, Any], grid: dict[str, tuple[Any, ...]], repetitions: int,
           variants: list[dict[str, Any]] | None = None) -> Iterator[Configuration]:
    """The study's configurations, one at a time. Every repetition: the baseline (1 node × 1 worker, all cores,
    Horovod — one rank with nobody to all-reduce with is plain Keras ``fit``, what a user would run instead —
    whatever strategies the study compares); a ceiling (communication off) per strategy and shape with more than
    one worker; every strategy × shape × n_push (downpour only) × variant × link rate but the one the baseline
    already is. Baseline and ceilings take no variant and run at the first link rate (they send nothing): they are
    the study's fixed yardsticks. The ceilings repeat too: a bound measured once on a noisy machine is too low as
    often as not."""
    variants = variants or [{}]
    links = grid.get("link_rates") or ("",)  # "": the links stay as they are

    def shapes() -> Iterator[tuple[int, int, int]]:
        return itertools.product(grid["nodes"], grid["workers_per_node"], grid["threads_per_worker"])

    def configuration(role: str, label: str, repetition: int, variant: dict[str, Any] | None = None,
                      **settings: Any) -> Configuration:
        run_settings = {**base, **(variant or {}), **settings,
                        "run_name": configuration_run_name(name, label, repetition), "existing_shards": ""}
        return Configuration(role, label, repetition, run_settings, variant_text(variant or {}))

    for repetition in range(1, repetitions + 1):
        yield configuration(BASELINE, "baseline-1x1", repetition, strategy=BASELINE_STRATEGY, nodes=1,
                            workers_per_node=1, threads_per_worker=0, communication=True, link_rate=links[0])
        for strategy in grid["strategies"]:
            for nodes, per_node, threads in shapes():
                if nodes * per_node > 1:
                    yield configuration(CEILING, ceiling_label(strategy, nodes, per_node, threads), repetition,
                                        strategy=strategy, nodes=nodes, workers_per_node=per_node,
                                        threads_per_worker=threads, communication=False, link_rate=links[0])
        for strategy in grid["strategies"]:
            pushes = grid["n_push"] if rules_of(strategy).pushes_and_fetches else (base["n_push"],)
            for nodes, per_node, threads in shapes():
                for n_push, (index, variant), link in itertools.product(pushes, enumerate(variants), links):
                    if (strategy, nodes * per_node, threads, n_push, variant) == (
                            BASELINE_STRATEGY, 1, 0, base["n_push"], {}):
                        continue  # the baseline is this run (one rank sends nothing, whatever the link)
                    label = run_label(strategy, nodes, per_node, threads, n_push, index, len(variants), link,
                                      len(links))
                    yield configuration(RUN, label, repetition, variant, strategy=strategy, nodes=nodes,
                                        workers_per_node=per_node, threads_per_worker=threads, n_push=n_push,
                                        communication=True, link_rate=link)


def training_examples(workload: str, base: dict[str, Any]) -> int:
    """Examples per epoch: the training images kept (train_limit, else the workload's full set) × (1 + k)."""
    limit = int(base.get("train_limit") or 0) or workloads.definition(workload).study_training_examples
    return limit * (1 + int(base.get("augment_copies") or 0))


def estimate_minutes(workload: str, base: dict[str, Any], configurations: list[Configuration]) -> float:
    """Preparation once, then every run: its fixed cost plus its epochs of examples on all the machine's cores."""
    per_example = workloads.definition(workload).study_seconds_per_example
    seconds = PREPARATION_SECONDS
    for configuration in configurations:
        epochs = int(configuration.settings.get("epochs") or workload_defaults(workload)["epochs"])
        seconds += FIXED_SECONDS_PER_RUN + epochs * training_examples(workload, base) * per_example / CORES
    return math.ceil(seconds / 6) / 10  # minutes, rounded up to a tenth

"""The run specification: one typed object that travels unchanged from DAG Params to every job's command line, to
the strategy, to MLflow params. Its fields are generated from the one table of settings (training.settings plus
each workload's own), so a setting is declared once; field names are the shared names every run logs.

A field left out takes the run's workload's default (``RunSpec(workload="kws_densenet_bilstm")`` trains with the
keyword spotter's defaults). Standard library only: the Airflow environment imports this module to validate a
run before any Spark job.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from training import workload_registry as workloads
from training.contract import REPO_ROOT, TRAIN
from training.settings import (
    OPTIMIZERS,
    RUN_NAME_MAX_LENGTH,
    SECTIONS,
    SHARED_SETTINGS,
    STRATEGIES,
    TRACKING_SCHEMES,
    RunSpecError,
    Setting,
    shown,
    shown_names,
    uri_problem,
)
from training.strategy_rules import StrategyRules, rules_of

__all__ = ["REPO_ROOT", "OPTIMIZERS", "STRATEGIES", "RunSpec", "RunSpecError", "all_settings", "json_values",
           "preset_values", "run_name_from", "setting", "shard_rows", "workload_defaults", "workload_settings"]


def _collect_settings() -> dict[str, Setting]:
    """Shared settings, then each workload's own; a name may be declared only once."""
    table = {entry.name: entry for entry in SHARED_SETTINGS}
    for workload in workloads.registry().values():
        for entry in workload.settings:
            if table.get(entry.name) is entry:
                continue  # another workload's setting, used as it is (speaker verification's corpus settings)
            if entry.name in table:
                raise ValueError(f"workload {workload.name}: setting {entry.name!r} is declared twice")
            table[entry.name] = entry
    return table


SETTINGS: dict[str, Setting] = _collect_settings()


def all_settings() -> tuple[Setting, ...]:
    return tuple(SETTINGS.values())


def setting(name: str) -> Setting:
    return SETTINGS[name]


def workload_settings(workload: str) -> tuple[Setting, ...]:
    """The settings that mean something to a workload: the shared ones and its own (its form and its --help)."""
    own = {entry.name for entry in workloads.definition(workload).settings}
    shared = {entry.name for entry in SHARED_SETTINGS}
    return tuple(entry for entry in SETTINGS.values() if entry.name in shared | own)


def workload_defaults(workload: str) -> dict[str, Any]:
    """Every setting's default for one workload (the workload's own overrides applied)."""
    defaults = {name: entry.default for name, entry in SETTINGS.items()}
    if workload in workloads.names():
        defaults.update(workloads.definition(workload).defaults)
    return {**defaults, "workload": workload}


class _Unset:
    """A field left out: resolved to the workload's default when the spec is made."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Any = _Unset()


class _RunSpecMethods:
    """Behaviour of :class:`RunSpec`; the fields come from the settings table."""

    def __post_init__(self) -> None:
        defaults = workload_defaults(self.workload if self.workload is not UNSET else SETTINGS["workload"].default)
        for name in SETTINGS:
            if getattr(self, name) is UNSET:
                object.__setattr__(self, name, defaults[name])

    # Shape ----------------------------------------------------------------------------------------------------
    @property
    def total_workers(self) -> int:
        return self.nodes * self.workers_per_node

    @property
    def config(self) -> str:
        """The configuration tag, nodes × workers_per_node, e.g. ``2x1``."""
        return f"{self.nodes}x{self.workers_per_node}"

    @property
    def definition(self) -> workloads.WorkloadDefinition:
        return workloads.definition(self.workload)

    def trainable(self) -> workloads.Trainable:
        """The trainable side of this run's workload (model builder, optimizer, readers) at its compute precision,
        for the strategies: they ask the run, not the registry above them. Training environment only."""
        return workloads.workload_for(self)

    @property
    def strategy_rules(self) -> StrategyRules:
        """What this run's strategy requires and how it trains (training.strategy_rules)."""
        return rules_of(self.strategy)

    # Locations ------------------------------------------------------------------------------------------------
    def resolved_data_root(self) -> str:
        from training import storage

        return storage.to_uri(self.data_root) if self.data_root else storage.data_root()

    def resolved_data_source(self) -> str:
        """The data source, or the workload's offline default (the vendored MNIST, a synthetic corpus)."""
        return self.data_source or self.definition.default_source

    def raw_uri(self) -> str:
        """What ingest publishes: MNIST images, Speech Commands clips labelled for the keyword task, …"""
        return self.definition.raw_uri(self)

    def augmented_uri(self) -> str:
        """What shard and train read: elastic MNIST, keyword-spotting features with their augmented copies, …"""
        return self.definition.train_uri(self)

    def shards_uri(self) -> str:
        """The shards to train on: one per worker by default, or existing ones (at least one per worker)."""
        if self.existing_shards:
            return self.existing_shards
        return f"{self.augmented_uri().rstrip('/')}-shards{self.total_workers}-seed{self.seed}"

    def run_uri(self) -> str:
        """Where the run keeps checkpoints, the final model and its result; stable across task retries. A branch
        of a workload with branches keeps its own below the run's: ``…/<run name>/<branch>``."""
        base = f"{self.resolved_data_root()}/runs/{self.workload}/{self.run_name}"
        definition = self.definition
        parts = definition.run_path_settings or ((definition.branch_setting,) if definition.branch_setting else ())
        return "/".join([base, *(getattr(self, name) for name in parts if getattr(self, name))])

    @property
    def branch(self) -> str:
        """The branch this spec runs (its workload's branch_setting), or "" for the run as a whole."""
        setting_name = self.definition.branch_setting
        return getattr(self, setting_name) if setting_name else ""

    def for_branch(self, branch: str) -> RunSpec:
        """This run's spec for one of its workload's parallel branches (its settings applied)."""
        definition = self.definition
        if branch not in definition.branches:
            raise RunSpecError(f"workload {self.workload} has no branch {branch!r} (its branches: "
                               f"{', '.join(definition.branches) or 'none'})")
        return self.with_changes(**{definition.branch_setting: branch, **definition.branches[branch]})

    def whole_run(self) -> RunSpec:
        """The spec of the run as a whole, whichever branch this one is (the steps after the branches)."""
        definition = self.definition
        if not definition.branch_setting:
            return self
        defaults = workload_defaults(self.workload)
        branch_settings = {name for overrides in definition.branches.values() for name in overrides}
        changes = {name: defaults[name] for name in (*definition.run_path_settings, *branch_settings)}
        return self.with_changes(**{**changes, definition.branch_setting: ""})

    def step_output(self, step: str) -> str:
        """Where a pipeline step publishes, for data-aware scheduling and the step's return value."""
        if step == "ingest":
            return self.raw_uri()
        if step in ("augment", "features"):
            return self.augmented_uri()
        if step == "shard":
            return self.shards_uri()
        return self.run_uri()

    def resolved_tracking_uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'var' / 'mlflow' / 'mlflow.db'}"

    # Validation -----------------------------------------------------------------------------------------------
    def validate(self) -> RunSpec:
        """Check every value against its setting's bounds, then the strategy's rules, then the workload's own;
        raise RunSpecError naming the first bad one."""
        for name, entry in SETTINGS.items():
            entry.check(getattr(self, name))
        environment = "" if self.tracking_uri else os.environ.get("MLFLOW_TRACKING_URI", "")
        if environment and (problem := uri_problem(environment, TRACKING_SCHEMES)):
            raise RunSpecError(f"MLFLOW_TRACKING_URI={shown(environment)} (tracking_uri is empty, so it is used): "
                               f"{problem}")
        definition = workloads.definition(self.workload)
        self.strategy_rules.check(self)
        if definition.check is not None:
            definition.check(self)
        return self

    def validate_sources(self) -> RunSpec:
        """Check that the data source exists (a local directory, an archive, or an http(s) URL)."""
        if self.definition.check_source is not None:
            self.definition.check_source(self)
        return self

    def validate_shards(self, num_shards: int, shard_rows: Sequence[int] | None = None) -> None:
        """Every worker needs a shard of its own (with more shards than workers, a worker takes several) and,
        given the shards' training rows, enough examples for one step of its strategy: checked here, on the
        driver, because inside a Spark task the same problem surfaces as an executor's stack trace."""
        if self.total_workers > num_shards:
            raise RunSpecError(
                f"nodes × workers_per_node = {self.total_workers} workers but the dataset has {num_shards} shards"
            )
        if shard_rows is None:
            return
        per_worker = [sum(shard_rows[rank::self.total_workers]) for rank in range(self.total_workers)]
        needed, because = self.examples_per_worker_needed()
        smallest = min(per_worker)
        if smallest < needed:
            raise RunSpecError(
                f"worker {per_worker.index(smallest)} gets {smallest} training examples but {self.strategy} needs "
                f"at least {needed} per worker ({because}): lower those settings, use fewer workers or more data"
            )

    def examples_per_worker_needed(self) -> tuple[int, str]:
        """The fewest examples a worker's shard may hold for one step of this spec's strategy, and why."""
        return self.strategy_rules.examples_per_worker_needed(self)

    # Transport ------------------------------------------------------------------------------------------------
    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> RunSpec:
        """Build from parsed flags or other text values, each converted to its setting's type; unknown names and
        values that do not convert are errors, names left out take the workload's defaults."""
        _refuse_unknown(values)
        return cls(**{name: SETTINGS[name].convert(value) for name, value in values.items()})

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> RunSpec:
        """Build from JSON values (DAG Params, a study's configuration, DEMO_CONF): as ``from_mapping``, but each
        value must already have its setting's JSON type."""
        return cls(**json_values(values))

    def with_changes(self, **changes: Any) -> RunSpec:
        return dataclasses.replace(self, **changes)

    def to_mapping(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in SETTINGS}

    def to_json(self) -> str:
        return json.dumps(self.to_mapping(), sort_keys=True)

    def to_args(self) -> list[str]:
        """Every job's command line (``--workers-per-node 2`` …), which :meth:`from_args` reads back."""
        args: list[str] = []
        for name, entry in SETTINGS.items():
            value = getattr(self, name)
            if value != "":  # an empty text setting is its default; leaving it out keeps shell-split lines intact
                args += [entry.flag, entry.format(value)]
        return args

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser, workload: str | None = None,
                      step: str | None = None) -> None:
        """One flag per setting, grouped by form section. Every flag is accepted, whatever the workload (the DAGs
        pass every setting to every step) and checked by :meth:`validate`; with ``workload``, --help lists only the
        shared settings and that workload's own, with its defaults, and for a data step before ``train`` not those
        only training reads. Internal settings are never listed."""
        parser.add_argument("--workload", dest="workload", default=None, metavar=_metavar(SETTINGS["workload"]),
                            help=_workload_help(workload))
        presets = sorted({f"{name} ({definition.name})" for definition in workloads.registry().values()
                          for name in definition.presets if workload is None or definition.name == workload})
        parser.add_argument("--preset", default=None, metavar="NAME",
                            help="fill the settings a named preset sets; flags given still win (presets: "
                                 f"{', '.join(presets) or 'none'})")
        listed = {entry.name for entry in workload_settings(workload)} if workload else set(SETTINGS)
        if workload and step and before_training(workload, step):
            listed -= {name for name, entry in SETTINGS.items() if entry.training_only}
        groups: dict[str, Any] = {}
        for entry in sorted(SETTINGS.values(), key=_section_order):
            if entry.name == "workload":
                continue
            shown_in_help = entry.name in listed and not entry.internal
            if shown_in_help and entry.section not in groups:
                groups[entry.section] = parser.add_argument_group(entry.section)
            (groups.get(entry.section) or parser).add_argument(
                entry.flag, dest=entry.name, default=None, metavar=_metavar(entry),
                help=_flag_help(entry, workload).replace("%", "%%") if shown_in_help else argparse.SUPPRESS)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunSpec:
        given = {name: getattr(args, name) for name in SETTINGS if getattr(args, name, None) is not None}
        if getattr(args, "preset", None):
            workload = SETTINGS["workload"].convert(given.get("workload", SETTINGS["workload"].default))
            given = {**preset_values(workload, args.preset), **given}
        return cls.from_mapping(given)

    def mlflow_params(self) -> dict[str, str]:
        """Every field plus the derived ``total_workers``; MLflow params are strings."""
        params = {name: SETTINGS[name].format(value) for name, value in self.to_mapping().items()}
        params["total_workers"] = str(self.total_workers)
        return params

    def differences(self, recorded: dict[str, Any]) -> list[str]:
        """The settings in which a recorded spec differs from this one, each as "name: recorded X, now Y". A
        setting added since it was recorded counts as equal while this spec holds its default; one that this
        version no longer has is named as such (what it did cannot be redone, so the run is not reused)."""
        mine = self.to_mapping()
        defaults = workload_defaults(self.workload)
        described = []
        for name in sorted(recorded.keys() | mine.keys()):
            before, now = recorded.get(name, defaults.get(name)), mine.get(name)
            if name not in mine and name not in defaults:
                described.append(f"{name}: recorded {shown(before)}, not a setting of this version")
            elif before != now:
                described.append(f"{name}: recorded {shown(before)}, now {shown(now)}")
        return described

    def refuse_other_run(self, recorded: dict[str, Any] | None) -> None:
        """Refuse a run directory whose recorded spec differs from this one (None: nothing recorded yet)."""
        changed = self.differences(recorded) if recorded is not None else []
        if changed:
            raise RunSpecError(f"run_name={self.run_name!r}: {self.run_uri()} already holds a run with other "
                               f"settings ({'; '.join(changed)}); choose another run_name")


def before_training(workload: str, step: str) -> bool:
    """Whether ``step`` is one of ``workload``'s data steps, before it trains (ingest, augment, shard, …)."""
    steps = workloads.definition(workload).steps
    return step in steps and TRAIN in steps and steps.index(step) < steps.index(TRAIN)


def _section_order(entry: Setting) -> int:
    """Where a setting's section comes: the trigger form's order, a section of another workload's after them."""
    return SECTIONS.index(entry.section) if entry.section in SECTIONS else len(SECTIONS)


def _metavar(entry: Setting) -> str:
    """The value's name in --help: declared, the choices (an empty one left out: the help says what it means),
    {true,false}, URI, N for an integer, X for a number, TEXT."""
    if entry.metavar:
        return entry.metavar
    if entry.name == "workload":
        return "{" + ",".join(workloads.names()) + "}"
    if entry.choices is not None:
        return "{" + ",".join(str(choice) for choice in entry.choices if choice != "") + "}"
    if entry.type is bool:
        return "{true,false}"
    if entry.uri_schemes:
        return "URI"
    return {int: "N", float: "X"}.get(entry.type, "TEXT")


def _workload_help(workload: str | None) -> str:
    default = SETTINGS["workload"].default
    if workload is None:
        return f"what to train (default: {default})"
    return f"what to train (default: {default}); the settings below are {workload}'s: --workload W --help lists W's"


def _flag_help(entry: Setting, workload: str | None) -> str:
    """One line: the setting's title and its default (the workload's, else every workload's that differs);
    `cloudburst settings` has the whole description."""
    title = entry.title.removesuffix(" (optional)")
    if workload is not None:
        return f"{title} (default: {_default_text(entry, workload_defaults(workload)[entry.name])})"
    owners = [definition.name for definition in workloads.registry().values() if entry in definition.settings]
    if owners:
        title += f" [{', '.join(owners)}]"
    per_workload = {name: definition.defaults[entry.name] for name, definition in workloads.registry().items()
                    if entry.name in definition.defaults and definition.defaults[entry.name] != entry.default}
    extra = "".join(f"; {name}: {_default_text(entry, value)}" for name, value in per_workload.items())
    return f"{title} (default: {_default_text(entry, entry.default)}{extra})"


def _default_text(entry: Setting, value: Any) -> str:
    if value == "":
        return f"empty, {entry.empty_means}" if entry.empty_means else "empty"
    return entry.format(value)


RunSpec = dataclasses.make_dataclass(
    "RunSpec",
    [(name, entry.type, dataclasses.field(default=UNSET)) for name, entry in SETTINGS.items()],
    bases=(_RunSpecMethods,),
    frozen=True,
)
RunSpec.__module__ = __name__  # pickling (Spark, Horovod) finds it as training.config.RunSpec
RunSpec.__doc__ = ("Everything that defines a training run. Every field is a setting (training.settings): a DAG "
                   "Param, a flag of every job and an MLflow param.")


def preset_values(workload: str, preset: str) -> dict[str, Any]:
    """The settings a workload's preset sets (checked like any setting); an unknown preset is a RunSpecError."""
    SETTINGS["workload"].check(workload)  # before it is looked up and quoted
    presets = workloads.definition(workload).presets
    if preset not in presets:
        raise RunSpecError(f"preset={shown(preset)}: {workload} has " + (
            f"the presets {', '.join(sorted(presets))}" if presets else "no presets"))
    return {name: SETTINGS[name].convert(value) for name, value in presets[preset].items()}


def shard_rows(manifest: dict[str, Any]) -> list[int] | None:
    """Each shard's training rows from a shards manifest; None when it does not list them (a manifest written by
    hand or by another tool), so only the shard count can be checked."""
    shards = manifest.get("shards")
    if not isinstance(shards, list) or not all(isinstance(shard, dict) and type(shard.get("rows")) is int
                                               for shard in shards):
        return None
    return [shard["rows"] for shard in shards]


def json_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """Run settings read from JSON, each of its setting's JSON type (no "3" for an integer), converted; unknown
    names are errors. Bounds are checked by ``RunSpec.validate`` (or each setting's ``check``)."""
    if not isinstance(values, Mapping):
        raise RunSpecError(f"run settings must be a JSON object of settings, e.g. {{\"epochs\": 3}}, not "
                           f"{shown(values)}")
    _refuse_unknown(values)
    return {name: SETTINGS[name].from_json(value) for name, value in values.items()}


def _refuse_unknown(values: Mapping[str, Any]) -> None:
    unknown = sorted(map(str, set(values) - set(SETTINGS)))
    if unknown:
        raise RunSpecError(f"unknown run setting(s): {shown_names(unknown)}")


def run_name_from(identifier: str, max_length: int = RUN_NAME_MAX_LENGTH) -> str:
    """A valid run name from any identifier (e.g. an Airflow run id): other characters become '-', a name must
    start with a letter or digit, and one too long is cut and ends in a digest of the whole identifier instead, so
    that the same identifier always gives the same name and two long ones that share a beginning do not."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", identifier).lstrip("_.-").rstrip("-") or "run"
    if len(name) <= max_length:
        return name
    digest = hashlib.sha1(identifier.encode(errors="backslashreplace")).hexdigest()[:8]
    return f"{name[:max_length - len(digest) - 1]}-{digest}"

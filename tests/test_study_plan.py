"""The scaling study's plan: grid expansion, run names, shared shard sets, the budget estimate and its refusal,
and one-line errors for bad study settings (no Spark: the plan is pure)."""

from __future__ import annotations

import pytest

from training import workload_registry as workloads
from training.config import RunSpec
from training.settings import RunSpecError
from training.study import plan as study_plan
from training.study.plan import BASELINE, CEILING, RUN, plan_study


def test_the_grid_expands_to_a_baseline_a_ceiling_per_strategy_and_shape_and_every_run_per_repetition():
    plan = plan_study({"strategies": "horovod,downpour", "nodes": "1", "workers_per_node": "1,2",
                       "n_push": "4,16", "repetitions": 2, "run_settings": {"train_limit": 2000, "epochs": 2}}, "s1")
    labels = [(c.role, c.label, c.repetition) for c in plan.configurations]
    once = [(BASELINE, "baseline-1x1"), (CEILING, "ceiling-horovod-1x2-t0"), (CEILING, "ceiling-downpour-1x2-t0"),
            # horovod 1x1 with all cores is the baseline itself; downpour's n_push values only for downpour
            (RUN, "horovod-1x2-t0"), (RUN, "downpour-1x1-t0-p4"), (RUN, "downpour-1x1-t0-p16"),
            (RUN, "downpour-1x2-t0-p4"), (RUN, "downpour-1x2-t0-p16")]
    assert labels == [(role, label, repetition) for repetition in (1, 2) for role, label in once]
    names = [c.settings["run_name"] for c in plan.configurations]
    assert len(set(names)) == len(names) and all(name.startswith("s1-") for name in names)
    ceiling = plan.configurations[2].settings
    assert (ceiling["strategy"], ceiling["workers_per_node"], ceiling["communication"]) == ("downpour", 2, False)
    assert all(c.settings["communication"] for c in plan.configurations if c.role != CEILING)
    assert all(c.settings["train_limit"] == 2000 and c.settings["epochs"] == 2 for c in plan.configurations)
    # every configuration is a run the pipeline accepts; 1 and 2 workers: two shard sets, shared by all
    for configuration in plan.configurations:
        RunSpec.from_mapping(configuration.settings).validate()
    assert sorted(s["nodes"] * s["workers_per_node"] for s in plan.shard_settings) == [1, 2]
    assert plan.to_mapping()["runs"] == [c.settings for c in plan.configurations]


def test_the_estimate_is_preparation_plus_each_runs_fixed_cost_and_its_examples_on_every_core():
    plan = plan_study({"strategies": "horovod", "workers_per_node": "1,2", "run_settings":
                       {"train_limit": 1000, "augment_copies": 1, "epochs": 2}})
    runs = len(plan.configurations)
    assert runs == 6  # baseline, ceiling 1x2, horovod 1x2, twice (repetitions default to 2)
    per_run = study_plan.FIXED_SECONDS_PER_RUN + 2 * 2000 * workloads.definition(
        "mnist_elastic_cnn").study_seconds_per_example / study_plan.CORES
    seconds = study_plan.PREPARATION_SECONDS + runs * per_run  # 120 + 6 × (50 + 0.8) = 424.8 s
    assert seconds == pytest.approx(424.8)
    assert plan.estimate_minutes == pytest.approx(7.1)  # 7.08 min, rounded up to a tenth


def test_a_grid_over_budget_is_refused_with_its_estimate():
    with pytest.raises(RunSpecError, match=r"16 runs are estimated at \d+ min, over its budget_minutes=10"):
        plan_study({"strategies": "horovod,downpour", "workers_per_node": "1,2", "n_push": "4,16",
                    "repetitions": 2, "budget_minutes": 10})


@pytest.mark.parametrize(("values", "message"), [
    ({"strategies": "horovod,ring"}, r"strategies='horovod,ring': must be a comma-separated list"),
    ({"strategies": ""}, r"strategies='': must not be empty"),
    ({"nodes": "1,two"}, r"nodes='1,two': must be comma-separated whole numbers"),
    ({"nodes": "0"}, r"nodes='0': every value must be ≥ 1"),
    ({"workers_per_node": "-1"}, r"workers_per_node='-1': must be comma-separated"),
    ({"n_push": "4,"}, r"n_push='4,': must be comma-separated"),
    ({"repetitions": 0}, r"repetitions=0: must be ≥ 1"),
    ({"repetitions": "many"}, r"repetitions='many': expected an integer in JSON, not a string"),
    ({"budget_minutes": 0}, r"budget_minutes=0.0: must be > 0"),
    ({"workload": "chess"}, r"workload='chess': must be one of"),
    ({"study_name": "a b"}, r"study_name='a b': may hold only"),
    ({"grid": "x"}, r"unknown study setting\(s\) grid"),
    ({"run_settings": {"strategy": "downpour"}}, r"run_settings sets strategy: the grid decides these"),
    ({"run_settings": {"epochs": 0}}, r"epochs=0: must be ≥ 1"),
    ({"run_settings": {"epochz": 3}}, r"epochz"),
    ({"workers_per_node": "65"}, r"workers_per_node='65': every value must be ≤ 64"),
    *[({"link_rates": bad, "run_settings": {"spark_master": "yarn"}}, rf"link_rates='{bad}': must be comma-separated")
      for bad in ("fast", "0mbit", "100mbit,", "1000gbit", "10 gbit", "100Mbit", "1e9", "10gbit;reboot", "-1gbit")],
    ({"link_rates": "1gbit"}, r"link_rates='1gbit' shape the namespace cluster's links: set \"spark_master\": "
                              r"\"yarn\""),
    ({"run_settings": {"link_rate": "1gbit"}}, r"run_settings sets link_rate: the grid decides these"),
])
def test_bad_study_settings_are_refused_in_one_line(values, message):
    with pytest.raises(RunSpecError, match=message) as caught:
        plan_study(values)
    assert "\n" not in str(caught.value)


def test_variants_repeat_every_run_but_not_the_baseline_and_ceilings():
    plan = plan_study({"strategies": "downpour", "workers_per_node": "1,2", "n_push": "4", "repetitions": 1,
                       "variants": [
        {}, {"server_optimizer": "adam", "server_learning_rate": 0.001}, {"staleness_aware": True}]}, "v")
    labels = [(c.role, c.label, c.variant) for c in plan.configurations]
    assert labels == [
        (BASELINE, "baseline-1x1", ""), (CEILING, "ceiling-downpour-1x2-t0", ""),
        # the baseline is plain Keras (Horovod 1x1) in every study: a Downpour 1x1 worker still talks to its server
        (RUN, "downpour-1x1-t0-p4-v0", ""),
        (RUN, "downpour-1x1-t0-p4-v1", "server_optimizer=adam server_learning_rate=0.001"),
        (RUN, "downpour-1x1-t0-p4-v2", "staleness_aware=True"),
        (RUN, "downpour-1x2-t0-p4-v0", ""),
        (RUN, "downpour-1x2-t0-p4-v1", "server_optimizer=adam server_learning_rate=0.001"),
        (RUN, "downpour-1x2-t0-p4-v2", "staleness_aware=True")]
    adam = plan.configurations[3].settings
    assert (adam["server_optimizer"], adam["server_learning_rate"]) == ("adam", 0.001)
    assert plan.configurations[0].settings["server_optimizer"] == "adagrad"
    assert plan.configurations[0].settings["strategy"] == "horovod"


@pytest.mark.parametrize(("variants", "message"), [
    ({"server_optimizer": "adam"}, "must be a list of objects"),
    (["adam"], "must be a list of objects"),
    ([{"strategy": "horovod"}], "a variant sets strategy: the grid decides these"),
    ([{"server_optimizer": "rmsprop"}], "server_optimizer='rmsprop': must be one of"),
    ([{}] * 9, "9 given, at most 8"),
])
def test_bad_variants_are_refused_in_one_line(variants, message):
    with pytest.raises(RunSpecError, match=message):
        plan_study({"variants": variants})


def test_a_workload_with_branches_is_refused():
    with pytest.raises(RunSpecError, match="speaker_verification"):
        plan_study({"workload": "speaker_verification"})


def test_link_profiles_run_every_communicating_configuration_at_each_rate_and_the_yardsticks_once():
    plan = plan_study({"strategies": "horovod,downpour", "nodes": "2", "workers_per_node": "1", "n_push": "4",
                       "repetitions": 1, "link_rates": "10gbit,100mbit",
                       "run_settings": {"spark_master": "yarn", "epochs": 2}}, "links")
    assert [(c.role, c.label, c.settings["link_rate"]) for c in plan.configurations] == [
        (BASELINE, "baseline-1x1", "10gbit"), (CEILING, "ceiling-horovod-2x1-t0", "10gbit"),
        (CEILING, "ceiling-downpour-2x1-t0", "10gbit"),
        (RUN, "horovod-2x1-t0-10gbit", "10gbit"), (RUN, "horovod-2x1-t0-100mbit", "100mbit"),
        (RUN, "downpour-2x1-t0-p4-10gbit", "10gbit"), (RUN, "downpour-2x1-t0-p4-100mbit", "100mbit")]
    for configuration in plan.configurations:
        RunSpec.from_mapping(configuration.settings).validate()
    # without link profiles every run leaves the links as they are
    plain = plan_study({"strategies": "downpour", "run_settings": {"epochs": 1}}, "plain")
    assert {c.settings["link_rate"] for c in plain.configurations} == {""}

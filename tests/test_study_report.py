"""A study's report from its runs in a real MLflow store (SQLite): rows as medians of repetitions, ratios against
the study's own baseline and ceilings (hand-computed), the ceiling check, the advisor's choices, and the parent run
with nested children, table, figures, recommendation and the champion model."""

from __future__ import annotations

import pytest

from training import tracking
from training.study import record, report
from training.study.plan import plan_study


def plan_of_three(tmp_path):
    return plan_study({"strategies": "horovod", "workers_per_node": "1,2", "repetitions": 2,
                       "run_settings": {"train_limit": 1000, "epochs": 1, "tracking_uri": f"sqlite:///{tmp_path}/m.db",
                                        "data_root": str(tmp_path / "data")}}, "tiny")


# samples/s per repetition, time to target (None: not reached), test accuracy
MEASURED = {"baseline-1x1": ([1000.0, 1100.0], [100.0, 90.0], 0.99),
            "ceiling-horovod-1x2-t0": ([1900.0, 1700.0], [None, None], 0.95),
            "horovod-1x2-t0": ([1700.0, 1500.0], [60.0, None], 0.991)}


def log_runs(plan, mlflow_client, experiment, measured=MEASURED, with_model: str = "") -> dict[str, str]:
    """A finished MLflow run per configuration, as tracking.log_training tags and names its metrics."""
    ids = {}
    seen: dict[str, int] = {}
    for configuration in plan.configurations:
        index = seen.get(configuration.label, 0)
        seen[configuration.label] = index + 1
        throughput, to_target, accuracy = measured[configuration.label]
        # threads_per_worker as every strategy tags it: 2 cores per node shared by its workers
        threads = 2 // configuration.settings["workers_per_node"]
        run = mlflow_client.create_run(experiment, tags={"cloudburst_run": configuration.settings["run_name"],
                                                         "threads_per_worker": str(threads)})
        metrics = {"samples_per_second_mean": throughput[index], "training_seconds": 60000 / throughput[index],
                   "wall_seconds": 60000 / throughput[index] + 30, "test_accuracy": accuracy, "bytes_moved": 1e6}
        if to_target[index] is not None:
            metrics["time_to_target_seconds"] = to_target[index]
        for name, value in metrics.items():
            mlflow_client.log_metric(run.info.run_id, name, value)
        if configuration.label == with_model:  # a real (tiny) model, logged as every evaluation logs one
            from training.workloads.mnist_elastic_cnn.model import simard_cnn

            tracking.log_model(run.info.run_id, simard_cnn(dense_units=4))
        mlflow_client.set_terminated(run.info.run_id, "FINISHED")
        ids[configuration.settings["run_name"]] = run.info.run_id
    return ids


def test_rows_are_medians_judged_against_the_studys_own_baseline_and_ceiling(tmp_path):
    plan = plan_of_three(tmp_path)
    uri = plan.base["tracking_uri"]
    mlflow_client = tracking.client(uri)
    experiment = tracking.experiment_id(mlflow_client, plan.workload, uri)
    log_runs(plan, mlflow_client, experiment)
    configurations = [c.to_mapping() for c in plan.configurations]
    rows = report.judge(report.rows_from_runs(configurations, report.child_runs(mlflow_client, experiment,
                                                                                configurations)))
    by_label = {row.label: row for row in rows}
    baseline, run = by_label["baseline-1x1"], by_label["horovod-1x2-t0"]
    assert baseline.samples_per_second == 1050 and baseline.time_to_target_seconds == 95
    assert baseline.cores == run.cores == 2  # 1 worker × 2 threads; 2 workers × 1 thread
    assert run.samples_per_second == 1600 and run.repetitions == 2
    assert run.speedup == pytest.approx(1600 / 1050) and run.efficiency == pytest.approx(1600 / 1050 / 2)
    assert run.ceiling_ratio == pytest.approx(1600 / 1800)
    assert run.communication_share == pytest.approx(200 / 1800)
    assert baseline.spread == pytest.approx(100 / 1050) and run.spread == pytest.approx(200 / 1600)
    # the study's noise: the largest spread between repetitions (horovod's 200 / 1,600)
    assert report.ceiling_tolerance(rows) == pytest.approx(0.125)
    assert report.ceiling_verdict(rows) == "passed: every run within its ceiling + 12% (the study's noise); " \
                                           "highest horovod-1x2-t0 at 89%"
    assert run.time_to_target_seconds is None  # reached in 1 of 2 repetitions: the median run did not
    assert by_label["ceiling-horovod-1x2-t0"].ceiling_ratio is None
    text = report.table_text(rows)
    assert "horovod-1x2-t0" in text and "1.52×" in text and "89%" in text and "not reached" in text
    assert report.table_csv(rows).splitlines()[0].startswith("label,role,strategy,nodes")


def test_a_run_above_its_ceiling_fails_the_study_naming_it(tmp_path):
    plan = plan_of_three(tmp_path)
    uri = plan.base["tracking_uri"]
    mlflow_client = tracking.client(uri)
    experiment = tracking.experiment_id(mlflow_client, plan.workload, uri)
    log_runs(plan, mlflow_client, experiment, {**MEASURED, "horovod-1x2-t0": ([2200.0, 2190.0], [60.0, 61.0], 0.99)})
    # 2,195 samples/s against the ceiling's 1,800: 122 %, beyond the study's noise (the ceiling's 200 / 1,800)
    configurations = [c.to_mapping() for c in plan.configurations]
    runs = report.child_runs(mlflow_client, experiment, configurations)
    with pytest.raises(report.StudyError, match=r"horovod-1x2-t0 measured 2,195 samples/s, 122% of its ceiling "
                                                 r"\(allowed 111%, the study's noise\)"):
        report.judge(report.rows_from_runs(configurations, runs))


def test_one_repetition_reports_a_run_above_its_ceiling_but_cannot_judge_it():
    rows = report.judge([row("baseline", "baseline", 1000), row("ceiling", "ceiling", 1500, nodes=2),
                         row("fast", samples=1800, nodes=2)])
    assert rows[2].ceiling_ratio == pytest.approx(1.2) and report.ceiling_tolerance(rows) is None
    assert report.ceiling_verdict(rows).startswith("not judged: one repetition gives no noise estimate (highest: "
                                                   "fast at 120% of its ceiling)")


def test_a_benchmark_names_the_contender_furthest_above_its_own_ceiling_and_allows_each_its_noise():
    # The benches (bench/strategies.py, bench/cluster_links.py) exit with this line: Downpour n_push=16 measured
    # 103 % of a plain Keras ceiling on 2026-12-01, the case the per-strategy ceilings exist for.
    assert report.above_ceiling({"horovod": 0.6, "downpour n_push=16": 1.0 + report.CEILING_NOISE_MARGIN}) is None
    assert report.above_ceiling({}) is None
    line = report.above_ceiling({"averaging": 1.05, "downpour n_push=16": 1.12, "horovod": 0.9})
    assert line == ("downpour n_push=16 measured 112.0% of its own ceiling (more than 103%, the noise allowed): the "
                    "ceiling did not measure the strategy's own work")
    # Each contender's own margin (its ceiling's spread between epochs), never below the fixed one.
    assert report.above_ceiling({"averaging": 1.05}, {"averaging": 0.1}) is None
    assert report.above_ceiling({"averaging": 1.05}, {"averaging": 0.01}).startswith("averaging measured 105.0%")
    line = report.above_ceiling({"a": 1.12, "b": 1.08}, {"a": 0.1})
    assert line.startswith("b measured 108.0% of its own ceiling (more than 103%")  # a is within its 110 %
    assert report.relative_spread([3477.0, 3828.0]) == pytest.approx(351 / 3652.5)
    assert report.relative_spread([5.0]) is None


def row(label, role="run", samples=1000.0, to_target=None, accuracy=0.99, nodes=1, training=60.0):
    return report.Row(label=label, role=role, strategy="horovod", nodes=nodes, workers_per_node=1, total_workers=nodes,
                      threads_per_worker=0, n_push=4, repetitions=1, samples_per_second=samples,
                      training_seconds=training, wall_seconds=training + 30, time_to_target_seconds=to_target,
                      test_accuracy=accuracy, bytes_moved=0.0, run_id=label, cores=2 * nodes)


def test_the_advisor_picks_per_goal_and_names_the_runner_up():
    rows = [row("baseline", "baseline", 1000, to_target=90, training=100), row("a", samples=1800, to_target=50,
            nodes=2, training=55), row("b", samples=1500, to_target=40, nodes=2, training=70),
            row("ceiling", "ceiling", 5000, to_target=1, nodes=2, training=10)]
    fastest = report.advise(rows, "fastest_to_target")
    assert (fastest.chosen.label, fastest.runner_up.label) == ("b", "a")  # the ceiling trains no usable model
    assert "b reached the target accuracy first: 40 s" in fastest.reason and "runner-up a: 50 s" in fastest.reason
    per_core = report.advise(rows, "samples_per_core_second")
    assert per_core.chosen.label == "baseline"  # 500 per core-second against a's 450 (2 nodes × 2 cores)
    cheapest = report.advise(rows, "cheapest_under_time_limit", time_limit_seconds=80)
    # the baseline's 100 s miss the limit; a: 55 s × 4 cores = 220 core-seconds, b: 70 × 4 = 280
    assert (cheapest.chosen.label, cheapest.runner_up.label) == ("a", "b")
    tighter = report.advise(rows, "cheapest_under_time_limit", time_limit_seconds=60)
    assert (tighter.chosen.label, tighter.runner_up) == ("a", None)
    assert report.advise(rows, "cheapest_under_time_limit", time_limit_seconds=5).chosen is None
    nobody = report.advise([row("baseline", "baseline", accuracy=0.9), row("a", accuracy=0.95)])
    assert nobody.chosen.label == "a" and "no run reached the target" in nobody.reason
    with pytest.raises(report.StudyError, match="goal='fun'"):
        report.advise(rows, "fun")
    with pytest.raises(report.StudyError, match="time limit -5 s: must be a positive number"):
        report.advise(rows, "cheapest_under_time_limit", time_limit_seconds=-5)


def test_a_closed_study_has_its_runs_nested_its_table_figures_advice_and_a_champion(tmp_path, capsys):
    plan = plan_of_three(tmp_path)
    uri = plan.base["tracking_uri"]
    parent = record.open_study(plan, uri)
    mlflow_client = tracking.client(uri)
    experiment = mlflow_client.get_experiment_by_name(plan.workload)
    assert experiment.tags[tracking.EXPERIMENT_KIND_TAG] == tracking.MODEL_TRAINING_KIND
    ids = log_runs(plan, mlflow_client, experiment.experiment_id, with_model="baseline-1x1")
    rows, advice = record.close_study(parent, uri, started=0.0)
    # horovod 1x2 reached the target in 1 of its 2 repetitions (its median run did not): the baseline, in 95 s
    assert advice.chosen.label == "baseline-1x1"
    parent_run = mlflow_client.get_run(parent)
    assert parent_run.info.status == "FINISHED"
    assert parent_run.data.tags[report.RECOMMENDATION_TAG] == "baseline-1x1"
    # one configuration that communicates: leaving it out leaves nothing to fit (tests/test_study_model.py fits)
    assert parent_run.data.tags["cloudburst.cost_model"].startswith("not fitted: 1 configuration(s)")
    assert parent_run.data.params["study.workers_per_node"] == "1,2"
    assert parent_run.data.params["study.configurations"] == "6"
    artifacts = {item.path for item in mlflow_client.list_artifacts(parent)}
    assert {"study.csv", "study_table.json", "speedup_and_efficiency.png", "time_to_target.png",
            "workers_per_node.png", "recommendation.md", record.PLAN_ARTIFACT} <= artifacts
    for run_id in ids.values():
        tags = mlflow_client.get_run(run_id).data.tags
        assert tags[report.PARENT_TAG] == parent and tags[report.STUDY_TAG] == "tiny"
    champion = mlflow_client.get_model_version_by_alias(plan.workload, record.CHAMPION_ALIAS)
    assert champion.run_id == advice.chosen.run_id
    advised = record.advise_study(parent, uri)  # what `cloudburst advise` prints it from
    assert (advised.champion_version, advised.champion_goal, advised.workload) == (
        str(champion.version), "fastest_to_target", plan.workload)
    from training.cli import main

    assert main(["advise", "--study", parent, "--tracking-uri", uri]) == 0
    assert (f"model registry: the study registered its choice for fastest to the target accuracy (training clock) "
            f"as version {champion.version} of '{plan.workload}', alias 'champion'") in capsys.readouterr().out
    # a second study moves the alias; the first champion keeps its version
    second = record.open_study(plan, uri)
    rows, again = record.close_study(second, uri)
    moved = mlflow_client.get_model_version_by_alias(plan.workload, record.CHAMPION_ALIAS)
    assert int(moved.version) == int(champion.version) + 1
    assert mlflow_client.get_model_version(plan.workload, champion.version).run_id == champion.run_id


def test_a_study_with_a_missing_run_fails_its_parent_run_with_the_reason(tmp_path):
    plan = plan_of_three(tmp_path)
    uri = plan.base["tracking_uri"]
    parent = record.open_study(plan, uri)
    with pytest.raises(report.StudyError, match="configuration baseline-1x1 .* has no finished MLflow run"):
        record.close_study(parent, uri)
    failed = tracking.client(uri).get_run(parent)
    assert failed.info.status == "FAILED" and "no finished MLflow run" in failed.data.tags["cloudburst.study_error"]


def test_cloudburst_advise_prints_the_table_and_the_choice_and_refuses_an_unknown_study(tmp_path, capsys, caplog):
    from training.cli import main

    plan = plan_of_three(tmp_path)
    uri = plan.base["tracking_uri"]
    parent = record.open_study(plan, uri)
    mlflow_client = tracking.client(uri)
    log_runs(plan, mlflow_client, mlflow_client.get_experiment_by_name(plan.workload).experiment_id)
    assert main(["advise", "--study", parent, "--tracking-uri", uri, "--goal", "samples_per_core_second"]) == 0
    printed = capsys.readouterr().out
    assert "horovod-1x2-t0" in printed and "recommended for most training samples per core-second" in printed
    assert f"study run {parent} ({plan.workload})" in printed
    assert "model registry" not in printed  # a study that was never closed registered nothing
    assert "cost model: not fitted: 1 configuration(s) that communicate" in printed
    assert main(["advise", "--study", "latest", "--tracking-uri", uri]) == 0
    assert "baseline-1x1 reached the target accuracy first: 95 s" in capsys.readouterr().out
    assert main(["advise", "--study", "nope", "--tracking-uri", uri]) == 2
    assert [entry.getMessage() for entry in caplog.records if entry.levelname == "ERROR"] == [
        f"--study 'nope': no such run in {uri}"]


def test_throughput_by_link_rate_is_drawn_only_for_a_study_with_link_profiles():
    assert report.link_rate_bits("100mbit") == 1e8 and report.link_rate_bits("10gbit") == 1e10
    with pytest.raises(report.StudyError, match="link rate 'fast'"):
        report.link_rate_bits("fast")
    rows = [row("baseline-1x1", "baseline", 1000), row("ceiling-horovod-2x1-t0", "ceiling", 1900, nodes=2)]
    for link, samples in (("10gbit", 1800), ("100mbit", 900)):
        rows.append(row(f"horovod-2x1-t0-{link}", samples=samples, nodes=2))
        rows[-1].link_rate = link
    figure = report.throughput_by_link_figure(rows, "t")
    [axis] = figure.axes
    [line] = [line for line in axis.get_lines() if line.get_label() == "horovod-2x1-t0"]
    assert list(line.get_xdata()) == [1e8, 1e10] and list(line.get_ydata()) == [900, 1800]
    assert report.throughput_by_link_figure(rows[:3], "t") is None  # one link rate: nothing to draw

"""The benches' results as the docs read them: each bench's `result_tables` turns a few fake rows into the values
and tables it publishes (docs/results/bench-<name>.json), every table renders through infra/docs/render.py, every
bench records exactly the runs of the make targets that run it, and a run with other arguments records nothing
(bench/results.py's rule). The keys checked here are the ones docs pages name in their markers: renaming one
breaks a test, not a page."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from docs_render import render

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCH = REPO_ROOT / "bench"
# Benches run as `python bench/x.py`: bench/ is their sys.path[0] (results, scaling, elephas_peer are siblings).
sys.path.insert(0, str(BENCH))
results = importlib.import_module("results")

# Every bench that publishes (elephas_peer.py is strategies.py's helper, run in its own environment: no result).
BENCHES = ("cluster_links", "cost_model_fit", "data_pipeline", "elastic_augmentation", "kws_budget",
           "kws_foreign_engine", "kws_generalisation", "roofline", "scaling", "speaker_verification", "strategies",
           "sv_transfer", "sv_trial_counts")



def bench(name: str):
    return importlib.import_module(name)


def columns(tables: dict, name: str) -> list[str]:
    return [field for _, field, _ in tables[name]["columns"]]


def check_renders(name: str, values: dict, tables: dict) -> None:
    """As publish writes them (JSON), every row has every column and each table renders with its rows."""
    document = json.loads(json.dumps({"command": f"make {name}", "recorded": "2026-12-06", "commit": "abc",
                                      "machine": {"cores": 2, "cpu": "test"}, "values": values, "tables": tables},
                                     default=results._plain))
    loaded = {name: document}
    for key, spec in document["tables"].items():
        fields = [field for _, field, _ in spec["columns"]]
        assert all(form in render.FORMATS for _, _, form in spec["columns"]), (key, spec["columns"])
        for row in spec["rows"]:
            assert set(fields) <= set(row), (key, sorted(set(fields) - set(row)))
        page = render.render_page(f"<!-- table {name} {key} --><!-- /table -->", loaded, "p.md")
        assert page.count("\n| ") == len(spec["rows"]) + 1, page  # the header and one line a row
        assert render.typed_figures(page, "p.md") == []


# The rule: only a make target's arguments are recorded --------------------------------------------------------

def makefile_runs() -> list[tuple[str, str, list[str]]]:
    """(make target, bench script's stem, arguments) for every bench line of the Makefile."""
    runs, target = [], None
    for line in (REPO_ROOT / "Makefile").read_text().splitlines():
        if match := re.match(r"^([\w-]+):", line):
            target = match.group(1)
        elif match := re.match(r"^\t\$\(TRAINING_BIN\)/python bench/(\w+)\.py(.*)$", line):
            runs.append((target, match.group(1), shlex.split(match.group(2))))
    return runs


def test_every_bench_records_the_runs_of_the_make_targets_that_run_it_under_its_own_name():
    runs = makefile_runs()
    assert {stem for _, stem, _ in runs} == set(BENCHES) - {"cost_model_fit"}
    names = []
    for stem in BENCHES:
        declared = bench(stem).RUNS
        names += list(declared)
        made = [(target, arguments) for target, script, arguments in runs if script == stem]
        for _, arguments in made:  # every make target's run is recorded …
            assert arguments in [list(entry[1]) for entry in declared.values()], (stem, arguments)
        for name, (command, arguments) in declared.items():  # … as that target's command
            assert name.startswith("bench-")
            if stem != "cost_model_fit":
                assert (command.removeprefix("make "), list(arguments)) in made, (stem, name, command)
    assert len(names) == len(set(names))
    assert {"bench-scaling", "bench-kws", "bench-sv-scaling-model_a", "bench-sv-scaling-model_b", "bench-strategies",
            "bench-elastic-augmentation", "bench-data-pipeline", "bench-roofline", "bench-sv", "bench-sv-trials",
            "bench-kws-generalisation", "bench-kws-budget", "bench-cluster", "bench-cost-model-fit",
            "bench-kws-foreign-engine", "bench-kws-leave-one-engine-out", "bench-sv-transfer"} == set(names)


def test_only_a_make_target_s_arguments_are_recorded():
    parser = argparse.ArgumentParser()
    parser.add_argument("--workload", default="mnist")
    parser.add_argument("--epochs", type=int, default=6)
    runs = {"bench-x": ("make bench", []), "bench-y": ("make bench-y", ["--workload", "kws"])}
    assert results.recorded_as(parser, parser.parse_args([]), runs) == ("bench-x", "make bench")
    assert results.recorded_as(parser, parser.parse_args(["--epochs", "6"]), runs) == ("bench-x", "make bench")
    assert results.recorded_as(parser, parser.parse_args(["--workload", "kws"]), runs) == ("bench-y", "make bench-y")
    assert results.recorded_as(parser, parser.parse_args(["--epochs", "1"]), runs) is None
    assert results.recorded_as(parser, parser.parse_args(["--workload", "kws", "--epochs", "2"]), runs) is None


def test_a_bench_run_with_the_defaults_publishes_and_a_smaller_one_does_not(monkeypatch, capsys):
    published = []
    monkeypatch.setattr(results, "publish", lambda *arguments: published.append(arguments))
    sv_trials = bench("sv_trial_counts")
    assert sv_trials.main(["--sizes", "300x2"]) == 0
    assert published == [] and "not recorded in docs/results" in capsys.readouterr().out
    assert sv_trials.main([]) == 0
    [(name, command, values, tables)] = published
    assert (name, command) == ("bench-sv-trials", "make bench-sv-trials")
    assert values["smallest_meeting_aims"] == "600x5" and set(values["sizes"]) == set(sv_trials.DEFAULT_SIZES)


def test_a_values_key_can_stand_in_a_marker():
    assert results.key("keras, 1 process, 2 thr") == "keras_1_process_2_thr"
    assert results.key("downpour n_push=4") == "downpour_n_push_4"
    assert results.key("ceiling (2 × 1 thread)") == "ceiling_2_1_thread"
    assert results.key("8 1 Gbit/s") == "8_1_gbit_s"


# Each bench's values and tables ---------------------------------------------------------------------------------

def test_sv_trial_counts():
    module = bench("sv_trial_counts")
    rows = [{"speakers": 300, "repetitions": 2, "clips": 13_500, "sv_eval_speakers": 77, "same_word_targets": 99,
             "hard_non_targets": 3_780, "different_word_targets": 3_135, "different_word_non_targets": 100_000},
            {"speakers": 600, "repetitions": 5, "clips": 45_000, "sv_eval_speakers": 156, "same_word_targets": 1_140,
             "hard_non_targets": 34_416, "different_word_targets": 10_092, "different_word_non_targets": 100_000}]
    values, tables = module.result_tables(rows)
    assert values["sizes"]["600x5"]["same_word_targets"] == 1_140
    assert values["smallest_meeting_aims"] == "600x5" and values["aims"] == module.AIMS
    assert columns(tables, "sizes") == ["speakers", "repetitions", "clips", "sv_eval_speakers", "same_word_targets",
                                        "hard_non_targets", "different_word_targets", "different_word_non_targets",
                                        "aims_met"]
    assert [row["aims_met"] for row in tables["sizes"]["rows"]] == ["no", "yes"]
    check_renders("bench-sv-trials", values, tables)


def test_kws_foreign_engine():
    module = bench("kws_foreign_engine")
    voice = {"keyword_accuracy": 0.5, "open_set_false_accept_rate": 0.25, "keyword_accuracy_at_threshold": 0.2,
             "open_set_false_accept_rate_at_threshold": 0.05}
    run = {"run": "demo-full-horovod-1x2", "corpus_keyword_accuracy": 0.98, "keyword_accuracy": 0.5,
           "open_set_false_accept_rate": 0.28, "closed_set_false_accept_rate": 0.14, "keyword_threshold": 0.9876,
           "keyword_accuracy_at_threshold": 0.24, "open_set_false_accept_rate_at_threshold": 0.03,
           "voices": {"sam": voice, "elf": voice}, "keywords": {"yes": {"accuracy": 0.6, "mistaken_for": "no 20 %"}}}
    values, tables = module.result_tables([run])
    assert values["demo_full_horovod_1x2"]["keyword_accuracy"] == 0.5
    assert set(tables) == {"runs", "keywords_demo_full_horovod_1x2", "voices_demo_full_horovod_1x2"}
    check_renders("bench-kws-foreign-engine", values, tables)


def test_elastic_augmentation():
    values, tables = bench("elastic_augmentation").result_tables([7_000.0, 7_600.0, 7_700.0],
                                                                 [40_000.0, 45_600.0, 44_000.0], 4096)
    assert values["scipy_images_per_second"] == 7_600.0 and values["vectorised_images_per_second"] == 44_000.0
    assert values["ratio"] == pytest.approx(44_000 / 7_600)
    assert {"images", "rounds", "alpha", "sigma"} <= set(values) and values["rounds"] == 3
    assert columns(tables, "rates") == ["implementation", "images_per_second", "ratio"]
    assert columns(tables, "rounds") == ["round", "scipy", "vectorised", "ratio"]
    check_renders("bench-elastic-augmentation", values, tables)


def test_data_pipeline():
    module = bench("data_pipeline")
    labels = dict(zip(module.STEPS, ["ingest", "spark start", "augment k=1", "shard N=2"], strict=True))
    values, tables = module.result_tables({"ingest": 0.7, "spark_start": 2.1, "augment": 8.4, "shard": 2.2},
                                          labels, "local[*]")
    assert values["total"] == pytest.approx(13.4) and values["augment"] == 8.4 and values["master"] == "local[*]"
    assert columns(tables, "steps") == ["step", "seconds"]
    assert [row["step"] for row in tables["steps"]["rows"]] == ["ingest", "spark start", "augment k=1",
                                                                "shard N=2", "total"]
    check_renders("bench-data-pipeline", values, tables)


def _measured(rates: list[float], seconds: float | None, accuracy: float, eers: list[float] | None = None) -> dict:
    """A contender's result with one epoch of 10 s per rate (and its development EER, given ``eers``)."""
    return {"epochs": [{"epoch": n, "samples_per_second": rate, "epoch_seconds": 10.0,
                        **({"dev_eer": eers[n - 1]} if eers else {})} for n, rate in enumerate(rates, 1)],
            "time_to_target_seconds": seconds, "final_accuracy": accuracy}


def test_scaling():
    module = bench("scaling")
    measured = {"ceiling (2 × 1 thread)": {"samples_per_second": 1000.0},
                "horovod 1x1": _measured([400, 500, 500], 60.0, 0.991, [0.3, 0.2, 0.1]),
                "horovod 1x2": _measured([800, 900, 900], 40.0, 0.990, [0.2, 0.1, 0.08]),
                "keras, 1 process, 2 thr": _measured([600, 700, 700], None, 0.985, [0.3, 0.2, 0.09])}
    rows = [module.scaling_row(name, run, 1000.0) for name, run in measured.items()]
    target_eer, eer_rows = module.eer_table({name: measured[name] for name in list(measured)[1:]}, None)
    sweep = [module.sweep_row(128, True, 4, 850.0, 1000.0)]
    settings = {"workload": "mnist_elastic_cnn", "branch": None, "batch": 128, "epochs": 6, "target_accuracy": 0.99,
                "train_examples": 100_000, "seconds": 600.0}
    values, tables = module.result_tables(settings, rows, target_eer, eer_rows, sweep)
    assert set(values["contenders"]) == {"ceiling_2_1_thread", "horovod_1x1", "horovod_1x2", "keras_1_process_2_thr"}
    assert values["contenders"]["horovod_1x2"] == {"samples_per_second": 900, "of_ceiling": 0.9,
                                                   "seconds_to_target": 40.0, "final_accuracy": 0.990}
    assert values["contenders"]["keras_1_process_2_thr"]["seconds_to_target"] is None
    assert values["speedup_to_target"] == pytest.approx(1.5) and values["of_ceiling_1x2"] == pytest.approx(0.9)
    assert values["throughput_1x2_over_1x1"] == pytest.approx(1.8)
    assert values["target_eer"] == 0.1 and values["speedup_to_eer"] == pytest.approx(30 / 20)
    assert [row["epoch"] for row in tables["eer"]["rows"]] == [3, 2, 3]
    assert set(values["seconds_to_eer"]) == {"horovod_1x1", "horovod_1x2", "keras_1_process_2_thr"}
    assert columns(tables, "scaling") == ["configuration", "samples_per_second", "of_ceiling", "seconds_to_target",
                                          "final_accuracy"]
    assert columns(tables, "eer") == ["configuration", "seconds_to_eer", "epoch", "final_dev_eer"]
    assert columns(tables, "sweep") == ["batch", "fp16", "passes", "samples_per_second",
                                        "ceiling_samples_per_second", "of_ceiling"]
    check_renders("bench-scaling", values, tables)
    plain, plain_tables = module.result_tables(settings, rows)  # KWS: no EER table, no sweep
    assert set(plain_tables) == {"scaling"} and "target_eer" not in plain


def test_strategies():
    module = bench("strategies")
    horovod = {**_measured([800, 900], 40.0, 0.991), "bytes_moved": 2.5e9, "bytes_estimated": True}
    downpour = {**_measured([850, 950], 35.0, 0.990), "bytes_moved": 1.2e9}
    rows = [module.table_row("keras, 1 process, 2 thr", _measured([600, 700], 70.0, 0.989), None),
            module.table_row("horovod 1x2", horovod, 1000.0),
            module.table_row("  ↳ its ceiling", _measured([900, 1000], None, 0.5), 1000.0, ceiling_of="horovod 1x2"),
            module.table_row("downpour n_push=4", downpour, 1000.0),
            module.table_row("  ↳ its ceiling", _measured([900, 1000], None, 0.5), 1000.0,
                             ceiling_of="downpour n_push=4"),
            module.table_row("elephas synch/epoch", {**_measured([300, 350], 140.0, 0.985), "bytes_moved": 3e9},
                             None)]
    settings = {"batch": 128, "epochs": 6, "target_accuracy": 0.99, "ceiling_epochs": 2, "train_examples": 100_000,
                "seconds": 900.0}
    values, tables = module.result_tables(settings, rows)
    assert set(values["contenders"]) == {"keras_1_process_2_thr", "horovod_1x2", "downpour_n_push_4",
                                         "elephas_synch_epoch"}
    assert set(values["contenders"]["horovod_1x2"]) == {"samples_per_second", "of_ceiling", "seconds_to_target",
                                                        "final_accuracy", "gigabytes_moved"}
    assert values["ceilings"] == {"horovod_1x2": 1000, "downpour_n_push_4": 1000}
    assert values["fastest"] == "downpour n_push=4" and values["fastest_seconds"] == 35.0
    assert values["speedup_over_elephas"] == pytest.approx(4.0) and values["speedup_over_keras"] == pytest.approx(2.0)
    assert values["downpour_best_of_ceiling"] == pytest.approx(0.95)
    assert values["accuracy_below_horovod"]["downpour_n_push_4"] == pytest.approx(0.1)
    assert columns(tables, "strategies") == ["configuration", "samples_per_second", "of_ceiling",
                                             "seconds_to_target", "final_accuracy", "gigabytes_moved",
                                             "bytes_counted"]
    assert tables["strategies"]["rows"][2]["configuration"] == "↳ ceiling of horovod 1x2"
    assert tables["strategies"]["rows"][1]["bytes_counted"] == "computed"
    check_renders("bench-strategies", values, tables)


def test_cluster_links():
    module = bench("cluster_links")

    def run(rate: float, seconds: float | None = 100.0, **more) -> dict:
        return {"samples_per_second": rate, "epoch_rates": [rate / 2, rate, rate * 1.01], "final_accuracy": 0.99,
                "time_to_target_seconds": seconds, "bytes_moved": 6.7e9, "wire_bytes": 7.1e9, **more}

    measured = {"settings": {"nodes": 3, "batch": 128, "epochs": 6}, "1x1": run(500.0, 300.0),
                "ceilings": {"horovod": run(1500.0), "downpour": run(1600.0)},
                "links": {link: {"up_seconds": 30.0, "down_seconds": 5.0,
                                 "runs": {"horovod 3x1": run(1200.0), "downpour n_push=4": run(1300.0, None)}}
                          for link in ("10gbit", "100mbit")}}
    values, tables = module.result_tables(measured, 0.99)
    assert values["one_by_one"] == {"samples_per_second": 500.0, "seconds_to_target": 300.0}
    assert set(values["ceilings"]["horovod"]) == {"samples_per_second", "epoch_spread"}
    assert values["ceilings"]["horovod"]["samples_per_second"] == 1500.0
    horovod = values["runs"]["10gbit"]["horovod_3x1"]
    assert horovod["speedup"] == pytest.approx(2.4) and horovod["of_ceiling"] == pytest.approx(0.8)
    assert horovod["gigabytes_moved"] == pytest.approx(6.7) and horovod["gigabytes_on_the_wire"] == pytest.approx(7.1)
    assert values["runs"]["100mbit"]["downpour_n_push_4"]["seconds_to_target"] is None
    assert values["cluster"]["100mbit"] == {"up_seconds": 30.0, "down_seconds": 5.0}
    assert columns(tables, "runs") == ["link", "configuration", "samples_per_second", "speedup", "of_ceiling",
                                       "seconds_to_target", "final_accuracy", "gigabytes_moved",
                                       "gigabytes_on_the_wire"]
    assert columns(tables, "cluster") == ["link", "up_seconds", "down_seconds"]
    check_renders("bench-cluster", values, tables)


def test_cost_model_fit():
    module = bench("cost_model_fit")
    predictions = [{"configuration": "10gbit horovod 3x1", "measured": 1200.0, "predicted": 1100.0, "error": 0.083},
                   {"configuration": "1gbit averaging", "measured": 900.0, "predicted": None, "error": None}]
    extrapolation = {name: [(nodes, link, 1000.0 * nodes, 0.8 * nodes) for nodes in (8, 64)
                            for link in ("1 Gbit/s", "10 Gbit/s")] for name in ("horovod", "downpour n_push=4")}
    values, tables = module.result_tables("20261205-120000.json", {"horovod": 0.5}, {"horovod": 0.002},
                                          predictions, 0.083, extrapolation)
    assert values["fitted_to"] == "20261205-120000.json" and values["median_error"] == 0.083
    assert values["overlap"] == {"horovod": 0.5} and values["message_seconds"] == {"horovod": 0.002}
    assert values["errors"] == {"10gbit_horovod_3x1": 0.083, "1gbit_averaging": None}
    assert values["extrapolated_speedup"]["downpour_n_push_4"]["64_10_gbit_s"] == pytest.approx(51.2)
    assert columns(tables, "predictions") == ["configuration", "measured", "predicted", "error"]
    assert columns(tables, "extrapolation") == ["strategy", "8_1_gbit_s", "8_10_gbit_s", "64_1_gbit_s",
                                                "64_10_gbit_s"]
    check_renders("bench-cost-model-fit", values, tables)


def test_roofline():
    module = bench("roofline")

    def row(label: str, precision: str, step: float, fed: float) -> dict:
        return {"label": label, "workload": "kws_densenet_bilstm", "settings": {}, "precision": precision,
                "parameters": 250_000, "batch": 64, "forward_flop_counted": 40_000_000,
                "forward_flop_by_hand": 10_000_000, "training_flop_per_example": 150_000_000,
                "step_samples_per_second": step, "fed_samples_per_second": fed}

    rows = [row("keyword spotter", "float32", 200.0, 180.0), row("keyword spotter", "mixed_bfloat16", 300.0, 250.0)]
    profiled = {**rows[0], "profile": {"steps": 10, "wall_seconds": 4.0, "python_per_step_seconds": 0.002,
                                       "executor_between_ops_seconds": 1.0, "function_seconds_per_step": 0.3,
                                       "op_seconds_by_kind": {"LSTM recurrence": 6.0, "convolutions": 3.0}}}
    values, tables = module.result_tables(rows, {"float32": 100.0, "bfloat16": 400.0}, 2, profiled)
    float32 = values["models"]["keyword_spotter"]["float32"]
    assert float32["gflops"] == pytest.approx(30.0) and float32["of_fp32"] == pytest.approx(0.3)
    assert float32["of_bf16"] == pytest.approx(0.075) and float32["training_mflop_per_example"] == 150.0
    assert set(float32) == {"parameters", "batch", "training_mflop_per_example", "step_samples_per_second",
                            "fed_samples_per_second", "gflops", "of_fp32", "of_bf16"}
    assert values["against_float32"]["keyword_spotter"]["mixed_bfloat16"] == pytest.approx({"step": 1.5,
                                                                                            "fed": 250 / 180})
    assert values["threads"] == 2 and values["peaks_gflops"] == {"float32": 100.0, "bfloat16": 400.0}
    assert values["profile"]["model"] == "keyword spotter" and values["profile"]["ms_per_step"] == pytest.approx(400)
    assert set(values["profile"]) == {"model", "ms_per_step", "python_ms_per_step", "pipeline_ms_per_step"}
    assert columns(tables, "models") == ["model", "precision", "parameters", "training_mflop_per_example", "batch",
                                         "step_samples_per_second", "fed_samples_per_second", "gflops", "of_fp32",
                                         "of_bf16"]
    assert columns(tables, "profile") == ["kind", "ms_per_step", "share"]
    assert [r["share"] for r in tables["profile"]["rows"]] == pytest.approx([0.6, 0.3, 0.1])
    check_renders("bench-roofline", values, tables)
    no_bf16, no_profile = module.result_tables(rows[:1], {"float32": 100.0}, 2)
    assert set(no_profile) == {"models"} and no_bf16["models"]["keyword_spotter"]["float32"]["of_bf16"] is None


def test_speaker_verification():
    module = bench("speaker_verification")
    metric = {"eer": 0.05, "eer_threshold": 0.4, "eer_ci_low": 0.04, "eer_ci_high": 0.06, "min_dcf_p01": 0.5,
              "min_dcf_p05": 0.3, "act_dcf_p05": 0.35, "cllr": 0.4}
    systems = ("model_a_densenet_bilstm", "model_b_tdnn", "equal_weight_fusion", "logistic_fusion")
    metrics = {system: {condition: dict(metric) for condition in ("same_word", "different_word", "hard", "all")}
               for system in systems}
    differences = {"different_word": {"difference": -0.01, "ci_low": -0.02, "ci_high": -0.005},
                   "all": {"difference": -0.004, "ci_low": -0.01, "ci_high": 0.002}}
    models = {"model_a_densenet_bilstm": {"features": "log_mel", "parameters": 300_000, "train_seconds": 600.0,
                                          "history": [], "train_examples_per_second": 150.0}}
    transfer = {"scratch_final_dev_eer": 0.07, "keyword_spotter": {},
                **{variant: {"final_dev_eer": 0.06, "epochs_to_target": 5 if variant != "frozen" else None,
                             "seconds_to_target": 300.0 if variant != "frozen" else None, "rows": []}
                   for variant in ("scratch", "frozen", "fine_tuned")}}
    values, tables = module.result_tables(metrics, differences, {"all": {"targets": 700, "non_targets": 50_000}},
                                          models, transfer, {"sv_train": 176, "sv_dev": 47, "sv_eval": 77})
    assert set(values["systems"]) == set(systems)
    assert values["systems"]["logistic_fusion"]["different_word"] == {name: metric[name] for name in module.METRICS}
    assert values["fusion_minus_best"]["different_word"]["difference"] == -0.01
    assert values["models"]["model_a_densenet_bilstm"] == {"parameters": 300_000, "train_seconds": 600.0,
                                                           "train_examples_per_second": 150.0}
    assert values["transfer"]["frozen"]["epochs_to_target"] is None and values["transfer"]["scratch_final_dev_eer"]
    assert values["trial_counts"]["all"]["targets"] == 700 and values["speakers_per_set"]["sv_eval"] == 77
    assert columns(tables, "systems") == ["system", "condition", *module.METRICS]
    assert columns(tables, "differences") == ["condition", "difference", "ci_low", "ci_high", "verdict"]
    assert [row["verdict"] for row in tables["differences"]["rows"]] == ["excludes 0", "includes 0"]
    assert columns(tables, "transfer") == ["variant", "final_dev_eer", "epochs_to_target", "seconds_to_target"]
    check_renders("bench-sv", values, tables)
    _, without = module.result_tables(metrics, differences, {}, models, {}, {})
    assert set(without) == {"systems", "differences"}


def test_kws_budget():
    module = bench("kws_budget")
    arms = module.arms(argparse.Namespace(speakers=200, factor=4, epochs=32))
    # The same examples seen: the passes arm's epochs and the data arm's speakers are both × factor.
    assert arms["passes"]["speakers"] * arms["passes"]["epochs"] == arms["data"]["speakers"] * arms["data"]["epochs"]
    result = {"epochs": [{"samples_per_second": 100.0, "epoch_seconds": 40.0, "train_accuracy": accuracy}
                         for accuracy in (0.5, 0.7, 0.8, 0.9)],
              "evaluations": [{"train_seconds": 40.0 * epoch, "epoch": epoch, "val_accuracy": accuracy}
                              for epoch, accuracy in ((1, 0.5), (2, 0.75), (3, 0.85), (4, 0.9))]}
    spec = argparse.Namespace(speakers=200, epochs=4)
    metrics = {"training_seconds": 160.0, "test_accuracy": 0.88, "open_set_false_accept_rate": 0.2,
               "closed_set_false_accept_rate": 0.1, "samples_per_second_mean": 100.0}
    row = module.figures("passes", spec, metrics, result)
    assert row["examples_seen"] == 16_000 and row["curve"]["examples"] == [4_000, 8_000, 12_000, 16_000]
    assert (row["val_quarter"], row["val_half"], row["val_end"]) == (0.5, 0.75, 0.9)
    assert row["train_accuracy_end"] == 0.9 and row["curve"]["epoch_minutes"][-1] == pytest.approx(160 / 60)
    measured = {"settings": {"factor": 4}, "data_seconds": 300.0, "rows": [row, {**row, "arm": "data"}]}
    values, tables = module.result_tables(measured)
    assert values["data_minutes"] == 5.0 and values["factor"] == 4 and set(values) >= {"passes", "data"}
    assert "curve" not in values["passes"] and values["data"]["test_accuracy"] == 0.88
    assert [row["arm"] for row in tables["arms"]["rows"]] == ["passes", "data"]
    check_renders("bench-kws-budget", values, tables)


def test_kws_budget_stops_every_arm_when_one_fails(tmp_path, monkeypatch):
    module = bench("kws_budget")
    arm = tmp_path / "arm"  # stands in for `cloudburst`: the "slow" arm sleeps, the "broken" one fails at once
    arm.write_text("#!/bin/sh\n[ \"$2\" = slow ] && exec sleep 617\nexit 3\n")
    arm.chmod(0o755)
    monkeypatch.setattr(module, "CLI", str(arm))
    monkeypatch.setattr(module, "BENCH_ROOT", tmp_path)
    monkeypatch.setattr(module, "POLL_SECONDS", 0.1)

    class Spec:
        def __init__(self, name: str) -> None:
            self.name = name

        def to_args(self) -> list[str]:
            return [self.name]

    started = time.monotonic()
    with pytest.raises(SystemExit, match="arm broken: cloudburst train failed"):
        module.train_side_by_side({"slow": Spec("slow"), "broken": Spec("broken")})  # the slow one waited on first
    assert time.monotonic() - started < 30
    assert subprocess.run(["pgrep", "-f", "sleep 617"], capture_output=True).returncode == 1  # not left training


@pytest.mark.parametrize(("flags", "message"), [
    (["--factor", "0"], "epochs=0: must be ≥ 1"), (["--speakers", "-3"], "speakers=-3: must be ≥ 1"),
    (["--speakers", "600"], "speakers=2400: must be ≤ 2000"), (["--epochs", "0"], "epochs=0: must be ≥ 1"),
])
def test_kws_budget_refuses_a_flag_the_run_settings_bound_in_one_line(tmp_path, monkeypatch, capsys, flags,
                                                                      message):
    module = bench("kws_budget")
    monkeypatch.setattr(module, "BENCH_ROOT", tmp_path / "bench")
    monkeypatch.setattr(sys, "argv", ["kws_budget.py", *flags])
    with pytest.raises(SystemExit) as stopped:
        module.main()
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert stopped.value.code == 2 and message in error and "Traceback" not in error
    assert not (tmp_path / "bench").exists()  # nothing made before the flags were checked


def test_kws_generalisation():
    module = bench("kws_generalisation")

    def figures(held_out: float, false_accepts: float) -> dict:
        return {"held_out": held_out, "worst_held_out": held_out - 0.02, "same_generator": 0.98,
                "false_accepts": false_accepts, "test_accuracy": 0.97, "samples_per_second": 300.0,
                "wall_seconds": 900.0}

    measured = {"settings": {"speakers": 200}, "seconds": 3600.0,
                "augmentation": [("none", figures(0.90, 0.06)), ("full online set: a,b", figures(0.96, 0.03))],
                "leave_one_out": [("espeak-ng", figures(0.95, 0.04))]}
    values, tables = module.result_tables(measured)
    assert values["speakers"] == 200 and values["targets"] == module.TARGETS and values["seconds"] == 3600.0
    assert set(values["augmentation"]) == {"none", "full_online_set_a_b"}
    assert set(values["leave_one_out"]["espeak_ng"]) == set(module.FIGURES)
    assert values["augmentation"]["none"]["held_out"] == 0.90
    assert columns(tables, "augmentation") == ["run", "held_out", "worst_held_out", "same_generator",
                                               "false_accepts", "samples_per_second", "wall_seconds", "missed"]
    assert [row["missed"] for row in tables["augmentation"]["rows"]] == [
        "held out, worst family, false accepts", "none"]
    check_renders("bench-kws-generalisation", values, tables)
    _, only_one = module.result_tables({**measured, "leave_one_out": []})
    assert set(only_one) == {"augmentation"}

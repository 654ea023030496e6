"""Trust at every boundary: names that would leave or hide their directory, URIs with impossible ports or schemes,
JSON that is too deep, too large, duplicated or of the wrong type, prefixes taken for flags and grids Airflow cannot
map are all refused in one line naming the setting, before anything runs (issue 39, points 7-11)."""

from __future__ import annotations

import ast
import itertools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from training import strict_json
from training.config import RunSpec, RunSpecError, all_settings, json_values, run_name_from, setting
from training.settings import RUN_NAME_MAX_LENGTH, RUN_NAME_PATTERN, shown
from training.study import plan as study_plan
from training.study.plan import STUDY_NAME_MAX_LENGTH, plan_study

REPO_ROOT = Path(__file__).resolve().parents[1]
TEN_MEGABYTES = 10_000_000


def assert_one_short_line(error: BaseException, name: str) -> None:
    message = str(error)
    assert "\n" not in message and len(message) < 400, message[:500]
    assert message.startswith(f"{name}=") or name in message, message


# 7. Names ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["..", ".", "...", ".hidden", "-rf", "_private", "a/../b", "../runs", "a b", "é"])
def test_a_run_name_that_leaves_hides_or_flags_its_directory_is_refused(name):
    with pytest.raises(RunSpecError, match=r"run_name=.*may hold only letters, digits") as caught:
        RunSpec(run_name=name).validate()
    assert_one_short_line(caught.value, "run_name")


def test_a_run_name_dot_dot_from_the_command_line_is_refused_before_anything_is_written(caplog, tmp_path):
    from training import cli

    assert cli.main(["train", "--run-name", "..", "--data-root", str(tmp_path)]) == 2
    assert "run_name='..': may hold only" in caplog.text
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("length", [RUN_NAME_MAX_LENGTH + 1, 300, 100_000])
def test_a_run_name_over_the_cap_is_refused_and_one_at_the_cap_is_accepted(length):
    with pytest.raises(RunSpecError, match=rf"run_name=.*\({length:,} characters\): must be at most "
                                           rf"{RUN_NAME_MAX_LENGTH} characters"):
        RunSpec(run_name="r" * length).validate()
    RunSpec(run_name="r" * RUN_NAME_MAX_LENGTH).validate()


def test_the_run_name_rule_is_the_form_s_rule():
    schema = setting("run_name").json_schema("manual")
    assert schema["maxLength"] == RUN_NAME_MAX_LENGTH
    for refused in ("..", ".", ".x", "-x", "a/b"):
        assert not re.search(schema["pattern"], refused), refused
    assert re.search(schema["pattern"], "manual__2026-11-30T05-35-55.612960-00-00")
    for entry in all_settings():  # every text setting has a length the form checks too
        if entry.type is str:
            assert entry.json_schema(entry.default)["maxLength"] == entry.text_limit, entry.name


def test_run_names_from_long_or_odd_identifiers_fit_the_cap_stay_stable_and_stay_distinct():
    first, second = "manual__" + "x" * 240 + "1", "manual__" + "x" * 240 + "2"
    assert len(run_name_from(first)) == RUN_NAME_MAX_LENGTH
    assert run_name_from(first) == run_name_from(first) != run_name_from(second)
    for identifier in (first, "..", "__init__", ".hidden", "-x", "/", "é" * 300):
        name = run_name_from(identifier)
        assert re.fullmatch(RUN_NAME_PATTERN, name) and len(name) <= RUN_NAME_MAX_LENGTH, name
        RunSpec(run_name=name).validate()
    assert len(run_name_from(first, STUDY_NAME_MAX_LENGTH)) == STUDY_NAME_MAX_LENGTH


def widest_study(study_name: str) -> dict:
    """Every grid value at the widest its run setting allows, the most variants and repetitions: the longest run
    names a study can make."""
    return {"study_name": study_name, "strategies": "horovod,downpour,averaging", "nodes": "64",
            "workers_per_node": "64", "threads_per_worker": "1024", "n_push": "100000",
            "link_rates": f"{study_plan.WIDEST_LINK_RATE},1gbit", "repetitions": 9, "budget_minutes": 7 * 24 * 60,
            "variants": [{"seed": seed} for seed in range(study_plan.MAX_VARIANTS)],
            "run_settings": {"spark_master": "yarn", "train_limit": 64 * 64, "epochs": 1}}


def test_the_widest_link_rate_is_the_longest_the_pattern_takes():
    from training.settings import LINK_RATE_PATTERN

    assert re.fullmatch(LINK_RATE_PATTERN, study_plan.WIDEST_LINK_RATE)
    assert not any(re.fullmatch(LINK_RATE_PATTERN, rate) for rate in ("100000mbit", "101gbit", "1000gbit"))


def test_every_run_name_a_study_derives_fits_the_run_name_cap_exactly_at_the_widest():
    plan = plan_study(widest_study("s" * STUDY_NAME_MAX_LENGTH))
    names = [configuration.settings["run_name"] for configuration in plan.configurations]
    assert max(map(len, names)) == RUN_NAME_MAX_LENGTH  # the cap is computed, not guessed: the widest name fills it
    assert len(set(names)) == len(names)
    with pytest.raises(RunSpecError, match=rf"study_name=.*must be at most {STUDY_NAME_MAX_LENGTH} characters"):
        plan_study(widest_study("s" * (STUDY_NAME_MAX_LENGTH + 1)))
    with pytest.raises(RunSpecError, match=r"study_name=.*\(300 characters\): must be at most"):
        plan_study({"study_name": "s" * 300})


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "-x"])
def test_a_study_name_that_would_make_bad_run_names_is_refused(name):
    with pytest.raises(RunSpecError, match="study_name=.*may hold only"):
        plan_study({"study_name": name})
    with pytest.raises(RunSpecError, match="study_name=.*may hold only"):
        plan_study({}, study_name=name)  # a name derived from the DAG run id is checked the same way


def test_every_preset_name_fits_in_the_demo_s_run_names():
    from training import workload_registry as workloads

    longest_strategy = max(setting("strategy").choices, key=len)
    for definition in workloads.registry().values():
        for preset in definition.presets:
            demo_name = f"demo-{preset}-{longest_strategy}-64x64-abcdef"  # infra/demo.sh's widest name
            RunSpec(run_name=demo_name).validate()


# 8. URIs -------------------------------------------------------------------------------------------------------
BAD_URIS = [
    ("data_root", "hdfs://host:99999", "port"), ("data_root", "hdfs://host:abc", "port"),
    ("data_root", "hdfs://host:0/x", "port"), ("data_root", "hdfs://host:/x", "port"),
    ("data_root", "hdfs:///x", "needs a host"), ("data_root", "hdfs:x", "needs a host"),
    ("data_root", "s3://bucket/x", "s3:// is not allowed"), ("data_root", "gs://bucket/x", "not allowed"),
    ("data_root", "file://otherhost/x", "this machine"), ("data_root", "file://", "needs a path"),
    ("data_root", "hdfs://ho st/x", "spaces"), ("data_root", "hdfs://[::1/x", "not a valid URI"),
    ("data_root", "hdfs://host!:8020/x", "not a host name"), ("data_root", "/data\n/x", "control characters"),
    ("existing_shards", "hdfs://namenode:-1", "port"), ("existing_shards", "hdfs:///shards", "needs a host"),
    ("existing_shards", "http://host/shards", "not allowed"),
    ("tracking_uri", "http://:5000", "needs a host"), ("tracking_uri", "https://mlflow:70000", "port"),
    ("tracking_uri", "s3://bucket/mlruns", "not allowed"), ("tracking_uri", "sqlite://", "needs a path"),
    ("tracking_uri", "postgresql://u@db:5432/mlflow", "needs its driver"),
    ("tracking_uri", "ftp://host/x", "not allowed"),
    ("data_source", "hdfs:///landing", "needs a host"), ("data_source", "s3://bucket/mnist", "not allowed"),
    ("data_source", "http://host:99999/mnist", "port"), ("data_source", "file:///data/mnist", "not allowed"),
    # MLflow 3's file store refuses to start (a traceback at the first run): sqlite:///path instead
    ("tracking_uri", "file:///tmp/mlruns", "use sqlite://"),
    ("tracking_uri", "./mlruns", "a plain path is not allowed"),
]


@pytest.mark.parametrize(("name", "value", "why"), BAD_URIS, ids=lambda item: str(item)[:40])
def test_a_bad_uri_setting_is_refused_by_validate_naming_the_setting(name, value, why):
    with pytest.raises(RunSpecError, match=re.escape(f"{name}={value!r}: ") + ".*" + re.escape(why)) as caught:
        RunSpec(**{name: value}).validate()
    assert_one_short_line(caught.value, name)


def test_an_mlflow_tracking_uri_from_the_environment_is_checked_as_the_setting_is(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "./mlruns")
    with pytest.raises(RunSpecError, match=r"MLFLOW_TRACKING_URI='./mlruns' .*a plain path is not allowed") as caught:
        RunSpec().validate()
    assert_one_short_line(caught.value, "MLFLOW_TRACKING_URI")
    RunSpec(tracking_uri="sqlite:///var/mlflow.db").validate()  # the setting wins: the environment is not read
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    RunSpec().validate()


@pytest.mark.parametrize(("name", "value"), [
    ("data_root", "hdfs://namenode:8020/cloudburst"), ("data_root", "hdfs://namenode/cloudburst"),
    ("data_root", "file:///var/data"), ("data_root", "/var/data"), ("data_root", "var/data"),
    ("data_root", "hdfs://[::1]:8020/x"), ("existing_shards", "hdfs://nn:8020/s"), ("existing_shards", "shards"),
    ("tracking_uri", "sqlite:///var/mlflow/mlflow.db"), ("tracking_uri", "http://localhost:5000"),
    ("tracking_uri", "https://mlflow.example.org"), ("tracking_uri", "postgresql+psycopg2://u:p@db:5432/mlflow"),
    ("tracking_uri", "mysql://db/mlflow"), ("data_source", "https://example.org/mnist"), ("data_source", "hdfs://nn:8020/landing/mnist"),
    ("data_source", "/data/mnist"),
])
def test_uri_settings_that_their_readers_understand_are_accepted(name, value):
    RunSpec(**{name: value}).validate()


@pytest.mark.parametrize(("value", "why"), [
    ("hdfs://nn:99999/runs/kws", "port"), ("hdfs:///runs/kws", "needs a host"), ("file://other/runs", "machine"),
])
def test_speaker_verification_s_transfer_from_is_checked_as_a_uri(value, why):
    with pytest.raises(RunSpecError, match=rf"transfer_from=.*{why}"):
        RunSpec(workload="speaker_verification", transfer_from=value).validate()
    for good in ("auto", "0123456789abcdef0123456789abcdef", "hdfs://nn:8020/runs/kws", "/var/runs/kws"):
        RunSpec(workload="speaker_verification", transfer_from=good).validate()


@pytest.mark.parametrize("master", ["spark://master:99999", "spark://master:0", "spark://a:7077,b:65536"])
def test_a_spark_master_port_out_of_range_is_refused(master):
    with pytest.raises(RunSpecError, match="spark_master="):
        RunSpec(spark_master=master).validate()
    RunSpec(spark_master="spark://master:65535").validate()


def test_a_bad_uri_on_the_command_line_is_one_line_naming_it(caplog, capsys, tmp_path):
    from training import cli

    assert cli.main(["train", "--data-root", "hdfs://host:99999"]) == 2
    assert "data_root='hdfs://host:99999': its port must be a number from 1 to 65535" in caplog.text
    for arguments in (["advise", "--study", "latest", "--tracking-uri", "http://host:99999"],
                      ["preview", "--source", "s3://bucket/mnist"]):
        with pytest.raises(SystemExit) as exited:
            cli.main(arguments)
        assert exited.value.code == 2
        assert re.search(r"argument --(tracking-uri|source): '.*': ", capsys.readouterr().err)


# 9. JSON and long values ---------------------------------------------------------------------------------------
def test_an_error_quotes_only_a_short_prefix_of_a_long_value():
    for name in ("run_name", "data_root", "strategy", "link_rate", "workload"):
        with pytest.raises(RunSpecError) as caught:
            RunSpec.from_mapping({name: "/" * TEN_MEGABYTES}).validate()
        assert "(10,000,000 characters)" in str(caught.value)
        assert_one_short_line(caught.value, name)
    with pytest.raises(RunSpecError, match=r"epochs='9{60}'… \(1,000,000 characters\): expected int") as caught:
        RunSpec.from_mapping({"epochs": "9" * 1_000_000})
    assert_one_short_line(caught.value, "epochs")


def test_a_long_workload_with_a_preset_is_refused_in_one_short_line(caplog):
    from training import cli

    assert cli.main(["train", "--workload", "w" * 100_000, "--preset", "full"]) == 2
    assert "workload='www" in caplog.text and "(100,000 characters): must be at most 64" in caplog.text
    assert len(caplog.text) < 500


def test_shown_values_are_short_whatever_their_shape():
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    for value in (deep, list(range(100_000)), {str(n): n for n in range(100_000)}, 10 ** 5000, "x" * 61, b"y" * 999):
        assert len(shown(value)) < 120
    assert shown("short") == "'short'"


@pytest.mark.parametrize(("text", "why"), [
    ("[" * 10_000 + "]" * 10_000, "nests 10,000 levels deep"),
    ('{"a": ' * 1_000 + "1" + "}" * 1_000, "nests 1,000 levels deep"),
    ('{"epochs": 3, "epochs": 4}', "the key 'epochs' is given twice"),
    ('{"run_settings": {"epochs": 3, "epochs": 4}}', "the key 'epochs' is given twice"),
    ('{"learning_rate": NaN}', "NaN is not a number JSON allows"),
    ('{"learning_rate": -Infinity}', "-Infinity is not a number JSON allows"),
    ('{"epochs": ' + "9" * 5000 + "}", "digits"),
    ('{"epochs": 3', "is not JSON"), ("", "is not JSON"), ("[1, 2]", "must be a JSON object"),
    ('"epochs"', "must be a JSON object"), (" " * (strict_json.MAX_CHARACTERS + 1), "characters long; at most"),
])
def test_strict_json_refuses_in_one_line(text, why):
    with pytest.raises(strict_json.JsonError, match=re.escape(why)) as caught:
        strict_json.loads_object(text, "DEMO_CONF")
    assert str(caught.value).startswith("DEMO_CONF") and "\n" not in str(caught.value)


def test_strict_json_counts_only_the_brackets_outside_strings():
    text = json.dumps({"run_name": "[" * 100 + '\\"{' * 100, "nested": [[[1]]]})
    assert strict_json.nesting_depth(text) == 4
    assert strict_json.loads_object(text, "X")["nested"] == [[[1]]]


@pytest.mark.parametrize(("values", "message"), [
    ({"epochs": "3"}, "epochs='3': expected an integer in JSON, not a string"),
    ({"epochs": True}, "epochs=True: expected an integer in JSON, not true or false"),
    ({"epochs": 2.5}, "epochs=2.5: expected an integer in JSON, not a number"),
    ({"learning_rate": "0.1"}, "learning_rate='0.1': expected a number in JSON, not a string"),
    ({"fp16_compression": "false"}, "fp16_compression='false': expected true or false in JSON, not a string"),
    ({"fp16_compression": 0}, "fp16_compression=0: expected true or false in JSON, not an integer"),
    ({"run_name": 5}, "run_name=5: expected a string in JSON, not an integer"),
    ({"run_name": None}, "run_name=None: expected a string in JSON, not null"),
    ({"strategy": ["horovod"]}, "strategy=['horovod']: expected a string in JSON, not a list"),
    ({"epochs": {"value": 3}}, "epochs={'value': 3}: expected an integer in JSON, not an object"),
])
def test_json_values_must_have_their_setting_s_json_type(values, message):
    with pytest.raises(RunSpecError, match=re.escape(message)):
        RunSpec.from_json(values)


def test_json_values_that_json_cannot_tell_apart_are_accepted():
    spec = RunSpec.from_json({"learning_rate": 1, "epochs": 3.0, "data_root": None, "fp16_compression": True})
    assert (spec.learning_rate, spec.epochs, spec.data_root, spec.fp16_compression) == (1.0, 3, "", True)
    assert type(spec.learning_rate) is float and type(spec.epochs) is int


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_float_setting_must_be_finite(value):
    with pytest.raises(RunSpecError, match=rf"learning_rate={float(value)!r}: must be a finite number"):
        RunSpec.from_mapping({"learning_rate": value}).validate()


def test_unknown_names_are_listed_briefly():
    with pytest.raises(RunSpecError, match=r"unknown run setting\(s\): .*and 9,995 more") as caught:
        json_values({f"k{'x' * 1000}{number}": 1 for number in range(10_000)})
    assert len(str(caught.value)) < 600


@pytest.mark.parametrize(("run_settings", "message"), [
    ("epochs=3", "run_settings='epochs=3': must be a JSON object of run settings"),
    (["epochs", 3], "run_settings=['epochs', 3]: must be a JSON object"),
    ({"epochs": "3"}, "epochs='3': expected an integer in JSON"),
    ({"epochs": [[[[[[3]]]]]]}, "epochs=[[[...]]]: expected an integer in JSON, not a list"),
])
def test_a_study_s_run_settings_must_be_an_object_of_typed_settings(run_settings, message):
    with pytest.raises(RunSpecError, match=re.escape(message)):
        plan_study({"run_settings": run_settings})


@pytest.mark.parametrize(("values", "message"), [
    ({"repetitions": "2"}, "repetitions='2': expected an integer in JSON"),
    ({"nodes": 2}, "nodes=2: expected a string in JSON, not an integer"),
    ({"variants": [{"seed": "1"}]}, "seed='1': expected an integer in JSON"),
    ({"variants": [{"seed": [[[[[[1]]]]]]}]}, "seed=[[[...]]]: expected an integer"),
    ({"nodes": "1," * 600 + "1"}, "nodes='1,1,1,"),
])
def test_a_study_s_own_settings_are_typed_and_bounded_too(values, message):
    with pytest.raises(RunSpecError, match=re.escape(message)) as caught:
        plan_study(values)
    assert len(str(caught.value)) < 300


def embedded_python(script: str, marker: str) -> str:
    """The Python an infra script runs from the heredoc after ``marker``: tested as the script runs it."""
    text = (REPO_ROOT / script).read_text()
    start = text.index("<<'PY'\n", text.index(marker)) + len("<<'PY'\n")
    return text[start:text.index("\nPY\n", start)]


def demo_spec(conf: str, config: str = "1x1", preset: str = "") -> subprocess.CompletedProcess:
    """infra/demo.sh's check of one configuration (its spec_of), which runs before anything starts."""
    code = embedded_python("infra/demo.sh", "spec_of() {")
    return subprocess.run([sys.executable, "-c", code, "mnist_elastic_cnn", config, conf, "json", preset],
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
                          env={"PATH": "/usr/bin:/bin", "DEMO_CLUSTER_CONF": "{}"})


@pytest.mark.parametrize(("conf", "message"), [
    ('{"run_name": ".."}', "run_name='..': may hold only"),
    ('{"run_name": "."}', "run_name='.': may hold only"),
    ('{"run_name": "' + "r" * 300 + '"}', "(300 characters): must be at most 100 characters"),
    ('{"epochs": "3"}', "epochs='3': expected an integer in JSON, not a string"),
    ('{"epochs": 3, "epochs": 4}', "DEMO_CONF: the key 'epochs' is given twice"),
    ("[" * 10_000 + "]" * 10_000, "DEMO_CONF nests 10,000 levels deep"),
    ('{"data_root": "hdfs://host:99999"}', "data_root='hdfs://host:99999': its port must be"),
    ('{"existing_shards": "hdfs://namenode:-1"}', "existing_shards='hdfs://namenode:-1': its port must be"),
    ('{"strategy": "' + "s" * 100_000 + '"}', "(100,000 characters): must be one of"),
    ('{"learning_rate": Infinity}', "DEMO_CONF: Infinity is not a number JSON allows"),
])
def test_the_demo_refuses_a_bad_demo_conf_in_one_line_before_anything_runs(conf, message):
    result = demo_spec(conf)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.startswith("[demo] ") and result.stderr.count("\n") == 1, result.stderr[:500]
    assert message in result.stderr and len(result.stderr) < 400, result.stderr[:500]


def test_the_demo_refuses_a_configuration_of_thousands_of_digits_in_one_line():
    result = demo_spec("{}", config="9" * 5000 + "x1")
    assert result.stderr.startswith("[demo] DEMO_CONFIGS entry '999") and len(result.stderr) < 300


def test_the_demo_passes_json_types_on_to_the_dag():
    result = demo_spec('{"epochs": 3, "learning_rate": 0.01}')
    assert result.returncode == 0, result.stderr
    conf = json.loads(result.stdout)
    assert conf["epochs"] == 3 and conf["run_name"].startswith("demo-horovod-1x1-")


def study_check(conf: str) -> subprocess.CompletedProcess:
    """infra/study.sh's check of STUDY_CONF (its study_conf, mode plan), which runs before anything starts."""
    code = embedded_python("infra/study.sh", "study_conf() {")
    return subprocess.run([sys.executable, "-c", code, "plan", conf], capture_output=True, text=True, timeout=60,
                          cwd=REPO_ROOT, env={"PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(("conf", "message"), [
    ('{"run_settings": "epochs=3"}', "run_settings='epochs=3': must be a JSON object"),
    ('{"run_settings": {"epochs": "3"}}', "epochs='3': expected an integer in JSON"),
    ('{"strategies": "horovod", "strategies": "downpour"}', "STUDY_CONF: the key 'strategies' is given twice"),
    ('{"study_name": ".."}', "study_name='..': may hold only"),
    ('{"run_settings": {"data_root": "hdfs://host:99999"}}', "data_root='hdfs://host:99999': its port"),
    ("[" * 10_000 + "]" * 10_000, "STUDY_CONF nests 10,000 levels deep"),
    ('{"nodes": "1,2,3,4,5,6,7,8", "workers_per_node": "1,2,3,4,5,6,7,8", "threads_per_worker": "0,1,2,3,4,5,6,7", '
     '"repetitions": 9, "budget_minutes": 10080, "run_settings": {"train_limit": 64, "epochs": 1}}',
     "more than 1,024 runs"),
])
def test_the_study_script_refuses_a_bad_study_conf_in_one_line_before_anything_runs(conf, message):
    result = study_check(conf)
    assert result.returncode != 0 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert result.stderr.startswith("[study] ") and result.stderr.count("\n") == 1, result.stderr[:500]
    assert message in result.stderr, result.stderr[:500]


def test_the_study_script_passes_a_good_conf_on():
    result = study_check('{"strategies": "horovod", "run_settings": {"epochs": 1, "train_limit": 1000}}')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["strategies"] == "horovod"


def test_a_bench_s_json_spec_is_read_strictly():
    import argparse
    import importlib.util

    location = REPO_ROOT / "bench" / "elephas_peer.py"
    module_spec = importlib.util.spec_from_file_location("elephas_peer_under_test", location)
    peer = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(peer)
    assert peer._spec_object('{"epochs": 3}') == {"epochs": 3}
    for text in ('{"epochs": 3, "epochs": 4}', "[" * 5000 + "]" * 5000, "[1]"):
        with pytest.raises(argparse.ArgumentTypeError):
            peer._spec_object(text)


# 10. Prefixes are not flags ------------------------------------------------------------------------------------
@pytest.mark.parametrize("arguments", [
    ["train", "--workers", "4"], ["train", "--work", "kws_densenet_bilstm"], ["shard", "--epoch", "3"],
    ["settings", "--work", "kws_densenet_bilstm"], ["preview", "--sou", "/x"], ["advise", "--stu", "latest"],
    ["verify", "--sys", "/x", "--enroll", "a.wav", "--test", "b.wav"], ["--verb", "settings"],
])
def test_a_prefix_of_a_flag_is_refused_by_every_command(arguments, capsys):
    from training import cli

    with pytest.raises(SystemExit) as exited:
        cli.main(arguments)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "unrecognized arguments" in error or "the following arguments are required" in error, error


def test_a_prefix_of_a_flag_is_refused_by_every_job():
    from training.jobs.command_line import job_parser

    for spark in (True, False):
        with pytest.raises(SystemExit):
            job_parser("", spark).parse_args(["--workers", "4"])
        assert job_parser("", spark).parse_args(["--workers-per-node", "4"]).workers_per_node == "4"


def parser_calls() -> list[tuple[str, int, bool]]:
    """Every ArgumentParser(...) and add_parser(...) call under training/, bench/ and plugins/: (file, line,
    whether it turns prefix matching off)."""
    found = []
    for path in sorted(itertools.chain(*(REPO_ROOT.glob(f"{folder}/**/*.py")
                                         for folder in ("training", "bench", "plugins")))):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) in (
                    "ArgumentParser", "add_parser"):
                off = any(keyword.arg == "allow_abbrev" and getattr(keyword.value, "value", True) is False
                          for keyword in node.keywords)
                found.append((str(path.relative_to(REPO_ROOT)), node.lineno, off))
    return found


@pytest.mark.parametrize(("path", "line", "off"), parser_calls(), ids=lambda item: str(item))
def test_every_parser_turns_prefix_matching_off(path, line, off):
    assert off, f"{path}:{line}: give allow_abbrev=False"


# 11. What Airflow can map --------------------------------------------------------------------------------------
def test_a_study_of_thousands_of_runs_within_its_budget_is_refused_at_plan_time():
    values = {"strategies": "horovod,downpour,averaging", "nodes": "1,2,3,4", "workers_per_node": "1,2,3,4,5,6",
              "threads_per_worker": "0,1,2,3", "n_push": "1,2,4,8,16", "repetitions": 9,
              "budget_minutes": 7 * 24 * 60, "run_settings": {"train_limit": 24, "epochs": 1}}
    with pytest.raises(RunSpecError, match=r"more than 1,024 runs, the most Airflow maps one task over "
                                           r"\(its max_map_length\)"):
        plan_study(values)


def test_a_grid_of_tens_of_thousands_is_refused_without_being_built():
    import time

    # 32 × 8 × 4 shapes, 3 strategies, 9 repetitions: about 55,000 runs (a wider grid, built whole, exhausts memory)
    values = {"strategies": "horovod,downpour,averaging", "nodes": ",".join(map(str, range(1, 33))),
              "workers_per_node": ",".join(map(str, range(1, 9))), "threads_per_worker": "0,1,2,3", "repetitions": 9,
              "budget_minutes": 7 * 24 * 60, "run_settings": {"train_limit": 256, "epochs": 1}}
    started = time.perf_counter()
    with pytest.raises(RunSpecError, match="more than 1,024 runs"):
        plan_study(values)
    assert time.perf_counter() - started < 5


def test_the_map_limit_is_where_the_plan_stops(monkeypatch):
    values = {"strategies": "horovod", "workers_per_node": "1,2", "run_settings": {"train_limit": 100, "epochs": 1}}
    runs = len(plan_study(values).configurations)
    monkeypatch.setattr(study_plan, "MAX_MAPPED_RUNS", runs)
    plan_study(values)
    monkeypatch.setattr(study_plan, "MAX_MAPPED_RUNS", runs - 1)
    with pytest.raises(RunSpecError, match=f"more than {runs - 1} runs"):
        plan_study(values)

"""`cloudburst … --help` a person can read: a step lists the shared settings and its workload's own, grouped by
form section, one line each; every flag of every workload is still accepted and checked (the DAGs pass every
setting to every step); the settings reference in Markdown."""

from __future__ import annotations

import re

import pytest

from training import cli
from training import workload_registry as workloads
from training.config import SETTINGS, RunSpec, workload_settings
from training.contract import STEPS
from training.settings import SECTIONS
from training.settings_reference import markdown
from training.speech.synthesis.engines import ENGINE_PROGRAMS

COMMANDS = (*STEPS, "settings", "synth-speech", "preview", "verify", "advise")


@pytest.fixture(autouse=True)
def fixed_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps at the terminal's width, read from $COLUMNS


def help_text(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main([*argv, "--help"])
    assert exit_.value.code == 0
    return capsys.readouterr().out


def own_flags(workload: str) -> set[str]:
    return {entry.flag for entry in workloads.definition(workload).settings}


def test_augment_help_is_short_and_only_mnist(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "augment")
    assert len(text.splitlines()) <= 60
    assert "mnist_elastic_cnn's settings" in text
    others = (own_flags("kws_densenet_bilstm") | own_flags("speaker_verification")) - own_flags("mnist_elastic_cnn")
    assert "--speakers" in others and "--embedding-model" in others and "--kws-task" in others
    listed = set(re.findall(r"^  (--[a-z0-9-]+)", text, re.MULTILINE))
    assert not listed & others
    assert {"--alpha", "--sigma", "--augment-copies", "--seed", "--data-root"} <= listed


def test_step_help_lists_the_workload_first_with_its_choices(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "train", "--workload", "speaker_verification")
    choices = "{" + ",".join(workloads.names()) + "}"
    assert f"--workload {choices}" in text
    first_setting = min(text.index(f"\n  {entry.flag} ") for entry in workload_settings("speaker_verification")
                        if entry.name != "workload" and not entry.internal)
    assert text.index("--workload {") < first_setting
    assert "--embedding-model {model_a,model_b}" in text and "--alpha" not in text


def test_a_step_of_one_workload_lists_that_workload(capsys: pytest.CaptureFixture[str]) -> None:
    for step in ("score", "fuse"):
        owners = [name for name, definition in workloads.registry().items() if step in definition.steps]
        assert owners == ["speaker_verification"]
        assert "--enrollment-utterances" in help_text(capsys, step)


def test_settings_are_grouped_by_form_section_in_the_form_order(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "train")
    headings = [line[:-1] for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
    assert [heading for heading in headings if heading in SECTIONS] == list(SECTIONS)
    downpour = text.split("\nDownpour parameter server:\n")[1].split("\n\n")[0]
    assert "--n-push N" in downpour and "--ps-shards N" in downpour and "--epochs" not in downpour


@pytest.mark.parametrize("workload", [None, *workloads.names()])
def test_no_help_has_an_empty_choice_or_a_type_name_or_an_internal_flag(
        capsys: pytest.CaptureFixture[str], workload: str | None) -> None:
    for step in STEPS:
        text = help_text(capsys, step, *(("--workload", workload) if workload else ()))
        assert "{," not in text and ",}" not in text
        assert not re.search(r"--[a-z0-9-]+ (STR|INT|FLOAT|BOOL)\b", text)
        assert "--transfer-stage" not in text


def test_hidden_flags_of_other_workloads_are_accepted_and_checked(caplog: pytest.LogCaptureFixture) -> None:
    parser = cli.build_parser(["augment", "--help"])
    args = parser.parse_args(["augment", "--workload", "mnist_elastic_cnn", "--speakers", "50", "--kws-task", "35",
                              "--embedding-model", "model_b", "--n-push", "8"])
    spec = RunSpec.from_args(args).validate()
    assert (spec.speakers, spec.kws_task, spec.embedding_model, spec.n_push) == (50, 35, "model_b", 8)
    for flag, value, name in (("--speakers", "0", "speakers"), ("--kws-task", "13", "kws_task"),
                              ("--embedding-model", "model_c", "embedding_model"), ("--n-push", "0", "n_push")):
        caplog.clear()
        assert cli.main(["augment", "--workload", "mnist_elastic_cnn", flag, value]) == 2
        assert f"{name}=" in caplog.text


def test_transfer_stage_is_internal_but_accepted(caplog: pytest.LogCaptureFixture,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert SETTINGS["transfer_stage"].internal
    assert "--transfer-stage" not in help_text(capsys)
    args = cli.build_parser().parse_args(["train", "--workload", "speaker_verification", "--embedding-model",
                                          "model_a", "--transfer-stage", "head"])
    assert RunSpec.from_args(args).validate().transfer_stage == "head"
    assert cli.main(["train", "--workload", "speaker_verification", "--transfer-stage", "middle"]) == 2
    assert "transfer_stage='middle'" in caplog.text


@pytest.mark.parametrize("workload", workloads.names())
def test_the_dags_full_command_line_parses_back_for_every_step(workload: str) -> None:
    """The operators pass spec.to_args(), every setting, to every step: whatever its --help lists."""
    spec = RunSpec(workload=workload, run_name="dag-run", speakers=7, alpha=12.5, transfer_stage="head",
                   embedding_model="model_a", data_root="/tmp/cloudburst-data")
    for step in STEPS:
        args = cli.build_parser([step, *spec.to_args()]).parse_args([step, *spec.to_args()])
        assert RunSpec.from_args(args) == spec


def test_top_level_help_lists_each_command_once_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys)
    lines = text.splitlines()
    for command in COMMANDS:
        mentions = [line for line in lines if re.match(rf"\s+{re.escape(command)}\s", line)]
        assert len(mentions) == 1, command
    commands = text.split("\ncommands:\n")[1].splitlines()
    assert len([line for line in commands if line.strip()]) == len(COMMANDS) + 1  # the COMMAND line
    assert "cloudburst ingest" not in text
    for engine in ENGINE_PROGRAMS:
        assert engine in text
    assert len(ENGINE_PROGRAMS) >= 7


def test_settings_markdown_is_a_deterministic_table_per_section(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["settings", "--markdown"]) == 0
    text = capsys.readouterr().out
    assert text == markdown()
    header = "| Flag | Type | Default | Bounds / choices | Help |"
    shared = text.split("\n## Workload ")[0]
    assert [line[4:] for line in shared.splitlines() if line.startswith("### ")] == list(SECTIONS)
    assert shared.count(header) == len(SECTIONS)
    for entry in SETTINGS.values():
        assert f"| `{entry.flag}` |" in text
    assert "| `--n-push` | int | `4` | ≥ 1; ≤ 100,000 |" in text
    assert "one of empty, `model_a`, `model_b`" in text
    for name in workloads.names():
        assert f"## Workload `{name}`" in text
    assert "### Shared defaults it changes" in text
    for table in re.findall(r"(?:^\|.*\n)+", text, re.MULTILINE):  # every row as many cells as the header
        assert len({len(re.findall(r"(?<!\\)\|", row)) for row in table.splitlines()}) == 1, table


def test_settings_markdown_for_one_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["settings", "--markdown", "--workload", "kws_densenet_bilstm"]) == 0
    text = capsys.readouterr().out
    assert "## Workload `kws_densenet_bilstm`" in text and "## Workload `mnist_elastic_cnn`" not in text
    assert "| `--kws-task` |" in text and "| `--alpha` |" not in text and "| `--epochs` |" in text
    assert "\\_unknown\\_" in text  # prose, not emphasis




def test_synth_speech_makes_the_corpus_the_keyword_spotting_demo_reads_by_default(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = help_text(capsys, "synth-speech")
    assert f"(default: {RunSpec(workload='kws_densenet_bilstm').speakers})" in text

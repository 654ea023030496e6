"""Installed distributions register workloads through entry points (group ``cloudburst.workloads``), after the
built-in ones and before $CLOUDBURST_WORKLOADS; a broken or clashing entry is one line naming its distribution.

Each test installs a real distribution the way pip lays one out (a ``*.dist-info`` folder with entry_points.txt
beside the module) into a folder put on sys.path, so importlib.metadata finds it as it finds any other."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from training import workload_packages
from training import workload_registry as workloads
from training.models import architecture

WORKLOAD_MODULE = '''
from training.contract import EVALUATE, INGEST, SHARD, TRAIN
from training.workload_definition import WorkloadDefinition

DEFINITION = WorkloadDefinition(
    name={name!r}, title="Installed", description="from an installed distribution",
    steps=(INGEST, SHARD, TRAIN, EVALUATE), raw_uri=lambda spec: "", train_uri=lambda spec: "",
    ingest="{module}.trainable:ingest", trainable="{module}.trainable:trainable", default_source="generated")
'''


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path to install distributions into; the registry is read afresh inside the test and after."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delenv(workload_packages.EXTRA_WORKLOADS_VARIABLE, raising=False)
    workloads.registry.cache_clear()
    before = set(sys.modules)
    yield folder
    for name in set(sys.modules) - before:
        if name.startswith("installed_"):
            del sys.modules[name]
    workloads.registry.cache_clear()


def install(site: Path, distribution: str, entry_points: str, modules: dict[str, str]) -> None:
    """Lay out a distribution as pip does: its modules and a dist-info folder with its metadata and entry points."""
    info = site / f"{distribution.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[{workload_packages.ENTRY_POINT_GROUP}]\n{entry_points}\n")
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)


def test_an_installed_distribution_registers_its_workload_after_the_built_ins(site, monkeypatch):
    install(site, "installed-demo", "installed_demo = installed_demo",
            {"installed_demo": WORKLOAD_MODULE.format(name="installed_demo", module="installed_demo")})
    monkeypatch.setenv(workload_packages.EXTRA_WORKLOADS_VARIABLE, "toy_workload, installed_demo")
    # built in, then the entry point's, then the variable's; a module both installed and named counts once
    assert workloads.packages() == (*workload_packages.BUILT_IN, "installed_demo", "toy_workload")
    assert list(workloads.registry())[-2:] == ["installed_demo", "toy_dense"]
    assert workloads.definition("installed_demo").title == "Installed"
    # its model builders may rebuild saved models: the package is installed code, like the built-ins
    assert "installed_demo" in architecture.trusted_packages()


@pytest.mark.parametrize(("entry", "modules", "expected"), [
    ("broken = installed_broken:DEFINITION", {},
     "'installed_broken:DEFINITION' is not a module name; the entry point's value names the module that exposes "
     "DEFINITION"),
    ("broken = installed_missing", {}, "cannot import workload module 'installed_missing' (ModuleNotFoundError: "),
    ("broken = installed_failing", {"installed_failing": "raise RuntimeError('no GPU here\\nsecond line')"},
     "cannot import workload module 'installed_failing' (RuntimeError: no GPU here)"),
    ("broken = installed_empty", {"installed_empty": "DEFINITION = {'name': 'x'}"},
     "module 'installed_empty' must expose DEFINITION, a training.workload_definition.WorkloadDefinition; it has dict"),
    ("clash = installed_clash", {"installed_clash": WORKLOAD_MODULE.format(name="mnist_elastic_cnn",
                                                                           module="installed_clash")},
     "module 'installed_clash' defines workload 'mnist_elastic_cnn', registered already by module "
     "'training.workloads.mnist_elastic_cnn', built in; rename one"),
])
def test_a_broken_or_clashing_entry_point_is_one_line_naming_its_distribution(site, entry, modules, expected):
    install(site, "installed-broken", entry, modules)
    with pytest.raises(workloads.WorkloadRegistrationError) as raised:
        workloads.registry()
    message = str(raised.value)
    name = entry.split(" =")[0]
    assert message.startswith(f"distribution 'installed-broken' (entry point {name!r} in cloudburst.workloads): ")
    assert expected in message and "\n" not in message


def test_two_distributions_with_one_workload_name_are_refused_naming_both(site):
    for distribution in ("installed-first", "installed-second"):
        module = distribution.replace("-", "_")
        install(site, distribution, f"same = {module}",
                {module: WORKLOAD_MODULE.format(name="same_name", module=module)})
    with pytest.raises(workloads.WorkloadRegistrationError, match=r"defines workload 'same_name', registered "
                       r"already by module 'installed_(first|second)', distribution 'installed-(first|second)'"):
        workloads.registry()


def test_the_cloudburst_command_reports_a_broken_installed_workload_in_one_line(site):
    import os
    import subprocess

    install(site, "installed-broken", "installed_broken = installed_broken",
            {"installed_broken": "raise RuntimeError('the author forgot a file\\nsecond line')\n"})
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), *sys.path])}
    environment.pop(workload_packages.EXTRA_WORKLOADS_VARIABLE, None)
    # As the console script runs it (pyproject.toml: cloudburst = "training.command:main").
    result = subprocess.run([sys.executable, "-c", "import sys; from training.command import main; sys.exit(main())",
                             "settings"], capture_output=True, text=True, timeout=120, env=environment)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.strip()]
    assert "ERROR" in line and "distribution 'installed-broken'" in line and "the author forgot a file" in line

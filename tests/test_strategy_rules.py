"""Each strategy's rules are declared once (training/strategy_rules.py): the setting's choices, validation, the
study plan and the cost model ask them; nothing outside the strategies compares strategy names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from training.config import RunSpec, RunSpecError
from training.settings import STRATEGIES
from training.strategies import get_strategy
from training.strategy_rules import RULES, rules_of
from training.study import cost_model


def test_the_strategy_choices_are_the_registered_rules():
    assert STRATEGIES == tuple(rules.name for rules in RULES) == ("horovod", "downpour", "averaging")


def test_the_rules_import_without_tensorflow():
    probe = "import sys, training.strategy_rules, training.settings; print(sorted({m.split('.')[0] for m in " \
            "sys.modules} & {'tensorflow', 'numpy', 'horovod', 'pyspark'}))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("name", STRATEGIES)
def test_each_strategy_is_trained_by_the_class_its_rules_name(name):
    assert get_strategy(name).name == name


def test_an_unknown_strategy_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown strategy 'gossip'"):
        rules_of("gossip")


def test_the_strategy_decides_what_a_workload_lacks():
    spec = RunSpec.from_mapping({"workload": "mnist_elastic_cnn", "batch_norm": True})
    spec.validate()
    with pytest.raises(RunSpecError, match="^batch_norm=true: Downpour's parameter server"):
        spec.with_changes(strategy="downpour").validate()
    with pytest.raises(RunSpecError, match="only the horovod strategy keeps a weight average, not averaging"):
        spec.with_changes(strategy="averaging", weight_average_decay=0.9).validate()


def test_only_the_asynchronous_strategy_has_a_fixed_overlap():
    assert cost_model.FIXED_OVERLAP == {rules.name: 1.0 for rules in RULES if rules.asynchronous} == \
        {"downpour": 1.0}

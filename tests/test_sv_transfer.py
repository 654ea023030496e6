"""bench/sv_transfer.py (`make bench-sv-transfer`): the pretraining pool is refused when it shares a speaker or a
clip with the corpus, pooled labels keep pool and sv_train speakers apart, the pooled control sees as many examples
as pretraining and fine-tuning, the clock counts the source's seconds, the transfer copies the pool model's trunk and
embedding layer (and leaves its head), refused settings end in one line, and the tables render."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
transfer = importlib.import_module("sv_transfer")


def corpus(speakers: list[str], digests: list[str]) -> dict:
    return {"speaker": np.array(speakers, dtype=object), "digest": np.array(digests, dtype=object)}


def test_a_pool_disjoint_from_the_corpus_passes():
    transfer.check_pool_disjoint(corpus(["a", "b"], ["1", "2"]), corpus(["c", "d"], ["3", "4"]))


def test_a_pool_sharing_a_speaker_is_refused():
    with pytest.raises(transfer.BenchError, match=r"shares 1 speakers with the corpus \(e\.g\. b\)"):
        transfer.check_pool_disjoint(corpus(["a", "b"], ["1", "2"]), corpus(["b", "d"], ["3", "4"]))


def test_a_pool_sharing_a_clip_is_refused():
    with pytest.raises(transfer.BenchError, match="shares 1 clips with the corpus"):
        transfer.check_pool_disjoint(corpus(["a", "b"], ["1", "2"]), corpus(["c", "d"], ["2", "4"]))


def test_the_real_pool_recipe_draws_speakers_no_corpus_of_another_seed_has():
    from training.speech.synthesis.speakers import speaker_ids

    assert not set(speaker_ids(0, 300)) & set(speaker_ids(1, 1000))


def test_pooled_labels_give_pool_and_train_speakers_classes_of_their_own():
    pool, train, classes = transfer.pooled_labels(np.array(["p2", "p1", "p2"], dtype=object),
                                                  np.array(["t1", "t1", "t0"], dtype=object))
    assert classes == 4
    assert pool.tolist() == [1, 0, 1] and train.tolist() == [3, 3, 2]


@pytest.mark.parametrize(("examples", "per_epoch", "epochs"), [(1000, 300, 3), (1000, 400, 2), (10, 400, 1)])
def test_the_pooled_control_sees_about_as_many_examples(examples, per_epoch, epochs):
    assert transfer.matched_epochs(examples, per_epoch) == epochs


def rows(*eers: float, seconds: float = 10.0) -> list[dict]:
    return [{"epoch": n, "seconds": seconds, "dev_eer": eer, "accuracy": 0.5, "loss": 1.0}
            for n, eer in enumerate(eers, start=1)]


def test_the_clock_counts_the_source_s_seconds_and_halves_scratch_s_epochs():
    source = {"seconds": 100.0, "examples": 5000}
    fast = transfer.variant_summary(rows(0.2, 0.1, 0.09), 0.1, 50, source, scratch_epochs=4)
    assert fast["epochs_to_target"] == 2 and fast["seconds_to_target"] == 20.0
    assert fast["seconds_to_target_with_source"] == 120.0 and fast["examples"] == 5150
    assert fast["epochs_within_half"] is True
    slow = transfer.variant_summary(rows(0.2, 0.15, 0.1), 0.1, 50, source, scratch_epochs=4)
    assert slow["epochs_to_target"] == 3 and slow["epochs_within_half"] is False
    never = transfer.variant_summary(rows(0.3, 0.2), 0.1, 50, None, scratch_epochs=4)
    assert never["epochs_to_target"] is None and never["seconds_to_target_with_source"] is None
    assert never["epochs_within_half"] is False and never["source_seconds"] == 0.0


@pytest.mark.parametrize(("low", "high", "word"), [(-0.02, -0.01, "better"), (0.01, 0.02, "worse"),
                                                   (-0.01, 0.01, "includes 0")])
def test_verdicts(low, high, word):
    assert transfer.verdict(low, high).startswith(word)


@pytest.mark.parametrize(("extra", "message"), [
    (["--pool-seed", "0"], "is the corpus's seed"),
    (["--seed", "3", "--pool-seed", "3"], "is the corpus's seed"),
    (["--epochs", "1"], "one head-only epoch"),
    (["--epochs", "0"], "--epochs must be ≥ 1"),
    (["--pool-speakers", "-5"], "--pool-speakers must be ≥ 1"),
    (["--pretrain-epochs", "0"], "--pretrain-epochs must be ≥ 1"),
    (["--learning-rate", "0"], "--learning-rate must be in"),
    (["--learning-rate", "nan"], "--learning-rate must be in"),
])
def test_refused_settings_end_in_one_line_before_anything_runs(extra, message, capsys, monkeypatch):
    monkeypatch.setattr(transfer, "measure", lambda args: pytest.fail("measured a refused setting"))
    assert transfer.main(extra) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1 and "Traceback" not in error


def test_a_corpus_refused_while_measuring_ends_in_one_line(capsys, monkeypatch):
    def shared(args):
        raise transfer.BenchError("the pretraining pool shares 3 speakers with the corpus (e.g. x)")

    monkeypatch.setattr(transfer, "measure", shared)
    monkeypatch.setattr(transfer, "publish_run", lambda *a: pytest.fail("published a refused run"))
    assert transfer.main([]) == 2
    assert capsys.readouterr().err == "bench-sv-transfer: the pretraining pool shares 3 speakers with the corpus " \
                                      "(e.g. x)\n"


def test_the_pool_transfer_copies_trunk_and_embedding_trains_the_head_alone_then_everything(monkeypatch):
    from training.workloads.speaker_verification.speaker_embedding import (
        COSINE_LAYER,
        EMBEDDING_LAYER,
        densenet_bilstm_embedder,
        trunk_layer_names,
    )

    pretrained = densenet_bilstm_embedder(num_speakers=7)
    copied = [*trunk_layer_names(pretrained), EMBEDDING_LAYER]
    stages = []

    def fit(model, features, labels, epochs, batch, learning_rate, dev_eer, first_epoch=0):
        same = all(np.array_equal(a, b) for name in copied if model.get_layer(name).weights
                   for a, b in zip(model.get_layer(name).get_weights(), pretrained.get_layer(name).get_weights(),
                                   strict=True))
        stages.append({"trainable": {name for name in copied if model.get_layer(name).trainable},
                       "same": same, "epochs": epochs, "rate": learning_rate, "first": first_epoch,
                       "classes": model.get_layer(COSINE_LAYER).get_weights()[0].shape[-1]})
        return rows(*[0.2] * epochs)

    monkeypatch.setattr(transfer, "fit", fit)
    args = transfer.parser().parse_args(["--epochs", "5", "--learning-rate", "0.004"])
    model, history = transfer.transfer_from_pool(pretrained, np.zeros((4, 98, 40), np.float32),
                                                 np.zeros(4, np.int32), 3, args, lambda m: 0.0)
    head, fine_tune = stages
    assert head == {"trainable": set(), "same": True, "epochs": 1, "rate": 0.004, "first": 0, "classes": 3}
    assert fine_tune == {"trainable": set(copied), "same": True, "epochs": 4, "rate": 0.001, "first": 1,
                         "classes": 3}
    assert len(history) == 5 and model.get_layer(COSINE_LAYER).get_weights()[0].shape[-1] == 3


def test_the_tables_render():
    from test_bench_results import check_renders

    variant = {"rows": rows(0.2, 0.1), "epochs_to_target": 2, "seconds_to_target": 20.0, "final_dev_eer": 0.1,
               "seconds": 20.0, "source_seconds": 5.0, "examples": 100, "seconds_with_source": 25.0,
               "seconds_to_target_with_source": 25.0, "epochs_within_half": True}
    metrics = {"eer": 0.1, "eer_ci_low": 0.08, "eer_ci_high": 0.12, "min_dcf_p01": 0.5}
    values = {"variants": {transfer.SCRATCH: variant, transfer.POOL_TRANSFER: {**variant, "epochs_to_target": None,
                                                                                "seconds_to_target": None,
                                                                                "seconds_to_target_with_source": None}},
              "evaluation": {transfer.SCRATCH: {"all": metrics}, transfer.POOL_ONLY: {"all": metrics, "hard": metrics}},
              "differences": {"pool_transfer − scratch": {"all": {"difference": -0.01, "ci_low": -0.02,
                                                                   "ci_high": 0.001}}}}
    tables = transfer.result_tables(values)
    assert len(tables["curves"]["rows"]) == 4 and len(tables["evaluation"]["rows"]) == 3
    check_renders("bench-sv-transfer", values, tables)

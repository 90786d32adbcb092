"""Hyperparameter optimisation: search spaces, workers sharing one study, budgets, pruning, killed workers,
multi-rank trials, and the tuned parameters reaching the final training."""

import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml

from lcflow.train import training
from lcflow.train.data import training_data
from lcflow.train.models import hyperparameters
from lcflow.train.models.hyperparameters import ParamError, check
from lcflow.tune import space as search_space
from lcflow.tune import study, study_files, study_summary, tuning
from lcflow.tune.hpo_settings import HpoSettings

from ..conftest import tmpfs
from ..train.test_recipe import seasonal_table, write

BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "OMP_NUM_THREADS": "1"}
#: short trials: 10 validation rounds of 15 steps, a small network, one thread
FAST = ["--set", "min_steps=150", "--set", "evaluations=10", "--set", "patience=10", "--set", "threads=1"]
#: a space wide enough that some draws are poor (so the pruner has something to stop)
SPACE = {"learning_rate": {"low": 1e-5, "high": 3e-2, "log": True}, "hidden_size": {"low": 8, "high": 32},
         "dropout": {"low": 0.0, "high": 0.5}}


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> str:
    return write(seasonal_table({1: 150, 2: 60, 3: 30, 4: 20, 5: 15}), tmp_path_factory.mktemp("hpo") / "t.parquet")


def tune_cmd(table: str, study_dir: Path, trials: int, worker: str, *extra: str) -> list[str]:
    return [str(BIN / "lcflow"), "tune", "--model", "lstm", "--samples", table, "--study", str(study_dir),
            "--trials", str(trials), "--worker", worker, "--space-json", json.dumps(SPACE), "--min-rounds", "2",
            *FAST, *extra]


def _hpo(trials: int, model: str, space: dict, **keys) -> HpoSettings:
    """A study's settings: its budget, ``model``'s search space and any other keys."""
    return HpoSettings(trials=trials, space={model: space}, **keys)


def finished(study_dir: Path) -> tuple[optuna.Study, dict[str, int]]:
    s = study.load_study(study_dir)
    return s, study.counts(s)


# ------------------------------------------------------------------------------------------ spaces


def test_every_default_space_is_valid_and_draws_values_train_accepts():
    for model, space in search_space.DEFAULT_SPACES.items():
        dims = search_space.parse(model, None)
        assert [d.name for d in dims] == list(space)
        sampler = optuna.samplers.RandomSampler(seed=1)
        s = optuna.create_study(sampler=sampler, direction="maximize")
        for _ in range(20):
            trial = s.ask()
            drawn = {d.name: d.suggest(trial) for d in dims}
            checked = check(model, drawn)  # raises on a value train would refuse
            for d in dims:
                if d.choices is None:
                    assert d.low <= checked[d.name] <= d.high
                    assert isinstance(checked[d.name], int) == (d.kind == "int")
                else:
                    assert checked[d.name] in d.choices
            s.tell(trial, 0.5)


def test_every_default_space_lets_the_studys_metric_pick_the_class_weighting():
    """Weighting trades overall for balanced accuracy (docs/benchmarks.md): no one value suits every
    table and metric, so every model's study searches all of it."""
    for model in search_space.DEFAULT_SPACES:
        assert "class_weight" in hyperparameters.table(model), model
        dims = {d.name: d for d in search_space.parse(model, None)}
        assert set(dims["class_weight"].choices) == set(hyperparameters.table(model)["class_weight"].choices), model


def test_lstm_study_weighs_a_pooling_that_keeps_the_dates_against_one_over_time():
    """flatten (the default) tells the classifier when, mean_last what the series did: which suits a table
    is a study's question, and every pooling it proposes must build a network that reads a series."""
    import torch

    from lcflow.train.models.lstm import Network

    poolings = {d.name: d for d in search_space.parse("lstm", None)}["pooling"].choices
    assert hyperparameters.table("lstm")["pooling"].default in poolings and "mean_last" in poolings
    x = torch.randn(4, 6, 3)
    outputs = []
    for pooling in poolings:
        torch.manual_seed(0)
        net = Network(n_features=3, n_classes=5, hidden_size=8, num_layers=1, bidirectional=True, dropout=0.0,
                      pooling=pooling, steps=6).eval()
        outputs.append(net(x))
        assert outputs[-1].shape == (4, 5)
    assert not torch.allclose(outputs[0], outputs[1])


@pytest.mark.parametrize("space,message", [
    ({"learning_rate": {"low": 0.1, "high": 0.01}}, "low = 0.1 is above high = 0.01"),
    ({"hidden_size": {"low": 0, "high": 8}}, "hidden_size.low = 0: expected an integer in [1, 4096]"),
    ({"hidden_size": {"low": 8, "high": 64, "step": 0.5}}, "is an integer, so is its step"),
    ({"optimizer": {"low": 1, "high": 2}}, "optimizer is not a number; give choices"),
    ({"optimizer": {"choices": []}}, "expected a non-empty list"),
    ({"dropout": {"low": 0.1, "high": 0.5, "log": "yes"}}, "dropout.log = 'yes': expected true or false"),
    ({"kernel_size": {"choices": [3, 5]}}, "unknown parameter 'kernel_size' for model lstm"),
    ({"seed": {"low": 1, "high": 5}}, "seed says how a job runs"),
    ({"refit": {"choices": [False, True]}}, "refit trains on the val rows that score a trial"),
    ({"bidirectional": {"choices": [True, True]}}, "a value is listed twice"),
    ({}, "expected a mapping of parameter names to ranges"),
])
def test_a_bad_space_is_refused_naming_the_parameter(space, message):
    with pytest.raises(ParamError) as err:
        search_space.parse("lstm", space, where="hpo.space.lstm")
    assert message in str(err.value) and str(err.value).startswith("hpo.space.lstm")


# ------------------------------------------------------------------------------------------ workers


def test_two_workers_share_one_study_and_its_budget(table, tmp_path):
    """Started together: both run trials, exactly the budget finishes, some are pruned, and the
    summary's best parameters are the best trial's."""
    study_dir = tmp_path / "study"
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = [subprocess.Popen(tune_cmd(table, study_dir, 8, f"w{i}", "--out", str(tmp_path / f"w{i}.json")),
                              env=ENV, stdout=log.open("w"), stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    for proc, log in zip(procs, logs):
        assert proc.wait(timeout=900) == 0, log.read_text()[-3000:]
    s, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 8 and c["running"] == 0 and c["fail"] == 0, c
    assert c["pruned"] >= 1, c
    workers = {t.user_attrs["worker"] for t in s.trials}
    assert workers == {"w0", "w1"}, workers
    assert all(t.user_attrs["world_size"] == 1 and t.user_attrs["host"] for t in s.trials)
    summaries = [json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(2)]
    assert sum(len(x["trials"]) for x in summaries) == 8
    # the first trials of the two workers differ: each worker seeds its own sampler
    firsts = [x["trials"][0]["params"] for x in summaries]
    assert firsts[0] != firsts[1]

    best = study_summary.summarize(study_dir, study_dir / "best_params.yaml")
    written = yaml.safe_load((study_dir / "best_params.yaml").read_text())
    assert written == best
    assert written["params"] == s.best_trial.params and written["value"] == pytest.approx(s.best_value)
    assert written["trial"] == s.best_trial.number and written["trials"]["pruned"] == c["pruned"]
    # of the two workers' trials, the best complete one's checkpoint alone is kept, for the final training
    kept = study_files.trial_checkpoint(study_dir, s.study_name, s.best_trial.number)
    assert list((study_dir / tuning.CHECKPOINTS).iterdir()) == [kept]
    assert written["checkpoint"] == str(kept.relative_to(study_dir))
    rows = (study_dir / "trials.csv").read_text().splitlines()
    assert len(rows) == 9 and "user_attrs_worker" in rows[0]
    for name in study_summary.FIGURES.values():
        assert (study_dir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # a rerun with the same budget has nothing left to do; a larger budget goes on with the same study
    again = subprocess.run(tune_cmd(table, study_dir, 8, "w0"), env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "budget of 8 trials is finished" in again.stderr, again.stderr[-2000:]
    more = subprocess.run(tune_cmd(table, study_dir, 9, "w0"), env=ENV, capture_output=True, text=True, timeout=600)
    assert more.returncode == 0, more.stderr[-2000:]
    _, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 9


def test_a_journal_s_torn_last_record_is_set_aside_and_the_study_goes_on(table, tmp_path, caplog):
    """A worker killed while it wrote leaves a last record without its line end: the next worker moves it
    to journal.log.torn (said in the log) before Optuna appends, and the study goes on; a record spoilt
    inside the journal is refused naming its line, not with a JSON library's traceback."""
    study_dir = tmp_path / "study"
    done = subprocess.run(tune_cmd(table, study_dir, 1, "w0"), env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    journal = study_dir / study.JOURNAL
    whole = journal.read_bytes()
    fragment = b'{"op_code":4,"worker_id":"w1-dead","trial_id":1,"param'
    journal.write_bytes(whole + fragment)
    with caplog.at_level("WARNING", logger="lcflow"):
        study.mend_journal(journal)
    assert journal.read_bytes() == whole and (study_dir / "journal.log.torn").read_bytes() == fragment + b"\n"
    assert any(f"study journal {journal}: its last record was torn ({len(fragment)} bytes" in r.getMessage()
               for r in caplog.records)
    journal.write_bytes(whole + fragment)  # torn again: the next command that opens the study mends it itself
    summary = subprocess.run([str(BIN / "lcflow"), "tune-summary", "--study", str(study_dir), "--out",
                              str(tmp_path / "best.yaml")], env=ENV, capture_output=True, text=True, timeout=600)
    assert summary.returncode == 0 and "its last record was torn" in summary.stderr, summary.stderr[-3000:]
    assert journal.read_bytes() == whole
    s, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 1
    storage = study.storage(study_dir)  # and a worker's next record lands on a line of its own
    storage.set_study_user_attr(storage.get_study_id_from_name(s.study_name), "after", "mended")
    assert study.load_study(study_dir).user_attrs["after"] == "mended"
    lines = journal.read_bytes().splitlines(keepends=True)
    journal.write_bytes(b"".join(lines[:2]) + fragment + lines[2])  # spoilt inside, as an older append left it
    summary = subprocess.run([str(BIN / "lcflow"), "tune-summary", "--study", str(study_dir), "--out",
                              str(tmp_path / "best.yaml")], env=ENV, capture_output=True, text=True, timeout=600)
    assert summary.returncode == 2 and summary.stderr.strip().splitlines()[-1] == (
        f"lcflow tune-summary: error: study journal {journal}: line 3 is not a whole record (a write cut short, then "
        "another written after it); move the study aside and tune afresh, or remove that line and the study's trials "
        "after it"), summary.stderr[-2000:]


def test_a_killed_worker_leaves_a_readable_study_that_a_rerun_finishes(table, tmp_path):
    study_dir = tmp_path / "study"
    log = tmp_path / "w.log"
    proc = subprocess.Popen(tune_cmd(table, study_dir, 3, "w0"), env=ENV, stdout=log.open("w"),
                            stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while "round 1/" not in log.read_text():  # killed in its first trial's second round
        assert proc.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)

    s, c = finished(study_dir)  # the journal is whole: the study loads
    assert c["running"] == 1 and c["complete"] + c["pruned"] == 0, c
    assert list((study_dir / study.HEARTBEAT_DIR).iterdir())  # the dead trial's heartbeat stays behind

    # the same worker again: its abandoned trial is failed at once and does not count
    done = subprocess.run(tune_cmd(table, study_dir, 3, "w0"), env=ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "left running by a worker that is gone" in done.stderr
    s, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 3 and c["fail"] == 1 and c["running"] == 0, c
    assert not list((study_dir / study.HEARTBEAT_DIR).iterdir())


def test_a_second_worker_of_the_same_id_is_refused_while_the_first_runs_and_the_first_finishes(table, tmp_path):
    study_dir = tmp_path / "study"
    log = tmp_path / "w.log"
    first = subprocess.Popen(tune_cmd(table, study_dir, 2, "w0"), env=ENV, stdout=log.open("w"),
                             stderr=subprocess.STDOUT)
    deadline = time.time() + 300
    while "round 1/" not in log.read_text():  # the first worker is inside its first trial
        assert first.poll() is None and time.time() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    second = subprocess.run(tune_cmd(table, study_dir, 2, "w0"), env=ENV, capture_output=True, text=True, timeout=300)
    lines = [line for line in second.stderr.splitlines() if line and not line[:4].isdigit()]
    assert second.returncode == 2 and lines == [
        f"lcflow tune: error: study {study_dir}: worker w0 is running already, in another process; give each "
        "worker an id of its own (--worker), or wait for that one to end"], second.stderr[-3000:]
    assert first.wait(timeout=600) == 0, log.read_text()[-3000:]
    s, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 2 and c["fail"] == 0, c  # the first's trials were left alone


def test_a_trial_whose_heartbeat_went_stale_is_failed_by_another_worker(tmp_path):
    store = tmp_path / "study"
    s = study.open_study(store, "lstm-x", optuna.samplers.RandomSampler(seed=0), optuna.pruners.NopPruner())
    attrs = {"worker": "gone", "world_size": 1}
    dead = study.claim(s, store, 5, attrs)
    alive = study.claim(s, store, 5, {**attrs, "worker": "busy"})
    beat = store / study.HEARTBEAT_DIR / f"trial-{dead.number}"
    os.utime(beat, (time.time() - 2 * study.STALE_S,) * 2)
    assert study.fail_dead_trials(s, store, "other") == [dead.number]
    states = {t.number: t.state for t in s.get_trials()}
    assert states == {dead.number: optuna.trial.TrialState.FAIL, alive.number: optuna.trial.TrialState.RUNNING}
    # the budget counts running trials: with 2 finished or running of 2, nothing more is claimed
    assert study.claim(s, store, 1, attrs) is None


# ------------------------------------------------------------------------------------------ ranks


def test_a_two_rank_worker_trains_every_trial_on_both_ranks_and_stops_them_together(table, tmp_path):
    study_dir = tmp_path / "study"
    log = tmp_path / "hvd.log"
    cmd = [str(BIN / "horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo",
           *tune_cmd(table, study_dir, 5, "hv", "--sampler", "random")]
    with log.open("w") as fh:
        assert subprocess.run(cmd, env=ENV, stdout=fh, stderr=subprocess.STDOUT, timeout=900).returncode == 0, \
            log.read_text()[-3000:]
    text = log.read_text()
    params = {}
    for number, rank, drawn in re.findall(r"trial (\d+) rank=(\d) size=2 params (\{.*\})", text):
        params.setdefault(number, {})[rank] = json.loads(drawn)
    assert len(params) == 5 and all(p["0"] == p["1"] for p in params.values()), params
    stops = re.findall(r"\[(\d)\]<stderr>:.*stopped after round (\d+) of", text)
    by_rank = {r: [n for rr, n in stops if rr == r] for r in ("0", "1")}
    assert by_rank["0"] and by_rank["0"] == by_rank["1"], stops  # pruned trials stop on both ranks, same round
    s, c = finished(study_dir)
    assert c["complete"] + c["pruned"] == 5 and c["pruned"] == len(by_rank["0"])
    assert {t.user_attrs["world_size"] for t in s.trials} == {2}


# ------------------------------------------------------------------------------------------ results


def test_the_tuned_parameters_reach_the_final_training_and_are_recorded(table, tmp_path):
    best = tmp_path / "best_params.yaml"
    best.write_text(yaml.safe_dump({"model": "lstm", "study": "lstm-abc", "trial": 3, "value": 0.9,
                                    "params": {"hidden_size": 12, "dropout": 0.25}}))
    tuned = hyperparameters.read_best(best, "lstm")
    metrics = training.train("lstm", [table], tmp_path / "model", {"hidden_size": 64, "min_steps": 30, "epochs": 1,
                                                                    "threads": 1}, tuned=tuned)
    assert metrics["params"]["hidden_size"] == 12 and metrics["params"]["dropout"] == 0.25
    assert metrics["tuned"]["params"] == {"hidden_size": 12, "dropout": 0.25}
    assert metrics["tuned"]["file"] == str(best) and metrics["tuned"]["trial"] == 3
    saved = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert saved["tuned"] == metrics["tuned"]


def test_the_final_training_of_the_best_trial_takes_its_run_and_trains_nothing(table, tmp_path, caplog):
    """The study's best trial ran the final training's run (same parameters, rows, seed and ranks): that
    training takes the trial's ended run from its checkpoint, and ends with the weights it would have
    trained. Another run (other parameters) trains afresh."""
    base = {"min_steps": 150, "evaluations": 10, "patience": 3, "threads": 1, "hidden_size": 8}
    study_dir = tmp_path / "lstm"
    summary = tuning.tune("lstm", [table], study_dir, _hpo(3, "lstm", {"learning_rate": {"low": 1e-3, "high": 3e-2}},
                                                      pruner="none"), base=base, worker="w0")
    best = study_summary.summarize(study_dir, study_dir / "best_params.yaml", figures=False, model="lstm")
    assert (study_dir / best["checkpoint"]).is_file() and len(list((study_dir / "checkpoints").iterdir())) == 1
    tuned = hyperparameters.read_best(study_dir / "best_params.yaml", "lstm")
    caplog.clear()  # the trials' lines, where an earlier test left the logger at INFO
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        taken = training.train("lstm", [table], tmp_path / "taken", base, tuned=tuned)
    assert "holds this run ended" in caplog.text and "round=" not in caplog.text, caplog.text[-3000:]
    assert taken["resumed"]["finished_before"] and taken["tuned"]["checkpoint"] == tuned["checkpoint"]
    # its training time is the trial's rounds (what the report compares models on), not this job's
    trial = next(t for t in summary["trials"] if t["number"] == best["trial"])
    assert 0.5 * trial["seconds"] < taken["train_seconds"] <= trial["seconds"]
    assert (study_dir / best["checkpoint"]).is_file()  # the study keeps it: the training took a copy
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        trained = training.train("lstm", [table], tmp_path / "trained", base, tuned={**tuned, "checkpoint": None})
    assert "round=1 rank=0" in caplog.text and "resumed" not in trained
    assert _weights_of(tmp_path / "taken") == _weights_of(tmp_path / "trained")
    assert taken["val"] == trained["val"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="lcflow.train"):
        other = training.train("lstm", [table], tmp_path / "other", {**base, "batch_size": 16}, tuned=tuned)
    assert "is of another run" in caplog.text and "round=1 rank=0" in caplog.text and "resumed" not in other


def _weights_of(model_dir: Path) -> dict[str, list]:
    import torch

    return {k: v.tolist() for k, v in torch.load(model_dir / "model.pt", weights_only=True).items()}


def test_a_forest_is_tuned_in_one_process_on_carved_val_rows(table, tmp_path):
    summary = tuning.tune("rf", [table], tmp_path / "rf",
                          _hpo(3, "rf", {"n_estimators": {"low": 10, "high": 40}, "min_samples_leaf": {"low": 1, "high": 5}}),
                          base={"n_jobs": 1}, worker="w0", out=tmp_path / "w0.json")
    assert len(summary["trials"]) == 3 and all(t["state"] == "complete" for t in summary["trials"])
    # each trial's value is the val accuracy of a forest of its parameters, fitted again here on the same
    # carved rows and scored by scikit-learn
    from sklearn.metrics import accuracy_score

    from lcflow.train.data.training_data import prepare_data
    from lcflow.train.models import model_class

    cls = model_class("rf")
    data = prepare_data(cls, "rf", [table], check("rf", {"n_jobs": 1}), carve=True)
    assert data.val_rows is not None and len(data.val_rows[1]) > 0
    for trial in summary["trials"]:
        forest = cls({"n_jobs": 1, **trial["params"]}, data.x.shape[2], data.x.shape[1], len(data.classes))
        forest.fit(data.x, data.y, data.x_val, data.y_val)
        assert trial["value"] == pytest.approx(accuracy_score(data.y_val, forest.predict_proba(data.x_val).argmax(1)))
    best = study_summary.summarize(tmp_path / "rf", tmp_path / "rf" / "best_params.yaml", figures=False, model="rf")
    assert set(best["params"]) == {"n_estimators", "min_samples_leaf"} and best["model"] == "rf"
    assert best["value"] == max(t["value"] for t in summary["trials"])


def test_a_draw_of_a_complete_trials_parameters_takes_its_value_untrained(table, tmp_path, monkeypatch):
    """Four trials in a space of two points: every point is trained once, and a trial that draws a
    finished point again ends complete with that trial's value, as retraining the deterministic forest
    would give."""
    from lcflow.train.models import model_class

    cls, fits = model_class("rf"), []
    fit = cls.fit
    monkeypatch.setattr(cls, "fit", lambda self, *a, **k: fits.append(dict(self.params)) or fit(self, *a, **k))
    summary = tuning.tune("rf", [table], tmp_path / "rf", _hpo(4, "rf", {"min_samples_leaf": {"low": 1, "high": 2}}),
                          base={"n_jobs": 1, "n_estimators": 20}, worker="w0")
    trials = {t["number"]: t for t in summary["trials"]}
    assert len(trials) == 4 and all(t["state"] == "complete" for t in trials.values())
    repeats = [t for t in trials.values() if "repeats" in t]
    assert repeats  # four draws from two points
    for t in repeats:
        first = trials[t["repeats"]]
        assert "repeats" not in first and first["params"] == t["params"] and first["value"] == t["value"]
        assert t["rounds"] == 0
    trained = [t for t in trials.values() if "repeats" not in t]
    assert sorted(f["min_samples_leaf"] for f in fits) == sorted(t["params"]["min_samples_leaf"] for t in trained)
    assert len({t["params"]["min_samples_leaf"] for t in trained}) == len(trained)
    s = study.open_study(tmp_path / "rf", summary["study"], None, None)
    assert [t.user_attrs.get("repeats") for t in s.trials] == [trials[t.number].get("repeats") for t in s.trials]
    # a worker of another number of ranks (another global batch) trains the point again
    point = s.trials[0].params
    assert tuning._complete_with_params(s, point, 1).number == 0 and tuning._complete_with_params(s, point, 2) is None


def test_a_study_can_live_in_a_database_instead_of_the_journal(table, tmp_path):
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    space = {"n_estimators": {"low": 10, "high": 30}}
    for worker in ("a", "b"):  # one after the other: the second finds the budget spent by the first
        tuning.tune("rf", [table], tmp_path / "rf", _hpo(2, "rf", space, storage=url), base={"n_jobs": 1}, worker=worker)
    assert not (tmp_path / "rf" / study.JOURNAL).exists()
    s = study.load_study(tmp_path / "rf", url)
    assert study.counts(s)["complete"] == 2 and {t.user_attrs["worker"] for t in s.trials} == {"a"}
    best = study_summary.summarize(tmp_path / "rf", tmp_path / "best.yaml", storage_url=url, figures=False, model="rf")
    assert best["params"] == s.best_trial.params


def test_the_balanced_accuracy_of_a_round_is_the_mean_recall_of_its_classes(table):
    """What the pruner sees for metric balanced_accuracy, checked against scikit-learn on the same predictions."""
    from sklearn.metrics import balanced_accuracy_score

    from lcflow.train.models import model_class

    cls = model_class("lstm")
    params = check("lstm", {"epochs": 1, "min_steps": 20, "evaluations": 1, "hidden_size": 8, "threads": 1})
    data = training_data.prepare_data(cls, "lstm", [table], params, carve=True)
    net = cls(params, len(data.table.bands) + 1, data.table.steps, len(data.classes))
    seen = []
    net.on_round = lambda row: seen.append(row) or False
    history = net.fit(data.x, data.y, data.x_val, data.y_val)
    assert seen == history and len(history) == 1
    predicted = net.predict_proba(data.x_val).argmax(1)
    assert history[0]["val_balanced_accuracy"] == pytest.approx(balanced_accuracy_score(data.y_val, predicted))
    assert history[0]["val_accuracy"] == pytest.approx((predicted == data.y_val).mean())


def test_a_trial_keeps_its_heartbeat_until_it_is_told(table, tmp_path, monkeypatch):
    """Between the end of training and the trial's result the trial is still running: without a heartbeat
    then, another worker claiming a trial would fail it as dead (seen under load on a 2-core machine)."""
    seen = []
    tell = optuna.Study.tell

    def spy(self, trial, *args, **kwargs):
        number = trial if isinstance(trial, int) else trial.number
        seen.append((tmp_path / "rf" / study.HEARTBEAT_DIR / f"trial-{number}").exists())
        return tell(self, trial, *args, **kwargs)

    monkeypatch.setattr(optuna.Study, "tell", spy)
    tuning.tune("rf", [table], tmp_path / "rf", _hpo(2, "rf", {"n_estimators": {"low": 10, "high": 20}}),
                base={"n_jobs": 1}, worker="w0")
    assert seen == [True, True]
    assert not list((tmp_path / "rf" / study.HEARTBEAT_DIR).glob("trial-*"))  # gone once told


def test_a_study_may_search_how_much_a_forest_teaches(table, tmp_path, caplog, monkeypatch):
    """``distill`` in the space: each trial that draws a share trains on the forest's targets at that share,
    and the teacher's forests are fitted once for the study's training rows, not once a trial."""
    from lcflow.train.data import forest_teacher

    fits = []
    fit = forest_teacher.out_of_fold_proba
    monkeypatch.setattr(forest_teacher, "out_of_fold_proba", lambda *a, **k: fits.append(len(a[1])) or fit(*a, **k))
    base = {"min_steps": 30, "evaluations": 3, "patience": 3, "threads": 1, "hidden_size": 8}
    with caplog.at_level(logging.INFO, logger="lcflow.train"):
        summary = tuning.tune("lstm", [table], tmp_path / "lstm", _hpo(2, "lstm", {"distill": {"low": 0.2, "high": 0.9}},
                                                                      pruner="none"), base=base, worker="w0")
    shares = sorted(round(t["params"]["distill"], 2) for t in summary["trials"])
    taught = sorted(float(m.split(" take ")[1].split()[0]) for m in caplog.messages if m.startswith("distill: a forest's"))
    assert len(shares) == 2 and taught == shares
    assert len(fits) == 1, fits


def test_a_full_disk_under_the_journal_ends_in_one_line_and_the_study_goes_on_once_there_is_room(table, tmp_path):
    with tmpfs(tmp_path / "small", "24k") as small:
        space = _hpo(200, "rf", {"n_estimators": {"low": 5, "high": 10}})
        with pytest.raises(Exception) as full:
            tuning.tune("rf", [table], small / "rf", space, base={"n_jobs": 1})
        said = str(full.value)
        assert type(full.value).__name__ == "LcflowError" and said == (
            f"study {small / 'rf'}: its file system is full (No space left on device); the journal keeps every "
            "trial told before: free space, and the same command goes on from there"), said
        import shutil

        shutil.copytree(small / "rf", tmp_path / "rf")  # room again
    s, c = finished(tmp_path / "rf")  # the journal loads (a torn last record mended): what was told is kept
    told = c["complete"] + c["pruned"]
    assert told > 0, c
    summary = tuning.tune("rf", [table], tmp_path / "rf", _hpo(told + 2, "rf", {"n_estimators": {"low": 5, "high": 10}}),
                          base={"n_jobs": 1})
    s, c = finished(tmp_path / "rf")
    assert c["complete"] + c["pruned"] == told + 2 and len(summary["trials"]) == 2, c

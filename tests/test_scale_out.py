"""Batch and asynchronous BO: fantasies against a float64 reference, batch proposals, and
runs on a 2-worker Dask LocalCluster with a worker killed and the driver killed."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import cloudpickle
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from typer.testing import CliRunner

import bojax
from bojax import gp
from bojax.bo.journal import Journal
from bojax.cli import app
from bojax.errors import JournalError, ObjectiveError, SettingsError
from bojax.objectives.problems import get_problem
from bojax.spaces import Integer, Space
from bojax.surrogates import GPSurrogate

BRANIN = get_problem("branin")
FAST = {"surrogate": "gp-map", "num_candidates": 256, "progress": False}


# -- fantasies -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fitted_map():
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(10, 2))
    y = np.sin(6 * x[:, 0]) + x[:, 1]
    surrogate = GPSurrogate(method="map")
    state = surrogate.fit(jax.random.key(0), surrogate.init(2), gp.make_data(x, y))
    return surrogate, state, x, y, rng.uniform(size=(3, 2)), rng.uniform(size=(6, 2))


def reference_posterior(state, x, pending, x_star, outcomes=None):
    """mu(x* | X + X_p, y + y_p) (when ``outcomes`` y + y_p are given) and sigma^2(x* | X +
    X_p) in NumPy: the variance does not depend on the outcomes."""
    params = jax.tree.map(lambda a: np.asarray(a[0]), state.samples)
    amp, ell = params["kernel"]["amplitude"], params["kernel"]["lengthscales"]

    def k(a, b):
        r = np.sqrt(np.sum(((a[:, None] - b[None]) / ell) ** 2, axis=-1))
        return amp * (1 + np.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-np.sqrt(5) * r)

    xa = np.concatenate([x, pending])
    gram = k(xa, xa) + params["noise"] * np.eye(len(xa))
    cross = k(xa, x_star)
    variance = amp - np.sum(cross * np.linalg.solve(gram, cross), axis=0)
    if outcomes is None:
        return variance
    prior = params["mean"]["value"]
    return prior + cross.T @ np.linalg.solve(gram, outcomes - prior), variance


def test_the_believer_keeps_the_mean_and_shrinks_the_variance_as_the_reference(fitted_map):
    surrogate, state, x, _, pending, x_star = fitted_map
    mean0, _ = surrogate.predict(state, x_star)
    conditioned, outcomes = surrogate.fantasize(jax.random.key(1), state, pending, "believer", None)
    mean, var = surrogate.predictive(conditioned, jnp.asarray(x_star))
    assert mean.shape == (1, 6)
    np.testing.assert_allclose(mean[0], mean0[0], atol=1e-9)
    np.testing.assert_allclose(var[0], reference_posterior(state, x, pending, x_star), rtol=1e-6)
    pending_mean, _ = surrogate.predict(state, pending)
    np.testing.assert_allclose(outcomes[0, :3], pending_mean[0], atol=1e-9)
    assert np.all(np.isinf(outcomes[0, 3:]))  # padding


@pytest.mark.parametrize("strategy", ["believer", "integrated"])
def test_a_data_dependent_mean_reads_the_real_data_not_the_fantasies(strategy):
    """The exploration mean (min(y) + (mean(y) - min(y)) / 2) of a GP conditioned on
    fantasies is the real data's: each fantasy's mean is then the float64 Gaussian
    conditional with that prior mean; the believer's is the posterior's own. Reading the
    fantasised y moved the believer's mean by 0.21 at x = 0.6 (review BF)."""
    model = gp.GP(mean="exploration")
    x, y = np.array([[0.1], [0.2], [0.3]]), np.array([0.0, 0.0, 10.0])
    params = model.init_params(1, 1e-3)
    params["kernel"]["lengthscales"] = jnp.full(1, 0.05)
    batch = jax.tree.map(lambda a: a[None], params)
    posts = jax.vmap(gp.core.posterior, in_axes=(None, 0, None))(model, batch, gp.make_data(x, y))
    x_star = np.array([[0.1], [0.3], [0.6], [0.9]])
    pending = np.array([[0.9], [0.55]])
    num = 1 if strategy == "believer" else 3
    conditioned, outcomes = gp.fantasies.fantasize(
        model, strategy, num, jax.random.key(0), posts, gp.fantasies.pending_data(pending)
    )
    predict = jax.vmap(gp.core.predict, in_axes=(None, 0, None))
    mean, _ = gp.fantasies.rows(*predict(model, conditioned, jnp.asarray(x_star)))
    amp, ell = float(params["kernel"]["amplitude"]), 0.05
    noise = float(params["noise"])

    def k(a, b):
        r = np.sqrt(5.0) * np.abs(a[:, None, 0] - b[None, :, 0]) / ell
        return amp * (1 + r + r**2 / 3) * np.exp(-r)

    prior = y.min() + 0.5 * (y.mean() - y.min())  # the real data's, for every row
    xa = np.concatenate([x, pending])
    gram = k(xa, xa) + noise * np.eye(len(xa))
    for row in range(num):
        ya = np.concatenate([y, np.asarray(outcomes[row, : len(pending)])])
        expected = prior + k(xa, x_star).T @ np.linalg.solve(gram, ya - prior)
        np.testing.assert_allclose(mean[row], expected, rtol=1e-7, atol=1e-9)
    if strategy == "believer":
        before, _ = predict(model, posts, jnp.asarray(x_star))
        np.testing.assert_allclose(mean[0], before[0], atol=1e-9)


def test_integrated_fantasies_average_back_to_the_posterior(fitted_map):
    """E_y[mu(x* | y_p)] = mu(x*) and Var_y[mu(x* | y_p)] = sigma^2(x*) - sigma^2(x* | X_p)."""
    surrogate, state, x, _, pending, x_star = fitted_map
    mean0, var0 = surrogate.predict(state, x_star)
    conditioned, outcomes = surrogate.fantasize(
        jax.random.key(2), state, pending, "integrated", 4000
    )
    assert conditioned.alpha.shape[::2] == (1, 4000)  # one GP, a column per fantasy
    mean, var = gp.fantasies.rows(*surrogate.predictive(conditioned, jnp.asarray(x_star)))
    reference = reference_posterior(state, x, pending, x_star)
    assert mean.shape == (4000, 6)
    y = np.asarray(state.posteriors.data.y)[0, : len(x)]
    for r in (0, 1, 3999):  # row r is the GP conditioned on fantasy r's own outcomes
        expected, _ = reference_posterior(
            state, x, pending, x_star, np.concatenate([y, outcomes[r, :3]])
        )
        np.testing.assert_allclose(mean[r], expected, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(var, np.broadcast_to(reference, var.shape), rtol=1e-6)
    spread = np.sqrt(var0[0] - reference)
    assert np.all(np.abs(mean.mean(axis=0) - mean0[0]) < 4 * spread / np.sqrt(4000))
    np.testing.assert_allclose(mean.std(axis=0), spread, rtol=0.06)


def test_latent_fantasies_condition_on_noise_free_values_as_the_gaussian_conditional(fitted_map):
    """Noisy EHVI's sampled fronts: f_p ~ N(mu_p, S_pp) (the latent posterior, no noise),
    and f(x*) | f_p has mean mu_* + S_*p S_pp^-1 (f_p - mu_p), variance S_** - S_*p S_pp^-1
    S_p*, all from a float64 NumPy posterior."""
    surrogate, state, x, _, pending, x_star = fitted_map
    params = jax.tree.map(lambda a: np.asarray(a[0]), state.samples)
    amp, ell = params["kernel"]["amplitude"], params["kernel"]["lengthscales"]

    def k(a, b):
        r = np.sqrt(np.sum(((a[:, None] - b[None]) / ell) ** 2, axis=-1))
        return amp * (1 + np.sqrt(5) * r + 5 / 3 * r**2) * np.exp(-np.sqrt(5) * r)

    gram = k(x, x) + params["noise"] * np.eye(len(x))
    points = np.concatenate([pending, x_star])
    mean0, _ = surrogate.predict(state, points)
    cross = k(x, points)
    cov = k(points, points) - cross.T @ np.linalg.solve(gram, cross)
    p = len(pending)
    gain = np.linalg.solve(cov[:p, :p], cov[:p, p:])  # (P, M)
    conditioned, outcomes = gp.fantasies.sample_latent(
        surrogate.model, 3000, jax.random.key(3), surrogate.conditioned(state),
        gp.fantasies.pending_data(pending),
    )  # fmt: skip
    drawn = np.asarray(outcomes)[:, :p]
    np.testing.assert_allclose(np.cov(drawn.T), cov[:p, :p], rtol=0.1, atol=0.02 * cov.max())
    mean, var = surrogate.predictive(conditioned, jnp.asarray(x_star))
    assert mean.shape == (1, 6, 3000) and var.shape == (1, 6)
    expected = np.asarray(mean0[0, p:]) + (drawn - np.asarray(mean0[0, :p])) @ gain
    np.testing.assert_allclose(mean[0].T, expected, atol=1e-6)
    np.testing.assert_allclose(var[0], np.diag(cov[p:, p:] - cov[p:, :p] @ gain), atol=1e-6)


# -- batch proposals ---------------------------------------------------------------------------


def fitted_state(settings, n=8, seed=0):
    state = bojax.init(BRANIN.space, settings)
    for u in BRANIN.space.sample(jax.random.key(seed), n, "sobol"):
        state = bojax.tell(state, u, BRANIN(BRANIN.space.from_unit(u)))
    return state


@pytest.mark.parametrize("fantasy", ["integrated", "believer"])
def test_a_batch_is_distinct_in_bounds_and_avoids_pending_points(fantasy):
    settings = bojax.Settings(surrogate="gp-map", fantasy=fantasy, num_candidates=256)
    state = fitted_state(settings)
    pending = np.array([[0.5, 0.5], [0.1, 0.9]])
    points, _, infos = bojax.ask_batch(state, 4, pending)
    assert points.shape == (4, 2) and np.all((points >= 0) & (points <= 1))
    taken = np.concatenate([state.u, pending, points])
    gaps = np.linalg.norm(taken[:, None] - taken[None], axis=-1) + np.eye(len(taken))
    assert gaps.min() > 1e-6
    assert [i["phase"] for i in infos] == ["bo"] * 4


def test_pending_points_move_the_next_proposal_away():
    """Without pending points ask() proposes u; with u pending it proposes elsewhere."""
    settings = bojax.Settings(surrogate="gp-map", num_candidates=256)
    state = fitted_state(settings)
    u, _, _ = bojax.ask(state)
    v, _, _ = bojax.ask(state, pending=u[None])
    assert np.linalg.norm(u - v) > 0.05


def test_a_small_integer_space_is_used_up_without_repeats():
    space = Space([Integer("a", 0, 2), Integer("b", 0, 1)])
    result = bojax.minimize(
        lambda p: (p["a"] - 1) ** 2 + p["b"], space, iterations=10, initial=2, q=3, **FAST
    )
    seen = [(r["x"]["a"], r["x"]["b"]) for r in result.history]
    assert len(seen) == len(set(seen)) == 6 and result.stopped


def test_minimize_without_an_executor_hands_batches_to_the_objective():
    calls = []

    class Batched:
        def __call__(self, point):
            return BRANIN(point)

        def batch(self, points):
            calls.append(len(points))
            return [self(p) for p in points]

    result = bojax.minimize(Batched(), BRANIN.space, iterations=6, initial=3, q=3, **FAST)
    assert calls == [3, 3, 3] and result.evaluations == 9


def test_a_sequential_run_does_not_change_with_the_inline_batch_code():
    """q = 1 without an executor and q = 1 on a one-thread pool propose the same points."""
    alone = bojax.minimize(BRANIN, BRANIN.space, iterations=4, initial=3, **FAST)
    with ThreadPoolExecutor(1) as pool:
        pooled = bojax.minimize(
            BRANIN, BRANIN.space, iterations=4, initial=3, executor=pool, **FAST
        )
    assert [r["u"] for r in alone.history] == [r["u"] for r in pooled.history]


def test_a_batch_as_large_as_the_run_warns_that_no_model_proposes():
    with pytest.warns(UserWarning, match="none from the model") as seen:
        result = bojax.minimize(BRANIN, BRANIN.space, q=4, initial=2, iterations=2, **FAST)
    assert seen[0].filename == __file__  # the line that asked for it
    assert [r["phase"] for r in result.history] == ["initial"] * 4


def test_bad_scale_out_settings_are_typed_errors():
    with pytest.raises(SettingsError, match="q must"):
        bojax.minimize(BRANIN, BRANIN.space, q=0, **FAST)
    with pytest.raises(SettingsError, match="retries"):
        bojax.minimize(BRANIN, BRANIN.space, retries=-1, **FAST)
    with pytest.raises(SettingsError, match="fantasy"):
        bojax.minimize(BRANIN, BRANIN.space, fantasy="hope", **FAST)
    with pytest.raises(SettingsError, match="submit"):
        bojax.minimize(BRANIN, BRANIN.space, executor=object(), **FAST)


def test_a_corrupt_pending_file_is_a_journal_error(tmp_path):
    bojax.minimize(BRANIN, BRANIN.space, iterations=0, initial=2, out=tmp_path, **FAST)
    (tmp_path / "pending.json").write_text("[{")
    with pytest.raises(JournalError, match=r"pending\.json is corrupt"):
        bojax.minimize(
            BRANIN, BRANIN.space, iterations=1, initial=2, out=tmp_path, resume=True, **FAST
        )


# -- a 2-worker Dask LocalCluster ---------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    """Two single-threaded worker processes. Dask gives up on a task at the first worker
    death (allowed-failures 0), so a killed worker reaches bojax's own retry."""
    import dask

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with bojax.bo.cluster.connect(workers=2) as dask_client:
            yield dask_client


class KillsItsWorker:
    """Branin, slowed down; the ``kill_at``-th call (counted across processes through
    files) kills the worker process running it, once."""

    def __init__(self, folder, kill_at):
        self.folder, self.kill_at = str(folder), kill_at

    def __call__(self, point):
        time.sleep(0.2)
        calls = os.path.join(self.folder, "calls")
        os.makedirs(calls, exist_ok=True)
        with open(os.path.join(calls, f"{os.getpid()}-{time.time_ns()}"), "w"):
            pass
        if len(os.listdir(calls)) >= self.kill_at:
            try:
                os.close(os.open(os.path.join(self.folder, "killed"), os.O_CREAT | os.O_EXCL))
                os.kill(os.getpid(), signal.SIGKILL)
            except FileExistsError:
                pass
        return BRANIN(point)


@pytest.mark.slow
def test_two_workers_propose_distinct_points_in_bounds_and_journal_everything(client, tmp_path):
    result = bojax.minimize(
        BRANIN, BRANIN.space, iterations=8, initial=4, executor=client, out=tmp_path, **FAST
    )
    u = np.array([r["u"] for r in result.history])
    assert len(result.history) == 12 and result.failures == 0
    assert np.all((u >= 0) & (u <= 1))
    assert len(np.unique(u, axis=0)) == 12
    assert sorted(r["proposal"] for r in result.history) == list(range(12))
    assert json.loads((tmp_path / "pending.json").read_text()) == []
    assert len(Journal(tmp_path).read()) == 12


def branin_curve(point, report, checkpoint=None):
    """Branin reached along a 1/step curve, continued from ``checkpoint`` (its step)."""
    time.sleep(0.05)
    for step in range(1 + (checkpoint or 0), 10):
        report(step, BRANIN(point) + 10.0 / step, checkpoint=step)
    return BRANIN(point)


@pytest.mark.slow
def test_an_objective_dask_cannot_send_is_refused_before_any_evaluation(client, tmp_path):
    """Dask logged pages of pickling tracebacks, then the run ended with 'no evaluation
    finished' (review BY); plain and step-wise runs now refuse it first, saying why."""
    lock = threading.Lock()

    def holds_a_lock(point, lock=lock):
        return point["x1"]

    def trains_holding_a_lock(point, report, lock=lock):
        report(1, point["x1"])

    for objective, more in ((holds_a_lock, {}), (trains_holding_a_lock, {"max_step": 1})):
        with pytest.raises(ObjectiveError, match=r"executor's workers.*lock.*cloudpickle"):
            bojax.minimize(objective, BRANIN.space, executor=client, out=tmp_path, **more,
                           **FAST)  # fmt: skip
        assert not (tmp_path / "journal.jsonl").exists()


@pytest.mark.slow
def test_step_wise_trainings_run_as_segments_on_dask_workers(client, tmp_path):
    result = bojax.minimize(
        branin_curve, BRANIN.space, executor=client, out=tmp_path, max_step=9,
        early_stopping="asha", step_budget=60, **FAST,
    )  # fmt: skip
    assert result.steps == 60 == sum(r["diagnostics"]["charged"] for r in result.history)
    # Checkpoints travel between worker processes: no record's steps were trained twice.
    assert all(r["diagnostics"]["charged"] == r["curve"][-1][0] for r in result.history)
    assert {"ok", "stopped"} <= {r["status"] for r in result.history}
    assert json.loads((tmp_path / "pending.json").read_text()) == []


@pytest.mark.slow
@pytest.mark.parametrize("retries", [1, 0])
def test_a_worker_killed_mid_run_loses_nothing(client, tmp_path, retries):
    objective = KillsItsWorker(tmp_path, kill_at=3)
    result = bojax.minimize(
        objective,
        BRANIN.space,
        iterations=4,
        initial=4,
        executor=client,
        retries=retries,
        out=tmp_path / "run",
        **FAST,
    )
    assert (tmp_path / "killed").exists()
    assert len(result.history) == 8
    assert sorted(r["proposal"] for r in result.history) == list(range(8))
    lost = [r for r in result.history if r["status"] == "failed"]
    if retries:
        assert not lost
    else:
        assert len(lost) == 1 and "lost after 1 attempt" in lost[0]["error"]
    assert Journal(tmp_path / "run").read() == json.loads(json.dumps(result.history))


DRIVER = """
import time
import jax
jax.config.update("jax_enable_x64", True)
import bojax
from bojax.objectives.problems import get_problem

BRANIN = get_problem("branin")

def slow(point):
    time.sleep(0.5)
    return BRANIN(point)

if __name__ == "__main__":  # worker processes are spawned: they import this file
    with bojax.bo.cluster.connect(workers=2) as client:
        bojax.minimize(slow, BRANIN.space, iterations=6, initial=6, executor=client,
                       out={out!r}, surrogate="gp-map", num_candidates=256, progress=False)
"""


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:.*journalled for the objective")  # (a wrapper)
def test_a_killed_driver_resumes_and_reissues_the_pending_evaluations(client, tmp_path):
    out = tmp_path / "run"
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(DRIVER.format(out=str(out))))
    log = tmp_path / "driver.log"
    driver = subprocess.Popen(
        [sys.executable, str(script)], start_new_session=True, stderr=log.open("w")
    )
    journal, deadline = Journal(out), time.monotonic() + 120
    try:
        while time.monotonic() < deadline and driver.poll() is None:
            if journal.records_path.exists() and len(journal.read()) >= 3:
                break
            time.sleep(0.1)
        assert driver.poll() is None, f"the driver died by itself:\n{log.read_text()[-3000:]}"
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and its cluster, mid-run
    finally:
        driver.wait()
    before, pending = journal.read(), journal.load_pending()
    assert 3 <= len(before) < 12 and pending, "the driver was not killed mid-run"

    def slow(point):
        time.sleep(0.1)
        return BRANIN(point)

    result = bojax.minimize(
        slow,
        BRANIN.space,
        iterations=6,
        initial=6,
        executor=client,
        out=out,
        resume=True,
        **FAST,
    )
    after = result.history
    assert after[: len(before)] == before
    assert len(after) == 12 and sorted(r["proposal"] for r in after) == list(range(12))
    reissued = {p["proposal"]: p["u"] for p in pending}
    assert {r["proposal"]: r["u"] for r in after if r["proposal"] in reissued} == reissued


@pytest.mark.slow
def test_the_cli_runs_on_an_existing_scheduler(client, tmp_path):
    address = client.scheduler_info()["address"]
    result = CliRunner().invoke(
        app,
        [
            *("optimize", "forrester", "--scheduler", address, "--surrogate", "gp-map"),
            *("--iterations", "0", "--initial", "6", "--out", str(tmp_path)),
        ],
    )
    assert result.exit_code == 0, result.output
    records = Journal(tmp_path).read()
    assert len(records) == 6 and {r["status"] for r in records} == {"ok"}
    assert sorted(r["proposal"] for r in records) == list(range(6))


def preallocation() -> str | None:
    return os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE")


@pytest.mark.slow
def test_local_workers_allocate_gpu_memory_on_demand(monkeypatch):
    """Several JAX processes share one GPU only if none claims 75 % of it up front."""
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    with bojax.bo.cluster.connect(workers=1) as client:
        assert client.submit(preallocation, pure=False).result() == "false"


class _LostResult:
    """A Dask future whose task finished on a worker that then died: fetching its result
    raises (Dask's KilledWorker, once the recomputation's worker died too)."""

    status = "finished"

    def __init__(self):
        self.cancelled = False

    def add_done_callback(self, fn):
        fn(self)  # (Dask calls it at once for a future already done)

    def result(self):
        raise RuntimeError("KilledWorker: the worker holding the result died")

    def cancel(self):
        self.cancelled = True


def test_a_dask_result_lost_with_its_worker_completes_the_future_as_lost():
    """Dask's own executor completed its futures from a coroutine that the fetch's
    KilledWorker escaped: the future never completed and the run waited for ever
    (review CA). The outcome of the fetch is the future's, whatever it is."""
    from bojax.bo.evaluation import DaskExecutor, as_executor

    task = _LostResult()
    client = type("Client", (), {"submit": lambda self, *a, **k: task, "get_executor": None})()
    pool = as_executor(client)
    assert isinstance(pool, DaskExecutor)
    future = pool.submit(abs, -1)
    with pytest.raises(RuntimeError, match="KilledWorker"):
        future.result(timeout=10)
    task.add_done_callback = lambda fn: None  # still running: cancelling it cancels the task
    cancelled = pool.submit(abs, -1)
    assert cancelled.cancel() and task.cancelled


@pytest.mark.slow  # a local cluster's worker process, started twice
def test_a_local_worker_dask_retires_is_started_again():
    """Dask closes and drops a worker slow to come back after it died, and replaces it
    with none: designs that kill their worker retired every worker, and the run waited
    for ever on a task no worker would take (review BY)."""
    with bojax.bo.cluster.connect(workers=1) as client:
        local = client.cluster
        (name,) = list(local.workers)
        local.sync(local.workers.pop(name).close)  # what its lost-worker-timeout does
        assert not client.nthreads()
        client.wait_for_workers(1, timeout=60)
        assert client.submit(preallocation, pure=False).result(timeout=60) == "false"


def test_an_unreachable_scheduler_is_a_settings_error():
    with pytest.raises(SettingsError, match="cannot reach a Dask scheduler"):
        with bojax.bo.cluster.connect(scheduler="tcp://127.0.0.1:1", timeout="1s"):
            pass
    with pytest.raises(SettingsError, match="either workers"):
        with bojax.bo.cluster.connect(workers=2, scheduler="tcp://127.0.0.1:1"):
            pass


def test_a_scheduler_without_workers_is_reported_not_waited_on_silently(monkeypatch, capfd):
    """Every worker of a scheduler of one's own died: the run waited, printing nothing
    (review)."""
    from distributed import LocalCluster

    monkeypatch.setattr(bojax.bo.cluster, "NO_WORKERS_SECONDS", 0.2)
    monkeypatch.setattr(bojax.bo.cluster, "WATCH_SECONDS", 0.1)
    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as empty:
        with bojax.bo.cluster.connect(scheduler=empty.scheduler_address):
            time.sleep(1.0)
    said = capfd.readouterr().err
    assert said.count("has had no workers") == 1, said  # once per spell
    assert empty.scheduler_address in said


@pytest.mark.slow
def test_report_repeats_run_over_the_executor_as_they_run_alone(client, tmp_path):
    from bojax.reports import bnn_surrogate

    cfg = bnn_surrogate.config(
        True, problems=("forrester",), arms=("gp-map",), repeats=2, iterations=1, candidates=64
    )
    alone = bnn_surrogate.comparison(cfg, tmp_path / "alone", progress=False)
    spread = bnn_surrogate.comparison(cfg, tmp_path / "dask", progress=False, executor=client)
    ys = [
        [row["y"] for row in rows["gp-map"]] for rows in (alone["forrester"], spread["forrester"])
    ]
    assert ys[0] == ys[1] and len(ys[0]) == 2


def test_the_driver_lets_finished_futures_go():
    """A Dask result stays on its worker while its future lives, and is computed again
    when that worker dies (a review saw finished trainings rerun): the driver must not
    hold on to the futures it has finished."""
    import gc
    import weakref

    handed: list = []

    class Watched(ThreadPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            future = super().submit(fn, *args, **kwargs)
            handed.append(weakref.ref(future))
            return future

    held = []

    def f(point):
        gc.collect()
        held.append(sum(1 for ref in handed if ref() is not None and ref().done()))
        return (point["x"] - 0.3) ** 2

    space = bojax.Space([bojax.Real("x", 0.0, 1.0)])
    with Watched(1) as pool:
        bojax.minimize(
            f, space, executor=pool, initial=3, iterations=3, surrogate="gp-map", progress=False
        )
    assert len(held) == 6 and max(held) == 0

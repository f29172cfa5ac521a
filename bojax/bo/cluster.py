"""Dask as bojax's distributed engine: a local cluster or an existing scheduler.

    with cluster.connect(workers=4) as client:            # a LocalCluster on this machine
        bojax.minimize(objective, space, executor=client)

    with cluster.connect(scheduler="tcp://head:8786") as client:  # join a running cluster
        ...

Local workers are separate processes with one thread each (an objective that trains a
network should own its process, and JAX is not fork-safe), each restarted by its nanny
if it dies, and started again if Dask retires it (one slow to come back). A task whose
worker dies is not rescheduled by Dask (``allowed_failures=0``): the driver resubmits it
up to ``retries`` times, then records it as failed. A scheduler you start yourself
should do the same (``distributed.scheduler.allowed-failures: 0``), or each of bojax's
attempts is tried up to four times. Local workers allocate
accelerator memory as they need it (``XLA_PYTHON_CLIENT_PREALLOCATE=false`` unless
set): by default each JAX process takes 75 % of a GPU, so the second process on one GPU
failed to start cuSolver. On a SLURM machine, start the scheduler and workers with
dask-jobqueue and pass its address (docs/scale-out.md).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from bojax.errors import SettingsError


def _check_address(scheduler: str) -> None:
    """Refuse an address Dask cannot parse (no port, an unknown scheme) before a client
    is made: Dask's own refusal came from its event-loop thread, as a traceback."""
    from distributed.comm.addressing import get_address_host_port, normalize_address

    try:
        address = normalize_address(scheduler)
        if not address.startswith("inproc://"):
            get_address_host_port(address)
    except (ValueError, TypeError) as error:
        raise SettingsError(
            f"{scheduler!r} is not a Dask scheduler address ({error}); give one as tcp://host:port"
        ) from None


# A scheduler of your own may lose every worker (killed by what they ran, a job ended):
# the run then waits, and says so once each time it has had none this long.
NO_WORKERS_SECONDS = 30.0
WATCH_SECONDS = 5.0


def _watch_workers(client: Any, address: str, stop: threading.Event) -> None:
    """Until ``stop``: print to stderr once a no-worker spell of ``client``'s scheduler
    reaches ``NO_WORKERS_SECONDS`` (the run waits silently otherwise: review)."""
    since, said = None, False
    while not stop.wait(WATCH_SECONDS):
        try:
            workers = len(client.nthreads())
        except Exception:  # the client is closing, or the scheduler is gone
            return
        if workers:
            since, said = None, False
            continue
        since = time.monotonic() if since is None else since
        if not said and time.monotonic() - since >= NO_WORKERS_SECONDS:
            print(
                f"bojax: the Dask scheduler at {address} has had no workers for "
                f"{time.monotonic() - since:.0f} s; the run waits until one connects",
                file=sys.stderr,
                flush=True,
            )
            said = True


# How often a local cluster is checked for workers Dask retired (see _revive_workers).
REVIVE_SECONDS = 1.0


def _revive_workers(local: Any, stop: threading.Event) -> None:
    """Until ``stop``: start again the workers ``local`` (a ``LocalCluster``) retired. A
    worker that has not come back to the scheduler ``lost-worker-timeout`` (15 s) after
    it died is closed with its nanny and dropped, though the nanny may be restarting it,
    and nothing replaces it: designs that kill their worker retired every worker, and the
    run waited for ever on a task no worker would take (review BY). ``scale`` to the
    cluster's own size starts the missing ones (Dask runs one correction at a time)."""
    while not stop.wait(REVIVE_SECONDS):
        if set(local.worker_spec) - set(local.workers):
            local.scale(len(local.worker_spec))


@contextlib.contextmanager
def connect(
    workers: int | None = None,
    scheduler: str | None = None,
    timeout: str = "30s",
    **cluster_options: Any,
) -> Iterator[Any]:
    """A Dask ``Client``: to ``scheduler`` if given (waiting up to ``timeout``), else to a
    new ``LocalCluster`` of ``workers`` single-threaded worker processes, shut down on
    exit. ``cluster_options`` go to ``LocalCluster``; its workers' ``env`` gets
    ``XLA_PYTHON_CLIENT_PREALLOCATE=false`` unless this process or ``env`` sets it."""
    if (workers is None) == (scheduler is None):
        raise SettingsError("give either workers (a local cluster) or scheduler (an address)")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise SettingsError(f"workers must be a positive integer, got {workers!r}")
    if workers is not None and workers < 1:
        raise SettingsError(f"workers must be a positive integer, got {workers!r}")
    from distributed import Client, LocalCluster

    if scheduler is not None:
        _check_address(scheduler)
        try:
            client = Client(scheduler, timeout=timeout)
        except OSError as error:
            raise SettingsError(f"cannot reach a Dask scheduler at {scheduler}: {error}") from None
        stop = threading.Event()
        watcher = threading.Thread(
            target=_watch_workers, args=(client, scheduler, stop), daemon=True,
            name="bojax-worker-watch",
        )  # fmt: skip
        with client:
            watcher.start()
            try:
                yield client
            finally:
                stop.set()
        return
    options = {
        "n_workers": workers,
        "threads_per_worker": 1,
        "processes": True,
        # No dashboard, and the scheduler's HTTP endpoint on a free port: the default,
        # 8787, warned (and moved) whenever a second cluster ran in the same session.
        "dashboard_address": "127.0.0.1:0",
        # One attempt per submission: bojax's ``retries`` bounds the attempts of a task
        # whose worker dies. Dask's default (3 more) made a design that kills its worker
        # run 8 times before it was recorded as failed.
        "scheduler_kwargs": {"dashboard": False, "allowed_failures": 0},
        **cluster_options,
    }
    if "XLA_PYTHON_CLIENT_PREALLOCATE" not in os.environ:
        options["env"] = {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", **options.get("env", {})}
    with LocalCluster(**options) as local, Client(local) as client:
        stop = threading.Event()
        reviver = threading.Thread(
            target=_revive_workers, args=(local, stop), daemon=True, name="bojax-worker-revive"
        )
        reviver.start()
        try:
            yield client
        finally:
            stop.set()
            reviver.join()  # (before the cluster closes: no correction races its close)

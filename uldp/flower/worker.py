"""A long-lived ClientApp process for a SuperNode started with ``flower-supernode --isolation process``.

Flower 1.41 runs every message's ClientApp in a fresh ``flwr-clientapp`` process: the SuperNode's executor
(``flower-superexec``, started by the SuperNode in its default ``--isolation subprocess``) asks the SuperNode's
Runtime API for a task every second and starts one process per task, which imports the app (torch with it), runs
it once and exits, so a silo's records are read again for every message. With ``--isolation process`` the SuperNode
starts no executor, and any process that speaks its Runtime API may take its tasks. :func:`serve` is such a
process: it asks for a ClientApp task (every ``poll`` seconds after a task, less often the longer none comes,
up to ``max_poll``) and runs it in itself with Flower's own Runtime API
calls, as ``flwr-clientapp`` does (pull the message, the node's context and the app bundle; run the ClientApp;
push the reply, then the context and the task's status), but it does not exit: the app's module and what its
ClientApp keeps (:class:`uldp.flower.silo_views.SiloViews`: the silo's records, pseudonyms and model) stay for the
next message. The silo's state travels in Flower's node context exactly as with ``flwr-clientapp``.

It runs what its SuperNode hands it, as ``flwr-clientapp`` does (the SuperNode's ``--trusted-entities`` verify
the app bundle where the SuperLink signs them). It installs no dependencies at run time: the app's imports must be
installed next to uldp. One task runs at a time (a SuperNode hands its messages one at a time).

Start one per SuperNode, on the SuperNode's machine::

    flower-supernode --isolation process --port 9094 --superlink ... --node-config '...'
    uldp flower-worker --runtime-api-address 127.0.0.1:9094 --insecure
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flwr.app import Message
from flwr.app.error import Error
from flwr.cli.install import install_from_fab
from flwr.clientapp.client_app import LoadClientAppError
from flwr.clientapp.utils import get_load_client_app_fn
from flwr.common.config import get_project_dir
from flwr.common.constant import ErrorCode, SubStatus
from flwr.proto.runtime_pb2 import AcquireTaskRequest
from flwr.supercore.constant import TaskType
from flwr.supercore.heartbeat import HeartbeatSender, make_task_heartbeat_fn_http
from flwr.supercore.interceptors import RuntimeTokenHttpInterceptor, RuntimeVersionHttpInterceptor
from flwr.supercore.retry import make_simple_http_retry_invoker
from flwr.supercore.runtime import RuntimeHttpClient
from flwr.supernode.runtime.run_clientapp import pull_task_input, push_message, push_task_output

from uldp.common.checks import check_number
from uldp.flower.launch import DEFAULT_MAX_POLL, DEFAULT_POLL

if TYPE_CHECKING:
    from flwr.clientapp import ClientApp

LOGGER = logging.getLogger("uldp.flower")


class AppCache:
    """The ClientApp of each app bundle (FAB) this process ran, installed and imported once.

    An app's modules are imported by name (``hospital_app``); when another bundle arrives (a new version of the
    app), the previous bundle's modules are dropped first, so that the new one is imported from its own folder.
    """

    def __init__(self) -> None:
        self._apps: dict[str, ClientApp] = {}
        self._folders: list[Path] = []

    def app(self, run: Any, fab: Any) -> ClientApp:
        """The ClientApp of the run's bundle."""
        if fab.hash_str not in self._apps:
            self._forget_modules()
            install_from_fab(fab.content, skip_prompt=True)
            folder = Path(get_project_dir(run.fab_id, run.fab_version, fab.hash_str)).resolve()
            load = get_load_client_app_fn(default_app_ref="", app_path=None, multi_app=True)
            self._apps = {fab.hash_str: load(run.fab_id, run.fab_version, fab.hash_str)}
            self._folders = [folder]
            LOGGER.info(
                "uldp flower-worker: imported the ClientApp of %s %s from %s",
                run.fab_id,
                run.fab_version,
                folder,
            )
        return self._apps[fab.hash_str]

    def _forget_modules(self) -> None:
        for folder in self._folders:
            for name, module in list(sys.modules.items()):
                file = getattr(module, "__file__", None)
                if file and Path(file).resolve().is_relative_to(folder):
                    del sys.modules[name]
            if str(folder) in sys.path:
                sys.path.remove(str(folder))


def run_task(
    runtime_api_address: str,
    token: str,
    apps: AppCache,
    *,
    insecure: bool,
    root_certificates: bytes | None = None,
) -> bool:
    """Run one ClientApp task, as ``flwr-clientapp`` does, without exiting.

    Returns:
        Whether the ClientApp answered without raising (its exception goes back to the server as the reply's error,
        as from ``flwr-clientapp``).
    """
    client = RuntimeHttpClient.from_server_address(
        server_address=runtime_api_address,
        insecure=insecure,
        root_certificates=root_certificates,
        interceptors=[
            RuntimeVersionHttpInterceptor(component_name="flwr-clientapp"),
            RuntimeTokenHttpInterceptor(token),
        ],
        retry_invoker=make_simple_http_retry_invoker(),
    )
    heartbeat = HeartbeatSender(make_task_heartbeat_fn_http(client))
    message = reply = context = None
    status, details = SubStatus.FAILED, "ClientApp task failed"
    start = time.perf_counter()
    try:
        heartbeat.start()
        message, context, run, fab = pull_task_input(client)
        reply = apps.app(run, fab)(message=message, context=context)
        status, details = SubStatus.COMPLETED, ""
    except Exception as error:  # the server sees the ClientApp's error, as from flwr-clientapp
        code = (
            ErrorCode.LOAD_CLIENT_APP_EXCEPTION
            if isinstance(error, LoadClientAppError)
            else ErrorCode.CLIENT_APP_RAISED_EXCEPTION
        )
        details = f"{type(error)}:<'{error}'>"
        LOGGER.error("the ClientApp raised %s: %s", type(error).__name__, error)
        if message is not None:
            reply = Message(Error(code=code, reason=details), reply_to=message)
    finally:
        try:
            if reply is not None and context is not None:
                push_message(client, reply, context)
            push_task_output(client=client, context=context, sub_status=status, details=details)
        finally:
            heartbeat.stop()
            client.close()
    what = (
        f"{message.metadata.message_type} ({message.metadata.group_id})"
        if message is not None
        else "a task"
    )
    LOGGER.info("uldp flower-worker: %s %s in %.3f s", what, status, time.perf_counter() - start)
    return status == SubStatus.COMPLETED


def serve(
    runtime_api_address: str,
    *,
    insecure: bool,
    root_certificates: bytes | None = None,
    poll: float = DEFAULT_POLL,
    max_poll: float = DEFAULT_MAX_POLL,
    max_tasks: int | None = None,
) -> int:
    """Take the SuperNode's ClientApp tasks and run them in this process until stopped (or ``max_tasks`` ran).

    Args:
        runtime_api_address: The SuperNode's Runtime API (``flower-supernode --port``; ``127.0.0.1:9094``).
        insecure: Talk to it without TLS (loopback on one machine).
        root_certificates: PEM bytes of the CA of the SuperNode's ``--ssl-certfile`` otherwise.
        poll: Seconds before the first request after a task (and the first of all) finds none waiting.
        max_poll: The longest wait: each request that finds no task doubles it, up to this.
        max_tasks: Stop after this many tasks (tests); None: run until killed.

    Returns:
        The number of tasks run.

    Raises:
        ValueError: a non-positive ``poll``, or ``max_poll`` below it.
    """
    check_number("poll", poll, above=0)
    check_number("max_poll", max_poll, at_least=poll)
    client = RuntimeHttpClient.from_server_address(
        server_address=runtime_api_address,
        insecure=insecure,
        root_certificates=root_certificates,
        interceptors=[RuntimeVersionHttpInterceptor(component_name="SuperExec")],
        retry_invoker=make_simple_http_retry_invoker(),
    )
    apps, done, wait = AppCache(), 0, poll
    LOGGER.info(
        "uldp flower-worker: taking the ClientApp tasks of the SuperNode at %s", runtime_api_address
    )
    try:
        while max_tasks is None or done < max_tasks:
            task = client.AcquireTask(
                AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
            )
            if not (task.HasField("task") and task.token):
                time.sleep(wait)
                wait = min(2 * wait, max_poll)
                continue
            run_task(
                runtime_api_address,
                task.token,
                apps,
                insecure=insecure,
                root_certificates=root_certificates,
            )
            done, wait = done + 1, poll
    finally:
        client.close()
    return done

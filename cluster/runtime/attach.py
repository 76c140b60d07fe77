"""How a ``Cluster`` client comes to be: ``start`` joins (or starts) Ray, deploys the actors of a
namespace and waits until every directory has loaded; ``connect`` joins Ray and asks the
coordinator of a namespace to describe its cluster. Both return the ``ClusterDescription`` the
client is built from (``Cluster.start``/``Cluster.connect`` state the contract).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Callable

from cluster.errors import ActorUnavailableError, ClusterNotRunningError
from cluster.handles import lookup
from cluster.naming import COORDINATOR_NAME, abs_dir

if TYPE_CHECKING:
    from cluster.status import ClusterDescription
    from node.stats import LoadProgress


def start(log_dirs: Sequence[str] | None, cleaners: int | None,
          config: Mapping[str, Any] | None, *, address: str | None, namespace: str,
          dashboard_host: str, include_dashboard: bool | None,
          metrics_export_port: int | None, timeout_s: float,
          on_progress: Callable[[dict[str, LoadProgress | None]], None] | None,
          head_started_by_strata: bool,
          allow_missing_log_dirs: bool = False) -> tuple[ClusterDescription, bool]:
    """(the description, whether this process started the Ray head)."""
    from cluster.runtime import deploy
    from cluster.config import BrokerConfig
    from cluster.runtime.head import connect_ray

    broker = BrokerConfig.from_properties(config or {})
    if cleaners is not None:
        broker = broker.with_overrides({"log.cleaner.threads": cleaners})
    dirs = [abs_dir(d) for d in (log_dirs or broker.log_dirs)]
    broker = broker.with_log_dirs(dirs)
    owns = connect_ray(dirs, address=address, dashboard_host=dashboard_host,
                       include_dashboard=include_dashboard,
                       metrics_export_port=metrics_export_port)
    try:
        description = deploy.deploy(dirs, broker, namespace,
                                    head_started_by_strata=head_started_by_strata,
                                    allow_missing_log_dirs=allow_missing_log_dirs)
        deploy.wait_loaded(description, timeout_s=timeout_s, on_progress=on_progress)
        deploy.settle_log_dirs(description, timeout_s=timeout_s)
        deploy.serve_brokers(description, timeout_s=timeout_s)
    except BaseException:
        if owns:
            import ray
            ray.shutdown()
        raise
    return description, owns


def connect(address: str | None, namespace: str) -> ClusterDescription:
    """The description of the running cluster of ``namespace``; ``ClusterNotRunningError`` when
    there is no Ray cluster at ``address`` or no Strata cluster in it."""
    import ray

    from cluster.runtime.head import check_joined_cluster, init_ray

    if not ray.is_initialized():
        try:
            init_ray(address or "auto")
        except ConnectionError as err:
            raise ClusterNotRunningError(f"no Ray cluster at {address}: {err}",
                                         address=address) from None
    else:
        check_joined_cluster(address)
    try:
        coordinator = lookup(COORDINATOR_NAME, namespace)
        return coordinator.call("describe", timeout=60)
    except ActorUnavailableError as err:
        raise ClusterNotRunningError(f"no Strata cluster in namespace {namespace}: {err}",
                                     namespace=namespace) from None

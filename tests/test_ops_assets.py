"""The monitoring assets in ops/ only name metrics the cluster exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from cluster.metrics.sink import COUNTER, METRICS

OPS = Path(__file__).resolve().parents[1] / "ops"


def exported_names() -> set[str]:
    return {f"ray_{name}_total" if kind == COUNTER else f"ray_{name}"
            for name, (kind, _help, _tags) in METRICS.items()}


def test_grafana_dashboard_queries_only_exported_metrics() -> None:
    dashboard = json.loads((OPS / "grafana-dashboard.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"ray_strata_[a-z_]+", target["expr"])}
    assert used, "the dashboard has no Strata panels"
    assert used <= exported_names(), sorted(used - exported_names())


def test_grafana_dashboard_covers_every_metric() -> None:
    dashboard = (OPS / "grafana-dashboard.json").read_text()
    assert sorted(n for n in exported_names() if n not in dashboard) == []


def test_prometheus_config_keeps_strata_metrics() -> None:
    text = (OPS / "prometheus.yml").read_text()
    assert "ray_strata_" in text
    assert "prom_metrics_service_discovery.json" in text


def test_prometheus_scrapes_each_endpoint_once() -> None:
    """One job with Ray's service discovery, which lists every node's endpoint: a static target
    beside it scraped the head twice and doubled every sum() of the dashboard (issue 15)."""
    import yaml

    config = yaml.safe_load((OPS / "prometheus.yml").read_text())
    jobs = config["scrape_configs"]
    assert len(jobs) == 1
    assert "static_configs" not in jobs[0]
    assert [f for sd in jobs[0]["file_sd_configs"] for f in sd["files"]] == \
        ["/tmp/ray/prom_metrics_service_discovery.json"]


def test_every_fact_is_exported_by_one_actor_only() -> None:
    """``strata_log_dir_offline`` is the node's (one series per directory); the coordinator
    exported it too, so sum(ray_strata_log_dir_offline) counted each offline directory twice.
    The gauges the node, the coordinator and the cleaner workers set are set by one of them."""
    root = OPS.parent / "cluster"
    setters = {path: set(re.findall(r'\.set\("(strata_[a-z_]+)"', (root / path).read_text()))
               for path in ("runtime/node_service.py", "cleaning/coordinator_metrics.py",
                            "cleaning/worker.py")}
    assert all(setters.values()), setters      # each actor's module still sets its gauges
    twice = sorted(name for name in set().union(*setters.values())
                   if sum(name in names for names in setters.values()) > 1)
    assert twice == [], twice


def test_the_runbook_maps_every_metric_to_kafkas_jmx_name_or_says_there_is_none() -> None:
    rows = {m.group(1): m.group(2) for m in re.finditer(
        r"^\s*\| `(ray_strata_[a-z_]+)` \|(?:[^|]*\|){2}([^|]*)\|\s*$",
        (OPS / "README.md").read_text(), re.M)}
    assert sorted(rows) == sorted(exported_names())
    assert all(kafka.strip().startswith(("`kafka.", "none")) for kafka in rows.values()), rows

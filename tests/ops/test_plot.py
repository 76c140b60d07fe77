"""``strata stats --plot``: three readable PNGs from samples, sampled live or from a report."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from ops import plot

PNG = b"\x89PNG\r\n\x1a\n"


def samples() -> list[dict]:
    out = []
    for i in range(12):
        out.append({
            "t": i * 0.5,
            "log_dirs": {"/d0": {"log_bytes": 1000 * i, "online": i not in (5, 6),
                                 "free_bytes": 10**9},
                         "/d1": {"log_bytes": 700 * i, "online": True, "free_bytes": 10**9}},
            "partitions": {"kv-0": {"size_bytes": 900 * i, "dirty_ratio": (i % 4) / 4,
                                    "compacted": True, "log_dir": "/d0"},
                           "log-0": {"size_bytes": 100 * i, "dirty_ratio": 0.0,
                                     "compacted": False, "log_dir": "/d0"}},
            "cleans": [] if i % 3 else [{"cleaner_id": i % 2, "topic": "kv", "partition": 0,
                                         "bytes_read": 40_000 * (i + 1), "elapsed_secs": 0.02,
                                         "finished_ms": 1_000 * i, "outcome": "cleaned"}]})
    return out


def test_plots_are_written_as_non_empty_pngs(tmp_path: Path) -> None:
    paths = plot.plot_samples(samples(), tmp_path / "plots", "test")
    assert [p.name for p in paths] == list(plot.PLOTS)
    for path in paths:
        data = path.read_bytes()
        assert data.startswith(PNG) and len(data) > 10_000


def test_plots_of_a_run_without_cleans_still_render(tmp_path: Path) -> None:
    quiet = [{**s, "cleans": []} for s in samples()]
    assert all(p.stat().st_size > 5_000 for p in plot.plot_samples(quiet, tmp_path))


def test_stats_plot_from_a_drill_report(tmp_path: Path, capsys) -> None:
    report = tmp_path / "kill-node.json"
    report.write_text(json.dumps({"drill": "kill-node", "samples": samples()}))
    parser = argparse.ArgumentParser()
    plot.register(parser.add_subparsers())
    args = parser.parse_args(["stats", "--plot", str(tmp_path / "out"), "--from-report",
                              str(report)])
    assert args.handler(args) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(plot.PLOTS)
    assert str(tmp_path / "out" / "log_sizes.png") in capsys.readouterr().out


def test_stats_from_report_needs_plot(tmp_path: Path) -> None:
    from ops.tools import UsageError

    parser = argparse.ArgumentParser()
    plot.register(parser.add_subparsers())
    args = parser.parse_args(["stats", "--from-report", str(tmp_path / "x.json")])
    with pytest.raises(UsageError):
        args.handler(args)


def test_cleans_from_before_sampling_started_are_not_plotted() -> None:
    """The coordinator's recent cleans span its whole life: a 40 s run must not plot the cleans
    of the 135 s before it (issue 15: the throughput axis spanned 0-175 s)."""
    from cluster.status import CleanSummary

    def clean(finished_ms: int) -> CleanSummary:
        fields = {f: 0 for f in CleanSummary.__dataclass_fields__}
        fields.update(topic="kv", partition=0, cleaner_id=1, finished_ms=finished_ms,
                      outcome="cleaned", bytes_read=10, elapsed_secs=0.5)
        return CleanSummary(**fields)

    seen: set = set()
    recent = [clean(100_000), clean(234_000), clean(236_500)]
    cleans = plot.new_cleans(recent, seen, since_ms=235_000)
    assert [(c["finished_ms"], c["t"]) for c in cleans] == [(236_500, 1.5)]
    assert plot.new_cleans(recent, seen, since_ms=235_000) == []     # each clean once

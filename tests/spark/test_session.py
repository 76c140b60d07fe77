"""``cluster.spark.session.local_session``: the settings a user's local session gets, and the
ones the tests add."""

from __future__ import annotations


def test_a_local_session_runs_the_full_jit_unless_asked_to_start_quick(spark) -> None:
    """The C1-only JIT starts sooner and makes the JVM's per-row work slower: only tests and
    short scripts ask for it (``quick_start``); a user's ``local_session`` and the benchmarks
    get the JVM's default compilers."""
    from cluster.spark.session import QUICK_START_CONFIG, session_config

    assert "spark.driver.extraJavaOptions" not in session_config()
    assert session_config(quick_start=True)["spark.driver.extraJavaOptions"] == \
        QUICK_START_CONFIG["spark.driver.extraJavaOptions"]
    assert "TieredStopAtLevel=1" in spark.conf.get("spark.driver.extraJavaOptions")
    assert session_config(config={"spark.driver.memory": "2g"})["spark.driver.memory"] == "2g"

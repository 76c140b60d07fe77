"""Benchmarks: each module ``bench_<area>.py`` has ``run(quick: bool) -> list[Figure]``.

Every figure is measured beside a raw baseline of the same bytes in the same run and reported as a
ratio, because absolute numbers on a shared 2-core machine are noisy.
"""

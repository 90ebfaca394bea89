"""bench/cpu.py: the timer pins the BLAS and OpenMP threads while it times."""

from __future__ import annotations


def test_the_timer_pins_the_blas_threads_while_it_times():
    from threadpoolctl import threadpool_info

    from andrea_cli.bench.cpu import pinned_timer

    seen = []

    def run():
        seen.append({pool["internal_api"]: pool["num_threads"] for pool in threadpool_info()})

    times = pinned_timer(1)(run, 1, 2)
    assert len(times) == 2 and len(seen) == 3
    assert all(n == 1 for pools in seen for n in pools.values()), seen

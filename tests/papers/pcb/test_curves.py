import math

from nbdemo.papers.pcb.curves import converged_at, crossing


def test_crossing_interpolates_between_records():
    # 0.5 -> 0.9 between epochs 1 and 2: 0.8 is reached three quarters of the way
    assert crossing([0.2, 0.5, 0.9, 0.8], [0, 1, 2, 3], 0.8) == 1.75


def test_crossing_resolves_a_record_level_tie():
    times = [0, 1, 2, 3]
    fast, slow = [0.0, 0.7, 1.0, 1.0], [0.0, 0.3, 1.0, 1.0]
    assert crossing(fast, times, 0.95) < crossing(slow, times, 0.95)  # both first at or above it at epoch 2


def test_crossing_edges():
    assert crossing([0.9, 0.1], [5, 6], 0.5) == 5.0           # the first record already reaches it
    assert crossing([0.1, 0.2], [0, 1], 0.5) == math.inf       # never reached
    assert crossing([float("nan")] * 3, [0, 1, 2], 0.5) == math.inf
    assert crossing([], [], 0.5) == math.inf                   # a diverged run records nothing


def test_converged_at_is_the_plateau_start():
    assert converged_at([0.1, 0.5, 0.795, 0.8, 0.79], [0, 1, 2, 3, 4], 0.01) == 2.0
    assert converged_at([float("nan"), float("nan")], [0, 1], 0.01) == math.inf

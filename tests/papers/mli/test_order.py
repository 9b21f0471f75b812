import itertools
import math

import pytest
import torch

from nbdemo.papers.mli.order import (
    LAST_SHARE, LEVEL, ORDER_SHARE, chance_tail, crossing_times, first_smallest, orders, power, share,
)


def test_crossing_times_interpolate_between_records():
    steps = [0, 10, 20, 30]
    loss = torch.tensor([[1.0, 0.05, 1.0, 1.0],  # (records, classes)
                         [0.5, 0.04, 0.9, 0.9],
                         [0.0, 0.03, 0.1, 0.8],
                         [0.0, 0.02, 0.0, 0.7]])
    t = crossing_times(steps, loss, 0.25)
    # class 0 crosses 0.25 halfway from 0.5 (step 10) to 0.0 (step 20); class 1 starts below; class 3 never does
    assert t[0].item() == pytest.approx(15.0)
    assert t[1].item() == 0.0
    assert t[2].item() == pytest.approx(10 + 10 * (0.9 - 0.25) / (0.9 - 0.1))
    assert t[3].item() == math.inf


def test_crossing_times_separate_classes_that_cross_between_the_same_records():
    steps = torch.tensor([0.0, 10.0])
    loss = torch.tensor([[[1.0, 1.0]], [[0.0, 0.05]]])  # (records, nets, classes): both reach 0.1 by step 10
    t = crossing_times(steps, loss, 0.1)
    assert t.shape == (1, 2)
    assert t[0, 0].item() == pytest.approx(9.0) and t[0, 1].item() == pytest.approx(10 * 0.9 / 0.95)
    assert t[0, 0] < t[0, 1]


def test_orders():
    inf = math.inf
    learned = torch.tensor([[10.0, 20.0, 30.0],   # learned 0, 1, 2; biases in that order: both hold
                            [10.0, 20.0, 30.0],   # last (2) largest, but 0 above 1: last only
                            [30.0, 20.0, 10.0],   # last (0) not largest: neither
                            [10.0, 30.0, 30.0],   # tie for last: undecided
                            [10.0, inf, 30.0],    # class 1 never learned: undecided
                            [10.0, 20.0, 30.0]])  # learned, then diverged (NaN biases): undecided
    nan = math.nan
    bias = torch.tensor([[-1.0, 0.0, 1.0],
                         [0.0, -1.0, 1.0],
                         [-1.0, 0.0, 1.0],
                         [-1.0, 0.0, 1.0],
                         [-1.0, 0.0, 1.0],
                         [nan, nan, nan]])
    decided, last, follows = orders(learned, bias)
    assert decided.tolist() == [True, True, True, False, False, False]
    assert last.tolist() == [True, True, False, False, False, False]
    assert follows.tolist() == [True, False, False, False, False, False]
    # the checks' shares count decided nets only: 2 of 3 for the last-learned class, 1 of 3 for the whole order
    assert share(last, decided) == pytest.approx(2 / 3) and share(follows, decided) == pytest.approx(1 / 3)
    # the first-learned class has the smallest bias in the first net only (net 1: class 1, learned second, is lowest;
    # net 2: class 2, learned first, is highest); undecided nets count as False whatever their biases
    assert first_smallest(learned, bias, decided).tolist() == [True, False, False, False, False, False]


def test_share_pools_subsets_and_is_nan_without_a_decided_net():
    last = torch.tensor([True, True, False, False]), torch.tensor([True, False, False])
    decided = torch.tensor([True, True, True, False]), torch.tensor([True, True, False])
    assert share(torch.cat(last), torch.cat(decided)) == pytest.approx(3 / 5)
    assert math.isnan(share(torch.zeros(3, dtype=torch.bool), torch.zeros(3, dtype=torch.bool)))


def test_the_thresholds_are_the_recorded_alternative():
    # results/revisions/MLI-6.yml (setting, 2026-11-26): power 0.995 and 0.942 at 0.75 and 0.5 with 20 + 20 nets
    assert (LAST_SHARE, ORDER_SHARE) == (0.75, 0.5)
    assert power([20, 20], [1 / 2, 1 / 3], [LAST_SHARE] * 2) == pytest.approx(0.995, abs=5e-4)
    assert power([20], [1 / 6], [ORDER_SHARE]) == pytest.approx(0.942, abs=5e-4)


def _brute_tail(count, groups):
    """P(sum >= count) by enumerating every outcome of every net."""
    nets = [p for n, p in groups for _ in range(n)]
    total = 0.0
    for outcome in itertools.product((0, 1), repeat=len(nets)):
        if sum(outcome) >= count:
            total += math.prod(p if o else 1 - p for o, p in zip(outcome, nets))
    return total


def test_chance_tail_is_the_exact_binomial_tail():
    assert chance_tail(2, [(3, 0.5)]) == pytest.approx(0.5)
    assert chance_tail(0, [(5, 1 / 6)]) == 1.0
    assert chance_tail(6, [(5, 0.5)]) == 0.0
    assert chance_tail(3, [(3, 1 / 6)]) == pytest.approx(1 / 216)
    for count in range(0, 9):
        groups = [(4, 1 / 2), (4, 1 / 3)]
        assert chance_tail(count, groups) == pytest.approx(_brute_tail(count, groups))


def test_power():
    # at the chance level itself the test rejects at most LEVEL of the time; at certainty, always (20 nets suffice)
    assert power([20], [1 / 6], [1 / 6]) <= LEVEL
    assert power([20, 20], [1 / 2, 1 / 3], [1 / 2, 1 / 3]) <= LEVEL
    assert power([20], [1 / 6], [1.0]) == pytest.approx(1.0)
    # 20 nets at chance 1/6: the test rejects from 7 successes on (P(X >= 7) = 0.037, P(X >= 6) = 0.10)
    assert chance_tail(7, [(20, 1 / 6)]) <= LEVEL < chance_tail(6, [(20, 1 / 6)])
    assert power([20], [1 / 6], [0.5]) == pytest.approx(chance_tail(7, [(20, 0.5)]))
    # too few nets: even 3 of 3 at chance 1/2 has p = 1/8 > 5%, so nothing can reject
    assert power([3], [1 / 2], [1.0]) == 0.0


def test_premise_inversions_counts_only_separated_pairs():
    from nbdemo.papers.mli.order import premise_inversions
    w0 = [4.0, 1.9, 1.0, 0.98]  # pairs with w0[i] >= 2 w0[j]: (0, 1), (0, 2), (0, 3) only
    assert premise_inversions(w0, [1, 2, 3, 4], 2.0) == (0, 3)
    # classes 2 and 3 (1% apart) learned out of order: no premise pair between them, so nothing to count
    assert premise_inversions(w0, [1, 2, 4, 3], 2.0) == (0, 3)
    # class 0 learned after class 3: one separated pair out of order; a tie counts too
    assert premise_inversions(w0, [5, 2, 3, 4], 2.0) == (3, 3)
    assert premise_inversions(w0, [3, 2, 3, 4], 2.0) == (2, 3)  # after class 1, tied with class 2
    # a class never learned is never learned first
    assert premise_inversions(w0, [math.inf, 2, 3, 4], 2.0) == (3, 3)


def test_premise_inversions_is_nan_without_a_separated_pair():
    from nbdemo.papers.mli.order import premise_inversions
    count, pairs = premise_inversions([1.0, 1.1, 1.2], [3, 2, 1], 2.0)
    assert pairs == 0 and math.isnan(count)

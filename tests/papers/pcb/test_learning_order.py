import math

import pytest
import torch

from nbdemo.papers.pcb.learning_order import (
    accessibility,
    amplify_components,
    correlation,
    critical_frequency,
    critical_level,
    critical_principal_component,
    discriminability,
    first_level,
    frequency_label,
    frequency_sums,
    learning_time,
    per_epoch,
    project_top,
    steps_to,
)


def rotation(q, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.linalg.qr(torch.randn(q, q, generator=g, dtype=torch.float64))[0]


def test_project_top_keeps_exactly_the_first_coordinates():
    U = rotation(6)
    C = torch.arange(1.0, 7.0, dtype=torch.float64)[None].repeat(3, 1)  # principal coordinates 1..6
    X = C @ U.T
    got = project_top(X, U, 2) @ U
    assert torch.allclose(got, torch.tensor([[1.0, 2.0, 0, 0, 0, 0]], dtype=torch.float64).expand(3, 6))
    assert torch.allclose(project_top(X, U, 6), X)


@pytest.mark.parametrize("which, amplified", [("top", [0, 1]), ("bottom", [98, 99])])
def test_amplify_scales_one_and_a_half_percent_then_renormalises(which, amplified):
    q = 100  # ceil(0.015 * 100) = 2 components
    U = rotation(q, 1)
    C = torch.randn(500, q, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    Z = amplify_components(C @ U.T, U, which=which)
    assert abs(float(Z.mean())) < 1e-12 and abs(float(Z.std()) - 1) < 1e-12
    ratio = (Z @ U).std(0) / C.std(0)  # per-component gain, up to the common renormalisation
    gain = ratio / ratio[50]
    for j in range(q):
        assert float(gain[j]) == pytest.approx(10.0 if j in amplified else 1.0, rel=1e-9)


def test_amplify_with_rank_takes_the_bottom_components_that_carry_variance():
    # 60 points in 100 dimensions: only the first 60 principal components carry variance. ceil(0.015 * 60) = 1.
    q, r = 100, 60
    U = rotation(q, 3)
    C = torch.zeros(r, q, dtype=torch.float64)
    C[:, :r] = torch.randn(r, r, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    X = C @ U.T
    plain = amplify_components(X, U, factor=1.0)
    # without the rank, the bottom 2 of 100 directions are empty: the data does not change at all
    assert torch.allclose(amplify_components(X, U, which="bottom"), plain, atol=1e-12)
    Z = amplify_components(X, U, which="bottom", rank=r)
    gain = (Z @ U)[:, :r].std(0) / (plain @ U)[:, :r].std(0)  # per-component gain, up to the renormalisation
    gain = gain / gain[0]
    assert torch.allclose(gain, torch.tensor([1.0] * (r - 1) + [10.0], dtype=torch.float64), rtol=1e-9)
    top = amplify_components(X, U, which="top", rank=r) @ U
    assert float(top[:, 0].std() / top[:, 1].std()) == pytest.approx(10 * float(C[:, 0].std() / C[:, 1].std()), rel=1e-9)


def test_accessibility_is_the_mean_over_networks_and_epochs():
    correct = torch.zeros(2, 4, 3, dtype=torch.bool)
    correct[:, :, 0] = True          # always right
    correct[0, 2:, 1] = True         # one network, second half of training
    assert accessibility(correct).tolist() == [1.0, 0.25, 0.0]


def test_per_epoch_keeps_the_record_at_the_end_of_each_epoch():
    correct = torch.zeros(2, 6, 1, dtype=torch.bool)   # 6 steps of 3 per epoch, recorded after every step
    correct[:, 2, 0] = True                            # right after step 3 only, the end of epoch 1
    assert per_epoch(correct, 3)[:, :, 0].tolist() == [[True, False], [True, False]]
    assert accessibility(per_epoch(correct, 3)).tolist() == [0.5]


def test_learning_time_is_the_first_record_from_which_the_example_stays_right():
    # records 1..4, two networks, three examples
    correct = torch.tensor([[[1, 0, 1], [1, 0, 0], [1, 1, 1], [1, 1, 1]],    # net 0: 1, 3, 3
                            [[1, 0, 0], [1, 0, 0], [1, 0, 1], [1, 0, 0]]],   # net 1: 1, never (5), 5 (relapses)
                           dtype=torch.bool)
    assert learning_time(correct).tolist() == [1.0, 4.0, 4.0]


def test_critical_level_needs_every_level_above_to_be_correct():
    correct = torch.tensor([[1, 1, 1, 1],    # right from level 1
                            [0, 1, 0, 1],    # relapses at level 3 -> critical 4
                            [0, 0, 1, 1],    # -> 3
                            [1, 1, 1, 0]], dtype=torch.bool)  # wrong at the end -> sentinel 5
    assert critical_level(correct).tolist() == [1, 4, 3, 5]


def test_first_level_is_the_first_correct_level_whatever_follows():
    correct = torch.tensor([[1, 1, 1, 1], [0, 1, 0, 1], [0, 0, 1, 1], [1, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)
    assert first_level(correct).tolist() == [1, 2, 3, 1, 5]


def test_critical_principal_component_of_an_axis_aligned_classifier():
    # In principal coordinates, x = (a, b): class is the sign of b for the classifier W = [[0, 1], [0, -1]].
    # Using one component the scores tie at 0 (argmax picks class 0); with both they are right.
    U = torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)  # a permutation keeps the tie exact
    C = torch.tensor([[5.0, 1.0], [5.0, -1.0], [1.0, 2.0]], dtype=torch.float64)
    y = torch.tensor([0, 1, 1])
    W = torch.tensor([[0.0, 1.0], [0.0, -1.0]], dtype=torch.float64) @ U.T
    assert critical_principal_component(C @ U.T, y, W, U).tolist() == [1, 2, 3]


def test_frequency_sums_and_critical_frequency_analytic():
    kappa, phi = [0, 1, 2], [0.0, 0.0, math.pi / 2]
    z = torch.tensor([0.25, 0.0])
    # λ1 = 0; λ2 = sin(2π z); λ3 = λ2 + cos(4π z)
    assert torch.allclose(frequency_sums(z, kappa, phi),
                          torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64), atol=1e-12)
    w = torch.tensor([0.5, 0.5])
    y = frequency_label(z, w, kappa, phi)
    assert y.tolist() == [1, 0]
    # point 1: λ1 says 1 (0.5 > 0), λ2 says 0, λ3 says 1 -> critical κ = 0 (l.364: the smallest j that classifies
    # it), where "correct from there on", the critical principal component's rule, would give 2; point 2: wrong at
    # κ = 0, 1 -> 2
    assert critical_frequency(z, w, y, kappa, phi).tolist() == [0.0, 2.0]
    w = torch.tensor([-0.5, 2.0])
    y = frequency_label(z, w, kappa, phi)
    assert critical_frequency(z, w, y, kappa, phi).tolist() == [0.0, 0.0]


def test_discriminability_counts_same_class_neighbours():
    X = torch.tensor([[0.0], [1.0], [2.0], [10.0], [11.0], [12.5]])
    y = torch.tensor([0, 0, 1, 1, 1, 0])
    d = discriminability(X, y, k=2, chunk=4)  # chunks must not change the answer
    assert d.tolist() == [0.5, 0.5, 0.0, 0.5, 0.5, 0.0]


def test_correlation_matches_the_definition():
    a = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    r, p = correlation(a, 3 * a - 1)
    assert r == pytest.approx(1.0) and p < 1e-6
    b = torch.tensor([2.0, 1.0, 4.0, 3.0, 5.0])
    r, p = correlation(a, b)
    assert r == pytest.approx(0.8) and 0.05 < p < 0.2


def test_steps_to():
    assert steps_to([0.1, 0.5, 0.9, 0.95], [0, 10, 20, 30], 0.9) == 20
    assert steps_to([0.1, 0.5], [0, 10], 0.9) == math.inf


def test_frequency_data_follows_app_d3():
    from nbdemo.papers.pcb.frequency import KAPPA, PHI, frequency_data
    Z, y = frequency_data(2000, seed=1)
    assert KAPPA == list(range(10)) and len(PHI) == 10
    assert Z[:, 0].abs().max() <= 1 and Z[:, 1].abs().max() <= 2 * math.pi
    lam = sum(torch.sin(2 * math.pi * k * Z[:, 0].double() + p) for k, p in zip(KAPPA, PHI))
    assert torch.equal(y, (Z[:, 1].double() > lam).long())
    assert 0.3 < y.float().mean() < 0.7


def test_separable_labels_keep_already_separable_labels_and_fix_the_rest():
    from nbdemo.papers.pcb.frequency import separable_in_top_components
    g = torch.Generator().manual_seed(0)
    U = rotation(8, 4).float()
    C = torch.randn(400, 8, generator=g) * torch.linspace(3, 0.5, 8)
    y = (C[:, 0] > 0).long()                  # decided by the first principal coordinate
    X = C @ U.T
    Ud = U.double()
    assert (separable_in_top_components(X, y, Ud, 2, 2) == y).float().mean() > 0.9
    noisy = torch.where(torch.rand(400, generator=g) < 0.2, 1 - y, y)
    fixed = separable_in_top_components(X, noisy, Ud, 2, 2)
    assert (fixed == y).float().mean() > 0.9          # the flipped labels are switched back
    # only the first P principal coordinates matter: changing the others changes no label
    C2 = C.clone()
    C2[:, 2:] = torch.randn(400, 6, generator=g)
    assert torch.equal(separable_in_top_components(C2 @ U.T, noisy, Ud, 2, 2), fixed)

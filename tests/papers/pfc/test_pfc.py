import math

import numpy as np
import pytest
import torch

from nbdemo.papers.pfc import metrics as pfc


def simplex_etf(K, D, n, scale=3.0, seed=0):
    """n copies of each vertex of a K-class simplex ETF embedded in R^D by a random partial isometry."""
    g = torch.Generator().manual_seed(seed)
    U = torch.linalg.qr(torch.randn(D, K, generator=g, dtype=torch.float64))[0]
    M = scale * (K / (K - 1)) ** 0.5 * U @ (torch.eye(K, dtype=torch.float64) - 1 / K)  # D x K, Eq. (1)
    y = torch.arange(K).repeat_interleave(n)
    return M.T[y] + 5.0, y  # shifted: the metrics centre at the global mean


def noisy_classes(K=4, D=12, n=30, seed=1):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(K).repeat_interleave(n)
    return torch.randn(K, D, generator=g)[y] * 0.7 + torch.randn(K * n, D, generator=g), y


def test_exact_etf_is_fully_collapsed():
    H, y = simplex_etf(K=5, D=20, n=7)
    assert pfc.pfc1(H, y) == pytest.approx(0, abs=1e-12)
    assert pfc.pfc2(H, y) == pytest.approx(0, abs=1e-7)
    assert pfc.pfc3(H, y) == 1.0


def test_rotation_translation_and_scale_leave_metrics_unchanged():
    H, y = noisy_classes()
    Q = torch.linalg.qr(torch.randn(12, 12, generator=torch.Generator().manual_seed(2)))[0]
    before = pfc.pfc_metrics(H, y)
    after = pfc.pfc_metrics(3.7 * H @ Q + 11.0, y)
    assert before["PFC1"] > 0.05 and before["PFC2"] > 0.05 and before["PFC3"] < 1
    for k in before:
        assert after[k] == pytest.approx(before[k], rel=1e-5)


def test_pfc1_analytic_two_clusters():
    # classes at -m and +m on e1, each with two points at +-s on e2: tr Sigma_W = s^2, tr Sigma_B = m^2
    m, s = 2.0, 0.5
    H = torch.tensor([[-m, s], [-m, -s], [m, s], [m, -s]])
    y = torch.tensor([0, 0, 1, 1])
    assert pfc.pfc1(H, y) == pytest.approx(s ** 2 / m ** 2)


def test_pfc2_two_classes_is_always_an_etf_and_collinear_means_are_not():
    H, y = noisy_classes(K=2)
    assert pfc.pfc2(H, y) == pytest.approx(0, abs=1e-7)
    K = 4
    y = torch.arange(K).repeat_interleave(3)
    H = torch.tensor([0.0, 1.0, 3.0, 7.0])[y, None] * torch.ones(1, 6)  # class means on one line
    assert pfc.pfc2(H, y) == pytest.approx(math.sqrt(2 - 2 / math.sqrt(K - 1)))


def test_pfc3_counts_the_nearest_mean():
    # class 0 = {0, 0, 3} (mean 1), class 1 = {2, 2, 2} (mean 2): the point 3 is nearer the other mean
    H = torch.tensor([0.0, 0.0, 3.0, 2.0, 2.0, 2.0])[:, None]
    y = torch.tensor([0, 0, 0, 1, 1, 1])
    assert pfc.pfc3(H, y) == pytest.approx(5 / 6)


def test_relative_depth_and_straightness():
    x = torch.randn(10, 3)
    d = torch.randn(10, 3)
    feats = [x, x + d, x + 2 * d, x + 5 * d]  # displacements 1, 1, 3 (in units of ||d||)
    np.testing.assert_allclose(pfc.relative_depth(feats), [0, 0.2, 0.4, 1.0], atol=1e-12)
    assert pfc.straightness(feats) == pytest.approx(1.0)
    bent = [x, x + d, x]  # out and back: the chord is zero
    assert pfc.straightness(bent) == pytest.approx(0.0, abs=1e-12)


def test_geodesic_endpoints_and_theorem1_monotone_pfc1():
    H0, y = noisy_classes()
    means, _ = pfc.class_means(H0, y)
    H1 = 2 * means[y]  # collapsed end point aligned with the input means: Theorem 1's assumption holds
    assert pfc.theorem1_inner(H0, H1, y) > 0
    assert pfc.theorem1_inner(H0, -H1, y) < 0
    ts = np.linspace(0, 1, 21)
    curve = pfc.geodesic(H0, H1, y, ts)
    assert curve["PFC1"][0] == pytest.approx(pfc.pfc1(H0, y))
    assert curve["PFC1"][-1] == pytest.approx(0, abs=1e-12)
    assert curve["PFC2"][-1] == pytest.approx(pfc.pfc2(H1, y))
    assert np.all(np.diff(curve["PFC1"]) < 0)


def on_the_line(H0, H1, ts):
    return [(1 - t) * H0 + t * H1 for t in ts]


def test_layers_on_the_geodesic_pass_the_geodesic_checks_and_beat_the_null_model():
    H0, y = noisy_classes()
    means, _ = pfc.class_means(H0, y)
    feats = on_the_line(H0.double(), 2 * means[y], [0, 0.1, 0.3, 0.6, 0.85, 1])  # collapsed end point
    pos = pfc.relative_depth(feats)
    np.testing.assert_allclose(pos, [0, 0.1, 0.3, 0.6, 0.85, 1], atol=1e-12)  # constant speed along the line
    measured = pfc.layer_metrics(feats, y)
    predicted = {k: np.interp(pos, np.linspace(0, 1, 101), v)
                 for k, v in pfc.geodesic(feats[0], feats[-1], y, np.linspace(0, 1, 101)).items()}
    measured["PFC1"][-1] = predicted["PFC1"][-1] = 1e-3  # log10 needs a positive end point
    for name, log in [("PFC1", True), ("PFC2", False)]:
        geo = pfc.curve_error(measured[name], predicted[name], log=log)
        null = pfc.curve_error(measured[name], pfc.linear_in_position(measured[name], pos, log=log), log=log)
        assert geo < 0.02 < null  # the curve is not linear in position: the null model misses it
    assert pfc.geodesic_distance(feats, pos) == pytest.approx(0, abs=1e-12)


def test_the_geodesic_check_fails_when_layers_follow_the_null_model_instead():
    # Measured values exactly linear in position (in log10 for PFC1) while the geodesic predicts a bent curve.
    pos = np.linspace(0, 1, 6)
    measured = 10 ** (0 - 2 * pos)
    predicted = 10 ** (0 - 2 * pos ** 0.3)  # collapses early in depth, like a geodesic curve that drops fast
    predicted[[0, -1]] = measured[[0, -1]]
    assert pfc.curve_error(measured, pfc.linear_in_position(measured, pos, log=True), log=True) == pytest.approx(0)
    geo = pfc.curve_error(measured, predicted, log=True)
    assert geo > 0.25  # outside a tolerance of a quarter of the endpoint range: the check fails


def test_geodesic_distance_of_a_bent_path():
    x = torch.zeros(4, 2, dtype=torch.float64)
    e1, e2 = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    feats = [x, x + e2, x + e2 + e1, x + e1]  # around three sides of a unit square: positions 0, 1/3, 2/3, 1
    pos = pfc.relative_depth(feats)
    # layer 1 is at (0, 1), the line's point at t = 1/3 is (1/3, 0): distance sqrt(1/9 + 1) over a chord of 1
    assert pfc.geodesic_distance(feats, pos) == pytest.approx((1 / 9 + 1) ** 0.5)


def test_theorem1_inner_equals_between_class_scatter_for_identical_ends():
    H, y = noisy_classes()
    means, _ = pfc.class_means(H, y)
    expected = float(((means - H.double().mean(0)) ** 2).sum())
    assert pfc.theorem1_inner(H, H, y) == pytest.approx(expected)


def test_data_alignment():
    X, _ = noisy_classes()
    assert pfc.data_alignment(4 * X, X) == pytest.approx(0, abs=1e-7)
    assert pfc.data_alignment(-X, X) == pytest.approx(2.0)


# --- the MUFM / UFM solvers of nbdemo.papers.pfc.ufm (Eq. 13, MSE loss), the ResNets' training of
# nbdemo.papers.pfc.experiment and the verdict rows of .regime, .orders and .prediction ---
from nbdemo.papers.pfc import experiment as models  # noqa: E402
from nbdemo.papers.pfc import figures, orders, prediction, regime, resnets  # noqa: E402
from nbdemo.papers.pfc import ufm as mufm  # noqa: E402


def small_mufm(K=3, d=6, n=10):
    X, y = mufm.gaussian_classes(K, d, n, seed=3)
    return X, y, torch.nn.functional.one_hot(y).double()


def test_closed_forms_zero_their_block_gradient():
    X, y, Y = small_mufm()
    g = torch.Generator().manual_seed(4)
    W = torch.randn(3, 6, generator=g, dtype=torch.float64)
    H = torch.randn(30, 6, generator=g, dtype=torch.float64)
    gW, _ = mufm.mufm_gradients(mufm.w_star(H, y, 0.05), H, X, Y, 0.05, 0.01, 30)
    _, gH = mufm.mufm_gradients(W, mufm.mufm_h_star(W, X, Y, 0.01), X, Y, 0.05, 0.01, 30)
    assert float(gW.abs().max()) < 1e-12 and float(gH.abs().max()) < 1e-12


def test_gd_in_the_reduced_basis_equals_plain_gd():
    X, y, Y = small_mufm()
    W, H, _ = mufm.solve_mufm_gd(X, y, lam_W=0.05, lams=[0.01], steps=50, lr=0.5, seed=5)
    g = torch.Generator().manual_seed(5)  # the solver's own initial draw, then 50 plain GD steps on (W, H)
    W0 = torch.randn(3, 6, generator=g, dtype=torch.float64)
    H0 = torch.randn(30, 6, generator=g, dtype=torch.float64)
    for _ in range(50):
        gW, gH = mufm.mufm_gradients(W0, H0, X, Y, 0.05, 0.01, 30)
        W0, H0 = W0 - 0.5 * gW, H0 - 0.5 * gH
    torch.testing.assert_close(W[0], W0, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(H[0], H0, rtol=1e-10, atol=1e-10)


def test_exact_solver_converges_and_ufm_optimum_is_collapsed():
    X, y, _ = small_mufm()
    both = torch.stack([X, torch.zeros_like(X)])
    W, H, gn = mufm.solve_mufm_exact(both, y, lam_W=0.05, lams=[0.01, 0.01])
    assert float(gn.max()) < 1e-8
    assert pfc.pfc1(H[1], y) < 1e-10 and pfc.pfc2(H[1], y) < 1e-5  # UFM: neural collapse
    assert pfc.pfc1(H[0], y) > 1e-3  # MUFM: the data keeps it from collapsing (Theorem 4)


def test_milestones_as_fractions_of_the_run():
    assert models.milestone_steps(1200, [0.8, 0.9]) == [960, 1080]
    assert models.milestone_steps(148224, models.PAPER_MILESTONES) == [49549, 98675]  # epochs 117, 233 of 350


def test_train_recorded_and_the_terminal_phase_rows():
    from nbdemo.claims.verdict import Verdict

    X, y = noisy_classes(K=3, D=8, n=20)
    model = resnets.FCResNet(8, 16, 2, 3)
    hist, feats, acc = models.train_recorded(model, X, y, steps=100, lr_milestones=[0.8, 0.9], batch_size=16,
                                             lr=0.05, momentum=0.9, progress=False)
    assert hist.steps == [0, 2, 3, *range(4, 101, 2)]  # every 100 // 50 steps, and the end of the first epoch (60 // 16)
    assert hist["PFC1"].shape == (len(hist.steps), 3)
    torch.testing.assert_close(feats[-1], resnets.block_features(model, X)[-1])  # the features after training
    with torch.no_grad():
        out = model(X)
    assert acc == pytest.approx(float((out.argmax(1) == y).double().mean()))
    assert hist["train_errors"][-1] == int((out.argmax(1) != y).sum())
    assert hist["train_loss"][-1] == pytest.approx(float(torch.nn.functional.cross_entropy(out.double(), y)))
    v = Verdict("PFC-1")
    regime.require_terminal_phase(v, hist, len(y))
    regime.require_regime(v, hist, len(y))
    assert [r["kind"] for r in v.rows] == ["requirement"] * 4 + ["note"] * 5  # the collapse ratios are notes
    assert all(r["source"] for r in v.rows if r["kind"] == "requirement")
    early = models.train_recorded(resnets.FCResNet(8, 16, 2, 3), X, y, steps=100, lr_milestones=[0.8, 0.9],
                                  batch_size=16, lr=0.05, record_early=4, progress=False)[0]
    assert early.steps == [0, 1, 2, 3, 4, *range(6, 101, 2)]  # log-spaced 1, 1.3, 1.6, 2 -> 1, 2; the first epoch 3


def test_early_steps_are_log_spaced_up_to_the_first_regular_record():
    assert models.early_steps(1000, 4) == [1, 10, 100, 1000]
    assert models.early_steps(120, 0) == [] and models.early_steps(0, 5) == []


def small_conv_run():
    """A small pooled conv ResNet trained 20 steps on (60, 2, 8, 8) images: (model, y, hist, feats, acc)."""
    X, y = noisy_classes(K=3, D=8, n=20)
    X = X.reshape(60, 2, 2, 2).repeat_interleave(4, 2).repeat_interleave(4, 3)  # (60, 2, 8, 8) images
    torch.manual_seed(0)
    model = resnets.ConvResNet((2, 8, 8), [(4, 2), (2, 2)], 3, 4)
    hist, feats, acc = models.train_recorded(model, X, y, steps=20, lr_milestones=[0.8, 0.9], batch_size=16,
                                             lr=0.05, momentum=0.9, progress=False)
    return model, X, y, hist, feats, acc


def test_a_pooled_conv_resnet_is_measured_on_the_channel_means_its_classifier_reads():
    model, X, y, hist, feats, acc = small_conv_run()
    pooled = model.classifier_features(feats)
    assert feats[-1].shape == (60, 8 * 2 * 2) and pooled[-1].shape == (60, 8)  # 8 channels of 2 x 2 maps
    torch.testing.assert_close(pooled[-1], feats[-1].reshape(60, 8, 4).mean(-1))
    with torch.no_grad():  # the classifier is linear on exactly these channel means
        torch.testing.assert_close(model.head(feats[-1]), model.head[-1](pooled[-1]))
    np.testing.assert_allclose(hist["PFC1"][-1], pfc.layer_metrics(pooled, y)["PFC1"])  # recorded on them too
    flat = resnets.ConvResNet((2, 8, 8), [(4, 2), (2, 2)], 3, 4, avg_pool=False)
    assert flat.classifier_features(feats) is feats  # without pooling the classifier reads the flattened maps


def test_terminal_phase_rows_of_an_untrained_net_fail_without_crashing():
    from nbdemo.claims.verdict import Verdict

    X, y = noisy_classes(K=3, D=8, n=20)
    hist, feats, acc = models.train_recorded(resnets.FCResNet(8, 16, 2, 3), X, y, steps=0, lr_milestones=[0.8, 0.9],
                                             batch_size=16, lr=0.05, progress=False)
    assert hist.steps == [0] and len(feats) == 3
    v = regime.terminal_phase_verdict("PFC-1", hist, len(y))
    phase = next(r for r in v.rows if r["name"].startswith("terminal phase"))
    assert phase["value"] == "nan" and phase["ok"] is False  # never at zero error: no terminal phase
    failed = [r["name"] for r in v.rows if r["kind"] == "requirement" and not r["ok"]]
    assert failed == ["training error 0, reached and kept", phase["name"], "last layer NCC-separable: NCC error"]
    assert orders.order_trend(hist, len(y), 2)[0] == 0.0  # no record after step 0: no trend


@pytest.mark.parametrize("conv", [False, True])
def test_a_diverged_run_is_inconclusive_with_its_step_and_no_traceback(conv):
    X, y = noisy_classes(K=3, D=8, n=20)
    torch.manual_seed(0)  # the init, not the state another test left (pytest-xdist)
    if conv:
        X = X.reshape(60, 2, 2, 2).repeat_interleave(4, 2).repeat_interleave(4, 3)  # (60, 2, 8, 8) images
        model = resnets.ConvResNet((2, 8, 8), [(4, 2), (2, 2)], 3, 4)
    else:
        model = resnets.FCResNet(8, 16, 2, 3)
    hist, feats, acc = models.train_recorded(model, X, y, steps=50, lr_milestones=[0.8, 0.9], batch_size=16,
                                             lr=1e12, momentum=0.9, progress=False)  # BN survived 1e6 in some inits
    assert hist.diverged_at is not None
    metrics = pfc.layer_metrics(model.classifier_features(feats), y)
    v = orders.depth_order_verdict("PFC-4" if conv else "PFC-1", hist, metrics, len(y))
    assert v.outcome == "INCONCLUSIVE" and v.rows[0]["measured"] == f"diverged at step {hist.diverged_at}"
    rho, _ = orders.order_trend(hist, len(y), 2)
    assert np.isfinite(rho)
    if not conv:  # PFC-3's rows on the same diverged run
        v = regime.terminal_phase_verdict("PFC-3", hist, len(y))
        ts = np.linspace(0, 1, 11)
        prediction.geodesic_rows(v, feats, y, metrics, pfc.relative_depth(feats), ts,
                                 pfc.geodesic(feats[0], feats[-1], y, ts))
        assert v.outcome == "INCONCLUSIVE" and v.rows[0]["measured"] == f"diverged at step {hist.diverged_at}"


def test_the_regime_is_an_ncc_separable_last_layer_with_enough_blocks_before_the_effective_depth():
    from nbdemo.claims.verdict import Verdict

    def rows(metrics, n=200, raw=None):
        v = Verdict("PFC-1")
        regime.require_regime(v, history([5, 0, 0], [1.0, 0.1, 0.05], metrics=metrics), n, raw)
        return {r["name"]: r for r in v.rows}

    # a perfectly separable last layer: NCC error 0, every tolerance met
    weak = {"PFC1": [1.0, 0.9, 0.7], "PFC2": [0.9, 0.85, 0.8], "PFC3": [0.9, 0.95, 1.0]}  # barely collapsed
    r = rows(weak)
    ncc, cover = r["last layer NCC-separable: NCC error"], r["coverage: share of the blocks before the effective depth"]
    assert ncc["value"] == 0 and ncc["ok"] and all(a["ok"] for a in ncc["alternatives"].values())
    assert cover["value"] == 1.0 and cover["ok"]  # effective depth 2 of 2: every block before it
    assert r["last layer PFC1 / layer 0's"]["kind"] == "note" and r["last layer PFC1 / layer 0's"]["value"] == 0.7
    assert "last layer PFC1 / the raw input's" not in r
    assert rows(weak, raw={"PFC1": 2.8, "PFC2": 1.6})["last layer PFC2 / the raw input's"]["value"] == 0.5
    # 2 NCC errors of 200 at the last layer: within our 1%, and the 2% reading, not the 0-error and 0.5% readings
    ncc = rows({**weak, "PFC3": [0.9, 0.95, 0.99]})["last layer NCC-separable: NCC error"]
    assert ncc["ok"] and {k: a["ok"] for k, a in ncc["alternatives"].items()} == {
        "NCC tolerance 0 errors": False, "NCC tolerance 0.5%": False, "NCC tolerance 2%": True}
    assert not rows({**weak, "PFC3": [0.9, 0.95, 0.985]})["last layer NCC-separable: NCC error"]["ok"]  # 3 of 200
    # layer 1 already has at most 1% NCC errors: effective depth 1 of 2 blocks, coverage 0.5, the floor met, while
    # 'effective depth = depth' (§IV-A) fails; under the 0-error tolerance layer 2 is the first separable one
    cover = rows({**weak, "PFC3": [0.9, 0.99, 1.0]})["coverage: share of the blocks before the effective depth"]
    assert cover["value"] == 0.5 and cover["ok"]
    assert not cover["alternatives"]["effective depth = depth (§IV-A)"]["ok"]
    assert cover["alternatives"]["at least two blocks before the effective depth"]["ok"] is False  # 1 block of 2
    assert cover["alternatives"]["NCC tolerance 0 errors"]["value"] == 1.0
    # the input already separable: no block before the effective depth, coverage 0, the floor fails
    cover = rows({**weak, "PFC3": [1.0, 1.0, 1.0]})["coverage: share of the blocks before the effective depth"]
    assert cover["value"] == 0 and not cover["ok"] and not any(a["ok"] for a in cover["alternatives"].values())
    # PFC-3's checks read only the two end layers: there the coverage is a note, which decides nothing
    v = Verdict("PFC-3")
    regime.require_regime(v, history([5, 0, 0], [1.0, 0.1, 0.05], metrics={**weak, "PFC3": [1.0, 1.0, 1.0]}), 200,
                          blocks_scored=False)
    cover = next(r for r in v.rows if r["name"] == "coverage: share of the blocks before the effective depth")
    assert cover["kind"] == "note" and cover["value"] == 0 and cover["ok"] is None


def test_coverage_is_the_share_of_blocks_before_the_effective_depth():
    assert regime.coverage([170, 180, 199, 200, 200], 200) == 0.5  # layer 2 of 4
    assert regime.coverage([200, 200, 200], 200) == 0.0
    assert regime.coverage([150, 120, 115], 200) == 1.0  # none separable: every block is before it
    assert regime.coverage([170, 180, 199, 200, 200], 200, eps=0) == 0.75


def test_the_order_trend_is_the_rank_correlation_of_step_and_pairs_in_order():
    from nbdemo.ml.train import History

    def trend(pfc1_per_record):
        h = History()
        for s, p1 in enumerate(pfc1_per_record):  # two blocks; PFC2 and PFC3 in order at every record
            h.add(s * 10, {"PFC1": p1, "PFC2": [0.9, 0.8, 0.7], "PFC3": [0.8, 0.9, 1.0]})
        return orders.order_trend(h, 100, 2)

    rising = [[1, 2, 3], [1, 2, 0.5], [1, 2, 0.5], [1, 0.8, 0.5], [1, 0.8, 0.5]]
    rho, counts = trend(rising)
    assert list(counts) == [4, 5, 5, 6, 6] and rho > 0.8
    assert trend([[1, 0.8, 0.5]] * 4)[0] == 0.0  # in order from the first step on: no trend
    assert trend(rising[::-1])[0] < -0.8
    assert trend([[1, 2, 3]] + [[1, 0.8, 0.5]] * 4)[0] == 0.0  # only step 0 out of order: no trend after it


def test_the_order_trend_leaves_out_the_first_epoch_and_notes_when_the_order_settles():
    from nbdemo.claims.verdict import Verdict
    from nbdemo.ml.train import History

    # the review's case: almost nothing in order after one step, the whole order from the first later record on
    h = History()
    for s, p1 in [(0, [1, 2, 3]), (1, [1, 2, 3]), *[(s, [1, 0.8, 0.5]) for s in range(120, 1201, 120)]]:
        h.add(s, {"PFC1": p1, "PFC2": [0.9, 0.8, 0.7], "PFC3": [0.8, 0.9, 1.0], "train_errors": int(s == 0)})
    assert orders.order_trend(h, 100, 2)[0] > 0  # step 1 kept: a flat order passes
    assert orders.order_trend(h, 100, 2, first_epoch=1)[0] == 0.0  # records up to the first epoch left out
    assert models.first_epoch_step(200, 128) == 1 and models.first_epoch_step(60, 16) == 3
    v = Verdict("PFC-2")
    orders.check_order_trend(v, h, 200, batch_size=128)
    rows = {r["name"]: r for r in v.rows}
    assert rows["order emerges gradually: rank correlation of step and pairs in order"]["ok"] is False
    assert rows["step from which the pairs in order stay at their final count"]["value"] == 120
    assert orders.settled_step([0, 1, 120, 240], [3, 4, 6, 6]) == 120
    assert orders.settled_step([0, 1, 120], [6, 6, 6]) == 0


def test_the_order_trend_declares_the_regular_records_and_the_records_after_zero_error():
    from nbdemo.claims.verdict import Verdict
    from nbdemo.ml.train import History

    # the order builds up between the early log-spaced records 10 and 30, then stays; zero training error from step 60
    h = History()
    records = [(0, 3), (1, 3), (3, 3), (10, 3), (30, 0.5), (60, 0.4), *[(s, 0.4) for s in range(120, 1201, 120)]]
    for s, p in records:
        h.add(s, {"PFC1": [1, 2, p], "PFC2": [0.9, 0.8, 0.7], "PFC3": [0.8, 0.9, 1.0], "train_errors": int(s < 60)})
    assert list(orders.regular_records(h.steps, 120, 1)) == [True, True] + [False] * 4 + [True] * 10
    v = Verdict("PFC-2")
    orders.check_order_trend(v, h, 200, batch_size=128, record_every=120)
    row = v.rows[0]
    assert row["ok"]  # the early records show the order building up
    assert not row["alternatives"]["trend over the regular records only"]["ok"]  # every regular record in order
    assert not row["alternatives"]["trend over the records after zero training error"]["ok"]


def history(errors, loss, ncc=1.0, steps=None, metrics=None):
    """A History of `train_recorded`'s records: training errors and loss, and the layers' metrics (by default two
    layers, the last NCC-accurate `ncc` and collapsed to a twentieth of layer 0 in PFC1 and PFC2)."""
    from nbdemo.ml.train import History

    metrics = metrics or {"PFC1": [1.0, 0.05], "PFC2": [0.9, 0.045], "PFC3": [0.5, ncc]}
    h = History()
    for s, e, l in zip(steps or range(len(errors)), errors, loss):
        h.add(s, {"train_errors": e, "train_loss": l, **metrics})
    return h


def test_the_terminal_phase_keeps_zero_error_and_its_loss_does_not_rise_over_windows():
    from nbdemo.claims.verdict import Verdict

    def rows(h, n=200):
        v = Verdict("PFC-1")
        regime.require_terminal_phase(v, h, n)
        return {r["name"]: r for r in v.rows}

    kept = "training error 0, reached and kept"
    phase = "terminal phase: training loss after zero error, end window / start window - 1"
    steps = list(range(0, 101, 10))
    falling = [1.0, 0.1, 0.09, 0.08, 0.07, 0.06, 0.06, 0.05, 0.05, 0.05, 0.05]
    h = history([5] + [0] * 10, falling, steps=steps)
    assert regime.terminal_phase(h) == (10, 0.1, 0.05) and regime.zero_error_kept(h) == (10, 0)
    # windows of a tenth of the run: steps 10-20 (mean 0.095) and 90-100 (0.05)
    assert regime.loss_windows(h) == pytest.approx((0.095, 0.05))
    r = rows(h)
    assert r[kept]["ok"] and r[phase]["ok"] and r[phase]["value"] == pytest.approx(0.05 / 0.095 - 1, rel=1e-5)
    # a flat loss whose last record is a little above the first: the previous two-record reading fails, the
    # windows with their 10% tolerance do not
    flat = [1.0] + [0.0017, 0.0016, 0.0017, 0.0016, 0.0017, 0.0016, 0.0017, 0.0016, 0.0016, 0.0018]
    r = rows(history([5] + [0] * 10, flat, steps=steps))
    alts = r[phase]["alternatives"]
    assert r[phase]["ok"] and not alts["terminal-phase loss at two records, any fall (the previous reading)"]["ok"]
    assert not alts["terminal-phase loss falls over the windows (no tolerance)"]["ok"]
    assert alts["terminal-phase loss windows of 5% of the run"]["ok"] and alts["terminal-phase loss windows of 20% of the run"]["ok"]
    r = rows(history([5] + [0] * 10, [1.0, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.06], steps=steps))
    alts = r[phase]["alternatives"]  # only the last record rises: the narrow windows see it, the wide ones less
    assert not alts["terminal-phase loss windows of 5% of the run"]["ok"]
    assert alts["terminal-phase loss windows of 20% of the run"]["ok"]
    rising = [1.0] + [0.05] * 5 + [0.06] * 5  # the end window 20% above the start window
    assert not rows(history([5] + [0] * 10, rising, steps=steps))[phase]["ok"]
    # zero error lost again at a record: not kept, though 0 at the end (the previous reading)
    r = rows(history([5, 0, 1] + [0] * 8, falling, steps=steps))
    assert r[kept]["value"] == 1 and not r[kept]["ok"]
    assert r[kept]["alternatives"]["training error 0 at the end only"]["ok"]
    effectively = "terminal phase: zero error reached, then at most 1% errors after"
    assert r[kept]["alternatives"][effectively]["ok"]  # 1 error of 200 after zero: effectively zero
    r = rows(history([5, 0, 3] + [0] * 8, falling, steps=steps))
    assert not r[kept]["alternatives"][effectively]["ok"]  # 3 of 200 after zero: more than 1%
    assert not rows(history([5] * 11, falling, steps=steps))[kept]["alternatives"][effectively]["ok"]  # never 0
    # zero error only in the last tenth: no terminal phase two windows long (NaN fails)
    r = rows(history([5] * 10 + [0], falling, steps=steps))
    assert r[kept]["ok"] and r[phase]["value"] == "nan" and not r[phase]["ok"]
    assert rows(history([5] * 11, falling, steps=steps))[kept]["value"] == "nan"  # never 0


def test_effective_depth_is_the_first_layer_with_ncc_error_at_most_eps():
    assert regime.effective_depth([170, 180, 199, 198, 199], 200) == 2
    assert regime.effective_depth([199, 180, 190, 199], 200) == 0
    # a fixed eps (1% of 200: 2 errors), not the last layer's own error: layer 1 counts though the last has none
    assert regime.effective_depth([170, 198, 199, 200], 200) == 1
    assert regime.effective_depth([170, 198, 199, 200], 200, eps=0.009) == 2  # 1.8 errors allowed: 1
    assert regime.effective_depth([150, 120, 115], 200) is None  # no layer NCC separable: no effective depth
    assert regime.scored_depth([150, 120, 115], 200) == 2  # ... and every block is before it
    np.testing.assert_array_equal(regime.ncc_correct({"PFC3": [0.985, 0.9850000001, 1.0]}, 200), [197, 197, 200])


def test_check_across_depth_scores_the_blocks_before_effective_depth():
    from nbdemo.claims.verdict import Verdict

    n = 200
    # effective depth 3 (199 of 200 first reached at layer 3); block 4 breaks every order but is after it
    metrics = {"PFC1": np.array([3.0, 2.0, 1.0, 0.5, 0.9]), "PFC2": np.array([0.9, 0.8, 0.7, 0.6, 0.65]),
               "PFC3": np.array([0.9, 0.95, 0.95 + 1e-12, 0.995, 0.995])}
    v = Verdict("PFC-1")
    assert orders.check_across_depth(v, metrics, n) == 3
    checks = {r["name"]: r["ok"] for r in v.rows if r["kind"] == "check"}
    assert len(checks) == 3 and all(checks.values())  # equal accuracies (up to float rounding) are no drop
    notes = {r["name"]: r["value"] for r in v.rows if r["kind"] == "note"}
    assert notes["PFC1: blocks after effective depth in order"] == 0
    assert orders.pairs_in_order(metrics, n, 3) == 9
    # a drop of one image before effective depth fails the PFC3 check; PFC2 rising at block 1 fails its check
    metrics = {"PFC1": np.array([3.0, 2.0, 1.0, 0.5]), "PFC2": np.array([0.5, 0.6, 0.4, 0.3]),
               "PFC3": np.array([0.9, 0.95, 0.945, 0.995])}
    v = Verdict("PFC-1")
    orders.check_across_depth(v, metrics, n)
    ok = {r["name"]: r["ok"] for r in v.rows if r["kind"] == "check"}
    assert ok == {"PFC1 decreases across depth (blocks 1..L0)": True, "PFC2 decreases across depth (blocks 1..L0)": False,
                  "NCC-correct samples never fewer across depth (blocks 1..L0)": False}


def test_the_depth_rows_declare_the_ncc_tolerances_as_alternatives_under_one_name():
    from nbdemo.claims.verdict import Verdict

    # the last layer has 2 NCC errors of 200, exactly the 1% allowed: with no error allowed it is not NCC separable,
    # so that every block is scored (3), and with 2% layer 2 (2 errors) is the effective depth as with 1%
    metrics = {"PFC1": np.array([3.0, 2.0, 1.0, 0.5]), "PFC2": np.array([0.9, 0.8, 0.7, 0.6]),
               "PFC3": np.array([0.9, 0.95, 0.99, 0.99])}
    v = Verdict("PFC-1")
    assert orders.check_across_depth(v, metrics, 200) == 2
    row = v.rows[0]
    assert len(row["value"]) == 2 and set(row["alternatives"]) == set(regime.NCC_READINGS)
    assert len(row["alternatives"]["NCC tolerance 0 errors"]["value"]) == 3
    assert len(row["alternatives"]["NCC tolerance 2%"]["value"]) == 2
    v = Verdict("PFC-2")
    h = history([5, 0, 0], [1.0, 0.1, 0.05], metrics=metrics)
    orders.check_order_trend(v, h, 200, batch_size=128)
    assert v.rows[0]["value"] == 0.0 and v.rows[0]["ok"] is False  # the same order at every record: no trend
    assert v.rows[0]["alternatives"]["NCC tolerance 0 errors"]["value"] == 0.0


def test_no_block_before_effective_depth_is_inconclusive_not_a_failure():
    n = 100
    metrics = {"PFC1": np.array([1.0, 0.5]), "PFC2": np.array([0.9, 0.8]), "PFC3": np.array([1.0, 1.0])}
    v = orders.depth_order_verdict("PFC-1", history([5, 0, 0, 0, 0], [1.0, 0.1, 0.1, 0.05, 0.05], metrics=metrics),
                                   metrics, n)
    assert not any(r["ok"] for r in v.rows if r["kind"] == "check")  # no block to score: NaN
    assert v.outcome == "INCONCLUSIVE"  # ... decides nothing: the coverage floor fails
    assert [r["name"] for r in v.rows if r["kind"] == "requirement" and not r["ok"]] == [
        "coverage: share of the blocks before the effective depth"]


def test_measure_layers_gives_the_effective_depth():
    X, y = noisy_classes(K=4, D=12, n=30)
    H, _ = simplex_etf(K=4, D=12, n=30)
    feats = [X, X + 0.5 * (H - X), H]  # layer 0 not NCC separable, the last layer an exact ETF
    metrics, pos, L0 = models.measure_layers(feats, y)
    assert metrics["PFC3"][0] < 1 and metrics["PFC3"][-1] == 1.0 and pos[0] == 0 and pos[-1] == pytest.approx(1)
    assert L0 == regime.effective_depth(regime.ncc_correct(metrics, len(y)), len(y)) > 0


def test_depth_order_verdict_holds_the_rows_pfc1_and_pfc4_share():
    n = 200
    metrics = {"PFC1": np.array([3.0, 2.0, 1.0, 0.5, 0.2]), "PFC2": np.array([0.9, 0.8, 0.7, 0.6, 0.05]),
               "PFC3": np.array([0.9, 0.95, 0.95, 0.98, 0.995])}  # 4 NCC errors at layer 3, 1 at the last
    h = history([5, 0, 0, 0, 0], [1.0, 0.1, 0.1, 0.05, 0.05], metrics=metrics)
    v = orders.depth_order_verdict("PFC-1", h, metrics, n)
    assert [r["name"] for r in v.rows] == [
        "training stayed finite", "training error 0, reached and kept",
        "terminal phase: training loss after zero error, end window / start window - 1",
        "last layer NCC-separable: NCC error", "coverage: share of the blocks before the effective depth",
        "effective depth L0", "last layer: PFC1", "last layer: PFC2", "last layer PFC1 / layer 0's",
        "last layer PFC2 / layer 0's", "PFC1 decreases across depth (blocks 1..L0)",
        "PFC2 decreases across depth (blocks 1..L0)", "NCC-correct samples never fewer across depth (blocks 1..L0)"]
    assert v.rows[8]["value"] == pytest.approx(0.2 / 3) and v.outcome == "REPRODUCED"
    assert regime.page_numbers(h, metrics, n) == pytest.approx(
        {"zero_error_step": 1, "ncc_errors": 1, "coverage": 1.0, "pfc1_ratio": 0.2 / 3, "pfc2_ratio": 0.05 / 0.9})
    assert regime.page_numbers(h, metrics, n, raw={"PFC1": 0.4, "PFC2": 0.1})["raw_pfc1_ratio"] == pytest.approx(0.5)
    assert [r["name"] for r in regime.terminal_phase_verdict("PFC-2", h, n).rows] == [r["name"] for r in v.rows[:10]]


def test_transport_cost_is_the_identity_below_theorem1():
    H0, y = noisy_classes()
    H1, _ = simplex_etf(K=4, D=12, n=30)
    cost, share = prediction.transport_cost(H0, H1, y)
    m0, m1 = (pfc.class_means(H, y)[0] - H.double().mean(0) for H in (H0, H1))
    norms = float((m0 ** 2).sum() + (m1 ** 2).sum())
    assert pfc.theorem1_inner(H0, H1, y) == pytest.approx((norms - cost) / 2)  # the identity of §III-B
    assert share == pytest.approx(cost / norms) and prediction.transport_cost(H0, H0, y) == (0.0, 0.0)


def test_geodesic_rows_check_theorem1_assumption_and_the_line_and_note_the_fit_to_the_curve():
    from nbdemo.claims.verdict import Verdict

    H0, y = noisy_classes()
    ts = np.linspace(0, 1, 51)

    def verdict(feats, metrics=None):
        pos = pfc.relative_depth(feats)
        metrics = metrics or pfc.layer_metrics(feats, y)
        v = Verdict("PFC-3")
        prediction.geodesic_rows(v, feats, y, metrics, pos, ts, pfc.geodesic(feats[0], feats[-1], y, ts))
        return {r["name"]: r for r in v.rows}

    etf, _ = simplex_etf(K=4, D=12, n=30)  # the end point: a simplex ETF with a little of the input's variability,
    # the input that ETF distorted by it (a small transport cost, Theorem 2's premise)
    line = on_the_line(etf + H0.double(), etf + 0.05 * H0.double(), [0, 0.1, 0.3, 0.6, 0.85, 1])
    rows = verdict(line)  # the layers on the geodesic: the assumption holds and the metrics fall along the line
    checks = {k: r["ok"] for k, r in rows.items() if r["kind"] == "check"}
    assert set(checks) == {"Theorem 1 assumption", "PFC1 decreases along the line (Theorem 1)",
                           "PFC2 decreases along the line (Theorem 2)"} and all(checks.values())
    assert rows["Theorem 1 assumption"]["source"]["from"] == "paper"
    assert not any(r["kind"] == "requirement" for r in rows.values())
    fit = "PFC2: layers' largest deviation from the curve / endpoint range (no measure in the paper)"
    assert rows[fit]["kind"] == "note" and rows[fit]["value"] < 1e-3  # up to the curve's interpolation
    assert rows["PFC2: the same deviation for the linear-in-position null"]["kind"] == "note"
    assert rows["features near the line (Assumption 1)"]["value"] == pytest.approx(0, abs=1e-9)
    # the same ends, but every inner layer already at the last layer's values: far off the curve, which the notes
    # report; the checks, computed from the two ends alone, still hold
    ends = pfc.layer_metrics(line, y)
    jump = {name: np.r_[ends[name][0], np.full(len(line) - 1, ends[name][-1])] for name in ("PFC1", "PFC2")}
    rows = verdict(line, {**ends, **jump})
    assert rows[fit]["value"] > 0.5 and rows[fit]["ok"] is None
    assert rows["PFC1 (log10): layers' largest deviation from the curve / endpoint range (no measure in the paper)"][
        "value"] > 0.5
    assert all(r["ok"] for r in rows.values() if r["kind"] == "check")
    # an end point whose centred class means point against the input's: Theorem 1's assumption fails, a check
    rows = verdict(on_the_line(etf + H0.double(), -etf + 0.05 * H0.double(), [0, 0.2, 1]))
    assert rows["Theorem 1 assumption"]["value"] < 0 and rows["Theorem 1 assumption"]["ok"] is False


def test_pfc4_scores_the_flattened_maps_and_notes_the_channel_means():
    from nbdemo.papers.pfc import maps

    model, X, y, hist, feats, acc = small_conv_run()
    flat, means = pfc.layer_metrics(feats, y), pfc.layer_metrics(model.classifier_features(feats), y)
    v = maps.maps_verdict(hist, flat, means, len(y))
    rows = {r["name"]: r for r in v.rows}
    on_means = orders.depth_order_verdict("PFC-4", hist, means, len(y)).rows  # as recorded: the channel means
    on_maps = [r for r in v.rows if not r["name"].startswith(maps.MEANS)]
    assert [(r["kind"], r["name"]) for r in on_maps] == [(r["kind"], r["name"]) for r in on_means]
    ratio = rows["last layer PFC1 / layer 0's"]
    assert ratio["kind"] == "note"
    assert ratio["value"] == pytest.approx(flat["PFC1"][-1] / flat["PFC1"][0], rel=1e-5)  # the maps decide
    for r in on_means:
        if r["name"] in maps.TRAINING_ROWS:  # the same on any features: scored once
            assert rows[r["name"]]["value"] == r["value"] and maps.MEANS + r["name"] not in rows
        else:
            note = rows[maps.MEANS + r["name"]]
            assert note["kind"] == "note" and note["value"] == r["value"] and note["measured"] == r["measured"]
    assert [r["name"] for r in maps.maps_verdict(hist, flat, None, len(y)).rows] == [r["name"] for r in on_maps]



def test_tenfold_declares_a_threshold_an_order_of_magnitude_either_way():
    from nbdemo.claims.verdict import Verdict, ours

    v = Verdict("PFC-5")
    v.check("small", 5e-8, "<", 1e-7, source=ours("a bound"), alternatives=mufm.tenfold("bound", 5e-8, "<", 1e-7))
    v.check("large", 0.5, ">", 0.1, source=ours("a bound"), alternatives=mufm.tenfold("floor", 0.5, ">", 0.1))
    small, large = ({k: a["ok"] for k, a in r["alternatives"].items()} for r in v.rows)
    assert small == {"bound 10x stricter": False, "bound 10x looser": True}
    assert large == {"floor 10x stricter": False, "floor 10x looser": True}

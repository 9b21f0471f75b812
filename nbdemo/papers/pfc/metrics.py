"""Progressive feedforward collapse (PFC) metrics of Wang, Gai & Zhang.

Conventions, shared by every function here:
- Features are rows: `H` is (N, D) (flattened if it has more dimensions), `y` is (N,) int labels 0..K-1.
  The paper writes H as D x N; its formulas are transposed accordingly.
- Everything is computed in float64. No D x D covariance is formed: traces come from squared distances
  and the between-class geometry from the K x K Gram matrix of the centred class means.
- Class counts come from the labels. The global mean h_G is the mean over all samples; tr(Sigma_W) is
  the mean over samples of ||h_i - h_{y_i}||^2 and tr(Sigma_B) the class-frequency-weighted mean of
  ||h_k - h_G||^2. On a balanced set (the paper's setting) both are exactly the paper's Eq. (7).
"""
import numpy as np
import torch


def _rows(H):
    return H.reshape(len(H), -1).double()


def class_means(H, y):
    """(K, D) float64 class means and (K,) float64 class counts."""
    H = _rows(H)
    K = int(y.max()) + 1
    counts = torch.bincount(y, minlength=K).double()
    means = torch.zeros(K, H.shape[1], dtype=H.dtype, device=H.device).index_add_(0, y, H)
    return means / counts[:, None], counts


def pfc1(H, y):
    """Variability collapse tr(Sigma_W) / tr(Sigma_B) (Eq. 7); 0 when every class sits on its mean."""
    H = _rows(H)
    means, counts = class_means(H, y)
    within = ((H - means[y]) ** 2).sum(1).mean()
    centred = means - H.mean(0)
    between = (counts * (centred ** 2).sum(1)).sum() / counts.sum()
    return float(within / between)


def pfc2(H, y):
    """Distance of the centred class means to a simplex ETF, ||G/||G||_F - E||_F (Eq. 8).

    G = H~^T H~ is the K x K Gram matrix of the class means centred at the global mean and
    E = (I - 11^T/K)/sqrt(K-1). 0 for a simplex ETF (any scale, rotation or dimension); for K = 2 it is
    always 0, and any rank-one (collinear) arrangement gives sqrt(2 - 2/sqrt(K-1)).
    """
    H = _rows(H)
    means, _ = class_means(H, y)
    Ht = means - H.mean(0)
    G = Ht @ Ht.T
    K = len(G)
    E = (torch.eye(K, dtype=G.dtype, device=G.device) - 1.0 / K) / (K - 1) ** 0.5
    return float(torch.linalg.norm(G / torch.linalg.norm(G) - E))


def pfc3(H, y):
    """Nearest-class-centre accuracy (Eq. 9): the share of samples whose nearest class mean is their own."""
    H = _rows(H)
    means, _ = class_means(H, y)
    d2 = (H ** 2).sum(1, keepdim=True) - 2 * H @ means.T + (means ** 2).sum(1)
    return float((d2.argmin(1) == y).double().mean())


def pfc_metrics(H, y):
    """{"PFC1": …, "PFC2": …, "PFC3": …} of one layer's features."""
    return {"PFC1": pfc1(H, y), "PFC2": pfc2(H, y), "PFC3": pfc3(H, y)}


def layer_metrics(feats, y):
    """Metrics of every layer: dict name -> (L+1,) array over the list of feature tensors `feats`."""
    per_layer = [pfc_metrics(H, y) for H in feats]
    return {k: np.array([m[k] for m in per_layer]) for k in per_layer[0]}


def displacements(feats):
    """(L,) array: sum over samples of ||h^{l+1}_i - h^l_i||_2 for each block l (features of equal shape)."""
    return np.array([float(torch.linalg.norm(_rows(b) - _rows(a), dim=1).sum()) for a, b in zip(feats, feats[1:])])


def relative_depth(feats):
    """Relative position of each layer in [0, 1] (§IV-A): cumulative feature displacement, normalised by the total.

    Layer 0 (the input features) is at 0 and the last layer at 1.
    """
    cum = np.concatenate([[0.0], np.cumsum(displacements(feats))])
    return cum / cum[-1]


def straightness(feats):
    """Mean over samples of ||h^L_i - h^0_i|| / sum_l ||h^{l+1}_i - h^l_i||: 1 when every sample moves on a straight
    line at constant direction (the geodesic curve assumption), smaller when trajectories bend."""
    steps = torch.stack([torch.linalg.norm(_rows(b) - _rows(a), dim=1) for a, b in zip(feats, feats[1:])])
    chord = torch.linalg.norm(_rows(feats[-1]) - _rows(feats[0]), dim=1)
    return float((chord / steps.sum(0)).mean())


def geodesic(H0, H1, y, ts):
    """PFC metrics along the straight line h_i(t) = (1-t) h_i(0) + t h_i(1) (Eq. 10, the geodesic prediction).

    Returns dict name -> (len(ts),) array.
    """
    H0, H1 = _rows(H0), _rows(H1)
    per_t = [pfc_metrics((1 - t) * H0 + t * H1, y) for t in ts]
    return {k: np.array([m[k] for m in per_t]) for k in per_t[0]}


def linear_in_position(values, pos, log=False):
    """The null model of the geodesic check: each layer's value is the end layers' values interpolated linearly in
    its relative position `pos` (in log10 if `log`). (L+1,) array."""
    v = np.log10(values) if log else np.asarray(values, dtype=float)
    line = v[0] + np.asarray(pos) * (v[-1] - v[0])
    return 10 ** line if log else line


def curve_error(measured, predicted, log=False):
    """How far the inner layers' measured values lie from a prediction, relative to the range between the two end
    layers: max over layers 1..L-1 of |measured - predicted| / |measured[L] - measured[0]| (in log10 if `log`).
    0 on the curve; 1 as far off as the two ends are apart."""
    m, p = (np.log10(measured), np.log10(predicted)) if log else (np.asarray(measured), np.asarray(predicted))
    return float(np.max(np.abs(m[1:-1] - p[1:-1])) / abs(m[-1] - m[0]))


def geodesic_distance(feats, pos):
    """Feature-level distance of the inner layers to the straight line: max over layers 1..L-1 of
    ||H^l - H(t_l)||_F / ||H^L - H^0||_F, where H(t) = (1-t) H^0 + t H^L and t_l is the layer's relative position.
    0 when every sample moves along its straight line at the speed the relative position assumes."""
    H0, H1 = _rows(feats[0]), _rows(feats[-1])
    chord = torch.linalg.norm(H1 - H0)
    return max(float(torch.linalg.norm(_rows(H) - ((1 - t) * H0 + t * H1)) / chord)
               for H, t in zip(feats[1:-1], pos[1:-1]))


def theorem1_inner(H0, H1, y):
    """Theorem 1's assumption, sum_k <h_k(0) - h_G(0), h_k(1) - h_G(1)>, which must be >= 0."""
    m0, _ = class_means(H0, y)
    m1, _ = class_means(H1, y)
    return float(((m0 - _rows(H0).mean(0)) * (m1 - _rows(H1).mean(0))).sum())


def data_alignment(H, X):
    """||H/||H||_F - X/||X||_F||_F (§IV-B): 0 when the features are a rescaled copy of the data."""
    H, X = _rows(H), _rows(X)
    return float(torch.linalg.norm(H / torch.linalg.norm(H) - X / torch.linalg.norm(X)))

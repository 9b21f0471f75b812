"""The FCN experiments of paper 003 (MLI-1…5, MLI-8's interpolations): every net of every setting trains in one SGD
loop (`nbdemo.ml.mlps.train_mlps`), and each setting's nets are interpolated with all their α at once
(`interpolate_nets`): `nbdemo.papers.mli.metrics.interpolate`, which pays the fixed cost of each operation once per
net and α chunk, is the reference.
"""
import torch
import torch.nn.functional as F

from nbdemo.ml.mlps import batched_linear, stacked_state, train_mlps


@torch.no_grad()
def interpolate_nets(theta0, thetaT, X, y, alphas, *, scheme="normal", output_degree=None, batch_size=10_000,
                     alpha_chunk=10):
    """`nbdemo.papers.mli.metrics.interpolate` for n ReLU MLPs of one depth (no norms) at once, all their α together.

    theta0, thetaT: the nets' stacked state dicts ({name: (n, ...)}, `nbdemo.ml.models.MLP`'s names). The weights
    are interpolated linearly in both schemes, so the first layer's output at α is (1−α)·X W(0)ᵀ + α·X W(T)ᵀ plus
    its bias at α: two products per net instead of one per α. Biases follow `scheme` ("normal": linear in α;
    "homogeneous": the bias of the h-th layer as (1−α)^h b(0) + α^h b(T)); output_degree: the output layer's bias at
    degree d in α instead, (1−α)^d b(0) + α^d b(T), as `nbdemo.papers.mli.metrics.interpolated_state` puts it (None:
    the scheme's). Returns one dict(alpha, loss, error, delta_max, bias_degree) per net: the curves in float64,
    bias_degree the output bias's degree in α on this path (the loss band's, `experiment.plateaus`) and delta_max its
    trained output bias gap Δ_max (largest output bias minus smallest; 0 without an output bias,
    `nbdemo.papers.mli.metrics.output_bias_gap`).
    """
    if scheme not in ("normal", "homogeneous"):
        raise ValueError(f"scheme={scheme!r}: choose 'normal' or 'homogeneous'")
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    depth = sum(name.endswith(".weight") for name in thetaT)
    n = len(thetaT["linears.0.weight"])
    loss = torch.zeros(n, len(alphas), dtype=torch.float64, device=X.device)
    wrong = torch.zeros(n, len(alphas), dtype=torch.float64, device=X.device)

    def coefficients(a, power, dims):
        """(1−α)^power and α^power at the α of `a`, shaped (1, len(a)) followed by `dims` ones."""
        shape = (1, len(a)) + (1,) * dims
        return tuple((c ** power).float().to(X.device).view(shape) for c in (1 - a, a))

    def at(name, a, power=1):
        """The parameter `name` of every net at every α of `a`: (n, len(a), ...)."""
        c0, cT = coefficients(a, power, thetaT[name].dim() - 1)
        return c0 * theta0[name].unsqueeze(1) + cT * thetaT[name].unsqueeze(1)

    def degree(i):  # the degree in α of the bias of linears.i, layer h = i + 1
        if i == depth - 1 and output_degree is not None:
            return output_degree
        return i + 1 if scheme == "homogeneous" else 1

    def bias(i, a):  # the bias of linears.i at α, shaped (n * len(a), 1, out); None without one
        name = f"linears.{i}.bias"
        return None if name not in thetaT else at(name, a, degree(i)).flatten(0, 1).unsqueeze(1)

    for lo in range(0, len(X), batch_size):
        xb, t = X[lo:lo + batch_size], y[lo:lo + batch_size]
        # the first layer's output without its bias, at α = 0 and at α = 1: (n, B, width) each
        z0, zT = (torch.matmul(xb, th["linears.0.weight"].transpose(1, 2)) for th in (theta0, thetaT))
        for c in torch.arange(len(alphas)).split(alpha_chunk):
            a, m = alphas[c], len(c)
            c0, cT = coefficients(a, 1, 2)
            h = (c0 * z0.unsqueeze(1) + cT * zT.unsqueeze(1)).flatten(0, 1)  # (n * m, B, width)
            b = bias(0, a)
            h = (h if b is None else h + b).relu()
            for i in range(1, depth):
                h = batched_linear(h, at(f"linears.{i}.weight", a).flatten(0, 1).transpose(1, 2), bias(i, a))
                if i < depth - 1:
                    h = h.relu()
            logits = h.double()
            loss[:, c] += F.cross_entropy(logits.flatten(0, 1), t.repeat(n * m), reduction="none") \
                .view(n, m, -1).sum(2)
            wrong[:, c] += (logits.argmax(-1) != t).sum(1).view(n, m).double()
    out_bias = thetaT.get(f"linears.{depth - 1}.bias")
    gaps = [0.0] * n if out_bias is None else (out_bias.max(1).values - out_bias.min(1).values).tolist()
    return [dict(alpha=alphas, loss=loss[i].cpu() / len(X), error=wrong[i].cpu() / len(X), delta_max=gaps[i],
                 bias_degree=degree(depth - 1)) for i in range(n)]


def sweep_experiment(settings, X, y, alphas, *, n_models, schemes=("normal",), output_degree=None, seed=0,
                     progress=False, **train_kwargs):
    """The experiment of MLI-1…5: train `n_models` nets of each setting on (X, y) as one ensemble (`train_mlps`),
    then interpolate each net on (X, y) by each of `schemes` (`interpolate_nets`).

    settings: {name: make_model}, in any order of depth; each setting's nets are drawn after
    `torch.manual_seed(seed)`. output_degree: the output bias's degree in the "homogeneous" scheme (None: the paper's,
    its layer index; MLI-3's control). train_kwargs go to `train_mlps` (steps, lr, momentum, batch_size).
    Returns (runs, hists) in the order of `settings`: runs[name] is the list of the setting's net curves, named
    f"{name}, {scheme}" when several schemes are interpolated; hists[name] is the setting's History.
    """
    groups = []
    for make in settings.values():
        torch.manual_seed(seed)
        groups.append([make().to(X.device) for _ in range(n_models)])
    order = sorted(range(len(groups)), key=lambda s: len(groups[s][0].linears))  # stable: ties keep their order
    states, hists = train_mlps([groups[s] for s in order], X, y, seed=seed, progress=progress, **train_kwargs)
    trained = dict(zip(order, zip(states, hists)))
    runs = {}
    for s, name in enumerate(settings):
        theta0 = stacked_state(groups[s])
        for scheme in schemes:
            runs[name if len(schemes) == 1 else f"{name}, {scheme}"] = interpolate_nets(
                theta0, trained[s][0], X, y, alphas, scheme=scheme,
                output_degree=output_degree if scheme == "homogeneous" else None)
    return runs, {name: trained[s][1] for s, name in enumerate(settings)}

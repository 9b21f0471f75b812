"""MLI, the plateau in monotonic linear interpolation (Wang et al.): the interpolation experiments, their metrics, and the paper's toy models."""

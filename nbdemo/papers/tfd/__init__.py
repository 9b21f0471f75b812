"""TFD, the trap of feature diversity (Liu et al.): the MLP experiments, the first phase, and the paper's metrics."""

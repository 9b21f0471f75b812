"""PCB, the principal-components bias (Hacohen & Weinshall): deep linear and ReLU ensembles, st-VGG, the frequency data, and the paper's metrics."""

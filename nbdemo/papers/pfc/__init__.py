"""PFC, progressive feedforward collapse (Wang, Gai & Zhang): the ResNets, their training and verdict rows, the PFC metrics and the (M)UFM solvers."""

"""The names the package accepts, without torch: the datasets (each one's sample shape and number of classes) and the
training precisions. `data.py` and `train.py` use them, and the parameter checks read them before torch is imported."""

# name -> (shape of one sample, number of classes)
DATASETS = {
    "fashion-mnist": ((1, 28, 28), 10),
    "mnist": ((1, 28, 28), 10),
    "cifar10": ((3, 32, 32), 10),
    "cifar100": ((3, 32, 32), 100),
    "stl10": ((3, 96, 96), 10),
    "mnist1d": ((1, 40), 10),
}
# the dtypes of `train(precision=...)`, by their torch names
PRECISIONS = ("float32", "bfloat16")

# `make book` and `make test` set up .venv (again only when pyproject.toml changed) and the data first.
VENV  := .venv
BIN   := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
# OpenMP threads sleep at barriers rather than spin: on 2 shared cores spinning slows torch many times over.
export OMP_WAIT_POLICY ?= PASSIVE
# torch's and oneDNN's CPU kernels at AVX2 on every processor, as nbdemo.runner.KERNEL_ENV sets for runs: AVX-512
# kernels change the last digits of a seed, and nbval compares the committed notebooks' printed verdicts digit by digit.
export ATEN_CPU_CAPABILITY ?= avx2
export ONEDNN_MAX_CPU_ISA ?= AVX2
ROOT_APT := $(shell [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo yes)

.PHONY: setup system book test publish clean

setup: $(STAMP) system

$(STAMP): pyproject.toml
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	rm -f $(VENV)/.installed-* && touch $@

# System packages: Debian's offline Fashion-MNIST, Chromium for the browser test of the book, MathJax, which the
# book serves itself so that its maths renders offline, and openssl, whose certificates the TLS cluster test makes.
system:
ifeq ($(ROOT_APT),yes)
	@missing=""; \
	[ -d /usr/share/datasets/fashion-mnist ] || missing="$$missing dataset-fashion-mnist"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v chromedriver >/dev/null || missing="$$missing chromium-driver"; \
	[ -f /usr/share/javascript/mathjax/MathJax.js ] || missing="$$missing libjs-mathjax"; \
	command -v openssl >/dev/null || missing="$$missing openssl"; \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi
else
	@[ -d /usr/share/datasets/fashion-mnist ] || echo "note: install Debian's dataset-fashion-mnist (as root) for offline Fashion-MNIST"
	@[ -f /usr/share/javascript/mathjax/MathJax.js ] || echo "note: install Debian's libjs-mathjax (as root) for maths offline"
endif

book: setup
	$(BIN)/nbdemo book --strict

# Tests run on TEST_WORKERS pytest-xdist workers; nbval keeps each notebook's cells on one worker (--dist loadscope).
# Every kernel keeps torch's own thread count, so nbval compares the numbers of a run by hand.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/pytest tests -n $(TEST_WORKERS) --durations=15
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --nbval-lax --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg --durations=15 notebooks/

# Push the built book (make book first) to the gh-pages branch of REMOTE, with .nojekyll so that GitHub Pages serves
# its _static/ folder; each publish is one commit on the branch. GitHub Actions does the same (.github/workflows/).
REMOTE ?= origin
HTML   ?= book/_build/html
PYTHON ?= $(BIN)/python

publish:
	test -f $(HTML)/index.html || { echo "no book in $(HTML): run make book first"; exit 1; }
	$(PYTHON) -m ghp_import --no-jekyll --push --force --remote $(REMOTE) --branch gh-pages \
	  --message "book built from $$(git rev-parse --short HEAD)" $(HTML)

clean:
	rm -rf build book/_build

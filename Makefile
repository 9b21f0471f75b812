# `make book` and `make test` set up .venv from the lock (again only when the lock or pyproject.toml changed) and the
# data first. The lock (requirements.lock, made by `make lock` from pyproject.toml) pins every package with its hashes.
VENV  := .venv
BIN   := $(VENV)/bin
LOCK  := requirements.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(wildcard $(LOCK)) | sha1sum | cut -c1-12)
# OpenMP threads sleep at barriers rather than spin: on 2 shared cores spinning slows torch many times over.
export OMP_WAIT_POLICY ?= PASSIVE
# torch's and oneDNN's CPU kernels at AVX2 on every processor, as nbdemo.runner.KERNEL_ENV sets for runs: AVX-512
# kernels change the last digits of a seed, and nbval compares the committed notebooks' printed verdicts digit by digit.
export ATEN_CPU_CAPABILITY ?= avx2
export ONEDNN_MAX_CPU_ISA ?= AVX2
ROOT_APT := $(shell [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && echo yes)

.PHONY: setup system lock book test publish clean

setup: $(STAMP) system

# Exactly the locked versions, each file checked against its hash; then the project itself, which adds nothing (its
# build backend, setuptools, is locked too).
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install -q --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-* && touch $@

# Refresh the lock from pyproject.toml with pip-tools (in its own venv, build/lock-tools): `make lock` keeps every pin
# that still satisfies pyproject.toml and resolves only what changed; `make lock UPGRADE=1` takes the newest releases
# pyproject.toml admits. Either way a new lock can move the stored results' digits: README, "The lock".
LOCK_TOOLS := build/lock-tools
lock:
	test -x $(LOCK_TOOLS)/bin/pip-compile || { python3 -m venv $(LOCK_TOOLS) && \
	  $(LOCK_TOOLS)/bin/python -m pip install -q pip==26.3 pip-tools==7.6.2; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_TOOLS)/bin/pip-compile -q $(if $(UPGRADE),--upgrade) --generate-hashes \
	  --allow-unsafe --strip-extras --build-deps-for editable --no-emit-index-url --no-emit-find-links \
	  -o $(LOCK) pyproject.toml

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

# The addresses of the repository and of the published book, given once, here (none: the book shows no repository
# button and no address): make book REPOSITORY=https://github.com/USER/REPO SITE=https://USER.github.io/REPO/
REPOSITORY ?=
SITE       ?=

book: setup
	NBDEMO_REPOSITORY='$(REPOSITORY)' NBDEMO_SITE='$(SITE)' $(BIN)/nbdemo book --strict

# Tests run on TEST_WORKERS pytest-xdist workers; nbval keeps each notebook's cells on one worker (--dist loadscope).
# Every kernel runs torch on one thread (nbdemo.setup), so nbval compares the numbers of a run by hand and of the sweep.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/pytest tests -n $(TEST_WORKERS) --durations=15
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadscope --nbval-lax --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg --durations=15 notebooks/

# Push the built book (make book first) to the gh-pages branch of REMOTE, with .nojekyll so that GitHub Pages serves
# its _static/ folder; each publish is one commit on the branch, force-pushed. GitHub Actions does the same
# (.github/workflows/). REMOTE must be given on make's command line (a remote's name or an address), never taken
# from the environment: without it nothing is pushed, nor to a remote whose fetch or push address is a path on this
# machine (a clone's origin is the checkout it was cloned from) unless that path is itself given as REMOTE. The
# recipe reads REMOTE from the environment variable PUBLISH_REMOTE, in double quotes, so that no character of it
# reaches the shell as code.
REMOTE ?=
HTML   ?= book/_build/html
PYTHON ?= $(BIN)/python

publish: export PUBLISH_REMOTE = $(value REMOTE)
publish:
	@test "$(origin REMOTE)" = "command line" -a -n "$$PUBLISH_REMOTE" || { echo "make publish: give REMOTE=, the" \
	  "remote to push the book to, on make's command line (not from the environment): a remote's name" \
	  "(make publish REMOTE=origin) or an address (REMOTE=git@github.com:USER/REPO.git, REMOTE=../site.git)"; exit 2; }
	@case "$$PUBLISH_REMOTE" in -*) echo "make publish: REMOTE=$$PUBLISH_REMOTE starts with -: give a remote's" \
	  "name or an address"; exit 2 ;; esac
	@test -f $(HTML)/index.html || { echo "make publish: no book in $(HTML): run make book first"; exit 2; }
	@{ git remote get-url --all -- "$$PUBLISH_REMOTE"; git remote get-url --push --all -- "$$PUBLISH_REMOTE"; } \
	  2>/dev/null | while IFS= read -r url; do \
	  case "$$url" in file://*) ;; *://*) continue ;; *:*) case "$${url%%:*}" in */*) ;; *) continue ;; esac ;; esac; \
	  echo "make publish: remote $$PUBLISH_REMOTE is $$url, a path on this machine; give REMOTE=$$url to push there"; \
	  exit 2; done
	$(PYTHON) -m ghp_import --no-jekyll --push --force --remote "$$PUBLISH_REMOTE" --branch gh-pages \
	  --message "book built from $$(git rev-parse --short HEAD)" $(HTML)

clean:
	rm -rf build book/_build

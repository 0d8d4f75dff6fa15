# `make test` and `make book` do all the set-up themselves: a virtual environment in .venv with
# the package and its extras installed (see README.md), and, for the browser tests and the
# book's PDF, Debian's chromium when it is missing. `make book` installs only what the book's
# pages need (requirements.txt); `make test` installs every extra, adding the rest to a venv
# that `make book` made.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# what the book's pages need: the package with its book, teach and parallel extras
BOOK_STAMP := $(VENV)/.book-installed
# everything: also the test extra and the nvrtc extra (CuPy and NVIDIA's CUDA compiler wheels,
# about 600 MB of the full venv's 1.5 GB), which no page needs
STAMP  := $(VENV)/.installed
ALL_EXTRAS := book,test,teach,nvrtc,parallel
# Playwright drives the system's chromium; it must never download a browser of its own.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD := 1

.PHONY: test book notebooks chromium bubblewrap bench bench-tests test-gpu bench-gpu gpu-check clean

$(BIN)/python:
	@echo "== creating the virtual environment $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"

$(BOOK_STAMP): pyproject.toml requirements.txt | $(BIN)/python
	@echo "== installing what the book's pages need (requirements.txt: .[book,teach,parallel])"
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $@

$(STAMP): pyproject.toml requirements.txt | $(BIN)/python
	@echo "== installing the package with every extra (.[$(ALL_EXTRAS)]; the nvrtc extra's"
	@echo "   CuPy and CUDA compiler wheels are about 600 MB installed)"
	$(BIN)/python -m pip install --quiet -e '.[$(ALL_EXTRAS)]'
	touch $@ $(BOOK_STAMP)

# Installs Debian's packages named after it, as root or through sudo.
APT_INSTALL = if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq

# The browser tests and the book's PDF need chromium: install Debian's package when there is no
# Chromium-based browser (pdf.py also takes Google Chrome, as on GitHub's runners).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1 || { \
	  echo "chromium is missing: installing Debian's package"; \
	  $(APT_INSTALL) chromium >/dev/null; }

# The grader runs each notebook in namespaces of its own with bubblewrap (ioattn/teach/jail.py;
# without it, or where the kernel refuses namespaces, it falls back to Landlock alone): install
# Debian's package when bwrap is missing.
bubblewrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "bwrap is missing: installing Debian's package bubblewrap"; \
	  $(APT_INSTALL) bubblewrap >/dev/null; }

# The tests run on every core (pytest-xdist); the book is built once, in the background, while
# the other tests run, and only its execution cache is kept between runs (tests/book_build.py).
test: $(STAMP) chromium bubblewrap
	$(BIN)/python -m pytest -n auto --dist worksteal

# The book is built, executing every page (cached in _build/.jupyter_cache); the build also
# writes each page's student notebook, the assignments' practice notebooks and the package's
# wheel into _build/html/notebooks (book/_ext/notebooks.py). With GITHUB_REPOSITORY=owner/name
# (and GITHUB_SHA) set, as in GitHub Actions, the pages' buttons lead to that repository.
book: $(BOOK_STAMP) chromium
	@echo "== building the book: every page executed (cached in _build/.jupyter_cache), then rendered"
	$(BIN)/jupyter-book build . --path-output . --warningiserror --nitpick --keep-going
	@echo "== printing the whole book to one PDF"
	$(BIN)/python book/_ext/pdf.py _build/html
	@echo "The book is in _build/html/index.html"

# The launch buttons open the student notebooks on the branch NOTEBOOKS_BRANCH: this commits
# _build/html/notebooks as that branch's whole tree (the working tree is not touched), and
# force-pushes it with PUSH=<remote>. Run after `make book`.
NOTEBOOKS_BRANCH ?= notebooks
PUSH ?=
notebooks: $(BOOK_STAMP)
	$(BIN)/python book/_ext/notebooks.py publish _build/html/notebooks \
	  --branch $(NOTEBOOKS_BRANCH) $(if $(PUSH),--push $(PUSH))

bench: $(STAMP)
	$(BIN)/python benchmarks/simulator.py
	$(BIN)/python benchmarks/explorer.py
	$(BIN)/python benchmarks/crossovers.py
	$(BIN)/python benchmarks/pebble.py
	$(BIN)/python benchmarks/masks.py
	$(BIN)/python benchmarks/symmetry.py
	$(BIN)/python benchmarks/incumbent.py
	$(BIN)/python benchmarks/evictions.py

# The whole test suite before and now, each from a fresh checkout (about 20 minutes on 2 cores).
bench-tests: $(STAMP) chromium bubblewrap
	$(BIN)/python benchmarks/tests.py

# On a machine with an NVIDIA GPU: the @pytest.mark.gpu tests and the GPU benchmark
# (benchmarks/gpu.py; BENCH_ARGS=--quick for a small run). By default they use .venv with the gpu
# extra (CuPy) added. Where there is no venv or no package registry, use a Python that already
# has numpy, pytest, hypothesis and CuPy: `make test-gpu PYTHON_BIN=python3`.
PYTHON_BIN ?=
BENCH_ARGS ?=
ifeq ($(strip $(PYTHON_BIN)),)
GPU_DEPS := $(VENV)/.gpu-installed
GPU_RUN  := $(BIN)/python
else
GPU_DEPS :=
GPU_RUN  := PYTHONPATH="$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}" $(PYTHON_BIN)
endif

$(VENV)/.gpu-installed: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[gpu]'
	touch $@

test-gpu: $(GPU_DEPS)
	$(GPU_RUN) -m pytest -m gpu tests/gpu -rs

bench-gpu: $(GPU_DEPS)
	$(GPU_RUN) benchmarks/gpu.py $(BENCH_ARGS)

clean:
	rm -rf _build $(VENV)

# On a machine with an NVIDIA GPU, in at most 8 minutes: the GPU tests, compute-sanitizer's
# memcheck and racecheck on one small launch of every kernel (skipped, saying so, without the
# tool) and a quick benchmark, every log in benchmarks/results/gpu-check-<gpu>-<date>/
# (ioattn/gpu/check.py). With no package registry: `make gpu-check PYTHON_BIN=python3`.
CHECK_ARGS ?=
gpu-check: $(GPU_DEPS)
	$(GPU_RUN) -m ioattn.gpu.check $(CHECK_ARGS)

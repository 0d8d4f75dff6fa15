# `make test` and `make book` do all the set-up themselves: a virtual environment in .venv with
# the package and its extras installed (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test book bench clean

$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

book: $(STAMP)
	$(BIN)/jupyter-book build . --path-output . --warningiserror --nitpick --keep-going
	@echo "The book is in _build/html/index.html"

bench: $(STAMP)
	$(BIN)/python benchmarks/simulator.py
	$(BIN)/python benchmarks/explorer.py
	$(BIN)/python benchmarks/pebble.py

clean:
	rm -rf _build $(VENV)

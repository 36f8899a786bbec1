# The two commands: `make book` and `make test` (see README.md). Both set up .venv themselves.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export FLWR_TELEMETRY_ENABLED := 0
export PYTHONHASHSEED := 0
# Python writes the bytecode of what it imports, once, where the environment says not to (as this project's CI
# machine does): without it every process compiled torch again (imports took twice as long), and compiling all of
# site-packages ahead (compileall: 15,617 modules, 80 s of CPU, 45 s of set-up on a 2-core machine) did 3 times the
# work of compiling the 4,675 that the suite and the chapters import (27 s of CPU, in their first imports).
unexport PYTHONDONTWRITEBYTECODE
# The data directory: $ULDP_DATA_DIR if set, else ../shared/data when it exists (as in CI).
ifeq ($(ULDP_DATA_DIR),)
ifneq ($(wildcard ../shared/data),)
export ULDP_DATA_DIR := $(abspath ../shared/data)
endif
endif

.PHONY: setup lab-setup lab lint ruff typecheck test pytest chapters wheel chapters-wheel-typecheck book clean

$(STAMP): requirements.txt constraints.txt pyproject.toml setup.py uldp/secure/_comb.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@# no bytecode at install: pip would compile all of site-packages on one core; the imports write what they use
	$(PY) -m pip install --quiet --no-compile -r requirements.txt -c constraints.txt
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

setup: $(STAMP)

# JupyterLab with jupytext's contents manager: .py files open as notebooks with a kernel started, and no news is fetched
# from the network (tools/jupyterlab-overrides.json, settings of this venv alone).
LAB_STAMP := $(VENV)/.lab-installed
$(LAB_STAMP): $(STAMP) requirements-lab.txt tools/jupyterlab-overrides.json
	$(PY) -m pip install --quiet -r requirements-lab.txt -c constraints.txt
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	touch $(LAB_STAMP)

lab-setup: $(LAB_STAMP)

# Open a chapter as a notebook in JupyterLab: `make lab` (the introduction) or `make lab CHAPTER=book/baselines.py`
# (LAB_ARGS passes options to JupyterLab, e.g. LAB_ARGS="--port 8890 --no-browser").
CHAPTER ?= book/introduction.py
# JupyterLab refuses to start as root unless told: containers and CI machines often run as root.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: lab-setup
	$(PY) -m jupyter lab --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG) $(LAB_ARGS) $(CHAPTER)

# Lint: ruff's formatter (checked, not applied: run `ruff format` to apply) and rule set of pyproject.toml's
# [tool.ruff], then mypy on the files of its [tool.mypy].
LINTED := uldp tests book tools benchmarks examples
lint: ruff typecheck

ruff: setup
	$(PY) -m ruff format --check $(LINTED)
	$(PY) -m ruff check $(LINTED)

typecheck: setup
	$(PY) -m mypy

# ruff first (a second), then the tests; the 25 slowest are listed at the end, so that what the suite costs stays
# visible.
pytest: ruff
	$(PY) -m pytest --durations=25

# Execute every chapter of _toc.yml at the smoke profile with papermill, then build the book with -W.
chapters: setup
	$(PY) tools/build_book.py --profile smoke

# Build the wheel and install it into a fresh venv with the exact pins (what `pip install uldp` meets).
wheel: setup
	$(PY) tools/check_wheel.py

# pytest and the chapters each keep about one core busy, so they run side by side as two jobs (ruff then pytest; the
# chapters, the wheel check and mypy, which the chapters finished before pytest in CI runs, so its 70 s left pytest's
# path); their outputs interleave.
test: setup
	$(MAKE) --no-print-directory -j2 pytest chapters-wheel-typecheck

chapters-wheel-typecheck: chapters
	$(MAKE) --no-print-directory wheel
	$(MAKE) --no-print-directory typecheck

# Execute every chapter at the default profile and build the HTML book into _build/html; set up JupyterLab too.
book: setup lab-setup
	$(PY) tools/build_book.py --profile default

clean:
	rm -rf _build

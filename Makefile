# gradkit developer entry points. On a fresh machine `make demo` and `make test` are all you need:
# they create .venv, install gradkit (editable) with the right extras, and (as root) missing system tools.
#
#   make demo    open the gradient debugger on the bundled examples (gradkit examples; Ctrl-C stops it)
#   make lint    ruff check . with the rules pyproject.toml's [tool.ruff] declares (make test runs it first)
#   make test    run the test suite on the built-in devices and the numpy oracle (pytest -n 2 --dist worksteal
#                when pytest-xdist is installed), then the shipped conformance suite on the `c` example plugin;
#                Warp, Taichi, Dr.Jit and JAX best effort, for the benchmark harness smoke tests
#   make bench   install the `bench` extra (Warp, Taichi, Dr.Jit, JAX; best effort) and run the benchmarks
#   make docs    build the documentation site (Sphinx) into docs/_build/html, warnings as errors
#   make clean   remove build artefacts and caches (make distclean also removes .venv)
#
# Installs are stamped per extras set and per pyproject.toml content, so repeated runs are fast.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

# System tools the tests use, as command:debian-package pairs; installed with apt-get when running as
# root (otherwise a note is printed and the tests that need them are skipped).
# chromium is Debian's browser package (/usr/bin/chromium): the debugger's Playwright tests drive it
# instead of a browser downloaded by `playwright install`.
SYSTEM_DEPS ?= dot:graphviz chromium:chromium

TEST_EXTRAS ?= test
DEMO_EXTRAS ?= test
DEMO_ARGS ?=
XDIST_WORKERS ?= 2
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: test lint demo bench peers fuzz docs clean distclean sysdeps opencl-driver interop-deps gpu-check

# Debian/Ubuntu ship venv separately (python3-venv); as root, install it when it is missing.
$(PY):
	@$(PYTHON) -m venv $(VENV) 2>/dev/null || { \
		rm -rf $(VENV); \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing python3-venv"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; \
		fi; \
		$(PYTHON) -m venv $(VENV); \
	}

# `make install-test`, `make install-test,app`, ...: pip install -e '.[EXTRAS]' unless already done for
# this pyproject.toml.
install-%: | $(PY)
	@stamp="$(VENV)/.installed-$*-$$(cksum < pyproject.toml | cut -d' ' -f1)"; \
	if [ ! -f "$$stamp" ]; then \
		echo "installing gradkit[$*] into $(VENV)"; \
		$(PIP) install -q 'setuptools>=68' && \
		$(PIP) install -q --no-build-isolation -e '.[$*]' && \
		$(PIP) install -q --no-build-isolation -e examples/numpy_backend && \
		$(PIP) install -q --no-build-isolation -e examples/c_backend && \
		$(PIP) install -q $(RUFF) && \
		rm -f $(VENV)/.installed-$*-* && touch "$$stamp"; \
	fi

sysdeps:
	@missing=""; \
	for pair in $(SYSTEM_DEPS); do \
		cmd="$${pair%%:*}"; pkg="$${pair#*:}"; \
		command -v "$$cmd" >/dev/null 2>&1 && continue; \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			missing="$$missing $$pkg"; \
		else \
			echo "note: '$$cmd' not found; install the '$$pkg' package (tests needing it are skipped)"; \
		fi; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing system packages:$$missing"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
			$$missing >/dev/null) || echo "warning: could not install$$missing (tests needing them are skipped)"; \
	fi

# The OpenCL tests need a device whose compiler works. The PoCL wheel (LLVM 14) rejects every program on
# CPUs newer than its LLVM (AMD Zen 5: "unknown target CPU 'generic'"); then, as root, Debian's PoCL
# (pocl-opencl-icd, a newer LLVM) is installed beside it, and gradkit offers only the device that builds.
opencl-driver: install-$(TEST_EXTRAS)
	@if ! $(PY) -c "from gradkit.backends.opencl.devices import discover; discover()" 2>/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "installing system packages: pocl-opencl-icd (no OpenCL device here compiles kernels)"; \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
				pocl-opencl-icd >/dev/null) || echo "warning: could not install pocl-opencl-icd (OpenCL tests skipped)"; \
		else \
			echo "note: no OpenCL device compiles kernels; install Debian's pocl-opencl-icd (OpenCL tests skipped)"; \
		fi; \
	fi

# PyTorch and JAX for the interop tests (tests/interop): torch's CPU build (about 750 MB installed; the default
# build pulls GPU libraries of several GB) and jax[cpu] (about 380 MB). Best effort: without them those tests skip.
INTEROP_PACKAGES ?= torch==2.13.0+cpu jax[cpu]
interop-deps: install-$(TEST_EXTRAS)
	@stamp="$(VENV)/.installed-interop-$$(echo '$(INTEROP_PACKAGES)' | cksum | cut -d' ' -f1)"; \
	if [ ! -f "$$stamp" ]; then \
		echo "installing $(INTEROP_PACKAGES) into $(VENV)"; \
		ok=1; for pkg in $(INTEROP_PACKAGES); do \
			$(PIP) install -q "$$pkg" || { ok=0; echo "warning: could not install $$pkg (its interop tests are skipped)"; }; \
		done; \
		[ $$ok = 1 ] && touch "$$stamp"; true; \
	fi

# Ruff (installed by install-%) with the root pyproject.toml's [tool.ruff] for every file: --config, because the
# example plugins' own pyproject.toml files would otherwise give theirs ruff's default rule set. .venv, build
# outputs, caches and what .gitignore lists are not checked.
RUFF ?= 'ruff>=0.17,<0.18'
lint: install-$(TEST_EXTRAS)
	$(VENV)/bin/ruff check --config pyproject.toml .

# The whole suite runs on the built-in devices and the numpy oracle; the shipped conformance suite
# (python -m gradkit.conformance) then checks the other example plugin, `c`, as a third party would.
SUITE_DEVICES ?= cpu,numpy,opencl
CONFORMANCE_DEVICES ?= numpy,c
test: lint sysdeps install-$(TEST_EXTRAS) opencl-driver interop-deps peers
	@if $(PY) -c "import xdist" 2>/dev/null; then workers="-n $(XDIST_WORKERS) --dist worksteal"; else workers=""; fi; \
	GRADKIT_TEST_DEVICES=$${GRADKIT_TEST_DEVICES:-$(SUITE_DEVICES)} $(PY) -m pytest $$workers tests $(PYTEST_ARGS) && \
	for dev in $$(echo $(CONFORMANCE_DEVICES) | tr ',' ' '); do \
		if ! $(PY) -m gradkit.conformance --list-devices | cut -f1 | grep -qx "$$dev"; then \
			echo "note: no device '$$dev' here (its plugin or a C compiler is missing): its conformance run is skipped"; \
			continue; fi; \
		echo "conformance suite on device '$$dev', run from outside the repository:"; \
		(cd /tmp && $(CURDIR)/$(PY) -m gradkit.conformance --device $$dev -q $$workers -p no:cacheprovider) || exit 1; \
	done

# Captures every examples/*.py into debug bundles (progress shown), then serves the Streamlit debugger on
# them and prints its URL; `make demo DEMO_ARGS="--port 8501 --no-browser"` and so on pass options through.
demo: install-$(DEMO_EXTRAS)
	$(VENV)/bin/gradkit examples $(DEMO_ARGS)

# The bench extra (Warp, Taichi, Dr.Jit, JAX, rich) is best effort: when it does not install as a whole (say, no
# Taichi wheel for this Python), each package is tried alone; a peer that is missing reads n/a in the
# benchmarks and skips its harness smoke test. `make test` installs it too, so CI smoke-tests the peers.
BENCH_EXTRA = $(PY) -c "import re; t = open('pyproject.toml').read(); \
	print(*re.findall(r'\"([^\"]+)\"', re.search(r'^bench = \[(.*)\]', t, re.M).group(1)))"

peers: install-$(TEST_EXTRAS)
	@stamp="$(VENV)/.installed-bench-$$(cksum < pyproject.toml | cut -d' ' -f1)"; \
	if [ ! -f "$$stamp" ]; then \
		echo "installing the bench extra ($$($(BENCH_EXTRA))) into $(VENV)"; \
		if $(PIP) install -q --no-build-isolation -e '.[bench]'; then \
			rm -f $(VENV)/.installed-bench-*; touch "$$stamp"; \
		else \
			echo "warning: the bench extra did not install as a whole; trying its packages one by one"; \
			for pkg in $$($(BENCH_EXTRA)); do \
				$(PIP) install -q "$$pkg" || echo "warning: could not install $$pkg (a missing peer reads n/a)"; \
			done; \
		fi; \
	fi

# W1-W7 and the whole programs (P: benchmarks/programs.py), kept as benchmarks/results/<date>.json and .md;
# DIFFTAICHI_EXAMPLES=<a clone of taichi-dev/difftaichi>/examples adds DiffTaichi's own programs as written
bench: peers
	$(PY) benchmarks/run.py --results-dir benchmarks/results $(BENCH_ARGS)

# The GPU check (benchmarks/gpu_check.py): run first on a lent GPU machine, with the system python3 (no .venv
# there, no registry): `make gpu-check GPU_CHECK_ARGS="--wheelhouse .whl --out $$OUT"`; prepare the wheels here with
# `python3 benchmarks/gpu_check.py --prepare-wheelhouse .whl`. Writes benchmarks/results/gpu-check-<date>.*
GPU_CHECK_ARGS ?=
gpu-check:
	$(PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

fuzz: install-$(TEST_EXTRAS)
	@seed=$${GRADKIT_FUZZ_SEED:-$$RANDOM}; echo "fuzz seed $$seed (GRADKIT_FUZZ_SEED=$$seed repeats this campaign)"; \
	GRADKIT_FUZZ_SEED=$$seed GRADKIT_FUZZ_EXAMPLES=$${GRADKIT_FUZZ_EXAMPLES:-2000} \
		$(PY) -m pytest -n $(XDIST_WORKERS) tests/fuzz -p no:warnings

# docs/coverage.md, the language coverage table (construct x forward/reverse/forward mode x device), from a
# run of tests/lang; cells that fail read ✗ (see tests/lang/FOUND.md).
.PHONY: coverage-table
coverage-table: install-$(TEST_EXTRAS)
	XDIST_WORKERS=$(XDIST_WORKERS) $(PY) tests/lang/coverage.py

# The documentation site: reStructuredText pages, the API reference from docstrings, the repository's
# Markdown pages rendered in; -W makes any warning an error (tests/docs/test_docs_build.py runs the same
# build in make test, and tests/docs/test_doc_snippets.py runs every example on its pages).
DOCS_EXTRAS ?= docs
docs: install-$(DOCS_EXTRAS)
	$(PY) -m sphinx -W --keep-going -b html -d docs/_build/doctrees docs docs/_build/html
	@echo "open docs/_build/html/index.html"

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis bench-results docs/_build
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)

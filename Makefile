# The README's two commands are `make demo` and `make test`; both build .venv when missing.
# `make test` also builds the documentation site strictly, so a broken link or page fails CI.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PREFECT_HOME ?= $(CURDIR)/data/prefect
export PREFECT_SERVER_ANALYTICS_ENABLED ?= false
export PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS ?= 120
export GX_ANALYTICS_ENABLED ?= false
export HF_HUB_OFFLINE ?= 1

.PHONY: demo ui test docs bench bench-refresh bench-train venv clean-data browser screenshots

venv: $(STAMP)

# torch goes first so that later packages find 2.13.0 (the CPU wheel) and do not pull a CUDA build.
# The installer's own output (setuptools says an editable install of a mapped layout is one,
# on every install, even with -q) goes to .venv/install.log, shown whole when a step fails.
$(STAMP): pyproject.toml constraints.txt
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing revbench and its dependencies into $(VENV) (a few minutes the first time; log: $(VENV)/install.log)"
	@( $(BIN)/python -m pip install -q --upgrade pip \
	  && $(BIN)/python -m pip install -q torch==2.13.0 \
	  && $(BIN)/python -m pip install -q -c constraints.txt -e ".[ml,dev]" ) > $(VENV)/install.log 2>&1 \
	  || { cat $(VENV)/install.log; echo "the install failed: the log above is $(VENV)/install.log"; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/revbench demo

# The Prefect UI on data/'s runs (telemetry off) until Ctrl-C; revbench commands meanwhile send
# their runs to it instead of starting a second server on its database.
ui: $(STAMP)
	$(BIN)/revbench ui

test: $(STAMP) browser docs
	$(BIN)/python -m pytest -q

# The site goes to site/ (ignored); the CLI and settings references are generated from the code
# as it builds (docs/gen_reference.py). --strict turns every warning into a failure; not --quiet,
# which hides the warnings from the count and lets a broken link pass.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The browser tests drive Debian's chromium (Playwright cannot download browsers here), and the
# TLS deploy test runs Debian's caddy in front of the survey server. They are system packages, so
# they are installed only with consent: under CI=true, or with INSTALL_SYSTEM=yes (root with
# apt-get); otherwise one line says which are missing and their tests skip (under CI=true a
# skipped browser or deploy test fails the run). Installing caddy must not leave a system Caddy
# on ports 80 and 443: where systemd runs, a temporary policy-rc.d keeps apt from starting it
# (unless the host has its own) and the unit is disabled.
INSTALL_SYSTEM ?= $(if $(filter true,$(CI)),yes,no)
browser:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	command -v caddy >/dev/null || missing="$$missing caddy"; \
	if [ -n "$$missing" ] && [ "$(INSTALL_SYSTEM)" != yes ]; then \
		echo "not installing$$missing (system packages): their tests skip; \`make test INSTALL_SYSTEM=yes\` installs them (root, apt-get)"; \
	elif [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		echo "installing$$missing for the browser and TLS tests (INSTALL_SYSTEM=yes)"; \
		policy=""; \
		if [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && policy=1; \
		fi; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
			|| echo "could not install$$missing: their tests will skip (and fail under CI=true)"; \
		[ -z "$$policy" ] || rm -f /usr/sbin/policy-rc.d; \
		case "$$missing" in *caddy*) [ ! -d /run/systemd/system ] || systemctl disable --now caddy.service >/dev/null 2>&1 || true;; esac; \
	elif [ -n "$$missing" ]; then \
		echo "cannot install$$missing here (needs root and apt-get): their tests skip"; \
	fi

# The pictures of the survey email, Confirm page, page and phone view, and of the results page
# (docs/), taken by the browser tests.
screenshots: $(STAMP) browser
	$(BIN)/python -m pytest -q tests/survey/test_browser.py tests/evaluation/test_results_page.py tests/ratings/test_flag_form_browser.py --screenshots docs

bench: $(STAMP)
	$(BIN)/python -m benchmarks.cli_bench
	$(BIN)/python -m benchmarks.ingest_bench
	$(BIN)/python -m benchmarks.eval_bench
	$(BIN)/python -m benchmarks.scorer_bench
	$(BIN)/python -m benchmarks.disambiguate_bench
	$(BIN)/python -m benchmarks.pools_bench
	$(BIN)/python -m benchmarks.embed_bench
	$(BIN)/python -m benchmarks.survey_bench
	$(BIN)/python -m benchmarks.ratings_bench
	$(BIN)/python -m benchmarks.privacy_bench
	$(BIN)/python -m benchmarks.rebuild_bench

# The whole refresh at LR-bench's size, threads and Dask (about an hour on two cores).
bench-refresh: $(STAMP)
	$(BIN)/python -m benchmarks.refresh_bench

# RATE-style training on the demo world's weak supervision, trained against untrained (CPU: about 15 min).
bench-train: $(STAMP)
	$(BIN)/python -m benchmarks.train_bench
	$(BIN)/python -m benchmarks.train_bench --objective attention --epochs 15
	$(BIN)/python -m benchmarks.train_bench --objective augment
	$(BIN)/python -m benchmarks.train_bench --objective factors

clean-data:
	rm -rf data

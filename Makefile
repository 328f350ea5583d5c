# One command each: `make play` and `make test` create or reuse .venv, install, then run.
# A first run says what it is doing and how long each step took; pip's own output goes to .venv/setup.log.
# Afterwards the game's command is .venv/bin/servedrill: `make run ARGS="list"` runs it with arguments.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEPS := $(VENV)/.deps-stamp
STAMP := $(VENV)/.installed-stamp
DEFAULT := $(VENV)/.default-incident-stamp
RAY_STAMP := $(VENV)/.ray-stamp
DEFAULT_INCIDENT := one-slow-replica
TUTORIAL_INCIDENT := first-shift-one-replica-lags
LOG := $(VENV)/setup.log
ARGS ?=
# quiet about pip itself (its version, running as root): what is left is about this project
PIP := $(BIN)/python -m pip --disable-pip-version-check --no-input -q
export PIP_ROOT_USER_ACTION := ignore
export PIP_NO_WARN_SCRIPT_LOCATION := 1

.PHONY: play run test test-fast lint bench clean setup prove

# $(call step,NAME,WHAT,HOW LONG,COMMAND): say what starts and how long it usually takes, run COMMAND with
# its output appended to $(LOG), say every 30 s that it is still going, then how long it took. On a
# failure, show the end of the log. (No commas inside the arguments: make splits on them.)
define step
	@printf 'servedrill setup [%s] %s (usually %s)\n' '$(1)' '$(2)' '$(3)'
	@start=$$(date +%s); \
	( while sleep 30; do printf '    ... still %s: %s s so far\n' '$(2)' $$(( $$(date +%s) - start )); done ) & \
	ticker=$$!; \
	( $(4) ) >>$(LOG) 2>&1; rc=$$?; \
	kill $$ticker 2>/dev/null; wait $$ticker 2>/dev/null; \
	if [ $$rc -ne 0 ]; then \
		echo "servedrill setup [$(1)] failed; the last lines of $(LOG):"; tail -n 25 $(LOG); exit $$rc; \
	fi; \
	printf '    done in %s s\n' $$(( $$(date +%s) - start ))
endef

# every requirement of pyproject.toml (the game, its tests, and the engine's build: setuptools, mypy)
REQUIREMENTS := import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
	print('\n'.join(p['project']['dependencies'] + p['project']['optional-dependencies']['test'] \
	+ p['build-system']['requires']))

$(BIN)/python:
	@mkdir -p $(VENV)
	$(call step,1/4,creating the virtual environment .venv,10 s,$(PY) -m venv $(VENV) && $(PIP) install --upgrade pip)

$(DEPS): pyproject.toml | $(BIN)/python
	$(call step,2/4,installing dependencies: Textual; DuckDB; pandas; mypy; test tools,20 s to a few minutes: about 570 MB installed,\
		$(BIN)/python -c "$(REQUIREMENTS)" > $(VENV)/requirements.txt && $(PIP) install -r $(VENV)/requirements.txt)
	@touch $(DEPS)

# setup.py compiles the engine model (mypyc), so an edited engine source reinstalls too. The build uses
# the venv's setuptools and mypy (installed above) rather than a fresh isolated copy of each.
$(STAMP): pyproject.toml setup.py $(wildcard engine_model/*.py) | $(DEPS)
	$(call step,3/4,compiling the engine model with mypyc and installing servedrill,40 s; 2-3 min on a busy machine,\
		rm -f engine_model/_compiled.sha256 && $(PIP) install --no-build-isolation --no-deps -e .)
	@if [ -f engine_model/_compiled.sha256 ]; then echo "    the engine is compiled"; \
	else echo "    the engine runs as pure Python (slower; see $(LOG) for why)"; fi
	@touch $(STAMP)
	@echo "servedrill is installed: the command is $(BIN)/servedrill. Run it with make run ARGS=\"list\","
	@echo "or as $(BIN)/servedrill list, or after 'source $(BIN)/activate' as plain servedrill list."

# the telemetry of the default incident and of the tutorial (a newcomer's first pick), so the first game
# opens at once (the cache lives outside the repo: if it was cleared, the briefing builds it again with a
# progress bar)
$(DEFAULT): $(STAMP)
	$(call step,4/4,simulating the default incident and the tutorial and building their telemetry,a few seconds,\
		$(BIN)/servedrill generate $(DEFAULT_INCIDENT) && $(BIN)/servedrill generate $(TUTORIAL_INCIDENT))
	@touch $(DEFAULT)

setup: $(DEFAULT)

# the `ray` extra of pyproject.toml (Ray, for the fan-out tests of tests/test_fanout.py and `--ray`): the tests
# install it, `make play` does not
RAY_REQUIREMENTS := import tomllib; p = tomllib.load(open('pyproject.toml', 'rb')); \
	print('\n'.join(p['project']['optional-dependencies']['ray']))
$(RAY_STAMP): pyproject.toml | $(DEPS)
	$(call step,ray,installing Ray (the ray extra: for the tests and --ray; make play does without),30 s to 2 minutes: about 300 MB,\
		$(BIN)/python -c "$(RAY_REQUIREMENTS)" > $(VENV)/ray-requirements.txt && $(PIP) install -r $(VENV)/ray-requirements.txt)
	@touch $(RAY_STAMP)

play: $(DEFAULT)
	$(BIN)/servedrill play $(ARGS)

# any servedrill command: make run ARGS="list", make run ARGS="play --plain"
run: $(STAMP)
	$(BIN)/servedrill $(ARGS)

# one test process per core, a test file's tests all in one (module fixtures are built once); the library
# proof goes first (tests/conftest.py). XDIST= runs the suite in one process.
XDIST ?= -n auto --dist loadfile

# The browser test (tests/test_serve_browser.py) drives Debian's chromium: install it when apt can (as
# root, or through passwordless sudo), refreshing the package lists once if the first try fails. Never
# fail the target for it: without chromium that test skips and says why.
APT := $(shell [ "$$(id -u)" = 0 ] && echo "env DEBIAN_FRONTEND=noninteractive apt-get" || echo "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get")
test: $(STAMP) $(RAY_STAMP)
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian chromium for the browser test"; \
		$(APT) install -y -q chromium >/dev/null 2>&1 \
		|| { $(APT) update -q >/dev/null 2>&1 && $(APT) install -y -q chromium >/dev/null 2>&1; } \
		|| echo "chromium unavailable: the browser test will skip"; }
	$(BIN)/python -m pytest -q $(XDIST)

# the inner loop: every test but those marked slow (tests/conftest.py says which); make test still runs all
test-fast: $(STAMP) $(RAY_STAMP)
	$(BIN)/python -m pytest -q $(XDIST) -m "not slow"

# the library on the whole seed policy (claims on seeds 0-58, then every hypothesis world on seeds 0-4:
# incidents.variants.WORLD_PROOF_SEEDS), written to incidents/proofs/ for CI to check
# (tests/test_library_proof.py); an hour or more on two cores for the whole library, but only files whose
# record no longer stands are proven again (--changed-only). Commit the records it writes.
# RAY=ADDRESS proves on a Ray cluster instead of local processes (make prove RAY=auto; docs/cli.md, "Fan-out on
# Ray"); it needs the ray extra.
RAY ?=
prove: $(STAMP)
	$(BIN)/servedrill validate --deep --claims-only --record --changed-only $(if $(RAY),--ray $(RAY)) incidents/
	$(BIN)/servedrill validate --deep --seeds 5 --record --changed-only $(if $(RAY),--ray $(RAY)) incidents/

# ruff, then mypy over the product packages (pyproject.toml's [tool.mypy] names them)
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/servedrill bench engine --json

clean:
	rm -rf $(VENV) .pytest_cache build engine_model__mypyc*.so engine_model/*.so engine_model/_compiled.sha256

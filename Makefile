# One command each: `make play` and `make test` create or reuse .venv, install, then run.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: play test lint bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# setup.py compiles the engine model (mypyc), so an edited engine source reinstalls too
$(STAMP): pyproject.toml setup.py $(wildcard engine_model/*.py) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(STAMP)

play: $(STAMP)
	$(BIN)/servedrill play

# The browser test (tests/test_serve_browser.py) drives Debian's chromium: install it when apt can (as
# root, or through passwordless sudo), refreshing the package lists once if the first try fails. Never
# fail the target for it: without chromium that test skips and says why.
APT := $(shell [ "$$(id -u)" = 0 ] && echo "env DEBIAN_FRONTEND=noninteractive apt-get" || echo "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get")
test: $(STAMP)
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian chromium for the browser test"; \
		$(APT) install -y -q chromium >/dev/null 2>&1 \
		|| { $(APT) update -q >/dev/null 2>&1 && $(APT) install -y -q chromium >/dev/null 2>&1; } \
		|| echo "chromium unavailable: the browser test will skip"; }
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .

bench: $(STAMP)
	$(BIN)/servedrill bench engine --json

clean:
	rm -rf $(VENV) .pytest_cache build engine_model__mypyc*.so engine_model/*.so engine_model/_compiled.sha256

VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test fuzz bench clean

# Two install levels share one venv: `make demo` needs only the core dependencies (no dev,
# server or database extras); `make test` adds the dev extras on top.
$(VENV)/.core: pyproject.toml
	test -d $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed: pyproject.toml
	test -d $(VENV) || python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e '.[dev]'
	touch $(VENV)/.core $@

demo: $(VENV)/.core
	$(VENV)/bin/lightmem demo

# Compiled bytecode is cached even where the caller's environment sets PYTHONDONTWRITEBYTECODE:
# the suite starts dozens of interpreters (xdist workers, servers, crash children), each of
# which would otherwise compile lightmem from source again (and pytest re-rewrite its asserts).
test: export PYTHONDONTWRITEBYTECODE :=
# mypy (single-threaded, ~20 s cold) runs beside the parallel pytest pass, whose two workers
# leave a core idle while a test waits (retry back-off, timeouts, servers, PostgreSQL); its
# report is printed when both are done and either failing fails the target.
test: $(VENV)/.installed
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/ruff format --check src tests
	@log=$$(mktemp); $(VENV)/bin/mypy >$$log 2>&1 & mypy=$$!; \
	echo "$(VENV)/bin/mypy (beside the parallel pass)"; \
	echo "$(VENV)/bin/pytest -n 2 -m 'not serial and not real_llm'"; \
	$(VENV)/bin/pytest -n 2 -m 'not serial and not real_llm'; tests=$$?; \
	wait $$mypy; types=$$?; cat $$log; rm -f $$log; \
	test $$tests -eq 0 && test $$types -eq 0
	$(VENV)/bin/pytest -m 'serial or real_llm'

fuzz: $(VENV)/.installed
	HYPOTHESIS_PROFILE=long $(VENV)/bin/pytest tests/test_fuzz.py

bench: $(VENV)/.installed
	$(VENV)/bin/lightmem bench locomo $(LOCOMO) --budget-tokens 800 --out bench-locomo-800.json

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache

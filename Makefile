# clefgate — the two commands a newcomer needs are `make demo` and `make test`.
# Both (re)use a virtualenv at .venv; a stamp file re-installs when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1
REPORTS := loadtest/reports

.PHONY: image demo test fuzz soak model model-shift model-1.7.0 model-1.5.0 model-1.6.0 model-clef eval-unseen eval-unseen-releases eval-unseen-injections eval-unseen-protocols bench bench-proxy bench-rules bench-model bench-flood bench-mixed lint system-deps clean docs

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# serving dependencies only (no torch): what `make demo` needs
$(VENV)/.stamp-serve: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e .
	touch $@

# everything: serving + training + tests + benchmarks
$(VENV)/.stamp-all: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -e '.[train,test,bench]'
	touch $@ $(VENV)/.stamp-serve

system-deps:
	.ci/system-deps

demo: $(VENV)/.stamp-serve
	$(VENV)/bin/clefgate demo

test: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/ruff check gateway models loadtest tests
	$(VENV)/bin/python -m pytest -q $(PYTEST_ARGS)

lint: $(VENV)/.stamp-all
	$(VENV)/bin/ruff check gateway models loadtest tests
	$(VENV)/bin/mypy

# the shipped 2.1.0: the corpus (models/corpus) written for training, calibration and held-out sides, then both halves
# trained at once (about 5 minutes on a quiet core, 15-25 on the shared 2-core machine); models/README.md, Clef-flash 2.1.0
CORPUS = models/work/corpus
model: $(VENV)/.stamp-all
	mkdir -p $(CORPUS)
	nice -n 10 $(PY) -m models.corpus.generate --rows 40000 --seed 101 --out $(CORPUS)/train.jsonl
	nice -n 10 $(PY) -m models.corpus.generate --rows 12000 --seed 102 --out $(CORPUS)/calib.jsonl
	nice -n 10 $(PY) -m models.corpus.generate --rows 12000 --seed 103 --out $(CORPUS)/eval.jsonl
	nice -n 10 $(PY) -m models.train_split --config models/configs/clef-flash-2.yaml --train $(CORPUS)/train.jsonl \
		--calib $(CORPUS)/calib.jsonl --eval $(CORPUS)/eval.jsonl \
		--generator "python -m models.corpus.generate --rows 40000 --seed 101 (train), --rows 12000 --seed 102 (calibration), --rows 12000 --seed 103 (held out)"

# the rollback version 1.7.0: two narrow runs, two at a time, one temperature for both (about 15 minutes on 2 cores)
model-1.7.0: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.train --config models/configs/clef-flash.yaml
	$(PY) -m gateway.tools.evaluate --data models/work/clef-flash/eval.jsonl

# 1.5.0, not shipped (one network, about 13 minutes): reproducible from its config
model-1.5.0: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.train --config models/configs/clef-flash-1.5.0.yaml

# 1.6.0, not shipped: two full-size networks (opt-in channel), about 20 minutes on 2 cores
model-1.6.0: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.train --config models/configs/clef-flash-1.6.0.yaml

# Calibration under source shift (models/shift.py): the shipped config trained on one half of the corpus's sources,
# its temperatures fitted on its own sources and on the other half's, both ways (about 8 minutes on a quiet core);
# the table is kept in loadtest/reports/model/shift.txt
model-shift: $(VENV)/.stamp-all
	mkdir -p $(CORPUS)/shift
	for h in a b; do \
		nice -n 10 $(PY) -m models.corpus.generate --rows 40000 --seed 201 --half $$h --out $(CORPUS)/shift/$$h-train.jsonl && \
		nice -n 10 $(PY) -m models.corpus.generate --rows 12000 --seed 202 --half $$h --out $(CORPUS)/shift/$$h-calib.jsonl || exit 1; \
	done
	: > $(CORPUS)/shift/shift.txt
	nice -n 10 $(PY) -m models.shift --config models/configs/clef-flash-2.yaml --train $(CORPUS)/shift/a-train.jsonl \
		--calib $(CORPUS)/shift/a-calib.jsonl --other $(CORPUS)/shift/b-calib.jsonl --report $(CORPUS)/shift/shift.txt \
		--title "trained on half a (40,000 rows, seed 201); own sources: half a (seed 202); other sources: half b (seed 202)"
	nice -n 10 $(PY) -m models.shift --config models/configs/clef-flash-2.yaml --train $(CORPUS)/shift/b-train.jsonl \
		--calib $(CORPUS)/shift/b-calib.jsonl --other $(CORPUS)/shift/a-calib.jsonl --report $(CORPUS)/shift/shift.txt \
		--title "trained on half b (40,000 rows, seed 201); own sources: half b (seed 202); other sources: half a (seed 202)"
	cp $(CORPUS)/shift/shift.txt $(REPORTS)/model/shift.txt

# The measurement splits (models/data/generate.py): 16,000 requests each, built only from sources no side of the
# training split has, and the shipped config's table on them (seconds to generate, about a minute to score); the
# tables are kept in loadtest/reports/model/
UNSEEN := unseen-releases unseen-injections unseen-protocols
eval-unseen: $(addprefix eval-,$(UNSEEN))

$(addprefix eval-,$(UNSEEN)): eval-%: $(VENV)/.stamp-all
	$(PY) -m models.data.generate --split $* --rows 16000 --seed 7 --out models/work/$*.jsonl
	$(VENV)/bin/clefgate eval --data models/work/$*.jsonl | tee $(REPORTS)/model/eval-$*.txt

# every benchmark, each into its one current report under loadtest/reports/ (see loadtest/reports/README.md)
bench: bench-proxy bench-rules bench-model bench-flood bench-mixed

bench-proxy: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/clefgate bench proxy --duration 3 --rounds 2 --json $(REPORTS)/proxy/proxybench.json | tee $(REPORTS)/proxy/proxybench.txt

bench-rules: $(VENV)/.stamp-all
	taskset -c 1 $(VENV)/bin/clefgate bench rules --rounds 15 | tee $(REPORTS)/rules/rulesbench.txt

bench-flood: $(VENV)/.stamp-all system-deps
	mkdir -p $(REPORTS)/flood
	{ $(VENV)/bin/clefgate bench flood --parts --number 5000 && echo && $(VENV)/bin/clefgate bench flood --decide && echo && \
	  taskset -c 0 $(VENV)/bin/clefgate bench flood --gateway-cpu 1; } | tee $(REPORTS)/flood/floodbench.txt

bench-model: $(VENV)/.stamp-all
	$(PY) -m loadtest.modelrounds --out $(REPORTS)/model
	$(PY) -m models.data.generate --split eval --rows 16000 --seed 7 --out models/work/clef-flash/eval.jsonl
	$(VENV)/bin/clefgate eval --data models/work/clef-flash/eval.jsonl | tee $(REPORTS)/model/eval.txt
	$(VENV)/bin/clefgate eval --data models/work/clef-flash/eval.jsonl --json > $(REPORTS)/model/eval.json

bench-mixed: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/clefgate bench mixed --out $(REPORTS)/mixed

# `make image` (not part of `make test`): build the CPU image with buildah from Debian's packages, start it with podman,
# check /readyz and one proxied request (deploy/image/build-and-run.sh says exactly which step failed and why)
image: $(VENV)/.stamp-serve
	PYTHON=$(abspath $(PY)) deploy/image/build-and-run.sh

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# regenerate the config reference (docs/config.md) from the schema
docs: $(VENV)/.stamp-serve
	$(PY) -c "import re,pathlib,gateway.config as c; p=pathlib.Path('docs/config.md'); s=p.read_text(); \
	p.write_text(re.sub(r'(<!-- config-reference:start -->\n).*?(<!-- config-reference:end -->)', lambda m: m.group(1)+c.reference_markdown()+m.group(2), s, flags=re.S))"

# rebuild the zero-shot clef model (about 25 minutes on 2 cores; see models/clef/README.md)
model-clef: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.clef.train --states 9000 --epochs 0.8 --lr 5e-4 --adapt-from 4 --max-minutes 25 --out models/work/clef
	$(PY) -m models.clef.export --work models/work/clef --version 2

# coverage-guided fuzzing (atheris), outside `make test`: every target of tests/fuzz/targets.py for FUZZ_MINUTES each,
# two at a time, at low priority; crashes land in tests/fuzz/work/TARGET/ (see tests/fuzz/run.py)
FUZZ_MINUTES ?= 30
FUZZ_TARGETS ?= head decision features rules
fuzz: $(VENV)/.stamp-all
	@set -e; mkdir -p tests/fuzz/work; secs=$$(( $(FUZZ_MINUTES) * 60 )); set -- $(FUZZ_TARGETS); \
	while [ $$# -gt 0 ]; do \
	  a=$$1; shift; b=$${1:-}; [ -n "$$b" ] && shift; \
	  for t in $$a $$b; do \
	    nice -n 15 $(PY) -m tests.fuzz.run $$t -max_total_time=$$secs -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	      > tests/fuzz/work/$$t.log 2>&1 & \
	  done; wait; \
	  for t in $$a $$b; do echo "$$t: $$(grep -E '^(stat::number_of_executed_units|Done)' tests/fuzz/work/$$t.log | tail -2 | tr '\n' ' ')"; \
	    ls tests/fuzz/work/$$t/crash-* tests/fuzz/work/$$t/timeout-* 2>/dev/null || true; done; \
	done

# soak under faults, outside `make test`: mixed traffic for SOAK_MINUTES (default 10, at most 30) while the origin and
# Redis restart, the model times out and a reload comes every minute; writes loadtest/reports/soak/soak.{json,png}
SOAK_MINUTES ?= 10
soak: $(VENV)/.stamp-all system-deps
	$(PY) -m loadtest.soak --minutes $(SOAK_MINUTES)

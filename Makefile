# clefgate — the two commands a newcomer needs are `make demo` and `make test`.
# Both (re)use a virtualenv at .venv; a stamp file re-installs when pyproject.toml changes.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: demo test model model-1.5.0 model-1.6.0 model-clef exam exam3 exam4 bench lint system-deps clean readme

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

# the shipped 2.0.0: the corpus (models/corpus) written for training, calibration and held-out sides, then both halves
# trained at once (about 5 minutes on a quiet core, 15-25 on the shared 2-core machine); models/README.md, Clef-flash 2.0.0
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
	$(PY) -m gateway.evaluate --data models/work/clef-flash/eval.jsonl

# earlier versions stay in models/repository and can be rebuilt:
# 1.5.0, the default up to session 12 (one network, about 13 minutes)
model-1.5.0: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.train --config models/configs/clef-flash-1.5.0.yaml

# the opt-in two-member 1.6.0 (models/README.md, Session 12): two runs, two at a time, about 20 minutes on 2 cores
model-1.6.0: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.train --config models/configs/clef-flash-1.6.0.yaml

# the second exam (models/README.md, Session 14): 16,000 requests built only from sources no split has, and the
# shipped config's table on them (a few seconds to generate, about a minute to score)
exam: $(VENV)/.stamp-all
	$(PY) -m models.data.generate --split exam --rows 16000 --seed 7 --out models/work/exam.jsonl
	$(VENV)/bin/clefgate eval --data models/work/exam.jsonl

# the third exam (models/README.md, Session 16): built like the second from sources neither the sides nor the second
# exam has (models/data/exam3.py), for models whose training data was chosen after reading the second
exam3: $(VENV)/.stamp-all
	$(PY) -m models.data.generate --split exam3 --rows 16000 --seed 7 --out models/work/exam3.jsonl
	$(VENV)/bin/clefgate eval --data models/work/exam3.jsonl

# the fourth exam (session 17): built like the third from sources none of the sides, the second exam
# or the third has (models/data/exam4.py), for models whose training data was chosen after reading the third
exam4: $(VENV)/.stamp-all
	$(PY) -m models.data.generate --split exam4 --rows 16000 --seed 7 --out models/work/exam4.jsonl
	$(VENV)/bin/clefgate eval --data models/work/exam4.jsonl

bench: $(VENV)/.stamp-all system-deps
	$(VENV)/bin/clefgate bench

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache

# regenerate the README's config reference from the schema
readme: $(VENV)/.stamp-serve
	$(PY) -c "import re,pathlib,gateway.config as c; p=pathlib.Path('README.md'); s=p.read_text(); \
	p.write_text(re.sub(r'(<!-- config-reference:start -->\n).*?(<!-- config-reference:end -->)', lambda m: m.group(1)+c.reference_markdown()+m.group(2), s, flags=re.S))"

# rebuild the zero-shot clef model (about 25 minutes on 2 cores; see models/clef/README.md)
model-clef: $(VENV)/.stamp-all
	nice -n 10 $(PY) -m models.clef.train --states 9000 --epochs 0.8 --lr 5e-4 --adapt-from 4 --max-minutes 25 --out models/work/clef
	$(PY) -m models.clef.export --work models/work/clef --version 2

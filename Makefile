# make demo   set up .venv, run the embedded demo end to end, print where the maps and accuracy are
# make test   set up .venv, run the test suite
# make bench  set up .venv, run the benchmarks (ratios measured side by side)
# make slurm-profile  link profiles/slurm where Snakemake looks for named profiles: snakemake --profile slurm
# make docs   build the documentation site (docs/ -> site/), its references made from the schema and parsers
PYTHON ?= python3
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml envs/build-horovod.sh envs/system-deps.sh | cksum | cut -d' ' -f1)
RESULTS := results
export PATH := $(BIN):$(PATH)

.PHONY: setup demo test bench lint clean slurm-profile docs

$(STAMP): pyproject.toml envs/build-horovod.sh envs/system-deps.sh
	# Debian packages first: installed with apt where make runs as root, else the one command to run
	envs/system-deps.sh $(PYTHON)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# torch first, pinned: pip then takes the CPU build where one is provided locally (uv does not look
	# there); then the rest through uv, 29 s instead of pip's 108 s (the same versions; 2 cores). Both
	# compile the byte-code at install: where PYTHONDONTWRITEBYTECODE is set, as here, nothing compiled
	# later is kept, and every job would compile its imports again
	$(BIN)/pip install --quiet torch==2.13.0 'uv>=0.5'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]'
	envs/build-horovod.sh $(BIN)/python
	rm -f $(VENV)/.installed-* && touch $@

# lcflow's own modules are installed editable (not compiled by uv): compiled here, each time, so that where
# PYTHONDONTWRITEBYTECODE is set no lcflow process compiles them again (a module edited since is compiled
# in memory as before)
setup: $(STAMP)
	@$(BIN)/python -m compileall -q workflow/lcflow

demo: setup
	snakemake --profile profiles/local
	$(BIN)/lcflow report --out $(RESULTS)/report.html -- --profile profiles/local
	@echo
	@echo "Maps (class and confidence COGs, consistent across years): $(CURDIR)/$(RESULTS)/maps/ (independent annual maps in maps/raw/, change maps in changes/)"
	@echo "Accuracy per map: $(CURDIR)/$(RESULTS)/accuracy.tsv (details in $(RESULTS)/assessment/)"
	@echo "Every model side by side (accuracy, F1 per class, training time, px/s): $(CURDIR)/$(RESULTS)/model_comparison.tsv"
	@echo "Report: $(CURDIR)/$(RESULTS)/report.html"
	@echo
	@column -t -s "$$(printf '\t')" $(RESULTS)/accuracy.tsv 2>/dev/null || cat $(RESULTS)/accuracy.tsv
	@echo "Quote reference_OA with its 95 % interval (the quote column): the map's accuracy from an independent reference"
	@echo "sample. test_agreement_OA is agreement with the training labels (CORINE), truth_OA the demo's synthetic truth."
	@echo
	@echo "Change between years, independent (_raw) and consistent maps: $(RESULTS)/changes.tsv"
	@column -t -s "$$(printf '\t')" $(RESULTS)/changes.tsv 2>/dev/null || cat $(RESULTS)/changes.tsv

test: setup
	pytest -rs --durations=25 -n 3

bench: setup
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[bench]'
	python benchmarks/run.py

# Snakemake finds a named profile in its user config folder ($XDG_CONFIG_HOME/snakemake, else ~/.config/snakemake):
# a link there to this checkout's profiles/slurm, so that edits to the profile take effect; a profile of that
# name that is not this link is left alone
PROFILES := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)/snakemake
slurm-profile:
	@mkdir -p "$(PROFILES)"
	@if [ -e "$(PROFILES)/slurm" ] && [ "$$(readlink -f "$(PROFILES)/slurm")" != "$$(readlink -f profiles/slurm)" ]; then \
	  echo "$(PROFILES)/slurm exists and is not lcflow's profile: leave it, and run snakemake --profile $(CURDIR)/profiles/slurm"; \
	  exit 1; fi
	ln -sfn "$(CURDIR)/profiles/slurm" "$(PROFILES)/slurm"
	@echo "snakemake --profile slurm now reads $(CURDIR)/profiles/slurm (set your site's values in it: ACCOUNT, partitions, GPUs)"

docs: setup
	python docs/generate.py
	mkdocs build --strict
	@echo "Documentation: $(CURDIR)/site/index.html"

lint: setup
	snakemake --lint

clean:
	rm -rf $(RESULTS) resources/demo .snakemake

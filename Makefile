# Two commands for a person arriving new:  make serve  and  make test.
# Both create .venv when needed and install the project into it (editable, so edits take effect).

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.installed
ARGS   ?=

.PHONY: serve test install bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# pyfuse3 compiles against libfuse3 (libfuse3-dev, pkg-config); when those are missing the FUSE
# extra is skipped and only `hostfinder mount` needs it. Checked on every install, serve and test,
# so packages installed after the first `make` are picked up then.
# A failure here is a note, not a stop: the gateway and the suite's other parts run without it.
FUSE_EXTRA = if ! pkg-config --exists fuse3 2>/dev/null; then \
		echo "note: libfuse3-dev/pkg-config not found; 'hostfinder mount' needs: apt-get install fuse3 libfuse3-dev pkg-config"; \
	elif ! $(PY) -c 'import pyfuse3' 2>/dev/null; then \
		$(PY) -m pip install --quiet -e '.[test,fuse]' || echo "note: the FUSE extra (pyfuse3) did not install"; \
	fi

# Re-install when the dependencies change (the FUSE extra's too, when libfuse3 is there).
$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[test]'
	@if pkg-config --exists fuse3 2>/dev/null; then \
		$(PY) -m pip install --quiet -e '.[test,fuse]' || echo "note: the FUSE extra (pyfuse3) did not install"; \
	fi
	@touch $(STAMP)

install: $(STAMP)
	@$(FUSE_EXTRA)

serve: $(STAMP)
	@$(FUSE_EXTRA)
	$(VENV)/bin/hostfinder serve $(ARGS)

test: $(STAMP)
	@$(FUSE_EXTRA)
	$(PY) -m pytest $(ARGS)

# Each benchmark prints its figures beside a plain-files or raw-SQL reference run in the same
# process, as a ratio (the README's performance table comes from these).
BENCHES = notes records collections_schema dav dav_app scale locks fuse door web

bench: $(STAMP)
	@for b in $(BENCHES); do echo "== bench/$$b.py"; $(PY) -m bench.$$b || exit 1; done

clean:
	rm -rf $(VENV) .hostfinder *.egg-info

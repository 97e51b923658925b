# Both targets create .venv from requirements.txt when it is missing or older than requirements.txt.
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= staging

.PHONY: render test
render: $(VENV)/.installed
	$(PY) -m tools.render $(STACK) --out out/$(STACK)

test: $(VENV)/.installed
	$(PY) -m pytest

$(VENV)/.installed: requirements.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

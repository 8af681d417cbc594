# The serving stack's commands for a repository that adopted it (README.md): run them as
# `make -f deploy/serving.mk TARGET`, or add `include deploy/serving.mk` to your Makefile.
# Everything runs from the virtualenv in $(VENV) (default .venv).

VENV ?= .venv
BIN := $(VENV)/bin
# The ASGI app the stack serves; the environment or `make APP_MODULE=...` overrides it.
export APP_MODULE ?= {{ cookiecutter.app_module }}
# Docker when its daemon answers (a `docker` without one may be first on PATH), else podman,
# which drops the HEALTHCHECK without --format docker. BUILD_FLAGS: the engine's own flags.
ENGINE ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo podman)
IMAGE ?= {{ cookiecutter.project_slug }}:local
# Your dependencies beside the stack's, in one resolver pass: requirements.txt, else your
# pyproject.toml's project (the stack's ranges are a contract with them: stack/README.md).
APP_REQUIREMENTS ?= $(if $(wildcard requirements.txt),--requirement requirements.txt,$(if $(wildcard pyproject.toml),.,))

.PHONY: serving-install serving-check serve image

serving-install:  ## the serving stack and your app's dependencies into $(VENV)
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python -m pip install --quiet ./stack $(APP_REQUIREMENTS)

serving-check:  ## every conflict between your requirements and the stack's ranges, at once
	test -x $(BIN)/python || python3 -m venv $(VENV)
	$(BIN)/python stack/serving_stack/conflicts.py $(APP_REQUIREMENTS)

serve:  ## production stack (nginx -> unix socket -> gunicorn) on 127.0.0.1:8080; PORT overrides
	@PATH="$$PATH:/usr/sbin" command -v nginx >/dev/null 2>&1 || { echo "nginx is not installed; install it with: sudo apt-get install -y nginx-light" >&2; exit 1; }
	PATH="$$PATH:/usr/sbin" LISTEN_ADDRESS=127.0.0.1 RUN_DIR="$(CURDIR)/.run" $(BIN)/python -m serving_stack

image:  ## build the production image (IMAGE, default {{ cookiecutter.project_slug }}:local) with docker or podman (ENGINE)
	$(ENGINE) build $(if $(findstring podman,$(ENGINE)),--format docker) $(BUILD_FLAGS) --file deploy/Dockerfile --tag $(IMAGE) .

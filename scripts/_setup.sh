# shellcheck shell=bash
# Shared set-up for scripts/test and scripts/demo: Debian packages and the template's .venv.
# Sourced, not run. As root it installs what is missing with apt-get; as anyone else it
# stops and prints the one command to run.

# require_commands NAME=PACKAGE ...: each command NAME must be on PATH (or in /usr/sbin), each
# /ABSOLUTE/PATH NAME must exist: what a command needs only by recommendation is required by a
# path of its own (gcc's libc6-dev: /usr/include/stdio.h), so no machine lacks it silently.
require_commands() {
  local missing=() pair name
  # Every caller's .venv (and the auth tests' npm) comes over HTTPS, checked against Debian's CA
  # bundle, which python3 only recommends: required by its path, as any other.
  set -- "$@" /etc/ssl/certs/ca-certificates.crt=ca-certificates
  for pair in "$@"; do
    name=${pair%%=*}
    if [[ $name == /* ]]; then
      [ -e "$name" ] && continue
    elif command -v "$name" >/dev/null 2>&1 || [ -x "/usr/sbin/$name" ]; then
      continue
    fi
    missing+=("${pair#*=}")
  done
  # python3 -m venv needs ensurepip, which Debian ships separately in python3-venv (a fresh
  # minimal Debian has no python3 at all: then both).
  if ! python3 -c 'import ensurepip' 2>/dev/null; then
    missing+=(python3-venv)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "==> installing Debian packages: ${missing[*]}"
    apt-get update -qq
    # Without Recommends: what a command needs only by recommendation is named above by a path
    # of its own; the rest (podman's rootless helpers, chromium's desktop integration, git's
    # ssh) no test uses, and on a fresh bookworm they were about two thirds of the packages.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "error: missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
}

# ensure_template_venv: .venv with the template's `test` dependency group.
ensure_template_venv() {
  if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv"
    python3 -m venv .venv
  fi
  echo "==> installing the template's test tools into .venv"
  # uv (one wheel, with pip), then the group with uv: pip alone resolved and installed the
  # group on one CPU for about a minute of a fresh run; uv installs in parallel.
  .venv/bin/python -m pip install --quiet uv
  .venv/bin/uv pip install --quiet --python .venv/bin/python --group test
}

# nginx lives in /usr/sbin, which an ordinary user's PATH often lacks.
export PATH="$PATH:/usr/sbin"

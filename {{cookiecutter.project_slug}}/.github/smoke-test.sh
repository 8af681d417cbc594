#!/usr/bin/env bash
# Smoke test of the built image, run by CI after `docker build` and by hand the same way:
#   .github/smoke-test.sh IMAGE        (e.g. {{ cookiecutter.project_slug }}:ci)
# Starts the container as production does (read-only root filesystem, tmpfs for the socket
# and temp paths, no capabilities), waits for its HEALTHCHECK, sends requests through nginx
# on port 8080, then stops it with SIGTERM and requires a clean exit (status 0).
# Needs: docker, curl, python3 (all on GitHub's ubuntu runners). Inputs: IMAGE (argument),
# SMOKE_PORT (host port, default 8080).
set -euo pipefail

image=${1:?usage: $0 IMAGE}
port=${SMOKE_PORT:-8080}
name="smoke-$$"
base="http://127.0.0.1:$port"

cleanup() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    echo "--- container logs ---" >&2
    docker logs "$name" >&2 || true
  fi
  docker rm --force "$name" >/dev/null 2>&1 || true
  exit "$status"
}
trap cleanup EXIT

# The same restrictions as compose.yaml and the Kubernetes manifests: only the run directory
# (socket, pid, rendered nginx.conf, nginx temp files) and /tmp are writable.
{%- if cookiecutter.database == "postgresql" %}
# No database here (make test tests it): a URL to a closed port; live, not ready naming it.
docker run --detach --name "$name" \
  --read-only --tmpfs /run/app:uid=10001,gid=10001,mode=0755 --tmpfs /tmp:mode=1777 \
  --cap-drop ALL --security-opt no-new-privileges \
  --env "DATABASE_URL=postgresql+asyncpg://smoke:$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')@127.0.0.1:1/smoke" \
  --publish "127.0.0.1:$port:8080" \
  "$image" >/dev/null
{%- else %}
docker run --detach --name "$name" \
  --read-only --tmpfs /run/app:uid=10001,gid=10001,mode=0755 --tmpfs /tmp:mode=1777 \
  --cap-drop ALL --security-opt no-new-privileges \
  --publish "127.0.0.1:$port:8080" \
  "$image" >/dev/null
{%- endif %}

echo "==> waiting for the HEALTHCHECK to report healthy"
# The image's HEALTHCHECK runs every 10 s; the first passing one marks the container healthy.
for _ in $(seq 1 90); do
  read -r status running < <(docker inspect --type container "$name" | python3 -c 'import json, sys; state = json.load(sys.stdin)[0]["State"]; print(state.get("Health", {}).get("Status", "none"), state["Running"])')
  [ "$status" = healthy ] && break
  [ "$running" = True ] || { echo "error: the container exited during start-up" >&2; exit 1; }
  sleep 1
done
[ "$status" = healthy ] || { echo "error: health is '$status' after 90 s" >&2; exit 1; }

echo "==> requests through nginx"
{%- if cookiecutter.database == "postgresql" %}
ready=$(curl --silent --show-error --max-time 5 --write-out ' %{http_code}' "$base/readyz")
echo "$ready"
grep -q '"failing":\["database"\].* 503$' <<<"$ready" ||
  { echo "error: /readyz should answer 503 naming the unreachable database" >&2; exit 1; }
# The migrations ship in the image, for the migrate step (compose, the init container).
docker exec "$name" alembic -c /app/alembic.ini upgrade head --sql | grep -q 'CREATE TABLE items' ||
  { echo "error: the image cannot render the migrations (alembic.ini, migrations/)" >&2; exit 1; }
{%- else %}
curl --fail --silent --show-error --max-time 5 "$base/readyz"
echo
{%- endif %}
# GET /livez: nginx gives every request an id and the app echoes it, proof the request
# crossed the socket.
headers=$(curl --fail --silent --show-error --max-time 5 --dump-header - --output /dev/null "$base/livez")
grep -qi '^x-request-id: [0-9a-f]\{32\}' <<<"$headers" || {
  echo "error: no X-Request-ID in the response headers:" >&2
  echo "$headers" >&2
  exit 1
}

echo "==> graceful stop (SIGTERM, then the exit status)"
# Same budget as compose.yaml's stop_grace_period; past it Docker would send SIGKILL (exit 137).
docker stop --time 90 "$name" >/dev/null
code=$(docker wait "$name")
if [ "$code" != 0 ]; then
  echo "error: the container exited with status $code after SIGTERM (expected 0)" >&2
  exit 1
fi
echo "ok: healthy, answered through nginx, stopped cleanly"

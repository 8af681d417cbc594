#!/usr/bin/env bash
# Smoke test of the built image, for CI and a person alike: .github/smoke-test.sh IMAGE
# (`make image` builds {{ cookiecutter.project_slug }}:local): runs it locked down, one "==>" step per promise.
# Needs docker or podman, curl, python3. SMOKE_ENGINE: docker or podman (default: docker when
# its daemon answers); SMOKE_PORT: a host port (default: a free one).
{%- if cookiecutter.database == "postgresql" %}
# SMOKE_DATABASE_URL: a PostgreSQL database on this host's loopback (CI's service container,
# the tests' throwaway server). Set: the migration step runs, then items are created and read
# back through nginx. Unset: /readyz must answer 503 naming the unreachable database.
{%- endif %}
{%- if cookiecutter.jobs == "procrastinate" %}
# With SMOKE_DATABASE_URL the job worker runs too, from the same image (its own entrypoint):
# it must answer /livez, run the job a new item queues, and stop with status 0.
{%- endif %}
set -euo pipefail

image=${1:?usage: $0 IMAGE}
name="smoke-$$"
{%- if cookiecutter.jobs == "procrastinate" %}
worker="$name-worker"
{%- endif %}

fail() {
  echo "error: $*" >&2
  exit 1
}
get() { curl --fail --silent --show-error --max-time 5 "$@"; }
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A `docker` without a daemon (or podman-docker's wrapper) may be first on PATH.
engine=${SMOKE_ENGINE:-$(docker info >/dev/null 2>&1 && echo docker || echo podman)}
command -v "$engine" >/dev/null || fail "no container engine: no Docker daemon answers, no $engine"
# Without systemd no timer runs podman's health checks: this script runs them itself.
podman_engine=false
if "$engine" --version 2>/dev/null | grep -qi podman; then podman_engine=true; fi
port=${SMOKE_PORT:-$(free_port)}
base="http://127.0.0.1:$port"

cleanup() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    echo "--- container logs ---" >&2
    "$engine" logs "$name" >&2 || true
{%- if cookiecutter.jobs == "procrastinate" %}
    echo "--- worker logs ---" >&2
    "$engine" logs "$worker" >&2 2>/dev/null || true
{%- endif %}
  fi
  "$engine" rm --force "$name" >/dev/null 2>&1 || true
{%- if cookiecutter.jobs == "procrastinate" %}
  "$engine" rm --force "$worker" >/dev/null 2>&1 || true
{%- endif %}
  exit "$status"
}
trap cleanup EXIT

# One value of `inspect`'s JSON, by a path of keys: no Go template, the same for both engines.
inspect() {
  "$engine" "$1" inspect "$2" | python3 -c '
import json, sys
value = json.load(sys.stdin)[0]
for key in sys.argv[1:]:
    value = value.get(key) if isinstance(value, dict) else None
print(json.dumps(value) if isinstance(value, (dict, list)) else value)' "${@:3}"
}

# podman builds drop the HEALTHCHECK without --format docker (Docker: under Config).
healthcheck=$(inspect image "$image" Config Healthcheck Test)
[ "$healthcheck" != None ] || healthcheck=$(inspect image "$image" Healthcheck Test)
case $healthcheck in
  None | null | '[]' | '["NONE"]')
    fail "$image has no HEALTHCHECK (podman: build it with --format docker)" ;;
esac

# As compose.yaml and the pod: only the run directory and /tmp are writable (podman refuses uid=).
locked_down=(--read-only --cap-drop ALL --security-opt no-new-privileges)
run_options=(
  "${locked_down[@]}" --tmpfs "/run/app:size=16m,mode=1777" --tmpfs "/tmp:size=128m,mode=1777"
)
{%- if cookiecutter.database == "postgresql" %}
if [ -n "${SMOKE_DATABASE_URL:-}" ]; then
  # The database listens on the host's loopback: the container shares the host's network, so
  # nginx and the metrics listener take free loopback ports instead of published ones.
  run_options+=(--network host --env "DATABASE_URL=$SMOKE_DATABASE_URL" --env LISTEN_ADDRESS=127.0.0.1
    --env "PORT=$port" --env "METRICS_PORT=$(free_port)")
  echo "==> the migration step (alembic upgrade head), as compose.yaml and the init container run it"
  "$engine" run --rm "${locked_down[@]}" --network host --env "DATABASE_URL=$SMOKE_DATABASE_URL" \
    --entrypoint alembic "$image" -c /app/alembic.ini upgrade head
else
  # No database: a URL to a closed port; live, and not ready naming it.
  run_options+=(--publish "127.0.0.1:$port:8080"
    --env "DATABASE_URL=postgresql+asyncpg://smoke:$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')@127.0.0.1:1/smoke")
fi
{%- else %}
run_options+=(--publish "127.0.0.1:$port:8080")
{%- endif %}
{%- if cookiecutter.auth == "oidc" %}
# An issuer nothing answers for: the service starts without it (keys are fetched per token).
run_options+=(--env "{{ cookiecutter.package_name | upper }}_AUTH_ISSUER=https://issuer.invalid"
  --env "{{ cookiecutter.package_name | upper }}_AUTH_AUDIENCE=smoke")
{%- endif %}
"$engine" run --detach --name "$name" "${run_options[@]}" "$image" >/dev/null

echo "==> waiting for the HEALTHCHECK to report healthy"
status=starting
for _ in $(seq 1 90); do
  if $podman_engine; then "$engine" healthcheck run "$name" >/dev/null 2>&1 || true; fi
  status=$(inspect container "$name" State Health Status)
  [ "$status" = healthy ] && break
  [ "$(inspect container "$name" State Running)" = True ] || fail "the container exited at start-up"
  sleep 1
done
[ "$status" = healthy ] || fail "health is '$status' after 90 s"

echo "==> every process runs as 10001 with no capabilities, on a read-only root, with no compiler"
"$engine" exec "$name" python -c '
import errno, os, shutil
problems, pids = [], [pid for pid in os.listdir("/proc") if pid.isdigit()]
for pid in pids:
    try:
        with open(f"/proc/{pid}/status") as file:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in file if ":\t" in line)
    except FileNotFoundError:  # it exited meanwhile
        continue
    capabilities = [key for key in ("CapPrm", "CapEff", "CapBnd") if int(status[key], 16)]
    uids, gids = set(status["Uid"].split()), set(status["Gid"].split())
    command, no_new_privileges = status["Name"], status["NoNewPrivs"] == "1"
    if uids != {"10001"} or gids != {"10001"} or capabilities or not no_new_privileges:
        problems.append(f"pid {pid} ({command}): uids {uids}, gids {gids}, capabilities"
                        f" {capabilities}, no_new_privs {no_new_privileges}")
try:
    open("/app/smoke-write-test", "w").close()
    problems.append("the root filesystem is writable")
except OSError as error:
    if error.errno != errno.EROFS:
        problems.append(f"writing to /app failed with {error!r}, not EROFS (read-only root)")
tools = ["cc", "gcc", "g++", "c++", "clang", "ld", "as", "make", "cmake", "rustc", "cargo"]
path = os.environ["PATH"] + ":/usr/bin:/usr/local/bin"
if found := [tool for tool in tools if shutil.which(tool, path=path)]:
    problems.append(f"build tools in the final image: {found}")
print("\n".join(problems) or f"{len(pids)} processes checked")
raise SystemExit(1 if problems else 0)'
{%- if cookiecutter.auth == "oidc" %}

# auth=oidc: the smoke test has no token; a write without one is the app's 401 challenge.
refused_write() {
  local answer
  answer=$(curl --silent --show-error --max-time 5 --include --json '{"name": "smoke", "price_cents": 100}' "$base/items")
  grep -qi '^www-authenticate: Bearer' <<<"$answer" || fail "POST /items without a token: no 401 challenge in: $answer"
  echo "POST /items without a token: 401"
}
{%- endif %}

echo "==> requests through nginx"
{%- if cookiecutter.database == "postgresql" %}
if [ -n "${SMOKE_DATABASE_URL:-}" ]; then
  get --write-out '\n' "$base/readyz"
{%- if cookiecutter.auth == "oidc" %}
  refused_write
{%- else %}
  created=$(get --json '{"name": "smoke", "price_cents": 100}' "$base/items")
  id=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$created")
  get "$base/items/$id" | grep -q '"name":"smoke"' || fail "GET /items/$id: not the item just created"
  echo "created and read back item $id"
{%- endif %}
else
  ready=$(curl --silent --show-error --max-time 5 --write-out ' %{http_code}' "$base/readyz")
  echo "$ready"
  grep -q '"failing":\["database"\].* 503$' <<<"$ready" ||
    fail "/readyz should answer 503 naming the unreachable database"
  # The migrations ship in the image, for the migrate step (compose, the init container).
  "$engine" exec "$name" alembic -c /app/alembic.ini upgrade head --sql | grep -q 'CREATE TABLE items' ||
    fail "the image cannot render the migrations (alembic.ini, migrations/)"
fi
{%- else %}
get --write-out '\n' "$base/readyz"
{%- if cookiecutter.layout == "service" %}
{%- if cookiecutter.auth == "oidc" %}
refused_write
{%- else %}
created=$(get --json '{"name": "smoke", "price_cents": 100}' "$base/items")
id=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$created")
get "$base/items/$id" | grep -q '"name":"smoke"' || fail "GET /items/$id: not the item just created"
echo "created and read back item $id"
{%- endif %}
{%- endif %}
{%- endif %}
# nginx gives every request an id and the app echoes it: proof the request crossed the socket.
headers=$(get --dump-header - --output /dev/null "$base/livez")
grep -qi '^x-request-id: [0-9a-f]\{32\}' <<<"$headers" || fail "no X-Request-ID in: $headers"

echo "==> a WebSocket handshake reaches the app through nginx"
# No WebSocket route here: the app's 403. A 200 is a plain GET: nginx dropped the upgrade, or
# the image's uvicorn has no WebSocket library (only the image can tell).
handshake=(--header 'Connection: Upgrade' --header 'Upgrade: websocket'
  --header 'Sec-WebSocket-Version: 13' --header 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==')
answer=$(curl --silent --show-error --max-time 5 --output /dev/null --write-out '%{http_code}' "${handshake[@]}" "$base/livez")
[ "$answer" = 403 ] || fail "a WebSocket handshake to /livez answered $answer, not the app's 403"
echo "WebSocket handshake: the app's 403 (no route), not a plain GET's 200"

{%- if cookiecutter.jobs == "procrastinate" %}

if [ -n "${SMOKE_DATABASE_URL:-}" ]; then
  echo "==> the job worker: the same image, locked down, runs the job a new item queues"
  # The host's network, as the web container: its /livez and /metrics on a free loopback port.
  worker_port=$(free_port)
  # compose.yaml's stop_grace_period and the pod's: the drain (20 s) + 5 s fit in it.
  worker_grace=30
  worker_base="http://127.0.0.1:$worker_port"
  worker_options=(
    "${locked_down[@]}" --tmpfs "/tmp:size=16m,mode=1777" --network host
    --env "DATABASE_URL=$SMOKE_DATABASE_URL"
    --env "{{ cookiecutter.package_name | upper }}_JOBS_HEALTH_HOST=127.0.0.1"
    --env "{{ cookiecutter.package_name | upper }}_JOBS_HEALTH_PORT=$worker_port"
    --env "STOP_GRACE_PERIOD=$worker_grace"
  )
{%- if cookiecutter.auth == "oidc" %}
  worker_options+=(--env "{{ cookiecutter.package_name | upper }}_AUTH_ISSUER=https://issuer.invalid"
    --env "{{ cookiecutter.package_name | upper }}_AUTH_AUDIENCE=smoke")
{%- endif %}
  "$engine" run --detach --name "$worker" "${worker_options[@]}" \
    --entrypoint python "$image" -m {{ cookiecutter.package_name }}.worker >/dev/null
  # Its pool waits up to 30 s for the database before the health server starts.
  live=false
  for _ in $(seq 1 60); do
    if get --output /dev/null "$worker_base/livez" 2>/dev/null; then live=true && break; fi
    [ "$(inspect container "$worker" State Running)" = True ] || fail "the worker exited at start-up"
    sleep 1
  done
  $live || fail "the worker's /livez did not answer 200 within 60 s"
  get --write-out '\n' "$worker_base/livez"
{%- if cookiecutter.auth == "oidc" %}
  # auth=oidc: no token here to create an item with, so no job to watch; the start and the
  # stop are checked.
{%- else %}
  created=$(get --json '{"name": "lamp", "price_cents": 1999, "tags": []}' "$base/items")
  id=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["id"])' "$created")
  # Succeeded: counted in /metrics, and this item's job logged its id (an earlier item's
  # job, the one created above, counts too: hence at least one, and the log line). The
  # labels in either order: prometheus_client's releases differ (0.26 sorts them).
  succeeded='^jobs_total\{(task="announce_item",outcome="succeeded"|outcome="succeeded",task="announce_item")\} [1-9]'
  ran=false
  for _ in $(seq 1 30); do
    # Read whole, then searched: a grep that stops early would break the pipe (pipefail).
    metrics=$(get "$worker_base/metrics" || true)
    worker_logs=$("$engine" logs "$worker" 2>&1 || true)
    if grep -Eq "$succeeded" <<<"$metrics" && python3 -c '
import json, sys
def item_id(line):
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record.get("item_id") if isinstance(record, dict) else None
sys.exit(0 if any(str(item_id(line)) == sys.argv[1] for line in sys.stdin) else 1)' "$id" <<<"$worker_logs"; then
      ran=true && break
    fi
    sleep 1
  done
  $ran || fail "the worker ran no announce_item job for item $id within 30 s"
  grep '^jobs_total{.*"announce_item"' <<<"$metrics"
  echo "item $id queued its job, which the worker ran"
{%- endif %}
  # SIGTERM: it drains, then exits; past its grace period the engine sends SIGKILL (137).
  started=$SECONDS
  "$engine" stop --time "$worker_grace" "$worker" >/dev/null
  code=$("$engine" wait "$worker")
  [ "$code" = 0 ] || fail "the worker exited with status $code after SIGTERM (expected 0)"
  echo "worker stopped with status 0 in $((SECONDS - started)) s"
fi
{%- endif %}

echo "==> graceful stop (SIGTERM, then the exit status)"
# Same budget as compose.yaml's stop_grace_period; past it the engine sends SIGKILL (137).
started=$SECONDS
"$engine" stop --time 90 "$name" >/dev/null
code=$("$engine" wait "$name")
[ "$code" = 0 ] || fail "the container exited with status $code after SIGTERM (expected 0)"
echo "stopped with status 0 in $((SECONDS - started)) s"

echo "==> every log line is JSON"
"$engine" logs "$name" 2>&1 | python3 -c '
import json, sys
def bad(line):
    try:
        return not isinstance(json.loads(line), dict)
    except ValueError:
        return True
lines = [line for line in sys.stdin if line.strip()]
wrong = [line for line in lines if bad(line)]
if wrong or not lines:
    sys.exit(f"error: {len(wrong)} of {len(lines)} log lines are not JSON objects, e.g. {wrong[:3]}")
print(f"{len(lines)} log lines, all JSON")'
echo "ok: healthy, locked down, answered through nginx, passed a WebSocket handshake on, stopped cleanly, logged JSON"

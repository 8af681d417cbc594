"""The generated k8s/ tree (kubernetes=true; a default bake has none): every overlay renders
(kubectl kustomize), validates strictly against the oldest and newest Kubernetes the manifests
claim (kubernetes-validate), passes checkov and the kube-score and polaris rules (re-stated
here: neither runs offline here), and keeps the relations no single tool sees: probes that
answer the right question, a stop that fits the grace period, a database connection budget
that holds through a rolling update.

Each accepted policy finding is listed with its reason, and must still occur (a fixed one is
taken off the list). CI time: about 25 s (six renders, twelve validations, one checkov run).
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import KUBERNETES_VERSIONS, Bake, ProjectEnv, jobs_number, run_captured

TOOLS = Path(sys.executable).parent
OVERLAYS = ("base", "overlays/dev", "overlays/prod")
# The validated range: the docs' "Kubernetes 1.30 or later", to the newest schema here.

CHECKOV = "checkov==3.3.30"
# PostgreSQL's defaults: max_connections 100, superuser_reserved_connections 3; and 5 kept
# for everyone else (a DBA's session, a metrics exporter, a migration Job).
MAX_CONNECTIONS, SUPERUSER_RESERVED, OTHERS = 100, 3, 5

pytestmark = pytest.mark.skipif(
    shutil.which("kubectl") is None, reason="kubectl (its kustomize) is not installed"
)


@pytest.fixture(params=["default", "postgresql"])
def project(request: pytest.FixtureRequest) -> Path:
    """Each bake's project, both with kubernetes=true: the database adds an init container and
    a connection budget."""
    fixture = "kubernetes_bake" if request.param == "default" else "database_bake"
    result: Bake = request.getfixturevalue(fixture)
    return result.project


@cache
def render(k8s: Path, overlay: str) -> str:
    built = run_captured(["kubectl", "kustomize", str(k8s / overlay)])
    assert built.returncode == 0, f"kubectl kustomize {overlay}: {built.stderr}"
    return built.stdout


def objects(project: Path, overlay: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(render(project / "k8s", overlay)))


def one(found: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (match,) = [o for o in found if o["kind"] == kind]
    return match


def pod_spec(found: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(found, "Deployment")["spec"]["template"]["spec"]
    return spec


def app_container(found: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = pod_spec(found)["containers"]
    return container


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


def run(*command: str | Path, cwd: Path) -> str:
    result = run_captured(command, cwd=cwd)
    output = f"{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, f"{command} exited {result.returncode}\n{output}"
    return output


# --- render and validate ------------------------------------------------------------------


def test_the_base_lists_every_manifest(kubernetes_bake: Bake) -> None:
    """kustomization.yaml names each manifest of the base once (the default bake has no k8s/:
    tests/test_ecosystem.py, test_kubernetes_is_opt_in)."""
    base = kubernetes_bake.project / "k8s" / "base"
    listed = yaml.safe_load((base / "kustomization.yaml").read_text(encoding="utf-8"))
    on_disk = sorted(p.name for p in base.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed["resources"]) == on_disk
    assert {o["kind"] for o in objects(kubernetes_bake.project, "base")} == {
        "Deployment",
        "Service",
        "HorizontalPodAutoscaler",
        "PodDisruptionBudget",
        "NetworkPolicy",
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_validates_strictly(
    project: Path, overlay: str, tmp_path: Path
) -> None:
    """`kubectl kustomize` builds it offline; kubernetes-validate --strict accepts every object
    against the 1.30 and 1.37 schemas; so do the examples built-in kinds."""
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(render(project / "k8s", overlay), encoding="utf-8")
    examples = [
        path
        for path in sorted((project / "k8s" / "examples").glob("*.yaml"))
        if "monitoring.coreos.com" not in path.read_text(encoding="utf-8")  # a CRD: no schema
    ]
    for version in KUBERNETES_VERSIONS:
        output = run(
            TOOLS / "kubernetes-validate",
            "--strict",
            "-k",
            version,
            rendered,
            *examples,
            cwd=tmp_path,
        )
        assert "passed" in output
        assert "fail" not in output.lower(), output


def test_selectors_and_ports_agree(kubernetes_bake: Bake) -> None:
    """The Service, HPA, PDB and NetworkPolicy find the Deployment's pods; the Service targets
    the port nginx listens on (the stack's PORT default), the HPA owns the replica count."""
    found = objects(kubernetes_bake.project, "base")
    deployment = one(found, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _selects(deployment["spec"]["selector"]["matchLabels"], labels)
    assert _selects(one(found, "Service")["spec"]["selector"], labels)
    assert _selects(one(found, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)
    assert _selects(one(found, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"], labels)
    target = one(found, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    assert "replicas" not in deployment["spec"], "the HPA owns the replica count"
    stack_settings = (kubernetes_bake.project / "stack" / "serving_stack") / "settings.py"
    default_port = re.search(r'Field\((\d+), alias="PORT"\)', stack_settings.read_text())
    assert default_port is not None, "the stack's settings.py no longer defines PORT's default"
    ports = {port["name"]: port for port in app_container(found)["ports"]}
    assert set(ports) == {"http", "metrics"}, "nginx's port, and the metrics listener's"
    assert ports["http"]["containerPort"] == int(default_port.group(1)) == 8080
    assert one(found, "Service")["spec"]["ports"][0]["targetPort"] == "http"


def test_prod_pins_the_image_by_digest_and_admits_its_public_name(kubernetes_bake: Bake) -> None:
    """overlays/prod: the image by digest, the Ingress's host in ALLOWED_HOSTS, proxies trusted."""
    found = objects(kubernetes_bake.project, "overlays/prod")
    container = app_container(found)
    assert re.fullmatch(r"[\w./-]+@sha256:[0-9a-f]{64}", container["image"]), container["image"]
    (rule,) = one(found, "Ingress")["spec"]["rules"]
    env = env_of(container)
    assert rule["host"] in env["ALLOWED_HOSTS"].split()
    assert env["TRUSTED_PROXIES"] not in {"", "0.0.0.0/0"}
    (route,) = rule["http"]["paths"]
    assert route["backend"]["service"]["name"] == one(found, "Service")["metadata"]["name"]


# --- policies: checkov, and kube-score's and polaris's rules --------------------------------

# checkov's findings this template accepts, by check id, with the reason.
CHECKOV_ACCEPTED = {
    "CKV_K8S_21": "no namespace in the manifests: `kubectl apply -n` chooses it, so one overlay"
    " deploys to any namespace",
    "CKV_K8S_43": "base and dev name the image by tag (a local build); prod pins a digest",
    "CKV_K8S_35": "postgresql: DATABASE_URL from its Secret as a variable, the one interface"
    " compose, platforms and alembic share; the app holds it as a SecretStr, never logged",
    "CKV_K8S_15": "imagePullPolicy IfNotPresent: tags are never reused, prod pins a digest, and"
    " Always would make every pod start depend on the registry",
}


def checkov(*bakes: tuple[Bake, str]) -> tuple[set[tuple[str, str]], int, str]:
    """checkov (offline: --skip-download) over every overlay of each (bake, name): its failed
    (check id, resource) pairs, the count of checks passed, and its output."""
    rendered = []
    for result, name in bakes:
        for overlay in OVERLAYS:
            path = result.project.parent / f"rendered-{name}-{overlay.replace('/', '-')}.yaml"
            path.write_text(render(result.project / "k8s", overlay), encoding="utf-8")
            rendered += ["-f", str(path)]
    done = run_captured(
        [
            TOOLS / "uv",
            "tool",
            "run",
            "--from",
            CHECKOV,
            "checkov",
            *rendered,
            "--framework",
            "kubernetes",
            "--skip-download",
            "--quiet",
            "--compact",
            "-o",
            "json",
        ]
    )
    assert done.stdout.strip(), done.stderr
    reports = yaml.safe_load(done.stdout)  # JSON is YAML
    reports = reports if isinstance(reports, list) else [reports]
    failed = {
        (f["check_id"], f["resource"]) for r in reports for f in r["results"]["failed_checks"]
    }
    return failed, sum(r["summary"]["passed"] for r in reports), done.stdout


def test_checkov_finds_only_the_accepted(kubernetes_bake: Bake, database_bake: Bake) -> None:
    """checkov (offline: --skip-download) passes every overlay of both bakes but the findings
    CHECKOV_ACCEPTED lists, and each of those still occurs."""
    failed, passed, output = checkov((kubernetes_bake, "default"), (database_bake, "postgresql"))
    unexpected = sorted(item for item in failed if item[0] not in CHECKOV_ACCEPTED)
    assert not unexpected, unexpected
    assert {check for check, _ in failed} == set(CHECKOV_ACCEPTED)
    assert passed > 200, output[-2000:]


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def kube_score_and_polaris(found: list[dict[str, Any]]) -> set[str]:
    """The rules of kube-score (its default checks) and polaris that apply to these kinds, each
    as kube-score or polaris names it; returns the ids of those that fail."""
    deployment, pod = one(found, "Deployment"), pod_spec(found)
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    hpas = [o for o in found if o["kind"] == "HorizontalPodAutoscaler"]
    pdbs = [o for o in found if o["kind"] == "PodDisruptionBudget"]
    policies = [o for o in found if o["kind"] == "NetworkPolicy"]
    containers = _containers(pod)
    port_names = {p["name"] for c in pod["containers"] for p in c.get("ports", [])}

    def resources(kind: str, name: str) -> bool:
        return all(c.get("resources", {}).get(kind, {}).get(name) for c in containers)

    context = {**pod.get("securityContext", {})}
    checks = {
        # kube-score
        "container-resources": all(
            resources(k, n) for k in ("requests", "limits") for n in ("cpu", "memory")
        ),
        "container-ephemeral-storage-request-and-limit": resources("requests", "ephemeral-storage")
        and resources("limits", "ephemeral-storage"),
        "container-cpu-requests-equal-limits": all(
            c["resources"]["requests"]["cpu"] == c["resources"]["limits"]["cpu"]
            for c in pod["containers"]
        ),
        "container-image-tag": all(
            not c["image"].endswith(":latest") and (":" in c["image"] or "@" in c["image"])
            for c in containers
        ),
        "container-image-pull-policy": all(
            c.get("imagePullPolicy") == "Always" for c in containers
        ),
        "container-security-context-user-group-id": context.get("runAsUser", 0) > 10000
        and context.get("runAsGroup", 0) > 10000,
        "container-security-context-readonlyrootfilesystem": all(
            c["securityContext"].get("readOnlyRootFilesystem") for c in containers
        ),
        "container-security-context-privileged": not any(
            c["securityContext"].get("privileged") for c in containers
        ),
        "container-seccomp-profile": context.get("seccompProfile", {}).get("type")
        == "RuntimeDefault",
        "pod-probes": all(
            "readinessProbe" in c and c.get("livenessProbe") != c["readinessProbe"]
            for c in pod["containers"]
        ),
        "pod-networkpolicy": any(
            _selects(p["spec"]["podSelector"]["matchLabels"], labels)
            and {"Ingress", "Egress"} <= set(p["spec"]["policyTypes"])
            for p in policies
        ),
        "networkpolicy-targets-pod": all(
            _selects(p["spec"]["podSelector"]["matchLabels"], labels) for p in policies
        ),
        "networkpolicy-ports-exist": all(
            port["port"] in port_names
            for p in policies
            for rule in p["spec"].get("ingress", [])
            for port in rule.get("ports", [])
        ),
        "deployment-has-poddisruptionbudget": any(
            _selects(p["spec"]["selector"]["matchLabels"], labels) for p in pdbs
        ),
        "deployment-has-host-podantiaffinity": "podAntiAffinity" in pod.get("affinity", {}),
        "deployment-targeted-by-hpa-does-not-have-replicas": not hpas
        or "replicas" not in deployment["spec"],
        "horizontalpodautoscaler-has-target": all(
            h["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"] for h in hpas
        ),
        "environment-variable-key-duplication": all(
            len(c.get("env", [])) == len({e["name"] for e in c.get("env", [])}) for c in containers
        ),
        # polaris
        "hostIPCSet/hostPIDSet/hostNetworkSet": not any(
            pod.get(k) for k in ("hostIPC", "hostPID", "hostNetwork")
        ),
        "runAsRootAllowed": context.get("runAsNonRoot") is True,
        "privilegeEscalationAllowed": all(
            c["securityContext"].get("allowPrivilegeEscalation") is False for c in containers
        ),
        "insecureCapabilities": all(
            c["securityContext"].get("capabilities", {}).get("drop") == ["ALL"]
            and not c["securityContext"]["capabilities"].get("add")
            for c in containers
        ),
        "livenessProbeMissing/readinessProbeMissing": all(
            "livenessProbe" in c and "readinessProbe" in c for c in pod["containers"]
        ),
        "automountServiceAccountToken": pod.get("automountServiceAccountToken") is False,
        "missingNetworkPolicy": bool(policies),
        "topologySpreadConstraint": any(
            t["topologyKey"] == "topology.kubernetes.io/zone"
            for t in pod.get("topologySpreadConstraints", [])
        ),
        "hpaMinAvailability": all(h["spec"].get("minReplicas", 1) >= 2 for h in hpas),
        "hpaMaxAvailability": all(
            h["spec"]["maxReplicas"] > h["spec"].get("minReplicas", 1) for h in hpas
        ),
        "pdbDisruptionsIsZero": all(p["spec"].get("maxUnavailable") != 0 for p in pdbs),
        "priorityClassNotSet": bool(pod.get("priorityClassName")),
        "sensitiveContainerEnvVar": not any(
            re.search(r"password|secret|token|_key$|^database_url$", e["name"], re.IGNORECASE)
            and "value" in e
            for c in containers
            for e in c.get("env", [])
        ),
    }
    return {name for name, passed in checks.items() if not passed}


# The rules this template breaks on purpose (a cluster-specific choice, or a better way).
RULES_ACCEPTED = {
    "container-image-pull-policy": CHECKOV_ACCEPTED["CKV_K8S_15"],
    "pod-networkpolicy": "ingress only: egress (DNS, PostgreSQL, a trace collector) has addresses"
    " only the cluster knows (networkpolicy.yaml); restrict it in an overlay",
    "deployment-has-host-podantiaffinity": "topologySpreadConstraints spread over nodes and zones"
    " instead (ScheduleAnyway): a required anti-affinity leaves surge pods Pending on small"
    " clusters and stalls the rollout",
    "priorityClassNotSet": "a PriorityClass is cluster-wide: the cluster's operators name it",
}
# Per overlay: what it changes on purpose.
RULES_ACCEPTED_IN = {"overlays/dev": {"hpaMinAvailability": "one pod is enough in development"}}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_kube_score_and_polaris_rules_pass_but_the_accepted(project: Path, overlay: str) -> None:
    """Every rule above passes on the rendered overlay but those accepted, with their reasons,
    and each accepted one still fails (else it is taken off the list)."""
    accepted = {**RULES_ACCEPTED, **RULES_ACCEPTED_IN.get(overlay, {})}
    assert kube_score_and_polaris(objects(project, overlay)) == set(accepted)


# --- probes, mounts, the stop, the connection budget --------------------------------------


def test_probes_answer_the_right_question(kubernetes_bake: Bake) -> None:
    """Liveness asks nginx alone (a location that returns, never counted); readiness and startup
    go through nginx to a worker, readiness exempt from the in-flight cap, and waits longer than
    the app's own checks; startup allows as long as the supervisor gives gunicorn."""
    project = kubernetes_bake.project
    container = app_container(objects(project, "base"))
    live, ready, start = (container[p] for p in ("livenessProbe", "readinessProbe", "startupProbe"))
    nginx = (project / "stack" / "serving_stack" / "nginx.conf").read_text(encoding="utf-8")
    path = live["httpGet"]["path"]
    # The location's own closing brace (its `if` blocks close on their line).
    location = re.search(rf"location = {re.escape(path)} \{{(.*?)\n        \}}", nginx, re.DOTALL)
    assert location is not None, f"nginx.conf answers {path} itself"
    assert "return 200" in location.group(1)
    assert "proxy_pass" not in location.group(1)
    # Probes (GET or HEAD of exactly these paths) are not counted against the overload cap.
    overload = re.search(r'map "\$probe:\$uri" \$overload_key \{(.*?)\}', nginx, re.DOTALL)
    assert overload is not None
    assert '"~^1:" "";' in overload.group(1)
    probe = re.search(r"map \"\$request_method \$request_uri\" \$probe \{\n\s*\"(.*?)\" 1;", nginx)
    assert probe is not None
    exempt = {f"/{name}" for name in re.findall(r"[a-z-]+", probe.group(1).split("/(?:")[1])}
    assert {path, "/readyz", "/livez"} <= exempt
    assert (ready["httpGet"]["path"], start["httpGet"]["path"]) == ("/readyz", "/livez")
    sources = "".join(p.read_text(encoding="utf-8") for p in (project / "src").rglob("*.py"))
    checks_timeout = re.search(r"timeout_seconds: float = ([\d.]+)", sources)
    assert checks_timeout is not None
    assert ready["timeoutSeconds"] > float(checks_timeout.group(1))
    assert live["timeoutSeconds"] <= live["periodSeconds"]
    stack_settings = (project / "stack" / "serving_stack") / "settings.py"
    startup = re.search(r"Field\(([\d.]+), alias=\"STARTUP_TIMEOUT\"\)", stack_settings.read_text())
    assert startup is not None
    assert start["periodSeconds"] * start["failureThreshold"] >= float(startup.group(1))


def test_pod_runs_locked_down_with_bounded_writable_mounts(project: Path) -> None:
    """Non-root as the image's user, read-only root, no capabilities, no service links;
    /run/app in memory (16Mi) and /tmp (128Mi) the only writable paths; spread by zone."""
    found = objects(project, "base")
    pod, container = pod_spec(found), app_container(found)
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    dockerfile = (project / "Dockerfile").read_text(encoding="utf-8")
    user = re.search(r"^USER\s+(\d+)(?::(\d+))?\s*$", dockerfile, re.MULTILINE)
    assert user is not None, "the Dockerfile's USER must be numeric for runAsNonRoot"
    assert pod["securityContext"]["runAsUser"] == int(user.group(1))
    for each in _containers(pod):
        assert each["securityContext"] == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v["emptyDir"] for v in pod["volumes"]}
    assert volumes[mounts["/run/app"]] == {"medium": "Memory", "sizeLimit": "16Mi"}
    tmp = "/tmp"  # noqa: S108 - the pod's own emptyDir, not this machine's
    assert volumes[mounts[tmp]] == {"sizeLimit": "128Mi"}
    assert set(mounts) == {"/run/app", tmp}
    spread = {t["topologyKey"]: t for t in pod["topologySpreadConstraints"]}
    assert set(spread) == {"topology.kubernetes.io/zone", "kubernetes.io/hostname"}
    assert all(t["matchLabelKeys"] == ["pod-template-hash"] for t in spread.values())
    env = env_of(container)
    quantity = str(container["resources"]["limits"]["cpu"])  # "1", "1.5" or "1500m"
    cpus = int(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)
    assert 1 <= int(env["NGINX_WORKER_PROCESSES"]) <= max(1, math.ceil(cpus))


def test_the_network_policy_opens_http_to_all_and_metrics_to_monitoring(
    kubernetes_bake: Bake,
) -> None:
    """http from anywhere; metrics only from the namespace named monitoring; nothing else."""
    policy = one(objects(kubernetes_bake.project, "base"), "NetworkPolicy")["spec"]
    rules = {
        tuple(port["port"] for port in rule["ports"]): rule.get("from")
        for rule in policy["ingress"]
    }
    monitoring = [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    assert rules == {("http",): None, ("metrics",): monitoring}


@pytest.mark.slow
def test_the_grace_period_covers_every_process_the_supervisor_stops(
    kubernetes_bake: Bake, project_env: ProjectEnv
) -> None:
    """terminationGracePeriodSeconds = STOP_GRACE_PERIOD (no preStop hook), which covers the
    supervisor's drain (DRAIN_SECONDS), then its stop one process at a time: nginx's drain, the
    metrics listener, gunicorn's graceful_timeout (as gunicorn itself reads it), each + margin;
    the stack's own stop_budget counts the same."""
    project = kubernetes_bake.project
    found = objects(project, "base")
    pod, container = pod_spec(found), app_container(found)
    env = {**project_env.environ(project), **env_of(container)}
    env.pop("GRACEFUL_TIMEOUT", None)
    env.setdefault("APP_MODULE", f"{kubernetes_bake.package_name}.main:app")  # the image's ENV
    # gunicorn's own parser, with the pod's environment: the value gunicorn would really use.
    gunicorn = str(project_env.venv / "bin" / "gunicorn")
    printed = subprocess.run(
        [gunicorn, "--print-config", "-c", "python:serving_stack.gunicorn_conf"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    graceful = re.search(r"^graceful_timeout\s+=\s+(\d+)", printed, re.MULTILINE)
    stack = (project / "stack" / "serving_stack").name
    numbers = subprocess.run(
        [
            str(project_env.venv / "bin" / "python"),
            "-c",
            f"import os, {stack}.settings as s\nc = s.load(os.environ)\n"
            "print(c.drain_seconds, c.nginx_drain, s.STOP_MARGIN, c.stop_budget)",
        ],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert graceful is not None
    serving, drain, margin, budget = map(float, numbers)
    # stop_all(): nginx (drain + margin), then the metrics listener (margin), then gunicorn.
    every_process = (drain + margin) + margin + (float(graceful.group(1)) + margin)
    assert (serving, budget) == (15, serving + every_process)
    stop_grace = float(env_of(container)["STOP_GRACE_PERIOD"])
    assert stop_grace >= budget
    assert pod["terminationGracePeriodSeconds"] == stop_grace
    assert "lifecycle" not in container, "the drain serves on, not a preStop sleep"


def connections_at_worst(
    found: list[dict[str, Any]], share: str = "_DATABASE_MAX_CONNECTIONS"
) -> tuple[int, str]:
    """The most PostgreSQL connections the rendered objects can hold at once, and the sum.

    Pods: the most the HPA allows (else the Deployment's replicas), the surge a rollout adds,
    and the pods still stopping, each with its pool until gunicorn exits: the controller does
    not count them, so one more starts as each begins to stop, a new one every minReadySeconds
    at the soonest while each takes up to terminationGracePeriodSeconds (all old ones without
    minReadySeconds). Init containers close their connection before the pod's pool opens: a
    pod's share covers them. Jobs add one connection per parallel pod. ``share``: the ending
    of the variable holding a pod's connections (the job worker's: _JOBS_MAX_CONNECTIONS).
    """
    deployment = one(found, "Deployment")
    spec, pod = deployment["spec"], pod_spec(found)
    env = env_of(app_container(found))
    per_pod = int(next(v for k, v in env.items() if k.endswith(share)))
    hpas = [o for o in found if o["kind"] == "HorizontalPodAutoscaler"]
    replicas = hpas[0]["spec"]["maxReplicas"] if hpas else spec.get("replicas", 1)
    surge_value = spec.get("strategy", {}).get("rollingUpdate", {}).get("maxSurge", "25%")
    surge = (
        math.ceil(replicas * int(surge_value[:-1]) / 100)
        if isinstance(surge_value, str)
        else surge_value
    )
    grace = pod.get("terminationGracePeriodSeconds", 30)
    min_ready = spec.get("minReadySeconds", 0)
    stopping = min(replicas, math.ceil(grace / min_ready)) if min_ready else replicas
    # One connection each, closed before the pool opens: within the pod's share.
    assert all("DATABASE_URL" in env_of(init) for init in pod.get("initContainers", []))
    assert per_pod >= 1
    jobs = sum(o["spec"].get("parallelism", 1) for o in found if o["kind"] == "Job")
    total = (replicas + surge + stopping) * per_pod + jobs
    return total, f"({replicas} + {surge} surge + {stopping} stopping) x {per_pod} + {jobs} jobs"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_connection_budget_holds_during_a_rollout_at_full_scale(
    database_bake: Bake, overlay: str
) -> None:
    """Pods at the HPA's maximum, the surge pod and the pods still stopping, each with its
    share, plus the migration Job example, stay within PostgreSQL's default max_connections
    less the superusers' reserve and room for others."""
    found = objects(database_bake.project, overlay)
    job = yaml.safe_load(
        (database_bake.project / "k8s" / "examples" / "migration-job.yaml").read_text("utf-8")
    )
    total, formula = connections_at_worst([*found, job])
    assert total <= MAX_CONNECTIONS - SUPERUSER_RESERVED - OTHERS, formula


# --- the job worker (jobs=procrastinate: k8s/base/worker.yaml) -----------------------------


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_connection_budget_holds_with_the_workers_too(jobs_bake: Bake, overlay: str) -> None:
    """The web pods' worst case and the job workers' (their own replicas, surge and pods
    still draining, each with its pool), plus the migration Job, within the same budget."""
    web, worker = split_worker(jobs_bake.project, objects(jobs_bake.project, overlay))
    job = yaml.safe_load(
        (jobs_bake.project / "k8s" / "examples" / "migration-job.yaml").read_text("utf-8")
    )
    served, web_formula = connections_at_worst([*web, job])
    working, worker_formula = connections_at_worst(worker, "_JOBS_MAX_CONNECTIONS")
    limit = MAX_CONNECTIONS - SUPERUSER_RESERVED - OTHERS
    assert served + working <= limit, f"web {web_formula}, workers {worker_formula}"


def split_worker(project: Path, found: list[dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """The web objects and the job worker's (named <slug>-worker), apart."""
    name = f"{project.name}-worker"
    worker = [o for o in found if o["metadata"]["name"] == name]
    return [o for o in found if o["metadata"]["name"] != name], worker


def pod_labels(found: list[dict[str, Any]]) -> dict[str, str]:
    labels: dict[str, str] = one(found, "Deployment")["spec"]["template"]["metadata"]["labels"]
    return labels


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_worker_renders_and_validates_strictly(
    jobs_bake: Bake, overlay: str, tmp_path: Path
) -> None:
    """jobs=procrastinate: the base lists worker.yaml beside every other manifest; each overlay
    builds a worker Deployment, PodDisruptionBudget and NetworkPolicy beside the web objects,
    and kubernetes-validate --strict accepts them against the 1.30 and 1.37 schemas."""
    base = jobs_bake.project / "k8s" / "base"
    listed = yaml.safe_load((base / "kustomization.yaml").read_text(encoding="utf-8"))
    on_disk = sorted(p.name for p in base.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed["resources"]) == on_disk
    assert "worker.yaml" in on_disk
    web, worker = split_worker(jobs_bake.project, objects(jobs_bake.project, overlay))
    assert sorted(o["kind"] for o in worker) == [
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
    ]
    assert "HorizontalPodAutoscaler" in {o["kind"] for o in web}
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(render(jobs_bake.project / "k8s", overlay), encoding="utf-8")
    for version in KUBERNETES_VERSIONS:
        output = run(
            TOOLS / "kubernetes-validate", "--strict", "-k", version, rendered, cwd=tmp_path
        )
        assert output.count("passed") == len(web) + len(worker), output
        assert "fail" not in output.lower(), output


def test_checkov_finds_only_the_accepted_with_the_worker(jobs_bake: Bake) -> None:
    """checkov over every overlay of the jobs bake: the worker's objects too fail only checks
    CHECKOV_ACCEPTED lists (the same reasons hold: one image, one Secret)."""
    failed, passed, output = checkov((jobs_bake, "jobs"))
    unexpected = sorted(item for item in failed if item[0] not in CHECKOV_ACCEPTED)
    assert not unexpected, unexpected
    worker = f"Deployment.default.{jobs_bake.project.name}-worker"
    assert worker in {resource for _, resource in failed}, "checkov never saw the worker"
    assert passed > 200, output[-2000:]


# The worker breaks the web rules' accepted list but the ingress-only NetworkPolicy: its own
# restricts egress too.
WORKER_RULES_ACCEPTED = {k: v for k, v in RULES_ACCEPTED.items() if k != "pod-networkpolicy"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_worker_passes_kube_score_and_polaris_but_the_accepted(
    jobs_bake: Bake, overlay: str
) -> None:
    """The same rules, on the worker's objects alone (readiness differs from liveness, CPU
    requests equal limits...) and on the web's beside them, which the worker changes nothing
    for."""
    web, worker = split_worker(jobs_bake.project, objects(jobs_bake.project, overlay))
    assert kube_score_and_polaris(worker) == set(WORKER_RULES_ACCEPTED)
    accepted = {**RULES_ACCEPTED, **RULES_ACCEPTED_IN.get(overlay, {})}
    assert kube_score_and_polaris(web) == set(accepted)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_worker_runs_its_command_and_drains_within_its_grace_period(
    jobs_bake: Bake, overlay: str
) -> None:
    """The web pods' image with `python -m <package>.worker` in place of the stack's entrypoint;
    terminationGracePeriodSeconds = STOP_GRACE_PERIOD >= the drain + the abort margin (no
    preStop to eat into it); /livez and /metrics on the named port `health`, every interface;
    DATABASE_URL and the migrate init container exactly as the web pods'."""
    project = jobs_bake.project
    web, worker = split_worker(project, objects(project, overlay))
    pod, (container,) = pod_spec(worker), pod_spec(worker)["containers"]
    package = jobs_bake.package_name
    assert container["command"] == ["python", "-m", f"{package}.worker"]
    assert "args" not in container
    assert container["image"] == app_container(web)["image"]
    env, prefix = env_of(container), f"{package.upper()}_"
    default_drain = jobs_number(project, r"jobs_drain_seconds: float = Field\(default=([\d.]+)")
    drain = float(env.get(f"{prefix}JOBS_DRAIN_SECONDS", default_drain))
    margin = jobs_number(project, r"^JOBS_ABORT_MARGIN = ([\d.]+)$")
    grace = pod["terminationGracePeriodSeconds"]
    assert grace >= drain + margin
    assert float(env["STOP_GRACE_PERIOD"]) == grace
    assert "lifecycle" not in container, "no preStop: the grace period is the drain's"
    port = int(env[f"{prefix}JOBS_HEALTH_PORT"])
    assert env[f"{prefix}JOBS_HEALTH_HOST"] == "0.0.0.0"  # noqa: S104 - the pod's interfaces
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": port}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/livez", "port": "health"}, probe
    assert (
        container["livenessProbe"]["timeoutSeconds"] <= container["livenessProbe"]["periodSeconds"]
    )

    def database_url(each: dict[str, Any]) -> Any:
        (url,) = [item for item in each["env"] if item["name"] == "DATABASE_URL"]
        return url["valueFrom"]

    assert database_url(container) == database_url(app_container(web))
    assert pod["initContainers"] == pod_spec(web)["initContainers"]
    assert [init["name"] for init in pod["initContainers"]] == ["migrate"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert one(worker, "Deployment")["spec"]["replicas"] >= 2
    target = one(web, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"]
    assert (
        target
        == one(web, "Deployment")["metadata"]["name"]
        != one(worker, "Deployment")["metadata"]["name"]
    )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_web_and_worker_objects_select_only_their_own_pods(jobs_bake: Bake, overlay: str) -> None:
    """The web Deployment (whose selector the HPA scales), Service, PDB, NetworkPolicy and
    spread constraints select web pods and never a worker pod; the worker's Deployment, PDB,
    NetworkPolicy and spread constraints select worker pods and never a web pod."""
    web, worker = split_worker(jobs_bake.project, objects(jobs_bake.project, overlay))

    def selectors(found: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
        chosen = {
            "Deployment": one(found, "Deployment")["spec"]["selector"]["matchLabels"],
            "PodDisruptionBudget": one(found, "PodDisruptionBudget")["spec"]["selector"][
                "matchLabels"
            ],
            "NetworkPolicy": one(found, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
        }
        for spread in pod_spec(found)["topologySpreadConstraints"]:
            chosen[f"spread {spread['topologyKey']}"] = spread["labelSelector"]["matchLabels"]
        if any(o["kind"] == "Service" for o in found):
            chosen["Service"] = one(found, "Service")["spec"]["selector"]
        return chosen

    web_pods, worker_pods = pod_labels(web), pod_labels(worker)
    assert "Service" in selectors(web)
    for name, selector in selectors(web).items():
        assert _selects(selector, web_pods), f"web {name}"
        assert not _selects(selector, worker_pods), f"web {name} selects worker pods"
    for name, selector in selectors(worker).items():
        assert _selects(selector, worker_pods), f"worker {name}"
        assert not _selects(selector, web_pods), f"worker {name} selects web pods"


def test_the_worker_network_policy_admits_only_scrapes_and_reaches_its_dependencies(
    jobs_bake: Bake,
) -> None:
    """The worker's NetworkPolicy covers its pods, in and out: `health` only from where the
    web policy admits metrics scrapes (the monitoring namespace); out only DNS, PostgreSQL and
    HTTPS (the webhooks jobs call)."""
    web, worker = split_worker(jobs_bake.project, objects(jobs_bake.project, "base"))
    policy = one(worker, "NetworkPolicy")["spec"]
    assert _selects(policy["podSelector"]["matchLabels"], pod_labels(worker))
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    (scrapers,) = [
        rule["from"]
        for rule in one(web, "NetworkPolicy")["spec"]["ingress"]
        if [port["port"] for port in rule["ports"]] == ["metrics"]
    ]
    assert policy["ingress"] == [
        {"from": scrapers, "ports": [{"port": "health", "protocol": "TCP"}]}
    ]
    egress = {
        (port["port"], port["protocol"]) for rule in policy["egress"] for port in rule["ports"]
    }
    assert egress == {(53, "UDP"), (53, "TCP"), (5432, "TCP"), (443, "TCP")}


def test_the_podmonitor_example_scrapes_the_worker_on_health(jobs_bake: Bake) -> None:
    """k8s/examples/podmonitor.yaml: the web PodMonitor never selects a worker pod; a second
    one selects only worker pods, on their `health` port's /metrics."""
    project = jobs_bake.project
    web, worker = split_worker(project, objects(project, "base"))
    path = project / "k8s" / "examples" / "podmonitor.yaml"
    monitors = {
        doc["metadata"]["name"]: doc["spec"]
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
    }
    assert set(monitors) == {project.name, f"{project.name}-worker"}
    web_monitor, worker_monitor = monitors[project.name], monitors[f"{project.name}-worker"]
    assert not _selects(web_monitor["selector"]["matchLabels"], pod_labels(worker))
    assert _selects(worker_monitor["selector"]["matchLabels"], pod_labels(worker))
    assert not _selects(worker_monitor["selector"]["matchLabels"], pod_labels(web))
    assert [(e["port"], e["path"]) for e in worker_monitor["podMetricsEndpoints"]] == [
        ("health", "/metrics")
    ]

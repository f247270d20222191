"""The Helm chart (deploy/helm/agui-a2a-gateway), without a cluster: `helm lint --strict`, the
rendered objects of every values file in tests/helm/values/ against the Kubernetes API schemas
of the oldest and newest minor the chart supports, golden files, the behaviour of its values,
and its agreement with the compose example (deploy/compose.yaml, deploy/gateway.yaml).
Run by scripts/test: tests/helm/.venv/bin/python -m pytest tests/helm
The rendered pod itself is run by tests/e2e/helm.rs."""

from __future__ import annotations

import base64
import copy
import math
import re
from pathlib import Path

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

import render as r

# Chart.yaml's kubeVersion (>=1.30.0-0) and the newest schemas kubernetes-validate has.
KUBE_VERSIONS = ["1.30.0", "1.37.0"]
# Objects of CRDs: no core schema; checked field by field below instead.
CRD_KINDS = {"ServiceMonitor", "PodMonitor", "HTTPRoute"}
VALUES = r.values_files()
IDS = [v.stem for v in VALUES]
SECRETS_DIR = "/etc/agui-a2a-gateway/secrets"


def rendered(values: dict | None = None) -> list[dict]:
    return r.objects(r.render(values or {}))


def by_kind(objs: list[dict], kind: str) -> list[dict]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict], kind: str, name_suffix: str = "") -> dict:
    found = [o for o in by_kind(objs, kind) if o["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{len(found)} {kind} objects named *{name_suffix}"
    return found[0]


def gateway(objs: list[dict]) -> dict:
    return one(objs, "Deployment", "agui-a2a-gateway")


def container(objs: list[dict]) -> dict:
    return gateway(objs)["spec"]["template"]["spec"]["containers"][0]


def config(objs: list[dict]) -> dict:
    return yaml.safe_load(one(objs, "ConfigMap")["data"]["gateway.yaml"])


def render_error(values: dict) -> str:
    with pytest.raises(helm.HelmError) as e:
        r.render(values)
    return str(e.value)


def test_the_matrix_is_there():
    assert IDS == sorted(["defaults", "ha", "managed-redis", "ingress-sse", "gateway-api",
                          "monitoring", "networkpolicy"])


def test_chart_yaml_names_the_supported_versions():
    chart = yaml.safe_load((r.CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={KUBE_VERSIONS[0]}-0"
    cargo = (r.ROOT / "Cargo.toml").read_text()
    assert chart["appVersion"] == re.search(r'(?m)^version = "(.*)"', cargo).group(1)


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_lint_strict(values, kube):
    report = helm.lint(r.CHART, r.load_values(values), strict=True, kube_version=f"v{kube}")
    # Severity 2 = warning, 3 = error; --strict fails on both. Info (an icon) is fine.
    bad = [m for m in report["messages"] if m["severity"] >= 2]
    assert not bad and not report["errors"], (bad, report["errors"])


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_golden(values):
    golden = r.GOLDEN / values.name
    assert golden.exists(), f"no {golden}: run scripts/helm-golden --update"
    assert golden.read_text() == r.golden_text(r.render(r.load_values(values))), (
        f"{golden} differs from the chart's render: if the change is intended, run "
        "scripts/helm-golden --update and review the diff")


@pytest.mark.parametrize("kube", KUBE_VERSIONS)
@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_objects_validate_against_the_api_schemas(values, kube):
    unvalidated = set()
    for obj in rendered(r.load_values(values)):
        try:
            kubernetes_validate.validate(obj, kube, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unvalidated.add(obj["kind"])
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} against {kube}: "
                        f"{'.'.join(map(str, e.path))}: {e.message}")
    # Only CRD objects may go without a schema.
    assert unvalidated <= CRD_KINDS, unvalidated


def test_the_validator_catches_a_wrong_field():
    obj = copy.deepcopy(gateway(rendered()))
    obj["spec"]["template"]["spec"]["containers"][0]["securityContext"]["runAsUsr"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(obj, KUBE_VERSIONS[0], strict=True)


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_pod_is_locked_down(values):
    objs = rendered(r.load_values(values))
    pod = gateway(objs)["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = c["securityContext"]
    assert sc["runAsUser"] == 10001 and sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    for sa in by_kind(objs, "ServiceAccount"):
        assert sa["automountServiceAccountToken"] is False


@pytest.mark.parametrize("values", VALUES, ids=IDS)
def test_probes_listen_and_grace(values):
    v = r.load_values(values)
    objs = rendered(v)
    c = container(objs)
    assert {"name": "GATEWAY_LISTEN", "value": "0.0.0.0:8080"} in c["env"]
    assert c["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert c["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    drain_ms = v.get("config", {}).get("timeouts", {}).get("shutdown_drain", 20000)
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert c["lifecycle"]["preStop"]["exec"]["command"][0] == "/bin/sleep"
    grace = gateway(objs)["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace == math.ceil(drain_ms / 1000) + sleep + 5
    assert grace > sleep + drain_ms / 1000


def test_grace_follows_the_drain():
    c = {"timeouts": {"shutdown_drain": 61500}}
    pod = gateway(rendered({"config": c, "lifecycle": {"preStopSleepSeconds": 3}}))
    assert pod["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 62 + 3 + 5


def test_config_change_rolls_the_pods():
    def annotations(values):
        return gateway(rendered(values))["spec"]["template"]["metadata"]["annotations"]
    base = annotations({})
    changed = annotations({"config": {"cors_origins": ["https://app.example"]}})
    assert base["checksum/config"] != changed["checksum/config"]
    assert base["checksum/secrets"] == changed["checksum/secrets"]
    assert annotations({"secrets": {"a": "1"}})["checksum/secrets"] != base["checksum/secrets"]
    assert annotations({})["checksum/config"] == base["checksum/config"]


def test_default_install_is_the_demo_behind_a_generated_key():
    objs = rendered()
    c = container(objs)
    assert c["args"] == ["--config", "/etc/agui-a2a-gateway/config/gateway.yaml",
                         "--log-format", "json", "--demo"]
    assert c["image"] == f"agui-a2a-gateway:{yaml.safe_load((r.CHART / 'Chart.yaml').read_text())['appVersion']}"
    cfg = config(objs)
    assert cfg["auth"]["api_keys"] == [{"name": "console", "key": f"file:{SECRETS_DIR}/api-key"}]
    assert "insecure_no_auth" not in cfg and "listen" not in cfg
    secret = one(objs, "Secret", "-api-key")
    key = base64.b64decode(secret["data"]["api-key"]).decode()
    assert re.fullmatch(r"[A-Za-z0-9]{48}", key)
    assert key != base64.b64decode(one(rendered(), "Secret", "-api-key")["data"]["api-key"]).decode()
    vol = {v["name"]: v for v in gateway(objs)["spec"]["template"]["spec"]["volumes"]}
    assert vol["secrets"]["projected"]["sources"] == [
        {"secret": {"name": secret["metadata"]["name"],
                    "items": [{"key": "api-key", "path": "api-key"}]}}]
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == ["ConfigMap", "Deployment", "PodDisruptionBudget", "Secret", "Service",
                     "ServiceAccount"]


def test_no_inbound_auth_only_when_asked():
    msg = render_error({"apiKey": {"generate": False}})
    assert "no inbound auth" in msg and "insecure_no_auth" in msg
    objs = rendered({"apiKey": {"generate": False}, "config": {"insecure_no_auth": True}})
    assert config(objs)["insecure_no_auth"] is True
    assert not by_kind(objs, "Secret")
    assert "secrets" not in {v["name"] for v in gateway(objs)["spec"]["template"]["spec"]["volumes"]}
    jwt = {"issuer": "https://issuer.example", "audience": "agui-a2a-gateway",
           "jwks_file": f"{SECRETS_DIR}/jwks.json"}
    objs = rendered({"apiKey": {"generate": False}, "config": {"auth": {"jwt": jwt}}})
    assert config(objs)["auth"] == {"jwt": jwt}


def test_values_that_cannot_work_are_refused():
    assert "not both" in render_error({"existingSecret": "s", "secrets": {"a": "b"}})
    assert "taken" in render_error({"secrets": {"api-key": "x" * 20}})
    assert "GATEWAY_LISTEN" in render_error({"config": {"listen": "0.0.0.0:9000"}})


def test_secrets_are_files_never_in_the_configmap():
    v = r.load_values(r.VALUES / "managed-redis.yaml")
    objs = rendered(v)
    cm = one(objs, "ConfigMap")["data"]["gateway.yaml"]
    for name, value in v["secrets"].items():
        assert str(value).strip() not in cm
        assert f"{SECRETS_DIR}/{name}" in cm
    secret = one(objs, "Secret", "agui-a2a-gateway")
    assert {k: base64.b64decode(d).decode() for k, d in secret["data"].items()} == v["secrets"]
    assert config(objs)["binding_store"] == v["config"]["binding_store"]
    sources = gateway(objs)["spec"]["template"]["spec"]["volumes"][1]["projected"]["sources"]
    assert sources[0] == {"secret": {"name": secret["metadata"]["name"]}}
    # existingSecret: mounted instead, nothing rendered.
    objs = rendered({"existingSecret": "redis-creds"})
    assert [s["metadata"]["name"] for s in by_kind(objs, "Secret")] == ["gw-agui-a2a-gateway-api-key"]
    sources = gateway(objs)["spec"]["template"]["spec"]["volumes"][1]["projected"]["sources"]
    assert sources[0] == {"secret": {"name": "redis-creds"}}


def test_ha():
    objs = rendered(r.load_values(r.VALUES / "ha.yaml"))
    assert "replicas" not in gateway(objs)["spec"]
    hpa = one(objs, "HorizontalPodAutoscaler")["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 12)
    assert hpa["metrics"][0]["resource"]["target"]["averageUtilization"] == 60
    assert one(objs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    spread = gateway(objs)["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert [s["topologyKey"] for s in spread] == ["kubernetes.io/hostname", "topology.kubernetes.io/zone"]
    selector = gateway(objs)["spec"]["selector"]
    assert all(s["labelSelector"] == selector for s in spread)


def test_pdb_only_with_more_than_one_replica():
    assert not by_kind(rendered({"replicaCount": 1}), "PodDisruptionBudget")
    assert by_kind(rendered({"replicaCount": 2}), "PodDisruptionBudget")
    hpa1 = {"replicaCount": 3, "autoscaling": {"enabled": True, "minReplicas": 1}}
    assert not by_kind(rendered(hpa1), "PodDisruptionBudget")
    assert not by_kind(rendered({"podDisruptionBudget": {"enabled": False}}), "PodDisruptionBudget")


def test_ingress_for_sse():
    objs = rendered(r.load_values(r.VALUES / "ingress-sse.yaml"))
    ing = one(objs, "Ingress")
    a = ing["metadata"]["annotations"]
    assert a["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    # timeouts.run 7200000 ms: longer than the run.
    assert a["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "7260"
    assert a["nginx.ingress.kubernetes.io/proxy-send-timeout"] == "7260"
    assert a["cert-manager.io/cluster-issuer"] == "letsencrypt"
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert ing["spec"]["tls"] == [{"hosts": ["gateway.example"], "secretName": "gateway-tls"}]
    path = ing["spec"]["rules"][0]["http"]["paths"][0]
    assert path["backend"]["service"]["port"] == {"name": "http"}
    # Your annotation wins; other classes get none of nginx's.
    mine = {"ingress": {"enabled": True, "className": "nginx",
                        "annotations": {"nginx.ingress.kubernetes.io/proxy-read-timeout": "99999"}}}
    a = one(rendered(mine), "Ingress")["metadata"]["annotations"]
    assert a["nginx.ingress.kubernetes.io/proxy-read-timeout"] == "99999"
    other = one(rendered({"ingress": {"enabled": True, "className": "traefik"}}), "Ingress")
    assert "annotations" not in other["metadata"]


def test_gateway_api_route_outlasts_a_run():
    objs = rendered(r.load_values(r.VALUES / "gateway-api.yaml"))
    route = one(objs, "HTTPRoute")
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"][0]["name"] == "shared-gateway"
    assert route["spec"]["hostnames"] == ["gateway.example"]
    rule = route["spec"]["rules"][0]
    # timeouts.run default 3600000 ms + 60 s, in the Gateway API's duration syntax.
    assert rule["timeouts"] == {"request": "1h1m0s", "backendRequest": "1h1m0s"}
    assert all(re.fullmatch(r"([0-9]{1,5}(h|m|s|ms)){1,4}", t) for t in rule["timeouts"].values())
    assert rule["backendRefs"] == [{"name": "gw-agui-a2a-gateway", "port": 8080}]


def test_monitoring_only_when_asked_and_with_the_key():
    assert not by_kind(rendered(), "ServiceMonitor") and not by_kind(rendered(), "PodMonitor")
    objs = rendered(r.load_values(r.VALUES / "monitoring.yaml"))
    key = {"type": "Bearer", "credentials": {"name": "gw-agui-a2a-gateway-api-key", "key": "api-key"}}
    sm = one(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert sm["spec"]["selector"]["matchLabels"] == gateway(objs)["spec"]["selector"]["matchLabels"]
    assert sm["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s",
                                        "authorization": key}]
    pm = one(objs, "PodMonitor")
    assert pm["spec"]["podMetricsEndpoints"] == [{"port": "http", "path": "/metrics",
                                                  "interval": "15s", "authorization": key}]
    public = rendered({"serviceMonitor": {"enabled": True}, "config": {"metrics_public": True}})
    assert "authorization" not in one(public, "ServiceMonitor")["spec"]["endpoints"][0]


def test_network_policy():
    assert not by_kind(rendered(), "NetworkPolicy")
    objs = rendered(r.load_values(r.VALUES / "networkpolicy.yaml"))
    np = one(objs, "NetworkPolicy")["spec"]
    assert np["policyTypes"] == ["Ingress", "Egress"]
    peers = np["ingress"][0]["from"]
    assert {"podSelector": {}} in peers
    names = [p["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
             for p in peers if "namespaceSelector" in p]
    assert names == ["ingress-nginx", "monitoring"]
    egress_ports = [[p["port"] for p in e["ports"]] for e in np["egress"]]
    assert egress_ports == [[53, 53], [6379], [443]]
    redis = one(objs, "Deployment", "-redis")
    assert np["egress"][1]["to"][0]["podSelector"]["matchLabels"] == redis["spec"]["selector"]["matchLabels"]
    assert config(objs)["binding_store"] == "redis://gw-agui-a2a-gateway-redis:6379/0"


def test_bundled_redis_is_off_by_default_and_never_replaces_a_configured_store():
    assert not by_kind(rendered(), "Service")[1:]
    objs = rendered({"redis": {"bundled": {"enabled": True}},
                     "config": {"binding_store": "redis://managed:6379/0"}})
    assert config(objs)["binding_store"] == "redis://managed:6379/0"


# The keys docs/design.md §13 names, each present in values.yaml.
DESIGN_KEYS = """replicaCount image.repository image.tag image.pullPolicy imagePullSecrets config
existingSecret secrets resources podSecurityContext securityContext
podDisruptionBudget.enabled podDisruptionBudget.maxUnavailable autoscaling.enabled
autoscaling.minReplicas autoscaling.maxReplicas autoscaling.targetCPUUtilizationPercentage
topologySpreadConstraints serviceMonitor.enabled podMonitor.enabled networkPolicy.enabled
ingress.enabled ingress.className ingress.hosts ingress.tls ingress.annotations httpRoute.enabled
httpRoute.parentRefs httpRoute.hostnames service.type service.port redis.bundled.enabled""".split()


def test_values_have_the_design_keys_and_defaults():
    values = yaml.safe_load((r.CHART / "values.yaml").read_text())
    for key in DESIGN_KEYS:
        node = values
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"values.yaml has no {key}"
            node = node[part]
    assert values["replicaCount"] == 2
    assert values["redis"]["bundled"]["enabled"] is False
    for opt_in in ("autoscaling", "serviceMonitor", "podMonitor", "networkPolicy", "ingress", "httpRoute"):
        assert values[opt_in]["enabled"] is False, opt_in
    assert values["ingress"]["hosts"][0]["paths"][0].keys() == {"path", "pathType"}


# --- the compose example and the chart configure the same gateway ---------------------------

def leaves(node, prefix=""):
    if isinstance(node, dict) and node:
        for k, v in node.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix, node


# Where deploy/gateway.yaml and the chart's default config differ, and why. Every other key
# must be equal; each of these must still differ (a stale entry fails too).
COMPOSE_DIFFERENCES = {
    # compose: the TLS Redis service of compose.yaml; the chart: memory unless you set it
    # (README.md: a managed Redis), as the demo agent is per pod anyway.
    "binding_store": "compose shares its Redis service; the chart defaults to memory",
    # compose: the shared upstream service; the chart: --demo (per pod), agents: [].
    "agents": "compose calls its upstream service; the chart runs the demo agent",
    # The same key name (console), read from the environment in compose, from the mounted
    # Secret in the chart.
    "auth.api_keys": "the key is env:GATEWAY_API_KEY in compose, the Secret's file in the chart",
}


def test_compose_and_chart_configure_the_same_gateway():
    compose_cfg = yaml.safe_load((r.ROOT / "deploy/gateway.yaml").read_text())
    chart_objs = rendered()
    chart_cfg = config(chart_objs)
    def same(cfg):
        return {p: v for p, v in leaves(cfg)
                if not any(p == k or p.startswith(k + ".") for k in COMPOSE_DIFFERENCES)}
    a, b = same(compose_cfg), same(chart_cfg)
    assert a == b, "deploy/gateway.yaml and the chart's default config differ outside COMPOSE_DIFFERENCES"
    for key in COMPOSE_DIFFERENCES:
        node_a, node_b = compose_cfg, chart_cfg
        for part in key.split("."):
            node_a = (node_a or {}).get(part) if isinstance(node_a, dict) else None
            node_b = (node_b or {}).get(part) if isinstance(node_b, dict) else None
        assert node_a != node_b, f"{key} no longer differs: drop it from COMPOSE_DIFFERENCES"
    assert [k["name"] for k in compose_cfg["auth"]["api_keys"]] == \
        [k["name"] for k in chart_cfg["auth"]["api_keys"]]

    compose = yaml.safe_load((r.ROOT / "deploy/compose.yaml").read_text())
    gw = compose["services"]["gateway-1"]
    c = container(chart_objs)
    pod = gateway(chart_objs)["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in c["env"]}
    assert gw["environment"]["GATEWAY_LISTEN"] == env["GATEWAY_LISTEN"]
    assert gw["read_only"] is True and c["securityContext"]["readOnlyRootFilesystem"] is True
    assert gw["cap_drop"] == ["ALL"] == c["securityContext"]["capabilities"]["drop"]
    assert "no-new-privileges:true" in gw["security_opt"]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert re.search(r"(?m)^USER 10001:10001$", (r.ROOT / "Dockerfile").read_text())
    # Both stop after the same drain, with time to spare after it.
    drain = chart_cfg["timeouts"]["shutdown_drain"] / 1000
    assert compose_cfg["timeouts"]["shutdown_drain"] / 1000 == drain
    compose_grace = int(gw["stop_grace_period"].rstrip("s"))
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert compose_grace >= drain + 5
    assert pod["terminationGracePeriodSeconds"] - sleep >= drain + 5
    assert gw["healthcheck"]["test"] == ["CMD", "agui-a2a-gateway", "--healthcheck"]  # GET /healthz

"""The Kubernetes manifests, rendered by `kubectl kustomize` and validated against the Kubernetes schemas; the
Dockerfile's shape. (No image is built here: this machine has no Docker daemon.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from argwatch.server.policy.loader import parse_policy
from argwatch.server.process.settings import settings_from

# make test installs it (the lock has every extra); a quicker setup without argwatch[k8s] skips, saying so.
kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="kubernetes-validate is in the k8s extra: pip install -e '.[k8s]'"
)

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
KUSTOMIZE_DIR = os.path.join(ROOT, "deploy", "kubernetes")
KUBERNETES_VERSION = "1.30.0"  # the oldest release the manifests promise to work on (gRPC probes are GA from 1.27)


@pytest.fixture(scope="module")
def rendered() -> dict[str, dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: `make test` installs it (Debian: apt-get install kubernetes-client)"
    out = subprocess.run(
        [kubectl, "kustomize", KUSTOMIZE_DIR], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    documents = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    return {doc["kind"]: doc for doc in documents}


def test_every_rendered_resource_is_valid_for_kubernetes(rendered: dict[str, dict[str, Any]]) -> None:
    assert set(rendered) == {"ConfigMap", "Service", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget"}
    for kind, document in rendered.items():
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            raise AssertionError(f"{kind}: {error}") from None


def test_the_deployment_drains_probes_and_asks_for_resources(rendered: dict[str, dict[str, Any]]) -> None:
    pod = rendered["Deployment"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == 50051, probe  # the native gRPC probe on grpc.health.v1
    grace = next(int(arg.split("=")[1]) for arg in container["args"] if arg.startswith("--grace-seconds="))
    pause = int(container["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > grace + pause
    assert container["resources"]["requests"]["cpu"] and container["resources"]["requests"]["memory"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    redis = next(env for env in container["env"] if env["name"] == "ARGWATCH_REDIS")
    assert redis["valueFrom"]["secretKeyRef"] == {"name": "argwatch-redis", "key": "url"}
    annotations = rendered["Deployment"]["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true" and annotations["prometheus.io/port"] == "9464"
    assert rendered["PodDisruptionBudget"]["spec"]["minAvailable"] < rendered["Deployment"]["spec"]["replicas"]
    assert rendered["HorizontalPodAutoscaler"]["spec"]["minReplicas"] >= 2


def test_the_container_arguments_are_settings_the_gateway_accepts(rendered: dict[str, dict[str, Any]]) -> None:
    import argparse

    from argwatch.server.process.settings import add_serve_arguments

    (container,) = rendered["Deployment"]["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    settings = settings_from(parser.parse_args(container["args"]), {"ARGWATCH_REDIS": "redis://redis:6379/0"})
    assert settings.admin_listen.startswith("127.0.0.1:")  # the Admin API stays inside the pod
    assert settings.policy == "/etc/argwatch/policy.yaml"


def test_the_policy_in_the_configmap_loads(rendered: dict[str, dict[str, Any]]) -> None:
    policy = parse_policy(rendered["ConfigMap"]["data"]["policy.yaml"].encode(), "configmap:policy.yaml")
    assert policy.tools and policy.value_sets
    volume = rendered["Deployment"]["spec"]["template"]["spec"]["volumes"][0]
    assert volume["configMap"]["name"] == rendered["ConfigMap"]["metadata"]["name"]  # the hashed name, rewritten


def test_the_dockerfile_builds_in_two_stages_and_runs_unprivileged() -> None:
    with open(os.path.join(ROOT, "deploy", "Dockerfile")) as handle:
        text = handle.read()
    stages = re.findall(r"^FROM\s+(\S+)(?:\s+AS\s+(\w+))?", text, re.MULTILINE)
    assert len(stages) == 2 and stages[0][1] == "build"
    final = text[text.rindex("\nFROM") :]
    user = re.search(r"^USER\s+(\S+)", final, re.MULTILINE)
    assert user is not None and user.group(1).split(":")[0] not in ("0", "root")
    assert "--from=build" in final
    for source in re.findall(r"^COPY\s+(?!--)(.+?)\s+\S+$", text, re.MULTILINE):
        for path in source.split():
            assert os.path.exists(os.path.join(ROOT, path)), f"COPY {path}: not in the repository"
    assert "pb2" not in text  # stubs are generated by the build, never copied

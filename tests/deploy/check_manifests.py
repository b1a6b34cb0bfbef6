#!/usr/bin/env python3
"""Structural checks of tandem's deployment files (deploy/), on Debian's python3-yaml alone.

kustomize is not a Debian package, so this renders our kustomizations itself: `resources`
(files and directories), `components`, `patches` (strategic merge by kind and name, lists of
named items merged by name, `$patch: delete`), `images` and `namespace`. Any other
kustomization field is an error here rather than silently ignored. Then, on every rendering
(overlays/cpu, overlays/gpu, the base with each component, overlays/cpu with inference-pool):

- every kustomization's resources, components and patches exist;
- Deployment selectors match their pod labels; Service, PodDisruptionBudget, ServiceMonitor,
  PodMonitor and InferencePool selectors match pods (or a Service) of the rendering;
- the ports that probes, Services, monitors, the InferencePool and the EPP name exist on the
  containers (by name or number), and tandem's containerPorts equal its configured ports;
- every flag tandem gets (ConfigMap serve.conf lines, args, TANDEM_* variables) is a flag of
  `<tandem> serve --help`;
- terminationGracePeriodSeconds > --grace-seconds + the preStop sleep;
- HPA/ScaledObject targets exist;
- the PrometheusRule's spec.groups equal deploy/prometheus/tandem-rules.yaml
  (`--sync-rules` rewrites the PrometheusRule from that file);
- the custom resources (ServiceMonitor, PodMonitor, PrometheusRule, ScaledObject, InferencePool,
  HTTPRoute) match the schemas of tests/deploy/crd_schemas.py (python3-jsonschema);
- every metric named by the rules, the dashboard, the HPA, KEDA, the adapter rules and the EPP
  flags is documented in docs/METRICS.md.

`--render-dir DIR` writes each rendering as one multi-document YAML file (for
kubernetes-validate). Prints one line per check and `N passed, N failed`; exits 1 on a failure.
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("FAIL: needs Debian's python3-yaml (scripts/setup.sh installs it)")
    sys.exit(1)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUBE = os.path.join(ROOT, "deploy", "kubernetes")
RULES = os.path.join(ROOT, "deploy", "prometheus", "tandem-rules.yaml")
PROMETHEUS_RULE = os.path.join(KUBE, "base", "prometheusrule.yaml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "tandem.json")
ADAPTER_RULES = os.path.join(ROOT, "deploy", "prometheus", "adapter-rules.yaml")
METRICS_DOC = os.path.join(ROOT, "docs", "METRICS.md")
ENVOY = os.path.join(ROOT, "deploy", "proxy", "envoy.yaml")
HAPROXY = os.path.join(ROOT, "deploy", "proxy", "haproxy.cfg")

# What we render, and what each rendering must contain.
RENDERINGS = {
    "overlays-cpu": {"resources": ["overlays/cpu"]},
    "overlays-gpu": {"resources": ["overlays/gpu"]},
    "base+keda": {"resources": ["base"], "components": ["components/keda"]},
    "base+podmonitor": {"resources": ["base"], "components": ["components/podmonitor"]},
    "overlays-cpu+inference-pool": {"resources": ["overlays/cpu", "inference-pool"]},
}

CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
                  "PersistentVolume", "StorageClass", "PriorityClass"}
PROMQL_METRIC = re.compile(r"\b(tandem[_:][a-zA-Z0-9_:]*|up)\b(?!\s*\()")
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


class Checks:

    def __init__(self):
        self.failures = []
        self.passed = 0

    def check(self, condition, what, why=""):
        if condition:
            self.passed += 1
            print(f"ok      {what}")
        else:
            self.failures.append(f"{what}: {why}" if why else what)
            print(f"FAIL    {what}{': ' + why if why else ''}")
        return condition

    def note(self, text):
        print(f"note    {text}")


class RenderError(Exception):
    pass


# --- a small kustomize ---------------------------------------------------------------------

def load_docs(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def key_of(doc):
    return (doc.get("kind"), doc.get("metadata", {}).get("name"))


def merge(base, patch):
    """Strategic merge as far as our patches need it."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list) and
            all(isinstance(i, dict) and "name" in i for i in base + patch)):
        out = [copy.deepcopy(i) for i in base]
        for item in patch:
            for n, existing in enumerate(out):
                if existing["name"] == item["name"]:
                    out[n] = merge(existing, item)
                    break
            else:
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def apply_patches(docs, patches, directory):
    for entry in patches:
        if set(entry) - {"path", "patch"}:
            raise RenderError(f"{directory}: patch fields {sorted(entry)} are not supported")
        if "path" in entry:
            path = os.path.join(directory, entry["path"])
            if not os.path.isfile(path):
                raise RenderError(f"{directory}: patch {entry['path']} does not exist")
            patch_docs = load_docs(path)
        else:
            patch_docs = [yaml.safe_load(entry["patch"])]
        for patch in patch_docs:
            targets = [i for i, d in enumerate(docs) if key_of(d) == key_of(patch)]
            if not targets:
                raise RenderError(f"{directory}: patch for {key_of(patch)} matches nothing")
            for i in targets:
                if patch.get("$patch") == "delete":
                    docs[i] = None
                else:
                    docs[i] = merge(docs[i], patch)
        docs[:] = [d for d in docs if d is not None]


def pod_spec(doc):
    if doc.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
        return doc.get("spec", {}).get("template", {}).get("spec", {})
    return None


def render(directory, extra=None):
    """The objects of the kustomization in `directory` (or of `extra`, a virtual one there)."""
    if extra is None:
        path = os.path.join(directory, "kustomization.yaml")
        if not os.path.isfile(path):
            raise RenderError(f"{directory} has no kustomization.yaml")
        with open(path, encoding="utf-8") as f:
            kustomization = yaml.safe_load(f)
    else:
        kustomization = extra
    supported = {"apiVersion", "kind", "resources", "components", "patches", "images",
                 "namespace"}
    unsupported = set(kustomization) - supported
    if unsupported:
        raise RenderError(f"{directory}: kustomization fields {sorted(unsupported)} are not "
                          "supported by tests/deploy/check_manifests.py")
    docs = []
    for resource in kustomization.get("resources", []):
        path = os.path.normpath(os.path.join(directory, resource))
        if os.path.isdir(path):
            docs += render(path)
        elif os.path.isfile(path):
            docs += load_docs(path)
        else:
            raise RenderError(f"{directory}: resource {resource} does not exist")
    for component in kustomization.get("components", []):
        path = os.path.normpath(os.path.join(directory, component))
        kfile = os.path.join(path, "kustomization.yaml")
        if not os.path.isfile(kfile):
            raise RenderError(f"{directory}: component {component} does not exist")
        with open(kfile, encoding="utf-8") as f:
            comp = yaml.safe_load(f)
        if comp.get("kind") != "Component":
            raise RenderError(f"{component} is not kind: Component")
        for resource in comp.get("resources", []):
            rpath = os.path.join(path, resource)
            if not os.path.isfile(rpath):
                raise RenderError(f"{component}: resource {resource} does not exist")
            docs += load_docs(rpath)
        apply_patches(docs, comp.get("patches", []), path)
    apply_patches(docs, kustomization.get("patches", []), directory)
    for image in kustomization.get("images", []):
        for doc in docs:
            spec = pod_spec(doc)
            for container in (spec or {}).get("containers", []) + (spec or {}).get(
                    "initContainers", []):
                name, _, tag = container["image"].partition(":")
                if name == image["name"]:
                    container["image"] = (f"{image.get('newName', name)}:"
                                          f"{image.get('newTag', tag or 'latest')}")
    if "namespace" in kustomization:
        for doc in docs:
            if doc.get("kind") not in CLUSTER_SCOPED:
                doc.setdefault("metadata", {})["namespace"] = kustomization["namespace"]
    return docs


# --- helpers -----------------------------------------------------------------------------

def labels_match(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pods(docs):
    """(workload, pod labels, pod spec) of every workload."""
    for doc in docs:
        spec = pod_spec(doc)
        if spec is not None:
            labels = doc["spec"].get("template", {}).get("metadata", {}).get("labels", {})
            yield doc, labels, spec


def container_ports(spec):
    ports = {}
    for container in spec.get("containers", []):
        for port in container.get("ports", []):
            ports[port.get("name")] = port["containerPort"]
            ports[port["containerPort"]] = port["containerPort"]
    return ports


def name(doc):
    return f"{doc['kind']}/{doc['metadata']['name']}"


def serve_flags(tandem):
    help_text = subprocess.run([tandem, "serve", "--help"], capture_output=True, text=True,
                               timeout=60, check=False)
    text = help_text.stdout + help_text.stderr
    flags = set(re.findall(r"^\s+--([a-z0-9-]+)", text, re.M))
    defaults = {m.group(1): m.group(2) for m in
                re.finditer(r"^\s+--([a-z0-9-]+).*\((?:default )?(\d+)\)\s*$", text, re.M)}
    return flags, defaults


def read_serve_conf(text):
    entries = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        flag, sep, value = line.partition("=")
        if not sep:
            raise ValueError(f"serve.conf:{number}: not `flag = value`: {line!r}")
        entries[flag.strip()] = value.strip().strip('"')
    return entries


def tandem_containers(docs):
    for doc, labels, spec in pods(docs):
        for container in spec.get("containers", []):
            if (container.get("command") or [""])[0] == "tandem":
                yield doc, labels, spec, container


def documented_metrics():
    with open(METRICS_DOC, encoding="utf-8") as f:
        return set(re.findall(r"^\|\s*`(tandem_[a-z0-9_]+)`", f.read(), re.M))


# --- the checks -------------------------------------------------------------------------

def check_kustomizations(checks):
    """Every kustomization under deploy/kubernetes renders, alone or (a component) on base."""
    for directory, _, files in sorted(os.walk(KUBE)):
        if "kustomization.yaml" not in files:
            continue
        rel = os.path.relpath(directory, KUBE)
        with open(os.path.join(directory, "kustomization.yaml"), encoding="utf-8") as f:
            kind = yaml.safe_load(f).get("kind")
        try:
            if kind == "Component":
                render(KUBE, {"resources": ["base"], "components": [rel]})
            else:
                render(directory)
            checks.check(True, f"kustomization {rel} renders (its files exist)")
        except (RenderError, OSError, yaml.YAMLError) as error:
            checks.check(False, f"kustomization {rel} renders", str(error))
        covered = any(rel in r.get("resources", []) + r.get("components", [])
                      for r in RENDERINGS.values()) or rel == "base"
        checks.check(covered, f"kustomization {rel} is in a checked rendering",
                     "add it to RENDERINGS in tests/deploy/check_manifests.py")


def check_selectors_and_ports(checks, label, docs):
    services = [d for d in docs if d["kind"] == "Service"]
    for doc, labels, spec in pods(docs):
        selector = doc["spec"].get("selector", {}).get("matchLabels", {})
        checks.check(labels_match(selector, labels),
                     f"[{label}] {name(doc)} selector matches its pod labels",
                     f"{selector} vs {labels}")
        ports = container_ports(spec)
        for container in spec.get("containers", []):
            for probe_name in ("startupProbe", "readinessProbe", "livenessProbe"):
                probe = container.get(probe_name)
                if not probe:
                    continue
                for kind in ("grpc", "httpGet", "tcpSocket"):
                    if kind in probe:
                        port = probe[kind]["port"]
                        checks.check(port in ports,
                                     f"[{label}] {name(doc)} {container['name']} {probe_name} "
                                     f"port {port} is a containerPort",
                                     f"ports: {sorted(map(str, ports))}")
    for service in services:
        selector = service["spec"].get("selector", {})
        matched = [(d, s) for d, l, s in pods(docs) if labels_match(selector, l)]
        if not checks.check(matched, f"[{label}] {name(service)} selects pods",
                            f"selector {selector} matches no pod template"):
            continue
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            for workload, spec in matched:
                checks.check(target in container_ports(spec),
                             f"[{label}] {name(service)} port {port.get('name')} targets "
                             f"{target} of {name(workload)}",
                             "no such containerPort")
    for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
        selector = monitor["spec"]["selector"].get("matchLabels", {})
        matched = [s for s in services if labels_match(selector, s["metadata"].get("labels", {}))]
        if not checks.check(matched, f"[{label}] {name(monitor)} selects a Service",
                            f"{selector}"):
            continue
        for endpoint in monitor["spec"]["endpoints"]:
            for service in matched:
                names = [p.get("name") for p in service["spec"]["ports"]]
                checks.check(endpoint.get("port") in names,
                             f"[{label}] {name(monitor)} endpoint port {endpoint.get('port')} "
                             f"is a port name of {name(service)}", f"names: {names}")
    for monitor in (d for d in docs if d["kind"] == "PodMonitor"):
        selector = monitor["spec"]["selector"].get("matchLabels", {})
        matched = [(d, s) for d, l, s in pods(docs) if labels_match(selector, l)]
        if not checks.check(matched, f"[{label}] {name(monitor)} selects pods", f"{selector}"):
            continue
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            for workload, spec in matched:
                checks.check(endpoint.get("port") in container_ports(spec),
                             f"[{label}] {name(monitor)} port {endpoint.get('port')} is a "
                             f"containerPort name of {name(workload)}")
    for pdb in (d for d in docs if d["kind"] == "PodDisruptionBudget"):
        selector = pdb["spec"]["selector"].get("matchLabels", {})
        checks.check(any(labels_match(selector, l) for _, l, _ in pods(docs)),
                     f"[{label}] {name(pdb)} selects pods", f"{selector}")
    for scaler in (d for d in docs if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")):
        ref = scaler["spec"]["scaleTargetRef"]
        checks.check(any(d["kind"] == ref.get("kind", "Deployment") and
                         d["metadata"]["name"] == ref["name"] for d in docs),
                     f"[{label}] {name(scaler)} targets {ref.get('kind', 'Deployment')}/"
                     f"{ref['name']}", "no such object in the rendering")
    hpas = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    scaled = [d for d in docs if d["kind"] == "ScaledObject"]
    checks.check(len(hpas) + len(scaled) <= 1,
                 f"[{label}] at most one autoscaler for the Deployment",
                 "KEDA's ScaledObject makes its own HPA: the base HPA must go")


def check_tandem(checks, label, docs, flags, defaults):
    containers = list(tandem_containers(docs))
    checks.check(containers, f"[{label}] has a tandem container")
    configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    for workload, _, spec, container in containers:
        what = f"[{label}] {name(workload)}"
        settings = {}
        sources = {}
        # The config file: --config PATH, mounted from a ConfigMap's key.
        args = list(container.get("args", []))
        cli = {}
        i = 0
        while i < len(args):
            arg = args[i]
            if arg.startswith("--"):
                flag, sep, value = arg[2:].partition("=")
                if not sep and i + 1 < len(args) and not args[i + 1].startswith("--"):
                    value = args[i + 1]
                    i += 1
                cli[flag] = value
            i += 1
        if "config" in cli:
            mount = next((m for m in container.get("volumeMounts", [])
                          if cli["config"].startswith(m["mountPath"].rstrip("/") + "/")), None)
            volume = mount and next((v for v in spec.get("volumes", [])
                                     if v["name"] == mount["name"]), None)
            configmap = volume and configmaps.get(volume.get("configMap", {}).get("name"))
            key = os.path.relpath(cli["config"], mount["mountPath"]) if mount else None
            if checks.check(configmap and key in configmap.get("data", {}),
                            f"{what} --config {cli['config']} is a mounted ConfigMap key"):
                try:
                    entries = read_serve_conf(configmap["data"][key])
                except ValueError as error:
                    checks.check(False, f"{what} serve.conf parses", str(error))
                    entries = {}
                settings.update(entries)
                sources.update({k: f"ConfigMap {configmap['metadata']['name']}" for k in entries})
        for env in container.get("env", []):
            if env["name"].startswith("TANDEM_"):
                flag = env["name"][len("TANDEM_"):].lower().replace("_", "-")
                settings[flag] = env.get("value", "<from " + next(iter(env.get("valueFrom",
                                                                             {"?": 0}))) + ">")
                sources[flag] = f"env {env['name']}"
        settings.update({k: v for k, v in cli.items() if k != "serve"})
        sources.update({k: "args" for k in cli})
        checks.check(args[:1] == ["serve"], f"{what} runs `tandem serve`", f"args {args}")
        for flag, source in sorted(sources.items()):
            checks.check(flag in flags, f"{what} flag --{flag} ({source}) is a `tandem serve` flag",
                         "not in `tandem serve --help`")
        # Ports: what tandem listens on is what the pod declares.
        ports = container_ports(spec)
        for port_name, flag in (("grpc", "port"), ("http", "http-port"),
                                ("metrics", "metrics-port")):
            value = settings.get(flag, defaults.get(flag))
            checks.check(value is not None and ports.get(port_name) == int(value),
                         f"{what} containerPort {port_name} = --{flag} ({value})",
                         f"containerPort {ports.get(port_name)}")
        checks.check(settings.get("host") == "0.0.0.0",
                     f"{what} listens on every interface (host = 0.0.0.0)",
                     f"host = {settings.get('host', 'default 127.0.0.1')}")
        # Drain.
        grace = int(settings.get("grace-seconds", defaults.get("grace-seconds", 30)))
        pre_stop = container.get("lifecycle", {}).get("preStop", {})
        sleep = pre_stop.get("sleep", {}).get("seconds", 0)
        command = pre_stop.get("exec", {}).get("command", [])
        if command[:1] == ["sleep"]:
            sleep = int(command[1])
        period = spec.get("terminationGracePeriodSeconds", 30)
        checks.check(period > grace + sleep,
                     f"{what} terminationGracePeriodSeconds {period} > grace-seconds {grace} + "
                     f"preStop sleep {sleep}")
        checks.check(sleep > 0, f"{what} preStop sleeps so endpoints drop it before SIGTERM")
        probes = {p: container.get(p, {}).get("grpc") for p in
                  ("startupProbe", "readinessProbe", "livenessProbe")}
        checks.check(all(probes.values()) and all(p["port"] == ports.get("grpc")
                                                   for p in probes.values()),
                     f"{what} startup/readiness/liveness probes use grpc.health.v1 on the "
                     "gRPC port")
        security = container.get("securityContext", {})
        pod_security = spec.get("securityContext", {})
        checks.check(pod_security.get("runAsNonRoot") or security.get("runAsNonRoot"),
                     f"{what} runs as non-root")
        checks.check(security.get("readOnlyRootFilesystem") is True,
                     f"{what} has a read-only root filesystem")
        shm = [v for v in spec.get("volumes", []) if v.get("emptyDir", {}).get("medium") ==
               "Memory"]
        checks.check(any(m["mountPath"] == "/dev/shm" and m["name"] in [v["name"] for v in shm]
                         for m in container.get("volumeMounts", [])),
                     f"{what} mounts a memory emptyDir on /dev/shm")
        checks.check(container.get("resources", {}).get("requests") and
                     container["resources"].get("limits", {}).get("memory"),
                     f"{what} has resource requests and a memory limit")


def check_gpu(checks, docs):
    for workload, _, spec, container in tandem_containers(docs):
        limits = container.get("resources", {}).get("limits", {})
        checks.check(limits.get("nvidia.com/gpu"), f"[overlays-gpu] {name(workload)} "
                     "limits nvidia.com/gpu")
        checks.check(spec.get("tolerations") and spec.get("nodeSelector"),
                     f"[overlays-gpu] {name(workload)} has GPU tolerations and a node selector")
        checks.check(container["image"].endswith("cuda"),
                     f"[overlays-gpu] {name(workload)} runs the CUDA image",
                     container["image"])


def epp_args(container):
    out = {}
    for arg in container.get("args", []):
        flag, _, value = arg.lstrip("-").partition("=")
        out[flag] = value
    return out


def check_inference_pool(checks, label, docs):
    pools = [d for d in docs if d["kind"] == "InferencePool"]
    checks.check(pools, f"[{label}] has an InferencePool")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for pool in pools:
        selector = pool["spec"]["selector"]["matchLabels"]
        matched = [(d, s) for d, l, s in pods(docs) if labels_match(selector, l)]
        if not checks.check(matched, f"[{label}] {name(pool)} selects the tandem pods"):
            continue
        for target in pool["spec"]["targetPorts"]:
            for workload, spec in matched:
                checks.check(target["number"] == container_ports(spec).get("http"),
                             f"[{label}] {name(pool)} targets the http port of {name(workload)}",
                             f"{target['number']}")
        ref = pool["spec"]["extensionRef"]
        service = services.get(ref["name"])
        if checks.check(service, f"[{label}] {name(pool)} extensionRef Service/{ref['name']} "
                        "exists"):
            checks.check(ref.get("portNumber", 9002) in [p["port"] for p in
                                                          service["spec"]["ports"]],
                         f"[{label}] {name(pool)} extensionRef port {ref.get('portNumber')} is "
                         f"a port of {name(service)}")
        epps = [(d, c) for d, l, s in pods(docs) for c in s["containers"]
                if "/epp:" in c.get("image", "")]
        for workload, container in epps:
            args = epp_args(container)
            checks.check(args.get("pool-name") == pool["metadata"]["name"],
                         f"[{label}] {name(workload)} --pool-name is {name(pool)}")
            tandem_ports = container_ports(matched[0][1])
            checks.check(int(args.get("model-server-metrics-port", 0)) ==
                         tandem_ports.get("metrics"),
                         f"[{label}] {name(workload)} scrapes tandem's metrics port",
                         f"--model-server-metrics-port {args.get('model-server-metrics-port')}")
            checks.check(int(args.get("grpc-port", 9002)) == container_ports(
                next(s for d, _, s in pods(docs) if d is workload)).get("grpc"),
                f"[{label}] {name(workload)} --grpc-port is its grpc containerPort")
    for route in (d for d in docs if d["kind"] == "HTTPRoute"):
        for rule in route["spec"]["rules"]:
            for backend in rule.get("backendRefs", []):
                known = {key_of(d) for d in docs}
                checks.check((backend.get("kind", "Service"), backend["name"]) in known,
                             f"[{label}] {name(route)} backend {backend.get('kind')}/"
                             f"{backend['name']} exists")


def check_rules_single_source(checks, sync):
    with open(RULES, encoding="utf-8") as f:
        rules_text = f.read()
    rules = yaml.safe_load(rules_text)
    if sync:
        body = rules_text[rules_text.index("\ngroups:") + 1:]
        with open(PROMETHEUS_RULE, "w", encoding="utf-8") as out:
            out.write("# GENERATED from deploy/prometheus/tandem-rules.yaml by\n"
                      "# `tests/deploy/check_manifests.py --sync-rules`: edit that file, not "
                      "this one.\n"
                      "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n"
                      "metadata:\n  name: tandem\n  labels:\n"
                      "    app.kubernetes.io/name: tandem\n"
                      "    app.kubernetes.io/component: server\nspec:\n")
            out.write("".join("  " + line if line.strip() else line
                              for line in body.splitlines(True)))
        checks.note(f"rewrote {os.path.relpath(PROMETHEUS_RULE, ROOT)}")
    with open(PROMETHEUS_RULE, encoding="utf-8") as f:
        rule = yaml.safe_load(f)
    checks.check(rule["spec"]["groups"] == rules["groups"],
                 "PrometheusRule spec.groups equals deploy/prometheus/tandem-rules.yaml",
                 "run tests/deploy/check_manifests.py --sync-rules")
    return rules


def promql_metrics(expr):
    return set(PROMQL_METRIC.findall(expr))


def check_metric_names(checks, rules, rendered):
    documented = documented_metrics()
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    uses = []  # (where, metric)
    for group in rules["groups"]:
        for rule in group["rules"]:
            where = f"rule {rule.get('record') or rule.get('alert')}"
            uses += [(where, m) for m in promql_metrics(rule["expr"])]
    with open(DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)

    def walk(panels):
        for panel in panels:
            yield panel
            yield from walk(panel.get("panels", []))
    for panel in walk(dashboard.get("panels", [])):
        for target in panel.get("targets", []):
            uses += [(f"panel {panel.get('title')!r}", m)
                     for m in promql_metrics(target.get("expr", ""))]
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        query = query.get("query", "") if isinstance(query, dict) else str(query or "")
        if var.get("type") == "query":
            uses += [(f"variable ${var['name']}", m) for m in promql_metrics(query)]
    with open(ADAPTER_RULES, encoding="utf-8") as f:
        for rule in yaml.safe_load(f)["rules"]:
            uses += [("adapter rule", m) for m in promql_metrics(rule["seriesQuery"])]
            uses += [("adapter rule", rule["name"]["as"])]
    for docs in rendered.values():
        for doc in docs:
            if doc["kind"] == "HorizontalPodAutoscaler":
                for metric in doc["spec"].get("metrics", []):
                    for kind in ("pods", "object", "external"):
                        if kind in metric:
                            uses.append((name(doc), metric[kind]["metric"]["name"]))
            if doc["kind"] == "ScaledObject":
                for trigger in doc["spec"]["triggers"]:
                    uses += [(name(doc), m) for m in
                             promql_metrics(trigger["metadata"].get("query", ""))]
            for _, _, spec in pods([doc]):
                for container in spec["containers"]:
                    if "/epp:" in container.get("image", ""):
                        for flag, value in epp_args(container).items():
                            if flag.endswith("-metric") and value:
                                uses.append((f"{name(doc)} --{flag}", value.split("{")[0]))
    epp_flags = {flag for w, _ in uses if w.startswith("Deployment/tandem-epp")
                 for flag in [w.split("--")[-1]]}
    for flag in ("total-queued-requests-metric", "total-running-requests-metric",
                 "kv-cache-usage-percentage-metric"):
        checks.check(flag in epp_flags, f"EPP is given --{flag}")
    for where, metric in sorted(set(uses)):
        base = metric
        for suffix in HISTOGRAM_SUFFIXES:
            if metric.endswith(suffix) and metric[:-len(suffix)] in documented:
                base = metric[:-len(suffix)]
        if metric == "up" or metric in recorded:
            continue
        checks.check(base in documented, f"{where}: {metric} is in docs/METRICS.md",
                     "not documented")


def check_custom_resources(checks, label, docs):
    """Custom resources against tests/deploy/crd_schemas.py (python3-jsonschema)."""
    try:
        import jsonschema  # Debian's python3-jsonschema
    except ImportError:
        checks.check(False, "python3-jsonschema is installed", "scripts/setup.sh installs it")
        return
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from crd_schemas import SCHEMAS  # pylint: disable=import-outside-toplevel
    builtin = {"v1", "apps/v1", "policy/v1", "autoscaling/v2", "rbac.authorization.k8s.io/v1"}
    for doc in docs:
        if doc["apiVersion"] in builtin:
            continue
        schema = SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        if not checks.check(schema, f"[{label}] {name(doc)} ({doc['apiVersion']}) has a schema",
                            "add one to tests/deploy/crd_schemas.py"):
            continue
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(doc),
                        key=lambda e: list(e.path))
        checks.check(not errors, f"[{label}] {name(doc)} matches its {doc['kind']} schema",
                     "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors))


def check_dashboard(checks):
    """Grafana is not packaged by Debian: the dashboard's structure is checked here (its queries
    run against live data in tests/deploy/dashboard_live_test.py)."""
    with open(DASHBOARD, encoding="utf-8") as f:
        dashboard = json.load(f)
    variables = [v["name"] for v in dashboard.get("templating", {}).get("list", [])]
    checks.check("datasource" in variables and next(
        v for v in dashboard["templating"]["list"] if v["name"] == "datasource").get("type") ==
        "datasource", "dashboard has a ${datasource} variable of type datasource")
    checks.check(isinstance(dashboard.get("schemaVersion"), int) and dashboard.get("uid") and
                 dashboard.get("title"), "dashboard has schemaVersion, uid and title")
    ids = []
    for panel in dashboard["panels"]:
        ids.append(panel.get("id"))
        grid = panel.get("gridPos", {})
        checks.check(all(k in grid for k in "hwxy") and grid["x"] + grid["w"] <= 24,
                     f"dashboard panel {panel.get('title')!r} fits the 24-column grid")
        if panel.get("type") == "row":
            continue
        sources = [panel.get("datasource")] + [t.get("datasource") for t in panel["targets"]]
        checks.check(all(s == {"type": "prometheus", "uid": "${datasource}"} for s in sources),
                     f"dashboard panel {panel.get('title')!r} queries ${{datasource}}")
        refs = [t.get("refId") for t in panel["targets"]]
        checks.check(len(refs) == len(set(refs)) and all(refs),
                     f"dashboard panel {panel.get('title')!r} has distinct refIds")
    checks.check(len(ids) == len(set(ids)) and all(ids), "dashboard panel ids are distinct")
    titles = " ".join(p.get("title", "").lower() for p in dashboard["panels"])
    for topic in ("hit rate", "cached vs prompt", "time to first token", "inter-token",
                  "queue time", "waiting / running", "pool used / capacity",
                  "memory usage ratio", "α", "evictions", "preemptions", "oom", "migrations",
                  "request rate by code"):
        checks.check(topic in titles, f"dashboard has a panel on {topic}")


def check_proxies(checks, docs):
    """Envoy is not packaged by Debian: its config's structure is checked here. haproxy -c checks
    haproxy.cfg's syntax (scripts/check-deploy.sh); here, that it hashes sessions."""
    with open(ENVOY, encoding="utf-8") as f:
        envoy = yaml.safe_load(f)
    clusters = {c["name"]: c for c in envoy["static_resources"]["clusters"]}
    for listener in envoy["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for filt in chain["filters"]:
                config = filt.get("typed_config", {})
                for host in config.get("route_config", {}).get("virtual_hosts", []):
                    for route in host["routes"]:
                        target = route["route"]["cluster"]
                        checks.check(target in clusters, f"envoy route to cluster {target} exists")
                        headers = [h.get("header", {}).get("header_name")
                                   for h in route["route"].get("hash_policy", [])]
                        checks.check("x-session-id" in headers,
                                     f"envoy route to {target} hashes on x-session-id",
                                     f"hash_policy headers {headers}")
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for cluster in clusters.values():
        what = f"envoy cluster {cluster['name']}"
        checks.check(cluster.get("lb_policy") == "RING_HASH", f"{what} uses RING_HASH")
        options = cluster.get("typed_extension_protocol_options", {}).get(
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions", {})
        checks.check("http2_protocol_options" in options.get("explicit_http_config", {}),
                     f"{what} speaks HTTP/2 upstream")
        checks.check(any("grpc_health_check" in h for h in cluster.get("health_checks", [])),
                     f"{what} health-checks with grpc.health.v1")
        for group in cluster["load_assignment"]["endpoints"]:
            for endpoint in group["lb_endpoints"]:
                address = endpoint["endpoint"]["address"]["socket_address"]
                service = services.get(address["address"].split(".")[0])
                checks.check(service and service["spec"].get("clusterIP") == "None" and
                             address["port_value"] in [p["port"] for p in
                                                       service["spec"]["ports"]],
                             f"{what} endpoint {address['address']}:{address['port_value']} is "
                             "a port of a headless Service of the base")
    with open(HAPROXY, encoding="utf-8") as f:
        haproxy = f.read()
    checks.check(re.search(r"^\s*balance\s+hdr\(x-session-id\)", haproxy, re.M),
                 "haproxy balances on hdr(x-session-id)")
    checks.check(re.search(r"^\s*hash-type\s+consistent", haproxy, re.M),
                 "haproxy uses consistent hashing")
    servers = re.findall(r"^\s*server\s+(\S+)\s.*\bproto h2\b", haproxy, re.M)
    checks.check(len(servers) == 3, "haproxy has 3 tandem servers speaking h2", f"{servers}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tandem", required=True, help="the tandem binary (for serve --help)")
    parser.add_argument("--render-dir", help="write each rendering here as NAME.yaml")
    parser.add_argument("--sync-rules", action="store_true",
                        help="rewrite the PrometheusRule from deploy/prometheus/tandem-rules.yaml")
    options = parser.parse_args()
    checks = Checks()

    flags, defaults = serve_flags(options.tandem)
    if not checks.check(len(flags) > 10, f"`{options.tandem} serve --help` lists the flags",
                        f"found {sorted(flags)}"):
        print(f"0 passed, {len(checks.failures)} failed")
        return 1

    rules = check_rules_single_source(checks, options.sync_rules)
    check_kustomizations(checks)
    rendered = {}
    for label, virtual in RENDERINGS.items():
        try:
            rendered[label] = render(KUBE, virtual)
        except (RenderError, OSError, yaml.YAMLError) as error:
            checks.check(False, f"render {label}", str(error))
            continue
        docs = rendered[label]
        names = [key_of(d) for d in docs]
        checks.check(len(names) == len(set(names)), f"[{label}] object names are unique")
        for doc in docs:
            labels = doc.get("metadata", {}).get("labels", {})
            checks.check("app.kubernetes.io/name" in labels,
                         f"[{label}] {name(doc)} has an app.kubernetes.io/name label")
        check_custom_resources(checks, label, docs)
        try:
            check_selectors_and_ports(checks, label, docs)
            check_tandem(checks, label, docs, flags, defaults)
            if label == "overlays-gpu":
                check_gpu(checks, docs)
            if "inference-pool" in label:
                check_inference_pool(checks, label, docs)
        except (KeyError, TypeError, ValueError, StopIteration) as error:
            checks.check(False, f"[{label}] checks ran", f"a field is missing or malformed: "
                         f"{type(error).__name__}: {error}")
        if options.render_dir:
            os.makedirs(options.render_dir, exist_ok=True)
            with open(os.path.join(options.render_dir, f"{label}.yaml"), "w",
                      encoding="utf-8") as out:
                yaml.safe_dump_all(docs, out, sort_keys=False)
    check_metric_names(checks, rules, rendered)
    check_dashboard(checks)
    if "overlays-cpu" in rendered:
        check_proxies(checks, rendered["overlays-cpu"])

    print(f"{checks.passed} passed, {len(checks.failures)} failed")
    if checks.failures:
        print("Failed:\n  " + "\n  ".join(checks.failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""JSON schemas of the custom resources our manifests use, for python3-jsonschema.

kubernetes-validate knows only the built-in kinds. These are written from the CRDs' reference
documentation (Prometheus Operator monitoring.coreos.com/v1, KEDA keda.sh/v1alpha1, Gateway API
gateway.networking.k8s.io/v1, Gateway API Inference Extension inference.networking.k8s.io/v1),
and cover the fields we use and their neighbours, closed with additionalProperties: false so a
misspelt field fails. They are not the full CRDs: a field we do not use may be missing here
(add it when a manifest needs it).
"""

STRING = {"type": "string"}
INT = {"type": "integer"}
DURATION = {"type": "string", "pattern": r"^(0|([0-9]+(\.[0-9]+)?(ms|s|m|h|d|w|y))+)$"}
LABELS = {"type": "object", "additionalProperties": STRING}
SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {"matchLabels": LABELS, "matchExpressions": {"type": "array"}},
}
NAMESPACE_SELECTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": STRING}},
}
ENDPOINT_FIELDS = {
    "port": STRING, "path": STRING, "scheme": {"enum": ["http", "https"]},
    "interval": DURATION, "scrapeTimeout": DURATION, "honorLabels": {"type": "boolean"},
    "params": {"type": "object"}, "relabelings": {"type": "array"},
    "metricRelabelings": {"type": "array"}, "tlsConfig": {"type": "object"},
    "bearerTokenSecret": {"type": "object"}, "authorization": {"type": "object"},
}


def kind(spec_schema, required=("spec",)):
    return {
        "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind",
                                                                      "metadata", *required],
        "properties": {"apiVersion": STRING, "kind": STRING, "metadata": {"type": "object"},
                       "spec": spec_schema},
    }


SCHEMAS = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): kind({
        "type": "object", "additionalProperties": False, "required": ["selector", "endpoints"],
        "properties": {
            "jobLabel": STRING, "selector": SELECTOR, "namespaceSelector": NAMESPACE_SELECTOR,
            "targetLabels": {"type": "array", "items": STRING},
            "podTargetLabels": {"type": "array", "items": STRING},
            "endpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "properties": dict(ENDPOINT_FIELDS, targetPort={})}},
        }}),
    ("monitoring.coreos.com/v1", "PodMonitor"): kind({
        "type": "object", "additionalProperties": False,
        "required": ["selector", "podMetricsEndpoints"],
        "properties": {
            "jobLabel": STRING, "selector": SELECTOR, "namespaceSelector": NAMESPACE_SELECTOR,
            "podTargetLabels": {"type": "array", "items": STRING},
            "podMetricsEndpoints": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False,
                "properties": dict(ENDPOINT_FIELDS, portNumber=INT)}},
        }}),
    ("monitoring.coreos.com/v1", "PrometheusRule"): kind({
        "type": "object", "additionalProperties": False, "required": ["groups"],
        "properties": {"groups": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["name", "rules"],
            "properties": {
                "name": STRING, "interval": DURATION, "limit": INT,
                "rules": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False, "required": ["expr"],
                    "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
                    "properties": {"record": STRING, "alert": STRING, "expr": STRING,
                                   "for": DURATION, "keep_firing_for": DURATION,
                                   "labels": LABELS, "annotations": LABELS}}},
            }}}}}),
    ("keda.sh/v1alpha1", "ScaledObject"): kind({
        "type": "object", "additionalProperties": False, "required": ["scaleTargetRef",
                                                                      "triggers"],
        "properties": {
            "scaleTargetRef": {"type": "object", "additionalProperties": False,
                               "required": ["name"],
                               "properties": {"apiVersion": STRING, "kind": STRING,
                                              "name": STRING, "envSourceContainerName": STRING}},
            "minReplicaCount": INT, "maxReplicaCount": INT, "idleReplicaCount": INT,
            "pollingInterval": INT, "cooldownPeriod": INT, "initialCooldownPeriod": INT,
            "fallback": {"type": "object"},
            "advanced": {"type": "object", "additionalProperties": False, "properties": {
                "restoreToOriginalReplicaCount": {"type": "boolean"},
                "scalingModifiers": {"type": "object"},
                "horizontalPodAutoscalerConfig": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"name": STRING, "behavior": {"type": "object"}}}}},
            "triggers": {"type": "array", "minItems": 1, "items": {
                "type": "object", "additionalProperties": False, "required": ["type",
                                                                              "metadata"],
                "properties": {"type": STRING, "name": STRING, "useCachedMetrics":
                               {"type": "boolean"},
                               "metricType": {"enum": ["AverageValue", "Value",
                                                       "Utilization"]},
                               "metadata": {"type": "object", "additionalProperties": STRING},
                               "authenticationRef": {"type": "object"}}}},
        }}),
    ("inference.networking.k8s.io/v1", "InferencePool"): kind({
        "type": "object", "additionalProperties": False,
        "required": ["selector", "targetPorts", "extensionRef"],
        "properties": {
            "selector": {"type": "object", "additionalProperties": False,
                         "required": ["matchLabels"], "properties": {"matchLabels": LABELS}},
            "targetPorts": {"type": "array", "minItems": 1, "maxItems": 1, "items": {
                "type": "object", "additionalProperties": False, "required": ["number"],
                "properties": {"number": {"type": "integer", "minimum": 1,
                                          "maximum": 65535}}}},
            "extensionRef": {"type": "object", "additionalProperties": False,
                             "required": ["name"],
                             "properties": {"group": STRING, "kind": STRING, "name": STRING,
                                            "portNumber": {"type": "integer", "minimum": 1,
                                                           "maximum": 65535},
                                            "failureMode": {"enum": ["FailOpen",
                                                                     "FailClose"]}}},
        }}),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): kind({
        "type": "object", "additionalProperties": False,
        "properties": {
            "parentRefs": {"type": "array", "items": {
                "type": "object", "additionalProperties": False, "required": ["name"],
                "properties": {"group": STRING, "kind": STRING, "name": STRING,
                               "namespace": STRING, "sectionName": STRING, "port": INT}}},
            "hostnames": {"type": "array", "items": STRING},
            "rules": {"type": "array", "items": {
                "type": "object", "additionalProperties": False,
                "properties": {
                    "name": STRING, "filters": {"type": "array"},
                    "matches": {"type": "array", "items": {
                        "type": "object", "additionalProperties": False,
                        "properties": {
                            "path": {"type": "object", "additionalProperties": False,
                                     "properties": {"type": {"enum": [
                                         "Exact", "PathPrefix", "RegularExpression"]},
                                         "value": STRING}},
                            "headers": {"type": "array"}, "queryParams": {"type": "array"},
                            "method": STRING}}},
                    "backendRefs": {"type": "array", "items": {
                        "type": "object", "additionalProperties": False, "required": ["name"],
                        "properties": {"group": STRING, "kind": STRING, "name": STRING,
                                       "namespace": STRING, "port": INT, "weight": INT,
                                       "filters": {"type": "array"}}}},
                    "timeouts": {"type": "object", "additionalProperties": False,
                                 "properties": {"request": DURATION,
                                                "backendRequest": DURATION}},
                }}},
        }}),
}

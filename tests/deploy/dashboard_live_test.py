#!/usr/bin/env python3
"""The Grafana dashboard and the Prometheus rules against live data.

Starts `tandem serve` (the bundled model, with the Kubernetes ConfigMap's serve.conf) on loopback, a real Prometheus (Debian's binary)
scraping it every second with deploy/prometheus/tandem-rules.yaml loaded, drives a few seconds
of multi-turn sessions with `tandem bench` (a shared system prompt, so the prefix cache hits),
then asks Prometheus's HTTP API for:

- every target `expr` of every panel of deploy/grafana/tandem.json, with the Grafana variables
  substituted ($__rate_interval and friends, $job, $instance = All): a panel fails when a query
  errors or returns no data (an empty result, or only NaN);
- every template variable's `label_values(...)` query: the label must come back;
- every rule of the rule file: Prometheus must have evaluated it without error (/api/v1/rules),
  every recording rule's series must have data, every alert expression must evaluate, and every
  metric an alert reads must have data.

Exit codes: 0 pass, 1 fail, 77 skipped (no prometheus binary). Standard library only, so it
runs on the system python3 that CTest finds.
"""

import argparse
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# How the test substitutes Grafana's built-in variables. $__rate_interval is at least four
# scrape intervals; the test uses a window that spans the whole short run (Grafana would pick a
# larger one on a dashboard range of hours with a 15 s scrape interval anyway).
GRAFANA_VARIABLES = {
    "$__rate_interval": "1m",
    "$__interval": "1s",
    "$__range": "1m",
    "${__rate_interval}": "1m",
    "${__interval}": "1s",
    "${__range}": "1m",
}

METRIC_NAME = re.compile(r"\b(tandem[_:][a-zA-Z0-9_:]*|up)\b(?!\s*\()")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(message):
    print(message, flush=True)


class Prometheus:

    def __init__(self, binary, directory, target, rule_file):
        self.port = free_port()
        self.directory = directory
        config = os.path.join(directory, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as out:
            out.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      f"rule_files: ['{rule_file}']\n"
                      "scrape_configs:\n  - job_name: tandem\n    static_configs:\n"
                      f"      - targets: ['{target}']\n")
        self.log_path = os.path.join(directory, "prometheus.log")
        self.log_file = open(self.log_path, "w", encoding="utf-8")
        self.process = subprocess.Popen(
            [binary, f"--config.file={config}",
             f"--storage.tsdb.path={os.path.join(directory, 'data')}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log_file, stderr=subprocess.STDOUT)

    def get(self, path, **params):
        url = f"http://127.0.0.1:{self.port}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            # Prometheus answers a bad query with 400 and a JSON body naming the error.
            return json.load(error)

    def query(self, promql):
        """(error, result): error is None on success."""
        body = self.get("/api/v1/query", query=promql)
        if body.get("status") != "success":
            return f"{body.get('errorType', '?')}: {body.get('error', body)}", None
        return None, body["data"]["result"]

    def wait_ready(self, deadline):
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"prometheus exited; its log:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=1):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus never became ready; its log:\n{self.log()}")

    def wait_scraped(self, deadline):
        while time.monotonic() < deadline:
            _, result = self.query('up{job="tandem"} == 1')
            if result:
                return
            time.sleep(0.2)
        raise RuntimeError(f"prometheus never scraped tandem; its log:\n{self.log()}")

    def log(self):
        with open(self.log_path, encoding="utf-8") as f:
            return f.read()

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log_file.close()


class Server:
    """`tandem serve` with the bundled model on free loopback ports, reading the Kubernetes
    ConfigMap's serve.conf (`config`) for everything the command line does not override: a
    value there that the binary refuses fails the test."""

    def __init__(self, tandem, config, log_path):
        self.log_file = open(log_path, "w", encoding="utf-8")
        self.log_path = log_path
        self.process = subprocess.Popen(
            [tandem, "serve", "--config", config, "--host", "127.0.0.1", "--port", "0",
             "--metrics-port", "0", "--threads", "2", "--memory-gib", "0.25",
             "--grace-seconds", "5"],
            stdout=subprocess.PIPE, stderr=self.log_file, text=True)
        self.address = self.metrics = None
        for line in self.process.stdout:
            if line.startswith("tandem metrics on "):
                self.metrics = urllib.parse.urlparse(line.split()[-1]).netloc
            if line.startswith("tandem serving on "):
                self.address = line[len("tandem serving on "):].strip()
                break
        if self.address is None or self.metrics is None:
            self.process.wait()
            with open(self.log_path, encoding="utf-8") as f:
                log_text = f.read()
            # An error is the log's first line (then the usage), or its last.
            log_tail = log_text[:1500] + ("\n…\n" + log_text[-1500:] if len(log_text) > 3000
                                          else log_text[1500:])
            raise RuntimeError(f"tandem serve exited with {self.process.returncode} before "
                               f"announcing its ports; its stderr:\n{log_tail}")
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log_file.close()


def serve_conf(configmap, directory):
    """The ConfigMap's serve.conf, written to a file as the pod mounts it."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(configmap, encoding="utf-8") as f:
        text = yaml.safe_load(f)["data"]["serve.conf"]
    path = os.path.join(directory, "serve.conf")
    with open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return path


def substitute(expr, variables):
    for name in sorted(variables, key=len, reverse=True):
        expr = expr.replace(name, variables[name])
    if "$" in expr:
        raise ValueError(f"unsubstituted variable in {expr!r}")
    return expr


def has_data(result):
    """A query's result holds at least one number that is not NaN."""
    for series in result:
        values = [series["value"]] if "value" in series else series.get("values", [])
        for _, value in values:
            if not math.isnan(float(value)):
                return True
    return False


def metric_names(expr):
    return set(METRIC_NAME.findall(expr))


def dashboard_variables(dashboard):
    """Values for the dashboard's own template variables: the current or first option, or All."""
    variables = dict(GRAFANA_VARIABLES)
    queries = []
    for var in dashboard.get("templating", {}).get("list", []):
        name = var["name"]
        if var.get("type") == "datasource":
            value = "prometheus"
        elif var.get("type") == "query":
            value = var.get("allValue") or ".*" if var.get("includeAll") else None
            query = var.get("query")
            query = query.get("query") if isinstance(query, dict) else query
            queries.append((name, query))
        elif var.get("type") in ("custom", "constant", "textbox"):
            current = var.get("current", {}).get("value")
            value = current if isinstance(current, str) else str(var.get("query", "")).split(",")[0]
        else:
            value = None
        if value is None:
            raise ValueError(f"template variable {name}: no value to test with")
        variables[f"${{{name}}}"] = value
        variables[f"${name}"] = value
        variables[f"[[{name}]]"] = value
    return variables, queries


def all_panels(panels):
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


class Report:

    def __init__(self):
        self.failures = []
        self.passed = 0

    def ok(self, what):
        self.passed += 1
        log(f"ok      {what}")

    def fail(self, what, why):
        self.failures.append(f"{what}: {why}")
        log(f"FAIL    {what}: {why}")


def check_dashboard(prometheus, dashboard, report):
    variables, variable_queries = dashboard_variables(dashboard)
    for name, query in variable_queries:
        match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", query or "")
        if not match:
            report.fail(f"variable ${name}", f"query {query!r} is not label_values(metric, label)")
            continue
        error, result = prometheus.query(substitute(match.group(1), variables))
        if error:
            report.fail(f"variable ${name}", error)
        elif not any(match.group(2) in series["metric"] for series in result):
            report.fail(f"variable ${name}", f"{query!r} returns no {match.group(2)} values")
        else:
            report.ok(f"variable ${name}")
    for panel in all_panels(dashboard.get("panels", [])):
        if panel.get("type") == "row":
            continue
        title = f"panel {panel.get('title')!r}"
        if not panel.get("targets"):
            report.fail(title, "has no targets")
            continue
        problems = []
        for target in panel["targets"]:
            expr = target.get("expr")
            if not expr:
                problems.append(f"target {target.get('refId')} has no expr")
                continue
            ref = target.get("refId")
            error, result = prometheus.query(substitute(expr, variables))
            if error:
                problems.append(f"{ref} errors: {error} (expr {expr})")
            elif not has_data(result):
                problems.append(f"{ref} returns no data (expr {expr})")
        if problems:
            report.fail(title, "; ".join(problems))
        else:
            report.ok(title)


def wait_rules_evaluated(prometheus, deadline):
    while True:
        groups = prometheus.get("/api/v1/rules")["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        if rules and all(not rule.get("lastEvaluation", "").startswith("0001") for rule in rules):
            return rules
        if time.monotonic() > deadline:
            return rules
        time.sleep(0.5)


def check_rules(prometheus, rule_groups, report, deadline):
    evaluated = {(r.get("name")): r for r in wait_rules_evaluated(prometheus, deadline)}
    for group in rule_groups:
        for rule in group["rules"]:
            name = rule.get("record") or rule.get("alert")
            what = f"{'recording rule' if 'record' in rule else 'alert'} {name}"
            live = evaluated.get(name)
            if live is None:
                report.fail(what, "Prometheus did not load it")
                continue
            if live.get("health") != "ok":
                report.fail(what, f"health {live.get('health')}: {live.get('lastError')}")
                continue
            problems = []
            if "record" in rule:
                error, result = prometheus.query(rule["record"])
                if error or not has_data(result):
                    problems.append(f"its series has no data ({error or 'empty or NaN'})")
            else:
                error, _ = prometheus.query(rule["expr"])
                if error:
                    problems.append(f"expr errors: {error}")
            for metric in sorted(metric_names(rule["expr"])):
                error, result = prometheus.query(metric if ":" in metric else
                                                 f'{metric}{{job="tandem"}}')
                if error or not has_data(result):
                    problems.append(f"{metric} has no data")
            if problems:
                report.fail(what, "; ".join(problems))
            else:
                report.ok(what)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tandem", required=True, help="the tandem binary")
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or
                        "/usr/bin/prometheus")
    parser.add_argument("--dashboard", default=os.path.join(ROOT, "deploy/grafana/tandem.json"))
    parser.add_argument("--rules", default=os.path.join(ROOT, "deploy/prometheus/tandem-rules.yaml"))
    parser.add_argument("--configmap", default=os.path.join(
        ROOT, "deploy/kubernetes/base/configmap.yaml"))
    parser.add_argument("--bench-seconds", type=float, default=4)
    options = parser.parse_args()

    if not os.access(options.prometheus, os.X_OK):
        print(f"SKIP: no prometheus binary at {options.prometheus} (Debian's `prometheus` "
              "package; scripts/setup.sh installs it)", flush=True)
        return 77
    try:
        import yaml  # Debian's python3-yaml
    except ImportError:
        print("FAIL: needs Debian's python3-yaml (scripts/setup.sh installs it)", flush=True)
        return 1

    with open(options.dashboard, encoding="utf-8") as f:
        dashboard = json.load(f)
    with open(options.rules, encoding="utf-8") as f:
        rule_groups = yaml.safe_load(f)["groups"]

    started = time.monotonic()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="tandem_dashboard_") as directory:
        # The rules as Prometheus will load them, every group evaluated each second.
        live_rules = os.path.join(directory, "rules.yaml")
        with open(live_rules, "w", encoding="utf-8") as out:
            yaml.safe_dump({"groups": [dict(g, interval="1s") for g in rule_groups]}, out)
        server = prometheus = None
        try:
            server = Server(options.tandem,
                            serve_conf(options.configmap, directory),
                            os.path.join(directory, "serve.log"))
            prometheus = Prometheus(options.prometheus, directory, server.metrics, live_rules)
            prometheus.wait_ready(time.monotonic() + 20)
            # Prometheus scrapes first after a random offset within the interval: the counters'
            # values before the load must be in its database, or rate() sees no increase.
            prometheus.wait_scraped(time.monotonic() + 20)
            # Multi-turn sessions sharing a system prompt: later turns and sessions hit the cache.
            bench = subprocess.run(
                [options.tandem, "bench", "--address", server.address, "--concurrency", "4",
                 "--duration", str(options.bench_seconds), "--turns", "3",
                 "--system-tokens", "96", "--user-tokens", "16", "--max-new-tokens", "8",
                 "--json"], capture_output=True, text=True, timeout=120)
            if bench.returncode != 0:
                report.fail("tandem bench", f"exit {bench.returncode}: {bench.stderr[-2000:]}")
            else:
                summary = json.loads(bench.stdout)
                log(f"bench: {json.dumps(summary)[:300]}")
            # Two more scrapes after the last request, so every counter has its final value.
            time.sleep(2.5)
            check_dashboard(prometheus, dashboard, report)
            check_rules(prometheus, rule_groups, report, time.monotonic() + 10)
        except Exception as error:  # pylint: disable=broad-except
            report.fail("setup", f"{type(error).__name__}: {error}")
            if prometheus is not None:
                log(f"prometheus log:\n{prometheus.log()}")
        finally:
            if prometheus is not None:
                prometheus.stop()
            if server is not None:
                server.stop()

    log(f"dashboard_live_test: {time.monotonic() - started:.1f} s")
    print(f"{report.passed} passed, {len(report.failures)} failed", flush=True)
    if report.failures:
        print("Failed:\n  " + "\n  ".join(report.failures), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`tandem serve` as a child process for the Python tests: started on a port it picks (--port 0)
with a small memory budget and, unless given a metrics port, no /metrics; ready once it printed
"tandem serving on HOST:PORT"."""

import subprocess
import threading


class ServeProcess:

    def __init__(self, tandem, model, *extra, metrics_port=None):
        metrics = ["--no-metrics"] if metrics_port is None else ["--metrics-port",
                                                                   str(metrics_port)]
        command = [tandem, "serve", "--model", model, "--host", "127.0.0.1", "--port", "0",
                   *metrics, "--threads", "2", "--memory-gib", "0.05",
                   "--grace-seconds", "5", *extra]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.address = None
        for line in self.process.stdout:
            if line.startswith("tandem serving on "):
                self.address = line[len("tandem serving on "):].strip()
                break
        if self.address is None:
            self.process.wait()
            raise RuntimeError(f"tandem serve exited with {self.process.returncode} before "
                               "announcing its port")
        # Keep reading what else it prints, so that it never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def rss_bytes(self):
        """The server's resident set size now."""
        with open(f"/proc/{self.process.pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        raise RuntimeError("no VmRSS line")

    def stop(self):
        self.process.terminate()
        return self.process.wait(timeout=60)

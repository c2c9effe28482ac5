"""Starting and stopping `infinity_v3 serve` from Python test scripts
(tests/openapi, tests/fleet). Standard library only."""
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

_instances = [0]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Server:
    """One server process on `host` (127.0.0.1). port=0 picks a free port (read
    back from the log's `Ready: listening on` line). `wrap` prefixes the
    command, e.g. ["ip", "netns", "exec", NS] to run it in a network
    namespace (ip execs the server, so the process is the server itself).
    `env`: the server's environment (default: this process's), e.g. to set
    OMP_NUM_THREADS for a benchmark."""

    def __init__(self, binary, model, port=0, extra=(), log_dir=None, host="127.0.0.1", wrap=(), env=None):
        self.binary, self.model, self.extra, self.env = binary, model, list(extra), env
        self.host, self.wrap = host, list(wrap)
        self.want_port = port
        self.port = None
        self.proc = None
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="iv-srv-")
        self.starts = 0
        _instances[0] += 1
        self.instance = _instances[0]

    def start(self, timeout=60):
        self.starts += 1
        self.log_path = os.path.join(self.log_dir, f"server{self.instance}-start{self.starts}.log")
        log = open(self.log_path, "w")
        args = self.wrap + [self.binary, "serve", "--model-id", self.model, "--hostname", self.host,
                            "--port", str(self.port or self.want_port)] + self.extra
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=self.env)
        log.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}:\n{open(self.log_path).read()}")
            m = re.search(r"Ready: listening on [^\s]*:(\d+)", open(self.log_path).read())
            if m:
                self.port = int(m.group(1))
                if self.healthy():
                    return self
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server not ready after {timeout}s:\n{open(self.log_path).read()}")

    def healthy(self):
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    @property
    def url(self):
        return f"http://{self.host}:{self.port}"

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)

    def stop(self):
        """SIGTERM (graceful drain); returns the exit status."""
        if not self.proc:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return -9
        return self.proc.returncode


def default_binary():
    return os.environ.get("IV_BIN", os.path.join(ROOT, "build/release/infinity_v3"))


def default_model():
    return os.path.join(ROOT, "tests/fixtures/models/bert")

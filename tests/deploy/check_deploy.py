#!/usr/bin/env python3
"""`make test-deploy`: the Kubernetes manifests and the container images.

1. Manifests (deploy/kubernetes, rendered by `kubectl kustomize` when kubectl
   is there, else read file by file): kubernetes-validate --strict against
   Kubernetes 1.29 and 1.37 (a copy with a misspelt field must fail, so the
   validator is shown to look), then what a schema cannot see: the probes'
   path and port, the grace period covering preStop plus the drain, the
   HPA's target, the selectors, the env names being flags the server reads.
2. The CPU image (deploy/docker/Dockerfile), built offline: the only image it
   starts FROM, debian:bookworm-slim, is made here from Debian's archive with
   debootstrap when the registry is out of reach. Then: the binary's libraries
   all resolve, it runs as a non-root user, a model mounted read-only and
   configured by environment variables (MODEL_ID, PORT) answers /embed as the
   host's release binary does, and `stop` (SIGTERM) ends it with status 0.
3. The CUDA image (deploy/docker/Dockerfile.cuda), when a CUDA toolkit is in
   /usr/local/cuda: built on stand-ins for NVIDIA's devel and runtime images
   (Debian plus this machine's toolkit in /usr/local/cuda, the layout of
   NVIDIA's images) passed as CUDA_DEVEL / CUDA_RUNTIME; its binary's
   libraries resolve, and without a GPU `--device cuda` fails with a message.

Container tool: podman (build with --isolation=chroot, which needs no
cgroups; run with runc when it is installed) or docker when its daemon
answers. Needs: pip (kubernetes-validate, into .cache/deploy-venv), and
for the images podman (or docker) and debootstrap.
"""
import argparse
import copy
import glob
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pyutil"))
from ivserver import ROOT, Server  # noqa: E402

K8S_DIR = os.path.join(ROOT, "deploy/kubernetes")
VENV = os.path.join(ROOT, ".cache/deploy-venv")
BASE = "docker.io/library/debian:bookworm-slim"
FIXTURE = os.path.join(ROOT, "tests/fixtures/models/bert")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


# ---- 1. manifests ----------------------------------------------------------------------------

def load_manifests():
    import yaml  # kubernetes-validate depends on PyYAML; this runs inside its venv
    if shutil.which("kubectl"):
        text = run(["kubectl", "kustomize", K8S_DIR], check=True).stdout
    else:
        names = yaml.safe_load(open(os.path.join(K8S_DIR, "kustomization.yaml")))["resources"]
        text = "\n---\n".join(open(os.path.join(K8S_DIR, n)).read() for n in names)
    return [d for d in yaml.safe_load_all(text) if d]


def validate(docs, version):
    import yaml
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump_all(docs, f)
    r = run([os.path.join(VENV, "bin/kubernetes-validate"), "--strict", "--quiet", "-k", version, f.name])
    os.unlink(f.name)
    return r.returncode == 0, r.stdout + r.stderr


def serve_flags(binary):
    """The long flags `serve --help` lists: the environment variables the server reads."""
    text = run([binary, "serve", "--help"]).stdout
    return {w.lstrip("-").upper().replace("-", "_") for w in text.split() if w.startswith("--")}


def check_manifests(binary):
    docs = load_manifests()
    kinds = {d["kind"]: d for d in docs}
    check(set(kinds) >= {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"},
          f"manifests hold Deployment, Service, HPA and PDB ({sorted(kinds)})")
    for version in ("1.29.0", "1.37.0"):
        ok, out = validate(docs, version)
        check(ok, f"kubernetes-validate --strict, Kubernetes {version}" + ("" if ok else f":\n{out}"))
    bad = copy.deepcopy(docs)
    c = next(d for d in bad if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]
    c["readinesProbe"] = c.pop("readinessProbe")
    ok, _ = validate(bad, "1.37.0")
    check(not ok, "the validator rejects a misspelt field (readinesProbe)")

    dep = kinds["Deployment"]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    port = int(env.get("PORT", "7997"))
    check(any(p["containerPort"] == port for p in c["ports"]), f"containerPort is PORT ({port})")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c[probe]["httpGet"]
        check(get["path"] == "/health" and get["port"] in ("http", port), f"{probe} GETs /health on the server port")
    sleep = int(c["lifecycle"]["preStop"]["exec"]["command"][-1])
    drain = int(env.get("DRAIN_TIMEOUT", "30"))
    check(pod["terminationGracePeriodSeconds"] > sleep + drain,
          f"grace period {pod['terminationGracePeriodSeconds']} s > preStop {sleep} s + drain {drain} s")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    for kind, sel in (("Deployment", dep["spec"]["selector"]["matchLabels"]),
                      ("Service", kinds["Service"]["spec"]["selector"]),
                      ("PodDisruptionBudget", kinds["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"])):
        check(all(labels.get(k) == v for k, v in sel.items()), f"{kind} selector matches the pod labels")
    target = kinds["HorizontalPodAutoscaler"]["spec"]["scaleTargetRef"]
    check(target["kind"] == "Deployment" and target["name"] == dep["metadata"]["name"], "HPA scales the Deployment")
    metrics = [m["pods"]["metric"]["name"] for m in kinds["HorizontalPodAutoscaler"]["spec"]["metrics"]
               if m["type"] == "Pods"]
    check(metrics == ["te_queue_size"], "HPA's Pods metric is te_queue_size (the /metrics gauge)")
    known = serve_flags(binary)
    check(all(name in known for name in env), f"every env name is a serve flag ({sorted(env)})")
    check(pod["securityContext"].get("runAsNonRoot") is True, "pods run as non-root")


# ---- 2. and 3. images ------------------------------------------------------------------------

class Tool:
    """podman or docker, with what this machine needs to build and run."""

    def __init__(self):
        self.name, self.build_args, self.run_args = None, [], []
        if shutil.which("docker") and run(["docker", "info"]).returncode == 0:
            self.name = "docker"
        elif shutil.which("podman"):
            self.name = "podman"
            self.build_args = ["--isolation=chroot", "--pull=never"]
            # crun refuses hybrid cgroup hierarchies; runc copes. Containers may
            # not raise limits above this process' hard ones.
            import resource
            nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            self.run_args = (["--runtime", "runc"] if shutil.which("runc") else []) + \
                ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", "nproc=4096:4096"]

    def cmd(self, *args):
        return [self.name, *args]

    def run_flags(self):
        return self.run_args

    def has_image(self, ref):
        return run(self.cmd("image", "inspect", ref)).returncode == 0


def ensure_base(tool):
    if tool.has_image(BASE) or run(tool.cmd("pull", BASE), timeout=120).returncode == 0:
        return True
    if not shutil.which("debootstrap"):
        print(f"skip images: {BASE} is not local, the registry is out of reach and debootstrap is missing")
        return False
    root = tempfile.mkdtemp(prefix="iv-rootfs-")
    r = run(["debootstrap", "--variant=minbase", "bookworm", root, "http://deb.debian.org/debian"])
    if r.returncode:
        print(f"skip images: debootstrap failed:\n{r.stderr[-2000:]}")
        return False
    tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run(tool.cmd("import", "--change", 'CMD ["bash"]', "-", BASE), stdin=tar.stdout,
                         capture_output=True, text=True)
    tar.wait()
    shutil.rmtree(root, ignore_errors=True)
    check(imp.returncode == 0, f"{BASE} made from Debian's archive with debootstrap")
    return imp.returncode == 0


def build(tool, dockerfile, tag, build_args=(), context=ROOT):
    t0 = time.time()
    args = tool.cmd("build", *tool.build_args, "-f", dockerfile, "-t", tag)
    for a in build_args:
        args += ["--build-arg", a]
    r = run(args + [context])
    ok = r.returncode == 0
    check(ok, f"build {os.path.relpath(dockerfile, ROOT)} -> {tag} ({time.time() - t0:.0f} s)"
          + ("" if ok else ":\n" + (r.stdout + r.stderr)[-3000:]))
    return ok


def in_image(tool, tag, *cmd):
    return run(tool.cmd("run", "--rm", *tool.run_flags(), "--entrypoint", cmd[0], tag, *cmd[1:]))


def libraries_resolve(tool, tag, binary):
    r = in_image(tool, tag, "ldd", binary)
    check(r.returncode == 0 and "not found" not in r.stdout,
          f"{tag}: every library of {binary} resolves" + ("" if r.returncode == 0 else f":\n{r.stderr}"))


def embed(url, texts):
    req = urllib.request.Request(url + "/embed", json.dumps({"inputs": texts}).encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def cosine(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def check_cpu_image(tool, binary):
    tag = "localhost/infinity_v3:cpu-test"
    if not build(tool, os.path.join(ROOT, "deploy/docker/Dockerfile"), tag):
        return
    libraries_resolve(tool, tag, "/usr/local/bin/infinity_v3")
    uid = in_image(tool, tag, "id", "-u").stdout.strip()
    check(uid not in ("", "0"), f"the image runs as a non-root user (uid {uid})")

    texts = ["a container answers as the host does", "the second input, longer than the first one"]
    host = Server(binary, FIXTURE).start()
    want = embed(host.url, texts)
    host.stop()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    name = f"iv-deploy-{os.getpid()}"
    r = run(tool.cmd("run", "-d", "--name", name, *tool.run_flags(), "--network", "host",
                     "-v", f"{FIXTURE}:/models/bert:ro", "-e", "MODEL_ID=/models/bert", "-e", f"PORT={port}",
                     "-e", "HOSTNAME=not-an-address", tag))
    if not check(r.returncode == 0, "the container starts" + ("" if r.returncode == 0 else ":\n" + r.stderr)):
        return
    try:
        url, got = f"http://127.0.0.1:{port}", None
        for _ in range(200):
            try:
                got = embed(url, texts)
                break
            except OSError:
                time.sleep(0.1)
        check(got is not None, "the container serves MODEL_ID on PORT, both from the environment")
        if got:
            worst = max(abs(x - y) for a, b in zip(got, want) for x, y in zip(a, b))
            cos = min(cosine(a, b) for a, b in zip(got, want))
            check(worst <= 1e-4 and cos >= 0.99999,
                  f"its /embed equals the host binary's (max abs {worst:.2e}, cosine {cos:.7f})")
        t0 = time.time()
        run(tool.cmd("stop", "-t", "40", name))
        code = run(tool.cmd("inspect", "--format", "{{.State.ExitCode}}", name)).stdout.strip()
        check(code == "0", f"SIGTERM (stop) drains and exits 0 (exit {code}, {time.time() - t0:.1f} s)")
    finally:
        logs = run(tool.cmd("logs", name)).stdout
        run(tool.cmd("rm", "-f", name))
        if failures:
            print(logs[-3000:])


def make_standin(tool, tag, files, context):
    """An image FROM the Debian base with `files` (paths under /usr/local/cuda) at the same place."""
    os.makedirs(os.path.join(context, "cuda/lib"), exist_ok=True)
    for rel in files:
        src = os.path.join("/usr/local/cuda", rel)
        for path in sorted(glob.glob(src)):
            dst = os.path.join(context, "cuda", os.path.relpath(path, "/usr/local/cuda"))
            if os.path.isdir(path):
                shutil.copytree(path, dst, symlinks=True)
            else:
                shutil.copy2(path, dst, follow_symlinks=False)
    if not os.path.exists(os.path.join(context, "cuda/lib64")):
        os.symlink("lib", os.path.join(context, "cuda/lib64"))
    with open(os.path.join(context, "Containerfile"), "w") as f:
        f.write(f"FROM {BASE}\nCOPY cuda /usr/local/cuda\nENV PATH=/usr/local/cuda/bin:/usr/sbin:/usr/bin:/sbin:/bin\n")
    return build(tool, os.path.join(context, "Containerfile"), tag, context=context)


def check_cuda_image(tool):
    if not os.path.exists("/usr/local/cuda/bin/nvcc"):
        print("skip the CUDA image: no CUDA toolkit in /usr/local/cuda for the stand-in bases")
        return
    tmp = tempfile.mkdtemp(prefix="iv-cuda-standin-")
    libs = ["lib/libcudart.so*", "lib/libcublas.so*", "lib/libcublasLt.so*"]
    ok = make_standin(tool, "localhost/iv-standin/cuda-devel", ["bin", "nvvm", "include", "lib/libcudadevrt.a"] + libs,
                      os.path.join(tmp, "devel")) and \
        make_standin(tool, "localhost/iv-standin/cuda-runtime", libs, os.path.join(tmp, "runtime"))
    shutil.rmtree(tmp, ignore_errors=True)
    tag = "localhost/infinity_v3:cuda-test"
    if not ok or not build(tool, os.path.join(ROOT, "deploy/docker/Dockerfile.cuda"), tag,
                           ["CUDA_DEVEL=localhost/iv-standin/cuda-devel",
                            "CUDA_RUNTIME=localhost/iv-standin/cuda-runtime"]):
        return
    libraries_resolve(tool, tag, "/usr/local/bin/infinity_v3")
    r = run(tool.cmd("run", "--rm", *tool.run_flags(), "-v", f"{FIXTURE}:/models/bert:ro", tag,
                     "--model-id", "/models/bert"), timeout=120)
    text = r.stdout + r.stderr
    has_gpu = os.path.exists("/dev/nvidia0")
    if has_gpu:
        print("a GPU is present: the CUDA image's serving is checked by scripts/gpu-check, not here")
    else:
        check(r.returncode != 0 and "cuda" in text.lower(),
              f"without a GPU, DEVICE=cuda fails with a message (exit {r.returncode}: {text.strip()[-200:]})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/release/infinity_v3"))
    ap.add_argument("--skip-images", action="store_true")
    ap.add_argument("--skip-cuda", action="store_true")
    a = ap.parse_args()
    check_manifests(a.binary)
    if not a.skip_images:
        tool = Tool()
        if not tool.name:
            print("skip images: neither podman nor a docker daemon")
        elif ensure_base(tool):
            check_cpu_image(tool, a.binary)
            if not a.skip_cuda:
                check_cuda_image(tool)
    print(f"\n{len(failures)} failure(s)" if failures else "\nall deployment checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

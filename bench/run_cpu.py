#!/usr/bin/env python3
"""CPU benchmark: infinity_v3 against sentence-transformers (torch),
onnxruntime and ctranslate2, in one run, at the same thread count.

    make bench                         # builds, then runs the full harness
    make bench BENCH_ARGS=--quick      # the short run (< 3 minutes)
    python3 bench/run_cpu.py [--quick] [--threads 2] [--models DIR ...] [--engines ...]

See bench/README.md for what is measured and how. Results go to
bench/results/cpu.json (every raw run time included) and
bench/results/cpu_ratios.png, and a table is printed.
"""
import argparse
import datetime
import json
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import cpu_machine  # noqa: E402
import cpu_report  # noqa: E402
import cpu_workloads  # noqa: E402
import server_overhead  # noqa: E402

ENGINES = ["infinity_v3", "torch", "onnxruntime", "ctranslate2"]
PEERS = ENGINES[1:]
BENCH_MODELS = os.path.join(".cache", "bench-models")
CONVERTED = os.path.join(".cache", "bench-converted")
REAL_MODEL = os.path.join(".cache", "models", "all-MiniLM-L6-v2")

# Run counts. A batch run repeats until max_runs or, past min_runs, until
# max_seconds; latency the same with many more, shorter runs. Each engine
# stays loaded in its own process and the runs are shared out over `slices`:
# slice after slice of one workload, the engines take turns (order rotated),
# so engines compared in one slice ran seconds apart (see bench_model).
PROFILES = {
    "full": dict(models=["minilm-l6", "bert-base"],
                 batch=dict(warmup=1, min_runs=6, max_runs=12, max_seconds=8.0),
                 latency=dict(warmup=5, min_runs=60, max_runs=480, max_seconds=4.0),
                 slices=6, cli_runs=2, sgemm=dict(n=2048, runs=7), membw=dict(runs=7),
                 server=dict(rounds=6, requests=100)),
    "quick": dict(models=["minilm-l6"],
                  batch=dict(warmup=1, min_runs=4, max_runs=8, max_seconds=2.0),
                  latency=dict(warmup=3, min_runs=40, max_runs=200, max_seconds=1.5),
                  slices=4, cli_runs=1, sgemm=dict(n=2048, runs=5), membw=dict(runs=5),
                  server=dict(rounds=4, requests=50)),
}
# Pause between two engines' turns, for the last one's idle threads to stop
# spinning (OpenMP's default spin, Intel OpenMP's 200 ms KMP_BLOCKTIME).
TURN_PAUSE_S = 0.3
# --passive: every engine's idle threads sleep (OMP_WAIT_POLICY=PASSIVE, and
# no spinning in onnxruntime's pool), not only torch's. On a machine shared
# with other work spinning threads lose whole scheduler slices at each barrier.
PASSIVE_ALL = False
# --isa avx2: every engine runs only AVX2/FMA code, as on the Zen 2 machines
# issue 25 targets (see bench/README.md). onnxruntime has no switch of its
# own: it runs with bench/cpuid_avx2.c preloaded, which hides AVX-512 from
# CPUID, where the CPU can fault on CPUID; elsewhere it keeps the CPU's best
# and the table says so.
ISA = None
# The preload, set by main() when the CPU and the build allow it.
CPUID_SHIM = None
ISA_ENV = {
    "avx2": {
        "infinity_v3": {"IV_CPU_ISA": "avx2", "OPENBLAS_CORETYPE": "Haswell"},
        "torch": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"},
        # Its own kernels, and the MKL and oneDNN it does its matrix products with.
        "ctranslate2": {"CT2_FORCE_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    },
}
CLI_SENTENCES = 1000
CLI_BATCH = 32  # sentence-transformers' default encode batch size


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def engine_env(engine, threads):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "RAYON_NUM_THREADS"):
        env[var] = str(threads)
    env["HF_HUB_OFFLINE"] = "1"
    env.pop("OMP_WAIT_POLICY", None)
    if engine == "torch" or PASSIVE_ALL:
        # Idle OpenMP workers sleep instead of spinning between ops, as
        # PyTorch recommends when it shares the cores.
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    if ISA:
        env.update(ISA_ENV[ISA].get(engine, {}))
        if engine == "onnxruntime" and CPUID_SHIM:
            env["LD_PRELOAD"] = CPUID_SHIM
    return env


def cpuid_shim(build):
    """The CPUID-masking preload for engines with no ISA switch, or None
    with the reason logged."""
    path = os.path.abspath(os.path.join(build, "libcpuid_avx2.so"))
    if "cpuid_fault" not in cpu_machine.flags():
        log("this CPU cannot fault on CPUID: onnxruntime keeps its best instruction set")
        return None
    if not os.path.isfile(path):
        log(f"{path} is missing (make bench-avx2 builds it): onnxruntime keeps its best instruction set")
        return None
    return path


def run_measured(cmd, env, stdin_path=None, stdout_path=None, timeout=600):
    """Runs cmd; returns (exit code, wall seconds, peak RSS KiB of the child, stderr tail)."""
    with tempfile.TemporaryFile() as err, \
            open(stdin_path or os.devnull, "rb") as fin, \
            open(stdout_path or os.devnull, "wb") as fout:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, env=env, stdin=fin, stdout=fout, stderr=err, cwd=ROOT)
        deadline = t0 + timeout
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:]
    return p.returncode, wall, ru.ru_maxrss, tail


def loadavg():
    try:
        return [float(x) for x in open("/proc/loadavg").read().split()[:3]]
    except OSError:
        return None


def versions():
    out = {"python": platform.python_version()}
    for mod in ("torch", "transformers", "sentence_transformers", "onnxruntime", "ctranslate2", "tokenizers",
                "numpy"):
        try:
            from importlib.metadata import version
            out[mod] = version(mod.replace("_", "-"))
        except Exception:
            out[mod] = None
    try:
        out["infinity_v3_commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                                   capture_output=True, text=True).stdout.strip()
    except OSError:
        pass
    return out


def openblas_cores():
    """OPENBLAS_CORETYPE values to measure sgemm with: OpenBLAS's own choice
    (None) and, unless the environment already fixes one, each kernel set
    this CPU's flags can run. An OpenBLAS older than the CPU does not know
    it and falls back to a generic kernel set (Debian's 0.3.21 runs Prescott
    SSE3 kernels on a 2023 Xeon: ~55 instead of ~245 GFLOP/s on 2 cores),
    which would make any fraction of "the machine's sgemm peak" meaningless.
    The peak is the best of these, and the core is recorded with it."""
    if os.environ.get("OPENBLAS_CORETYPE"):
        return [None]
    f = cpu_machine.flags()
    cores = [None] if not ISA else []
    if {"avx2", "fma"} <= f:
        cores += ["Haswell", "Zen"]
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"} <= f and ISA != "avx2":
        cores += ["SkylakeX"]
        if "avx512_bf16" in f:
            cores += ["Cooperlake"]
    return cores


def measure_sgemm(build, sgemm, threads_list, into=None):
    """Median GFLOP/s of square sgemm per thread count, the best over the
    OpenBLAS kernel sets this CPU runs (openblas_cores). Called at the start
    and at the end of the run: on a shared machine either can be disturbed,
    so the peak kept is the better of the two (every measurement is recorded)."""
    exe = os.path.join(build, "sgemm_peak")
    res = into if into is not None else {}
    for t in threads_list:
        rec = res.setdefault(str(t), {"sessions": []})
        if not os.access(exe, os.X_OK):
            rec["error"] = f"{exe} not built (make {exe})"
            continue
        for core in openblas_cores():
            env = engine_env("sgemm", t)
            if core:
                env["OPENBLAS_CORETYPE"] = core
            p = subprocess.run([exe, str(sgemm["n"]), str(sgemm["runs"])], env=env, capture_output=True, text=True,
                               cwd=ROOT)
            if p.returncode != 0:
                rec.setdefault("errors", []).append(f"{core or 'default'}: {p.stderr.strip()[-300:]}")
                continue
            rec["sessions"].append(json.loads(p.stdout))
        if rec["sessions"]:
            best = max(rec["sessions"], key=lambda x: x["median_gflops"])
            rec["median_gflops"], rec["core"] = best["median_gflops"], best.get("core")
    return res


def membw_mib():
    """Buffer size for bench/membw.c: 8 times the L3 cache (one instance),
    at least 256 MiB, at most 4 GiB, so that no read is served from cache."""
    l3 = cpu_machine.caches().get("L3", {}).get("size_kib") or 32 * 1024
    return int(min(4096, max(256, 8 * l3 // 1024)))


def measure_sessions(build, tool, args, best_key, threads_list, into=None):
    """Runs bench tool `tool` (a JSON line out) with `args` once per thread
    count, adding each answer to that count's "sessions" (the harness calls
    it at the start and at the end of a run) and keeping the best of
    best_key over them."""
    exe = os.path.join(build, tool)
    res = into if into is not None else {}
    for t in threads_list:
        rec = res.setdefault(str(t), {"sessions": []})
        if not os.access(exe, os.X_OK):
            rec["error"] = f"{exe} not built (make {exe})"
            continue
        p = subprocess.run([exe] + [str(a) for a in args], env=engine_env(tool, t), capture_output=True, text=True,
                           cwd=ROOT)
        if p.returncode != 0:
            rec.setdefault("errors", []).append((p.stdout + p.stderr).strip()[-300:])
            continue
        rec["sessions"].append(json.loads(p.stdout))
        rec[best_key] = max(x[best_key] for x in rec["sessions"])
    return res


def measure_membw(build, runs, threads_list, into=None):
    """Sustained read bandwidth (bench/membw.c, best of `runs` reads of a
    buffer far larger than the L3) per thread count, at the start and at the
    end of the run like the sgemm peak; the best over both is kept. It sets
    the weight-streaming floor of the latency workloads
    (cpu_report.add_stream_fractions)."""
    return measure_sessions(build, "membw", [membw_mib(), runs], "best_gbs", threads_list, into)


def fma_isa():
    """The vector width of the run's FMA ceiling: AVX-512 where the CPU has it
    and the run is not held to AVX2, else AVX2."""
    return "avx512" if "avx512f" in cpu_machine.flags() and ISA != "avx2" else "avx2"


def measure_fma(build, runs, threads_list, into=None):
    """The FP32 instruction ceiling (bench/fma_peak.c: FMA chains in
    registers, best of `runs`) per thread count, at the start and the end of
    the run like the sgemm peak; the best over both is kept. It shows the
    headroom that "% of sgemm peak" hides where OpenBLAS's kernel set is
    slow for the core (cpu_report.add_peak_fractions)."""
    res = measure_sessions(build, "fma_peak", [fma_isa(), runs], "best_gflops", threads_list, into)
    for rec in res.values():
        if rec.get("sessions"):
            rec["isa"] = rec["sessions"][-1]["isa"]
    return res


# What sgemm_adjacent needs: set in main once the start-of-run peak has
# picked OpenBLAS's best kernel set.
ADJACENT = {}


def sgemm_adjacent():
    """The sgemm rate right now: a short measurement (3 runs, best kernel set)
    taken just before every engine's turn at a batch workload (bench_model).
    The machines are shared KVM guests whose speed drifts by 30% over
    minutes; "% adj" divides the FLOP/s of each turn by the rate measured
    right before it, so a slow phase of the machine lowers both sides of the
    fraction alike."""
    if not ADJACENT:
        return None
    env = engine_env("sgemm", ADJACENT["threads"])
    if ADJACENT.get("core"):
        env["OPENBLAS_CORETYPE"] = ADJACENT["core"]
    p = subprocess.run([os.path.join(ADJACENT["build"], "sgemm_peak"), str(ADJACENT["n"]), "3"], env=env,
                       capture_output=True, text=True, cwd=ROOT)
    return json.loads(p.stdout)["median_gflops"] if p.returncode == 0 else None


def membw_adjacent(build, threads):
    """The read bandwidth right now (bench/membw.c, best of 3 reads): taken
    just before every engine's turn at a latency workload, as sgemm_adjacent
    is before batch turns. The weight-streaming floor of a turn uses the
    bandwidth of its own moment ("xs adj"), since the machine's bandwidth
    drifts too (35 to 45 GB/s over one afternoon on the 2-core Zen 4)."""
    exe = os.path.join(build, "membw")
    if not os.access(exe, os.X_OK):
        return None
    p = subprocess.run([exe, str(membw_mib()), "3"], env=engine_env("membw", threads), capture_output=True,
                       text=True, cwd=ROOT)
    return json.loads(p.stdout)["best_gbs"] if p.returncode == 0 else None


def convert(model_dir, engines, threads):
    """Exports for onnxruntime / ctranslate2 (cached); returns (dir, {engine: error})."""
    key = os.path.basename(os.path.normpath(model_dir))
    out = os.path.join(CONVERTED, key)
    flags = [f for e, f in (("onnxruntime", "--onnx"), ("ctranslate2", "--ct2")) if e in engines]
    errors = {}
    if not flags:
        return out, errors
    cmd = [sys.executable, os.path.join(HERE, "cpu_convert.py"), "--model", model_dir, "--out", out] + flags
    rc, wall, _, tail = run_measured(cmd, engine_env("convert", threads))
    if wall > 2:
        log(f"  converted {model_dir} for {', '.join(flags)} in {wall:.0f}s")
    for e, part in (("onnxruntime", "onnx"), ("ctranslate2", "ct2")):
        if e in engines and not os.path.isfile(os.path.join(out, part, "stamp")):
            errors[e] = f"conversion failed: {tail.strip()[-300:]}"
    return out, errors


class Worker:
    """One engine kept loaded in its own process (bench_engine --serve or
    cpu_worker.py --serve; the protocol is in bench_engine.c)."""

    def __init__(self, engine, model_dir, converted, wl_path, threads, build):
        if engine == "infinity_v3":
            exe = os.path.join(build, "bench_engine")
            if not os.access(exe, os.X_OK):
                raise WorkerError(f"{exe} not built (make {exe})")
            cmd = [exe, "--model-id", model_dir, "--workloads", wl_path, "--serve"]
        else:
            cmd = [sys.executable, os.path.join(HERE, "cpu_worker.py"), "--engine", engine, "--model", model_dir,
                   "--converted", converted, "--threads", str(threads), "--workloads", wl_path, "--serve"]
        self.err = tempfile.TemporaryFile()
        self.p = subprocess.Popen(cmd, env=engine_env(engine, threads), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=self.err, cwd=ROOT, text=True)
        self.info = self._reply(timeout=600)

    def _reply(self, timeout):
        ready, _, _ = select.select([self.p.stdout], [], [], timeout)
        line = self.p.stdout.readline() if ready else ""
        if not line:
            self.p.kill()
            self.p.wait()
            self.err.seek(0)
            tail = self.err.read().decode(errors="replace")[-600:]
            raise WorkerError(("timed out" if not ready else f"exit {self.p.returncode}") + f": {tail.strip()}")
        return json.loads(line)

    def run(self, name, timeout=900):
        self.p.stdin.write(name + "\n")
        self.p.stdin.flush()
        return self._reply(timeout)

    def close(self):
        """Ends the process; returns its final statistics with the kernel's
        count of its peak RSS."""
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        final = self._reply(timeout=60)
        _, status, ru = os.wait4(self.p.pid, 0)
        self.p.returncode = os.waitstatus_to_exitcode(status)
        final["process_max_rss_kb"] = ru.ru_maxrss
        return final


class WorkerError(Exception):
    pass


def rotated(engines, k):
    k %= len(engines)
    return engines[k:] + engines[:k]


def per_slice(workloads, slices):
    """The same workloads with their run counts and time caps shared out over slices."""
    out = []
    for w in workloads:
        w = dict(w)
        for key in ("min_runs", "max_runs"):
            w[key] = -(-w[key] // slices)
        w["max_seconds"] = w["max_seconds"] / slices
        out.append(w)
    return out


def bench_model(model_dir, engines, threads, profile, build, tmp):
    """Workloads (a)-(c), interleaved. Every engine is loaded once, in its own
    process; then for each workload, in each of profile["slices"] slices,
    the engines take turns (order rotated per slice) at that slice's share
    of the runs, each batch turn just after an sgemm rate measurement and
    each latency turn just after a read bandwidth measurement.
    The machines are shared KVM guests whose speed drifts by 30% over
    minutes: engines compared within one slice ran seconds apart, so the
    report's speedups are medians of per-slice ratios, and "% adj" is the
    median over turns of the turn's FLOP/s over the sgemm rate just before."""
    arith = cpu_workloads.model_arith(model_dir)
    workloads = cpu_workloads.id_workloads(model_dir, profile)
    slices = profile["slices"]
    wl_path = os.path.join(tmp, os.path.basename(os.path.normpath(model_dir)) + ".workloads.json")
    with open(wl_path, "w") as f:
        json.dump({"workloads": per_slice(workloads, slices)}, f)
    converted, conv_errors = convert(model_dir, engines, threads)
    results = {e: {"error": conv_errors[e]} for e in conv_errors}
    workers = {}
    for engine in engines:
        if engine in results:
            continue
        t0 = time.time()
        try:
            workers[engine] = Worker(engine, model_dir, converted, wl_path, threads, build)
            results[engine] = dict(workers[engine].info, workloads={})
            log(f"  loaded {engine}: {time.time() - t0:.0f}s")
        except WorkerError as e:
            results[engine] = {"error": str(e)}
            log(f"  {engine}: ERROR {str(e)[:200]}")
    try:
        for w in workloads:
            t0 = time.time()
            for k in range(slices):
                for engine in rotated(list(workers), k):
                    time.sleep(TURN_PAUSE_S)
                    # Batch turns are long enough for a FLOP rate worth
                    # comparing with the machine's sgemm rate of the moment.
                    rate = sgemm_adjacent() if w["kind"] == "batch" else None
                    bw = membw_adjacent(build, threads) if w["kind"] == "latency" else None
                    try:
                        rec = workers[engine].run(w["name"])
                    except WorkerError as e:
                        results[engine] = {"error": f"workload {w['name']}: {e}"}
                        del workers[engine]
                        log(f"  {engine}: ERROR {str(e)[:200]}")
                        continue
                    into = results[engine]["workloads"].setdefault(
                        w["name"], {"times_s": [], "slice_medians_s": [], "first_embedding": rec.get("first_embedding")})
                    into["times_s"] += rec["times_s"]
                    into["slice_medians_s"].append(float(np.median(rec["times_s"])))
                    if rate:
                        into.setdefault("sgemm_turn_gflops", []).append(rate)
                    if bw:
                        into.setdefault("membw_turn_gbs", []).append(bw)
            log(f"  {w['name']}: {slices} slices x {len(workers)} engines, {time.time() - t0:.0f}s")
    finally:
        for engine, wk in workers.items():
            try:
                results[engine].update(wk.close())
            except WorkerError as e:
                results[engine] = {"error": f"at exit: {e}"}
    meta = [{k: w[k] for k in ("name", "label", "kind")} | {"lengths": [len(s) for s in w["seqs"]]}
            for w in workloads]
    for m, w in zip(meta, workloads):
        if w["kind"] == "latency":
            # The bytes of weights the pass must read: its floor at the
            # machine's bandwidth (issue 25), set in add_stream_fractions.
            m["weight_stream"] = cpu_workloads.weight_stream_bytes(model_dir, w["seqs"][0])
    return cpu_report.summarise_model(model_dir, arith, meta, results)


def bench_cli(engines, threads, profile, build, tmp):
    """Workload (d): 1,000 sentences of text through each engine's user path,
    tokenization included, in a fresh process (load included in the total)."""
    model = REAL_MODEL
    if not os.path.isfile(os.path.join(model, "model.safetensors")):
        return {"error": f"{model} missing: run scripts/fetch-models.sh (make models)"}
    texts = cpu_workloads.sentences(CLI_SENTENCES)
    text_path = os.path.join(tmp, "sentences.txt")
    with open(text_path, "w") as f:
        f.write("\n".join(texts) + "\n")
    one_path = os.path.join(tmp, "one_sentence.txt")
    with open(one_path, "w") as f:
        f.write(texts[0] + "\n")
    tokens = cpu_workloads.count_tokens(model, texts, 256)
    arith = cpu_workloads.model_arith(model)
    converted, conv_errors = convert(model, engines, threads)
    wl_path = os.path.join(tmp, "cli.workloads.json")
    with open(wl_path, "w") as f:
        json.dump({"workloads": [dict(name="cli", texts=texts, batch_size=CLI_BATCH, warmup=0, min_runs=1,
                                      max_runs=1)]}, f)
    runs = {e: [{"error": conv_errors[e]}] if e in conv_errors else [] for e in engines}
    for k in range(profile["cli_runs"]):
        for engine in rotated(engines, k):
            if runs[engine] and "error" in runs[engine][-1]:
                continue
            r = cli_once(engine, model, converted, wl_path, text_path, one_path, threads, build, tmp)
            runs[engine].append(r)
            log(f"  cli {engine}: " + (f"{r['total_s']:.1f}s" if "error" not in r else f"ERROR {r['error'][:200]}"))
    per_engine = {}
    for engine in engines:
        ok = [r for r in runs[engine] if "error" not in r]
        # Best of the runs: a one-shot process is what the user waits for,
        # and the best is the least disturbed by the rest of the machine.
        per_engine[engine] = dict(min(ok, key=lambda r: r["total_s"]) if ok else runs[engine][-1], runs=runs[engine])
    return cpu_report.summarise_cli(model, arith, len(texts), tokens, per_engine)


def cli_once(engine, model, converted, wl_path, text_path, one_path, threads, build, tmp):
    env = engine_env(engine, threads)
    if engine == "infinity_v3":
        exe = os.path.join(build, "infinity_v3")
        if not os.access(exe, os.X_OK):
            return {"error": f"{exe} not built (make {exe})"}
        cmd = [exe, "embed", "--model-id", model]
        out_path = os.path.join(tmp, "cli_out.jsonl")
        runs = {}
        for what, path in (("startup", one_path), ("full", text_path)):
            rc, wall, rss, tail = run_measured(cmd, env, stdin_path=path, stdout_path=out_path)
            with open(out_path) as f:
                lines = f.read().splitlines()
            if rc:
                said = tail.strip() or (lines[0] if lines else "")
                return {"error": f"exit {rc} ({what} run): {said[-600:]}"}
            runs[what] = (wall, rss)
        (start_wall, _), (wall, rss) = runs["startup"], runs["full"]
        bad = sum(1 for line in lines if not line.startswith("["))
        if len(lines) != CLI_SENTENCES or bad:
            return {"error": f"expected {CLI_SENTENCES} embeddings, got {len(lines)} lines ({bad} not vectors)"}
        return {"total_s": wall, "startup_s": start_wall, "encode_s": max(wall - start_wall, 1e-9),
                "peak_rss_kb": rss, "first_embedding": json.loads(lines[0])}
    cmd = [sys.executable, os.path.join(HERE, "cpu_worker.py"), "--engine", engine, "--model", model,
           "--converted", converted, "--threads", str(threads), "--workloads", wl_path,
           "--out", wl_path + f".{engine}.json"]
    rc, wall, rss, tail = run_measured(cmd, env)
    if rc:
        return {"error": f"exit {rc}: {tail.strip()[-600:]}"}
    with open(wl_path + f".{engine}.json") as f:
        res = json.load(f)
    enc = res["workloads"]["cli"]["times_s"][0]
    return {"total_s": wall, "startup_s": wall - enc, "encode_s": enc, "load_s": res["load_s"],
            "peak_rss_kb": rss, "first_embedding": res["workloads"]["cli"]["first_embedding"]}


def bench_server_overhead(threads, profile, build, tmp):
    """The server's per-request fixed cost (issue 25): a one-word /embed
    request on the real all-MiniLM-L6-v2, sent again and again over one
    keep-alive connection, against bench_engine running the same token ids
    in-process; the two take turns in rounds like the engines of
    bench_model. bench/server_overhead.py has the HTTP side."""
    model = REAL_MODEL
    if not os.path.isfile(os.path.join(model, "model.safetensors")):
        return {"error": f"{model} missing: run scripts/fetch-models.sh (make models)"}
    exe = os.path.join(build, "infinity_v3")
    if not os.access(exe, os.X_OK):
        return {"error": f"{exe} not built (make {exe})"}
    cfg = profile["server"]
    ids = server_overhead.token_ids(model, server_overhead.TEXT)
    wl_path = os.path.join(tmp, "server_overhead.workloads.json")
    with open(wl_path, "w") as f:
        json.dump({"workloads": [dict(name="tiny", seqs=[ids], warmup=5, min_runs=cfg["requests"],
                                      max_runs=cfg["requests"], max_seconds=60.0)]}, f)
    engine_times, engine_rounds, first = [], [], None
    try:
        worker = Worker("infinity_v3", model, "", wl_path, threads, build)
    except WorkerError as e:
        return {"error": f"bench_engine: {e}"}
    try:
        with server_overhead.Client(exe, model, engine_env("infinity_v3", threads)) as client:
            for k in range(cfg["rounds"]):
                # Alternate which goes first, as bench_model rotates engines.
                for turn in (("engine", "server") if k % 2 == 0 else ("server", "engine")):
                    time.sleep(TURN_PAUSE_S)
                    if turn == "engine":
                        rec = worker.run("tiny")
                        engine_times += rec["times_s"]
                        engine_rounds.append(server_overhead.pct(rec["times_s"], 50))
                        first = first or rec.get("first_embedding")
                    else:
                        client.round(cfg["requests"])
            out = client.summary()
    except WorkerError as e:
        return {"error": f"bench_engine: {e}"}
    except (OSError, RuntimeError, ValueError) as e:
        return {"error": f"server: {e}"}
    finally:
        try:
            worker.close()
        except WorkerError:
            pass
    return server_overhead.summarise(out, engine_times, first, model, ids, threads, engine_rounds)


def resolve_models(args, profile):
    """Checkpoint directories: --models entries that are directories as they
    are; the other entries, or the profile's list, name shapes of
    tools/gen_bench_models.py, generated into .cache/bench-models when missing."""
    names = args.models or profile["models"]
    dirs = [m if os.path.isdir(m) else os.path.join(BENCH_MODELS, m) for m in names]
    missing = [m for m in names if not os.path.isdir(m)
               and not os.path.isfile(os.path.join(BENCH_MODELS, m, "model.safetensors"))]
    if missing:
        log(f"generating random-weight checkpoints {missing} (tools/gen_bench_models.py)")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_bench_models.py")] + missing, check=True,
                       cwd=ROOT, env=engine_env("gen", args.threads))
    return dirs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="MiniLM-L6 shape only, fewer runs (< 3 minutes)")
    ap.add_argument("--threads", type=int, default=2, help="threads for every engine (default %(default)s)")
    ap.add_argument("--models", nargs="*",
                    help="checkpoint directories, or shape names of tools/gen_bench_models.py (generated when "
                         "missing: bert-base, minilm-l6, modernbert-base, qwen3-0.6b); default: the profile's")
    ap.add_argument("--engines", nargs="*", default=ENGINES, choices=ENGINES)
    ap.add_argument("--passive", action="store_true",
                    help="OMP_WAIT_POLICY=PASSIVE (no spin-waiting) for every engine, not only torch")
    ap.add_argument("--no-cli", action="store_true", help="skip the 1,000-sentence CLI workload")
    ap.add_argument("--no-server-overhead", action="store_true",
                    help="skip the server's per-request fixed cost (bench/server_overhead.py)")
    ap.add_argument("--server-overhead-only", action="store_true",
                    help="measure the machine (sgemm, bandwidth) and the server's per-request fixed cost only")
    ap.add_argument("--isa", choices=sorted(ISA_ENV),
                    help="run only this instruction set where an engine can be told (infinity_v3: a build "
                         "made with ARCH=-march=haswell, see `make bench-avx2`); the sgemm peak uses the "
                         "OpenBLAS kernels of that set")
    ap.add_argument("--build", default=os.path.join("build", "release"),
                    help="folder holding infinity_v3, bench_engine and sgemm_peak")
    ap.add_argument("--out", default=os.path.join("bench", "results", "cpu.json"))
    ap.add_argument("--plot", default=os.path.join("bench", "results", "cpu_ratios.png"))
    ap.add_argument("--report-only", action="store_true",
                    help="measure nothing: print the table and redraw the plot from --out")
    args = ap.parse_args()
    os.chdir(ROOT)
    if args.report_only:
        with open(args.out) as f:
            result = json.load(f)
        if result.get("membw"):
            cpu_report.add_stream_fractions(result)
        print(cpu_report.table(result))
        cpu_report.plot(result, args.plot)
        return
    global PASSIVE_ALL, ISA, CPUID_SHIM
    PASSIVE_ALL = args.passive
    ISA = args.isa
    CPUID_SHIM = cpuid_shim(args.build) if ISA == "avx2" else None
    mode = "quick" if args.quick else "full"
    profile = PROFILES[mode]
    t_start = time.time()
    machine = cpu_machine.machine()
    result = {"meta": {"mode": mode, "threads": args.threads, "passive_all": args.passive, "isa": args.isa,
                       "isa_env": ISA_ENV.get(args.isa),
                       "isa_preload": {"onnxruntime": "bench/cpuid_avx2.c"} if CPUID_SHIM else None,
                       "date": datetime.datetime.now().isoformat(timespec="seconds"),
                       "cpu": machine["model_name"], "machine": machine,
                       "nproc": os.cpu_count(), "loadavg_before": loadavg(),
                       "versions": versions(), "profile": profile}}
    log(f"sgemm peak ({profile['sgemm']['n']}^3, OpenBLAS, 1 and {args.threads} threads)")
    result["sgemm"] = measure_sgemm(args.build, profile["sgemm"], sorted({1, args.threads}))
    log(f"memory read bandwidth ({membw_mib()} MiB buffer, 1 and {args.threads} threads)")
    result["membw"] = measure_membw(args.build, profile["membw"]["runs"], sorted({1, args.threads}))
    log(f"FMA ceiling ({fma_isa()}, 1 and {args.threads} threads)")
    result["fma"] = measure_fma(args.build, profile["membw"]["runs"], sorted({1, args.threads}))
    ADJACENT.update(build=args.build, threads=args.threads, n=profile["sgemm"]["n"],
                    core=result["sgemm"].get(str(args.threads), {}).get("core"))
    tmp = tempfile.mkdtemp(prefix="iv-bench-")
    try:
        result["models"] = []
        for model_dir in ([] if args.server_overhead_only else resolve_models(args, profile)):
            log(f"{model_dir}")
            result["models"].append(bench_model(model_dir, args.engines, args.threads, profile, args.build, tmp))
        if not args.no_server_overhead and "infinity_v3" in args.engines:
            log(f"server per-request fixed cost: {profile['server']['rounds']} rounds x "
                f"{profile['server']['requests']} requests, {REAL_MODEL}")
            result["server_overhead"] = bench_server_overhead(args.threads, profile, args.build, tmp)
        if not args.no_cli and not args.server_overhead_only:
            log(f"CLI path: {CLI_SENTENCES} sentences, {REAL_MODEL}")
            result["cli"] = bench_cli(args.engines, args.threads, profile, args.build, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    measure_sgemm(args.build, profile["sgemm"], sorted({1, args.threads}), into=result["sgemm"])
    measure_membw(args.build, profile["membw"]["runs"], sorted({1, args.threads}), into=result["membw"])
    measure_fma(args.build, profile["membw"]["runs"], sorted({1, args.threads}), into=result["fma"])
    result["meta"]["loadavg_after"] = loadavg()
    result["meta"]["wall_s"] = round(time.time() - t_start, 1)
    cpu_report.add_peak_fractions(result, args.threads)
    cpu_report.add_stream_fractions(result)
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(cpu_report.table(result))
    try:
        cpu_report.plot(result, args.plot)
        print(f"\nwrote {args.out} and {args.plot} ({result['meta']['wall_s']:.0f}s)")
    except ImportError as e:
        print(f"\nwrote {args.out}; no plot ({e})")


if __name__ == "__main__":
    main()

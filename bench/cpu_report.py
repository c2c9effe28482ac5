"""Statistics, ratios, the printed table and the ratio plot for bench/run_cpu.py.

Conventions:
  tokens/s     real (unpadded) tokens of one run / median run time
  p50, p99     percentiles of the run times (linear interpolation)
  speedup      how many times faster infinity_v3 is than the peer:
               peer median / infinity_v3 median (batches), peer p50 /
               infinity_v3 p50 (latency), peer / infinity_v3 encode time (CLI).
               Above 1: infinity_v3 is faster. Where the engines took turns
               in slices (run_cpu.bench_model), it is the median of the
               per-slice ratios, and "slices" gives their range: each ratio
               compares runs made seconds apart, so a drift of the machine's
               speed between slices cancels out.
  RSS ratio    peer peak RSS / infinity_v3 peak RSS (above 1: we use less)
  GFLOP/s      model FLOPs of the real tokens (cpu_workloads.model_flops) /
               median time; "% peak" divides by the measured sgemm peak at
               the same thread count; "% adj" is the median over an
               engine's turns of that turn's FLOP/s over the sgemm rate
               measured just before it (batch workloads); "% fma" divides
               by the FMA ceiling (bench/fma_peak.c: the cores' FMA units
               fed from registers, the highest rate any kernel can reach)
  x stream     latency workloads: p50 / the weight-streaming time, i.e. the
               bytes of FP32 weights the pass must read
               (cpu_workloads.weight_stream_bytes) / the best read bandwidth
               measured (bench/membw.c, 1 or N threads, start or end of the
               run). 1 is the floor; issue 25 wants infinity_v3's 8-token
               p50 within 1.2. Its inverse is "bandwidth_fraction" in the JSON.
  max|d|       max |difference| of the first sequence's embedding from
               sentence-transformers' (torch), a check that every engine
               computed the same thing
"""
import os

import numpy as np

import cpu_machine
import cpu_workloads

REFERENCE = "torch"
MAIN = "infinity_v3"


def _pct(times, q):
    return float(np.percentile(np.asarray(times), q)) if times else None


def _workload_stats(rec, lengths, arith, ref_first):
    times = rec.get("times_s") or []
    median = float(np.median(times)) if times else None
    tokens = sum(lengths)
    flops = cpu_workloads.model_flops(arith, lengths)
    st = {"runs": len(times), "tokens": tokens, "median_s": median,
          "p50_ms": _pct(times, 50) * 1e3 if times else None,
          "p99_ms": _pct(times, 99) * 1e3 if times else None,
          "min_ms": min(times) * 1e3 if times else None,
          "tokens_per_s": tokens / median if median else None,
          "model_gflop": flops / 1e9,
          "gflops": flops / median / 1e9 if median else None,
          "times_s": [round(t, 6) for t in times]}
    if rec.get("slice_medians_s"):
        st["slice_medians_s"] = rec["slice_medians_s"]
    turns = rec.get("sgemm_turn_gflops") or []
    if turns and len(turns) == len(rec.get("slice_medians_s") or []):
        # Each turn's FLOP/s over the sgemm rate measured just before it.
        st["sgemm_turn_gflops"] = turns
        st["adjacent_fractions"] = [flops / t / 1e9 / g for t, g in zip(rec["slice_medians_s"], turns)]
        st["adjacent_fraction"] = float(np.median(st["adjacent_fractions"]))
    bws = rec.get("membw_turn_gbs") or []
    if bws and len(bws) == len(rec.get("slice_medians_s") or []):
        st["membw_turn_gbs"] = bws  # per turn, for add_stream_fractions
    first = rec.get("first_embedding")
    if first is not None and ref_first is not None and len(first) == len(ref_first):
        st["max_abs_diff_vs_torch"] = float(np.max(np.abs(np.asarray(first) - np.asarray(ref_first))))
    return st


def summarise_model(model_dir, arith, workloads, results):
    ref = results.get(REFERENCE, {})
    engines = {}
    for engine, res in results.items():
        if "error" in res:
            engines[engine] = {"error": res["error"]}
            continue
        e = {"load_s": res.get("load_s"), "peak_rss_kb": res.get("peak_rss_kb"),
             "rss_after_load_kb": res.get("rss_after_load_kb"), "process_wall_s": res.get("process_wall_s"),
             "workloads": {}}
        if res.get("peak_activation_bytes") and arith.get("weight_bytes") and res.get("peak_rss_kb"):
            # Issue 5's memory target: weights + 20% + the largest batch's activations.
            budget = 1.2 * arith["weight_bytes"] + res["peak_activation_bytes"]
            e.update(peak_activation_bytes=res["peak_activation_bytes"], rss_budget_kb=budget / 1024,
                     within_rss_budget=res["peak_rss_kb"] <= budget / 1024)
        for w in workloads:
            rec = res["workloads"].get(w["name"], {})
            ref_first = ref.get("workloads", {}).get(w["name"], {}).get("first_embedding") if "error" not in ref \
                else None
            e["workloads"][w["name"]] = _workload_stats(rec, w["lengths"], arith, ref_first)
        engines[engine] = e
    summary = {"model": os.path.basename(os.path.normpath(model_dir)), "dir": model_dir, "arith": arith,
               "workloads": [{"name": w["name"], "label": w["label"], "kind": w["kind"],
                              "sequences": len(w["lengths"]), "tokens": sum(w["lengths"])}
                             | ({"weight_stream": w["weight_stream"]} if w.get("weight_stream") else {})
                             for w in workloads],
               "engines": engines}
    summary["ratios"] = _ratios(summary)
    return summary


def _ratios(summary):
    main = summary["engines"].get(MAIN, {})
    out = {}
    if "error" in main or not main:
        return out
    for w in summary["workloads"]:
        mine = main["workloads"][w["name"]]
        key = "median_s" if w["kind"] == "batch" else "p50_ms"
        row = {}
        for engine, e in summary["engines"].items():
            if engine == MAIN or "error" in e:
                continue
            theirs = e["workloads"][w["name"]]
            r = {"speedup": theirs[key] / mine[key] if mine[key] and theirs[key] else None}
            ms, ts = mine.get("slice_medians_s") or [], theirs.get("slice_medians_s") or []
            if len(ms) == len(ts) and len(ms) > 1 and all(ms):
                per = [t / m for t, m in zip(ts, ms)]
                r.update(speedup=float(np.median(per)), speedup_slices=per)
            if w["kind"] == "latency" and mine["p99_ms"] and theirs["p99_ms"]:
                r["speedup_p99"] = theirs["p99_ms"] / mine["p99_ms"]
            if main.get("peak_rss_kb") and e.get("peak_rss_kb"):
                r["rss_ratio"] = e["peak_rss_kb"] / main["peak_rss_kb"]
            row[engine] = r
        out[w["name"]] = row
    return out


def summarise_cli(model_dir, arith, n_texts, tokens, per_engine):
    # FLOPs of the real sequences are not known per sentence here; use the
    # mean length, which the attention term barely notices at ~15 tokens.
    mean_len = tokens / n_texts
    flops = 2 * arith["linear_params"] * tokens + arith["layers"] * n_texts * 4 * mean_len ** 2 * arith["attn_width"]
    out = {"model": model_dir, "sentences": n_texts, "tokens": tokens, "model_gflop": flops / 1e9, "engines": {}}

    def unit(v):
        v = np.asarray(v, dtype=np.float64)
        return v / max(np.linalg.norm(v), 1e-12)
    ref = per_engine.get(REFERENCE, {}).get("first_embedding")
    for engine, r in per_engine.items():
        if "error" in r:
            out["engines"][engine] = {"error": r["error"]}
            continue
        e = {k: v for k, v in r.items() if k != "first_embedding"}
        e["runs"] = [{k: v for k, v in x.items() if k != "first_embedding"} for x in r.get("runs", [])]
        # Engines differ in whether they L2-normalise; compare directions.
        if ref is not None and r.get("first_embedding") is not None and len(ref) == len(r["first_embedding"]):
            e["max_abs_diff_vs_torch"] = float(np.max(np.abs(unit(r["first_embedding"]) - unit(ref))))
        e["tokens_per_s"] = tokens / r["encode_s"]
        e["tokens_per_s_total"] = tokens / r["total_s"]
        e["gflops"] = flops / r["encode_s"] / 1e9
        out["engines"][engine] = e
    main = out["engines"].get(MAIN, {})
    out["ratios"] = {}
    if main and "error" not in main:
        for engine, e in out["engines"].items():
            if engine != MAIN and "error" not in e:
                out["ratios"][engine] = {"speedup": e["encode_s"] / main["encode_s"],
                                         "speedup_total": e["total_s"] / main["total_s"],
                                         "rss_ratio": e["peak_rss_kb"] / main["peak_rss_kb"]}
    return out


def add_peak_fractions(result, threads):
    """FLOP/s as fractions of the sgemm peak ("peak_fraction") and of the FMA
    ceiling ("fma_fraction"), when the run measured them."""
    peak = result.get("sgemm", {}).get(str(threads), {}).get("median_gflops")
    fma = result.get("fma", {}).get(str(threads), {}).get("best_gflops")
    result["sgemm_peak_gflops"] = peak
    result["fma_peak_gflops"] = fma
    records = [st for m in result.get("models", []) for e in m["engines"].values()
               for st in e.get("workloads", {}).values()]
    records += list(result.get("cli", {}).get("engines", {}).values())
    for st in records:
        if st.get("gflops"):
            if peak:
                st["peak_fraction"] = st["gflops"] / peak
            if fma:
                st["fma_fraction"] = st["gflops"] / fma


def stream_bandwidth(result):
    """(GB/s, thread count) of the best read bandwidth measured in the run,
    over the 1-thread and N-thread measurements at its start and end. The
    best, not the N-thread figure alone: on the shared KVM machines two
    threads have read slower than one, and a floor computed from a slow
    measurement would flatter every engine."""
    best = None
    for t, rec in (result.get("membw") or {}).items():
        if rec.get("best_gbs") and (best is None or rec["best_gbs"] > best[0]):
            best = (rec["best_gbs"], int(t))
    return best


def add_stream_fractions(result):
    """Each latency workload's weight-streaming time at the measured
    bandwidth, and each engine's p50 over it ("p50_over_stream") and its
    inverse, the fraction of the bandwidth reached ("bandwidth_fraction")."""
    bw = stream_bandwidth(result)
    result["stream_bandwidth_gbs"], result["stream_bandwidth_threads"] = bw if bw else (None, None)
    if not bw:
        return
    for m in result.get("models", []):
        for w in m["workloads"]:
            ws = w.get("weight_stream")
            if not ws:
                continue
            ws["stream_ms"] = ws["total_bytes"] / (bw[0] * 1e9) * 1e3
            for e in m["engines"].values():
                st = e.get("workloads", {}).get(w["name"])
                if st and st.get("p50_ms"):
                    st["p50_over_stream"] = st["p50_ms"] / ws["stream_ms"]
                    st["bandwidth_fraction"] = ws["stream_ms"] / st["p50_ms"]
                add_adjacent_stream(st, ws["total_bytes"])


def add_adjacent_stream(st, total_bytes):
    """The same ratio turn by turn, each turn's median over the streaming time
    at the bandwidth measured just before it ("p50_over_stream_adj", the
    median over turns): the floor of the moment, as "% adj" is for FLOP/s."""
    bws, meds = (st or {}).get("membw_turn_gbs") or [], (st or {}).get("slice_medians_s") or []
    if not bws or len(bws) != len(meds):
        return
    st["p50_over_stream_turns"] = [m / (total_bytes / (b * 1e9)) for m, b in zip(meds, bws)]
    st["p50_over_stream_adj"] = float(np.median(st["p50_over_stream_turns"]))


def _f(v, fmt):
    """v formatted, or "-" padded to the format's width when there is no number."""
    if isinstance(v, (int, float)) and v is not None:
        return format(v, fmt)
    width = fmt.split(".")[0]
    return "-".rjust(int(width)) if width.isdigit() else "-"


def _pc(fraction, width):
    """A fraction as a percentage column of `width` characters, "-" when absent."""
    return (_f(100 * fraction, f"{width - 1}.1f") + "%") if fraction else "-".rjust(width)


def table(result):
    meta = result["meta"]
    lines = [f"infinity_v3 CPU benchmark ({meta['mode']}), {meta['threads']} threads, {meta['cpu']}, "
             f"load average before {meta.get('loadavg_before')}, after {meta.get('loadavg_after')}"
             + (", OMP_WAIT_POLICY=PASSIVE for every engine" if meta.get("passive_all") else
                ", OMP_WAIT_POLICY=PASSIVE for torch only")]
    if meta.get("machine"):
        lines.append("machine: " + cpu_machine.describe(meta["machine"]))
    if meta.get("isa"):
        capped = ", ".join(sorted(meta.get("isa_env") or {}))
        if (meta.get("isa_preload") or {}).get("onnxruntime"):
            how = "onnxruntime with AVX-512 hidden from its CPUID (bench/cpuid_avx2.c preloaded)"
        else:
            how = "onnxruntime has no switch: it runs the CPU's best"
        lines.append(f"instruction sets capped at {meta['isa']} for {capped} ({how})")
    sg = result.get("sgemm", {})
    peaks = ", ".join(f"{t} thread{'s' if t != '1' else ''}: {_f(v.get('median_gflops'), '.1f')} GFLOP/s"
                      + (f" ({v['core']})" if v.get("core") else "") for t, v in sorted(sg.items()))
    lines.append(f"sgemm peak (OpenBLAS, {meta['profile']['sgemm']['n']}^3, median, best kernel set, "
                 f"better of start/end): {peaks}")
    fm = result.get("fma") or {}
    if fm:
        isa = next((v["isa"] for v in fm.values() if v.get("isa")), "?")
        rates = ", ".join(f"{t} thread{'s' if t != '1' else ''}: "
                          + (f"{v['best_gflops']:.1f} GFLOP/s" if v.get("best_gflops") else
                             f"unavailable ({v.get('error') or (v.get('errors') or ['?'])[-1]})"[:90])
                          for t, v in sorted(fm.items()))
        lines.append(f"FMA ceiling (bench/fma_peak.c, {isa} FMAs in registers, best of runs, better of start/end): "
                     f"{rates}; %fma divides by it")
    bw = result.get("membw") or {}
    if bw:
        mib = next((x["mib"] for v in bw.values() for x in v.get("sessions", [])), None)
        rates = ", ".join(f"{t} thread{'s' if t != '1' else ''}: "
                          + (f"{v['best_gbs']:.1f} GB/s" if v.get("best_gbs") else
                             f"unavailable ({v.get('error') or (v.get('errors') or ['?'])[-1]})"[:90])
                          for t, v in sorted(bw.items()))
        used = result.get("stream_bandwidth_gbs")
        lines.append(f"memory read bandwidth (bench/membw.c, {mib} MiB buffer, best of runs, better of start/end): "
                     f"{rates}" + (f"; weight-streaming floors use {used:.1f} GB/s" if used else ""))
    head = f"{'workload':<22}{'engine':<13}{'tok/s':>9}{'p50 ms':>9}{'p99 ms':>9}{'speedup':>9}{'slices':>13}" \
           f"{'GFLOP/s':>9}{'%peak':>7}{'%fma':>7}{'%adj':>7}{'xstrm':>7}{'xs adj':>7}{'max|d|':>9}"
    for m in result.get("models", []):
        a = m["arith"]
        lines += ["", f"{m['model']}: {a['model_type']}, {a['layers']} layers, hidden {a['hidden']}, "
                  f"{a['heads']} heads, {a['linear_params'] / 1e6:.1f}M matmul params ({m['dir']})"]
        for w in m["workloads"]:
            ws = w.get("weight_stream")
            if ws:
                lines.append(f"  {w['name']}: weights one pass reads {ws['total_bytes'] / 1e6:.1f} MB (matmul "
                             f"{ws['matmul_bytes'] / 1e6:.1f}, biases and norms {ws['vectors_bytes'] / 1e6:.2f}, "
                             f"embedding rows {ws['embeddings_bytes'] / 1e6:.2f}, FP32)"
                             + (f" = {ws['stream_ms']:.2f} ms at {result['stream_bandwidth_gbs']:.1f} GB/s"
                                if ws.get("stream_ms") else ""))
        lines.append(head)
        for w in m["workloads"]:
            for engine, e in m["engines"].items():
                label = f"{w['name']} ({w['tokens']} tok)" if engine == next(iter(m["engines"])) else ""
                if "error" in e:
                    lines.append(f"{label:<22}{engine:<13}  unavailable: {e['error'][:70]}")
                    continue
                st = e["workloads"][w["name"]]
                r = m["ratios"].get(w["name"], {}).get(engine, {})
                sp = "1" if engine == MAIN else _f(r.get("speedup"), ".2f")
                per = r.get("speedup_slices")
                rng = f"{min(per):.2f}-{max(per):.2f}" if per else ""
                lines.append(f"{label:<22}{engine:<13}{_f(st['tokens_per_s'], '9.0f')}{_f(st['p50_ms'], '9.2f')}"
                             f"{_f(st['p99_ms'], '9.2f')}{sp:>9}{rng:>13}{_f(st['gflops'], '9.1f')}"
                             f"{_pc(st.get('peak_fraction'), 7)}{_pc(st.get('fma_fraction'), 7)}"
                             f"{_pc(st.get('adjacent_fraction'), 7)}"
                             f"{_f(st.get('p50_over_stream'), '7.2f')}{_f(st.get('p50_over_stream_adj'), '7.2f')}"
                             f"{_f(st.get('max_abs_diff_vs_torch'), '9.1e')}")
        rss = []
        for engine, e in m["engines"].items():
            if "error" not in e:
                rss.append(f"{engine} {e['peak_rss_kb'] / 1024:.0f} MB (load {e['load_s']:.2f}s)")
        lines.append("peak RSS: " + ", ".join(rss))
        mine = m["engines"].get(MAIN, {})
        if mine.get("rss_budget_kb"):
            lines.append(f"{MAIN} memory budget (weights {a['weight_bytes'] / 2**20:.0f} MB x 1.2 + largest batch's "
                         f"activations {mine['peak_activation_bytes'] / 2**20:.0f} MB): "
                         f"{mine['rss_budget_kb'] / 1024:.0f} MB; peak RSS {mine['peak_rss_kb'] / 1024:.0f} MB, "
                         + ("within" if mine["within_rss_budget"] else "OVER"))
    cli = result.get("cli")
    if cli:
        lines.append("")
        if "error" in cli:
            lines.append(f"CLI path: unavailable: {cli['error']}")
        else:
            lines.append(f"CLI path: {cli['sentences']} sentences ({cli['tokens']} tokens) as text, "
                         f"{cli['model']}, fresh process each, tokenization included")
            lines.append(f"{'engine':<13}{'total s':>9}{'startup s':>10}{'encode s':>10}{'tok/s':>9}"
                         f"{'speedup':>9}{'total x':>9}{'RSS MB':>9}{'%peak':>8}{'max|d|':>9}")
            for engine, e in cli["engines"].items():
                if "error" in e:
                    lines.append(f"{engine:<13}  unavailable: {e['error'][:90]}")
                    continue
                r = cli["ratios"].get(engine, {})
                sp = "1" if engine == MAIN else _f(r.get("speedup"), ".2f")
                tot = "1" if engine == MAIN else _f(r.get("speedup_total"), ".2f")
                lines.append(f"{engine:<13}{e['total_s']:9.2f}{e['startup_s']:10.2f}{e['encode_s']:10.2f}"
                             f"{e['tokens_per_s']:9.0f}{sp:>9}{tot:>9}{e['peak_rss_kb'] / 1024:9.0f}"
                             f"{_pc(e.get('peak_fraction'), 8)}"
                             f"{_f(e.get('max_abs_diff_vs_torch'), '9.1e')}")
    so = result.get("server_overhead")
    if so:
        lines.append("")
        if "error" in so:
            lines.append(f"server per-request fixed cost: unavailable: {so['error'][:200]}")
        else:
            cos = so.get("cosine_server_vs_engine")
            lines.append(f"server per-request fixed cost: POST /embed {{\"inputs\": \"{so['text']}\"}} "
                         f"({so['tokens']} tokens, {os.path.basename(so['model'])}), {so['requests']} sequential "
                         f"requests over one keep-alive connection, {so['threads']} threads")
            lines.append(f"  server /embed p50 {_f(so['embed_p50_ms'], '.3f')} ms (p99 "
                         f"{_f(so['embed_p99_ms'], '.3f')}); engine in-process p50 {_f(so['engine_p50_ms'], '.3f')} ms "
                         f"(p99 {_f(so['engine_p99_ms'], '.3f')}); fixed cost (difference) "
                         f"{_f(so.get('fixed_cost_ms'), '.3f')} ms"
                         + (f" (median of {len(so['rounds_ms'])} rounds' differences, "
                            f"{min(so['rounds_ms']):.3f} to {max(so['rounds_ms']):.3f})" if so.get("rounds_ms") else "")
                         + ": HTTP, JSON, tokenization, batcher wake-up, client")
            lines.append(f"  GET /health p50 {_f(so['health_p50_ms'], '.3f')} ms (HTTP round trip and client alone)"
                         + (f"; server vs engine vector cosine {cos:.7f}" if cos is not None else ""))
    lines.append("")
    lines.append("xstrm: p50 / weight-streaming time (the bytes of weights one pass reads / the best bandwidth "
                 "measured); 1 is the memory floor. xs adj: the same per turn, at the bandwidth measured just "
                 "before that turn (median over turns).")
    lines.append("speedup: peer time / infinity_v3 time (median for batches, p50 for latency, encode time for "
                 "the CLI; total x: whole process). Above 1: infinity_v3 is faster. Batches and latency: the "
                 "engines took turns in slices; speedup is the median of the per-slice ratios, 'slices' their "
                 "range.")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    groups, values = [], {}
    peers = []
    for m in result.get("models", []):
        for w in m["workloads"]:
            row = m["ratios"].get(w["name"], {})
            if not row:
                continue
            metric = "p50" if w["kind"] == "latency" else "tok/s"
            groups.append(f"{m['model']}\n{w['name']}\n({metric})")
            for engine, r in row.items():
                if engine not in peers:
                    peers.append(engine)
                values.setdefault(engine, {})[len(groups) - 1] = r.get("speedup")
    cli = result.get("cli", {})
    if cli.get("ratios"):
        groups.append("CLI 1000\nsentences\n(encode)")
        for engine, r in cli["ratios"].items():
            if engine not in peers:
                peers.append(engine)
            values.setdefault(engine, {})[len(groups) - 1] = r.get("speedup")
    if not groups:
        return
    fig, ax = plt.subplots(figsize=(max(8, 1.1 * len(groups) + 2), 5))
    width = 0.8 / max(1, len(peers))
    for k, engine in enumerate(peers):
        xs = [i + (k - (len(peers) - 1) / 2) * width for i in range(len(groups))]
        ys = [values[engine].get(i) or 0 for i in range(len(groups))]
        bars = ax.bar(xs, ys, width, label=f"vs {engine}")
        for b, y in zip(bars, ys):
            if y:
                ax.annotate(f"{y:.2f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_yscale("log")
    plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    ax.yaxis.set_major_formatter(plain)
    ax.yaxis.set_minor_formatter(plain)
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_ylabel("infinity_v3 speedup (peer time / our time)")
    meta = result["meta"]
    wait = "every engine passive-waiting" if meta.get("passive_all") else "torch passive-waiting"
    ort_capped = (meta.get("isa_preload") or {}).get("onnxruntime")
    isa = f", {meta['isa']} only{'' if ort_capped else ' (onnxruntime uncapped)'}" if meta.get("isa") else ""
    mach = meta.get("machine") or {}
    cpu = f"{mach.get('model_name')} ({mach.get('microarch')}), " if mach else ""
    ax.set_title(f"infinity_v3 vs peers on CPU, {cpu}{meta['threads']} threads, {wait}{isa}\n({meta['mode']} run, "
                 f"{meta['date']})", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)

"""Unit tests of the CPU benchmark harness's own arithmetic (bench/): the
machine record, the weight-streaming byte count and the streaming floor.
No engine runs; standard library and numpy only.

    python3 -m unittest discover -s tests/bench -v     (make test-bench)
"""
import json
import os
import struct
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cpu_machine  # noqa: E402
import cpu_report  # noqa: E402
import cpu_workloads  # noqa: E402


class Microarch(unittest.TestCase):
    def test_amd(self):
        cases = [(0x17, 0x01, "Zen"), (0x17, 0x08, "Zen+"), (0x17, 0x18, "Zen+"), (0x17, 0x11, "Zen"),
                 (0x17, 0x31, "Zen 2"), (0x17, 0x71, "Zen 2"), (0x19, 0x01, "Zen 3"), (0x19, 0x21, "Zen 3"),
                 (0x19, 0x11, "Zen 4"), (0x19, 0x61, "Zen 4"), (0x19, 0xa0, "Zen 4"), (0x1a, 0x02, "Zen 5"),
                 (25, 17, "Zen 4")]  # the development machine: family 25 model 17
        for fam, model, want in cases:
            self.assertEqual(cpu_machine.microarch("AuthenticAMD", fam, model, 0), want, (hex(fam), hex(model)))

    def test_unknown_is_none(self):
        for vendor, fam, model in [("AuthenticAMD", 0x17, 0x50), ("AuthenticAMD", 0x15, 0x02),
                                   ("AuthenticAMD", 0x1a, 0xf0), ("GenuineIntel", 6, 0x99),
                                   ("GenuineIntel", 15, 0x06), ("HygonGenuine", 0x18, 0x01)]:
            self.assertIsNone(cpu_machine.microarch(vendor, fam, model, 0), (vendor, fam, model))

    def test_intel(self):
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 207, 2), "Emerald Rapids")
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 0x8f, 8), "Sapphire Rapids")
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 0x3f, 2), "Haswell-EP")
        # Model 0x55 is three generations, told apart by stepping.
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 0x55, 4), "Skylake-SP")
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 0x55, 7), "Cascade Lake")
        self.assertEqual(cpu_machine.microarch("GenuineIntel", 6, 0x55, 11), "Cooper Lake")

    def test_isa_flags(self):
        got = cpu_machine.isa({"avx2", "fma", "avx512f", "amx_int8"})
        self.assertEqual(got, {"avx2": True, "fma": True, "avx512f": True, "avx512_vnni": False, "avx_vnni": False,
                               "avx512_bf16": False, "amx": True})
        self.assertFalse(cpu_machine.isa({"avx2"})["amx"])

    def test_caches_from_sysfs(self):
        with tempfile.TemporaryDirectory() as root:
            for idx, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                               (2, "Unified", "2048K", "0"),
                                                               (3, "Unified", "105M", "0-3,8-11")]):
                d = os.path.join(root, f"index{idx}")
                os.makedirs(d)
                for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                    with open(os.path.join(d, name), "w") as f:
                        f.write(f"{value}\n")
            got = cpu_machine.caches(root)
        self.assertEqual(got["L1d"], {"size_kib": 48, "shared_by_cpus": 1})
        self.assertEqual(got["L2"]["size_kib"], 2048)
        self.assertEqual(got["L3"], {"size_kib": 105 * 1024, "shared_by_cpus": 8})

    def test_describe_names_everything(self):
        m = {"model_name": "AMD EPYC", "family": 25, "model": 17, "stepping": 1, "microarch": "Zen 4",
             "note": "AVX-512 executed as two 256-bit halves", "isa": cpu_machine.isa({"avx2", "fma", "avx512f"}),
             "caches": {"L1d": {"size_kib": 32, "shared_by_cpus": 1}, "L3": {"size_kib": 32768, "shared_by_cpus": 2}},
             "hypervisor": True}
        line = cpu_machine.describe(m)
        for part in ("AMD EPYC", "family 25 model 17 stepping 1", "Zen 4", "avx2 fma avx512f", "L1d 32 KiB",
                     "L3 32 MiB per 2 CPUs", "VM guest"):
            self.assertIn(part, line)
        self.assertNotIn("avx512_vnni", line)


def write_checkpoint(d, tensors, vocab):
    """A safetensors file whose header names `tensors` {name: (dtype, shape)}
    (the data is zeros), and a BERT-like config.json."""
    header, off = {}, 0
    for name, (dtype, shape) in tensors.items():
        n = 1
        for s in shape:
            n *= s
        size = n * {"F32": 4, "BF16": 2, "I64": 8}[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + size]}
        off += size
    raw = json.dumps(header).encode()
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + bytes(off))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
                   "intermediate_size": 16, "vocab_size": vocab}, f)


class WeightStream(unittest.TestCase):
    def test_counts(self):
        with tempfile.TemporaryDirectory() as d:
            write_checkpoint(d, {
                "embeddings.word_embeddings.weight": ("F32", [100, 8]),
                "embeddings.position_embeddings.weight": ("F32", [64, 8]),
                "embeddings.token_type_embeddings.weight": ("F32", [2, 8]),
                "embeddings.position_ids": ("I64", [1, 64]),  # a buffer, not a weight
                "embeddings.LayerNorm.weight": ("F32", [8]),
                "encoder.layer.0.attention.self.query.weight": ("BF16", [8, 8]),  # counted as FP32
                "encoder.layer.0.attention.self.query.bias": ("F32", [8]),
                "encoder.layer.0.intermediate.dense.weight": ("F32", [16, 8]),
                "pooler.dense.weight": ("F32", [8, 8]),  # unused by sentence embeddings
                "pooler.dense.bias": ("F32", [8]),
            }, vocab=100)
            got = cpu_workloads.weight_stream_bytes(d, [1, 7, 7, 9, 2])
            linear = cpu_workloads.model_arith(d)["linear_params"]
        self.assertEqual(got["matmul_bytes"], 4 * (64 + 128))
        self.assertEqual(got["vectors_bytes"], 4 * (8 + 8))
        # 4 distinct ids, positions 0..4, one token type.
        self.assertEqual(got["embedding_rows"], {"embeddings.word_embeddings.weight": 4,
                                                 "embeddings.position_embeddings.weight": 5,
                                                 "embeddings.token_type_embeddings.weight": 1})
        self.assertEqual(got["embeddings_bytes"], 4 * 8 * (4 + 5 + 1))
        self.assertEqual(got["total_bytes"], got["matmul_bytes"] + got["vectors_bytes"] + got["embeddings_bytes"])
        # The matmul part is the FLOP count's parameters.
        self.assertEqual(got["matmul_bytes"], 4 * linear)


class StreamFloor(unittest.TestCase):
    def result(self):
        ws = {"total_bytes": 340_000_000}
        return {"membw": {"2": {"best_gbs": 17.0}, "1": {"best_gbs": 20.0}, "4": {"errors": ["x"]}},
                "models": [{"workloads": [{"name": "latency_8", "weight_stream": ws}, {"name": "equal"}],
                            "engines": {"infinity_v3": {"workloads": {"latency_8": {"p50_ms": 20.4},
                                                                      "equal": {"p50_ms": 100.0}}},
                                        "torch": {"error": "missing"}}}]}

    def test_best_bandwidth_sets_the_floor(self):
        r = self.result()
        self.assertEqual(cpu_report.stream_bandwidth(r), (20.0, 1))
        cpu_report.add_stream_fractions(r)
        ws = r["models"][0]["workloads"][0]["weight_stream"]
        self.assertAlmostEqual(ws["stream_ms"], 17.0)  # 340 MB at 20 GB/s
        st = r["models"][0]["engines"]["infinity_v3"]["workloads"]
        self.assertAlmostEqual(st["latency_8"]["p50_over_stream"], 1.2)
        self.assertAlmostEqual(st["latency_8"]["bandwidth_fraction"], 1 / 1.2)
        self.assertNotIn("p50_over_stream", st["equal"])  # batches are compute-bound: no floor

    def test_no_bandwidth_no_floor(self):
        r = self.result()
        r["membw"] = {"2": {"error": "not built"}}
        cpu_report.add_stream_fractions(r)
        self.assertIsNone(r["stream_bandwidth_gbs"])
        self.assertNotIn("stream_ms", r["models"][0]["workloads"][0]["weight_stream"])

    def test_adjacent_floor_per_turn(self):
        # Three turns at 20.0, 17.0, 10.0 GB/s: 340 MB takes 17, 20, 34 ms;
        # turn medians 20.4, 20.0, 34.0 ms give 1.2, 1.0, 1.0; median 1.0.
        r = self.result()
        st = r["models"][0]["engines"]["infinity_v3"]["workloads"]["latency_8"]
        st.update(slice_medians_s=[0.0204, 0.0200, 0.0340], membw_turn_gbs=[20.0, 17.0, 10.0])
        cpu_report.add_stream_fractions(r)
        for got, want in zip(st["p50_over_stream_turns"], [1.2, 1.0, 1.0]):
            self.assertAlmostEqual(got, want)
        self.assertAlmostEqual(st["p50_over_stream_adj"], 1.0)
        self.assertAlmostEqual(st["p50_over_stream"], 1.2)  # the best-bandwidth floor is unchanged

    def test_adjacent_floor_needs_one_bandwidth_per_turn(self):
        r = self.result()
        st = r["models"][0]["engines"]["infinity_v3"]["workloads"]["latency_8"]
        st.update(slice_medians_s=[0.0204, 0.0200], membw_turn_gbs=[20.0])
        cpu_report.add_stream_fractions(r)
        self.assertNotIn("p50_over_stream_adj", st)


if __name__ == "__main__":
    unittest.main()


class AvxTwoPreload(unittest.TestCase):
    """`--isa avx2`: onnxruntime, which has no ISA switch, gets the CPUID
    preload (bench/cpuid_avx2.c) when the CPU can fault on CPUID and the
    library was built; nothing else gets it, and nothing at all without
    `--isa`."""

    def setUp(self):
        import run_cpu
        self.rc = run_cpu
        self.saved = (run_cpu.ISA, run_cpu.CPUID_SHIM, cpu_machine.flags)
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.rc.ISA, self.rc.CPUID_SHIM, cpu_machine.flags = self.saved
        self.tmp.cleanup()

    def shim_with(self, cpu_flags, built):
        cpu_machine.flags = lambda: set(cpu_flags)
        if built:
            open(os.path.join(self.tmp.name, "libcpuid_avx2.so"), "wb").close()
        return self.rc.cpuid_shim(self.tmp.name)

    def test_needs_cpuid_faulting_and_the_library(self):
        self.assertIsNone(self.shim_with({"avx2", "cpuid_fault"}, built=False))
        self.assertIsNone(self.shim_with({"avx2", "avx512f"}, built=True))
        path = self.shim_with({"avx2", "cpuid_fault"}, built=True)
        self.assertEqual(path, os.path.join(os.path.abspath(self.tmp.name), "libcpuid_avx2.so"))

    def test_only_onnxruntime_and_only_when_capped(self):
        self.rc.CPUID_SHIM = "/x/libcpuid_avx2.so"
        self.rc.ISA = None
        self.assertNotIn("LD_PRELOAD", self.rc.engine_env("onnxruntime", 2))
        self.rc.ISA = "avx2"
        self.assertEqual(self.rc.engine_env("onnxruntime", 2)["LD_PRELOAD"], "/x/libcpuid_avx2.so")
        for engine in ("infinity_v3", "torch", "ctranslate2", "sgemm"):
            self.assertEqual(self.rc.engine_env(engine, 2).get("LD_PRELOAD"), os.environ.get("LD_PRELOAD"), engine)

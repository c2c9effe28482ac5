"""What machine a benchmark ran on, for bench/run_cpu.py (Linux; standard
library only): CPU model name, vendor, family / model / stepping, the
microarchitecture when the family and model say it, the instruction-set
flags the kernels care about, and the cache sizes.

A figure like "% of sgemm peak" or "x of the weight-streaming time" means
little without the machine: Zen 2 has AVX2 only, Zen 4 runs AVX-512 as two
256-bit halves, Sapphire Rapids adds AMX. Issue 25 asks the tables to say
which CPU they came from.
"""
import os
import platform

# The ISA flags (as /proc/cpuinfo spells them) that decide which kernels run.
# "amx" stands for any of amx_tile / amx_bf16 / amx_int8.
ISA_FLAGS = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx"]

# AMD: (family, first model, last model, name), from the model ranges LLVM's
# and GCC's host detection use (llvm/lib/TargetParser/Host.cpp,
# getAMDProcessorTypeAndSubtype) and AMD's revision guides. Zen+ is family
# 0x17 models 0x08 (Pinnacle Ridge) and 0x18 (Picasso), listed before the
# Zen range that contains them.
AMD_RANGES = [
    (0x17, 0x08, 0x08, "Zen+"), (0x17, 0x18, 0x18, "Zen+"),
    (0x17, 0x00, 0x2f, "Zen"),
    (0x17, 0x30, 0xaf, "Zen 2"),
    (0x19, 0x00, 0x0f, "Zen 3"), (0x19, 0x20, 0x5f, "Zen 3"),
    (0x19, 0x10, 0x1f, "Zen 4"), (0x19, 0x60, 0x7f, "Zen 4"), (0x19, 0xa0, 0xaf, "Zen 4"),
    (0x1a, 0x00, 0x7f, "Zen 5"),
]
# Zen 2's models 0x30..0xaf hold no Zen or Zen+ part, but LLVM lists the Zen 2
# ranges one by one; the gaps it leaves are unassigned models, so say unknown.
AMD_ZEN2_MODELS = set(range(0x30, 0x40)) | {0x47} | set(range(0x60, 0x80)) | set(range(0x84, 0x88)) \
    | set(range(0x90, 0xb0))

# Intel family 6: model -> name (Intel's SDM, Linux arch/x86/include/asm/intel-family.h).
INTEL_MODELS = {
    0x2a: "Sandy Bridge", 0x2d: "Sandy Bridge-EP", 0x3a: "Ivy Bridge", 0x3e: "Ivy Bridge-EP",
    0x3c: "Haswell", 0x3f: "Haswell-EP", 0x45: "Haswell", 0x46: "Haswell",
    0x3d: "Broadwell", 0x47: "Broadwell", 0x4f: "Broadwell-EP", 0x56: "Broadwell-DE",
    0x4e: "Skylake", 0x5e: "Skylake", 0x8e: "Kaby/Coffee/Whiskey Lake", 0x9e: "Kaby/Coffee Lake",
    0xa5: "Comet Lake", 0xa6: "Comet Lake",
    0x55: "Skylake-SP",  # Cascade Lake and Cooper Lake by stepping: intel_microarch
    0x66: "Cannon Lake", 0x7d: "Ice Lake", 0x7e: "Ice Lake", 0x6a: "Ice Lake-SP", 0x6c: "Ice Lake-D",
    0x8c: "Tiger Lake", 0x8d: "Tiger Lake", 0xa7: "Rocket Lake",
    0x97: "Alder Lake", 0x9a: "Alder Lake", 0xb7: "Raptor Lake", 0xba: "Raptor Lake", 0xbf: "Raptor Lake",
    0xaa: "Meteor Lake", 0xac: "Meteor Lake", 0xbd: "Lunar Lake", 0xc5: "Arrow Lake", 0xc6: "Arrow Lake",
    0x8f: "Sapphire Rapids", 0xcf: "Emerald Rapids", 0xad: "Granite Rapids", 0xae: "Granite Rapids-D",
    0xaf: "Sierra Forest",
}

# What a reader of a table needs to know about how wide vectors really run.
NOTES = {
    "Zen 4": "AVX-512 executed as two 256-bit halves",
    "Zen 2": "AVX2/FMA, no AVX-512",
    "Zen 3": "AVX2/FMA, no AVX-512",
}


def amd_microarch(family, model):
    for fam, lo, hi, name in AMD_RANGES:
        if family == fam and lo <= model <= hi:
            if name == "Zen 2" and model not in AMD_ZEN2_MODELS:
                return None
            return name
    return None


def intel_microarch(family, model, stepping):
    if family != 6:
        return None
    name = INTEL_MODELS.get(model)
    if model == 0x55 and stepping is not None:
        # One model number, three generations told apart by stepping.
        name = "Cooper Lake" if stepping >= 10 else "Cascade Lake" if stepping >= 5 else "Skylake-SP"
    return name


def microarch(vendor, family, model, stepping=None):
    """The microarchitecture's name, or None when these numbers are not known here."""
    if family is None or model is None:
        return None
    if vendor == "AuthenticAMD":
        return amd_microarch(family, model)
    if vendor == "GenuineIntel":
        return intel_microarch(family, model, stepping)
    return None


def _cpuinfo(path="/proc/cpuinfo"):
    """The first processor's fields of /proc/cpuinfo."""
    fields = {}
    try:
        with open(path) as f:
            for line in f:
                if not line.strip():
                    if fields:
                        break
                    continue
                k, _, v = line.partition(":")
                fields.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return fields


def _size_kib(text):
    text = text.strip().upper()
    for suffix, mult in (("K", 1), ("M", 1024), ("G", 1024 * 1024)):
        if text.endswith(suffix):
            return int(text[:-1]) * mult
    return int(text) // 1024 if text.isdigit() else None


def _cpu_list_len(text):
    n = 0
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            n += int(b) - int(a) + 1
        elif part:
            n += 1
    return n


def _read_text(path):
    with open(path) as f:
        return f.read()


def caches(root="/sys/devices/system/cpu/cpu0/cache"):
    """{"L1d", "L1i", "L2", "L3"}: {"size_kib" of one instance, "shared_by_cpus"}."""
    out = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return out
    for idx in entries:
        d = os.path.join(root, idx)
        try:
            level = _read_text(os.path.join(d, "level")).strip()
            kind = _read_text(os.path.join(d, "type")).strip()
            size = _size_kib(_read_text(os.path.join(d, "size")))
            shared = _cpu_list_len(_read_text(os.path.join(d, "shared_cpu_list")))
        except (OSError, ValueError):
            continue
        name = f"L{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        out[name] = {"size_kib": size, "shared_by_cpus": shared}
    return out


def flags():
    return set(_cpuinfo().get("flags", "").split())


def isa(flag_set):
    out = {f: f in flag_set for f in ISA_FLAGS if f != "amx"}
    out["amx"] = any(f in flag_set for f in ("amx_tile", "amx_bf16", "amx_int8"))
    return out


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def machine():
    """The machine record stored in the harness's JSON meta."""
    info = _cpuinfo()
    vendor = info.get("vendor_id")
    family, model, stepping = _int(info.get("cpu family")), _int(info.get("model")), _int(info.get("stepping"))
    arch = microarch(vendor, family, model, stepping)
    rec = {"model_name": info.get("model name") or platform.processor(), "vendor": vendor,
           "family": family, "model": model, "stepping": stepping,
           "family_hex": hex(family) if family is not None else None,
           "model_hex": hex(model) if model is not None else None,
           "microarch": arch or "unknown", "isa": isa(set(info.get("flags", "").split())),
           "hypervisor": "hypervisor" in info.get("flags", "").split(),
           "caches": caches(), "nproc": os.cpu_count()}
    if arch in NOTES:
        rec["note"] = NOTES[arch]
    return rec


def describe(m):
    """One line for a table header: name, numbers, microarchitecture, ISA, caches."""
    if not m:
        return "machine unknown"
    ids = f"family {m.get('family')} model {m.get('model')} stepping {m.get('stepping')}"
    arch = m.get("microarch") or "unknown"
    if m.get("note"):
        arch += f", {m['note']}"
    isa_on = " ".join(f for f, on in (m.get("isa") or {}).items() if on) or "none of " + " ".join(ISA_FLAGS)
    cache = ", ".join(f"{k} {_kib_text(v['size_kib'])}" + (f" per {v['shared_by_cpus']} CPUs"
                                                            if v["shared_by_cpus"] > 1 else "")
                      for k, v in sorted((m.get("caches") or {}).items()) if k != "L1i" and v.get("size_kib"))
    vm = ", KVM/VM guest" if m.get("hypervisor") else ""
    return f"{m.get('model_name')} ({ids}: {arch}{vm}); ISA: {isa_on}; caches: {cache or 'unknown'}"


def _kib_text(kib):
    return f"{kib // 1024} MiB" if kib >= 1024 and kib % 1024 == 0 else f"{kib} KiB"

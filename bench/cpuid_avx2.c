/* libcpuid_avx2.so: holds a program that has no instruction-set switch of
 * its own (onnxruntime's MLAS) to AVX2/FMA code, for `make bench-avx2`.
 *
 * Loaded with LD_PRELOAD, its constructor turns on CPUID faulting for the
 * process (arch_prctl ARCH_SET_CPUID, a per-thread flag inherited by every
 * thread created after it, on CPUs whose /proc/cpuinfo lists cpuid_fault).
 * Each CPUID instruction then raises SIGSEGV; the handler runs the real
 * CPUID with faulting briefly off, clears the feature bits a Zen 2 lacks
 * (the AVX-512 family, AVX-VNNI, AMX, AVX512-BF16/FP16), writes the result
 * to the faulting thread's registers and steps over the instruction.
 * Libraries that pick kernels from CPUID at load or first use, after this
 * constructor, see an AVX2-only CPU. XGETBV still reports the AVX-512
 * register state enabled; every dispatcher we know of checks the CPUID bit
 * as well. glibc chose its string functions before the constructor ran and
 * keeps them.
 *
 * The handler must stay in front: a program that installs its own SIGSEGV
 * handler later (perf, Python's faulthandler, a JVM) would take the CPUID
 * faults and crash. So sigaction() and signal() are interposed for SIGSEGV:
 * what the program installs becomes the handler this one passes every
 * other SIGSEGV to, and what it reads back is its own. Without CPUID
 * faulting the library does nothing and says so on stderr; the harness
 * checks for the capability itself. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/* The program's SIGSEGV disposition: the one before this library's, then
 * whatever the program installs. */
static struct sigaction previous;
static int active;

typedef int sigaction_fn(int, const struct sigaction *, struct sigaction *);

static int real_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    static sigaction_fn *next;
    if (!next) next = (sigaction_fn *)dlsym(RTLD_NEXT, "sigaction");
    return next(sig, act, old);
}

/* Feature bits above AVX2/FMA, by CPUID leaf 7 sub-leaf and register. */
#define BIT(n) (1u << (n))
static const uint32_t leaf7_0_ebx = BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31);
static const uint32_t leaf7_0_ecx = BIT(1) | BIT(6) | BIT(11) | BIT(12) | BIT(14);
static const uint32_t leaf7_0_edx = BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25);
static const uint32_t leaf7_1_eax = BIT(4) | BIT(5) | BIT(23);

static void real_cpuid(uint32_t leaf, uint32_t sub, uint32_t r[4])
{
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
}

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    /* A CPUID fault is a general-protection fault (SI_KERNEL): the
     * instruction pointer is valid and points at the instruction. */
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    if (si->si_code == SI_KERNEL && ip[0] == 0x0F && ip[1] == 0xA2) {
        const int saved_errno = errno;
        uint32_t r[4];
        const uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX];
        real_cpuid(leaf, sub, r);
        if (leaf == 7 && sub == 0) {
            r[1] &= ~leaf7_0_ebx;
            r[2] &= ~leaf7_0_ecx;
            r[3] &= ~leaf7_0_edx;
        } else if (leaf == 7 && sub == 1) {
            r[0] &= ~leaf7_1_eax;
        }
        g[REG_RAX] = r[0];
        g[REG_RBX] = r[1];
        g[REG_RCX] = r[2];
        g[REG_RDX] = r[3];
        g[REG_RIP] += 2;
        errno = saved_errno;
        return;
    }
    if (previous.sa_flags & SA_SIGINFO)
        previous.sa_sigaction(sig, si, ctx);
    else if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN)
        previous.sa_handler(sig);
    else {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        real_sigaction(SIGSEGV, &dfl, NULL); /* the fault repeats on return, now fatal */
    }
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig != SIGSEGV || !active) return real_sigaction(sig, act, old);
    if (old) *old = previous;
    if (act) previous = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    if (sig != SIGSEGV || !active) {
        static sighandler_t (*next)(int, sighandler_t);
        if (!next) next = (sighandler_t(*)(int, sighandler_t))dlsym(RTLD_NEXT, "signal");
        return next(sig, handler);
    }
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    if (sigaction(sig, &sa, &old) != 0) return SIG_ERR;
    return old.sa_handler; /* shares a union with sa_sigaction */
}

__attribute__((constructor)) static void hold_to_avx2(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (real_sigaction(SIGSEGV, &sa, &previous) != 0) return;
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        static const char msg[] = "libcpuid_avx2: this CPU or kernel has no CPUID faulting; nothing is capped\n";
        real_sigaction(SIGSEGV, &previous, NULL);
        if (write(2, msg, sizeof msg - 1) < 0) return;
        return;
    }
    active = 1;
}

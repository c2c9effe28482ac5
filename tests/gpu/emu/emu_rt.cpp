#include "emu_rt.h"

EmuState emu;

asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch, .-emu_switch
)");

static const size_t STACK = 256 * 1024;

static void fiber_entry()
{
    EmuFiber &f = emu.fibers[emu.cur];
    emu.body(emu.body_arg);
    if (!emu.fibers[emu.cur].pending.empty()) emu_fail("cp.async never waited for");
    f.done = true;
    emu.progress++;
    emu_switch(&f.sp, emu.sched_sp);
    abort();
}

static void fiber_init(EmuFiber &f)
{
    uintptr_t top = ((uintptr_t)(f.stack + STACK)) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)top;
    *--sp = 0;                       /* pad: the return-address slot below is 16-aligned */
    *--sp = (uint64_t)&fiber_entry;  /* ret target */
    for (int i = 0; i < 6; i++) *--sp = 0; /* rbp rbx r12 r13 r14 r15 */
    *--sp = (uint64_t)0x1F80 | ((uint64_t)0x037F << 32);
    f.sp = sp;
}

void emu_run_block(void (*body)(void *), void *arg)
{
    const int n = emu.nthreads;
    if ((int)emu.fibers.size() != n) {
        for (auto &f : emu.fibers) munmap(f.stack, STACK);
        emu.fibers.assign(n, EmuFiber());
        for (int i = 0; i < n; i++) {
            emu.fibers[i].stack = (unsigned char *)mmap(NULL, STACK, PROT_READ | PROT_WRITE,
                                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            emu.fibers[i].tid = i;
        }
    }
    for (auto &f : emu.fibers) {
        f.done = false;
        f.pending.clear();
        fiber_init(f);
    }
    for (auto &w : emu.warps) w.arrived = 0;
    emu.bar_arrived = 0;
    emu.body = body;
    emu.body_arg = arg;
    const int n_warps = (n + 31) / 32;
    int left = n;
    while (left > 0) {
        const uint64_t before = emu.progress;
        const int w = (int)(emu_rand() % n_warps);
        const int rounds = 1 + (int)(emu_rand() % 12);
        for (int r = 0; r < rounds; r++)
            for (int l = 0; l < 32; l++) {
                const int t = w * 32 + l;
                if (t >= n || emu.fibers[t].done) continue;
                emu.cur = t;
                emu_switch(&emu.sched_sp, emu.fibers[t].sp);
                if (emu.fibers[t].done) left--;
            }
        if (emu.progress == before) {
            /* This warp is stuck; is any warp able to move? */
            bool any = false;
            for (int w2 = 0; w2 < n_warps && !any; w2++)
                for (int l = 0; l < 32; l++) {
                    const int t = w2 * 32 + l;
                    if (t >= n || emu.fibers[t].done) continue;
                    const uint64_t b2 = emu.progress;
                    emu.cur = t;
                    emu_switch(&emu.sched_sp, emu.fibers[t].sp);
                    if (emu.fibers[t].done) left--;
                    if (emu.progress != b2) {
                        any = true;
                        break;
                    }
                }
            if (!any && left > 0) emu_fail("deadlock: every thread waits");
        }
    }
    emu.cur = -1;
}

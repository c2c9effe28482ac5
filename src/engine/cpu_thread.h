/* One thread for the forward passes of every CPU model a process serves.
 *
 * libgomp keeps an OpenMP worker pool per thread that runs parallel
 * regions, and once the pooled threads outnumber the CPUs it cuts every
 * idle worker's spin to ~100 iterations: each of the ~50 regions of a
 * forward pass then sleeps and wakes (a 3-token MiniLM request spent 1.95
 * ms in the engine instead of 0.75). A server with one replica thread per
 * model, each with a pool as wide as the machine, is in that case as soon
 * as it serves two CPU models. Their batches therefore run on this one
 * thread instead, one after the other (two passes at once, each as wide as
 * the machine, would only share the cores). */
#ifndef IV_ENGINE_CPU_THREAD_H
#define IV_ENGINE_CPU_THREAD_H

/* Runs fn(arg) on the shared CPU thread (started on first use) and returns
 * its result once it has run; calls from several threads are served in
 * turn. Runs fn on the calling thread when the shared one cannot start. */
int iv_cpu_thread_run(int (*fn)(void *arg), void *arg);

#endif

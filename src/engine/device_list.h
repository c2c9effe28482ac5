/* `--device` lists: one replica per entry. "cuda:0,1" is cuda:0 and cuda:1
 * (a bare number repeats the previous entry's kind, so it needs a cuda
 * entry before it); "cpu,cpu" is two CPU replicas that split the cores;
 * an entry may repeat (two replicas on one GPU). */
#ifndef IV_ENGINE_DEVICE_LIST_H
#define IV_ENGINE_DEVICE_LIST_H

#include "base/err.h"

#define IV_MAX_REPLICAS 64
#define IV_DEVICE_NAME_MAX 32

typedef struct iv_device_list {
    int n;
    char names[IV_MAX_REPLICAS][IV_DEVICE_NAME_MAX]; /* each as iv_ops_open takes it */
} iv_device_list;

/* NULL or "" is one "cpu" entry. Empty entries, bare numbers without a
 * cuda entry before them and more than IV_MAX_REPLICAS entries are
 * IV_E_INVALID; the names themselves are checked by iv_ops_open. */
int iv_device_list_parse(const char *spec, iv_device_list *out, iv_err *err);
/* How many entries run on the CPU (they share its cores). */
int iv_device_list_cpu_count(const iv_device_list *l);

#endif

/* The replicas of every served model as /info (JSON) and /metrics
 * (Prometheus text) report them. */
#ifndef IV_SERVER_REPLICA_REPORT_H
#define IV_SERVER_REPLICA_REPORT_H

#include "base/strbuf.h"
#include "server/server.h"

/* `"replicas":[{"index","device","in_service","busy","batches","tokens","failures","busy_seconds"}]` */
void iv_replicas_json(iv_strbuf *b, const iv_model_slot *m);
/* te_replica_{in_service,busy,batches_total,tokens_total,failures_total,busy_seconds_total}
 * labelled {model, replica, device}. */
void iv_replicas_prometheus(iv_strbuf *b, const iv_server *s);
/* te_prefix_cache_* and te_prefix_fold_* labelled {model, replica}
 * (docs/prefix-folding.md). */
void iv_prefix_prometheus(iv_strbuf *b, const iv_server *s);

#endif

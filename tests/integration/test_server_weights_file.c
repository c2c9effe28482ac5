/* The checkpoint file changing under a running server (issue 22): a
 * model.safetensors rewritten in place, then truncated to nothing, must
 * change no answer and never fault. Before iv_weights_own_mapped the
 * embedding table and the norms were read from the mapping while serving:
 * the rewrite changed the vectors silently and the truncation ended the
 * server with SIGBUS. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server_harness.h"
#include "test.h"
#include "unit/tmp_test_util.h"

#define BODY "{\"inputs\":[\"the file under a running server\",\"hello world\"]}"

/* The /embed answer's raw body (compared byte for byte: same model, same input). */
static char *embed_body(const srv *s)
{
    http_resp r;
    if (http_post(s, "/embed", BODY, &r)) return NULL;
    char *body = r.status == 200 && r.body ? strdup(r.body) : NULL;
    if (r.status != 200) fprintf(stderr, "    /embed answered %ld\n", r.status);
    http_resp_free(&r);
    return body;
}

static int scribble(const char *path)
{
    struct stat st;
    const int fd = open(path, O_WRONLY); /* in place: no O_TRUNC, same inode */
    if (fd < 0 || fstat(fd, &st)) return -1;
    char junk[4096];
    memset(junk, 0x3f, sizeof junk); /* 0x3f3f3f3f is 0.747 as a float */
    int rc = 0;
    for (off_t at = 4096; at < st.st_size && !rc; at += (off_t)sizeof junk)
        rc = pwrite(fd, junk, sizeof junk, at) < 0;
    fsync(fd);
    close(fd);
    return rc;
}

TEST(srv_weights_file_changed_under_server)
{
    const char *fixture = srv_fixture("bert");
    if (!fixture) return;
    char dir[256], cmd[1024], model[320];
    REQUIRE(tmp_dir(dir, sizeof dir, "weights") == 0);
    snprintf(cmd, sizeof cmd, "cp -r '%s'/. '%s'/", fixture, dir);
    REQUIRE(system(cmd) == 0);
    snprintf(model, sizeof model, "%s/model.safetensors", dir);
    srv s;
    const char *args[] = {"--model-id", dir, NULL};
    if (srv_start(&s, args) == 0) {
        char *before = embed_body(&s);
        REQUIRE(before);
        CHECK(scribble(model) == 0);
        char *rewritten = embed_body(&s);
        CHECK_MSG(rewritten && !strcmp(rewritten, before), "answer changed after the file was rewritten in place");
        CHECK(truncate(model, 0) == 0);
        char *truncated = embed_body(&s);
        CHECK_MSG(truncated && !strcmp(truncated, before), "no answer or another answer after truncation");
        free(before);
        free(rewritten);
        free(truncated);
        CHECK_EQ_INT(srv_stop(&s), 0);
    }
    tmp_rmtree(dir);
}

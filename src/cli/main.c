#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "ops/cpu/omp_policy.h"
#include "server/server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: infinity_v3 [serve] --model-id DIR [options]\n"
            "       infinity_v3 embed --model-id DIR [--all|--sparse] < inputs\n"
            "       infinity_v3 predict --model-id DIR < inputs\n"
            "       infinity_v3 classify-tokens --model-id DIR [--aggregation-strategy S] < inputs\n"
            "       infinity_v3 tokenize --tokenizer DIR_OR_FILE [--pair] < inputs\n"
            "       infinity_v3 render --model-id DIR [--add-generation-prompt] < conversations\n"
            "       infinity_v3 --version\n"
            "Run a subcommand with --help for its options.\n");
}

int main(int argc, char **argv)
{
    /* Before anything else: it may replace the process. */
    iv_omp_prefer_short_spin();
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    /* As TEI's router prints it: name and version. Also after `serve`. */
    for (int i = 1; i < argc && i <= 2; i++)
        if (!strcmp(argv[i], "--version") || !strcmp(argv[i], "-V")) {
            if (i == 2 && strcmp(argv[1], "serve")) break;
            printf("infinity_v3 %s\n", IV_SERVER_VERSION);
            return 0;
        }
    if (argc > 1 && argv[1][0] != '-') {
        const char *sub = argv[1];
        for (const iv_command *c = iv_commands; c->name; c++)
            if (!strcmp(c->name, sub)) return c->run(argc - 1, argv + 1);
        fprintf(stderr, "infinity_v3: unknown subcommand '%s'\n", sub);
        usage(stderr);
        return 2;
    }
    /* No subcommand: serve, like the peers. */
    for (const iv_command *c = iv_commands; c->name; c++)
        if (!strcmp(c->name, "serve")) return c->run(argc, argv);
    usage(stderr);
    return 2;
}

#include "cli/commands.h"

#include <stddef.h>

/* One line per subcommand; each lives in src/cli/cmd_<name>.c. */
const iv_command iv_commands[] = {
    {"embed", iv_cmd_embed},
    {"predict", iv_cmd_predict},
    {"classify-tokens", iv_cmd_classify_tokens},
    {"tokenize", iv_cmd_tokenize},
    {"serve", iv_cmd_serve},
    {"taps", iv_cmd_taps},
    {"render", iv_cmd_render},
    {"preprocess-image", iv_cmd_preprocess_image},
    {NULL, NULL},
};

#include "cli/commands.h"

#include <stddef.h>

const iv_command iv_commands[] = {
    {"embed", iv_cmd_embed},
    {"predict", iv_cmd_predict},
    {NULL, NULL},
};

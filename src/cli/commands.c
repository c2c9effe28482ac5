#include "cli/commands.h"

#include <stddef.h>

/* One line per subcommand; each lives in src/cli/cmd_<name>.c. */
const iv_command iv_commands[] = {
    {"tokenize", iv_cmd_tokenize},
    {NULL, NULL},
};

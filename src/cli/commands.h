/* Subcommand table: each subcommand lives in its own src/cli/cmd_*.c file
 * and is listed in commands.c. */
#ifndef IV_CLI_COMMANDS_H
#define IV_CLI_COMMANDS_H

typedef struct iv_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
} iv_command;

extern const iv_command iv_commands[];

int iv_cmd_embed(int argc, char **argv);
int iv_cmd_predict(int argc, char **argv);
int iv_cmd_classify_tokens(int argc, char **argv);
int iv_cmd_tokenize(int argc, char **argv);
int iv_cmd_serve(int argc, char **argv);
int iv_cmd_taps(int argc, char **argv);
int iv_cmd_render(int argc, char **argv);
int iv_cmd_preprocess_image(int argc, char **argv);


#endif

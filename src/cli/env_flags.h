/* Flags from environment variables, as TEI's router takes them (clap's
 * `env`): `--max-batch-tokens` is also MAX_BATCH_TOKENS. A container image
 * or a Kubernetes manifest then configures the server with `env:` entries
 * and no command line. A flag on the command line wins over its variable. */
#ifndef IV_CLI_ENV_FLAGS_H
#define IV_CLI_ENV_FLAGS_H

/* The environment variable of a long flag: "--max-batch-tokens" ->
 * "MAX_BATCH_TOKENS". out has room for n bytes; returns 0, or -1 when the
 * name does not fit. */
int iv_env_flag_name(const char *flag, char *out, unsigned n);

/* argv with "--flag=value" inserted after argv[0] for each of `flags`
 * (NULL-terminated long names) whose variable getenv_fn finds set and
 * non-empty and that argv does not already give. Flags in `switches` (also
 * NULL-terminated) take no value: their variable inserts "--flag" when it
 * is "true" or "1". On success *out_argv is a new NULL-terminated array
 * (free it with iv_env_flags_free) and *out_argc its length; -1 when memory
 * runs out. */
int iv_env_flags_merge(int argc, char **argv, const char *const *flags, const char *const *switches,
                       const char *(*getenv_fn)(const char *name), int *out_argc, char ***out_argv);
void iv_env_flags_free(int argc, char **argv, char **merged);

#endif

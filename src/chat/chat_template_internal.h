/* The loaded form of a checkpoint's chat templates, shared by the loader
 * (chat_template.c) and the renderer front end (chat_template_render.c). */
#ifndef IV_CHAT_CHAT_TEMPLATE_INTERNAL_H
#define IV_CHAT_CHAT_TEMPLATE_INTERNAL_H

#include "chat/chat_template.h"
#include "chat/jinja.h"

struct iv_chat_template {
    int n;
    char **names;     /* "default" for a single unnamed template */
    iv_jinja **tpl;
    cJSON *tokens;    /* {"bos_token": "<s>", ...}: the special-token variables */
    char *default_text; /* the source of the template named "default" */
};

#endif

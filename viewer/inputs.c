// inputs.c: the recordings a command names: several paths, or a quoted glob
// ('out/*.db') that tpprof expands itself (a build's or a job's hundreds of
// recordings, beyond what a command line holds). report and check use it.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int push(tpprof_inputs *in, const char *path) {
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->v[i], path) == 0)
            return tpprof_error_set("'%s' is named twice (each recording once)", path);
    char **v = tpprof_grow(in->v, in->n, &in->cap, sizeof *v);
    if (!v)
        return -1;
    in->v = v;
    if (!(v[in->n] = strdup(path)))
        return tpprof_error_set("out of memory");
    in->n++;
    return 0;
}

int tpprof_inputs_add(tpprof_inputs *in, const char *arg) {
    if (!strpbrk(arg, "*?[") || access(arg, F_OK) == 0)
        return push(in, arg);
    glob_t g;
    int rc = glob(arg, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return tpprof_error_set("no recording matches '%s'", arg);
    if (rc != 0)
        return tpprof_error_set("cannot expand '%s'", arg);
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
        rc = push(in, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

void tpprof_inputs_free(tpprof_inputs *in) {
    for (size_t i = 0; i < in->n; i++)
        free(in->v[i]);
    free(in->v);
    memset(in, 0, sizeof *in);
}

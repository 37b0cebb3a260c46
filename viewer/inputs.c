// inputs.c: the recordings named on a command line (`tpprof report A.db
// B.db`, or a quoted glob 'tpprof.train.*.db'), and, when they are several,
// their merge into one temporary database (tpprof merge) read as one
// recording. Declared in viewer.h.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int push_input(tpprof_inputs *in, const char *path) {
    for (size_t i = 0; i < in->n; i++)
        if (strcmp(in->v[i], path) == 0)
            return tpprof_error_set("'%s' is named twice (several recordings are merged: each once)", path);
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
        return push_input(in, arg);
    glob_t g;
    int rc = glob(arg, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return tpprof_error_set("no recording matches '%s'", arg);
    if (rc != 0)
        return tpprof_error_set("cannot expand '%s'", arg);
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++)
        rc = push_input(in, g.gl_pathv[i]);
    globfree(&g);
    return rc;
}

int tpprof_inputs_merge(tpprof_inputs *in) {
    const char *tmp = getenv("TMPDIR");
    char dir[600];
    if (!tmp || !*tmp || strlen(tmp) > 500)
        tmp = "/tmp";
    snprintf(dir, sizeof dir, "%s/tpprof-report-XXXXXX", tmp);
    if (!mkdtemp(dir))
        return tpprof_error_set("cannot make a temporary directory in %s: %s", tmp, strerror(errno));
    in->dir = strdup(dir);
    in->merged = malloc(strlen(dir) + sizeof "/merged.db");
    if (!in->dir || !in->merged)
        return tpprof_error_set("out of memory");
    sprintf(in->merged, "%s/merged.db", dir);
    int n = snprintf(in->shown, sizeof in->shown, "%zu recordings:", in->n);
    for (size_t i = 0; i < in->n && n > 0 && (size_t)n < sizeof in->shown; i++)
        n += snprintf(in->shown + n, sizeof in->shown - (size_t)n, " %s", in->v[i]);
    return tpprof_merge(in->merged, in->v, in->n, false);
}

void tpprof_inputs_free(tpprof_inputs *in) {
    if (in->merged) {
        unlink(in->merged);
        free(in->merged);
    }
    if (in->dir) {
        rmdir(in->dir);
        free(in->dir);
    }
    for (size_t i = 0; i < in->n; i++)
        free(in->v[i]);
    free(in->v);
}

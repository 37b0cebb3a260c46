// plugin.c: a library that host.c dlopens, calls and dlcloses; it leaks.
// plugin_free frees a block the host allocated (host.c's `deep` mode loads
// this with RTLD_DEEPBIND, which binds its malloc and free to libc's).
#include <stdlib.h>

void *volatile plugin_sink;

__attribute__((noinline)) void plugin_leak(void) {
    plugin_sink = malloc(4242);
    plugin_sink = NULL;
}

__attribute__((noinline)) void plugin_free(void *p) { free(p); }

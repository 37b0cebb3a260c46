// plugin.c: a library that host.c dlopens, calls and dlcloses; it leaks.
#include <stdlib.h>

void *volatile plugin_sink;

__attribute__((noinline)) void plugin_leak(void) {
    plugin_sink = malloc(4242);
    plugin_sink = NULL;
}

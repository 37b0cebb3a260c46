// tls_mod.c: a shared library with thread-local storage of its own (the
// dynamic TLS model, as a library loaded with dlopen has). Built many
// times under other names; tls_loader dlopens them one after another.
#include <stdlib.h>

static __thread char scratch[64];

__attribute__((visibility("default"))) void *tls_mod_touch(size_t n) {
    scratch[0]++;
    return malloc(n + (size_t)scratch[0] % 2);
}

// tls_loader.c: dlopens each library named on the command line (each with
// thread-local storage of its own: tls_mod.c), and after each one touches
// its TLS and allocates, on the main thread and on a new thread. Each
// dlopen of a module with TLS grows the loader's module count; a thread
// whose TLS vector is too short for it has it grown (a malloc or realloc by
// the loader) on its next TLS access. Frees what it allocated; prints ok.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*touch_fn)(size_t);

static void *on_thread(void *arg) {
    free(((touch_fn)arg)(32));
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        void *h = dlopen(argv[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        touch_fn touch = (touch_fn)dlsym(h, "tls_mod_touch");
        if (!touch) return 1;
        free(touch(64));
        pthread_t t;
        if (pthread_create(&t, NULL, on_thread, (void *)touch) != 0 || pthread_join(t, NULL) != 0) return 1;
    }
    puts("ok");
    return 0;
}

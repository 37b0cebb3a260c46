// host.c: dlopens the plugin named by argv[1], calls plugin_leak, dlcloses it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    // `host PLUGIN deep`: RTLD_DEEPBIND, and the plugin frees a block made here.
    bool deep = argc > 2 && strcmp(argv[2], "deep") == 0;
    void *mine = deep ? malloc(3333) : NULL;
    void *h = dlopen(argv[1], RTLD_NOW | (deep ? RTLD_DEEPBIND : 0));
    if (!h) {
        fprintf(stderr, "host: %s\n", dlerror());
        return 2;
    }
    void (*fn)(void) = (void (*)(void))dlsym(h, "plugin_leak");
    if (!fn) return 2;
    fn();
    if (deep) {
        void (*release)(void *) = (void (*)(void *))dlsym(h, "plugin_free");
        if (!release) return 2;
        release(mine);
    }
    if (dlclose(h) != 0) return 2;
    clobber_stack();
    printf("host: done\n");
    return 0;
}

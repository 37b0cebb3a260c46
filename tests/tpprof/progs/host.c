// host.c: dlopens the plugin named by argv[1], calls plugin_leak, dlcloses it.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

void *volatile stale;

__attribute__((noinline)) void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    // `host PLUGIN deep`: RTLD_DEEPBIND, and the plugin frees blocks made here.
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
        // Then many: the heap's top shrinks back past them (glibc trims it),
        // so the recorder's idea of them, still live, points at memory that
        // is no longer mapped. Its leak scan must not fault there.
        enum { MANY = 8192 };
        static void *many[MANY];
        for (int i = 0; i < MANY; i++) many[i] = malloc(1000);
        stale = (char *)many[MANY / 2] + 16; // a dangling pointer, never used: the scan meets it
        for (int i = 0; i < MANY; i++) release(many[i]);
        memset(many, 0, sizeof many);
    }
    if (dlclose(h) != 0) return 2;
    clobber_stack();
    printf("host: done\n");
    return 0;
}

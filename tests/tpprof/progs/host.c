// host.c: dlopens the plugin named by argv[1], calls plugin_leak, dlcloses it.
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

__attribute__((noinline)) void clobber_stack(void) {
    volatile char buf[16384];
    memset((char *)buf, 0, sizeof buf);
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) {
        fprintf(stderr, "host: %s\n", dlerror());
        return 2;
    }
    void (*fn)(void) = (void (*)(void))dlsym(h, "plugin_leak");
    if (!fn) return 2;
    fn();
    if (dlclose(h) != 0) return 2;
    clobber_stack();
    printf("host: done\n");
    return 0;
}

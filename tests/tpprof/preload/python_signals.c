// python_signals.c: a scenario of the preload suite (tests/tpprof/meson.build gives
// each mode its test; harness.h runs the program under libtpprof.so).
// Mode: python_signals.
#include "harness.h"

// CPython under the preload (prog: the python3 executable): it installs its
// KeyboardInterrupt handler only where it finds SIGINT at its default, so the
// recorder's stand-in must look like the default; a ^C becomes an exception
// as natively, and SIGTERM's disposition reads as the default.
static void test_python_signals(char *prog) {
    char *argv[] = {prog, "-c",
                    "import os, signal\n"
                    "print(signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))\n"
                    "try:\n"
                    "    os.kill(os.getpid(), signal.SIGINT)\n"
                    "    signal.pause()\n"
                    "except KeyboardInterrupt:\n"
                    "    print('KeyboardInterrupt')\n",
                    NULL};
    struct result native = run(NULL, argv, NULL);
    struct result r;
    if (!record("python.db", argv, NULL, &r)) return;
    CHECK_MSG(native.status == 0 && strstr(native.out, "KeyboardInterrupt"), "native: %d '%s'", native.status, native.out);
    CHECK_MSG(strcmp(r.out, native.out) == 0, "stdout '%s', natively '%s'", r.out, native.out);
}

int preload_scenario(const char *mode, char *prog, char *extra) {
    (void)extra;
    if (strcmp(mode, "python_signals") == 0) test_python_signals(prog);
    else return -1;
    return check_failures;
}

#!/bin/bash
# Every report shows file:line for code built with -g by gcc or clang, in
# each debug-info form users build with: DWARF 4 and 5, split DWARF
# (-gsplit-dwarf, the .dwo beside the program), compressed sections (-gz),
# and debug info in a separate file found by its .gnu_debuglink. sym.c is
# built each way, run under `tpprof run`, and its report must show the lost
# block's stack as make_op's inlined fill (sym.c:LINE_FILL), make_op
# (sym.c:LINE_MAKE_OP) and run (sym.c:LINE_RUN). A compiler that is not
# installed is left out (clang is in scripts/deps.sh); with neither, skip.
# usage: symbols_by_compiler.sh TPPROF
set -u
tpprof=$(realpath "$1") || exit 1
src=$(cd "$(dirname "$0")" && pwd)/sym.c
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
line_of() { grep -n "// $1\$" "$src" | cut -d: -f1; }
want=("fill (sym.c:$(line_of LINE_FILL))" "make_op (sym.c:$(line_of LINE_MAKE_OP))" "run (sym.c:$(line_of LINE_RUN))")
ran=0 bad=0
for cc in gcc clang; do
    command -v "$cc" >/dev/null || { echo "note: $cc not installed, left out"; continue; }
    for form in dwarf4 dwarf5 split compressed debuglink; do
        case $form in
            dwarf4) flags=(-g -gdwarf-4) ;;
            dwarf5) flags=(-g -gdwarf-5) ;;
            split) flags=(-g -gsplit-dwarf) ;;
            compressed) flags=(-g -gz) ;;
            debuglink) flags=(-g) ;;
        esac
        how="$cc ${flags[*]} ($form)"
        d="$dir/$cc-$form"
        mkdir -p "$d" && cp "$src" "$d/sym.c"
        if ! (cd "$d" && "$cc" -O2 "${flags[@]}" -o sym sym.c) 2>"$d/cc.err"; then
            echo "FAIL: $how does not build:"; cat "$d/cc.err"; bad=$((bad + 1)); continue
        fi
        if [ $form = debuglink ]; then
            (cd "$d" && objcopy --only-keep-debug sym sym.debug && objcopy --strip-debug sym &&
             objcopy --add-gnu-debuglink=sym.debug sym) || { echo "FAIL: $how: objcopy"; bad=$((bad + 1)); continue; }
        fi
        # Compiled in one directory, recorded and reported from another.
        (cd "$dir" && "$tpprof" run -o "$d/rec.db" -- "$d/sym") >"$d/out" 2>"$d/err"
        "$tpprof" report "$d/rec.db" >"$d/report" 2>&1
        ran=$((ran + 1))
        missing=()
        for w in "${want[@]}"; do grep -qF -- "$w" "$d/report" || missing+=("$w"); done
        if [ ${#missing[@]} -gt 0 ] || ! grep -q "sym ok" "$d/out"; then
            echo "FAIL: $how: report lacks: ${missing[*]}"
            sed -n '/^Leaks/,/^$/p' "$d/report" | head -12
            bad=$((bad + 1))
        else
            echo "ok: $how"
        fi
    done
done
[ $ran -gt 0 ] || { echo "SKIP: neither gcc nor clang"; exit 77; }
echo "$ran builds, $bad without file:line"
[ $bad -eq 0 ]

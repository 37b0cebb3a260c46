# Code objects made and freed one after another, as exec of generated source
# does (dataclasses, namedtuple): a new one often takes the address of the
# one just freed, and its frame the same frame address. Each allocation must
# still be named by its own file: the recorder keeps each thread's code ids
# by code object (pyframes.c, code_id_of), and a stale one would name the
# file of an earlier code object at that address.
import sys

names = []  # each file name kept alive: no name object is reused
addrs = set()
for i in range(200):
    name = "gen_%03d.py" % i
    names.append(name)
    code = compile("b = bytearray(%d)\n" % (50_000 + 16 * i), name, "exec")
    addrs.add(id(code))
    exec(code, {})
    del code
print("distinct code addresses: %d" % len(addrs), file=sys.stderr)

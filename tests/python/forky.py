# A forked child allocating in a function of its own: its recording (its own
# file) names the child's Python line, and holds none of what the parent
# allocated before the fork (parent_work's blocks, which it inherits).
import os

kept = []


def parent_work():
    for _ in range(50):
        kept.append(bytearray(30_001))


def child_work():
    for _ in range(100):
        kept.append(bytearray(50_001))  # CHILD


parent_work()
pid = os.fork()
if pid == 0:
    child_work()  # CALL
    os._exit(0)
os.waitpid(pid, 0)
os._exit(0)

# A forked child allocating in a function of its own: its recording (its own
# file) names the child's Python line.
import os

kept = []


def child_work():
    for _ in range(100):
        kept.append(bytearray(50_001))  # CHILD


pid = os.fork()
if pid == 0:
    child_work()
    os._exit(0)
os.waitpid(pid, 0)
os._exit(0)

#!/usr/bin/python3
"""site-bytes.py PID ADDR...: the first 5 bytes at each address of a
running process's text, read from outside through /proc/PID/mem (as root
or the process's user with ptrace rights): one line "ADDR HEX" each."""
import sys

pid = sys.argv[1]
with open("/proc/%s/mem" % pid, "rb") as mem:
    for a in sys.argv[2:]:
        mem.seek(int(a, 0))
        print("%s %s" % (a, mem.read(5).hex()))

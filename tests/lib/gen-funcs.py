#!/usr/bin/python3
"""gen-funcs.py DIR N FILES: write N trivial functions fn0..fn(N-1) into
DIR/f0.c .. DIR/f(FILES-1).c, and DIR/main.c calling fn0, for tests and
benchmarks of large links (each function a traced call site when compiled
with -pg)."""
import sys

d, n, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
per = n // files
for k in range(files):
    with open(f"{d}/f{k}.c", "w") as f:
        f.write("extern int sink;\n")
        for i in range(k * per, (k + 1) * per):
            f.write(f"void fn{i}(int x) {{ sink += x + {i}; }}\n")
with open(f"{d}/main.c", "w") as f:
    f.write("int sink;\nvoid fn0(int);\nint main(void) { fn0(1); return sink != 1; }\n")

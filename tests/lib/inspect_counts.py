#!/usr/bin/python3
"""inspect_counts.py OBJPATCH LISTFILE (--expected-dir DIR | --state STATE):
run `OBJPATCH -j inspect` over the objects listed in LISTFILE (in chunks),
and check each object's entry count against DIR/<basename>.txt (one line
per entry), or that every entry is in STATE.  Prints one line per
mismatch and a summary; exits 1 on any mismatch."""
import json
import os
import subprocess
import sys

objpatch, listfile, mode, arg = sys.argv[1:5]
files = open(listfile).read().split()
bad = total = 0
for i in range(0, len(files), 400):
    chunk = files[i:i + 400]
    res = subprocess.run([objpatch, "-j", "inspect"] + chunk, capture_output=True, text=True)
    for f in json.loads(res.stdout):
        n = f["summary"]["entries"]
        total += n
        if mode == "--expected-dir":
            want = sum(1 for _ in open(os.path.join(arg, os.path.basename(f["file"]) + ".txt")))
            ok = n == want
        else:
            ok = f["summary"][arg] == n
        if not ok:
            bad += 1
            print("mismatch:", f["file"], f["summary"])
print(f"{len(files)} objects, {total} entries, {bad} mismatches")
sys.exit(1 if bad or not total else 0)

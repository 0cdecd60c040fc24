#!/usr/bin/env python3
"""Redraws the package table of docs/ARCHITECTURE.md from `go list`.

Each row keeps its description; the imports column becomes exactly go
list's imports among hongbao's packages; rows are ordered so that every
import is above its importer (stable: the table's order where it can).
New packages get a row whose description says to write one; packages go
list no longer shows lose theirs. architecture_test.go checks the result.

    python3 scripts/archtable.py [HARNESS...]

The harnesses (test-only packages, left out of the table) are the
arguments, or by default architecture_test.go's `harnesses` list.
"""
import json, re, subprocess, sys

MOD = "github.com/hongbao-dev/hongbao"
def harnesses():
    src = open("architecture_test.go").read()
    m = re.search(r"var harnesses = \[\]string\{([^}]*)\}", src)
    return set(re.findall(r'"([^"]+)"', m.group(1)))

HARNESSES = set(sys.argv[1:]) or harnesses()

def short(p):
    if p == MOD: return "hongbao"
    if p.startswith(MOD + "/"): return p[len(MOD) + 1:]
    return None

out = subprocess.run(["go", "list", "-json", "./..."], capture_output=True, text=True, check=True).stdout
pkgs = {}
for obj in re.split(r"(?<=\n})\n(?={)", out.strip()):
    p = json.loads(obj)
    name = short(p["ImportPath"])
    if name in HARNESSES: continue
    pkgs[name] = sorted({short(i) for i in p.get("Imports", []) if short(i)})

path = "docs/ARCHITECTURE.md"
lines = open(path).read().split("\n")
row = re.compile(r"^\| `([a-z/]+)`[^|]*\|([^|]*)\|(.*)\|\s*$")
idx = [i for i, l in enumerate(lines) if row.match(l)]
first, last = idx[0], idx[-1]
desc, order = {}, []
for i in idx:
    m = row.match(lines[i])
    name = "hongbao" if m.group(1) == "hongbao" else m.group(1)
    desc[name] = m.group(3).strip()
    order.append(name)
for name in sorted(pkgs):
    if name not in desc:
        desc[name] = "WRITE WHAT IT PROVIDES"
        order.append(name)
order = [n for n in order if n in pkgs]
placed, result = set(), []
while order:
    for n in order:
        # a harness imported (cmd/hbdev's e2e/harness/devhosts) has no row to wait for
        if all(i in placed or i not in pkgs for i in pkgs[n]):
            result.append(n); placed.add(n); order.remove(n); break
    else:
        sys.exit("import cycle among: " + " ".join(order))
rows = []
for n in result:
    label = "`hongbao` (root)" if n == "hongbao" else "`%s`" % n
    rows.append("| %s | %s | %s |" % (label, " ".join("`%s`" % i for i in pkgs[n]), desc[n]))
lines[first:last + 1] = rows
open(path, "w").write("\n".join(lines))

#!/usr/bin/env python3
# The join-planning benchmark's generator (bench/README.md, "bench/joinorder"):
# N tables of 10 rows chained by equality predicates, one constant filter.
import sys, random
# gen.py setup N | query N [shuffle]
mode, n = sys.argv[1], int(sys.argv[2])
if mode == "setup":
    for i in range(1, n+1):
        print(f"DROP TABLE IF EXISTS j{i};")
        print(f"CREATE TABLE j{i} (id int PRIMARY KEY, nxt int, v int);")
        print(f"INSERT INTO j{i} SELECT g, (g % 10) + 1, g * {i} FROM generate_series(1, 10) g;")
else:
    order = list(range(1, n+1))
    if len(sys.argv) > 3:
        random.seed(int(sys.argv[3])); random.shuffle(order)
    frm = ", ".join(f"j{i}" for i in order)
    preds = [f"j{i}.nxt = j{i+1}.id" for i in range(1, n)]
    preds.append("j1.id = 3")
    print(f"SELECT count(*), min(j{n}.v) FROM {frm} WHERE " + " AND ".join(preds) + ";")

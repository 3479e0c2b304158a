"""The papers' tables, made from the runs of their grids: reading run folders, tabulating them beside the papers'
numbers, plotting their learning curves.

* :mod:`paper_tables.table3`: DCL Table 3 (rl_curl), its grid's commands, its table and curves;
* :mod:`paper_tables.table3_slices`: the same table from the run folders that short GPU slices bring back.

It sits above the applications: it reads their objectives registries and run folders, and no application imports
it (tests/test_import_graph.py).
"""

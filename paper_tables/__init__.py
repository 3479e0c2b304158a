"""The papers' tables, made from the runs of their grids: reading run folders, tabulating them beside the papers'
numbers, plotting their learning curves.

* :mod:`paper_tables.table3`: DCL Table 3 (rl_curl), its grid's commands, its table and curves;
* :mod:`paper_tables.table3_slices`: the same table from the run folders that short GPU slices bring back.

It sits above the applications: it reads their objectives registries and run folders, and no application imports
it (tests/test_import_graph.py).
"""


def not_a_command(module: str, usage: str, argv: list[str]) -> None:
    """What ``python -m paper_tables.MODULE`` does (a library module, not a command): one line naming the command
    that makes its table, ``usage``; on stdout for ``--help`` / ``-h``, else a ValueError (through ``run_cli``: an
    ``error:`` line on stderr and status 2)."""
    line = f"{module} is a library module, not a command: {usage}"
    if {"-h", "--help"} & set(argv):
        print(line)
        return
    raise ValueError(line)

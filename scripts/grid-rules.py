#!/usr/bin/env python3
"""Replay the committed copy-policy grids of make bench against two rules
for txpath.ChooseCopy at a cold destination of 256 B (txpath/choose.go,
choose):

  table: the start-up table's own choice, as recorded in that run;
  NT:    NT stores (NT with offload, NT + sum without), whatever the times.

Every bench/out/results.json in git history that holds a grid with the
table (choose_copy_table) and the cells by layout is read. A rule's method
passes a cell when its median GB/s in that cell is within the grid's
tolerance (3%) of the best fixed method's median: a stand-in for the
grid's own verdict, which takes the median of per-round ratios of auto's
trials against each method's. The grid's own verdict on the table's
choice (auto, in that run) is printed too.

Run from the repository: python3 scripts/grid-rules.py
"""
import json
import subprocess
import sys

METHODS = ['copy', 'nt', 'copy+sum', 'nt+sum', 'fused']  # txpath.Method order
SIZE = 256


def git(*args):
    return subprocess.run(['git', *args], capture_output=True, text=True, check=True).stdout


def main():
    commits = git('log', '--format=%h', '--', 'bench/out/results.json').split()
    passed = {'table': 0, 'NT': 0}
    verdict = 0  # the grid's own verdict on auto, which was the table's choice
    runs_all = {'table': 0, 'NT': 0}
    cells_n = runs_n = 0
    for c in commits:
        try:
            d = json.loads(git('show', c + ':bench/out/results.json'))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
        g = d.get('grid') or {}
        cells = g.get('cells') or []
        if not g.get('choose_copy_table') or not cells or 'layout' not in cells[0]:
            continue
        tol = g.get('tolerance', 0.03)
        by = {(x['layout'], x['size'], x['cold'], x['offload']): x for x in cells}
        ok = {'table': True, 'NT': True}
        line = []
        for p in g['choose_copy_table']:
            if not p['Cold'] or p['Size'] != SIZE:
                continue
            for offload, chosen, nt in ((True, p['Offload'], 1), (False, p['Soft'], 3)):
                for layout in ('seen', 'unseen'):
                    x = by.get((layout, SIZE, True, offload))
                    if x is None:
                        continue
                    med = {k: v['median_gbps'] for k, v in x['methods'].items() if k != 'auto'}
                    best = max(med.values())
                    cells_n += 1
                    verdict += bool(x.get('pass'))
                    for rule, m in (('table', METHODS[chosen]), ('NT', METHODS[nt])):
                        good = m in med and med[m] >= (1 - tol) * best
                        passed[rule] += good
                        ok[rule] = ok[rule] and good
                    line.append('%s/%s: table %s %s, NT %s' % (
                        'offload' if offload else 'soft', layout, METHODS[chosen],
                        'ok' if med.get(METHODS[chosen], 0) >= (1 - tol) * best else 'FAIL',
                        'ok' if med.get(METHODS[nt], 0) >= (1 - tol) * best else 'FAIL'))
        if not line:
            continue
        runs_n += 1
        for r in ok:
            runs_all[r] += ok[r]
        print(c, '; '.join(line))
    if runs_n == 0:
        print('no committed grid with a table found', file=sys.stderr)
        return 1
    print("the grid's own verdict on the table's choice: %d of %d cells passed" % (verdict, cells_n))
    for r in ('table', 'NT'):
        print('%-5s cold %d B cells within %.0f%% of the best: %d of %d; runs with every such cell: %d of %d'
              % (r, SIZE, 100 * 0.03, passed[r], cells_n, runs_all[r], runs_n))
    return 0


if __name__ == '__main__':
    sys.exit(main())

#!/usr/bin/env python3
"""Replay the committed copy-policy grids of make bench against two rules
for txpath.ChooseCopy into a cold destination (txpath/choose.go, choose):

  table: the start-up table's own choice, as recorded in that run;
  NT:    NT stores (NT with offload, NT + sum without), whatever the times.

It reads bench/out/results.json at every commit reachable from HEAD that
changed it and holds a grid with ChooseCopy's table (choose_copy_table)
and cells by layout. A rule's method passes a cell when its median GB/s
there is within the grid's tolerance (3%) of the best fixed method's
median: a stand-in for the grid's own verdict, which takes the median of
per-round ratios of auto's trials against each method's. For the table's
choice (auto in that run) the grid's own verdict is counted too. It also
counts nt's calibrated threshold (nt.Default) over the same runs.

Only runs of code before the rule (machine.commit not a descendant of
RULE, the commit that made it) are replayed: from RULE on, the table's
choice is NT by construction. For those later runs the grid's own verdict
on the cold cells is counted apart.

Run it anywhere in the repository: python3 scripts/grid-rules.py
"""
import collections
import json
import subprocess
import sys

METHODS = ['copy', 'nt', 'copy+sum', 'nt+sum', 'fused']  # txpath.Method order
SIZES = [256, 1500, 4096, 65536]  # the grid's cold sizes from 256 B
RULE = '3a973fc'  # txpath: ChooseCopy answers NT into cold frames from 256 B


def git(*args):
    return subprocess.run(['git', *args], capture_output=True, text=True, check=True).stdout


def under_rule(commit):
    """Whether the run's code (machine.commit, maybe with "+changes")
    descends from RULE."""
    c = (commit or '').split('+')[0]
    if not c:
        return False
    r = subprocess.run(['git', 'merge-base', '--is-ancestor', RULE, c], capture_output=True)
    return r.returncode == 0


def main():
    path = 'bench/out/results.json'
    commits = git('log', '--format=%h', '--', ':/' + path).split()
    rules = ('table', 'NT')
    passed = {(r, n): 0 for r in rules for n in SIZES}
    verdict = collections.Counter()
    cells = collections.Counter()
    runs_all = {(r, n): 0 for r in rules for n in SIZES}
    thresholds = collections.Counter()
    runs = 0
    later = collections.Counter()  # runs under the rule: (cells, passed) by size
    later_runs = 0
    for c in commits:
        try:
            d = json.loads(git('show', c + ':' + path))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
        g = d.get('grid') or {}
        gc = g.get('cells') or []
        if not g.get('choose_copy_table') or not gc or 'layout' not in gc[0]:
            continue
        if under_rule((d.get('machine') or {}).get('commit')):
            later_runs += 1
            for x in gc:
                if x['cold'] and x['size'] in SIZES:
                    later[(x['size'], 'cells')] += 1
                    later[(x['size'], 'passed')] += bool(x.get('pass'))
            continue
        runs += 1
        tol = g.get('tolerance', 0.03)
        thresholds[(g.get('nt_calibration') or {}).get('threshold')] += 1
        by = {(x['layout'], x['size'], x['cold'], x['offload']): x for x in gc}
        ok = {k: True for k in runs_all}
        line = []
        for p in g['choose_copy_table']:
            n = p['Size']
            if not p['Cold'] or n not in SIZES:
                continue
            for offload, chosen, nt in ((True, p['Offload'], 1), (False, p['Soft'], 3)):
                for layout in ('seen', 'unseen'):
                    x = by.get((layout, n, True, offload))
                    if x is None:
                        continue
                    if x.get('auto') != METHODS[chosen]:
                        print('%s: %d B %s: the grid ran %s, the table says %s' % (
                            c, n, layout, x.get('auto'), METHODS[chosen]), file=sys.stderr)
                    med = {k: v['median_gbps'] for k, v in x['methods'].items() if k != 'auto'}
                    best = max(med.values())
                    cells[n] += 1
                    verdict[n] += bool(x.get('pass'))
                    good = {rule: med.get(m, 0) >= (1 - tol) * best
                            for rule, m in (('table', METHODS[chosen]), ('NT', METHODS[nt]))}
                    for rule, v in good.items():
                        passed[(rule, n)] += v
                        ok[(rule, n)] = ok[(rule, n)] and v
                    if n == 256:
                        line.append('%s/%s: table %s %s, NT %s' % (
                            'offload' if offload else 'soft', layout, METHODS[chosen],
                            'ok' if good['table'] else 'FAIL', 'ok' if good['NT'] else 'FAIL'))
        for k in runs_all:
            runs_all[k] += ok[k]
        print(c, 'cold 256 B:', '; '.join(line))
    if runs == 0:
        print('no committed grid with a table found', file=sys.stderr)
        return 1
    print('\n%d runs before the rule; nt threshold (B: runs): %s' % (runs, ', '.join(
        '%s: %d' % (t, k) for t, k in sorted(thresholds.items(), key=lambda kv: str(kv[0])))))
    for n in SIZES:
        print('cold %5d B: %3d cells; within the gate: NT %3d, table %3d (grid verdict on the table: %3d); '
              'runs with every cell: NT %d, table %d' % (
                  n, cells[n], passed[('NT', n)], passed[('table', n)], verdict[n],
                  runs_all[('NT', n)], runs_all[('table', n)]))
    if later_runs:
        print('\n%d runs under the rule (the grid\'s own verdict): %s' % (later_runs, ', '.join(
            'cold %d B %d of %d' % (n, later[(n, 'passed')], later[(n, 'cells')]) for n in SIZES)))
    return 0


if __name__ == '__main__':
    sys.exit(main())

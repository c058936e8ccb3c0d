#!/usr/bin/env python3
"""Replay the committed copy-policy grids of make bench against rules for
txpath.ChooseCopy into a cold destination (txpath/choose.go, choose,
quickest and coldSwitchGain):

  table:     the start-up table's own choice, as recorded in that run
             (only for runs before RULE, from which the choice was NT by
             construction);
  NT:        NT stores (NT with offload, NT + sum without), whatever the
             times (RULE to session 14);
  own m%:    per answer, NT stores unless the quicker alternative (copy or
             fused with offload, fused or copy + sum without) takes m% less
             time than NT;
  soft m%:   NT stores unless the quicker alternative without offload
             takes m% less time than NT + sum; then that one, and with
             offload the quicker of copy and fused if it is quicker than
             NT at all (choose's rule since b19117b, m = 20).

All by the table's best times (TablePoint.Ns), which is what choose uses
for these answers, so the replay of its rule is exact.

It reads bench/out/results.json at every commit reachable from HEAD that
changed it and holds a grid with ChooseCopy's table (choose_copy_table)
and cells by layout. A rule's method passes a cell when its median GB/s
there is within the grid's tolerance (3%) of the best fixed method's
median: a stand-in for the grid's own verdict, which takes the median of
per-round ratios of auto's trials against each method's. Runs are split
by machine: AVX-512 in nt's calibration (AMD EPYC Zen 5) or not (Zen 3).
It also counts nt's calibrated threshold (nt.Default).

Run it anywhere in the repository: python3 scripts/grid-rules.py
"""
import collections
import json
import subprocess
import sys

METHODS = ['copy', 'nt', 'copy+sum', 'nt+sum', 'fused']  # txpath.Method order
SIZES = [256, 1500, 4096, 65536]  # the grid's cold sizes from 256 B
RULE = '3a973fc'  # txpath: ChooseCopy answers NT into cold frames from 256 B
OWN = [0, 10, 15, 20, 25, 30]  # own m%
SOFT = [15, 20, 25]  # soft m%
CANDS = {True: (1, (0, 4)), False: (3, (4, 2))}  # offload: NT method, alternatives (choose's order)


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


def quickest(ns, ms):
    """The method of ms with the lowest best time, the first on a tie."""
    q = ms[0]
    for m in ms[1:]:
        if ns[m] < ns[q]:
            q = m
    return q


def pick(ns, offload, margin, soft_led):
    ntm, alts = CANDS[offload]
    alt = quickest(ns, alts)
    if not soft_led:
        return alt if ns[ntm] * (1 - margin / 100) > ns[alt] else ntm
    s_nt, s_alts = CANDS[False]
    s_alt = quickest(ns, s_alts)
    if ns[s_nt] * (1 - margin / 100) > ns[s_alt] and ns[alt] < ns[ntm]:
        return alt
    return ntm


def main():
    path = 'bench/out/results.json'
    commits = git('log', '--format=%h', '--', ':/' + path).split()
    passed = collections.Counter()  # (machine, rule, size)
    cells = collections.Counter()  # (machine, rule, size)
    runs = collections.Counter()  # machine
    runs_ok = collections.Counter()  # (machine, rule)
    thresholds = collections.Counter()
    for c in commits:
        try:
            d = json.loads(git('show', c + ':' + path))
        except (subprocess.CalledProcessError, json.JSONDecodeError):
            continue
        g = d.get('grid') or {}
        gc = g.get('cells') or []
        if not g.get('choose_copy_table') or not gc or 'layout' not in gc[0]:
            continue
        mach = 'zen5' if 'avx512' in json.dumps(g.get('nt_calibration')) else 'zen3'
        before = not under_rule((d.get('machine') or {}).get('commit'))
        runs[mach] += 1
        tol = g.get('tolerance', 0.03)
        thresholds[(mach, (g.get('nt_calibration') or {}).get('threshold'))] += 1
        by = {(x['layout'], x['size'], x['cold'], x['offload']): x for x in gc}
        ok = collections.defaultdict(lambda: True)
        line = []
        for p in g['choose_copy_table']:
            n = p['Size']
            if not p['Cold'] or n not in SIZES:
                continue
            for offload in (True, False):
                picks = {'NT': CANDS[offload][0]}
                picks.update({'own %d%%' % m: pick(p['Ns'], offload, m, False) for m in OWN})
                picks.update({'soft %d%%' % m: pick(p['Ns'], offload, m, True) for m in SOFT})
                if before:
                    picks['table'] = p['Offload'] if offload else p['Soft']
                for layout in ('seen', 'unseen'):
                    x = by.get((layout, n, True, offload))
                    if x is None:
                        continue
                    med = {k: v['median_gbps'] for k, v in x['methods'].items() if k != 'auto'}
                    best = max(med.values())
                    for rule, m in picks.items():
                        good = med.get(METHODS[m], 0) >= (1 - tol) * best
                        cells[(mach, rule, n)] += 1
                        passed[(mach, rule, n)] += good
                        ok[rule] = ok[rule] and good
                    if n == 256:
                        line.append('%s/%s: best %s, soft 20%% %s' % (
                            'offload' if offload else 'soft', layout,
                            max(med, key=med.get), METHODS[picks['soft 20%']]))
        for rule, v in ok.items():
            runs_ok[(mach, rule)] += v
        ratios = ''
        for p in g['choose_copy_table']:
            if p['Cold'] and p['Size'] == 256:
                ns = p['Ns']
                ratios = ' (best times: NT+sum/%s %.3f, NT/%s %.3f)' % (
                    METHODS[quickest(ns, CANDS[False][1])], ns[3] / ns[quickest(ns, CANDS[False][1])],
                    METHODS[quickest(ns, CANDS[True][1])], ns[1] / ns[quickest(ns, CANDS[True][1])])
        print(c, mach, 'cold 256 B%s:' % ratios, '; '.join(line))
    if not runs:
        print('no committed grid with a table found', file=sys.stderr)
        return 1
    for mach in sorted(runs):
        print('\n%s: %d runs; nt threshold (B: runs): %s' % (mach, runs[mach], ', '.join(
            '%s: %d' % (t, k) for (m, t), k in sorted(thresholds.items(), key=lambda kv: str(kv[0])) if m == mach)))
        for rule in ['table', 'NT'] + ['own %d%%' % m for m in OWN] + ['soft %d%%' % m for m in SOFT]:
            if not cells[(mach, rule, SIZES[0])]:
                continue
            print('  %-9s cells within the gate: %s; runs with every cell: %d' % (rule, ', '.join(
                '%d B %d/%d' % (n, passed[(mach, rule, n)], cells[(mach, rule, n)]) for n in SIZES),
                runs_ok[(mach, rule)]))
    return 0


if __name__ == '__main__':
    sys.exit(main())

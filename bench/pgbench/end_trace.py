"""end_trace.py PARSED: simple-update's END from `go tool trace -d=parsed`
output (end_trace.sh). An END is a connection goroutine's block in
tablet.(*Replica).waitProposal under kv.(*Txn).tryOnePhase; its chain runs
from the goroutine's block on its read before (pgwire's RawRead) to a few
transitions after. Prints the most common chains with the mean µs of each
step (Wa>Ru: waiting to be woken, by whom after '<'; Ru>Ru: runnable,
waiting for a CPU; Ru>Wa: running until it blocked, where), then the
goroutine wake-ups (Waiting->Runnable) per END by the waker's first Cairn
frame."""
import collections
import re
import sys

EV = re.compile(r'^M=(-?\d+) P=(-?\d+) G=(-?\d+) StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)')


def main(path):
    events, cur = [], None
    for line in open(path):
        if line.startswith('M='):
            cur = None
            m = EV.match(line)
            if m:
                cur = [int(m.group(4)), int(m.group(5)), m.group(6), m.group(7), []]
                events.append(cur)
        elif cur is not None and line.startswith('\t') and not line.startswith('\t\t'):
            if len(cur[4]) < 40:
                cur[4].append(line.strip().split(' @ ')[0])
    tl = collections.defaultdict(list)
    for t, g, a, b, stk in events:
        tl[g].append((t, a, b, stk))

    def has(stk, s):
        return any(s in x for x in stk)

    def short(x):
        return x.split('/')[-1].split('.')[-1]

    chains, ends = collections.defaultdict(list), 0
    wakers = collections.Counter()
    for evs in tl.values():
        for i, (t, a, b, stk) in enumerate(evs):
            if a == 'Waiting' and b == 'Runnable':
                w = [x for x in stk if 'cairn' in x]
                wakers[(w or stk or ['(netpoll)'])[0].split('/')[-1]] += 1
            if not (a == 'Running' and b == 'Waiting' and has(stk, 'waitProposal') and has(stk, 'tryOnePhase')):
                continue
            ends += 1
            p = i - 1
            while p >= 0 and not (evs[p][1] == 'Running' and evs[p][2] == 'Waiting' and has(evs[p][3], 'RawRead')):
                p -= 1
            if p < 0 or i - p > 12:
                continue
            t0, steps = evs[p][0], []
            for tt, aa, bb, ss in evs[p + 1:i + 4]:
                tag = aa[:2] + '>' + bb[:2]
                if bb == 'Waiting' and len(ss) > 1:
                    tag += ':' + short(ss[1])
                if bb == 'Runnable' and ss:
                    w = [x for x in ss if 'cairn' in x]
                    tag += '<' + short((w or ss)[0])
                steps.append((tag, tt - t0))
                t0 = tt
            chains[' '.join(s[0] for s in steps)].append([s[1] for s in steps])
    print(f'ENDs {ends}')
    for key, v in sorted(chains.items(), key=lambda kv: -len(kv[1]))[:4]:
        means = [sum(x[j] for x in v) / len(v) / 1000 for j in range(len(v[0]))]
        print(f'{len(v):6d}  ' + ' | '.join(f'{k} {m:.0f}' for k, m in zip(key.split(' '), means)))
    total = sum(wakers.values())
    print(f'goroutine wake-ups per END: {total / max(ends, 1):.2f}')
    for k, v in wakers.most_common(8):
        print(f'  {v / max(ends, 1):5.2f}  {k}')


if __name__ == '__main__':
    main(sys.argv[1])

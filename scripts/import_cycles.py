#!/usr/bin/env python3
"""Usage: scripts/import_cycles.py [SRC_DIR [MODULE...]]

File-level import graph of src/ (or of python/src, the extension module's
crate, with its own layers: PY_LAYERS below): edges from `use crate::`/`super::`/`self::` paths
(and inline `crate::a::b` / `super::x` paths), resolved to the file defining the first
module item named; re-exports in mod.rs (`pub use child::Item`) resolve to the child.
Prints strongly connected components with more than one file.

It also checks the direction between the crate's top-level modules (LAYERS
below): a module may import only modules of a lower layer, so the transport,
codec and protocol never import the server, client or command line. Test files
(`*_tests.rs`, `tests.rs`, inline `mod tests`) are left out of that check.
Prints `N layering violation(s)`, then `N cycle(s)`; exits 1 if either is not 0."""
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else 'src'
only = sys.argv[2:]  # optional top-level module filters
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs'):
            p = os.path.join(d, f)
            files[p] = open(p).read()
def strip_tests(src):
    # drop `#[cfg(test)] mod tests { ... }` bodies (crude: from the marker to end of file if at top level)
    m = re.search(r'\n#\[cfg\(test\)\]\s*\nmod tests\s*\{', src)
    return src[:m.start()] if m else src
def strip_comments(src):
    src = re.sub(r'//[^\n]*', '', src)
    return re.sub(r'/\*.*?\*/', '', src, flags=re.S)
def modpath(p):
    rel = os.path.relpath(p, root)[:-3].split(os.sep)
    if rel[-1] in ('mod', 'lib'):
        rel = rel[:-1]
    return rel
path_of = {tuple(modpath(p)): p for p in files if os.path.basename(p) != 'main.rs' and '/bin/' not in p}
def is_dirmod(p): return p.endswith('mod.rs') or p.endswith('lib.rs')
# re-exports per module file: item -> module path of child
reexp = {}
for p, s in files.items():
    s2 = strip_comments(s)
    mp = tuple(modpath(p))
    r = {}
    for m in re.finditer(r'pub(?:\([^)]*\))?\s+use\s+([^;]+);', s2):
        body = m.group(1).replace('\n', ' ')
        mm = re.match(r'([\w:]+)::\{(.*)\}\s*$', body)
        if mm:
            base = mm.group(1); items = [i.strip() for i in mm.group(2).split(',') if i.strip()]
        else:
            parts = body.strip().rsplit('::', 1)
            if len(parts) != 2: continue
            base, items = parts[0], [parts[1]]
        for it in items:
            name = it.split(' as ')[-1].strip().split('::')[-1]
            segs = base.split('::')
            if segs[0] == 'crate': tgt = tuple(segs[1:])
            elif segs[0] == 'super': tgt = mp[:-1] + tuple(segs[1:])
            elif segs[0] == 'self': tgt = mp + tuple(segs[1:])
            else: tgt = mp + tuple(segs)
            r[name] = tgt
    reexp[mp] = r
def resolve(segs, depth=0):
    """segs: absolute module path + item...; return file path."""
    cur = ()
    for i, sg in enumerate(segs):
        nxt = cur + (sg,)
        if nxt in path_of:
            cur = nxt; continue
        # sg is an item of module cur
        if depth < 5 and sg in reexp.get(cur, {}):
            tgt = reexp[cur][sg]
            if tgt != cur:
                return resolve(list(tgt) + [sg] + list(segs[i+1:]), depth+1)
        break
    return path_of.get(cur)
edges = {p: set() for p in files}
for p, s in files.items():
    if '/bin/' in p: continue
    s2 = strip_comments(strip_tests(s))
    mp = tuple(modpath(p))
    base_mod = mp if is_dirmod(p) else mp  # self:: of a file module is itself
    paths = []
    for m in re.finditer(r'\buse\s+([^;]+);', s2):
        body = m.group(1).replace('\n', ' ')
        # expand one level of braces
        mm = re.match(r'([\w:]+?)::\{(.*)\}\s*$', body, flags=re.S)
        if mm:
            depthb = 0; cur = ''; items = []
            for ch in mm.group(2):
                if ch == '{': depthb += 1
                if ch == '}': depthb -= 1
                if ch == ',' and depthb == 0: items.append(cur); cur = ''
                else: cur += ch
            items.append(cur)
            for it in items:
                it = it.strip()
                if not it: continue
                it = re.sub(r'\{.*', '', it).rstrip(':')
                paths.append(mm.group(1) + '::' + it.split(' as ')[0].strip())
        else:
            paths.append(body.split(' as ')[0].strip())
    for m in re.finditer(r'\b((?:crate|super)(?:::\w+)+)', s2):
        paths.append(m.group(1))
    for q in paths:
        segs = [x for x in q.split('::') if x]
        if not segs: continue
        if segs[0] == 'crate': a = list(segs[1:])
        elif segs[0] == 'super':
            b = list(mp); k = 0
            while k < len(segs) and segs[k] == 'super':
                b = b[:-1]; k += 1
            a = b + segs[k:]
        elif segs[0] == 'self': a = list(mp) + segs[1:]
        else:
            # relative to current module (for dir mods: child modules)
            if tuple(mp) + (segs[0],) in path_of: a = list(mp) + segs
            else: continue
        t = resolve(a)
        if t and t != p:
            # ignore a dir module's edges to its own children declared by `mod` only (re-export via pub use counted)
            edges[p].add(t)
# Tarjan
idx = {}; low = {}; st = []; on = set(); sccs = []; n = [0]
sys.setrecursionlimit(10000)
def sc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in edges:
    if v not in idx: sc(v)
# Layers, lowest first. A module may import modules of lower layers only (not
# its own layer's others); a top-level module not listed here is not checked
# (add it when it is created).
LAYERS = [
    ['codec', 'budget'],                # plain data and byte accounting, no I/O
    ['protocol'],                       # messages, ops, errors as data
    ['transport', 'host'],              # bytes on the wire; what a simulator implements
    ['server', 'client'],               # the two ends, never each other
    ['sims', 'fixtures'],               # built-in simulators registered on a server
    ['viewer', 'relay'],                # above the server: a relay forwards to hosts that dial out
    ['cli', 'bench_ws'],
]
# The Python extension's crate (python/src): the shared conversions, logs
# and waits; the learner's client; the Python host, which hands out an
# in-memory client (`Server.connect_memory`) and so may import the client,
# never the other way. A tree whose root ends in python/src is checked
# against these.
PY_LAYERS = [
    ['common'],                         # values <-> Python, logging bridge, GIL-free waits
    ['client'],                         # _native.Client, VectorEnv, Recorder
    ['host'],                           # _native.Server and what it steps
]
if os.path.normpath(os.path.abspath(root)).endswith(os.path.join('python', 'src')):
    LAYERS = PY_LAYERS
rank = {m: i for i, layer in enumerate(LAYERS) for m in layer}
def top(p):
    return os.path.relpath(p, root).split(os.sep)[0].removesuffix('.rs')
def is_test_file(p):
    b = os.path.basename(p)
    return b.endswith('_tests.rs') or b == 'tests.rs'
layering = 0
for a in sorted(edges):
    if is_test_file(a) or top(a) not in rank: continue
    for t in sorted(edges[a]):
        ma, mt = top(a), top(t)
        if ma == mt or mt not in rank: continue
        if rank[mt] >= rank[ma]:
            layering += 1
            print(f'LAYER: {a} -> {t} ({ma} may not import {mt}: layer {rank[ma]} imports layer {rank[mt]})')
print(f'{layering} layering violation(s)')
bad = 0
for c in sccs:
    if len(c) > 1:
        if only and not any(('/' + o + '/') in x for x in c for o in only): continue
        bad += 1
        print('CYCLE:', ' '.join(sorted(c)))
        for a in sorted(c):
            print('   ', a, '->', ' '.join(sorted(x for x in edges[a] if x in c)))
print(f'{bad} cycle(s)')
sys.exit(1 if bad or layering else 0)

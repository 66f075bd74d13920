#!/bin/bash
# Issue 16: where the warp-specialized backward's warps stall, per SASS
# instruction (ncu warp-state sampling, source page), D = 128, N = 8k,
# bf16, non-causal; summarized by opcode and by the top instructions.
# Carry build/kernels.tar.xz and the launcher.
source "$(dirname "${BASH_SOURCE[0]}")/device-env.sh"
rm -rf build/kernels && tar -xJf build/kernels.tar.xz -C build
mkdir -p "$OUT/ncu"
N=${1:-8192}
D=${2:-128}
timeout 240 ncu --clock-control none --kernel-name regex:fa_bwd_kernel --launch-skip 2 \
  --launch-count 1 --section SourceCounters --section WarpStateStats \
  -o "$OUT/ncu/ws_bwd_d${D}_n${N}" -f \
  $PY bench/profile_attention.py --backward --impl flashmlir --head-dim "$D" \
  --seqlen "$N" --launches 4 > "$OUT/ncu/ws_bwd_log.txt" 2>&1 || echo "ncu failed (rc $?)"
ncu -i "$OUT/ncu/ws_bwd_d${D}_n${N}.ncu-rep" --page source --csv --print-source sass \
  > "$OUT/ncu/ws_bwd_sass.csv" 2> "$OUT/ncu/ws_bwd_sass.err" || echo "source page failed"
head -c 600 "$OUT/ncu/ws_bwd_sass.err"
$PY - "$OUT/ncu/ws_bwd_sass.csv" <<'PY'
import csv, sys, collections
rows = list(csv.reader(open(sys.argv[1], newline="")))
if not rows:
    sys.exit("empty csv")
# The header is the first row naming "Source".
h = next(i for i, r in enumerate(rows) if "Source" in r)
head, body = rows[h], rows[h + 1:]
print("columns:", head[:40])
def col(*keys):
    for i, c in enumerate(head):
        if all(k.lower() in c.lower() for k in keys):
            return i
    return None
src = col("Source")
alls = col("Warp Stall Sampling", "All")
noti = col("Warp Stall Sampling", "Not")
if alls is None:
    sys.exit("no stall sampling column")
def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0
total = sum(num(r[alls]) for r in body if len(r) > alls)
print(f"total samples {total:.0f}")
by_op = collections.Counter()
for r in body:
    if len(r) > alls:
        op = r[src].strip().split()[0] if r[src].strip() else "?"
        if op.startswith("@"):
            op = r[src].strip().split()[1]
        by_op[op.split(".")[0]] += num(r[alls])
for op, n in by_op.most_common(25):
    print(f"{op:14s} {n:10.0f} {100 * n / total:5.1f}%")
top = sorted((r for r in body if len(r) > alls), key=lambda r: -num(r[alls]))[:40]
for r in top:
    extra = f" not-issued {num(r[noti]):.0f}" if noti is not None else ""
    print(f"{num(r[alls]):8.0f}{extra}  {r[src].strip()[:110]}")
# Per-reason columns, when the page has them.
reasons = [i for i, c in enumerate(head) if "stall" in c.lower() and i not in (alls, noti)]
for i in reasons[:30]:
    s = sum(num(r[i]) for r in body if len(r) > i)
    if s:
        print(f"reason column {head[i]}: {s:.0f}")
PY
xz -9 "$OUT/ncu/ws_bwd_sass.csv"
find "$OUT/ncu" -name "*.ncu-rep" -size +20M -delete
ls -la "$OUT/ncu"

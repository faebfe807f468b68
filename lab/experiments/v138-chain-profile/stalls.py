# v138: totals of each stall reason over one kernel's SASS and the instructions with the most
# samples, from ncu's source page as CSV (src-NAME.csv, written by run.sh; not kept: 1.5-5 MB).
# Usage: python3 stalls.py NAME [TOP]
import csv,io,sys
name=sys.argv[1]
lines=open(f'src-{name}.csv').read().splitlines()
hi=[i for i,l in enumerate(lines) if l.startswith('"Address"')][0]
rows=list(csv.reader(io.StringIO("\n".join(l for l in lines[hi:] if l.startswith('"')))))
hdr=rows[0]; data=rows[1:]
ix={h:i for i,h in enumerate(hdr)}
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
stalls=[h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot={s:sum(num(r[ix[s]]) for r in data) for s in stalls}
T=sum(num(r[ix['# Samples']]) for r in data)
print(name,'samples',T)
for s,v in sorted(tot.items(),key=lambda x:-x[1])[:12]: print(f'  {s:24s} {v:9.0f} {100*v/T:5.1f}%')
ex=sum(num(r[ix['Instructions Executed']]) for r in data)
print('  warp instructions executed', ex)
# hot instructions
top=sorted(data,key=lambda r:-num(r[ix['# Samples']]))[:int(sys.argv[2]) if len(sys.argv)>2 else 25]
for r in top:
    ss=sorted(((num(r[ix[s]]),s) for s in stalls),reverse=True)[:3]
    print(f"  {r[ix['Address']]:>6} {num(r[ix['# Samples']]):6.0f} exec {num(r[ix['Instructions Executed']]):8.0f}  {r[ix['Source']][:60]:60s} "+" ".join(f"{s[6:]}={v:.0f}" for v,s in ss))

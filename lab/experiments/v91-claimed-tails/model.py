# A model of claimed tails (no GPU): programs keep the speeds v90/v88 measured (end times of
# equal loads, as quantiles), a claim costs `over` tiles at the claiming program's speed, claims
# go to whichever program is free first. Ignores that programs speed up as others finish.
# Output (2026-12-03) at the end of README.md.
import heapq, random, bisect
# end-time quantiles measured (v90, fp8): p0 204 p10 229 p50 244 p90 257 p99 267 p100 279 ; L = 82.7 tiles
def sample_ends(n, q):
    xs=[0,0.1,0.5,0.9,0.99,1.0]
    out=[]
    for i in range(n):
        u=(i+0.5)/n
        k=bisect.bisect_right(xs,u)-1; k=min(k,len(xs)-2)
        t=(u-xs[k])/(xs[k+1]-xs[k]); out.append(q[k]+t*(q[k+1]-q[k]))
    random.Random(1).shuffle(out); return out
def sim(n, L, q, tail, unit, over):
    ends=sample_ends(n,q); rate=[L/e for e in ends]
    if tail==0: return max(ends)
    units=[]
    per=tail
    for p in range(n):
        t=per
        while t>0: units.append(min(unit,t)); t-=unit
    heap=[((L-tail)/rate[p], p) for p in range(n)]; heapq.heapify(heap)
    end=0
    for u in units:
        t,p=heapq.heappop(heap); t+= (over+u)/rate[p]; heapq.heappush(heap,(t,p))
    return max(t for t,p in heap)
for name,n,L,q in [("fp8",1584,82.7,[204,229,244,257,267,279]),("ragged-skew",792,32.1,[73.3,80.1,89.7,92.3,95.2,97.1])]:
    print(name, "static", sim(n,L,q,0,1,0))
    for over in (1.6,0.5):
        res=[]
        for tail in (2,4,6,8,12,16,20,24):
            for unit in (1,2,4,6,8,12,16,24):
                if unit>tail: continue
                res.append((sim(n,L,q,tail,unit,over),tail,unit))
        res.sort(); print(" over",over,"best", [(round(a,1),b,c) for a,b,c in res[:5]])
print("fp8 12,2 over1.6:", round(sim(1584,82.7,[204,229,244,257,267,279],12,2,1.6),1), " 20,4:", round(sim(1584,82.7,[204,229,244,257,267,279],20,4,1.6),1))

import csv,gzip,sys
rows=list(csv.reader(gzip.open(sys.argv[1],'rt')))
hdr=rows[1]; data=rows[2:]
ci=hdr.index('Source'); si=hdr.index('Warp Stall Sampling (All Samples)'); ei=hdr.index('Instructions Executed')
stall_cols=[i for i,h in enumerate(hdr) if h.startswith('stall_') and 'Not Issued' not in h]
tot=sum(int(r[si]) for r in data)
def summ(lo,hi,label):
    s=sum(int(r[si]) for r in data[lo:hi]); ex=sum(int(r[ei] or 0) for r in data[lo:hi])
    reasons={}
    for r in data[lo:hi]:
        for c in stall_cols:
            v=int(r[c] or 0)
            if v: reasons[hdr[c][6:]]=reasons.get(hdr[c][6:],0)+v
    print(label, 'samples',s, '%.1f%%'%(100*s/tot), 'warp-instr executed', ex, sorted(reasons.items(), key=lambda x:-x[1])[:7])
gt=[i for i,r in enumerate(data) if 'GLOBALTIMER' in r[ci]]
sl=[i for i,r in enumerate(data) if 'NANOSLEEP' in r[ci]]
print('globaltimer', gt, 'sleep', sl, 'lines', len(data))
marks=sorted(set(gt+sl))
for a,b in zip(marks, marks[1:]+[len(data)]): summ(a,b,'%d-%d'%(a,b))
lo=int(sys.argv[2]) if len(sys.argv)>2 else sl[0]
top=sorted(range(lo,len(data)), key=lambda i:-int(data[i][si]))[:int(sys.argv[3]) if len(sys.argv)>3 else 30]
for i in sorted(top): print(i, data[i][si], data[i][ei], data[i][ci].strip()[:80])

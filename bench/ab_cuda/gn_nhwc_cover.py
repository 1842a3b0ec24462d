#!/usr/bin/env python3
# bench/ab_cuda/gn_nhwc_cover.py - no GPU needed: emulates kernels/cuda/groupnorm_nhwc.cu's launch geometry (keep the
# constants in step with the .cu) and checks that the reductions and the elementwise passes each visit every
# (image, pixel, channel) once, at the GPU tests' shapes; prints the chunking at the bench shapes. ~1 min.
import itertools
TC,UNROLL,FILL,MAXC=64,4,4096,4096
EWU,EWFILL,EWMAX,NT=2,270336,16,256
def geom(B,C,S,V):
    TX=TC//V; TY=NT//TX
    step=TY*UNROLL; tiles=(C+TC-1)//TC
    want=(S*tiles*B+FILL-1)//FILL; want=(want+step-1)//step*step
    P=step if want<step else min(want,MAXC); K=(S+P-1)//P
    return P,K,tiles
def check(B,C,H,W_,Wc,V):
    S=H*W_; P,K,tiles=geom(B,C,S,Wc)
    TX=TC//Wc; TY=NT//TX
    seen={}
    for bx,k,b in itertools.product(range(tiles),range(K),range(B)):
        s0=k*P; s1=min(s0+P,S)
        for t in range(NT):
            tx,ty=t%TX,t//TX
            c0=bx*TC+tx*Wc
            if c0>=C: continue
            s=s0+ty
            while s<s1:
                for u in range(UNROLL):
                    p=s+u*TY
                    if p<s1:
                        for w in range(Wc): seen[(b,p,c0+w)]=seen.get((b,p,c0+w),0)+1
                s+=TY*UNROLL
    assert len(seen)==B*S*C and all(v==1 for v in seen.values()),("red",B,C,H,W_)
    nv=C//V; bxn=min(nv,NT); ly=NT//bxn
    threads=B*S*nv; pt=max(1,min(EWMAX,(threads+EWFILL-1)//EWFILL)); chunk=ly*pt
    gx=(nv+bxn-1)//bxn; gy=(S+chunk-1)//chunk
    seen={}
    for X,Y,b in itertools.product(range(gx),range(gy),range(B)):
        s0=Y*chunk; s1=min(s0+chunk,S)
        for tx,ty in itertools.product(range(bxn),range(ly)):
            c0=(X*bxn+tx)*V
            if c0>=C: continue
            s=s0+ty
            while s<s1:
                for u in range(EWU):
                    p=s+u*ly
                    if p<s1:
                        for k in range(V): seen[(b,p,c0+k)]=seen.get((b,p,c0+k),0)+1
                s+=ly*EWU
    assert len(seen)==B*S*C and all(v==1 for v in seen.values()),("ew",B,C,H,W_)
    return P,K,pt
for (B,C,H,W_) in [(2,12,5,7),(2,64,16,16),(1,40,3,1),(2,320,8,8),(1,8,128,128),(1,4,80,103),(3,96,24,24),(1,96,64,72),(2,320,16,16),(1,640,24,20),(2,960,8,8),(1,64,190,201),(1,2560,9,11),(2,1280,8,8),(2,1920,16,16)]:
    for Wc,V in [(8,8),(4,4),(1,1)]:  # the reductions' and the elementwise passes' widths: 16-bit, f32, mixed
        if V>1 and C%V: continue
        r=check(B,C,H,W_,Wc,V)
    print((B,C,H,W_),"ok",r)
for (B,C,H) in [(8,320,64),(4,320,128),(4,640,64),(4,1280,32),(8,1280,8)]:
    S=H*H; print("bench",B,C,H,"P,K,tiles",geom(B,C,S,8),"blocks",geom(B,C,S,8)[1]*geom(B,C,S,8)[2]*B)

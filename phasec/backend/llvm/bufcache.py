"""The runtime's cache of kernels' freed intermediate buffers
(``phasec_rt_alloc`` / ``phasec_rt_free`` / ``phasec_rt_trim_buffers``),
hand-written LLVM IR joined to the parallel runtime's process-wide module
(:func:`.irlib.parallel_runtime_ir`).
"""

from __future__ import annotations

__all__ = ["BUFFER_CACHE_IR", "BUFFER_CACHE_BYTES", "BUFFER_MIN_BYTES", "BUFFER_SLOTS"]

#
# A kernel's intermediate buffers too big for its stack (a Winograd
# convolution's transformed tiles, a padded input) are allocated and freed
# on every call. glibc may return such blocks to the system when several are
# free at the top of its heap, and the next call then takes a page fault for
# every 4 KiB it touches: a Winograd convolution kernel called in a loop on
# its own measured ~440 faults a call, 1.93 ms instead of 0.80 ms.
# phasec_rt_alloc / phasec_rt_free keep up to BUFFER_SLOTS freed blocks of at
# least BUFFER_MIN_BYTES (at most phasec_rt_buffer_cache_bytes in all) for the
# next request of the same or a somewhat smaller size (best fit within 2x),
# under a spin lock held for a scan of the table. A block handed out stays in
# its slot, marked lent, and comes back there with its whole size: a kernel
# gives back the size it asked for, and when that was taken for the block's,
# a 1.95 MB block lent to a 1.0 MB request shrank in the table, the 1.95 MB
# request it was kept for missed, and glibc faulted a fresh block in on every
# call (321 page faults a call in MobileNetV2's 144-channel depthwise
# convolution at 224x224). Error exits give blocks back the same way. A
# block is an ordinary aligned_alloc block; phasec_rt_trim_buffers frees
# every cached one not lent.
#
# The cache holds up to BUFFER_CACHE_BYTES by default. Models run by the VM
# allocate between kernels and glibc mostly keeps its heap (the ResNet block
# ran 1.53 ms with or without the cache), but not always: a model of one
# Winograd convolution (64 -> 64 channels, 56x56) ran 2.1-2.4 ms a call
# without it and 0.76 ms with it, and 32 -> 32 channels 0.84-1.2 ms against
# 0.25 ms (bench/README.md, "Winograd from 8 channels"). The cap bounds what
# is kept for nothing: a 64 MiB cache kept VGG-19 at 1140 MiB of peak memory
# instead of 950 and bought nothing there.

BUFFER_SLOTS = 32
BUFFER_MIN_BYTES = 64 * 1024
#: the default of phasec_rt_buffer_cache_bytes (PHASEC_BUFFER_CACHE, see jit.py)
BUFFER_CACHE_BYTES = 32 << 20

_BUFFER_CACHE_TEMPLATE = r"""
declare noalias ptr @aligned_alloc(i64, i64) nounwind
declare void @free(ptr) nounwind

@bufc.lock = internal global i32 0, align 4
@bufc.ptr = internal global [@@SLOTS@@ x ptr] zeroinitializer, align 8
@bufc.size = internal global [@@SLOTS@@ x i64] zeroinitializer, align 8
@bufc.lent = internal global [@@SLOTS@@ x i8] zeroinitializer, align 8
@bufc.total = internal global i64 0, align 8
@phasec_rt_buffer_cache_bytes = global i64 @@CAP@@, align 8

define internal void @bufc.acquire() nounwind {
entry:
  br label %try
try:
  %r = cmpxchg weak ptr @bufc.lock, i32 0, i32 1 acquire monotonic, align 4
  %ok = extractvalue { i32, i1 } %r, 1
  br i1 %ok, label %done, label %try
done:
  ret void
}

define internal void @bufc.release() nounwind {
entry:
  store atomic i32 0, ptr @bufc.lock release, align 4
  ret void
}

define internal i1 @bufc.cacheable(i64 %size) nounwind {
entry:
  %cap = load atomic i64, ptr @phasec_rt_buffer_cache_bytes monotonic, align 8
  %lo = icmp uge i64 %size, @@MIN@@
  %hi = icmp ule i64 %size, %cap
  %ok = and i1 %lo, %hi
  ret i1 %ok
}

; a block of at least %size bytes aligned to 64 (%size a multiple of 64), or null
define ptr @phasec_rt_alloc(i64 %size) nounwind {
entry:
  %c = call i1 @bufc.cacheable(i64 %size)
  br i1 %c, label %scan0, label %direct
scan0:
  call void @bufc.acquire()
  %twice = shl i64 %size, 1
  br label %scan
scan:
  %i = phi i64 [ 0, %scan0 ], [ %i1, %scan ]
  %best = phi i64 [ -1, %scan0 ], [ %best1, %scan ]
  %bsize = phi i64 [ -1, %scan0 ], [ %bsize1, %scan ]
  %sp = getelementptr [@@SLOTS@@ x i64], ptr @bufc.size, i64 0, i64 %i
  %sz = load i64, ptr %sp, align 8
  %lp = getelementptr [@@SLOTS@@ x i8], ptr @bufc.lent, i64 0, i64 %i
  %lent = load i8, ptr %lp, align 1
  %idle = icmp eq i8 %lent, 0
  %big = icmp uge i64 %sz, %size
  %near = icmp ule i64 %sz, %twice
  %smaller = icmp ult i64 %sz, %bsize
  %f0 = and i1 %idle, %big
  %f1 = and i1 %f0, %near
  %fits = and i1 %f1, %smaller
  %best1 = select i1 %fits, i64 %i, i64 %best
  %bsize1 = select i1 %fits, i64 %sz, i64 %bsize
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, @@SLOTS@@
  br i1 %more, label %scan, label %scanned
scanned:
  %found = icmp sge i64 %best1, 0
  br i1 %found, label %take, label %none
take:
  %pp = getelementptr [@@SLOTS@@ x ptr], ptr @bufc.ptr, i64 0, i64 %best1
  %p = load ptr, ptr %pp, align 8
  %tlp = getelementptr [@@SLOTS@@ x i8], ptr @bufc.lent, i64 0, i64 %best1
  store i8 1, ptr %tlp, align 1
  %t0 = load i64, ptr @bufc.total, align 8
  %t1 = sub i64 %t0, %bsize1
  store i64 %t1, ptr @bufc.total, align 8
  call void @bufc.release()
  ret ptr %p
none:
  call void @bufc.release()
  br label %direct
direct:
  %q = call ptr @aligned_alloc(i64 64, i64 %size)
  ret ptr %q
}

; give back a block of phasec_rt_alloc(%size): a lent block returns to its
; slot (with its whole size), another is kept in an empty slot when there is
; room; else freed
define void @phasec_rt_free(ptr %p, i64 %size) nounwind {
entry:
  %small = icmp ult i64 %size, @@MIN@@
  br i1 %small, label %direct, label %lock
lock:
  call void @bufc.acquire()
  %cap = load atomic i64, ptr @phasec_rt_buffer_cache_bytes monotonic, align 8
  %t0 = load i64, ptr @bufc.total, align 8
  br label %find
find:
  %i = phi i64 [ 0, %lock ], [ %i1, %find.next ]
  %empty = phi i64 [ -1, %lock ], [ %empty1, %find.next ]
  %pp = getelementptr [@@SLOTS@@ x ptr], ptr @bufc.ptr, i64 0, i64 %i
  %old = load ptr, ptr %pp, align 8
  %mine = icmp eq ptr %old, %p
  br i1 %mine, label %back, label %find.next
find.next:
  %none = icmp eq ptr %old, null
  %first = icmp slt i64 %empty, 0
  %take = and i1 %none, %first
  %empty1 = select i1 %take, i64 %i, i64 %empty
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, @@SLOTS@@
  br i1 %more, label %find, label %other
back:
  %sp = getelementptr [@@SLOTS@@ x i64], ptr @bufc.size, i64 0, i64 %i
  %whole = load i64, ptr %sp, align 8
  %lp = getelementptr [@@SLOTS@@ x i8], ptr @bufc.lent, i64 0, i64 %i
  store i8 0, ptr %lp, align 1
  %t1 = add i64 %t0, %whole
  %fits = icmp ule i64 %t1, %cap
  br i1 %fits, label %kept, label %evict
kept:
  store i64 %t1, ptr @bufc.total, align 8
  call void @bufc.release()
  ret void
evict:
  store ptr null, ptr %pp, align 8
  store i64 0, ptr %sp, align 8
  br label %full
other:
  %t2 = add i64 %t0, %size
  %room = icmp ule i64 %t2, %cap
  %slot = icmp sge i64 %empty1, 0
  %put = and i1 %room, %slot
  br i1 %put, label %store, label %full
store:
  %np = getelementptr [@@SLOTS@@ x ptr], ptr @bufc.ptr, i64 0, i64 %empty1
  store ptr %p, ptr %np, align 8
  %nsp = getelementptr [@@SLOTS@@ x i64], ptr @bufc.size, i64 0, i64 %empty1
  store i64 %size, ptr %nsp, align 8
  store i64 %t2, ptr @bufc.total, align 8
  call void @bufc.release()
  ret void
full:
  call void @bufc.release()
  br label %direct
direct:
  call void @free(ptr %p)
  ret void
}

; free every cached block; returns the bytes released
define i64 @phasec_rt_trim_buffers() nounwind {
entry:
  call void @bufc.acquire()
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %i1, %next ]
  %pp = getelementptr [@@SLOTS@@ x ptr], ptr @bufc.ptr, i64 0, i64 %i
  %p = load ptr, ptr %pp, align 8
  %has = icmp ne ptr %p, null
  %lp = getelementptr [@@SLOTS@@ x i8], ptr @bufc.lent, i64 0, i64 %i
  %lent = load i8, ptr %lp, align 1
  %idle = icmp eq i8 %lent, 0
  %drops = and i1 %has, %idle
  br i1 %drops, label %drop, label %next
drop:
  call void @free(ptr %p)
  store ptr null, ptr %pp, align 8
  %sp = getelementptr [@@SLOTS@@ x i64], ptr @bufc.size, i64 0, i64 %i
  store i64 0, ptr %sp, align 8
  br label %next
next:
  %i1 = add i64 %i, 1
  %more = icmp ult i64 %i1, @@SLOTS@@
  br i1 %more, label %loop, label %done
done:
  %t = load i64, ptr @bufc.total, align 8
  store i64 0, ptr @bufc.total, align 8
  call void @bufc.release()
  ret i64 %t
}
"""

BUFFER_CACHE_IR = (_BUFFER_CACHE_TEMPLATE.replace("@@SLOTS@@", str(BUFFER_SLOTS))
                   .replace("@@MIN@@", str(BUFFER_MIN_BYTES))
                   .replace("@@CAP@@", str(BUFFER_CACHE_BYTES)))

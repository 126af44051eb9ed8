"""Hand-written LLVM IR: the parallel runtime and helpers for kernels.

* ``phasec_rt_parallel_for`` (one runtime module per process): runs an
  outlined loop body over chunks of ``[0, n)`` on a persistent thread pool;
* ``phasec_rt_alloc`` / ``phasec_rt_free`` (the same module): kernels' large
  intermediate buffers, through a small cache of freed blocks
  (:mod:`.bufcache`);
* ``phasec.ipow``: integer power.

The vectorizable float32 math (``phasec.expf`` and friends) is in
:mod:`.mathlib`.
"""

from __future__ import annotations

from phasec.backend.llvm.bufcache import BUFFER_CACHE_IR

__all__ = ["KERNEL_LIB_IR", "KERNEL_LIB_DECLS", "parallel_runtime_ir", "pool_supported"]


# --------------------------------------------------------------------------
# Linked into every kernel module
# --------------------------------------------------------------------------

KERNEL_LIB_IR = r"""
declare i32 @phasec_rt_parallel_for(ptr, ptr, i64, i64) nounwind
; set on Ctrl-C (SIGINT) or SIGTERM while a kernel runs (phasec/backend/interrupt.py)
@phasec_rt_cancel = external global i32, align 4

; Integer power by squaring; a negative exponent gives 0 (1 and -1 excepted).
define internal i64 @phasec.ipow(i64 %b, i64 %e) nounwind memory(none) {
entry:
  %neg = icmp slt i64 %e, 0
  br i1 %neg, label %negexp, label %loop
negexp:
  %is1 = icmp eq i64 %b, 1
  %ism1 = icmp eq i64 %b, -1
  %odd = and i64 %e, 1
  %isodd = icmp ne i64 %odd, 0
  %m1r = select i1 %isodd, i64 -1, i64 1
  %r0 = select i1 %ism1, i64 %m1r, i64 0
  %r1 = select i1 %is1, i64 1, i64 %r0
  ret i64 %r1
loop:
  %acc = phi i64 [ 1, %entry ], [ %acc2, %body ]
  %base = phi i64 [ %b, %entry ], [ %base2, %body ]
  %ex = phi i64 [ %e, %entry ], [ %ex2, %body ]
  %done = icmp eq i64 %ex, 0
  br i1 %done, label %exit, label %body
body:
  %bit = and i64 %ex, 1
  %has = icmp ne i64 %bit, 0
  %m = mul i64 %acc, %base
  %acc2 = select i1 %has, i64 %m, i64 %acc
  %base2 = mul i64 %base, %base
  %ex2 = lshr i64 %ex, 1
  br label %loop
exit:
  ret i64 %acc
}
"""

KERNEL_LIB_DECLS: dict[str, str] = {}

# --------------------------------------------------------------------------
# The parallel runtime: one module per process
# --------------------------------------------------------------------------
#
# phasec_rt_parallel_for(fn, ctx, n, cost) runs fn(ctx, begin, end) over
# chunks of [0, n); it returns the bitwise or of the chunks' return codes.
# It runs serially when there is one thread, n <= 1, or n * cost (estimated
# element stores) is below phasec_rt_min_work.
#
# POOL_RUNTIME_IR (Linux): a persistent pool of num_threads - 1 workers,
# started on first use. A job is published by storing its parameters, then
# the packed word @pool.next = gen << 32 | chunks << 16 | next_chunk
# (release), then bumping the futex word @pool.gen. Threads claim chunks
# with a compare-and-swap on @pool.next that also checks the generation, so
# a late worker never runs a chunk of a finished job; the caller works too
# and then waits until @pool.done counts every chunk. A large loop is cut
# into several chunks per thread (about CHUNK_WORK estimated stores each,
# 4 to 32 per thread), so that a worker that starts late or is descheduled
# leaves the rest to the others; each chunk costs ~0.4-0.5 us of claiming
# on the 2-vCPU VM, so chunks are not made smaller than ~20 us of work
# (see CHUNK_WORK). Idle workers spin for
# phasec_rt_spin rounds, then sleep on the futex. One job at a time: a
# caller that finds the pool busy (another Python thread) runs serially.
#
# Waking a sleeping worker is not free: the futex wake costs the caller
# ~10 us on a virtual machine (the host has to wake the idle CPU) and the
# worker starts tens of microseconds later. Measured on the AVX-512 VM
# (two CPUs; a loop run after 1 ms idle, median): 32k stores 9.0 us on one
# thread, 16.3 us with a worker to wake; 262k stores 36.8 vs 45.1 us; 524k
# stores 62.9 vs 59.3 us. So while an active worker sleeps
# (@phasec_rt_asleep), a loop of fewer than phasec_rt_wake_work estimated stores
# runs serially without waking it, except the WAKE_AFTER-th such loop in
# quick succession: a lone small loop after idle is not slowed down,
# and a stream of them pays one wake-up, after which the worker, spinning,
# takes loops down to phasec_rt_min_work.
#
# SPAWN_RUNTIME_IR (elsewhere): pthread_create/pthread_join per call.

_POOL_TEMPLATE = r"""
@phasec_rt_num_threads = global i32 1, align 4
@phasec_rt_min_work = global i64 32768, align 8
@phasec_rt_spin = global i32 3000, align 4
@phasec_rt_chunk_work = global i64 @@CHUNK_WORK@@, align 8
@phasec_rt_wake_work = global i64 @@WAKE_WORK@@, align 8
@pool.lock = internal global i32 0, align 4
@pool.gen = internal global i32 0, align 4
@pool.next = internal global i64 0, align 8
@pool.done = internal global i64 0, align 8
@pool.rc = internal global i32 0, align 4
@pool.fn = internal global ptr null, align 8
@pool.ctx = internal global ptr null, align 8
@pool.n = internal global i64 0, align 8
@pool.nworkers = internal global i32 0, align 4
@pool.sleepers = internal global i32 0, align 4
; (global, not internal: read by tests through jit._pool_state)
@phasec_rt_asleep = global i32 0, align 4
@phasec_rt_wakeups = global i64 0, align 8
@pool.skipped = internal global i32 0, align 4
@pool.skip_tsc = internal global i64 0, align 8
@pool.caller_cpu = internal global i32 -1, align 4
@pool.base_mask = internal global [16 x i64] zeroinitializer, align 8
@pool.have_mask = internal global i32 0, align 4

declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_detach(i64) nounwind
declare i64 @syscall(i64, ...) nounwind
declare i32 @sched_yield() nounwind
declare i32 @sched_getcpu() nounwind
declare i32 @sched_getaffinity(i32, i64, ptr) nounwind
declare i32 @sched_setaffinity(i32, i64, ptr) nounwind
declare i64 @llvm.smin.i64(i64, i64)
declare i64 @llvm.umin.i64(i64, i64)
declare i64 @llvm.umax.i64(i64, i64)
@@PAUSE_DECL@@
declare i64 @llvm.readcyclecounter()

; A worker woken on the CPU its caller runs on would only take turns with
; it (seen on a shared machine: the scheduler placed the woken worker next
; to its waker while the other core ran other processes' jobs, and two
; threads ran no faster than one). Such a worker restricts itself to the
; process's CPUs but the caller's, which moves it at once; the next clash
; (the caller moved) sets a new mask. Nothing happens without a clash.
define internal void @pool.avoid_cpu(i32 %cpu) nounwind {
entry:
  %mask = alloca [16 x i64], align 8
  %have = load atomic i32, ptr @pool.have_mask acquire, align 4
  %ok0 = icmp ne i32 %have, 0
  %inrange = icmp ult i32 %cpu, 1024
  %ok = and i1 %ok0, %inrange
  br i1 %ok, label %copy, label %done
copy:
  %i = phi i64 [ 0, %entry ], [ %inext, %copy ]
  %any = phi i64 [ 0, %entry ], [ %anynext, %copy ]
  %src = getelementptr inbounds [16 x i64], ptr @pool.base_mask, i64 0, i64 %i
  %dst = getelementptr inbounds [16 x i64], ptr %mask, i64 0, i64 %i
  %w = load i64, ptr %src, align 8
  %c64 = zext i32 %cpu to i64
  %word = lshr i64 %c64, 6
  %bit = and i64 %c64, 63
  %one = shl i64 1, %bit
  %notone = xor i64 %one, -1
  %hit = icmp eq i64 %i, %word
  %cleared = and i64 %w, %notone
  %w2 = select i1 %hit, i64 %cleared, i64 %w
  store i64 %w2, ptr %dst, align 8
  %anynext = or i64 %any, %w2
  %inext = add i64 %i, 1
  %more = icmp ult i64 %inext, 16
  br i1 %more, label %copy, label %apply
apply:
  %nonempty = icmp ne i64 %anynext, 0
  br i1 %nonempty, label %set, label %done
set:
  %r = call i32 @sched_setaffinity(i32 0, i64 128, ptr %mask)
  br label %done
done:
  ret void
}

; Claim and run chunks of job %gen until none is left.
define internal void @pool.work(i32 %gen) nounwind {
entry:
  %gen64 = zext i32 %gen to i64
  %v0 = load atomic i64, ptr @pool.next acquire, align 8
  br label %loop
loop:
  %v = phi i64 [ %v0, %entry ], [ %vfail, %claim ], [ %vafter, %mark ]
  %vg = lshr i64 %v, 32
  %same = icmp eq i64 %vg, %gen64
  br i1 %same, label %check, label %exit
check:
  %idx = and i64 %v, 65535
  %k0 = lshr i64 %v, 16
  %k = and i64 %k0, 65535
  %more = icmp ult i64 %idx, %k
  br i1 %more, label %claim, label %exit
claim:
  %v1 = add i64 %v, 1
  %pair = cmpxchg ptr @pool.next, i64 %v, i64 %v1 acq_rel acquire, align 8
  %vfail = extractvalue { i64, i1 } %pair, 0
  %ok = extractvalue { i64, i1 } %pair, 1
  br i1 %ok, label %run, label %loop
run:
  %fn = load ptr, ptr @pool.fn, align 8
  %ctx = load ptr, ptr @pool.ctx, align 8
  %n = load i64, ptr @pool.n, align 8
  %in = mul i64 %idx, %n
  %b = udiv i64 %in, %k
  %i1 = add i64 %idx, 1
  %i1n = mul i64 %i1, %n
  %e = udiv i64 %i1n, %k
  %rc = call i32 %fn(ptr %ctx, i64 %b, i64 %e)
  %bad = icmp ne i32 %rc, 0
  br i1 %bad, label %seterr, label %mark
seterr:
  %old = atomicrmw or ptr @pool.rc, i32 %rc monotonic, align 4
  br label %mark
mark:
  %d = atomicrmw add ptr @pool.done, i64 1 release, align 8
  %vafter = load atomic i64, ptr @pool.next acquire, align 8
  br label %loop
exit:
  ret void
}

; Worker number %arg (0-based). Workers beyond num_threads - 1 (after the
; thread count was lowered) sleep without spinning or taking chunks.
define internal ptr @pool.worker(ptr %arg) nounwind {
entry:
  %index = ptrtoint ptr %arg to i32
  br label %top
top:
  %my = phi i32 [ -1, %entry ], [ %g, %run_job ], [ %expect, %sleep ]
  %nt = load atomic i32, ptr @phasec_rt_num_threads monotonic, align 4
  %limit = sub i32 %nt, 1
  %active = icmp slt i32 %index, %limit
  br i1 %active, label %spin_start, label %excess
excess:
  %gx = load atomic i32, ptr @pool.gen acquire, align 4
  br label %sleep
spin_start:
  %spinmax = load i32, ptr @phasec_rt_spin, align 4
  br label %spin
spin:
  %i = phi i32 [ 0, %spin_start ], [ %inext, %pause ]
  %g = load atomic i32, ptr @pool.gen acquire, align 4
  %changed = icmp ne i32 %g, %my
  br i1 %changed, label %work, label %count
count:
  %inext = add i32 %i, 1
  %keep = icmp slt i32 %inext, %spinmax
  br i1 %keep, label %pause, label %sleep
pause:
  @@PAUSE_CALL@@
  br label %spin
sleep:
  ; @phasec_rt_asleep counts the active workers among the sleepers (the excess
  ; ones sleep until the thread count is raised)
  %expect = phi i32 [ %my, %count ], [ %gx, %excess ]
  %counted = phi i32 [ 1, %count ], [ 0, %excess ]
  %a0 = atomicrmw add ptr @phasec_rt_asleep, i32 %counted seq_cst, align 4
  %s0 = atomicrmw add ptr @pool.sleepers, i32 1 seq_cst, align 4
  %r = call i64 (i64, ...) @syscall(i64 @@SYS_FUTEX@@, ptr @pool.gen, i32 128, i32 %expect, ptr null)
  %s1 = atomicrmw sub ptr @pool.sleepers, i32 1 seq_cst, align 4
  %a1 = atomicrmw sub ptr @phasec_rt_asleep, i32 %counted seq_cst, align 4
  br label %top
work:
  %ccpu = load atomic i32, ptr @pool.caller_cpu monotonic, align 4
  %wcpu = call i32 @sched_getcpu()
  %clash = icmp eq i32 %ccpu, %wcpu
  br i1 %clash, label %move, label %run_job
move:
  call void @pool.avoid_cpu(i32 %ccpu)
  br label %run_job
run_job:
  call void @pool.work(i32 %g)
  br label %top
}

define i32 @phasec_rt_parallel_for(ptr %fn, ptr %ctx, i64 %n, i64 %cost) nounwind {
entry:
  %tid = alloca i64, align 8
  %nt32 = load i32, ptr @phasec_rt_num_threads, align 4
  %nt0 = sext i32 %nt32 to i64
  %nt = call i64 @llvm.smin.i64(i64 %nt0, i64 256)
  %work = mul i64 %n, %cost
  %minw = load i64, ptr @phasec_rt_min_work, align 8
  %small = icmp slt i64 %work, %minw
  %few = icmp sle i64 %nt, 1
  %tiny = icmp sle i64 %n, 1
  %s1 = or i1 %small, %few
  %serial = or i1 %s1, %tiny
  br i1 %serial, label %run_serial, label %check_asleep
check_asleep:
  ; a sleeping worker is only woken for a loop worth the wake-up (see above)
  %asl = load atomic i32, ptr @phasec_rt_asleep monotonic, align 4
  %anyasl = icmp sgt i32 %asl, 0
  %ww = load i64, ptr @phasec_rt_wake_work, align 8
  %below = icmp slt i64 %work, %ww
  %nowake = and i1 %anyasl, %below
  br i1 %nowake, label %skip, label %try_lock
skip:
  ; ... unless small loops keep coming: the WAKE_AFTER-th one skipped, each
  ; within ~2^20 time-stamp ticks (a few tenths of a millisecond) of the
  ; last, wakes the worker anyway, which then spins between them
  %now = @@TSC_CALL@@
  %last = load atomic i64, ptr @pool.skip_tsc monotonic, align 8
  store atomic i64 %now, ptr @pool.skip_tsc monotonic, align 8
  %dt = sub i64 %now, %last
  %recent = icmp ult i64 %dt, 1048576
  br i1 %recent, label %skip_count, label %skip_first
skip_first:
  store atomic i32 1, ptr @pool.skipped monotonic, align 4
  br label %run_serial
skip_count:
  %sk = atomicrmw add ptr @pool.skipped, i32 1 monotonic, align 4
  %sk1 = add i32 %sk, 1
  %enough = icmp uge i32 %sk1, @@WAKE_AFTER@@
  br i1 %enough, label %try_lock, label %run_serial
try_lock:
  %lk = cmpxchg ptr @pool.lock, i32 0, i32 1 acquire monotonic, align 4
  %locked = extractvalue { i32, i1 } %lk, 1
  br i1 %locked, label %spawn_hdr, label %run_serial
run_serial:
  %rcs = call i32 %fn(ptr %ctx, i64 0, i64 %n)
  ret i32 %rcs
spawn_hdr:
  %nw = load i32, ptr @pool.nworkers, align 4
  %nw64 = sext i32 %nw to i64
  %want = sub i64 %nt, 1
  %need = icmp slt i64 %nw64, %want
  br i1 %need, label %spawn, label %publish
spawn:
  %hm = load atomic i32, ptr @pool.have_mask acquire, align 4
  %nohm = icmp eq i32 %hm, 0
  br i1 %nohm, label %getmask, label %spawn2
getmask:
  %gm = call i32 @sched_getaffinity(i32 0, i64 128, ptr @pool.base_mask)
  %gmok = icmp eq i32 %gm, 0
  %gmv = zext i1 %gmok to i32
  store atomic i32 %gmv, ptr @pool.have_mask release, align 4
  br label %spawn2
spawn2:
  %warg = inttoptr i32 %nw to ptr
  %r = call i32 @pthread_create(ptr %tid, ptr null, ptr @pool.worker, ptr %warg)
  %ok = icmp eq i32 %r, 0
  br i1 %ok, label %spawned, label %publish
spawned:
  %t = load i64, ptr %tid, align 8
  %rd = call i32 @pthread_detach(i64 %t)
  %nw1 = add i32 %nw, 1
  store i32 %nw1, ptr @pool.nworkers, align 4
  br label %spawn_hdr
publish:
  ; Chunks: one per CHUNK_WORK estimated stores, between 4 and 32 per
  ; thread, at most one per iteration (and what the packed word can count).
  %nt4 = mul i64 %nt, 4
  %ntx32 = mul i64 %nt, 32
  %cw = load i64, ptr @phasec_rt_chunk_work, align 8
  %byw = udiv i64 %work, %cw
  %kw = call i64 @llvm.umin.i64(i64 %byw, i64 %ntx32)
  %kl = call i64 @llvm.umax.i64(i64 %kw, i64 %nt4)
  %kc = call i64 @llvm.umin.i64(i64 %kl, i64 65535)
  %k0 = call i64 @llvm.umin.i64(i64 %n, i64 %kc)
  ; ... of equal sizes: ceil(n / k0) iterations each (12 heads in 8 chunks
  ; would be chunks of 1 and 2 heads, whose last one can leave a thread
  ; idle; as 6 chunks of 2 they split 3 / 3)
  %nm1 = add i64 %n, -1
  %per0 = add i64 %nm1, %k0
  %per = udiv i64 %per0, %k0
  %k1 = add i64 %nm1, %per
  %k = udiv i64 %k1, %per
  %mycpu = call i32 @sched_getcpu()
  store atomic i32 %mycpu, ptr @pool.caller_cpu monotonic, align 4
  store atomic i32 0, ptr @pool.skipped monotonic, align 4
  store ptr %fn, ptr @pool.fn, align 8
  store ptr %ctx, ptr @pool.ctx, align 8
  store i64 %n, ptr @pool.n, align 8
  store atomic i64 0, ptr @pool.done monotonic, align 8
  store atomic i32 0, ptr @pool.rc monotonic, align 4
  %g0 = load i32, ptr @pool.gen, align 4
  %g1 = add i32 %g0, 1
  %g64 = zext i32 %g1 to i64
  %gsh = shl i64 %g64, 32
  %ksh = shl i64 %k, 16
  %packed = or i64 %gsh, %ksh
  store atomic i64 %packed, ptr @pool.next release, align 8
  store atomic i32 %g1, ptr @pool.gen seq_cst, align 4
  %sl = load atomic i32, ptr @pool.sleepers seq_cst, align 4
  %anysl = icmp sgt i32 %sl, 0
  br i1 %anysl, label %wake, label %help
wake:
  %w = call i64 (i64, ...) @syscall(i64 @@SYS_FUTEX@@, ptr @pool.gen, i32 129, i32 2147483647)
  %wk = atomicrmw add ptr @phasec_rt_wakeups, i64 1 monotonic, align 8
  br label %help
help:
  call void @pool.work(i32 %g1)
  br label %wait
wait:
  %j = phi i32 [ 0, %help ], [ %jn, %do_yield ], [ %jn, %do_pause ]
  %d = load atomic i64, ptr @pool.done acquire, align 8
  %fin = icmp uge i64 %d, %k
  br i1 %fin, label %finish, label %wait_more
wait_more:
  %jn = add i32 %j, 1
  %jm = and i32 %jn, 1023
  %yield = icmp eq i32 %jm, 0
  br i1 %yield, label %do_yield, label %do_pause
do_yield:
  %y = call i32 @sched_yield()
  br label %wait
do_pause:
  @@PAUSE_CALL@@
  br label %wait
finish:
  %rc = load atomic i32, ptr @pool.rc monotonic, align 4
  store atomic i32 0, ptr @pool.lock release, align 4
  ret i32 %rc
}
"""

SPAWN_RUNTIME_IR = r"""
%phasec.task = type { ptr, ptr, i64, i64, i64, i32, i32 }

@phasec_rt_num_threads = global i32 1, align 4
@phasec_rt_min_work = global i64 32768, align 8
@phasec_rt_spin = global i32 0, align 4
@phasec_rt_chunk_work = global i64 @@CHUNK_WORK@@, align 8
@phasec_rt_wake_work = global i64 0, align 8  ; (no sleeping workers here)
@phasec_rt_asleep = global i32 0, align 4
@phasec_rt_wakeups = global i64 0, align 8

declare i32 @pthread_create(ptr, ptr, ptr, ptr) nounwind
declare i32 @pthread_join(i64, ptr) nounwind
declare i64 @llvm.smin.i64(i64, i64)

define internal ptr @phasec.thread_entry(ptr %task) nounwind {
entry:
  %fnp = getelementptr inbounds %phasec.task, ptr %task, i32 0, i32 0
  %fn = load ptr, ptr %fnp, align 8
  %ctxp = getelementptr inbounds %phasec.task, ptr %task, i32 0, i32 1
  %ctx = load ptr, ptr %ctxp, align 8
  %bp = getelementptr inbounds %phasec.task, ptr %task, i32 0, i32 2
  %b = load i64, ptr %bp, align 8
  %ep = getelementptr inbounds %phasec.task, ptr %task, i32 0, i32 3
  %e = load i64, ptr %ep, align 8
  %rc = call i32 %fn(ptr %ctx, i64 %b, i64 %e)
  %rcp = getelementptr inbounds %phasec.task, ptr %task, i32 0, i32 5
  store i32 %rc, ptr %rcp, align 4
  ret ptr null
}

define i32 @phasec_rt_parallel_for(ptr %fn, ptr %ctx, i64 %n, i64 %cost) nounwind {
entry:
  %nt32 = load i32, ptr @phasec_rt_num_threads, align 4
  %nt = sext i32 %nt32 to i64
  %k0 = call i64 @llvm.smin.i64(i64 %nt, i64 %n)
  %k = call i64 @llvm.smin.i64(i64 %k0, i64 256)
  %work = mul i64 %n, %cost
  %minw = load i64, ptr @phasec_rt_min_work, align 8
  %small = icmp slt i64 %work, %minw
  %few = icmp sle i64 %k, 1
  %serial = or i1 %small, %few
  br i1 %serial, label %run_serial, label %run_parallel
run_serial:
  %rcs = call i32 %fn(ptr %ctx, i64 0, i64 %n)
  ret i32 %rcs
run_parallel:
  %tasks = alloca %phasec.task, i64 %k, align 16
  br label %spawn_hdr
spawn_hdr:
  %i = phi i64 [ 1, %run_parallel ], [ %i.next, %spawn_latch ]
  %more = icmp slt i64 %i, %k
  br i1 %more, label %spawn_body, label %spawn_done
spawn_body:
  %t = getelementptr inbounds %phasec.task, ptr %tasks, i64 %i
  %in = mul i64 %i, %n
  %b = sdiv i64 %in, %k
  %i1 = add i64 %i, 1
  %i1n = mul i64 %i1, %n
  %e = sdiv i64 %i1n, %k
  %t.fn = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 0
  store ptr %fn, ptr %t.fn, align 8
  %t.ctx = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 1
  store ptr %ctx, ptr %t.ctx, align 8
  %t.b = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 2
  store i64 %b, ptr %t.b, align 8
  %t.e = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 3
  store i64 %e, ptr %t.e, align 8
  %t.rc = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 5
  store i32 0, ptr %t.rc, align 4
  %t.tid = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 4
  %r = call i32 @pthread_create(ptr %t.tid, ptr null, ptr @phasec.thread_entry, ptr %t)
  %ok = icmp eq i32 %r, 0
  %okz = zext i1 %ok to i32
  %t.started = getelementptr inbounds %phasec.task, ptr %t, i32 0, i32 6
  store i32 %okz, ptr %t.started, align 4
  br i1 %ok, label %spawn_latch, label %spawn_inline
spawn_inline:
  %rci = call i32 %fn(ptr %ctx, i64 %b, i64 %e)
  store i32 %rci, ptr %t.rc, align 4
  br label %spawn_latch
spawn_latch:
  %i.next = add i64 %i, 1
  br label %spawn_hdr
spawn_done:
  %e0 = sdiv i64 %n, %k
  %rc0 = call i32 %fn(ptr %ctx, i64 0, i64 %e0)
  br label %join_hdr
join_hdr:
  %j = phi i64 [ 1, %spawn_done ], [ %j.next, %join_latch ]
  %acc = phi i32 [ %rc0, %spawn_done ], [ %acc.next, %join_latch ]
  %jm = icmp slt i64 %j, %k
  br i1 %jm, label %join_body, label %join_done
join_body:
  %tj = getelementptr inbounds %phasec.task, ptr %tasks, i64 %j
  %tj.started = getelementptr inbounds %phasec.task, ptr %tj, i32 0, i32 6
  %started = load i32, ptr %tj.started, align 4
  %was = icmp ne i32 %started, 0
  br i1 %was, label %join_call, label %join_latch
join_call:
  %tj.tid = getelementptr inbounds %phasec.task, ptr %tj, i32 0, i32 4
  %tid = load i64, ptr %tj.tid, align 8
  %jr = call i32 @pthread_join(i64 %tid, ptr null)
  br label %join_latch
join_latch:
  %tj.rc = getelementptr inbounds %phasec.task, ptr %tj, i32 0, i32 5
  %rcj = load i32, ptr %tj.rc, align 4
  %acc.next = or i32 %acc, %rcj
  %j.next = add i64 %j, 1
  br label %join_hdr
join_done:
  ret i32 %acc
}
"""

#: Default estimated element stores per chunk of a parallel loop (about 20 us of
#: memory-bound work). A chunk costs ~0.4-0.5 us beyond its work on the 2-vCPU
#: VM (its claim and completion move cache lines between the cores): with 16384
#: (up to 32 chunks per thread) a 512 x 1024 layer_norm took 80.4 us on two
#: threads, with 262144 (8 chunks) 60.1 us (99.9 us on one); BERT's softmax
#: 50.6 -> 41.6 us; kernels of few, long chunks (the GEMMs) are unchanged.
CHUNK_WORK = 262144

#: Default estimated element stores below which a parallel loop does not wake
#: a sleeping pool worker but runs serially (see the pool's comment; the
#: value used is host_tuning().parallel_wake_work, set when the runtime starts).
WAKE_WORK = 1 << 19
#: ... except the WAKE_AFTER-th such loop in quick succession, so that a stream of
#: small loops (a model of small kernels called back to back) still gets the
#: worker, which then spins between them: one wake-up per stream, not per loop
WAKE_AFTER = 4

#: Linux futex syscall numbers by machine.
_SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}


def parallel_runtime_ir(kind: str, machine: str) -> str:
    """The parallel runtime module: ``"pool"`` (Linux) or ``"spawn"``."""
    if kind == "spawn":  # (one thread per chunk: the chunk size is not used)
        return SPAWN_RUNTIME_IR.replace("@@CHUNK_WORK@@", str(CHUNK_WORK)) + BUFFER_CACHE_IR
    x86 = machine in ("x86_64", "amd64")
    return BUFFER_CACHE_IR + (_POOL_TEMPLATE.replace("@@SYS_FUTEX@@", str(_SYS_FUTEX[machine]))
            .replace("@@CHUNK_WORK@@", str(CHUNK_WORK))
            .replace("@@WAKE_WORK@@", str(WAKE_WORK))
            .replace("@@WAKE_AFTER@@", str(WAKE_AFTER))
            # the time stamp counter (elsewhere the cycle counter may trap in
            # user mode: then every skipped loop counts as recent)
            .replace("@@TSC_CALL@@", "call i64 @llvm.readcyclecounter()" if x86 else
                     "add i64 0, 0")
            .replace("@@PAUSE_DECL@@", "declare void @llvm.x86.sse2.pause()" if x86 else "")
            .replace("@@PAUSE_CALL@@", "call void @llvm.x86.sse2.pause()" if x86 else
                     "fence seq_cst"))


def pool_supported(platform: str, machine: str) -> bool:
    return platform.startswith("linux") and machine in _SYS_FUTEX

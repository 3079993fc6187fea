//! Stack ids as the stack-trace maps give them, shared by the families that
//! take stacks (perf on CPU, contention off CPU).

/// The stack id of a stack not there to take: the kernel stack of a
/// user-mode sample, the user stack of a kernel thread (`-EFAULT`).
pub const NO_STACK: u32 = u32::MAX;
/// The stack id of a stack the kernel could not store (its hash bucket
/// taken by another stack, `-EEXIST`) or failed to walk.
pub const LOST_STACK: u32 = u32::MAX - 1;
/// The stack id of an off-CPU wait whose stacks were not sampled (one
/// switch-out in `CONT_WAIT_EVERY` is): its time is counted exactly, and
/// user space spreads it over the thread's sampled stacks.
pub const UNSAMPLED_STACK: u32 = u32::MAX - 2;
/// `-EFAULT` from `bpf_get_stackid`: no stack to walk.
pub const EFAULT: i32 = -14;
/// `bpf_get_stackid` flag: the user stack instead of the kernel one.
pub const BPF_F_USER_STACK: u64 = 1 << 8;

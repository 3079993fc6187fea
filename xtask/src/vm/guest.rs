//! The guest architectures of the kernel matrix: for each, how QEMU emulates
//! it (its `qemu-system-*` binary, machine, serial console) and Debian's name
//! for it (the packages of its kernels and of its busybox).
//!
//! Why here and not in `arch.rs`: that table is about building mdiag for an
//! architecture; this one is only about booting it, and only the matrix
//! needs it. The two meet by the architecture's name ([`Guest::arch`]).
use std::time::Duration;

use anyhow::{Result, anyhow};

use crate::arch::{ARCHES, Arch};

/// One architecture the matrix boots.
#[derive(Debug, PartialEq, Eq)]
pub struct Guest {
    /// The name of its row in [`ARCHES`] (and `uname -m` in the guest).
    pub name: &'static str,
    /// Debian's architecture: the suffix of its packages.
    pub deb_arch: &'static str,
    /// QEMU's system emulator, and the Debian package that has it.
    pub qemu: &'static str,
    pub qemu_package: &'static str,
    /// QEMU arguments before the common ones: the machine and the CPU.
    pub machine: &'static [&'static str],
    /// QEMU's accelerator: always TCG (KVM is not usable everywhere, and
    /// never for another architecture), with its thread model.
    pub accel: &'static str,
    /// The kernel's console device (`console=` on its command line).
    pub console: &'static str,
    /// How long one boot may take, both recordings included (TCG runs a
    /// foreign architecture several times slower than the host's own).
    pub timeout: Duration,
}

pub const X86_64: Guest = Guest {
    name: "x86_64",
    deb_arch: "amd64",
    qemu: "qemu-system-x86_64",
    qemu_package: "qemu-system-x86",
    machine: &["-cpu", "max"],
    // One host thread runs both vCPUs in turn: the guest still has two CPUs
    // (IPIs, per-CPU maps, migrations), but never two at the same instant.
    // With a thread per vCPU, 6.12.117 twice stopped on a stale int3 of
    // x86 text patching (`Oops: int3` at the `tp_func_sched_switch` static
    // call, then at the softirq_entry jump label while the other vCPU
    // waited in smp_call_function_many_cond for the patch's sync), once
    // in each of two CI runs, as programs attached or detached; never on
    // 5.10 or 6.1, never on aarch64 or s390x, whose patching takes no
    // breakpoint.
    accel: "tcg,thread=single",
    console: "ttyS0",
    timeout: Duration::from_secs(300),
};

pub const AARCH64: Guest = Guest {
    name: "aarch64",
    deb_arch: "arm64",
    qemu: "qemu-system-aarch64",
    qemu_package: "qemu-system-arm",
    // pauth-impdef: QEMU's own pointer-authentication hash instead of the
    // architected QARMA, which is slow to emulate and changes nothing here.
    machine: &["-M", "virt", "-cpu", "max,pauth-impdef=on"],
    accel: "tcg",
    console: "ttyAMA0",
    timeout: Duration::from_secs(420),
};

pub const S390X: Guest = Guest {
    name: "s390x",
    deb_arch: "s390x",
    qemu: "qemu-system-s390x",
    qemu_package: "qemu-system-misc",
    machine: &["-M", "s390-ccw-virtio", "-cpu", "max"],
    accel: "tcg",
    // The SCLP line-mode console: built into Debian's s390x kernels and
    // always there on QEMU's s390-ccw-virtio machine.
    console: "ttysclp0",
    timeout: Duration::from_secs(420),
};

pub const GUESTS: [&Guest; 3] = [&X86_64, &AARCH64, &S390X];

impl Guest {
    /// Its row in [`ARCHES`]: how mdiag is built for it.
    pub fn arch(&self) -> Result<&'static Arch> {
        ARCHES
            .iter()
            .find(|a| a.name == self.name)
            .ok_or_else(|| anyhow!("xtask's arch table has no {}", self.name))
    }

    /// The kernel command line: the console, quiet, and a soft lockup
    /// that panics, and a panic that ends QEMU (`-no-reboot`), so a hung
    /// guest stops within half a minute with a stack on the console.
    pub fn append(&self) -> String {
        format!("console={} quiet panic=-1 softlockup_panic=1", self.console)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_guest_has_a_build_row_and_only_x86_64_is_the_host() {
        for guest in GUESTS {
            let arch = guest.arch().unwrap();
            assert_eq!(arch.is_host(), guest.name == "x86_64", "{}", guest.name);
            assert!(
                guest
                    .append()
                    .starts_with(&format!("console={} ", guest.console))
            );
        }
        assert!(GUESTS.iter().all(|g| g.timeout >= Duration::from_secs(300)));
    }
}

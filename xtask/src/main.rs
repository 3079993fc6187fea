//! `cargo xtask`: the project's one entry point for setting up, building,
//! running and testing mdiag (see `cargo xtask --help`).
//!
//! Every command runs from the workspace root with inherited stdio; xtask's
//! own messages go to stderr, prefixed `xtask:`.
use std::{ffi::OsString, process::ExitCode};

use clap::{Args, Parser, Subcommand};

mod arch;
mod bench;
mod cmd;
mod cross;
mod disk;
mod load;
mod mongod;
mod package;
mod prebuild;
mod recording;
mod release;
mod run;
mod setup;
mod setup_k8s;
mod test;
mod timed;
mod vm;

/// Prints one `xtask:` line on stderr.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("xtask [{}]: {}", $crate::timed::since_start(), format_args!($($arg)*))
    };
}

#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version)]
#[command(about = "Set up, build, run and test mdiag")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Install what building and testing need (Debian packages, rustup
    /// toolchains, bpf-linker, the tests' venv, mongod, helm); only what is
    /// missing, and fast when nothing is. `build`, `run` and `package` set
    /// up only what building needs, each test tier what it uses.
    Setup,
    /// Set up, then build mdiag (for another architecture with --target).
    Build {
        /// Build the release binary: optimised, linked against glibc 2.17's
        /// symbol versions with cargo-zigbuild (runs on RHEL 8, Amazon Linux
        /// 2 and newer), in target/<triple>/release/.
        #[arg(long)]
        release: bool,
        /// Cross-build for this architecture: x86_64 (the host), aarch64 or
        /// s390x (or their Rust triples); installs the cross C toolchain and
        /// the Rust target first. The binary lands in
        /// target/build-<arch>/<triple>/debug/ (with --release:
        /// target/<triple>/release/).
        #[arg(long, value_name = "ARCH", value_parser = arch::parse_arch)]
        target: Option<&'static arch::Arch>,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Set up, build mdiag (release by default) and run it as root with ARGS,
    /// ending with its exit status.
    Run {
        /// Build and run the debug binary instead of the release one.
        #[arg(long)]
        debug: bool,
        #[command(flatten)]
        setup: SetupArgs,
        /// Arguments for mdiag (after `--`).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<OsString>,
    },
    /// Set up, then run the test tiers in order, stopping at the first failure.
    Test {
        /// Run only this tier (repeatable); all tiers when not given.
        #[arg(long = "tier", value_name = "TIER")]
        tiers: Vec<test::Tier>,
        /// Keep every CPU busy with a spinner process while the tiers run
        /// (tests must pass on a loaded host).
        #[arg(long)]
        cpu_load: bool,
        /// Run the tiers this many times in a row, stopping at the first
        /// failure.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
        repeat: u32,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Measure what observing costs (as root): the real mongod under the
    /// shared request load unobserved / under `mdiag record` / `mdiag agent`
    /// / bpftrace's pair (mongod CPU per operation, throughput, the
    /// observers' own CPU and RSS, each BPF program's cost) and the
    /// ping-pong worst case, printed next to the budgets (`--target
    /// tcmalloc`: the allocation loop instead).
    BenchOverhead {
        #[command(flatten)]
        bench: bench::BenchArgs,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Measure what the continuous agent costs (as root): the real mongod
    /// under the shared request load unobserved / watched by `mdiag agent`
    /// (mongod CPU per operation, the agent's CPU, RSS and BPF programs) and
    /// the ping-pong worst case, printed next to the budgets (`--target
    /// tcmalloc`: the allocation loop instead).
    BenchAgent {
        #[command(flatten)]
        bench: bench::AgentBenchArgs,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// The fleet store at scale, by simulation: 1k, 3k, 10k simulated agents
    /// writing windows and findings to a SecantusDB store through the driver;
    /// prints the write rate, the store's growth per day, `mdiag fleet`'s
    /// response time per view, and what breaks first at what fleet size.
    BenchFleet {
        #[command(flatten)]
        bench: bench::FleetBenchArgs,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Build the release binary (glibc 2.17) for x86_64, aarch64 and s390x
    /// and package each as a .deb and an .rpm in target/package/ (plus
    /// target/package/<docker arch>/mdiag for the Dockerfile). Installing a
    /// package enables and starts nothing.
    Package {
        /// Only this architecture (repeatable): x86_64, aarch64, s390x.
        #[arg(long = "target", value_name = "ARCH", value_parser = arch::parse_arch)]
        targets: Vec<&'static arch::Arch>,
        /// The Debian revision and RPM release (0.1.0-REVISION): a rebuild
        /// of the same version with a higher one upgrades it.
        #[arg(long, default_value_t = 1)]
        revision: u32,
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// Boot Debian kernels (5.10, 6.1, 6.12) in QEMU (TCG, no KVM) with an
    /// mdiag binary and check which probe families load there; fails when a
    /// family that the expectation table wants on a kernel did not attach.
    VmMatrix(vm::VmArgs),
    /// Build mdiag for x86_64, aarch64 and s390x and check that the foreign
    /// builds (under qemu-user) print exactly what x86_64's does for explain,
    /// compare and export of the golden recordings and the FTDC fixtures;
    /// then run the library's unit tests for s390x (big-endian).
    CrossCheck {
        #[command(flatten)]
        setup: SetupArgs,
    },
    /// What `test` runs beside the root suite: build what the later tiers
    /// need (no set-up; see xtask/src/prebuild.rs).
    #[command(hide = true)]
    Prebuild {
        #[arg(long = "part", value_enum)]
        parts: Vec<prebuild::Part>,
    },
}

#[derive(Args)]
struct SetupArgs {
    /// Do not run setup first.
    #[arg(long)]
    skip_setup: bool,
}

impl SetupArgs {
    /// Everything (the benches run the real mongod and the workloads).
    fn setup(&self) -> anyhow::Result<()> {
        if self.skip_setup {
            Ok(())
        } else {
            setup::setup()
        }
    }

    /// What building needs only (`build`, `run`, `package`, `cross-check`).
    fn setup_build(&self) -> anyhow::Result<()> {
        if self.skip_setup {
            Ok(())
        } else {
            setup::setup_build()
        }
    }
}

fn main() -> ExitCode {
    timed::start();
    let result = match Cli::parse().command {
        Command::Setup => setup::setup(),
        Command::Build {
            release,
            target,
            setup,
        } => setup.setup_build().and_then(|()| {
            let arch = target.unwrap_or(arch::host());
            let bin = if release {
                release::build(arch)?
            } else {
                arch::build(arch, arch::DebugBuild::Plain)?
            };
            say!("built {}", bin.display());
            Ok(())
        }),
        Command::Run { debug, setup, args } => {
            setup.setup_build().and_then(|()| run::run(!debug, &args))
        }
        Command::Test {
            tiers,
            cpu_load,
            repeat,
            setup,
        } => test::test_repeated(&tiers, setup.skip_setup, cpu_load, repeat),
        Command::BenchOverhead { bench, setup } => {
            setup.setup().and_then(|()| bench::bench(&bench))
        }
        Command::BenchAgent { bench, setup } => {
            setup.setup().and_then(|()| bench::bench_agent(&bench))
        }
        Command::BenchFleet { bench, setup } => {
            setup.setup().and_then(|()| bench::bench_fleet(&bench))
        }
        Command::Package {
            targets,
            revision,
            setup,
        } => setup.setup_build().and_then(|()| {
            let arches: Vec<&'static arch::Arch> = if targets.is_empty() {
                arch::ARCHES.iter().collect()
            } else {
                targets
            };
            package::package(&arches, revision).map(drop)
        }),
        Command::VmMatrix(args) => vm::vm_matrix(&args),
        Command::CrossCheck { setup } => setup
            .setup_build()
            .and_then(|()| cross::cross(cross::UnitTests::Run)),
        Command::Prebuild { parts } => prebuild::build(&parts),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask [{}]: error: {e:#}", timed::since_start());
            ExitCode::FAILURE
        }
    }
}

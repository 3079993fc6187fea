//! `mdiag export RECORDING --pprof FILE | --folded FILE [--off-cpu]`: a
//! recording's on-CPU (or off-CPU) stacks for the profilers people already use (`go tool pprof`,
//! speedscope, Pyroscope, flamegraph.pl, inferno).
//!
//! The stacks are the recording's profile (`Recording::cpu_profile`, summed
//! by the reader from every slice); the formats are written by
//! `stacks::pprof` and `stacks::folded`. `-` writes to standard output; a
//! reader that closes the pipe early (`| head`) is not an error.

use std::io::Write;
use std::path::Path;

use crate::recording::Recording;

/// Which of a recording's profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// On-CPU samples (perf family).
    OnCpu,
    /// Off-CPU waits (contention family).
    OffCpu,
}

#[derive(Debug, thiserror::Error)]
pub enum ExportStacksError {
    #[error(
        "{path}: the recording holds no stacks ({why}); record a process with `mdiag record --pid PID` \
         (or `-- COMMAND`) with the perf family attached"
    )]
    NoStacks { path: String, why: &'static str },
    #[error("cannot create {path}: {source}")]
    Create {
        path: String,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("writing {path}: {source}")]
    Pprof {
        path: String,
        source: crate::stacks::pprof::PprofError,
    },
}

impl ExportStacksError {
    /// The reader of standard output went away.
    pub fn is_broken_pipe(&self) -> bool {
        match self {
            Self::Write { source, .. } => source.kind() == std::io::ErrorKind::BrokenPipe,
            Self::Pprof {
                source: crate::stacks::pprof::PprofError::Io(e),
                ..
            } => e.kind() == std::io::ErrorKind::BrokenPipe,
            _ => false,
        }
    }

    /// The user asked for something the recording cannot give.
    pub fn is_usage(&self) -> bool {
        matches!(self, Self::NoStacks { .. } | Self::Create { .. })
    }
}

/// Why a recording has no stacks of this kind, as far as it says.
fn why_no_stacks(recording: &Recording, which: Which) -> &'static str {
    let family = match which {
        Which::OnCpu => "perf",
        Which::OffCpu => "contention",
    };
    let probe = recording.probes.iter().find(|p| p.family == family);
    if recording.target.is_none() {
        "it was recorded host-wide, and stacks are taken for a target process only"
    } else if probe.is_none_or(|p| !p.attached()) {
        match which {
            Which::OnCpu => "the perf family was not attached: see `mdiag explain` under Probes",
            Which::OffCpu => {
                "the contention family was not attached: see `mdiag explain` under Probes"
            }
        }
    } else {
        match which {
            Which::OnCpu => {
                "no sample of the target was taken, or it was written by an mdiag without stacks"
            }
            Which::OffCpu => {
                "no thread of the target left the CPU, or it was written by an mdiag without stacks"
            }
        }
    }
}

/// Writes the requested files.
pub fn export(
    recording: &Recording,
    which: Which,
    path: &Path,
    pprof: Option<&Path>,
    folded: Option<&Path>,
) -> Result<(), ExportStacksError> {
    let profile = match which {
        Which::OnCpu => recording.cpu_profile.as_ref(),
        Which::OffCpu => recording.offcpu_profile.as_ref(),
    };
    let Some(profile) = profile else {
        return Err(ExportStacksError::NoStacks {
            path: path.display().to_string(),
            why: why_no_stacks(recording, which),
        });
    };
    if let Some(out) = pprof {
        let name = out.display().to_string();
        let mut w = open(out)?;
        crate::stacks::pprof::write_pprof(profile, &mut w).map_err(|source| {
            ExportStacksError::Pprof {
                path: name.clone(),
                source,
            }
        })?;
        w.flush()
            .map_err(|source| ExportStacksError::Write { path: name, source })?;
    }
    if let Some(out) = folded {
        let name = out.display().to_string();
        let mut w = open(out)?;
        crate::stacks::folded::write_folded(profile, &mut w)
            .and_then(|()| w.flush())
            .map_err(|source| ExportStacksError::Write { path: name, source })?;
    }
    Ok(())
}

/// A file to write, or standard output for `-`.
fn open(path: &Path) -> Result<Box<dyn Write>, ExportStacksError> {
    if path == Path::new("-") {
        return Ok(Box::new(std::io::BufWriter::new(std::io::stdout().lock())));
    }
    std::fs::File::create(path)
        .map(|f| Box::new(std::io::BufWriter::new(f)) as Box<dyn Write>)
        .map_err(|source| ExportStacksError::Create {
            path: path.display().to_string(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader gone (`| head`) is told apart from a real write error.
    #[test]
    fn a_closed_pipe_is_told_apart() {
        let pipe = || std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let full = || std::io::Error::from(std::io::ErrorKind::StorageFull);
        let write = |source| ExportStacksError::Write {
            path: "-".into(),
            source,
        };
        assert!(write(pipe()).is_broken_pipe());
        assert!(!write(full()).is_broken_pipe());
        let pprof = ExportStacksError::Pprof {
            path: "-".into(),
            source: crate::stacks::pprof::PprofError::Io(pipe()),
        };
        assert!(pprof.is_broken_pipe() && !pprof.is_usage());
    }

    #[test]
    fn a_recording_without_stacks_says_why() {
        let mut rec = crate::rules::facts::example_recording();
        rec.cpu_profile = None;
        rec.target = None;
        let e = export(&rec, Which::OnCpu, Path::new("r.mdiag"), None, None).unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().contains("host-wide"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("off.folded");
        let rec = crate::rules::facts::example_recording();
        export(&rec, Which::OffCpu, Path::new("r.mdiag"), None, Some(&out)).unwrap();
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(text.starts_with("conn;[sleeping];"), "{text}");
    }
}

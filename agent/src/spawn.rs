//! Starting the target under observation (`mdiag record -- CMD ARGS…`).
//!
//! The child is held between fork and exec until the probes are attached, so
//! its events are seen from its first instruction: after `fork` it writes its
//! pid to one pipe and blocks reading another; mdiag attaches the probes for
//! that pid and then releases it. `Command::spawn` only returns once `exec`
//! has happened, so it runs on a helper thread while the main thread attaches.
//! The child runs in its own process group so that a terminal's Ctrl-C goes to
//! mdiag alone, and mdiag stops the whole group at the end.

use std::{
    io::{Read, Write},
    os::{fd::AsRawFd, unix::process::CommandExt},
    process::{Child, Command},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use nix::{
    sys::signal::{Signal, killpg},
    unistd::Pid,
};

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("no command given after `--`")]
    Empty,
    #[error("cannot start {cmd:?}: {source}")]
    Start { cmd: String, source: std::io::Error },
    #[error("cannot set up the start gate: {0}")]
    Gate(std::io::Error),
}

/// A child stopped just before `exec`.
pub struct HeldChild {
    pid: u32,
    release: std::fs::File,
    spawner: JoinHandle<std::io::Result<Child>>,
    program: String,
}

/// A running child started by mdiag.
pub struct SpawnedChild {
    child: Child,
}

/// Forks `argv` and holds it before `exec`.
pub fn spawn_held(argv: &[String]) -> Result<HeldChild, SpawnError> {
    let (program, args) = argv.split_first().ok_or(SpawnError::Empty)?;
    let (mut pid_r, pid_w) = pipe().map_err(SpawnError::Gate)?;
    let (go_r, go_w) = pipe().map_err(SpawnError::Gate)?;
    let (pid_w_fd, go_r_fd, go_w_fd, pid_r_fd) = (
        pid_w.as_raw_fd(),
        go_r.as_raw_fd(),
        go_w.as_raw_fd(),
        pid_r.as_raw_fd(),
    );

    let mut cmd = Command::new(program);
    cmd.args(args);
    // SAFETY: the closure runs in the forked child before exec and only makes
    // async-signal-safe calls (close, setpgid, getpid, write, read).
    unsafe {
        cmd.pre_exec(move || {
            libc::close(go_w_fd);
            libc::close(pid_r_fd);
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let pid = libc::getpid().to_ne_bytes();
            if libc::write(pid_w_fd, pid.as_ptr().cast(), pid.len()) != pid.len() as isize {
                return Err(std::io::Error::last_os_error());
            }
            let mut b = [0u8; 1];
            loop {
                let n = libc::read(go_r_fd, b.as_mut_ptr().cast(), 1);
                if n == 1 {
                    return Ok(());
                }
                if n == 0 {
                    // mdiag gave up (probes failed or it died): do not run.
                    return Err(std::io::Error::other("mdiag released no start signal"));
                }
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    return Err(std::io::Error::last_os_error());
                }
            }
        });
    }
    let spawner = std::thread::spawn(move || {
        let child = cmd.spawn();
        drop((pid_w, go_r));
        child
    });
    let mut buf = [0u8; 4];
    if let Err(source) = pid_r.read_exact(&mut buf) {
        // The fork or the gate failed: the spawner has the real error.
        drop(go_w);
        let source = match spawner.join() {
            Ok(Err(e)) => e,
            _ => source,
        };
        return Err(SpawnError::Start {
            cmd: program.clone(),
            source,
        });
    }
    let pid = i32::from_ne_bytes(buf);
    Ok(HeldChild {
        pid: pid.unsigned_abs(),
        release: go_w,
        spawner,
        program: program.clone(),
    })
}

impl HeldChild {
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Lets the child exec; returns once exec succeeded or failed.
    pub fn release(mut self) -> Result<SpawnedChild, SpawnError> {
        let start = |source| SpawnError::Start {
            cmd: self.program.clone(),
            source,
        };
        self.release.write_all(&[1]).map_err(start)?;
        drop(self.release);
        match self.spawner.join() {
            Ok(Ok(child)) => Ok(SpawnedChild { child }),
            Ok(Err(source)) => Err(SpawnError::Start {
                cmd: self.program,
                source,
            }),
            Err(_) => Err(SpawnError::Start {
                cmd: self.program,
                source: std::io::Error::other("spawner thread panicked"),
            }),
        }
    }

    /// Gives up: the child exits without running the command.
    pub fn abandon(self) {
        drop(self.release);
        let _ = self.spawner.join();
    }
}

impl SpawnedChild {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The exit code if it has ended (signals as 128 + signal number).
    pub fn try_exit_code(&mut self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.try_wait().ok()??;
        Some(
            status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        )
    }

    /// Stops the child's process group: SIGTERM, then SIGKILL after `grace`.
    pub fn stop(&mut self, grace: Duration) {
        if self.try_exit_code().is_some() {
            return;
        }
        let group = Pid::from_raw(self.child.id() as i32);
        let _ = killpg(group, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.try_exit_code().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = killpg(group, Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from)?;
    Ok((std::fs::File::from(r), std::fs::File::from(w)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_child_does_not_run_until_released() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let argv = vec![
            "sh".into(),
            "-c".into(),
            format!("touch {}", marker.display()),
        ];
        let held = spawn_held(&argv).unwrap();
        assert!(held.pid() > 1);
        std::thread::sleep(Duration::from_millis(200));
        assert!(!marker.exists(), "the command ran before release");
        // Held in its own process group, before exec.
        let mut child = held.release().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let code = loop {
            if let Some(c) = child.try_exit_code() {
                break c;
            }
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(code, 0);
        assert!(marker.exists());
    }

    #[test]
    fn abandoned_child_never_runs() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let held = spawn_held(&[
            "sh".into(),
            "-c".into(),
            format!("touch {}", marker.display()),
        ])
        .unwrap();
        held.abandon();
        std::thread::sleep(Duration::from_millis(100));
        assert!(!marker.exists());
    }

    #[test]
    fn missing_program_is_a_clear_error() {
        let held = spawn_held(&["/nonexistent/prog".into()]).unwrap();
        let err = held.release().err().unwrap();
        assert!(err.to_string().contains("/nonexistent/prog"), "{err}");
        assert!(matches!(spawn_held(&[]), Err(SpawnError::Empty)));
    }

    #[test]
    fn stop_terminates_a_long_running_child() {
        let mut child = spawn_held(&["sleep".into(), "60".into()])
            .unwrap()
            .release()
            .unwrap();
        let t = Instant::now();
        child.stop(Duration::from_secs(5));
        assert!(child.try_exit_code().is_some());
        assert!(t.elapsed() < Duration::from_secs(5));
    }
}

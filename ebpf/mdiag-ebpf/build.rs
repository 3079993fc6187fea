//! Rebuild the eBPF object when the `bpf-linker` binary changes: cargo cannot
//! see this dependency otherwise.
fn main() {
    match which::which("bpf-linker") {
        Ok(path) => println!("cargo::rerun-if-changed={}", path.display()),
        Err(err) => {
            println!("cargo::warning=bpf-linker not found ({err}); run `cargo xtask setup`")
        }
    }
}

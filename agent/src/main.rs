fn main() {
    let p = mdiag::probes::Probes::attach(mdiag::probes::ProbeConfig::default());
    match p {
        Ok(mut p) => {
            println!("{:?}", p.status());
            std::thread::sleep(std::time::Duration::from_secs(1));
            let s = p.sched.as_mut().unwrap().next_slice().unwrap();
            println!(
                "total {} vol {} invol {} threads {} hist {:?} drops {:?}",
                s.switches_total,
                s.voluntary,
                s.involuntary,
                s.threads.len(),
                s.runq_hist_log2_ns,
                s.drops
            );
        }
        Err(e) => println!("ERR {e}"),
    }
}

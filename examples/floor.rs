//! The floor for `callcheck build`: the time to merely read every file of a runs/ tree once and
//! parse it (cell.json, request.json, meta.json as JSON; response.json as JSON; response.sse split
//! into events, each event's data parsed as JSON), on all cores as build does. `bench/build.sh`
//! prints build's time as a ratio of this. Usage: `floor RUNS_DIR [OUT_DIR]` (prints the wall
//! and the CPU seconds, user + system, on stdout).
//!
//! With `OUT_DIR`, the floor also writes what no build can do without: one small file per
//! sample at its permalink's place (`<model>/<task>/<run>/<NNN>.html`, about the size of a
//! permalink stub), written by one thread while the others read and parse, as build does. That
//! is the floor of a site that keeps every sample's permalink.

use callcheck::runs::scan;
use callcheck::score::wire::sse_events;
use rayon::prelude::*;
use serde_json::Value;
use std::time::Instant;

/// The allocator `callcheck` itself runs on (src/main.rs): with glibc's, the floor spent a sixth
/// of its time in malloc and free that the build does not spend, and looked slower than it is.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let Some(root) = std::env::args().nth(1) else {
        eprintln!("usage: floor RUNS_DIR");
        std::process::exit(2);
    };
    let t = Instant::now();
    let s = scan(std::path::Path::new(&root));
    let jobs: Vec<(&callcheck::runs::RunDir, &String)> = s
        .runs
        .iter()
        .flat_map(|r| r.samples.iter().map(move |n| (r, n)))
        .collect();
    let out = std::env::args().nth(2).map(std::path::PathBuf::from);
    let (tx, rx) = std::sync::mpsc::sync_channel::<(std::path::PathBuf, Vec<u8>)>(512);
    let writer = out.as_ref().map(|_| {
        std::thread::spawn(move || {
            let mut made = std::collections::HashSet::new();
            for (path, bytes) in rx {
                if let Some(d) = path.parent()
                    && made.insert(d.to_path_buf())
                {
                    std::fs::create_dir_all(d).expect("floor: cannot create a folder");
                }
                std::fs::write(&path, bytes).expect("floor: cannot write a file");
            }
        })
    });
    let parsed: usize = jobs
        .par_iter()
        .map_with(tx, |tx, (r, n)| {
            if let Some(out) = &out {
                let path = out
                    .join(&r.model)
                    .join(&r.task_id)
                    .join(&r.run_id)
                    .join(format!("{n}.html"));
                // About a permalink stub's size (the stubs of the bench's sites are 650 to 880
                // bytes: 700), different in each file.
                let mut stub = format!("<!doctype html><title>{}</title>", path.display());
                stub.extend(std::iter::repeat_n(
                    ' ',
                    700usize.saturating_sub(stub.len()),
                ));
                let _ = tx.send((path, stub.into_bytes()));
            }
            let Ok(f) = r.read_sample(n) else { return 0 };
            let mut ok = serde_json::from_slice::<Value>(&f.request).is_ok() as usize;
            ok += serde_json::from_slice::<Value>(&f.meta).is_ok() as usize;
            if f.streamed {
                let (events, _) = sse_events(&f.response);
                ok += events
                    .iter()
                    .filter(|e| serde_json::from_str::<Value>(&e.data).is_ok())
                    .count();
            } else {
                ok += serde_json::from_slice::<Value>(&f.response).is_ok() as usize;
            }
            ok
        })
        .sum();
    if let Some(w) = writer {
        w.join().expect("floor: the writer failed");
    }
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds();
    eprintln!(
        "floor: read and parsed {} samples ({} JSON documents) of {} runs in {secs:.2} s",
        jobs.len(),
        parsed,
        s.runs.len()
    );
    println!("{secs:.3} {cpu:.3}");
}

/// User + system CPU seconds this process has used so far.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return f64::NAN;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

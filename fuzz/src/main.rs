//! AFL++ driver: `rscc-fuzz TARGET` runs one of `rscc::fuzz::TARGETS` in
//! AFL's persistent mode on the inputs AFL feeds it; `rscc-fuzz TARGET
//! FILE…` runs it once on each file (to replay a finding). A single
//! allocation above 1 GiB aborts, so AFL records it as a crash.

use std::alloc::{GlobalAlloc, Layout, System};

struct Capped;

const CAP: usize = 1 << 30;

unsafe impl GlobalAlloc for Capped {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if l.size() > CAP {
            std::process::abort();
        }
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if l.size() > CAP {
            std::process::abort();
        }
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > CAP {
            std::process::abort();
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static ALLOC: Capped = Capped;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(t) = args.first().and_then(|n| rscc::fuzz::target(n)) else {
        let names: Vec<&str> = rscc::fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "usage: rscc-fuzz TARGET [FILE…]; targets: {}",
            names.join(", ")
        );
        std::process::exit(2);
    };
    if args.len() > 1 {
        for f in &args[1..] {
            let data = std::fs::read(f).unwrap_or_else(|e| {
                eprintln!("{f}: {e}");
                std::process::exit(2)
            });
            (t.run)(&data);
            println!("{f}: ok");
        }
        return;
    }
    let run = t.run;
    afl::fuzz!(|data: &[u8]| run(data));
}

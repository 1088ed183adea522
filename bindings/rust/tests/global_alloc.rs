//! tenon as the global allocator of this test binary: every Box, Vec,
//! String and HashMap below, and the test harness's own allocations, come
//! from it.
use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, GlobalAlloc, Layout};
use std::collections::HashMap;
use std::thread;

#[global_allocator]
static GLOBAL: tenon::Tenon = tenon::Tenon;

#[test]
fn collections_allocate_from_tenon() {
    let b = Box::new([7u64; 4]);
    assert!(tenon::owns(&*b as *const _), "a Box is not in tenon's memory");
    let v: Vec<u32> = (0..100_000).collect();
    assert!(tenon::owns(v.as_ptr()));
    assert_eq!(v.iter().map(|&x| x as u64).sum::<u64>(), 4_999_950_000);
    let s = "tenon ".repeat(1000);
    assert!(tenon::owns(s.as_ptr()));
    let mut m = HashMap::new();
    for i in 0..10_000 {
        m.insert(i, i.to_string());
    }
    assert_eq!(m[&1234], "1234");
    assert!(tenon::owns(m[&9999].as_ptr()));
}

/// Every power-of-two alignment from 1 to 4 MiB, for sizes around it: each
/// of several live blocks (one alone could be aligned by chance) aligned,
/// owned, writable over the whole size.
#[test]
fn alignments() {
    let sizes = [1usize, 7, 8, 15, 16, 17, 100, 4096, 40_000, 3 << 20];
    for shift in 0..=22 {
        let align = 1usize << shift;
        for &size in &sizes {
            for n in [size, align, align + 1] {
                let layout = Layout::from_size_align(n, align).unwrap();
                let live = if n < 100_000 { 16 } else { 2 };
                let blocks: Vec<*mut u8> = (0..live)
                    .map(|_| unsafe {
                        let p = alloc(layout);
                        assert!(!p.is_null(), "alloc(size {n}, align {align}) failed");
                        assert_eq!(p as usize % align, 0, "alloc(size {n}, align {align}) gave {p:p}");
                        assert!(tenon::owns(p), "alloc(size {n}, align {align}) is not tenon's");
                        assert!(tenon::usable_size(p) >= n);
                        p.write_bytes(0xA5, n);
                        p
                    })
                    .collect();
                for p in blocks {
                    unsafe { dealloc(p, layout) };
                }
            }
        }
    }
}

fn fill(p: *mut u8, n: usize, seed: u8) {
    for i in 0..n {
        unsafe { p.add(i).write(seed.wrapping_add((i % 251) as u8)) };
    }
}

fn check(p: *const u8, n: usize, seed: u8, what: &str) {
    for i in 0..n {
        let got = unsafe { p.add(i).read() };
        assert_eq!(got, seed.wrapping_add((i % 251) as u8), "{what}: byte {i} changed");
    }
}

/// realloc keeps the first min(old, new) bytes, growing and shrinking
/// across small, large and huge blocks, and keeps an alignment above 16.
#[test]
fn realloc_preserves_contents() {
    let steps = [1usize, 24, 1000, 40_000, 1 << 20, 3 << 20, 9 << 20, 100_000, 500, 8];
    for align in [1usize, 8, 16, 64, 4096, 1 << 21] {
        let mut layout = Layout::from_size_align(steps[0], align).unwrap();
        unsafe {
            let mut p = alloc(layout);
            assert!(!p.is_null());
            fill(p, layout.size(), align as u8);
            for &n in &steps[1..] {
                let q = realloc(p, layout, n);
                assert!(!q.is_null(), "realloc to {n} (align {align}) failed");
                assert_eq!(q as usize % align, 0, "realloc to {n} lost alignment {align}");
                let kept = layout.size().min(n);
                check(q, kept, align as u8, &format!("realloc {} -> {n}, align {align}", layout.size()));
                layout = Layout::from_size_align(n, align).unwrap();
                fill(q, n, align as u8);
                p = q;
            }
            dealloc(p, layout);
        }
    }
}

/// alloc_zeroed is zero even where the memory was just written and freed,
/// for malloc-aligned and over-aligned layouts, small to huge.
#[test]
fn alloc_zeroed_is_zero_after_reuse() {
    for align in [8usize, 16, 32, 256, 8192] {
        for n in [8usize, 100, 5000, 70_000, 3 << 20] {
            let layout = Layout::from_size_align(n, align).unwrap();
            unsafe {
                for _ in 0..3 {
                    let dirty = alloc(layout);
                    dirty.write_bytes(0xEE, n);
                    dealloc(dirty, layout);
                    let z = alloc_zeroed(layout);
                    assert!(!z.is_null());
                    assert_eq!(z as usize % align, 0);
                    assert!(std::slice::from_raw_parts(z, n).iter().all(|&b| b == 0),
                            "alloc_zeroed(size {n}, align {align}) is not zero");
                    dealloc(z, layout);
                }
            }
        }
    }
}

/// Blocks allocated on some threads and freed on others.
#[test]
fn cross_thread_frees() {
    let handles: Vec<_> = (0..4)
        .map(|t| thread::spawn(move || (0..2000).map(|i| vec![t as u8; 16 + (i % 300) * 8]).collect::<Vec<_>>()))
        .collect();
    let blocks: Vec<Vec<Vec<u8>>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let freers: Vec<_> = blocks
        .into_iter()
        .enumerate()
        .map(|(t, bs)| {
            thread::spawn(move || {
                for b in bs {
                    assert!(b.iter().all(|&x| x == t as u8));
                    assert!(tenon::owns(b.as_ptr()));
                }
            })
        })
        .collect();
    for f in freers {
        f.join().unwrap();
    }
}

/// Tenon used directly, not as the global allocator.
#[test]
fn direct_use() {
    let t = tenon::Tenon;
    unsafe {
        let layout = Layout::from_size_align(12, 16).unwrap(); // align > size: the aligned path
        let p = t.alloc(layout);
        assert_eq!(p as usize % 16, 0);
        t.dealloc(p, layout);
    }
}

/// The version compiled in is the project's (CMakeLists.txt).
#[test]
fn version_is_the_projects() {
    let cmake = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../CMakeLists.txt")).unwrap();
    let v = tenon::version();
    assert!(cmake.contains(&format!("project(tenon VERSION {v} ")), "tenon::version() is {v}");
}

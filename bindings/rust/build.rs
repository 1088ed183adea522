// Builds tenon's C++ core from this source tree (../../src) with the cc
// crate, the same sources and flags as CMake's libtenon.a: every .cpp under
// src/ except the ones that define the standard names (malloc, operator
// new, ...), which a Rust program gets through GlobalAlloc instead.
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest.join("../..").canonicalize().expect("the tenon source tree above bindings/rust");
    let src = root.join("src");
    let include = root.join("include");

    let mut sources = Vec::new();
    collect_cpp(&src, &mut sources);
    sources.retain(|p| !defines_standard_names(p));
    sources.sort();
    assert!(!sources.is_empty(), "no .cpp files under {}", src.display());

    let version = project_version(&root.join("CMakeLists.txt"));
    let mut build = cc::Build::new();
    build
        .cpp(true)
        // The core needs no libstdc++ (src/frontend/new_handler.cpp says why).
        .cpp_link_stdlib(None)
        .files(&sources)
        .include(&include)
        .include(&src)
        .define("TENON_VERSION_STRING", format!("\"{version}\"").as_str())
        .define("NDEBUG", None)
        .flag("-std=c++20")
        .flag("-fno-exceptions")
        .flag("-fno-rtti")
        .flag("-fasynchronous-unwind-tables")
        .flag("-fvisibility=hidden")
        .flag("-ftls-model=initial-exec")
        .flag("-fno-plt")
        // An allocator at -O0 is a different program: always optimise,
        // whatever the Cargo profile.
        .flag("-O3");
    build.compile("tenon");

    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed={}", root.join("CMakeLists.txt").display());
    for s in &sources {
        println!("cargo:rerun-if-changed={}", s.display());
    }
}

fn collect_cpp(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_cpp(&path, out);
        } else if path.extension().is_some_and(|e| e == "cpp") {
            out.push(path);
        }
    }
}

// The files that export malloc/free/new/delete (TENON_EXPORT_MALLOC):
// libtenon.so's and the static override's. Found by their names, so that a
// reorganised src/ keeps building.
fn defines_standard_names(path: &Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy();
    name.starts_with("export") || name.contains("override")
}

// project(tenon VERSION x.y.z ...) in the top-level CMakeLists.txt.
fn project_version(cmakelists: &Path) -> String {
    let text = fs::read_to_string(cmakelists).unwrap_or_else(|e| panic!("{}: {e}", cmakelists.display()));
    let start = text.find("project(tenon").expect("project(tenon ...) in CMakeLists.txt");
    let rest = &text[start..];
    let rest = &rest[..rest.find(')').unwrap()];
    let mut words = rest.split_whitespace();
    while let Some(w) = words.next() {
        if w == "VERSION" {
            return words.next().expect("a version after VERSION").to_string();
        }
    }
    panic!("no VERSION in {}", cmakelists.display());
}

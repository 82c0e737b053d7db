//! The differential test against redis-cell (tests/throttle.rs) needs a
//! redis-cell build: it is compiled as an ignored test unless CELL_MODULE
//! names one, so a run without it counts the test as skipped, not passed.
//! (`CELL_MODULE=/path/to/libredis_cell.so make test` runs it.)
fn main() {
    println!("cargo::rustc-check-cfg=cfg(cell_module)");
    println!("cargo::rerun-if-env-changed=CELL_MODULE");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CELL_MODULE").is_some_and(|path| !path.is_empty()) {
        println!("cargo::rustc-cfg=cell_module");
    }
}

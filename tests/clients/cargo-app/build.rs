// Compile the C++ shim against libtorch with the compiler on PATH (no `cc` crate) and link it,
// reading only what `doctor emit cargo` put in .cargo/config.toml's [env] — the way torch-sys
// reads LIBTORCH_INCLUDE / LIBTORCH_LIB / LIBTORCH_CXX11_ABI.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn var(name: &str) -> String {
    println!("cargo:rerun-if-env-changed={name}");
    env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run `doctor emit cargo -o .cargo/config.toml`"))
}

fn main() {
    println!("cargo:rerun-if-changed=shim.cpp");
    let include = PathBuf::from(var("LIBTORCH_INCLUDE")).join("include");
    let lib = PathBuf::from(var("LIBTORCH_LIB")).join("lib");
    println!("cargo:rerun-if-env-changed=LIBTORCH_CXX11_ABI");
    let abi = env::var("LIBTORCH_CXX11_ABI").unwrap_or_else(|_| "1".to_owned()); // torch-sys's default
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let cxx = env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
    let object = out.join("shim.o");
    let status = Command::new(&cxx)
        .args(["-std=c++20", "-fPIC", "-c", "shim.cpp", "-o"])
        .arg(&object)
        .arg(format!("-D_GLIBCXX_USE_CXX11_ABI={abi}"))
        .arg("-I")
        .arg(&include)
        .status()
        .expect("running the C++ compiler");
    assert!(status.success(), "compiling shim.cpp failed");
    let archive = out.join("libshim.a");
    let status = Command::new("ar").arg("crs").arg(&archive).arg(&object).status().expect("running ar");
    assert!(status.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=shim");
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-link-lib=dylib=stdc++");
}

//! The replicheck binary as tests run it: from the crate root, so the relative paths of
//! models and reports resolve as they do for a user in a checkout.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

pub fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

pub fn replicheck(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_replicheck"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("the replicheck binary runs")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).expect("stderr is UTF-8")
}

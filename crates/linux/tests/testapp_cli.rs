//! `ptb-testapp`'s command line: help, and bad option values refused by name.

use std::process::Command;

fn testapp(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ptb-testapp")).args(args).output().expect("ptb-testapp runs")
}

#[test]
fn help_prints_the_usage_and_runs_nothing() {
    let out = testapp(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("usage: ptb-testapp"), "{text}");
    assert!(!text.contains("TESTAPP"), "it ran the program: {text}");
}

#[test]
fn an_unreadable_or_missing_value_is_refused_naming_the_option() {
    for (args, want) in [
        (&["--threads", "x"][..], "--threads: 'x' is not a valid value"),
        (&["--mb", "4", "--seconds"][..], "--seconds needs a value"),
    ] {
        let out = testapp(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("TESTAPP"), "{args:?} ran the program");
    }
}

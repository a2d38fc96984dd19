//! What an installed `callcheck` answers before any work: `--version` (Cargo's version, which
//! the wheel's version is too) and `completions SHELL` for bash, zsh, fish, PowerShell and
//! elvish. The bash script is loaded into a real bash and asked for completions.

use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_callcheck");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("the callcheck binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn version_prints_cargos_version() {
    for flag in ["--version", "-V"] {
        let o = run(&[flag]);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            stdout(&o),
            format!("callcheck {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
}

#[test]
fn every_shell_gets_a_script_that_knows_the_subcommands_and_flags() {
    // The opening each generator writes, and a line only a script for that shell has.
    let shells = [
        ("bash", "_callcheck() {", "complete -F _callcheck"),
        ("zsh", "#compdef callcheck", "compdef _callcheck callcheck"),
        (
            "fish",
            "# Print an optspec for argparse",
            "complete -c callcheck",
        ),
        (
            "powershell",
            "\nusing namespace System.Management.Automation",
            "Register-ArgumentCompleter -Native -CommandName 'callcheck'",
        ),
        (
            "elvish",
            "\nuse builtin;",
            "set edit:completion:arg-completer[callcheck]",
        ),
    ];
    for (shell, opening, marker) in shells {
        let o = run(&["completions", shell]);
        assert_eq!(o.status.code(), Some(0), "{shell}");
        assert!(
            o.stderr.is_empty(),
            "{shell}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let script = stdout(&o);
        assert!(script.starts_with(opening), "{shell}: {}", &script[..80]);
        assert!(script.contains(marker), "{shell}");
        // Flags without their dashes: fish writes `-l no-cache`.
        for word in [
            "collect",
            "build",
            "compare",
            "completions",
            "no-cache",
            "baseline",
        ] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error_naming_the_choices() {
    let o = run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(o.stdout.is_empty());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("invalid value 'tcsh'")
            && err.contains("[possible values: bash, elvish, fish, powershell, zsh]"),
        "{err}"
    );
}

/// Loads the bash script into bash and completes `words` (the last one being typed).
fn bash_complete(words: &[&str]) -> Vec<String> {
    let script = stdout(&run(&["completions", "bash"]));
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let n = words.len();
    let program = format!(
        "{script}\nCOMP_WORDS=({}); COMP_CWORD={}; _callcheck callcheck '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        quoted.join(" "),
        n - 1,
        words[n - 1],
        words[n - 2],
    );
    let o = Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(program)
        .output()
        .expect("bash runs");
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(&o).lines().map(String::from).collect()
}

#[test]
fn bash_completes_subcommands_flags_and_shells() {
    assert_eq!(
        bash_complete(&["callcheck", "com"]),
        ["compare", "completions"]
    );
    assert_eq!(
        bash_complete(&["callcheck", "build", "--no-c"]),
        ["--no-cache"]
    );
    assert_eq!(
        bash_complete(&["callcheck", "completions", ""]),
        [
            "-h",
            "--help",
            "bash",
            "elvish",
            "fish",
            "powershell",
            "zsh"
        ]
    );
}

//! The container image (the root Dockerfile): its final stage holds the binary, the CA
//! certificates and the task corpus, no toolchain; the Kubernetes example and the publishing
//! workflow name the same image. Building it needs a Docker daemon and its base images from a
//! registry: that test is ignored by a plain `cargo test`, and with `--ignored` it says
//! "skipped: no docker" when there is no daemon to build with.

use std::path::PathBuf;
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The Dockerfile's stages: (the FROM line, the instructions after it), continuation lines
/// joined and comments dropped.
fn stages(dockerfile: &str) -> Vec<(String, Vec<String>)> {
    let joined = dockerfile.replace("\\\n", " ");
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for line in joined.lines() {
        let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = line.as_str();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with("FROM ") {
            out.push((line.to_string(), Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(line.to_string());
        }
    }
    out
}

#[test]
fn the_final_stage_holds_the_binary_the_certificates_and_the_corpus_only() {
    let stages = stages(&read("Dockerfile"));
    assert_eq!(stages.len(), 2, "{stages:?}");
    let (build_from, build) = &stages[0];
    assert!(build_from.starts_with("FROM rust:") && build_from.ends_with(" AS build"));
    assert!(
        build
            .iter()
            .any(|l| l.contains("cargo build --release --locked")),
        "{build:?}"
    );
    let (from, fin) = &stages[1];
    assert!(from.starts_with("FROM debian:"), "{from}");
    let copies: Vec<&String> = fin.iter().filter(|l| l.starts_with("COPY")).collect();
    assert_eq!(
        copies,
        [
            "COPY --from=build /usr/local/bin/callcheck /usr/local/bin/callcheck",
            "COPY tasks /callcheck/tasks"
        ]
    );
    let installs: Vec<&String> = fin
        .iter()
        .filter(|l| l.contains("apt-get install"))
        .collect();
    assert_eq!(installs.len(), 1);
    assert!(
        installs[0].contains("--no-install-recommends ca-certificates &&"),
        "{}",
        installs[0]
    );
    assert!(fin.contains(&"ENTRYPOINT [\"callcheck\"]".to_string()));
    assert!(fin.iter().any(|l| l.starts_with("USER ")), "runs as root");
    // The build context holds what the COPY lines read, and nothing else.
    let ignore = read(".dockerignore");
    let kept: Vec<&str> = ignore
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(
        kept,
        [
            "*",
            "!Cargo.toml",
            "!Cargo.lock",
            "!build.rs",
            "!src/",
            "!templates/",
            "!tasks/"
        ]
    );
}

#[test]
fn the_kubernetes_example_runs_the_published_image() {
    let job = read("examples/k8s-indexed-job.yaml");
    let workflow = read(".github/workflows/image.yml");
    assert!(workflow.contains("images: ghcr.io/${{ github.repository_owner }}/callcheck\n"));
    assert!(workflow.contains("context: .\n"));
    let images: Vec<&str> = job
        .lines()
        .filter_map(|l| l.trim().strip_prefix("image: "))
        .collect();
    // Both Jobs' callcheck containers (the init container is kubectl's).
    assert_eq!(
        images,
        [
            "ghcr.io/you/callcheck:latest",
            "bitnami/kubectl:latest",
            "ghcr.io/you/callcheck:latest"
        ]
    );
    // Nothing is compiled in a Job.
    assert!(!job.contains("cargo "), "the Job builds callcheck itself");
    // The working folder is the image's, where its corpus is.
    assert_eq!(job.matches("workingDir: /callcheck\n").count(), 2);
}

/// `docker build` of the root Dockerfile, then the image's `--version` and a `demo`.
#[test]
#[ignore = "builds the container image: needs a Docker daemon and the rust and debian base images"]
fn the_image_builds_and_runs_the_demo() {
    let daemon = Command::new("docker").arg("info").output();
    if !daemon.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: no docker (`docker info` failed: no daemon to build the image with)");
        return;
    }
    let tag = "callcheck-test:local";
    let o = Command::new("docker")
        .args(["build", "-t", tag, "."])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "docker build failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new("docker")
        .args(["run", "--rm", tag, "--version"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        format!("callcheck {}\n", env!("CARGO_PKG_VERSION"))
    );
    let o = Command::new("docker")
        .args([
            "run",
            "--rm",
            "--workdir",
            "/tmp",
            tag,
            "demo",
            "--quiet",
            "--tasks",
            "/callcheck/tasks",
            "--k",
            "3",
        ])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "demo in the image failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("The demo site is at /tmp/site/index.html")
    );
}

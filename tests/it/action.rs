//! The GitHub Action (`action.yml`, composite) read as GitHub reads it: every `with:` key the
//! example workflows pass to it is a declared input, every required input is given, every input
//! a step reads is declared. Then its shell steps run as they are, in the order and with the
//! environment GitHub gives them, against the mock server over loopback: plan, collect, build
//! and compare, with and without a baseline, failing on a regression only when asked.

use crate::support::collect::{BIN, corpus, models_config, start_mock};
use serde_norway::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn yaml(rel: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The action's inputs: name → (required, default).
fn inputs(action: &Value) -> BTreeMap<String, (bool, Option<String>)> {
    action["inputs"]
        .as_mapping()
        .expect("action.yml declares inputs")
        .iter()
        .map(|(k, v)| {
            let name = k.as_str().unwrap().to_string();
            assert!(
                v["description"].as_str().is_some_and(|d| !d.is_empty()),
                "input {name} has no description"
            );
            let required = v["required"].as_bool().unwrap_or(false);
            let default = v["default"].as_str().map(String::from);
            (name, (required, default))
        })
        .collect()
}

/// Whether a step's `uses:` is this action: the repository's root (`./`) or `…/callcheck@ref`.
fn is_callcheck(uses: &str) -> bool {
    uses == "./"
        || uses == "."
        || uses
            .split('@')
            .next()
            .is_some_and(|r| r.ends_with("/callcheck"))
}

/// Every step of every job of a workflow that uses the action: (job, its `with:` keys).
fn action_steps(workflow: &Value) -> Vec<(String, BTreeSet<String>)> {
    let mut out = Vec::new();
    for (job, body) in workflow["jobs"].as_mapping().expect("a workflow has jobs") {
        for step in body["steps"].as_sequence().into_iter().flatten() {
            if step["uses"].as_str().is_some_and(is_callcheck) {
                let with = step["with"]
                    .as_mapping()
                    .map(|m| m.keys().map(|k| k.as_str().unwrap().to_string()).collect())
                    .unwrap_or_default();
                out.push((job.as_str().unwrap().to_string(), with));
            }
        }
    }
    out
}

/// What is wrong with the calls of one workflow, by the action's inputs.
fn problems(
    inputs: &BTreeMap<String, (bool, Option<String>)>,
    calls: &[(String, BTreeSet<String>)],
) -> Vec<String> {
    let mut out = Vec::new();
    for (job, with) in calls {
        for k in with {
            if !inputs.contains_key(k) {
                out.push(format!(
                    "job {job} passes `{k}`, which action.yml does not declare"
                ));
            }
        }
        for (name, (required, default)) in inputs {
            if *required && default.is_none() && !with.contains(name) {
                out.push(format!(
                    "job {job} does not pass the required input `{name}`"
                ));
            }
        }
    }
    out
}

#[test]
fn the_examples_pass_the_action_only_inputs_it_declares() {
    let action = yaml("action.yml");
    assert_eq!(action["runs"]["using"].as_str(), Some("composite"));
    let inputs = inputs(&action);
    for name in ["config", "k", "tasks", "baseline", "fail-on-regression"] {
        assert!(inputs.contains_key(name), "no input {name}");
    }
    let mut used = 0;
    for example in [
        "examples/github-pages.yml",
        "examples/github-actions-shards.yml",
    ] {
        let calls = action_steps(&yaml(example));
        assert!(!calls.is_empty(), "{example} does not use the action");
        let p = problems(&inputs, &calls);
        assert!(p.is_empty(), "{example}: {p:?}");
        used += calls.len();
    }
    eprintln!("{used} uses of the action, {} inputs", inputs.len());

    // The check catches a misspelt key and a missing required input.
    let calls = vec![(
        "build".to_string(),
        BTreeSet::from(["fail_on_regression".to_string()]),
    )];
    assert_eq!(
        problems(&inputs, &calls),
        ["job build passes `fail_on_regression`, which action.yml does not declare"]
    );
    let mut strict = inputs.clone();
    strict.insert("config".into(), (true, None));
    assert_eq!(
        problems(&strict, &[("build".to_string(), BTreeSet::new())]),
        ["job build does not pass the required input `config`"]
    );
}

#[test]
fn every_input_the_steps_read_is_declared_and_every_declared_input_is_read() {
    let text = std::fs::read_to_string(repo().join("action.yml")).unwrap();
    let inputs = inputs(&serde_norway::from_str(&text).unwrap());
    let re = regex::Regex::new(r"inputs\.([A-Za-z0-9_-]+)").unwrap();
    let read: BTreeSet<String> = re.captures_iter(&text).map(|c| c[1].to_string()).collect();
    let declared: BTreeSet<String> = inputs.keys().cloned().collect();
    assert_eq!(read, declared);
}

/// A run of the action's steps: the outcome of each step that ran, by id, and their outputs.
struct ActionRun {
    /// (step id, exit code, stdout + stderr)
    steps: Vec<(String, i32, String)>,
    outputs: BTreeMap<String, BTreeMap<String, String>>,
}

impl ActionRun {
    fn step(&self, id: &str) -> Option<&(String, i32, String)> {
        self.steps.iter().find(|s| s.0 == id)
    }
}

/// Replaces `${{ inputs.X }}` and `${{ steps.ID.outputs.K }}`, the only expressions the
/// action's `env:` and `with:` values use.
fn expand(
    v: &str,
    with: &BTreeMap<String, String>,
    outputs: &BTreeMap<String, BTreeMap<String, String>>,
) -> String {
    let re = regex::Regex::new(r"\$\{\{\s*([^}]*?)\s*\}\}").unwrap();
    re.replace_all(v, |c: &regex::Captures| {
        let e = &c[1];
        if let Some(name) = e.strip_prefix("inputs.") {
            with.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("input {name} not set"))
        } else if let Some(rest) = e.strip_prefix("steps.") {
            let (id, key) = rest.split_once(".outputs.").unwrap();
            outputs
                .get(id)
                .and_then(|o| o.get(key))
                .cloned()
                .unwrap_or_default()
        } else {
            panic!("an expression the test does not evaluate: {e}")
        }
    })
    .into_owned()
}

/// Runs the action's bash steps in `cwd` as a runner would: `with` over the inputs' defaults,
/// `if: inputs.X == 'true'` evaluated, each step's `env:` expanded, GITHUB_OUTPUT read back.
/// The install step (a release build) is replaced by the binary under test on PATH, and `uses:`
/// steps (the Pages upload) are left to GitHub. Stops after the first failing step, as a job does.
fn run_action(cwd: &Path, with: &[(&str, &str)]) -> ActionRun {
    let action = yaml("action.yml");
    let mut inputs: BTreeMap<String, String> = self::inputs(&action)
        .into_iter()
        .map(|(k, (_, d))| (k, d.unwrap_or_default()))
        .collect();
    for (k, v) in with {
        assert!(inputs.contains_key(*k), "no input {k}");
        inputs.insert(k.to_string(), v.to_string());
    }
    let temp = cwd.join("runner-temp");
    std::fs::create_dir_all(&temp).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut run = ActionRun {
        steps: Vec::new(),
        outputs: BTreeMap::new(),
    };
    let if_re = regex::Regex::new(r"^inputs\.([A-Za-z0-9_-]+) == '([^']*)'$").unwrap();
    for step in action["runs"]["steps"].as_sequence().unwrap() {
        let id = step["id"]
            .as_str()
            .expect("every step has an id")
            .to_string();
        if let Some(cond) = step["if"].as_str() {
            let c = if_re
                .captures(cond)
                .unwrap_or_else(|| panic!("an if the test does not evaluate: {cond}"));
            if inputs[&c[1]] != c[2] {
                continue;
            }
        }
        if id == "install" || step["uses"].as_str().is_some() {
            continue;
        }
        assert_eq!(step["shell"].as_str(), Some("bash"), "step {id}");
        let script = step["run"].as_str().unwrap();
        assert!(
            !script.contains("${{"),
            "step {id} expands an expression inside its script"
        );
        let output = temp.join(format!("output-{id}"));
        std::fs::write(&output, "").unwrap();
        let mut cmd = Command::new("bash");
        cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
            .current_dir(cwd)
            .env("PATH", &path)
            .env("RUNNER_TEMP", &temp)
            .env("GITHUB_OUTPUT", &output)
            .env("GITHUB_PATH", temp.join("path"))
            .env("GITHUB_ACTION_PATH", repo());
        for (k, v) in step["env"].as_mapping().into_iter().flatten() {
            cmd.env(
                k.as_str().unwrap(),
                expand(v.as_str().unwrap(), &inputs, &run.outputs),
            );
        }
        let o = cmd.output().unwrap();
        let code = o.status.code().unwrap_or(-1);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let outs = std::fs::read_to_string(&output)
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        run.outputs.insert(id.clone(), outs);
        run.steps.push((id, code, text));
        if code != 0 {
            break;
        }
    }
    run
}

#[test]
fn the_action_collects_builds_and_compares_against_the_mock() {
    let tmp = tempfile::tempdir().unwrap();
    let mock = start_mock(tmp.path(), None, &corpus());
    let cwd = tmp.path().join("repo");
    std::fs::create_dir(&cwd).unwrap();
    let tasks = corpus();
    let tasks = tasks.to_str().unwrap();
    // One row, "m": served by the near-perfect model first, then by the sloppy one.
    let config = |model: &str| models_config(&mock.url, &[("m", model, false, 8)], "");
    std::fs::write(cwd.join("good.toml"), config("mock-good")).unwrap();
    std::fs::write(cwd.join("sloppy.toml"), config("mock-sloppy")).unwrap();

    // No baseline: collect and build, nothing compared.
    let first = run_action(
        &cwd,
        &[
            ("config", "good.toml"),
            ("tasks", tasks),
            ("runs", "runs-good"),
            ("out", "site-good"),
        ],
    );
    let ids: Vec<(&str, i32)> = first.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(
        ids,
        [
            ("plan", 0),
            ("collect", 0),
            ("baseline", 0),
            ("build", 0),
            ("compare", 0)
        ],
        "{:?}",
        first.steps
    );
    // The plan came first and said what k = 3 cannot see: one row forms no pair, so the gate
    // planned is the baseline's, and no single broken task can fail it at k = 3.
    let plan = &first.step("plan").unwrap().2;
    assert!(plan.contains("forms no pair"), "{plan}");
    assert!(
        plan.contains(
            "a single task falling from all-pass to all-fail cannot be detected at k = 3"
        ),
        "{plan}"
    );
    assert!(plan.contains("k for −20 pts"), "{plan}");
    assert!(
        first
            .step("compare")
            .unwrap()
            .2
            .contains("no baseline: nothing to compare")
    );
    assert_eq!(first.outputs["compare"].get("regression"), None);
    let baseline = cwd.join("site-good/data/samples.csv");
    let rows = std::fs::read_to_string(&baseline).unwrap().lines().count() - 1;
    let n_tasks = callcheck::task::load(&corpus()).unwrap().len();
    assert_eq!(rows, 3 * n_tasks, "k = 3 samples of every task");
    // The build kept its cache in the working folder, outside the site.
    assert!(cwd.join(".callcheck-cache/CACHEDIR.TAG").is_file());
    assert!(!cwd.join("site-good/.callcheck-cache").exists());

    // The sloppy model against the good one's published samples.csv, failing on a regression.
    let with = |fail: &'static str, runs: &'static str, out: &'static str| {
        vec![
            ("config", "sloppy.toml"),
            ("tasks", tasks),
            ("runs", runs),
            ("out", out),
            ("baseline", baseline.to_str().unwrap()),
            ("fail-on-regression", fail),
        ]
    };
    let worse = run_action(&cwd, &with("true", "runs-sloppy", "site-sloppy"));
    let ids: Vec<(&str, i32)> = worse.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(
        ids,
        [
            ("plan", 0),
            ("collect", 0),
            ("baseline", 0),
            ("build", 0),
            ("compare", 1)
        ],
        "{:?}",
        worse.steps
    );
    // With a baseline the plan is the baseline's family.
    let plan = &worse.step("plan").unwrap().2;
    assert!(
        plan.contains("what `callcheck compare --baseline PATH` decides"),
        "{plan}"
    );
    assert!(!plan.contains("forms no pair"), "{plan}");
    assert_eq!(
        worse.outputs["baseline"]["file"],
        baseline.to_str().unwrap()
    );
    assert_eq!(worse.outputs["compare"]["regression"], "true");
    assert!(
        worse
            .step("compare")
            .unwrap()
            .2
            .contains("::error::a row is significantly worse than its baseline"),
        "{}",
        worse.step("compare").unwrap().2
    );
    // The site was built with the baseline: its comparison page exists.
    assert!(
        std::fs::read_dir(cwd.join("site-sloppy/compare"))
            .unwrap()
            .count()
            > 0,
        "no compare/ pages"
    );

    // The same without failing: a warning, and the job goes on. Collect is skipped: the runs
    // are there already (a Pages job over committed runs).
    let mut warn = with("false", "runs-sloppy", "site-sloppy-2");
    warn.push(("collect", "false"));
    let warned = run_action(&cwd, &warn);
    let ids: Vec<(&str, i32)> = warned.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(
        ids,
        [("baseline", 0), ("build", 0), ("compare", 0)],
        "{:?}",
        warned.steps
    );
    assert_eq!(warned.outputs["compare"]["regression"], "true");
    assert!(
        warned
            .step("compare")
            .unwrap()
            .2
            .contains("::warning::a row is significantly worse")
    );

    // A baseline URL that cannot be fetched (the first deployment) is skipped with a notice.
    let gone = run_action(
        &cwd,
        &[
            ("config", "good.toml"),
            ("tasks", tasks),
            ("runs", "runs-good"),
            ("out", "site-good"),
            ("collect", "false"),
            ("baseline", "http://127.0.0.1:9/data/samples.csv"),
            ("fail-on-regression", "true"),
        ],
    );
    let ids: Vec<(&str, i32)> = gone.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(
        ids,
        [("baseline", 0), ("build", 0), ("compare", 0)],
        "{:?}",
        gone.steps
    );
    assert!(
        gone.step("baseline")
            .unwrap()
            .2
            .contains("::notice::no baseline at http://127.0.0.1:9/data/samples.csv")
    );

    // A baseline path that does not exist is an error at once.
    let missing = run_action(
        &cwd,
        &[
            ("collect", "false"),
            ("tasks", tasks),
            ("baseline", "nope.csv"),
        ],
    );
    let ids: Vec<(&str, i32)> = missing.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(ids, [("baseline", 1)]);
    assert!(
        missing.steps[0]
            .2
            .contains("::error::the baseline nope.csv does not exist")
    );
}

/// The keys given in `api-keys` reach collect, under the names the config's entries give, and
/// no other step: the build of callcheck and of the site never see them. A line that is not
/// NAME=value is refused without being printed. A baseline with a line break is refused before
/// it can add a line to $GITHUB_OUTPUT.
#[test]
fn api_keys_reach_the_collect_step_alone_and_a_baseline_is_one_line() {
    use crate::support::collect::{Reply, completion, gateway, row_config};
    const KEY: &str = "sk-action-4e1f";
    let tmp = tempfile::tempdir().unwrap();
    let server = gateway(|req| {
        if req.headers.get("authorization").map(String::as_str) == Some("Bearer sk-action-4e1f") {
            Reply::json(
                200,
                completion(50, Some(("get_weather", r#"{"city": "Paris"}"#))),
            )
        } else {
            Reply::json(401, r#"{"error": {"message": "no key"}}"#)
        }
    });
    let cwd = tmp.path().join("repo");
    std::fs::create_dir(&cwd).unwrap();
    row_config(&cwd, &server.url, "api_key_env = \"CALLCHECK_TEST_KEY\"\n");
    let tasks = corpus();
    let with = |keys: &'static str| {
        vec![
            ("config", "callcheck.toml"),
            ("tasks", tasks.to_str().unwrap()),
            ("only", "basic-weather-city"),
            ("upload", "false"),
            ("api-keys", keys),
        ]
    };
    // Blank lines and a CRLF (a secret pasted from Windows) are fine.
    let run = run_action(&cwd, &with("\nCALLCHECK_TEST_KEY=sk-action-4e1f\r\n"));
    let ids: Vec<(&str, i32)> = run.steps.iter().map(|s| (s.0.as_str(), s.1)).collect();
    assert_eq!(
        ids,
        [
            ("plan", 0),
            ("collect", 0),
            ("baseline", 0),
            ("build", 0),
            ("compare", 0)
        ],
        "{:?}",
        run.steps
    );
    let authorised = server
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|r| {
            r.headers
                .get("authorization")
                .is_some_and(|a| a.contains(KEY))
        })
        .count();
    assert!(authorised >= 3, "the samples were sent with the key");
    for (id, _, text) in &run.steps {
        assert!(!text.contains(KEY), "step {id} printed the key");
    }
    // Only the collect step is handed the input.
    let action = yaml("action.yml");
    for step in action["runs"]["steps"].as_sequence().unwrap() {
        let env = serde_norway::to_string(&step["env"]).unwrap();
        assert_eq!(
            env.contains("inputs.api-keys"),
            step["id"].as_str() == Some("collect"),
            "{env}"
        );
    }
    let bad = run_action(&cwd, &with("sk-action-4e1f"));
    // The plan before it reads the config and sends nothing: it needs no key.
    let (id, code, _) = &bad.steps[0];
    assert_eq!((id.as_str(), *code), ("plan", 0));
    let (id, code, text) = &bad.steps[1];
    assert_eq!((id.as_str(), *code), ("collect", 1));
    assert!(
        text.contains("::error::api-keys: every line must be NAME=value"),
        "{text}"
    );
    assert!(!text.contains(KEY), "{text}");

    let injected = run_action(
        &cwd,
        &[
            ("collect", "false"),
            ("tasks", tasks.to_str().unwrap()),
            ("baseline", "site/data/samples.csv\nregression=false"),
        ],
    );
    let (id, code, text) = &injected.steps[0];
    assert_eq!((id.as_str(), *code), ("baseline", 1));
    assert!(
        text.contains("::error::the baseline input holds a line break"),
        "{text}"
    );
    assert!(injected.outputs["baseline"].is_empty());
}
